/* SPDX-License-Identifier: MIT */
/*
 * retention.c - see retention.h.
 *
 * The plan is computed from a copy of the segment list, without the writer
 * lock: reading and judging every segment under it would stall appends.
 * The list may change before the trim: appends only add at the end (a
 * rotation turns the active segment into a sealed one, which the plan
 * never counted), but an in-process reopen (another thread) and a
 * compaction merge can replace or merge segments. So the plan is handed to
 * the trim as the base offset of the first segment to keep, which
 * pulse_plog_trim checks under the writer lock: the offsets below it are
 * exactly the ones the plan chose, or nothing is removed and the next pass
 * plans again.
 */
#include "storage/retention.h"

#include <stdbool.h>

#include "common/alloc.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "storage/plog.h"

size_t pulse_retention_plan(const struct pulse_segment_info *segs, size_t n, const struct pulse_retention_policy *pol,
                            int64_t now_ms)
{
    if (n == 0)
        return 0;
    size_t sealed = n;
    if (segs[n - 1].active)
        sealed = n - 1;

    size_t by_time = 0;
    if (pol->max_age_ms > 0) {
        /* A record exactly max_age old is kept; strictly older goes. */
        int64_t cutoff = now_ms - pol->max_age_ms;
        while (by_time < sealed && segs[by_time].max_timestamp < cutoff)
            by_time++;
    }

    size_t by_size = 0;
    if (pol->max_bytes > 0) {
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += segs[i].size_bytes;
        while (by_size < sealed && total > (uint64_t)pol->max_bytes) {
            total -= segs[by_size].size_bytes;
            by_size++;
        }
    }
    return by_time > by_size ? by_time : by_size;
}

pulse_status_t pulse_retention_apply(struct pulse_plog *plog, const struct pulse_retention_policy *pol, int64_t now_ms,
                                     struct pulse_retention_result *out)
{
    pulse_status_t st = PULSE_OK;
    struct pulse_segment_info *segs = NULL;
    size_t n = 0;
    size_t removed = 0;
    uint64_t bytes = 0;

    if (pol->max_age_ms <= 0 && pol->max_bytes <= 0)
        goto out;
    st = pulse_plog_list_segments(plog, &segs, &n);
    if (st != PULSE_OK)
        goto out;
    size_t k = pulse_retention_plan(segs, n, pol, now_ms);
    if (k == 0)
        goto out;
    /* A test's slow point: the list may change right here. */
    pulse_failpoint_delay("retention_after_plan");
    st = pulse_plog_trim(plog, segs[k].base_offset, &removed);
    if (st == PULSE_BUSY) {
        PULSE_INFO("retention: the segment list changed since the plan; nothing removed, the next pass plans "
                   "again");
        st = PULSE_OK;
    }
    for (size_t i = 0; i < removed && i < n; i++)
        bytes += segs[i].size_bytes;
    if (removed > 0)
        PULSE_INFO("retention: removed %zu segment(s), %llu bytes; log start now %lld", removed,
                   (unsigned long long)bytes, (long long)pulse_plog_log_start(plog));
out:
    if (out != NULL) {
        out->segments_removed = removed;
        out->bytes_removed = bytes;
        out->new_log_start = pulse_plog_log_start(plog);
    }
    pulse_free(segs);
    return st;
}
