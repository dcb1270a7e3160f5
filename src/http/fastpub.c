/* SPDX-License-Identifier: MIT */
/*
 * fastpub.c - see fastpub.h. A cursor over the body; every helper returns
 * false as soon as the input leaves the accepted subset, and the caller
 * then falls back to jansson.
 */
#include "http/fastpub.h"

#include <stdbool.h>
#include <string.h>

#include "broker/broker.h"
#include "common/alloc.h"
#include "common/text.h"

struct cur {
    const uint8_t *p;
    const uint8_t *end;
    struct pulse_header *hdrs; /* every record's headers, in order */
    size_t nh;
    size_t hcap;
};

static void skip_ws(struct cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool take(struct cur *c, uint8_t ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

static bool take_null(struct cur *c)
{
    skip_ws(c);
    if (c->end - c->p >= 4 && memcmp(c->p, "null", 4) == 0) {
        c->p += 4;
        return true;
    }
    return false;
}

/* A string without escapes or control characters; *s and *n borrow it. */
static bool take_string(struct cur *c, const uint8_t **s, size_t *n)
{
    size_t end = 0;
    if (!take(c, '"') || !pulse_text_json_plain_body(c->p, (size_t)(c->end - c->p), &end))
        return false;
    *s = c->p;
    *n = end;
    c->p += end + 1;
    return end < UINT32_MAX;
}

/* A plain non-negative integer (no sign, fraction, exponent or leading
 * zero) not above max. */
static bool take_uint(struct cur *c, int64_t max, int64_t *out)
{
    skip_ws(c);
    const uint8_t *start = c->p;
    int64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        int d = *c->p - '0';
        if (v > (max - d) / 10)
            return false;
        v = v * 10 + d;
        c->p++;
    }
    if (c->p == start || (c->p - start > 1 && *start == '0'))
        return false;
    /* "1.5", "1e3" and the like are jansson's to judge. */
    if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E'))
        return false;
    *out = v;
    return true;
}

enum { F_KEY = 1, F_VALUE = 2, F_PARTITION = 4, F_TIMESTAMP = 8, F_HEADERS = 16 };

/* One more header slot in c->hdrs; NULL when the body has more than
 * PULSE_FASTPUB_MAX_HEADERS (then it is not ours) or on NOMEM (*nomem). */
static struct pulse_header *new_header(struct cur *c, bool *nomem)
{
    if (c->nh == PULSE_FASTPUB_MAX_HEADERS)
        return NULL;
    if (c->nh == c->hcap) {
        size_t ncap = c->hcap == 0 ? 16 : c->hcap * 2;
        if (ncap > PULSE_FASTPUB_MAX_HEADERS)
            ncap = PULSE_FASTPUB_MAX_HEADERS;
        struct pulse_header *nh = pulse_realloc(c->hdrs, ncap * sizeof *nh);
        if (nh == NULL) {
            *nomem = true;
            return NULL;
        }
        c->hdrs = nh;
        c->hcap = ncap;
    }
    return &c->hdrs[c->nh++];
}

/* "headers": null or an object of plain string values whose names do not
 * repeat (jansson refuses a repeated name: that answer is the slow path's).
 * The record's headers are the last rec->header_count of c->hdrs. */
static bool take_headers(struct cur *c, struct pulse_publish_record *rec, bool *nomem)
{
    if (take_null(c))
        return true;
    if (!take(c, '{'))
        return false;
    if (take(c, '}'))
        return true;
    size_t first = c->nh;
    do {
        const uint8_t *name, *value;
        size_t nlen, vlen;
        if (!take_string(c, &name, &nlen) || !take(c, ':') || !take_string(c, &value, &vlen))
            return false;
        for (size_t i = first; i < c->nh; i++)
            if (c->hdrs[i].key_len == nlen && memcmp(c->hdrs[i].key, name, nlen) == 0)
                return false;
        struct pulse_header *h = new_header(c, nomem);
        if (h == NULL)
            return false;
        *h = (struct pulse_header){name, nlen, value, vlen};
    } while (take(c, ','));
    rec->header_count = (uint32_t)(c->nh - first);
    return take(c, '}');
}

static bool take_record(struct cur *c, struct pulse_publish_record *rec, bool *nomem)
{
    unsigned seen = 0;
    memset(rec, 0, sizeof *rec);
    rec->partition = -1;
    if (!take(c, '{'))
        return false;
    do {
        const uint8_t *name;
        size_t nlen;
        unsigned f;
        if (!take_string(c, &name, &nlen) || !take(c, ':'))
            return false;
        if (nlen == 3 && memcmp(name, "key", 3) == 0)
            f = F_KEY;
        else if (nlen == 5 && memcmp(name, "value", 5) == 0)
            f = F_VALUE;
        else if (nlen == 9 && memcmp(name, "partition", 9) == 0)
            f = F_PARTITION;
        else if (nlen == 9 && memcmp(name, "timestamp", 9) == 0)
            f = F_TIMESTAMP;
        else if (nlen == 7 && memcmp(name, "headers", 7) == 0)
            f = F_HEADERS;
        else
            return false;
        if (seen & f)
            return false;
        seen |= f;
        if (f == F_KEY || f == F_VALUE) {
            const uint8_t *s = NULL;
            size_t n = 0;
            /* null leaves s NULL; a string points into the body, so even an
             * empty one is not NULL. */
            if (!take_null(c) && !take_string(c, &s, &n))
                return false;
            if (f == F_KEY) {
                rec->key = s;
                rec->key_len = n;
            } else {
                rec->value = s;
                rec->value_len = n;
            }
        } else if (f == F_HEADERS) {
            if (!take_headers(c, rec, nomem))
                return false;
        } else if (f == F_PARTITION) {
            int64_t v;
            if (!take_uint(c, INT32_MAX, &v))
                return false;
            rec->partition = (int32_t)v;
        } else {
            int64_t v;
            if (!take_uint(c, INT64_MAX, &v))
                return false;
            rec->has_timestamp = true;
            rec->timestamp = v;
        }
    } while (take(c, ','));
    return take(c, '}') && (seen & F_VALUE) != 0;
}

pulse_status_t pulse_fastpub_parse(const uint8_t *body, size_t len, size_t max_records,
                                   struct pulse_publish_record **recs_out, size_t *n_out,
                                   struct pulse_header **hdrs_out)
{
    struct cur c = {body, body + len, NULL, 0, 0};
    struct pulse_publish_record *recs = NULL;
    size_t n = 0, cap = 0;
    pulse_status_t st = PULSE_INVALID;
    bool nomem = false;
    const uint8_t *name;
    size_t nlen;

    if (!take(&c, '{') || !take_string(&c, &name, &nlen) || nlen != 7 || memcmp(name, "records", 7) != 0 ||
        !take(&c, ':') || !take(&c, '['))
        goto out;
    do {
        if (n == max_records)
            goto out; /* the slow path answers 413 */
        if (n == cap) {
            size_t ncap = cap == 0 ? 16 : cap * 2;
            struct pulse_publish_record *nr = pulse_realloc(recs, ncap * sizeof *nr);
            if (nr == NULL) {
                st = PULSE_NOMEM;
                goto out;
            }
            recs = nr;
            cap = ncap;
        }
        if (!take_record(&c, &recs[n], &nomem)) {
            if (nomem)
                st = PULSE_NOMEM;
            goto out;
        }
        n++;
    } while (take(&c, ','));
    if (!take(&c, ']') || !take(&c, '}'))
        goto out;
    skip_ws(&c);
    if (c.p != c.end)
        goto out;
    /* The headers array stopped moving: point each record at its own. */
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        recs[i].headers = recs[i].header_count > 0 ? &c.hdrs[at] : NULL;
        at += recs[i].header_count;
    }
    *recs_out = recs;
    *n_out = n;
    *hdrs_out = c.hdrs;
    recs = NULL;
    c.hdrs = NULL;
    st = PULSE_OK;
out:
    pulse_free(recs);
    pulse_free(c.hdrs);
    return st;
}
