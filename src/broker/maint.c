/* SPDX-License-Identifier: MIT */
/*
 * maint.c - see maint.h.
 *
 * The thread sleeps on a condition variable (CLOCK_MONOTONIC) until the next
 * pass is due or it is told to stop. Each pass walks the live topics in name
 * order holding ONE at a time (pulse_broker_topic_acquire_next): the
 * reference keeps that topic's logs open under us, and a delete of any other
 * topic never waits for the pass. A delete of the topic in hand waits only
 * until the current partition is done: the loop checks the topic's deleted
 * flag (and the stop flag) between partitions and lets go.
 *
 * Retention applies to topics with cleanup=delete; a compacted topic keeps
 * every key's newest record, which is its cleanup. Compaction applies to
 * topics with cleanup=compact.
 */
#include "broker/maint.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "broker/broker_int.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "storage/batch.h"
#include "storage/compact.h"
#include "storage/retention.h"

struct pulse_broker_maint {
    struct pulse_local *b;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop; /* mu */

    /* Metrics: written by the maintenance thread, read by /metrics. */
    atomic_uint_fast64_t retention_passes;
    atomic_uint_fast64_t retention_segments;
    atomic_uint_fast64_t retention_bytes;
    atomic_uint_fast64_t compaction_passes;
    atomic_uint_fast64_t compaction_rewrites;
    atomic_uint_fast64_t compaction_deleted;
    atomic_uint_fast64_t compaction_skipped;
    atomic_uint_fast64_t compaction_reclaimed;
    atomic_uint_fast64_t compaction_errors;
    _Atomic int64_t retention_last_us;
    _Atomic int64_t compaction_last_us;
};

static bool stopping(struct pulse_broker_maint *m)
{
    pthread_mutex_lock(&m->mu);
    bool s = m->stop;
    pthread_mutex_unlock(&m->mu);
    return s;
}

/* The next topic of a pass after `after` (updated), with a reference; NULL
 * at the end or when stopping. */
static struct pulse_broker_topic *next_topic(struct pulse_broker_maint *m, char *after)
{
    struct pulse_broker_topic *t;

    if (stopping(m))
        return NULL;
    t = pulse_broker_topic_acquire_next(m->b, after);
    if (t != NULL)
        memcpy(after, t->name, PULSE_NAME_MAX + 1);
    return t;
}

/* Whether to go on to partition p of t: not stopping, and t not deleted
 * (its delete is waiting for us to let go). */
static bool go_on(struct pulse_broker_maint *m, struct pulse_broker_topic *t, uint32_t p)
{
    if (p >= t->nparts || atomic_load(&t->deleted) || stopping(m))
        return false;
    /* Test hook: a long pass over this partition (see failpoint.h). */
    pulse_failpoint_delay("maint_partition");
    return true;
}

static void retention_topic(struct pulse_broker_maint *m, struct pulse_broker_topic *t, int64_t now_ms)
{
    struct pulse_retention_policy pol = {
        .max_age_ms = atomic_load(&t->retention_ms),
        .max_bytes = atomic_load(&t->retention_bytes),
    };

    for (uint32_t p = 0; go_on(m, t, p); p++) {
        struct pulse_retention_result res = {0};
        pulse_status_t st = pulse_retention_apply(t->plogs[p], &pol, now_ms, &res);
        if (st != PULSE_OK)
            PULSE_WARN("retention: topic %s partition %u: %s", t->name, p, pulse_status_message(st));
        if (res.segments_removed > 0) {
            PULSE_INFO("retention: topic %s partition %u: removed %zu segment(s), %llu bytes, log start %lld", t->name,
                       p, res.segments_removed, (unsigned long long)res.bytes_removed, (long long)res.new_log_start);
            atomic_fetch_add(&m->retention_segments, res.segments_removed);
            atomic_fetch_add(&m->retention_bytes, res.bytes_removed);
        }
    }
}

void pulse_broker_maint_retention_pass(struct pulse_broker_maint *m)
{
    struct pulse_broker_topic *t;
    char after[PULSE_NAME_MAX + 1] = "";
    int64_t t0 = pulse_clock_mono_us();
    int64_t now_ms = pulse_clock_wall_ms();

    while ((t = next_topic(m, after)) != NULL) {
        if (t->cleanup == PULSE_CLEANUP_DELETE)
            retention_topic(m, t, now_ms);
        pulse_broker_topic_release(m->b, t);
    }
    atomic_fetch_add(&m->retention_passes, 1);
    atomic_store(&m->retention_last_us, pulse_clock_mono_us() - t0);
}

