#ifndef CSHA256_H
#define CSHA256_H

#include <stddef.h>
#include <stdint.h>

/// Whether this processor has the SHA extensions (x86-64 SHA-NI with SSSE3 and SSE4.1) that
/// `csha256_hash` needs. Checked once with CPUID; always 0 on other architectures.
int csha256_is_available(void);

/// SHA-256 of `count` bytes at `data` into `digest` (32 bytes), one call, no allocation.
/// Only when `csha256_is_available()` says so.
void csha256_hash(const void *data, size_t count, uint8_t digest[32]);

/// The SHA-256 of two messages at once, which takes little more time than one of them: the
/// rounds of one message wait on each other, and the processor runs the other's meanwhile.
/// Only when `csha256_is_available()` says so.
void csha256_hash_pair(
    const void *first, size_t first_count, const void *second, size_t second_count, uint8_t first_digest[32],
    uint8_t second_digest[32]);

#endif
