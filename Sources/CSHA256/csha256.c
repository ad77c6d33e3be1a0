// SHA-256 (FIPS 180-4) on the x86-64 SHA extensions, for the log's hot path: a line's hash and
// the state digests are many short messages, where a one-call hash on the stack saves what a
// hashing object costs per message. Where the extensions are missing, the caller hashes with
// swift-crypto instead.
#include "csha256.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

int csha256_is_available(void) {
    static int available = -1;
    int known = __atomic_load_n(&available, __ATOMIC_RELAXED);
    if (known >= 0) return known;
    unsigned int eax, ebx, ecx, edx;
    int result = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        int ssse3 = (ecx >> 9) & 1, sse41 = (ecx >> 19) & 1;
        if (ssse3 && sse41 && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
            result = (ebx >> 29) & 1;  // CPUID.(EAX=7,ECX=0):EBX bit 29 is SHA.
        }
    }
    __atomic_store_n(&available, result, __ATOMIC_RELAXED);
    return result;
}

// The state is kept as the instructions want it: ABEF in one register, CDGH in the other.
// Each group of four rounds adds four message words to four constants; sha256rnds2 does two
// rounds, so the upper pair is moved down for the second. From round 16 on, the message
// schedule is W[t] = σ1(W[t-2]) + W[t-7] + σ0(W[t-15]) + W[t-16], four words at a time:
// sha256msg1 gives W[t-16] + σ0(W[t-15]), alignr picks W[t-7..t-4], sha256msg2 adds σ1.
__attribute__((target("sha,ssse3,sse4.1")))
static void compress_blocks(uint32_t state[8], const uint8_t *data, size_t blocks) {
    const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)&state[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&state[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);

    while (blocks > 0) {
        const __m128i abef_before = abef, cdgh_before = cdgh;
        __m128i words[4];
#pragma unroll
        for (int group = 0; group < 16; group++) {
            __m128i w;
            if (group < 4) {
                w = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + group * 16)), byte_swap);
            } else {
                __m128i w16 = words[group & 3], w12 = words[(group + 1) & 3];
                __m128i w8 = words[(group + 2) & 3], w4 = words[(group + 3) & 3];
                w = _mm_add_epi32(_mm_sha256msg1_epu32(w16, w12), _mm_alignr_epi8(w4, w8, 4));
                w = _mm_sha256msg2_epu32(w, w4);
            }
            words[group & 3] = w;
            __m128i message = _mm_add_epi32(w, _mm_loadu_si128((const __m128i *)&round_constants[group * 4]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, message);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(message, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef_before);
        cdgh = _mm_add_epi32(cdgh, cdgh_before);
        data += 64;
        blocks--;
    }

    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(dchg, feba, 8));
}

void csha256_hash(const void *data, size_t count, uint8_t digest[32]) {
    uint32_t state[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    };
    const uint8_t *bytes = data;
    size_t whole = count / 64;
    if (whole > 0) compress_blocks(state, bytes, whole);
    // The rest, the 0x80 marker, zeros and the bit length (big-endian) fill one or two blocks.
    uint8_t tail[128];
    size_t rest = count % 64;
    memcpy(tail, bytes + whole * 64, rest);
    tail[rest] = 0x80;
    size_t tail_size = rest + 9 <= 64 ? 64 : 128;
    memset(tail + rest + 1, 0, tail_size - rest - 1 - 8);
    uint64_t bits = (uint64_t)count * 8;
    for (int index = 0; index < 8; index++) tail[tail_size - 1 - index] = (uint8_t)(bits >> (8 * index));
    compress_blocks(state, tail, tail_size / 64);
    for (int word = 0; word < 8; word++) {
        digest[word * 4] = (uint8_t)(state[word] >> 24);
        digest[word * 4 + 1] = (uint8_t)(state[word] >> 16);
        digest[word * 4 + 2] = (uint8_t)(state[word] >> 8);
        digest[word * 4 + 3] = (uint8_t)state[word];
    }
}

#else

int csha256_is_available(void) { return 0; }

// Never called: callers check `csha256_is_available()` first.
void csha256_hash(const void *data, size_t count, uint8_t digest[32]) {
    (void)data;
    (void)count;
    (void)digest;
    __builtin_trap();
}

#endif