static void compaction_topic(struct pulse_broker_maint *m, struct pulse_broker_topic *t,
                             const struct pulse_compact_config *ccfg, int64_t now_ms)
{
    for (uint32_t p = 0; go_on(m, t, p); p++) {
        struct pulse_compact_result res = {0};
        pulse_status_t st = pulse_compact_run(t->compactors[p], t->plogs[p], ccfg, now_ms, &res);
        if (st != PULSE_OK) {
            atomic_fetch_add(&m->compaction_errors, 1);
            PULSE_WARN("compaction: topic %s partition %u: %s", t->name, p, pulse_status_message(st));
            continue;
        }
        if (res.segments_rewritten > 0 || res.segments_deleted > 0)
            PULSE_INFO("compaction: topic %s partition %u: %u segment(s) rewritten, %u deleted, %llu bytes "
                       "reclaimed",
                       t->name, p, res.segments_rewritten, res.segments_deleted,
                       (unsigned long long)(res.bytes_before - res.bytes_after));
        atomic_fetch_add(&m->compaction_rewrites, res.segments_rewritten);
        atomic_fetch_add(&m->compaction_deleted, res.segments_deleted);
        atomic_fetch_add(&m->compaction_skipped, res.skipped_by_gain_gate);
        if (res.bytes_before > res.bytes_after)
            atomic_fetch_add(&m->compaction_reclaimed, res.bytes_before - res.bytes_after);
    }
}

void pulse_broker_maint_compaction_pass(struct pulse_broker_maint *m)
{
    struct pulse_broker_topic *t;
    char after[PULSE_NAME_MAX + 1] = "";
    int64_t t0 = pulse_clock_mono_us();
    const struct pulse_broker_config *cfg = &m->b->cfg;
    struct pulse_compact_config ccfg;

    pulse_compact_config_init(&ccfg);
    ccfg.tombstone_retention_ms = cfg->compaction_tombstone_retention_ms;
    ccfg.min_gain_ratio = cfg->compaction_min_gain_ratio;
    ccfg.max_bytes_per_pass = cfg->compaction_max_bytes_per_pass;
    ccfg.max_pass_ms = cfg->compaction_max_pass_ms;
    int64_t now_ms = pulse_clock_wall_ms();
    while ((t = next_topic(m, after)) != NULL) {
        if (t->cleanup == PULSE_CLEANUP_COMPACT) {
            /* Rewritten batches take the topic's compression of now. */
            ccfg.codec = atomic_load(&t->compression) == PULSE_COMPRESSION_ZLIB ? PULSE_BATCH_CODEC_ZLIB
                                                                                : PULSE_BATCH_CODEC_NONE;
            compaction_topic(m, t, &ccfg, now_ms);
        }
        pulse_broker_topic_release(m->b, t);
    }
    atomic_fetch_add(&m->compaction_passes, 1);
    atomic_store(&m->compaction_last_us, pulse_clock_mono_us() - t0);
}

static struct timespec mono_deadline(int64_t at_us)
{
    struct timespec ts = {.tv_sec = (time_t)(at_us / 1000000), .tv_nsec = (long)(at_us % 1000000) * 1000};
    return ts;
}

static void *maint_main(void *arg)
{
    struct pulse_broker_maint *m = arg;
    const struct pulse_broker_config *cfg = &m->b->cfg;
    int64_t now = pulse_clock_mono_us();
    int64_t next_ret = cfg->retention_interval_ms > 0 ? now + cfg->retention_interval_ms * 1000 : INT64_MAX;
    int64_t next_cmp = cfg->compaction_interval_ms > 0 ? now + cfg->compaction_interval_ms * 1000 : INT64_MAX;

    for (;;) {
        pthread_mutex_lock(&m->mu);
        int64_t due = next_ret < next_cmp ? next_ret : next_cmp;
        while (!m->stop && pulse_clock_mono_us() < due) {
            struct timespec ts = mono_deadline(due);
            int rc = pthread_cond_timedwait(&m->cv, &m->mu, &ts);
            if (rc != 0 && rc != ETIMEDOUT && rc != EINTR)
                break;
        }
        bool stop = m->stop;
        pthread_mutex_unlock(&m->mu);
        if (stop)
            break;
        now = pulse_clock_mono_us();
        if (now >= next_ret) {
            pulse_broker_maint_retention_pass(m);
            next_ret = pulse_clock_mono_us() + cfg->retention_interval_ms * 1000;
        }
        if (now >= next_cmp && !stopping(m)) {
            pulse_broker_maint_compaction_pass(m);
            next_cmp = pulse_clock_mono_us() + cfg->compaction_interval_ms * 1000;
        }
    }
    return NULL;
}

