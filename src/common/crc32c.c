/* SPDX-License-Identifier: MIT */
/*
 * crc32c.c - CRC-32C with a hardware and a table path, and the algebra to
 * combine and patch CRCs without reading the data again.
 *
 * The algebra. Read the CRC register as a polynomial over GF(2) of degree
 * below 32, stored reflected (bit 31 is the coefficient of x^0, bit 0 that
 * of x^31). Feeding n bytes M to a register c leaves
 *     R(c, M) = c * x^(8n) + R(0, M)   (mod P),
 * and R(0, M) is linear in M. Two facts follow:
 *   - combine: with the public pre- and post-inversion,
 *     crc(A||B) = crc(A) * x^(8|B|) + crc(B), since the inversions of the
 *     two sides cancel;
 *   - patch: changing bytes of a message changes its CRC by R(0, D), D the
 *     XOR of old and new message, which is zero except at the change; a
 *     zero prefix leaves the register 0 and the zeros after the change
 *     multiply it by x^(8 tail).
 * Multiplying by x^(8n) is done by the bits of n: zeros[k] is the linear map
 * "times x^(8 * 2^k)" (2^k zero bytes), tabulated by nibbles (eight lookups
 * of sixteen entries, independent of each other). n of 2^32 bytes and more
 * use the bit-serial product instead of a table (never on a batch).
 *
 * The table path is slicing-by-8: eight 256-entry tables let the loop fold
 * eight input bytes per step. All tables are built once under pthread_once,
 * as is the choice of path, so the first caller pays and no caller races.
 *
 * The hardware path uses the SSE4.2 crc32 instruction 8 bytes at a time after
 * aligning the pointer, compiled with a target attribute so the rest of the
 * program needs no -msse4.2. The instruction takes three cycles before its
 * result can feed the next one but can start one every cycle, so a single
 * chain runs at a third of its throughput. _hw3 runs three chains over three
 * adjacent blocks (4 KiB, then 256 B for what is left) and joins them with
 * two multiplications by x^(8 * block), the combine above: the second and
 * third chain start from 0 and add R(0, block), the first carries the
 * running register.
 */
#include "common/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u
/* x^0, reflected. */
#define X0 0x80000000u
/* zeros[k] for k below this; larger shifts use gf_mul. */
#define ZERO_TABLES 32
/* The three-stream blocks, as powers of two of bytes (zeros[] index). */
#define LONG_LOG 12
#define SHORT_LOG 8

static uint32_t table[8][256];
/* pow8[k] = x^(8 * 2^k) mod P. */
static uint32_t pow8[64];
/* zeros[k][i][t]: (t << 4i) * x^(8 * 2^k) mod P. */
static uint32_t zeros[ZERO_TABLES][8][16];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static pthread_once_t pick_once = PTHREAD_ONCE_INIT;
static int have_hw;

/* a * b mod P, one coefficient of a at a time (b times x each step). */
static uint32_t gf_mul(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (uint32_t m = X0; m != 0; m >>= 1) {
        if (a & m)
            p ^= b;
        b = (b & 1) ? (b >> 1) ^ POLY : b >> 1;
    }
    return p;
}

static void build_zeros(void)
{
    pow8[0] = X0 >> 8; /* x^8 */
    for (int k = 1; k < 64; k++)
        pow8[k] = gf_mul(pow8[k - 1], pow8[k - 1]);
    for (int k = 0; k < ZERO_TABLES; k++) {
        for (int i = 0; i < 8; i++) {
            uint32_t *e = zeros[k][i];
            e[0] = 0;
            /* Linear: each entry is the XOR of its lowest bit's and the rest's. */
            for (uint32_t t = 1; t < 16; t++)
                e[t] = (t & (t - 1)) == 0 ? gf_mul(t << (4 * i), pow8[k]) : e[t & (t - 1)] ^ e[t & -t];
        }
    }
}

static void build_tables(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = table[0][n];
        for (int k = 1; k < 8; k++) {
            c = table[0][c & 0xff] ^ (c >> 8);
            table[k][n] = c;
        }
    }
    build_zeros();
}

/* c * x^(8 * 2^k) mod P by zeros[k]. */
static uint32_t times_zeros(const uint32_t t[8][16], uint32_t c)
{
    return t[0][c & 15] ^ t[1][(c >> 4) & 15] ^ t[2][(c >> 8) & 15] ^ t[3][(c >> 12) & 15] ^ t[4][(c >> 16) & 15] ^
           t[5][(c >> 20) & 15] ^ t[6][(c >> 24) & 15] ^ t[7][c >> 28];
}

