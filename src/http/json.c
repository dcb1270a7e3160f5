/* SPDX-License-Identifier: MIT */
/*
 * json.c - see json.h. Base64 is written out here rather than borrowed so
 * that decoding is strict (the API answers 400 for bad base64 instead of
 * storing garbage) and bounded by the input length.
 */
#include "http/json.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t pulse_json_b64_encoded_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

void pulse_json_b64_encode(const uint8_t *in, size_t n, char *out)
{
    size_t i = 0;
    size_t o = 0;
    while (i + 3 <= n) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = b64_alphabet[v >> 18 & 63];
        out[o++] = b64_alphabet[v >> 12 & 63];
        out[o++] = b64_alphabet[v >> 6 & 63];
        out[o++] = b64_alphabet[v & 63];
        i += 3;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = b64_alphabet[v >> 18 & 63];
        out[o++] = b64_alphabet[v >> 12 & 63];
        out[o++] = '=';
        out[o++] = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[o++] = b64_alphabet[v >> 18 & 63];
        out[o++] = b64_alphabet[v >> 12 & 63];
        out[o++] = b64_alphabet[v >> 6 & 63];
        out[o++] = '=';
    }
    out[o] = '\0';
}

static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

pulse_status_t pulse_json_b64_decode(const char *in, size_t len, uint8_t **out, size_t *out_len)
{
    pulse_status_t st = PULSE_OK;
    uint8_t *buf = NULL;
    size_t data_len = len;

    /* Canonical RFC 4648 only: the length is a multiple of 4 and up to two
     * '=' pad the end, so one text has one meaning. */
    if (len % 4 != 0) {
        st = PULSE_INVALID;
        goto out;
    }
    if (len > 0 && in[len - 1] == '=') {
        data_len--;
        if (in[len - 2] == '=')
            data_len--;
    }
    if (data_len % 4 == 1) {
        st = PULSE_INVALID;
        goto out;
    }
    buf = pulse_malloc(data_len / 4 * 3 + 3);
    if (buf == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    size_t o = 0;
    uint32_t acc = 0;
    unsigned bits = 0;
    for (size_t i = 0; i < data_len; i++) {
        int v = b64_value(in[i]);
        if (v < 0) {
            st = PULSE_INVALID;
            goto out;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    /* Leftover bits must be zero (canonical encoding). */
    if (acc != 0) {
        st = PULSE_INVALID;
        goto out;
    }
    *out = buf;
    *out_len = o;
    buf = NULL;
out:
    pulse_free(buf);
    return st;
}

void pulse_json_rfc3339_ms(int64_t ms, char out[32])
{
    int64_t secs = ms / 1000;
    int64_t frac = ms % 1000;
    if (frac < 0) {
        frac += 1000;
        secs -= 1;
    }
    time_t t = (time_t)secs;
    struct tm tm;
    char when[24] = "1970-01-01T00:00:00";
    if (gmtime_r(&t, &tm) != NULL)
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, 32, "%s.%03dZ", when, (int)frac);
}

struct json_t *pulse_json_error(const char *code, const char *message)
{
    return json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", message);
}

pulse_status_t pulse_json_dump(const struct json_t *v, size_t extra_flags, char **out, size_t *out_len)
{
    size_t flags = JSON_COMPACT | JSON_ENCODE_ANY | extra_flags;
    size_t need = json_dumpb(v, NULL, 0, flags);
    if (need == 0)
        return PULSE_INVALID;
    char *buf = pulse_malloc(need);
    if (buf == NULL)
        return PULSE_NOMEM;
    size_t got = json_dumpb(v, buf, need, flags);
    if (got != need) {
        pulse_free(buf);
        return PULSE_INVALID;
    }
    *out = buf;
    *out_len = got;
    return PULSE_OK;
}