pulse_status_t pulse_broker_maint_start(struct pulse_local *b, struct pulse_broker_maint **out)
{
    pulse_status_t st = PULSE_OK;
    struct pulse_broker_maint *m = pulse_calloc(1, sizeof *m);
    pthread_condattr_t ca;
    bool have_attr = false;

    if (m == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    m->b = b;
    pthread_mutex_init(&m->mu, NULL);
    if (pthread_condattr_init(&ca) != 0) {
        st = PULSE_NOMEM;
        goto out;
    }
    have_attr = true;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cv, &ca);
    if (b->cfg.retention_interval_ms > 0 || b->cfg.compaction_interval_ms > 0) {
        if (pthread_create(&m->thread, NULL, maint_main, m) != 0) {
            PULSE_ERROR("maintenance: cannot start its thread");
            st = PULSE_NOMEM;
            goto out;
        }
        m->started = true;
    }
    *out = m;
    m = NULL;
out:
    if (have_attr)
        pthread_condattr_destroy(&ca);
    if (m != NULL) {
        if (have_attr)
            pthread_cond_destroy(&m->cv);
        pthread_mutex_destroy(&m->mu);
        pulse_free(m);
    }
    return st;
}

void pulse_broker_maint_stop(struct pulse_broker_maint *m)
{
    if (m == NULL)
        return;
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (m->started)
        pthread_join(m->thread, NULL);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    pulse_free(m);
}

pulse_status_t pulse_broker_maint_metrics(struct pulse_broker_maint *m, struct pulse_buf *out)
{
    static const struct {
        const char *name;
        const char *help;
        size_t field;
    } counters[] = {
        {"pulse_retention_passes_total", "Retention passes run.",
         offsetof(struct pulse_broker_maint, retention_passes)},
        {"pulse_retention_segments_deleted_total", "Segments removed by retention.",
         offsetof(struct pulse_broker_maint, retention_segments)},
        {"pulse_retention_bytes_deleted_total", "Bytes removed by retention.",
         offsetof(struct pulse_broker_maint, retention_bytes)},
        {"pulse_compaction_passes_total", "Compaction passes run.",
         offsetof(struct pulse_broker_maint, compaction_passes)},
        {"pulse_compaction_segments_rewritten_total", "Segments rewritten by compaction.",
         offsetof(struct pulse_broker_maint, compaction_rewrites)},
        {"pulse_compaction_segments_deleted_total", "Segments compaction emptied and removed.",
         offsetof(struct pulse_broker_maint, compaction_deleted)},
        {"pulse_compaction_skipped_total", "Segment rewrites discarded by the gain gate.",
         offsetof(struct pulse_broker_maint, compaction_skipped)},
        {"pulse_compaction_bytes_reclaimed_total", "Bytes reclaimed by compaction.",
         offsetof(struct pulse_broker_maint, compaction_reclaimed)},
        {"pulse_compaction_errors_total", "Compaction passes of a partition that failed.",
         offsetof(struct pulse_broker_maint, compaction_errors)},
    };
    pulse_status_t st = PULSE_OK;
    for (size_t i = 0; i < sizeof counters / sizeof counters[0] && st == PULSE_OK; i++) {
        uint64_t v = 0;
        if (m != NULL)
            v = atomic_load((atomic_uint_fast64_t *)((char *)m + counters[i].field));
        st = pulse_buf_printf(out, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", counters[i].name, counters[i].help,
                              counters[i].name, counters[i].name, (unsigned long long)v);
    }
    if (st == PULSE_OK)
        st = pulse_buf_printf(out,
                              "# HELP pulse_maintenance_last_pass_duration_seconds Duration of the last pass.\n"
                              "# TYPE pulse_maintenance_last_pass_duration_seconds gauge\n"
                              "pulse_maintenance_last_pass_duration_seconds{kind=\"retention\"} %.6f\n"
                              "pulse_maintenance_last_pass_duration_seconds{kind=\"compaction\"} %.6f\n",
                              m ? (double)atomic_load(&m->retention_last_us) / 1e6 : 0.0,
                              m ? (double)atomic_load(&m->compaction_last_us) / 1e6 : 0.0);
    return st;
}
