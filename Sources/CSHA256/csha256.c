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
typedef struct {
    __m128i abef, cdgh;
} lanes;

#define CSHA256_TARGET __attribute__((target("sha,ssse3,sse4.1"), always_inline)) static inline

CSHA256_TARGET __m128i byte_swap_mask(void) { return _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL); }

CSHA256_TARGET lanes initial_lanes(void) {
    static const uint32_t initial[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    };
    __m128i dcba = _mm_loadu_si128((const __m128i *)&initial[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&initial[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    lanes state = {_mm_alignr_epi8(cdab, efgh, 8), _mm_blend_epi16(efgh, cdab, 0xF0)};
    return state;
}

CSHA256_TARGET __m128i schedule(const __m128i words[4], int group) {
    __m128i w16 = words[group & 3], w12 = words[(group + 1) & 3];
    __m128i w8 = words[(group + 2) & 3], w4 = words[(group + 3) & 3];
    return _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(w16, w12), _mm_alignr_epi8(w4, w8, 4)), w4);
}

CSHA256_TARGET void four_rounds(lanes *state, __m128i w, int group) {
    __m128i message = _mm_add_epi32(w, _mm_loadu_si128((const __m128i *)&round_constants[group * 4]));
    state->cdgh = _mm_sha256rnds2_epu32(state->cdgh, state->abef, message);
    state->abef = _mm_sha256rnds2_epu32(state->abef, state->cdgh, _mm_shuffle_epi32(message, 0x0E));
}

__attribute__((target("sha,ssse3,sse4.1"))) static void compress_block(lanes *state, const uint8_t *block) {
    const __m128i mask = byte_swap_mask();
    const lanes before = *state;
    __m128i words[4];
#pragma unroll
    for (int group = 0; group < 16; group++) {
        __m128i w = group < 4 ? _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(block + group * 16)), mask)
                              : schedule(words, group);
        words[group & 3] = w;
        four_rounds(state, w, group);
    }
    state->abef = _mm_add_epi32(state->abef, before.abef);
    state->cdgh = _mm_add_epi32(state->cdgh, before.cdgh);
}

// Two messages' blocks at once: the rounds of one message wait on each other (about 100
// cycles a block), so the processor runs the other's in between.
__attribute__((target("sha,ssse3,sse4.1"))) static void compress_block_pair(
    lanes *first, const uint8_t *first_block, lanes *second, const uint8_t *second_block) {
    const __m128i mask = byte_swap_mask();
    const lanes first_before = *first, second_before = *second;
    __m128i first_words[4], second_words[4];
#pragma unroll
    for (int group = 0; group < 16; group++) {
        __m128i w1, w2;
        if (group < 4) {
            w1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(first_block + group * 16)), mask);
            w2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(second_block + group * 16)), mask);
        } else {
            w1 = schedule(first_words, group);
            w2 = schedule(second_words, group);
        }
        first_words[group & 3] = w1;
        second_words[group & 3] = w2;
        four_rounds(first, w1, group);
        four_rounds(second, w2, group);
    }
    first->abef = _mm_add_epi32(first->abef, first_before.abef);
    first->cdgh = _mm_add_epi32(first->cdgh, first_before.cdgh);
    second->abef = _mm_add_epi32(second->abef, second_before.abef);
    second->cdgh = _mm_add_epi32(second->cdgh, second_before.cdgh);
}

/// One message as blocks: its whole blocks where they are, then the rest, the 0x80 marker,
/// zeros and the bit length (big-endian) in one or two blocks of `tail`.
typedef struct {
    const uint8_t *data;
    size_t whole_blocks, block_count;
    uint8_t tail[128];
} message;

static void message_init(message *m, const void *data, size_t count) {
    m->data = data;
    m->whole_blocks = count / 64;
    size_t rest = count % 64;
    // (An empty message may come as a null pointer: nothing to copy, and no arithmetic on it.)
    if (rest > 0) memcpy(m->tail, m->data + m->whole_blocks * 64, rest);
    m->tail[rest] = 0x80;
    size_t tail_size = rest + 9 <= 64 ? 64 : 128;
    memset(m->tail + rest + 1, 0, tail_size - rest - 1 - 8);
    uint64_t bits = (uint64_t)count * 8;
    for (int index = 0; index < 8; index++) m->tail[tail_size - 1 - index] = (uint8_t)(bits >> (8 * index));
    m->block_count = m->whole_blocks + tail_size / 64;
}

static const uint8_t *message_block(const message *m, size_t index) {
    return index < m->whole_blocks ? m->data + index * 64 : m->tail + (index - m->whole_blocks) * 64;
}

__attribute__((target("sha,ssse3,sse4.1"))) static void store_digest(lanes state, uint8_t digest[32]) {
    __m128i feba = _mm_shuffle_epi32(state.abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(state.cdgh, 0xB1);
    uint32_t words[8];
    _mm_storeu_si128((__m128i *)&words[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&words[4], _mm_alignr_epi8(dchg, feba, 8));
    for (int word = 0; word < 8; word++) {
        digest[word * 4] = (uint8_t)(words[word] >> 24);
        digest[word * 4 + 1] = (uint8_t)(words[word] >> 16);
        digest[word * 4 + 2] = (uint8_t)(words[word] >> 8);
        digest[word * 4 + 3] = (uint8_t)words[word];
    }
}

__attribute__((target("sha,ssse3,sse4.1"))) void csha256_hash(const void *data, size_t count, uint8_t digest[32]) {
    message m;
    message_init(&m, data, count);
    lanes state = initial_lanes();
    for (size_t index = 0; index < m.block_count; index++) compress_block(&state, message_block(&m, index));
    store_digest(state, digest);
}

__attribute__((target("sha,ssse3,sse4.1"))) void csha256_hash_pair(
    const void *first, size_t first_count, const void *second, size_t second_count, uint8_t first_digest[32],
    uint8_t second_digest[32]) {
    message a, b;
    message_init(&a, first, first_count);
    message_init(&b, second, second_count);
    lanes state_a = initial_lanes(), state_b = initial_lanes();
    size_t shared = a.block_count < b.block_count ? a.block_count : b.block_count;
    for (size_t index = 0; index < shared; index++) {
        compress_block_pair(&state_a, message_block(&a, index), &state_b, message_block(&b, index));
    }
    for (size_t index = shared; index < a.block_count; index++) compress_block(&state_a, message_block(&a, index));
    for (size_t index = shared; index < b.block_count; index++) compress_block(&state_b, message_block(&b, index));
    store_digest(state_a, first_digest);
    store_digest(state_b, second_digest);
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

void csha256_hash_pair(
    const void *first, size_t first_count, const void *second, size_t second_count, uint8_t first_digest[32],
    uint8_t second_digest[32]) {
    (void)first;
    (void)first_count;
    (void)second;
    (void)second_count;
    (void)first_digest;
    (void)second_digest;
    __builtin_trap();
}

#endif
