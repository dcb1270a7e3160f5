/* SPDX-License-Identifier: MIT */
/*
 * skips.h - offsets an answer stepped over because the stored data there is
 * damaged or missing (docs/API.md "Damaged data"), gathered from the
 * broker's reads (pulse_fetch_pos.skip_*) and written as the answers'
 * "skipped" lists, the Pulse-Skipped header and the event streams'
 * "skipped" events. The one writer of those texts.
 *
 * The broker reports at most one range per read, before the read's first
 * record, and a read never steps over damage after it; so every damaged
 * range between records costs an answer one more read. A list holds at
 * most PULSE_SKIPS_MAX separate ranges: a caller that reads on checks
 * pulse_skips_fit first and ends its answer in front of a read that would
 * add one more, so that the next answer reports it. Nothing is ever stepped
 * over unreported.
 *
 * A list is a plain value owned by its caller (no allocation, no lock).
 */
#ifndef PULSE_HTTP_SKIPS_H
#define PULSE_HTTP_SKIPS_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/broker.h"

#define PULSE_SKIPS_MAX 8
/* Room for the text of a full list (pulse_skips_json): 8 ranges take at
 * most 640 bytes. */
#define PULSE_SKIPS_JSON_MAX 768

struct pulse_skips {
    size_t n;
    struct {
        int64_t from, to; /* [from, to) */
        bool damaged;     /* reason "corrupt" (else "missing") */
    } r[PULSE_SKIPS_MAX];
};

/* Whether s's skipped range, if any, still fits in k (a new range needs a
 * free slot; one that continues the last range merges into it). */
bool pulse_skips_fit(const struct pulse_skips *k, const struct pulse_fetch_pos *s);

/* Adds s's skipped range, if any (merged into the last when it continues
 * it). Callers check pulse_skips_fit first; a range that does not fit is
 * dropped. */
void pulse_skips_add(struct pulse_skips *k, const struct pulse_fetch_pos *s);

/* Keeps what lies below next (what the answer really stepped over). */
void pulse_skips_clip(struct pulse_skips *k, int64_t next);

/* ,"skipped":[{"from":F,"to":T,"reason":"corrupt"|"missing"},...] into v
 * (cap >= PULSE_SKIPS_JSON_MAX), or "" when k is empty. */
void pulse_skips_json(const struct pulse_skips *k, char *v, size_t cap);

/* The reason of range i: "corrupt" or "missing". */
const char *pulse_skips_reason(const struct pulse_skips *k, size_t i);

/* Adds Pulse-Skipped: F-T;reason=R, ... to resp when k is not empty. */
void pulse_skips_header(struct MHD_Response *resp, const struct pulse_skips *k);

#endif
