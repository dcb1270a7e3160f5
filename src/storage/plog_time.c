/* SPDX-License-Identifier: MIT */
/*
 * plog_time.c - positions by time (pulse_plog_offset_for_time, plog.h).
 *
 * Method: segments are in offset order and each keeps the newest timestamp
 * it holds, so the first segment whose newest timestamp reaches ts is the
 * one to search (memory only). Inside it the segment seeks by its sparse
 * index and batch headers (pulse_segment_time_seek) to the first batch
 * reaching ts, and one verified read of that batch gives the first record
 * at or after ts. A segment whose seek finds nothing below its durable
 * bytes (its newest timestamp came from bytes not yet durable, or a damaged
 * header ends the walk) hands on to the next segment. Nothing found: the
 * high watermark read first, the position a reader waits at.
 */
#include "storage/plog.h"

#include <stdatomic.h>
#include <string.h>

#include "common/buf.h"
#include "storage/batch.h"
#include "storage/plog_int.h"
#include "storage/segment.h"

/* The first segment from index *from on whose newest timestamp reaches ts,
 * acquired, with its durable size; *from moves past it. NULL when none. */
static struct pulse_segment *next_reaching(struct pulse_plog *plog, int64_t ts, size_t *from, uint64_t *bound)
{
    struct pulse_segment *seg = NULL;

    pthread_mutex_lock(&plog->list_lock);
    for (size_t i = *from; i < plog->nsegs; i++) {
        struct pulse_segment *s = plog->segs[i];
        if (atomic_load_explicit(&s->max_ts, memory_order_relaxed) >= ts) {
            seg = s;
            pulse_segment_acquire(seg);
            *bound = atomic_load_explicit(&seg->durable_size, memory_order_acquire);
            *from = i + 1;
            break;
        }
    }
    pthread_mutex_unlock(&plog->list_lock);
    return seg;
}

/* The first record at or after ts in the batch at base: one verified read.
 * *offset_io is left alone when the read finds nothing there. */
static pulse_status_t first_record_reaching(struct pulse_plog *plog, int64_t base, int64_t ts, int64_t *offset_io)
{
    struct pulse_buf buf;
    struct pulse_slice info;
    struct pulse_buf inflated;
    struct pulse_batch_iter it;
    struct pulse_record_view rv;

    /* One batch: never more than a segment. */
    pulse_buf_init(&buf, (size_t)PULSE_PLOG_MAX_SEGMENT_BYTES);
    pulse_buf_init(&inflated, PULSE_BATCH_INFLATED_MAX);
    pulse_status_t st = pulse_plog_read(plog, base, 1, &buf, &info);
    if (st != PULSE_OK || info.len == 0 || pulse_batch_iter_open(&it, buf.data, buf.len, &inflated) != PULSE_OK)
        goto out;
    /* The batch reaches ts, so one of its records does; if compaction left
     * none at or after the start, the batch's end is the answer. */
    *offset_io = info.next_offset;
    while (pulse_batch_iter_next(&it, &rv) == PULSE_OK) {
        if (rv.offset >= info.start_offset && rv.timestamp >= ts) {
            *offset_io = rv.offset;
            break;
        }
    }
out:
    pulse_buf_fini(&inflated);
    pulse_buf_fini(&buf);
    return st == PULSE_RANGE ? PULSE_OK : st;
}

pulse_status_t pulse_plog_offset_for_time(struct pulse_plog *plog, int64_t ts, int64_t *offset_out)
{
    int64_t hw = pulse_plog_high_watermark(plog);
    int64_t answer = hw;
    size_t from = 0;
    uint64_t bound = 0;
    pulse_status_t st = PULSE_OK;
    struct pulse_segment *seg;

    while ((seg = next_reaching(plog, ts, &from, &bound)) != NULL) {
        int64_t base = -1;
        st = pulse_segment_time_seek(seg, ts, bound, &base);
        pulse_segment_release(seg);
        if (st == PULSE_EOF) {
            st = PULSE_OK;
            continue; /* nothing durable reaches ts here: the next segment */
        }
        if (st == PULSE_OK && base < hw)
            st = first_record_reaching(plog, base, ts, &answer);
        break;
    }
    if (st != PULSE_OK)
        return st;
    if (answer < pulse_plog_log_start(plog))
        answer = pulse_plog_log_start(plog);
    *offset_out = answer;
    return PULSE_OK;
}
