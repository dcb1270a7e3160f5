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
#include "common/buf.h"
#include "storage/batch.h"

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

bool pulse_json_utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint32_t cp;
        if (b >= 0xC2 && b <= 0xDF) {
            need = 1;
            cp = b & 0x1Fu;
        } else if (b >= 0xE0 && b <= 0xEF) {
            need = 2;
            cp = b & 0x0Fu;
        } else if (b >= 0xF0 && b <= 0xF4) {
            need = 3;
            cp = b & 0x07u;
        } else {
            return false;
        }
        if (n - i - 1 < need)
            return false;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3Fu);
        }
        if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += need + 1;
    }
    return true;
}

pulse_status_t pulse_json_append_string(struct pulse_buf *out, const uint8_t *p, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    pulse_status_t st = pulse_buf_append_u8(out, '"');
    size_t run = 0; /* bytes copied as they are, pending */
    for (size_t i = 0; st == PULSE_OK && i < n; i++) {
        uint8_t c = p[i];
        const char *esc = NULL;
        char u[6];
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\b':
            esc = "\\b";
            break;
        case '\f':
            esc = "\\f";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        default:
            if (c >= 0x20) {
                run++;
                continue;
            }
            u[0] = '\\';
            u[1] = 'u';
            u[2] = '0';
            u[3] = '0';
            u[4] = hex[c >> 4];
            u[5] = hex[c & 15];
            break;
        }
        st = pulse_buf_append(out, p + i - run, run);
        run = 0;
        if (st == PULSE_OK)
            st = esc != NULL ? pulse_buf_append(out, esc, strlen(esc)) : pulse_buf_append(out, u, sizeof u);
    }
    if (st == PULSE_OK)
        st = pulse_buf_append(out, p + n - run, run);
    if (st == PULSE_OK)
        st = pulse_buf_append_u8(out, '"');
    return st;
}

/* "name":"text" for UTF-8, "name_base64":"..." otherwise, "name":null. */
static pulse_status_t append_bytes_member(struct pulse_buf *out, const char *name, const uint8_t *p, uint32_t len,
                                          bool null)
{
    pulse_status_t st;
    if (null)
        return pulse_buf_printf(out, ",\"%s\":null", name);
    if (pulse_json_utf8_valid(p, len)) {
        st = pulse_buf_printf(out, ",\"%s\":", name);
        return st == PULSE_OK ? pulse_json_append_string(out, p, len) : st;
    }
    size_t n = pulse_json_b64_encoded_len(len);
    st = pulse_buf_printf(out, ",\"%s_base64\":\"", name);
    if (st == PULSE_OK)
        st = pulse_buf_reserve(out, n + 2);
    if (st != PULSE_OK)
        return st;
    pulse_json_b64_encode(p, len, (char *)out->data + out->len); /* writes n chars and a NUL */
    out->len += n;
    return pulse_buf_append_u8(out, '"');
}

/* Headers go through jansson: they are rare, and its object semantics
 * (names skipped, repeats replaced in place) are the reference. */
static pulse_status_t append_headers(struct pulse_buf *out, const struct pulse_record_view *rv)
{
    json_t *headers = json_object();
    pulse_status_t st = PULSE_OK;
    char *text = NULL;
    size_t len = 0;
    size_t pos = 0;
    struct pulse_header_view hv;

    if (headers == NULL)
        return PULSE_NOMEM;
    while (pulse_record_header_next(rv, &pos, &hv) == PULSE_OK) {
        json_t *val = NULL;
        if (hv.value == NULL) {
            val = json_null();
        } else if (pulse_json_utf8_valid(hv.value, hv.value_len)) {
            val = json_stringn(hv.value_len > 0 ? (const char *)hv.value : "", hv.value_len);
        } else {
            /* Not UTF-8: the API only takes string headers, so another
             * tool wrote this record; show the bytes as base64. */
            size_t n = pulse_json_b64_encoded_len(hv.value_len);
            char *b64 = pulse_malloc(n + 1);
            if (b64 == NULL) {
                st = PULSE_NOMEM;
                goto out;
            }
            pulse_json_b64_encode(hv.value, hv.value_len, b64);
            val = json_stringn(b64, n);
            pulse_free(b64);
        }
        if (val == NULL) {
            st = PULSE_NOMEM;
            goto out;
        }
        /* A name that is empty, holds a NUL or is not UTF-8 cannot be a
         * member name: skipped (setn_new drops val then). */
        if (hv.key_len > 0 && memchr(hv.key, 0, hv.key_len) == NULL)
            (void)json_object_setn_new(headers, (const char *)hv.key, hv.key_len, val);
        else
            json_decref(val);
    }
    st = pulse_json_dump(headers, 0, &text, &len);
    if (st == PULSE_OK)
        st = pulse_buf_append(out, text, len);
out:
    pulse_free(text);
    json_decref(headers);
    return st;
}

pulse_status_t pulse_json_append_record(struct pulse_buf *out, const struct pulse_record_view *rv)
{
    pulse_status_t st = pulse_buf_printf(out, "{\"offset\":%lld,\"timestamp\":%lld", (long long)rv->offset,
                                         (long long)rv->timestamp);
    if (st == PULSE_OK)
        st = append_bytes_member(out, "key", rv->key, rv->key_len, rv->key == NULL);
    if (st == PULSE_OK)
        st = append_bytes_member(out, "value", rv->value, rv->value_len, rv->value == NULL);
    if (st == PULSE_OK)
        st = pulse_buf_append(out, ",\"headers\":", 11);
    if (st == PULSE_OK)
        st = rv->header_count == 0 ? pulse_buf_append(out, "{}", 2) : append_headers(out, rv);
    if (st == PULSE_OK)
        st = pulse_buf_append_u8(out, '}');
    return st;
}
