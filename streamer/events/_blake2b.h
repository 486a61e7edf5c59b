/* BLAKE2b (RFC 7693) with a 16-byte digest, no key, salt or personalisation: the stable event id's hash
 * (canonical.py: hashlib.blake2b(data, digest_size=16).hexdigest()), computed here over the codec's own
 * buffer so that an id costs no bytes object, hash object or method call. Written from RFC 7693;
 * tests/events/test_ids.py checks it against hashlib on every length around the 128-byte blocks and on
 * random data.
 */
#ifndef STREAMER_BLAKE2B_H
#define STREAMER_BLAKE2B_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static const uint64_t blake2b_iv[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const uint8_t blake2b_sigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static inline uint64_t blake2b_rotr(uint64_t x, int n) {
    return (x >> n) | (x << (64 - n));
}

static inline uint64_t blake2b_load(const unsigned char *p) { /* little-endian, whatever the machine */
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

#define BLAKE2B_G(a, b, c, d, x, y)                   \
    do {                                              \
        a = a + b + (x); d = blake2b_rotr(d ^ a, 32); \
        c = c + d; b = blake2b_rotr(b ^ c, 24);       \
        a = a + b + (y); d = blake2b_rotr(d ^ a, 16); \
        c = c + d; b = blake2b_rotr(b ^ c, 63);       \
    } while (0)

/* F: one 128-byte block into h; `counter` bytes hashed so far (this block included), `last` for the final one */
static void blake2b_compress(uint64_t h[8], const unsigned char block[128], uint64_t counter, int last) {
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++) m[i] = blake2b_load(block + 8 * i);
    for (int i = 0; i < 8; i++) { v[i] = h[i]; v[i + 8] = blake2b_iv[i]; }
    v[12] ^= counter; /* the counter's high word stays 0: no id's form is 2**64 bytes long */
    if (last) v[14] = ~v[14];
    for (int r = 0; r < 12; r++) {
        const uint8_t *s = blake2b_sigma[r];
        BLAKE2B_G(v[0], v[4], v[8], v[12], m[s[0]], m[s[1]]);
        BLAKE2B_G(v[1], v[5], v[9], v[13], m[s[2]], m[s[3]]);
        BLAKE2B_G(v[2], v[6], v[10], v[14], m[s[4]], m[s[5]]);
        BLAKE2B_G(v[3], v[7], v[11], v[15], m[s[6]], m[s[7]]);
        BLAKE2B_G(v[0], v[5], v[10], v[15], m[s[8]], m[s[9]]);
        BLAKE2B_G(v[1], v[6], v[11], v[12], m[s[10]], m[s[11]]);
        BLAKE2B_G(v[2], v[7], v[8], v[13], m[s[12]], m[s[13]]);
        BLAKE2B_G(v[3], v[4], v[9], v[14], m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
}

/* the 32 lower-case hex digits of BLAKE2b-128(data) into `out` (not NUL-terminated) */
static void blake2b16_hex(const unsigned char *data, size_t size, char out[32]) {
    uint64_t h[8];
    memcpy(h, blake2b_iv, sizeof(h));
    h[0] ^= 0x01010000ULL ^ 16; /* depth 1, fanout 1, no key, 16-byte digest */
    size_t done = 0;
    while (size - done > 128) { /* every block but the last (which may be full) */
        done += 128;
        blake2b_compress(h, data + done - 128, (uint64_t)done, 0);
    }
    unsigned char last[128] = {0};
    memcpy(last, data + done, size - done);
    blake2b_compress(h, last, (uint64_t)size, 1);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        unsigned char byte = (unsigned char)(h[i / 8] >> (8 * (i % 8)));
        out[2 * i] = hex[byte >> 4];
        out[2 * i + 1] = hex[byte & 15];
    }
}

#endif
