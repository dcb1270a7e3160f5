/* SPDX-License-Identifier: MIT */
/*
 * json.c - see json.h. Base64 is written out here rather than borrowed so
 * that decoding is strict (the API answers 400 for bad base64 instead of
 * storing garbage) and bounded by the input length.
 */
#include "http/json.h"

#include <assert.h>
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

/* Writes encoded_len(n) characters, without a NUL. */
static void b64_encode_raw(const uint8_t *in, size_t n, char *out)
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
}

void pulse_json_b64_encode(const uint8_t *in, size_t n, char *out)
{
    b64_encode_raw(in, n, out);
    out[pulse_json_b64_encoded_len(n)] = '\0';
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

size_t pulse_json_dump_size(const struct json_t *v, size_t extra_flags)
{
    return json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY | extra_flags);
}

bool pulse_json_dump_into(const struct json_t *v, size_t extra_flags, char *out, size_t n)
{
    return n > 0 && json_dumpb(v, out, n, JSON_COMPACT | JSON_ENCODE_ANY | extra_flags) == n;
}

pulse_status_t pulse_json_dump(const struct json_t *v, size_t extra_flags, char **out, size_t *out_len)
{
    size_t need = pulse_json_dump_size(v, extra_flags);
    if (need == 0)
        return PULSE_INVALID;
    char *buf = pulse_malloc(need);
    if (buf == NULL)
        return PULSE_NOMEM;
    if (!pulse_json_dump_into(v, extra_flags, buf, need)) {
        pulse_free(buf);
        return PULSE_INVALID;
    }
    *out = buf;
    *out_len = need;
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

/* ---- escaping, a unit at a time -------------------------------------- */

/* What jansson's compact dump writes for byte c: its length, and the text
 * in esc when it is not the byte itself. */
static size_t escape_of(uint8_t c, char esc[6])
{
    static const char hex[] = "0123456789ABCDEF";
    char short_form = 0;
    switch (c) {
    case '"':
        short_form = '"';
        break;
    case '\\':
        short_form = '\\';
        break;
    case '\b':
        short_form = 'b';
        break;
    case '\f':
        short_form = 'f';
        break;
    case '\n':
        short_form = 'n';
        break;
    case '\r':
        short_form = 'r';
        break;
    case '\t':
        short_form = 't';
        break;
    default:
        if (c >= 0x20)
            return 1;
        esc[0] = '\\';
        esc[1] = 'u';
        esc[2] = '0';
        esc[3] = '0';
        esc[4] = hex[c >> 4];
        esc[5] = hex[c & 15];
        return 6;
    }
    esc[0] = '\\';
    esc[1] = short_form;
    return 2;
}

static size_t escaped_len(const uint8_t *p, size_t n)
{
    size_t len = 0;
    char esc[6];
    for (size_t i = 0; i < n; i++)
        len += escape_of(p[i], esc);
    return len;
}

/* Escapes p[*at, n) into out[0, room), whole escapes only; advances *at
 * and returns the bytes written. */
static size_t write_escaped(const uint8_t *p, size_t n, size_t *at, uint8_t *out, size_t room)
{
    size_t i = *at;
    size_t o = 0;
    char esc[6];
    while (i < n && o < room) {
        size_t k = escape_of(p[i], esc);
        if (k == 1) {
            /* A run of bytes that stand for themselves, copied at once. */
            size_t run = 1;
            while (i + run < n && o + run < room && escape_of(p[i + run], esc) == 1)
                run++;
            memcpy(out + o, p + i, run);
            o += run;
            i += run;
            continue;
        }
        if (k > room - o)
            break;
        memcpy(out + o, esc, k);
        o += k;
        i++;
    }
    *at = i;
    return o;
}

/* Base64 of p[*at, n) into out[0, room), whole 4-character groups only;
 * *at moves in steps of 3 (or to n). */
static size_t write_base64(const uint8_t *p, size_t n, size_t *at, uint8_t *out, size_t room)
{
    size_t groups = room / 4;
    size_t left = n - *at;
    /* Everything when it fits (the padded last group included), else as
     * many whole groups as fit. */
    size_t take = left / 3 < groups ? left : groups * 3;
    size_t len = pulse_json_b64_encoded_len(take);
    b64_encode_raw(p + *at, take, (char *)out);
    *at += take;
    return len;
}

pulse_status_t pulse_json_append_string(struct pulse_buf *out, const uint8_t *p, size_t n)
{
    size_t len = escaped_len(p, n);
    if (len > SIZE_MAX - 2)
        return PULSE_TOO_LARGE;
    pulse_status_t st = pulse_buf_reserve(out, len + 2);
    if (st != PULSE_OK)
        return st;
    size_t at = 0;
    out->data[out->len++] = '"';
    out->len += write_escaped(p, n, &at, out->data + out->len, len);
    out->data[out->len++] = '"';
    return PULSE_OK;
}

/* ---- records ---------------------------------------------------------- */

/* Headers go through jansson: they are rare, and its object semantics
 * (names skipped, repeats replaced in place) are the reference. *out is a
 * new object (json_decref) on success. */
static pulse_status_t headers_object(const struct pulse_record_view *rv, json_t **out)
{
    json_t *headers = json_object();
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
                json_decref(headers);
                return PULSE_NOMEM;
            }
            pulse_json_b64_encode(hv.value, hv.value_len, b64);
            val = json_stringn(b64, n);
            pulse_free(b64);
        }
        if (val == NULL) {
            json_decref(headers);
            return PULSE_NOMEM;
        }
        /* A name that is empty, holds a NUL or is not UTF-8 cannot be a
         * member name: skipped (setn_new drops val then). */
        if (hv.key_len > 0 && memchr(hv.key, 0, hv.key_len) == NULL)
            (void)json_object_setn_new(headers, (const char *)hv.key, hv.key_len, val);
        else
            json_decref(val);
    }
    *out = headers;
    return PULSE_OK;
}

