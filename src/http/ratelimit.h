/* SPDX-License-Identifier: MIT */
/*
 * ratelimit.h - token buckets per client for [limits]: requests per second
 * and bytes per second, each bucket holding up to `limits.burst` worth of
 * its rate.
 *
 * A client is a 32-byte key the caller makes (server_limits.c: a SHA-256
 * of the bearer credential or of the client address). Each key has two
 * buckets:
 *   requests  holds rate x burst tokens (at least 1); a request takes one
 *             and is refused when less than one is left.
 *   bytes     holds rate x burst tokens (at least 1). A request is
 *             admitted when the bucket holds the bytes its head declares
 *             (Content-Length; capped at the bucket's size, so a body
 *             larger than the burst passes once the bucket is full) and
 *             is not in debt. Bytes learned later (a chunked body, the
 *             records a fetch serves) are taken when known and may put
 *             the bucket into debt: the client's next requests wait until
 *             it has paid it back.
 * A refusal takes nothing and says how long until the request would pass.
 *
 * Memory is bounded: at most max_buckets keys are remembered. A new key
 * past that replaces the least recently seen one, whose state is lost (a
 * bucket left alone for `burst` is full again, so an idle one loses
 * nothing; only a client in debt that was not seen while max_buckets
 * others were could start afresh).
 *
 * Thread: any. Locks: one internal mutex per table, held for a lookup.
 */
#ifndef PULSE_HTTP_RATELIMIT_H
#define PULSE_HTTP_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_settings_table;

struct pulse_limits_settings {
    int64_t requests_per_second; /* 0 = no request limit */
    uint64_t bytes_per_second;   /* 0 = no byte limit */
    int64_t burst_ms;            /* bucket size, as time at the rate */
    int64_t max_buckets;         /* clients remembered at once */
};

/* The table of the [limits] keys (static storage). */
const struct pulse_settings_table *pulse_limits_settings(void);

#define PULSE_RATELIMIT_KEY_LEN 32

struct pulse_ratelimit;

/* A table for s (copied). PULSE_NOMEM. Both rates 0: pulse_ratelimit_admit
 * admits everything and remembers nothing (pulse_ratelimit_admit_rates
 * may still limit). */
pulse_status_t pulse_ratelimit_create(const struct pulse_limits_settings *s, struct pulse_ratelimit **out);
void pulse_ratelimit_destroy(struct pulse_ratelimit *rl);

/* Whether any default limit is on (a rate of s above 0). */
bool pulse_ratelimit_enabled(const struct pulse_ratelimit *rl);

/*
 * Admits one request of key at now_us (monotonic microseconds) declaring
 * in_bytes: 0 and the request and in_bytes are taken; otherwise nothing
 * is taken, the refusal is counted, and the result is the whole seconds
 * (at least 1) until it would be admitted. *which (nullable) gets
 * "limits.requests-per-second" or "limits.bytes-per-second", the limit
 * that refused. A table at max_buckets replaces its least recently seen
 * key (NOMEM: the request is admitted unlimited).
 */
unsigned pulse_ratelimit_admit(struct pulse_ratelimit *rl, const unsigned char key[PULSE_RATELIMIT_KEY_LEN],
                               uint64_t in_bytes, int64_t now_us, const char **which);

/*
 * pulse_ratelimit_admit with key's own rates instead of the table's (a
 * token's override, auth.h): rps requests and bps bytes per second, 0 =
 * none; both 0 admits without remembering key. The buckets hold
 * limits.burst of these rates. A key seen before with other rates keeps
 * its levels (and debt) within the new sizes.
 */
unsigned pulse_ratelimit_admit_rates(struct pulse_ratelimit *rl, const unsigned char key[PULSE_RATELIMIT_KEY_LEN],
                                     int64_t rps, uint64_t bps, uint64_t in_bytes, int64_t now_us, const char **which);

/* Takes bytes learned after admission from key's byte bucket (which may
 * go into debt), at the rates of its last admission. Nothing when key is
 * no longer remembered or has no byte rate. */
void pulse_ratelimit_charge(struct pulse_ratelimit *rl, const unsigned char key[PULSE_RATELIMIT_KEY_LEN],
                            uint64_t bytes, int64_t now_us);

/* Counters for /metrics. */
uint64_t pulse_ratelimit_refusals(struct pulse_ratelimit *rl);
uint64_t pulse_ratelimit_evictions(struct pulse_ratelimit *rl);
size_t pulse_ratelimit_count(struct pulse_ratelimit *rl);

#endif
