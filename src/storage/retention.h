/* SPDX-License-Identifier: MIT */
/*
 * retention.h - time and size retention of a partition log (storage contract
 * section 8, "Time/size retention"; docs/Storage.md "Retention").
 *
 * Retention removes whole sealed segments, oldest first, and never the active
 * one. A segment expires by time when its newest record timestamp is older
 * than now - max_age_ms; the log is over size while the total of all its
 * segments (the active one included) exceeds max_bytes. Because only a prefix
 * of the log can go (the log start offset is one number), deletion stops at
 * the first segment that neither rule removes.
 *
 * The decision (pulse_retention_plan) is a pure function over the segment
 * list so it can be tested exhaustively; pulse_retention_apply lists,
 * plans and trims one log.
 */
#ifndef PULSE_STORAGE_RETENTION_H
#define PULSE_STORAGE_RETENTION_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_plog;
struct pulse_segment_info;

struct pulse_retention_policy {
    int64_t max_age_ms; /* 0 = no time limit */
    int64_t max_bytes;  /* 0 = no size limit */
};

/* What one application removed. */
struct pulse_retention_result {
    size_t segments_removed;
    uint64_t bytes_removed;
    int64_t new_log_start;
};

/*
 * How many of the oldest segments (segs[0..n), oldest first, the last one
 * active) the policy removes at wall-clock time now_ms. Never counts the
 * active segment. A sealed segment with no records (max_timestamp ==
 * INT64_MIN) is expired by time whenever a time limit is set.
 * Thread: any (pure).
 */
size_t pulse_retention_plan(const struct pulse_segment_info *segs, size_t n, const struct pulse_retention_policy *pol,
                            int64_t now_ms);

/*
 * Applies the policy to one log: lists its segments, plans, trims what the
 * plan chose (by offset: pulse_plog_trim checks it under the writer lock;
 * if the list changed meanwhile nothing is removed and the next
 * application plans again). out (nullable) reports what went. A policy
 * with both limits 0 does nothing.
 * Thread: the maintenance thread (one application per log at a time).
 * Locks: the log's writer lock inside pulse_plog_trim.
 */
pulse_status_t pulse_retention_apply(struct pulse_plog *plog, const struct pulse_retention_policy *pol, int64_t now_ms,
                                     struct pulse_retention_result *out);

#endif
