/* SPDX-License-Identifier: MIT */
/*
 * request.c - see request.h. Header values come from the network, so every
 * parser here walks its input with explicit bounds and never trusts a
 * length; the gzip path bounds the decoded size by the caller's buffer cap
 * (a small gzip bomb must not turn into gigabytes).
 */
#include "http/request.h"

#include <stdatomic.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <zlib.h>

#include "common/buf.h"
#include "common/clock.h"

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Compares the media type in [p, p+n) (blanks trimmed) to type. */
static bool media_eq(const char *p, size_t n, const char *type)
{
    while (n > 0 && is_blank(*p)) {
        p++;
        n--;
    }
    while (n > 0 && is_blank(p[n - 1]))
        n--;
    return n == strlen(type) && strncasecmp(p, type, n) == 0;
}

bool pulse_request_media_is(const char *ct, const char *type)
{
    if (ct == NULL)
        return false;
    size_t n = strcspn(ct, ";");
    return media_eq(ct, n, type);
}

/* True when the parameters of one Accept range say q=0 (or q=0.0...). */
static bool q_is_zero(const char *params, size_t n)
{
    const char *end = params + n;
    const char *p = params;
    while (p < end) {
        while (p < end && (*p == ';' || is_blank(*p)))
            p++;
        if (end - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
            p += 2;
            if (p < end && *p == '0') {
                p++;
                if (p < end && *p == '.')
                    p++;
                while (p < end && *p == '0')
                    p++;
                if (p == end || *p == ';' || is_blank(*p))
                    return true;
            }
            return false;
        }
        while (p < end && *p != ';')
            p++;
    }
    return false;
}

enum pulse_accept_pick pulse_request_accept(const char *accept, bool raw_offered)
{
    if (accept == NULL)
        return PULSE_ACCEPT_JSON;
    const char *p = accept;
    bool any_range = false;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        size_t tn = strcspn(p, ";,");
        bool blank = true;
        for (size_t i = 0; i < n; i++)
            if (!is_blank(p[i]))
                blank = false;
        if (!blank) {
            any_range = true;
            if (!q_is_zero(p + tn, n - tn)) {
                if (media_eq(p, tn, PULSE_MEDIA_JSON) || media_eq(p, tn, "application/*") || media_eq(p, tn, "*/*") ||
                    media_eq(p, tn, "*"))
                    return PULSE_ACCEPT_JSON;
                if (raw_offered && media_eq(p, tn, PULSE_MEDIA_BATCHES))
                    return PULSE_ACCEPT_RAW;
            }
        }
        p += n;
        if (*p == ',')
            p++;
    }
    /* An empty Accept header asks for nothing in particular. */
    return any_range ? PULSE_ACCEPT_NONE : PULSE_ACCEPT_JSON;
}

bool pulse_request_id_valid(const char *id)
{
    if (id == NULL)
        return false;
    size_t n = 0;
    for (; id[n] != '\0'; n++) {
        if (n >= PULSE_REQUEST_ID_MAX)
            return false;
        unsigned char c = (unsigned char)id[n];
        if (c < 0x20 || c > 0x7e)
            return false;
    }
    return n > 0;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void pulse_request_id_generate(char out[17])
{
    /* A per-process random base plus a counter: unique within the process,
     * unpredictable across restarts, and no syscall per request. */
    static atomic_uint_fast64_t counter;
    static atomic_uint_fast64_t base;
    uint64_t b = atomic_load(&base);
    if (b == 0) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
            r = (uint64_t)pulse_clock_mono_us() ^ ((uint64_t)pulse_clock_wall_ms() << 20);
        r |= 1;
        uint_fast64_t expected = 0;
        atomic_compare_exchange_strong(&base, &expected, r);
        b = atomic_load(&base);
    }
    uint64_t v = splitmix64(b + atomic_fetch_add(&counter, 1));
    static const char hex[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--) {
        out[i] = hex[v & 15];
        v >>= 4;
    }
    out[16] = '\0';
}

pulse_status_t pulse_request_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (s == NULL)
        return PULSE_INVALID;
    bool neg = false;
    const char *p = s;
    if (*p == '-') {
        neg = true;
        p++;
    }
    if (*p < '0' || *p > '9')
        return PULSE_INVALID;
    uint64_t v = 0;
    for (; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return PULSE_INVALID;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return PULSE_INVALID;
        v = v * 10 + d;
        if (v > (uint64_t)INT64_MAX + 1)
            return PULSE_INVALID;
    }
    int64_t r = 0;
    if (neg)
        r = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    else if (v > (uint64_t)INT64_MAX)
        return PULSE_INVALID;
    else
        r = (int64_t)v;
    if (r < min || r > max)
        return PULSE_INVALID;
    *out = r;
    return PULSE_OK;
}

pulse_status_t pulse_request_gunzip(const uint8_t *in, size_t len, struct pulse_buf *out, pulse_request_grow_fn grow,
                                    void *arg)
{
    pulse_status_t st = PULSE_OK;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return PULSE_NOMEM;
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = 0;
    size_t fed = 0;
    uint8_t chunk[16384];
    for (;;) {
        if (z.avail_in == 0 && fed < len) {
            size_t n = len - fed;
            if (n > (1u << 30))
                n = 1u << 30;
            z.next_in = (Bytef *)(uintptr_t)(in + fed);
            z.avail_in = (uInt)n;
            fed += n;
        }
        z.next_out = chunk;
        z.avail_out = sizeof chunk;
        int zr = inflate(&z, Z_NO_FLUSH);
        size_t produced = sizeof chunk - z.avail_out;
        if (produced > 0) {
            if (grow != NULL && produced > out->max - out->len) {
                st = grow(arg, out, produced);
                if (st != PULSE_OK)
                    goto out;
            }
            st = pulse_buf_append(out, chunk, produced);
            if (st != PULSE_OK)
                goto out;
        }
        if (zr == Z_STREAM_END)
            break;
        if (zr == Z_OK)
            continue;
        if (zr == Z_BUF_ERROR && z.avail_in == 0 && fed < len)
            continue;
        /* Z_BUF_ERROR with all input used: the stream is truncated. */
        st = zr == Z_MEM_ERROR ? PULSE_NOMEM : PULSE_INVALID;
        goto out;
    }
    /* One gzip member and nothing after it. */
    if (z.avail_in != 0 || fed != len)
        st = PULSE_INVALID;
out:
    inflateEnd(&z);
    return st;
}