/* The raw register c after n more zero bytes: c * x^(8n) mod P. Tables
 * built. */
static uint32_t shift_zeros(uint32_t c, size_t n)
{
    for (unsigned k = 0; n != 0 && c != 0; k++, n >>= 1) {
        if (n & 1)
            c = k < ZERO_TABLES ? times_zeros(zeros[k], c) : gf_mul(c, pow8[k]);
    }
    return c;
}

uint32_t pulse_crc32c_sw(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&table_once, build_tables);
    const uint8_t *p = data;
    crc = ~crc;
    while (len > 0 && ((uintptr_t)p & 7) != 0) {
        crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        len--;
    }
    while (len >= 8) {
        /* Assemble the words byte by byte so the fold is endian-neutral. */
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        crc = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^
              table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^ table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len > 0) {
        crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        len--;
    }
    return ~crc;
}

uint32_t pulse_crc32c_combine(uint32_t crc_a, uint32_t crc_b, size_t len_b)
{
    pthread_once(&table_once, build_tables);
    return shift_zeros(crc_a, len_b) ^ crc_b;
}

uint32_t pulse_crc32c_patch(uint32_t crc, const void *old_bytes, const void *new_bytes, size_t len, size_t tail)
{
    pthread_once(&table_once, build_tables);
    const uint8_t *o = old_bytes;
    const uint8_t *n = new_bytes;
    uint32_t d = 0; /* R(0, difference) */
    for (size_t i = 0; i < len; i++)
        d = table[0][(d ^ o[i] ^ n[i]) & 0xff] ^ (d >> 8);
    return crc ^ shift_zeros(d, tail);
}

#if defined(__x86_64__)
#include <nmmintrin.h>

/* One chain over len bytes from the raw register c. */
__attribute__((target("sse4.2"))) static uint64_t hw_chain(uint64_t c, const uint8_t *p, size_t len)
{
    while (len > 0 && ((uintptr_t)p & 7) != 0) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        len -= 8;
    }
    while (len > 0) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        len--;
    }
    return c;
}

/* Three chains over rounds of three adjacent blocks of 2^lg bytes while
 * *len allows; advances *pp and *len. */
__attribute__((target("sse4.2"))) static uint64_t hw_three(uint64_t c, const uint8_t **pp, size_t *len, unsigned lg)
{
    const size_t block = (size_t)1 << lg;
    const uint8_t *p = *pp;
    while (*len >= 3 * block) {
        uint64_t c1 = 0;
        uint64_t c2 = 0;
        for (size_t i = 0; i < block; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + block + i, 8);
            memcpy(&w2, p + 2 * block + i, 8);
            c = _mm_crc32_u64(c, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        c = times_zeros(zeros[lg], (uint32_t)c) ^ c1;
        c = times_zeros(zeros[lg], (uint32_t)c) ^ c2;
        p += 3 * block;
        *len -= 3 * block;
    }
    *pp = p;
    return c;
}

__attribute__((target("sse4.2"))) uint32_t pulse_crc32c_hw(uint32_t crc, const void *data, size_t len)
{
    return ~(uint32_t)hw_chain((uint32_t)~crc, data, len);
}

__attribute__((target("sse4.2"))) uint32_t pulse_crc32c_hw3(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t c = (uint32_t)~crc;

    if (len < 3 << SHORT_LOG)
        return ~(uint32_t)hw_chain(c, p, len);
    pthread_once(&table_once, build_tables);
    size_t head = (size_t)(-(uintptr_t)p & 7);
    c = hw_chain(c, p, head);
    p += head;
    len -= head;
    c = hw_three(c, &p, &len, LONG_LOG);
    c = hw_three(c, &p, &len, SHORT_LOG);
    return ~(uint32_t)hw_chain(c, p, len);
}

static void pick_path(void)
{
    __builtin_cpu_init();
    have_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
}
#else
uint32_t pulse_crc32c_hw(uint32_t crc, const void *data, size_t len)
{
    return pulse_crc32c_sw(crc, data, len);
}

uint32_t pulse_crc32c_hw3(uint32_t crc, const void *data, size_t len)
{
    return pulse_crc32c_sw(crc, data, len);
}

static void pick_path(void)
{
    have_hw = 0;
}
#endif

int pulse_crc32c_hw_available(void)
{
    pthread_once(&pick_once, pick_path);
    return have_hw;
}

uint32_t pulse_crc32c(uint32_t crc, const void *data, size_t len)
{
    if (pulse_crc32c_hw_available())
        return pulse_crc32c_hw3(crc, data, len);
    return pulse_crc32c_sw(crc, data, len);
}
