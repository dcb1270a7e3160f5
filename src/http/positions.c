/* SPDX-License-Identifier: MIT */
/*
 * positions.c - see positions.h. Query strings and Last-Event-ID headers
 * come from the network: every parser walks explicit lengths.
 */
#include "http/positions.h"

#include <stdio.h>
#include <string.h>

#include "broker/broker.h"
#include "common/status.h"

/* A decimal number of s[0, len) in [0, INT64_MAX]. */
static bool parse_u63(const char *s, size_t len, int64_t *out)
{
    int64_t v = 0;
    if (len == 0 || len > 19)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        int d = s[i] - '0';
        if (v > (INT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

pulse_status_t pulse_pos_parse(const char *s, size_t len, struct pulse_pos *out)
{
    if (len == 8 && memcmp(s, "earliest", 8) == 0) {
        *out = (struct pulse_pos){PULSE_POS_EARLIEST, 0};
        return PULSE_OK;
    }
    if (len == 6 && memcmp(s, "latest", 6) == 0) {
        *out = (struct pulse_pos){PULSE_POS_LATEST, 0};
        return PULSE_OK;
    }
    int64_t v = 0;
    if (len > 2 && memcmp(s + len - 2, "ms", 2) == 0 && parse_u63(s, len - 2, &v)) {
        *out = (struct pulse_pos){PULSE_POS_TIME, v};
        return PULSE_OK;
    }
    if (parse_u63(s, len, &v)) {
        *out = (struct pulse_pos){PULSE_POS_OFFSET, v};
        return PULSE_OK;
    }
    return PULSE_INVALID;
}

/* One "P:POS" entry of s[0, len). */
static pulse_status_t parse_entry(const char *s, size_t len, uint32_t nparts, struct pulse_pos_entry *e, char *errbuf,
                                  size_t errlen)
{
    const char *colon = memchr(s, ':', len);
    int64_t p = 0;
    if (colon == NULL || !parse_u63(s, (size_t)(colon - s), &p) ||
        pulse_pos_parse(colon + 1, len - (size_t)(colon + 1 - s), &e->pos) != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen,
                         "position \"%.*s\" is not PARTITION:POSITION (POSITION: an offset, earliest, latest or "
                         "<ms>ms)",
                         (int)(len > 64 ? 64 : len), s);
        return PULSE_INVALID;
    }
    if (p >= (int64_t)nparts) {
        pulse_errbuf_set(errbuf, errlen, "position \"%.*s\": the topic has no partition %lld (it has %u)",
                         (int)(len > 64 ? 64 : len), s, (long long)p, nparts);
        return PULSE_PARTITION_NOT_FOUND;
    }
    e->partition = (uint32_t)p;
    return PULSE_OK;
}

pulse_status_t pulse_pos_list_parse(const char *s, uint32_t nparts, struct pulse_pos_entry *out, size_t cap,
                                    size_t *n_out, char *errbuf, size_t errlen)
{
    size_t n = 0, len = strlen(s);
    if (len == 0) {
        pulse_errbuf_set(errbuf, errlen, "the list of positions is empty");
        return PULSE_INVALID;
    }
    for (size_t at = 0; at <= len;) {
        const char *comma = memchr(s + at, ',', len - at);
        size_t elen = comma != NULL ? (size_t)(comma - (s + at)) : len - at;
        struct pulse_pos_entry e;
        if (n == cap) {
            pulse_errbuf_set(errbuf, errlen, "more than %zu positions", cap);
            return PULSE_INVALID;
        }
        pulse_status_t st = parse_entry(s + at, elen, nparts, &e, errbuf, errlen);
        if (st != PULSE_OK)
            return st;
        /* Insertion keeps the list sorted; a repeat is refused. */
        size_t i = n;
        while (i > 0 && out[i - 1].partition > e.partition) {
            out[i] = out[i - 1];
            i--;
        }
        if (i > 0 && out[i - 1].partition == e.partition) {
            pulse_errbuf_set(errbuf, errlen, "partition %u is named twice in the positions", e.partition);
            return PULSE_INVALID;
        }
        out[i] = e;
        n++;
        at += elen + 1;
    }
    *n_out = n;
    return PULSE_OK;
}

pulse_status_t pulse_pos_resolve(struct pulse_broker *b, const char *topic, uint32_t p, const struct pulse_pos *pos,
                                 int64_t *offset_out)
{
    struct pulse_fetch_pos at;
    pulse_status_t st;

    switch (pos->kind) {
    case PULSE_POS_OFFSET:
        *offset_out = pos->value;
        return PULSE_OK;
    case PULSE_POS_TIME:
        return pulse_broker_offset_for_time(b, topic, p, pos->value, offset_out);
    case PULSE_POS_EARLIEST:
    case PULSE_POS_LATEST:
        break;
    }
    memset(&at, 0, sizeof at);
    st = pulse_broker_fetch_probe(b, topic, p, 0, &at);
    if (st != PULSE_OK)
        return st;
    *offset_out = pos->kind == PULSE_POS_EARLIEST ? at.log_start : at.high_watermark;
    return PULSE_OK;
}

size_t pulse_pos_list_format(const uint32_t *parts, const int64_t *offsets, size_t n, char *out, size_t cap)
{
    size_t used = 0;
    if (cap == 0)
        return 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && used < cap; i++) {
        char one[32];
        int w = snprintf(one, sizeof one, "%s%u:%lld", i == 0 ? "" : ",", parts[i], (long long)offsets[i]);
        if (w < 0 || (size_t)w >= cap - used)
            break; /* whole entries only */
        memcpy(out + used, one, (size_t)w + 1);
        used += (size_t)w;
    }
    return used;
}