/*
 * A record's text is a fixed sequence of pieces; each is literal text,
 * bytes to escape as a JSON string body, or bytes to encode as base64:
 *
 *   {"offset":N,"timestamp":T  ,"key":null | ,"key":"<esc>" | ,"key_base64":"<b64>"
 *   (the same for value)  ,"headers":  {} | <jansson's text>  }
 */
enum part {
    P_OPEN,
    P_KEY_NAME,
    P_KEY_BODY,
    P_KEY_CLOSE,
    P_VALUE_NAME,
    P_VALUE_BODY,
    P_VALUE_CLOSE,
    P_HEADERS_NAME,
    P_HEADERS,
    P_CLOSE,
    P_DONE
};

enum piece_kind { K_TEXT, K_ESCAPED, K_BASE64 };

struct piece {
    enum piece_kind kind;
    const uint8_t *p;
    size_t n;
};

/* The member name piece: ,"key":null / ,"key":" / ,"key_base64":" */
static const char *member_name(bool value, bool null, bool text)
{
    if (null)
        return value ? ",\"value\":null" : ",\"key\":null";
    if (text)
        return value ? ",\"value\":\"" : ",\"key\":\"";
    return value ? ",\"value_base64\":\"" : ",\"key_base64\":\"";
}

static struct piece piece_of(const struct pulse_json_record_writer *w, unsigned part)
{
    const struct pulse_record_view *rv = &w->rv;
    bool value = part >= P_VALUE_NAME;
    bool null = value ? rv->value == NULL : rv->key == NULL;
    bool text = value ? w->value_text : w->key_text;
    const uint8_t *bytes = value ? rv->value : rv->key;
    size_t len = value ? rv->value_len : rv->key_len;
    struct piece pc = {K_TEXT, NULL, 0};
    const char *lit = NULL;

    switch ((enum part)part) {
    case P_OPEN:
        return (struct piece){K_TEXT, (const uint8_t *)w->open, w->open_len};
    case P_KEY_NAME:
    case P_VALUE_NAME:
        lit = member_name(value, null, text);
        break;
    case P_KEY_BODY:
    case P_VALUE_BODY:
        if (!null)
            pc = (struct piece){text ? K_ESCAPED : K_BASE64, bytes, len};
        return pc;
    case P_KEY_CLOSE:
    case P_VALUE_CLOSE:
        lit = null ? "" : "\"";
        break;
    case P_HEADERS_NAME:
        lit = ",\"headers\":";
        break;
    case P_HEADERS:
        if (w->headers != NULL)
            return (struct piece){K_TEXT, (const uint8_t *)w->headers, w->headers_len};
        lit = "{}";
        break;
    case P_CLOSE:
        lit = "}";
        break;
    case P_DONE:
        lit = "";
        break;
    }
    return (struct piece){K_TEXT, (const uint8_t *)lit, strlen(lit)};
}

