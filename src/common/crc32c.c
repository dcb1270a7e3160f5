/* SPDX-License-Identifier: MIT */
/*
 * crc32c.c - CRC-32C with a hardware and a table path.
 *
 * The table path is slicing-by-8: eight 256-entry tables let the loop fold
 * eight input bytes per step. Tables are built once under pthread_once, as is
 * the choice of path, so the first caller pays and no caller races.
 * The hardware path uses the SSE4.2 crc32 instruction 8 bytes at a time after
 * aligning the pointer, compiled with a target attribute so the rest of the
 * program needs no -msse4.2.
 */
#include "common/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static pthread_once_t pick_once = PTHREAD_ONCE_INIT;
static int have_hw;

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

#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) uint32_t pulse_crc32c_hw(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t c = ~crc;
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
    return ~(uint32_t)c;
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
        return pulse_crc32c_hw(crc, data, len);
    return pulse_crc32c_sw(crc, data, len);
}