static size_t piece_len(const struct piece *pc)
{
    if (pc->kind == K_ESCAPED)
        return escaped_len(pc->p, pc->n);
    if (pc->kind == K_BASE64)
        return pulse_json_b64_encoded_len(pc->n);
    return pc->n;
}

/* Everything but the rendered headers. */
static void writer_init(struct pulse_json_record_writer *w, const struct pulse_record_view *rv)
{
    memset(w, 0, sizeof *w);
    w->rv = *rv;
    w->key_text = rv->key != NULL && pulse_json_utf8_valid(rv->key, rv->key_len);
    w->value_text = rv->value != NULL && pulse_json_utf8_valid(rv->value, rv->value_len);
    int n = snprintf(w->open, sizeof w->open, "{\"offset\":%lld,\"timestamp\":%lld", (long long)rv->offset,
                     (long long)rv->timestamp);
    w->open_len = (size_t)n;
}

static size_t writer_total(const struct pulse_json_record_writer *w)
{
    size_t total = 0;
    for (unsigned part = P_OPEN; part < P_DONE; part++) {
        struct piece pc = piece_of(w, part);
        total += piece_len(&pc);
    }
    return total;
}

pulse_status_t pulse_json_record_size(const struct pulse_record_view *rv, size_t *len, size_t *headers_len)
{
    struct pulse_json_record_writer w;
    writer_init(&w, rv);
    size_t total = writer_total(&w); /* counts "{}" for the headers */
    size_t hlen = 0;
    if (rv->header_count > 0) {
        json_t *headers = NULL;
        pulse_status_t st = headers_object(rv, &headers);
        if (st != PULSE_OK)
            return st;
        hlen = json_dumpb(headers, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY); /* as pulse_json_dump */
        json_decref(headers);
        if (hlen == 0)
            return PULSE_INVALID;
        total = total - 2 + hlen;
    }
    *len = total;
    *headers_len = hlen;
    return PULSE_OK;
}

pulse_status_t pulse_json_record_begin(struct pulse_json_record_writer *w, const struct pulse_record_view *rv)
{
    writer_init(w, rv);
    if (rv->header_count == 0)
        return PULSE_OK;
    json_t *headers = NULL;
    pulse_status_t st = headers_object(rv, &headers);
    if (st == PULSE_OK)
        st = pulse_json_dump(headers, 0, &w->headers, &w->headers_len);
    json_decref(headers);
    return st;
}

size_t pulse_json_record_write(struct pulse_json_record_writer *w, uint8_t *out, size_t room, bool *done)
{
    size_t o = 0;
    while (w->part < P_DONE) {
        struct piece pc = piece_of(w, w->part);
        if (pc.kind == K_ESCAPED) {
            o += write_escaped(pc.p, pc.n, &w->at, out + o, room - o);
        } else if (pc.kind == K_BASE64) {
            o += write_base64(pc.p, pc.n, &w->at, out + o, room - o);
        } else {
            size_t k = pc.n - w->at < room - o ? pc.n - w->at : room - o;
            if (k > 0)
                memcpy(out + o, pc.p + w->at, k);
            w->at += k;
            o += k;
        }
        if (w->at < pc.n)
            break; /* out of room (or too little for the next unit) */
        w->part++;
        w->at = 0;
    }
    *done = w->part == P_DONE;
    return o;
}

void pulse_json_record_end(struct pulse_json_record_writer *w)
{
    pulse_free(w->headers);
    w->headers = NULL;
}

pulse_status_t pulse_json_append_record(struct pulse_buf *out, const struct pulse_record_view *rv)
{
    struct pulse_json_record_writer w;
    pulse_status_t st = pulse_json_record_begin(&w, rv);
    size_t total = st == PULSE_OK ? writer_total(&w) : 0;
    if (st == PULSE_OK)
        st = pulse_buf_reserve(out, total);
    if (st == PULSE_OK) {
        bool done = false;
        size_t n = pulse_json_record_write(&w, out->data + out->len, total, &done);
        assert(done && n == total);
        out->len += n;
    }
    pulse_json_record_end(&w);
    return st;
}
