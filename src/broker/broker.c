/* SPDX-License-Identifier: MIT */
/*
 * broker.c - the broker's lifecycle and its syncer thread: open (metadata,
 * leftovers, recovery of every partition log), drain, close, long-poll
 * waiters, and the Prometheus metrics.
 *
 * In every-write mode publishers append to the page cache and register a
 * pending publish. Then one of two threads makes it durable:
 *   - the publisher itself, when its publish went to one partition, no
 *     other publish is waiting for a sync (a lone publisher: with others
 *     waiting, the syncer's next sync covers them all in one group while
 *     the HTTP workers keep appending), no sync of that partition is
 *     running and no other publisher is leading one on its own thread
 *     (pulse_broker_sync_inline): it runs the
 *     fdatasync (pulse_plog_try_sync), then completes every pending
 *     publish that sync covered, its own included, from its own thread.
 *     A lone publisher thus pays its fdatasync and no thread hand-off
 *     (worker -> syncer -> resumed worker cost more than the fdatasync);
 *   - otherwise the syncer, kicked by the publisher: it fdatasyncs every
 *     partition that has unsynced bytes (pulse_plog_sync: one fdatasync
 *     covers every batch written before it began, which is the group
 *     commit), several partitions side by side on the sync pool
 *     (syncpool.h, storage.sync-threads), then completes the publishes
 *     whose partitions' high watermarks reached their end offsets and
 *     wakes the waiters whose partitions grew.
 * Appends that arrive during an fdatasync are covered by the next one, so
 * there is no timer in the commit path. Whoever completes, it decides by
 * the same rule (complete_ready, pulse_plog_fate), under the same locks.
 *
 * In interval mode publishes are answered right after the append and the
 * syncer syncs dirty partitions every sync_interval_ms; the high watermark
 * (and thus what readers see) advances only then.
 *
 * A failed fdatasync fences the log inside the storage engine; the syncer
 * then fails the pending publishes of that partition with PULSE_FENCED and
 * never retries the sync (a retried fsync can report success after the
 * kernel dropped the dirty pages). The heal thread (heal.c) reopens the log
 * in process later.
 *
 * Which pending publishes succeed across a fence and a reopen is decided by
 * the log's epoch rule (pulse_plog_fate; storage/plog.h "Epochs"): each
 * append is remembered with the epoch it was written in and its end offset.
 * It is completed OK when HW reached its end within that epoch, even if a
 * fence and a reopen came before this thread looked (its bytes were
 * durable, and the reopen kept them); it is failed once its epoch ended, or
 * the log fenced, short of that (the reopen discards its bytes), even when
 * HW later passes its end with records appended after the reopen. The
 * decision is made under the log's sync lock, where the epoch and HW move
 * together.
 *
 * After each pass the syncer also lets every partition write its
 * durable-end checkpoint (pulse_plog_checkpoint): at most once per
 * checkpoint_interval_ms per partition whose durable end moved, and for at
 * most CHECKPOINT_PASS_BUDGET_US of writing per pass, so that publishes
 * never wait long behind them.
 */
#include "broker/broker.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "broker/admin.h"
#include "broker/broker_int.h"
#include "broker/idem.h"
#include "broker/groups.h"
#include "broker/heal.h"
#include "broker/maint.h"
#include "broker/syncpool.h"
#include "common/status.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "meta/meta.h"
#include "storage/fdcache.h"
#include "common/fsio.h"

/* The syncer never sleeps longer than this, so a lost wake-up (there should
 * be none) costs at most this much latency. */
#define SYNCER_MAX_SLEEP_US 1000000
/* A pass writes no further checkpoint once it spent this long on them; the
 * ones still owed are written at the next pass. */
#define CHECKPOINT_PASS_BUDGET_US 10000

static const double fsync_bounds[PULSE_BROKER_FSYNC_BUCKETS] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                                0.01,   0.025,   0.05,   0.1,   0.5,    1.0};

void pulse_broker_config_init(struct pulse_broker_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->data_dir = "./data";
    cfg->segment_max_bytes = PULSE_PLOG_DEFAULT_SEGMENT_BYTES;
    cfg->index_interval_bytes = PULSE_PLOG_DEFAULT_INDEX_INTERVAL;
    cfg->sync_mode = PULSE_SYNC_EVERY_WRITE;
    cfg->sync_interval_ms = 1000;
    cfg->default_partitions = 1;
    cfg->default_retention_ms = 7LL * 24 * 3600 * 1000;
    cfg->default_retention_bytes = 0;
    cfg->max_records_per_publish = 10000;
    cfg->max_key_bytes = 64 * 1024;
    cfg->max_headers_bytes = 64 * 1024;
    cfg->max_headers_per_record = 128;
    cfg->retention_interval_ms = 30000;
    cfg->compaction_interval_ms = 30000;
    cfg->compaction_tombstone_retention_ms = 24LL * 3600 * 1000;
    cfg->compaction_min_gain_ratio = 0.1;
    cfg->compaction_max_bytes_per_pass = 1024ull * 1024 * 1024;
    cfg->compaction_max_pass_ms = 5000;
    cfg->fence_retry_initial_ms = 1000;
    cfg->fence_retry_max_ms = 60000;
    cfg->segment_fd_cache = PULSE_FDCACHE_DEFAULT_CAPACITY;
    cfg->checkpoint_interval_ms = 1000;
    cfg->io = NULL;
    cfg->group_lease_min_ms = 1000;
    cfg->group_lease_max_ms = 300000;
    cfg->group_lease_default_ms = 30000;
    cfg->group_max_members = 1000;
    cfg->group_max_groups = 10000;
    cfg->idempotency_window_ms = 300000;
    cfg->idempotency_max_keys = 100000;
    cfg->sync_threads = 4;
    cfg->sync_inline = true;
}

/* ---- the file system -------------------------------------------------- */

const struct pulse_io *pulse_broker_io(const struct pulse_local *b)
{
    return b->cfg.io != NULL ? b->cfg.io : pulse_io_posix();
}

int pulse_broker_fsync_dir(const struct pulse_local *b, const char *path)
{
    const struct pulse_io *io = pulse_broker_io(b);

    if (io->fsync_dir(io, path) != 0) {
        int e = errno;
        PULSE_ERROR("fsync %s failed: %s", path, strerror(e));
        return -1;
    }
    return 0;
}

int pulse_broker_remove_tree(const struct pulse_local *b, const char *path)
{
    return pulse_io_remove_tree(pulse_broker_io(b), path) == 0 ? 0 : -1;
}

/* PULSE_OK when path (partition p of t) is a directory; otherwise logged,
 * PULSE_NOT_FOUND for one that is not there. */
static pulse_status_t partition_dir_present(const struct pulse_local *b, const struct pulse_broker_topic *t, uint32_t p,
                                            const char *path)
{
    const struct pulse_io *io = pulse_broker_io(b);
    struct stat sb;

    if (io->stat(io, path, false, &sb) != 0) {
        int e = errno;
        PULSE_ERROR("topic %s partition %" PRIu32 ": %s: %s", t->name, p, path, strerror(e));
        return e == ENOENT ? PULSE_NOT_FOUND : pulse_status_from_errno(e);
    }
    if (!S_ISDIR(sb.st_mode)) {
        PULSE_ERROR("topic %s partition %" PRIu32 ": %s: %s", t->name, p, path, strerror(ENOTDIR));
        return PULSE_NOT_FOUND;
    }
    return PULSE_OK;
}

/* ---- waiters and pending publishes ----------------------------------- */

static void waiter_list_complete(struct pulse_local *b, struct pulse_broker_waiter *w, pulse_status_t st)
{
    while (w != NULL) {
        struct pulse_broker_waiter *next = w->next;
        w->fn(w->arg, st);
        for (size_t i = 0; i < w->n; i++)
            pulse_broker_topic_release(b, w->at[i].topic);
        pulse_free(w);
        w = next;
    }
}

/* The callbacks of n items taken off the lists have returned. */
static void completing_done(struct pulse_local *b, uint32_t n)
{
    pthread_mutex_lock(&b->mu);
    b->completing -= n;
    pthread_cond_broadcast(&b->idle_cv);
    pthread_mutex_unlock(&b->mu);
}

/* The index of the first position of w whose partition's high watermark
 * passed its offset, or w->n when none has. */
static size_t waiter_ready(const struct pulse_broker_waiter *w)
{
    size_t i = 0;
    while (i < w->n && pulse_plog_high_watermark(w->at[i].topic->plogs[w->at[i].partition]) <= w->at[i].offset)
        i++;
    return i;
}

/* Completes what the last sync pass made ready. Collects under mu, calls
 * the callbacks after releasing it. */
static void complete_ready(struct pulse_local *b)
{
    struct pulse_broker_pending *done_head = NULL, **done_tail = &done_head;
    struct pulse_broker_pending *failed_head = NULL, **failed_tail = &failed_head;
    struct pulse_broker_waiter *woken = NULL;
    int64_t now = pulse_clock_mono_us();
    uint32_t taken = 0;

    pthread_mutex_lock(&b->mu);
    for (struct pulse_broker_pending **pp = &b->pending_head; *pp != NULL;) {
        struct pulse_broker_pending *p = *pp;
        bool all = true;
        bool fenced = false;

        for (uint32_t i = 0; i < p->n; i++) {
            struct pulse_plog *plog = p->topic->plogs[p->parts[i]];
            /* The epoch rule (see the file comment), not HW alone. */
            enum pulse_plog_fate fate = pulse_plog_fate(plog, p->epochs[i], p->ends[i]);
            if (fate != PULSE_PLOG_DURABLE)
                all = false;
            if (fate == PULSE_PLOG_LOST) {
                fenced = true;
                pulse_errbuf_set(p->errbuf, p->errlen,
                                 "partition %" PRIu32 " of topic \"%s\" was fenced after a failed write or sync "
                                 "before this publish was durable; it is being reopened, retry later",
                                 p->parts[i], p->topic->name);
                break;
            }
        }
        if (all || fenced) {
            *pp = p->next;
            p->next = NULL;
            taken++;
            if (all) {
                *done_tail = p;
                done_tail = &p->next;
            } else {
                *failed_tail = p;
                failed_tail = &p->next;
            }
            continue;
        }
        pp = &p->next;
    }
    b->pending_tail = &b->pending_head;
    while (*b->pending_tail != NULL)
        b->pending_tail = &(*b->pending_tail)->next;

    for (struct pulse_broker_waiter **wp = &b->waiters; *wp != NULL;) {
        struct pulse_broker_waiter *w = *wp;
        if (waiter_ready(w) < w->n || now >= w->deadline_us) {
            *wp = w->next;
            w->next = woken;
            woken = w;
            taken++;
            continue;
        }
        wp = &w->next;
    }
    /* Counted until their callbacks have returned, so that a drain does not
     * return while a completion is still on its way. */
    b->completing += taken;
    pthread_mutex_unlock(&b->mu);

    for (struct pulse_broker_pending *p = done_head; p != NULL;) {
        struct pulse_broker_pending *next = p->next;
        p->done(p->arg, PULSE_OK);
        pulse_broker_topic_release(b, p->topic);
        pulse_free(p);
        p = next;
    }
    for (struct pulse_broker_pending *p = failed_head; p != NULL;) {
        struct pulse_broker_pending *next = p->next;
        p->done(p->arg, PULSE_FENCED);
        pulse_broker_topic_release(b, p->topic);
        pulse_free(p);
        p = next;
    }
    waiter_list_complete(b, woken, PULSE_OK);
    if (taken > 0)
        completing_done(b, taken);
}

/* What a sync of partition p of t that returned st means for the broker:
 * a fenced log is logged and handed to the heal thread (never retried: the
 * engine fenced it, complete_ready fails its publishes and the heal thread
 * reopens it); a sync that could not run (out of descriptors) is tried
 * again by the next pass, its publishes pending meanwhile. */
static void sync_failed(struct pulse_local *b, const struct pulse_broker_topic *t, uint32_t p, pulse_status_t st)
{
    if (pulse_plog_fenced(t->plogs[p])) {
        PULSE_ERROR("topic %s partition %" PRIu32 ": sync failed (%s); partition fenced until it is "
                    "reopened",
                    t->name, p, pulse_status_name(st));
        pulse_broker_heal_kick(b->heal);
    } else {
        PULSE_ERROR_RL("topic %s partition %" PRIu32 ": sync could not run (%s); retrying", t->name, p,
                       pulse_status_message(st));
    }
}

/* The partitions one sync pass syncs, for the pool's threads. */
struct sync_item {
    struct pulse_broker_topic *t; /* a reference of the pass's topic list */
    uint32_t p;
};

struct sync_run {
    struct pulse_local *b;
    struct sync_item *items;
    atomic_bool synced;
};

static void sync_one(void *arg, size_t i)
{
    struct sync_run *run = arg;
    const struct sync_item *it = &run->items[i];
    pulse_status_t st = pulse_plog_sync(it->t->plogs[it->p]);

    if (st == PULSE_OK)
        atomic_store(&run->synced, true);
    else
        sync_failed(run->b, it->t, it->p, st);
}

/* The partitions of list with unsynced bytes, into *items_out (pulse_free;
 * NULL when none). */
static size_t dirty_partitions(struct pulse_broker_topic **list, size_t n, struct sync_item **items_out)
{
    struct sync_item *items = NULL;
    size_t count = 0, cap = 0;

    for (size_t i = 0; i < n; i++) {
        struct pulse_broker_topic *t = list[i];
        for (uint32_t p = 0; p < t->nparts; p++) {
            struct pulse_plog *plog = t->plogs[p];
            if (pulse_plog_fenced(plog) || !pulse_plog_needs_sync(plog))
                continue;
            if (count == cap) {
                size_t ncap = cap == 0 ? 16 : cap * 2;
                struct sync_item *grown = pulse_realloc(items, ncap * sizeof *grown);
                if (grown == NULL)
                    goto out; /* the next pass takes the rest */
                items = grown;
                cap = ncap;
            }
            items[count++] = (struct sync_item){t, p};
        }
    }
out:
    *items_out = items;
    return count;
}

/* fdatasyncs every partition with unsynced bytes, several at once on the
 * sync pool when there are several. Returns true when one was synced (a
 * durable end moved). */
static bool sync_pass(struct pulse_local *b)
{
    struct pulse_broker_topic **list = NULL;
    struct sync_run run;
    size_t n = 0;

    if (b->cfg.sync_mode == PULSE_SYNC_INTERVAL) {
        int64_t now = pulse_clock_mono_us();
        if (now < b->next_interval_sync_us)
            return false;
        b->next_interval_sync_us = now + (int64_t)b->cfg.sync_interval_ms * 1000;
    }
    if (pulse_broker_topic_snapshot(b, &list, &n) != PULSE_OK)
        return false;
    run.b = b;
    atomic_init(&run.synced, false);
    size_t count = dirty_partitions(list, n, &run.items);
    if (b->syncpool != NULL)
        pulse_syncpool_run(b->syncpool, count, sync_one, &run);
    else
        for (size_t i = 0; i < count; i++)
            sync_one(&run, i);
    pulse_free(run.items);
    for (size_t i = 0; i < n; i++)
        pulse_broker_topic_release(b, list[i]);
    pulse_free(list);
    return atomic_load(&run.synced);
}

/* Wakes the syncer for a pass (under mu). */
static void kick_locked(struct pulse_local *b)
{
    b->kick = true;
    pthread_cond_signal(&b->cv);
}

/* Whether this inline sync is the one of its checkpoint interval that
 * wakes the syncer (see pulse_local.inline_kick_at). */
static bool inline_kick_due(struct pulse_local *b)
{
    int64_t now = pulse_clock_mono_us();
    int64_t at = atomic_load(&b->inline_kick_at);

    if (now < at)
        return false;
    int64_t next = now + (int64_t)b->cfg.checkpoint_interval_ms * 1000;
    return atomic_compare_exchange_strong(&b->inline_kick_at, &at, next);
}

bool pulse_broker_inline_allowed(struct pulse_local *b, bool lonely)
{
    if (lonely && atomic_load_explicit(&b->clients, memory_order_relaxed) <= 1)
        return true;
    return atomic_load_explicit(&b->sync_avg_us, memory_order_relaxed) < PULSE_BROKER_FAST_SYNC_US;
}

void pulse_local_note_clients(struct pulse_broker *base, uint32_t open)
{
    atomic_store_explicit(&pulse_local_of(base)->clients, open, memory_order_relaxed);
}

bool pulse_broker_sync_inline_claim(struct pulse_local *b)
{
    unsigned expect = 0;
    return b->cfg.sync_inline && atomic_compare_exchange_strong(&b->inline_leaders, &expect, 1u);
}

void pulse_broker_sync_inline(struct pulse_local *b, struct pulse_broker_topic *t, uint32_t p, int64_t end)
{
    pulse_status_t st = pulse_plog_try_sync(t->plogs[p], end);

    atomic_store(&b->inline_leaders, 0u);
    if (st != PULSE_BUSY) {
        if (st != PULSE_OK && st != PULSE_FENCED)
            sync_failed(b, t, p, st);
        /* Ours and every other publish this sync covered (or a fence
         * failed), answered from here: no hand-off to another thread. */
        complete_ready(b);
        if (st != PULSE_OK && pulse_plog_fenced(t->plogs[p]))
            return; /* failed; the heal thread has it */
        /* A durable end moved: the syncer plans the checkpoint it owes
         * (checkpoint_pass) when woken below, which one inline sync per
         * checkpoint interval does; it wakes by itself at the times that
         * pass plans. */
        if (st == PULSE_OK && !inline_kick_due(b))
            return;
    }
    bool checkpoint = st == PULSE_OK;
    /* A sync was running (its target may not cover us), ours could not
     * run (the syncer's next pass tries again), or a checkpoint is to be
     * planned. */
    pthread_mutex_lock(&b->mu);
    b->checkpoint_kick = b->checkpoint_kick || checkpoint;
    kick_locked(b);
    pthread_mutex_unlock(&b->mu);
}

/*
 * Lets every partition write its durable-end checkpoint when one is owed
 * and due (pulse_plog_checkpoint), and notes when the next one falls due.
 * Stops starting writes once it spent CHECKPOINT_PASS_BUDGET_US; the rest
 * are due at once then. With nothing owed the next pass comes within
 * SYNCER_MAX_SLEEP_US, which also catches durable ends moved by a rotation
 * or a reopen rather than by this thread.
 */
static void checkpoint_pass(struct pulse_local *b)
{
    struct pulse_broker_topic **list = NULL;
    size_t n = 0;
    int64_t t0 = pulse_clock_mono_us();
    int64_t next = t0 + SYNCER_MAX_SLEEP_US;

    if (pulse_broker_topic_snapshot(b, &list, &n) != PULSE_OK) {
        b->next_checkpoint_us = next;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        struct pulse_broker_topic *t = list[i];
        for (uint32_t p = 0; p < t->nparts && next > t0; p++) {
            int64_t due = INT64_MAX;
            if (pulse_clock_mono_us() - t0 >= CHECKPOINT_PASS_BUDGET_US) {
                next = t0; /* over budget: go on at the next pass */
                break;
            }
            pulse_status_t st = pulse_plog_checkpoint(t->plogs[p], &due);
            if (st != PULSE_OK)
                PULSE_WARN_RL("topic %s partition %" PRIu32 ": checkpoint not written (%s); tried again later", t->name,
                              p, pulse_status_message(st));
            if (due < next)
                next = due;
        }
        pulse_broker_topic_release(b, t);
    }
    pulse_free(list);
    b->next_checkpoint_us = next;
}

/* The wake-up time of the syncer, under mu. */
static int64_t next_wake_us(struct pulse_local *b, int64_t now)
{
    int64_t wake = now + SYNCER_MAX_SLEEP_US;

    for (struct pulse_broker_waiter *w = b->waiters; w != NULL; w = w->next)
        if (w->deadline_us < wake)
            wake = w->deadline_us;
    if (b->cfg.sync_mode == PULSE_SYNC_INTERVAL && b->next_interval_sync_us < wake)
        wake = b->next_interval_sync_us;
    if (b->next_checkpoint_us < wake)
        wake = b->next_checkpoint_us;
    /* Parked group fetches without positions time out on the tick. */
    if (pulse_broker_groups_next_deadline(b) < wake)
        wake = pulse_broker_groups_next_deadline(b);
    return wake;
}

static void *syncer_main(void *arg)
{
    struct pulse_local *b = arg;

    pthread_mutex_lock(&b->mu);
    while (!b->stop) {
        int64_t now = pulse_clock_mono_us();
        /* Inline syncs woke us less than a checkpoint interval ago and
         * may have moved durable ends since without waking us again:
         * look at their checkpoints when that interval ends. */
        int64_t inline_at = atomic_load(&b->inline_kick_at);
        if (inline_at > now && inline_at < b->next_checkpoint_us)
            b->next_checkpoint_us = inline_at;
        int64_t wake = next_wake_us(b, now);
        if (!b->kick && wake > now) {
            struct timespec ts;
            ts.tv_sec = (time_t)(wake / 1000000);
            ts.tv_nsec = (long)(wake % 1000000) * 1000;
            pthread_cond_timedwait(&b->cv, &b->mu, &ts);
        }
        b->kick = false;
        bool checkpoint = b->checkpoint_kick;
        b->checkpoint_kick = false;
        if (b->stop)
            break;
        pthread_mutex_unlock(&b->mu);
        bool synced = sync_pass(b) || checkpoint;
        complete_ready(b);
        /* Group leases: at most every 100 ms, and never under mu. */
        pulse_broker_groups_tick(b);
        /* After the answers: a checkpoint never delays one. */
        if (synced || pulse_clock_mono_us() >= b->next_checkpoint_us)
            checkpoint_pass(b);
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static void sync_observer(void *arg, int64_t duration_us, bool ok)
{
    struct pulse_local *b = arg;
    double secs = (double)duration_us / 1e6;

    atomic_fetch_add(&b->fsync_total, 1);
    if (!ok)
        atomic_fetch_add(&b->fsync_failed, 1);
    atomic_fetch_add(&b->fsync_sum_us, (uint64_t)(duration_us > 0 ? duration_us : 0));
    /* The running average pulse_broker_inline_allowed reads, an eighth
     * of each new sync; concurrent syncs may drop one another's update,
     * which only makes it a little less fresh. */
    int64_t avg = atomic_load_explicit(&b->sync_avg_us, memory_order_relaxed);
    atomic_store_explicit(&b->sync_avg_us, avg + ((duration_us > 0 ? duration_us : 0) - avg) / 8, memory_order_relaxed);
    for (int i = 0; i < PULSE_BROKER_FSYNC_BUCKETS; i++) {
        if (secs <= fsync_bounds[i]) {
            atomic_fetch_add(&b->fsync_buckets[i], 1);
            break;
        }
    }
}

void pulse_broker_log_config(struct pulse_local *b, const struct pulse_broker_topic *t, struct pulse_plog_config *pcfg)
{
    pulse_plog_config_init(pcfg);
    pcfg->segment_max_bytes = (uint64_t)t->segment_bytes;
    pcfg->index_interval_bytes = b->cfg.index_interval_bytes;
    pcfg->sync_mode = b->cfg.sync_mode;
    pcfg->sync_interval_ms = b->cfg.sync_interval_ms;
    pcfg->io = b->cfg.io;
    pcfg->fdcache = b->fdcache;
    pcfg->sync_observer = sync_observer;
    pcfg->sync_observer_arg = b;
    pcfg->checkpoint_interval_ms = b->cfg.checkpoint_interval_ms;
    /* Only compaction leaves gaps in offsets: in the other logs a gap is
     * lost data, and recovery reports it (plog.h). */
    pcfg->contiguous = t->cleanup == PULSE_CLEANUP_DELETE;
}

pulse_status_t pulse_broker_partition_open(const struct pulse_local *b, struct pulse_broker_topic *t, uint32_t p,
                                           const struct pulse_plog_config *pcfg, struct pulse_plog_recovery *rec)
{
    const struct pulse_io *io = pulse_broker_io(b);
    char path[PATH_MAX];
    pulse_status_t st;

    memset(rec, 0, sizeof *rec);
    snprintf(path, sizeof path, "%s/%s/%" PRIu32, b->topics_dir, t->name, p);
    /* Never made here: a create made it (make_dirs), and at start one
     * that is gone refuses the start (datadir.c). Made again empty, the
     * log would hand out its offsets a second time. */
    st = partition_dir_present(b, t, p, path);
    if (st != PULSE_OK)
        return st;
    /* A partition directory this process may not write would open and
     * then fail at the first rotation or snapshot: refuse now. */
    if (io->access(io, path, W_OK | X_OK) != 0) {
        int e = errno;
        PULSE_ERROR("topic %s partition %" PRIu32 ": %s: %s", t->name, p, path, strerror(e));
        return pulse_status_from_errno(e);
    }
    st = pulse_plog_open(path, pcfg, &t->plogs[p], rec);
    if (st != PULSE_OK) {
        PULSE_ERROR("topic %s partition %" PRIu32 ": open failed: %s", t->name, p, pulse_status_message(st));
        return st;
    }
    if (rec->new_damaged_ranges > 0)
        PULSE_ERROR("topic %s partition %" PRIu32 ": recovery found %" PRIu32 " new damaged range(s) (%" PRIu32
                    " known in all, %" PRIu64 " bytes); fetches skip them, and the damaged segment files are copied to "
                    "%s/forensics (docs/Operations.md \"Damaged data\")",
                    t->name, p, rec->new_damaged_ranges, rec->damaged_ranges, rec->damaged_bytes, path);
    else if (rec->truncated_bytes > 0 || rec->damaged_ranges > 0)
        PULSE_WARN("topic %s partition %" PRIu32 ": recovery cut %" PRIu64 " torn bytes; %" PRIu32
                   " known damaged range(s) in %" PRIu32 " segment(s)",
                   t->name, p, rec->truncated_bytes, rec->damaged_ranges, rec->corrupt_segments);
    return PULSE_OK;
}

void pulse_broker_open_report_add(struct pulse_broker_open_report *report, const struct pulse_plog_recovery *rec)
{
    if (report == NULL)
        return;
    if (rec->truncated_bytes > 0 || rec->indexes_rebuilt > 0 || rec->damaged_ranges > 0 || rec->leo_raised > 0 ||
        rec->temp_files_removed > 0 || rec->forensic_copies > 0)
        report->repaired_partitions++;
    report->truncated_bytes += rec->truncated_bytes;
    report->corrupt_segments += rec->corrupt_segments;
    report->partitions++;
}

pulse_status_t pulse_broker_topic_open_logs(struct pulse_local *b, struct pulse_broker_topic *t,
                                            struct pulse_broker_open_report *report)
{
    struct pulse_plog_config pcfg;

    pulse_broker_log_config(b, t, &pcfg);
    for (uint32_t p = 0; p < t->nparts; p++) {
        struct pulse_plog_recovery rec;
        pulse_status_t st = pulse_broker_partition_open(b, t, p, &pcfg, &rec);
        if (st != PULSE_OK)
            return st;
        pulse_broker_open_report_add(report, &rec);
    }
    return PULSE_OK;
}

static bool config_valid(const struct pulse_broker_config *cfg)
{
    return cfg != NULL && cfg->data_dir != NULL && cfg->data_dir[0] != '\0' && cfg->default_partitions >= 1 &&
           cfg->default_partitions <= PULSE_BROKER_MAX_PARTITIONS &&
           cfg->segment_max_bytes >= PULSE_PLOG_MIN_SEGMENT_BYTES &&
           cfg->segment_max_bytes <= PULSE_PLOG_MAX_SEGMENT_BYTES &&
           !(cfg->sync_mode == PULSE_SYNC_INTERVAL && cfg->sync_interval_ms == 0) &&
           strlen(cfg->data_dir) <= PATH_MAX - PULSE_NAME_MAX - 64;
}

/* Open, phase 1: the broker object with its paths, locks and descriptor
 * cache; nothing on disk is touched. A failure after the allocation leaves
 * *out set for local_close. */
static pulse_status_t broker_alloc(const struct pulse_broker_config *cfg, struct pulse_local **out)
{
    struct pulse_local *b = pulse_calloc(1, sizeof *b);
    char path[PATH_MAX];
    pthread_condattr_t cattr;
    pthread_rwlockattr_t rwattr;

    if (b == NULL)
        return PULSE_NOMEM;
    b->base.ops = &pulse_local_ops;
    b->cfg = *cfg;
    b->data_dir = pulse_strdup(cfg->data_dir);
    snprintf(path, sizeof path, "%s/topics", cfg->data_dir);
    b->topics_dir = pulse_strdup(path);
    b->cfg.data_dir = b->data_dir;
    if (b->data_dir == NULL || b->topics_dir == NULL) {
        pulse_free(b->data_dir);
        pulse_free(b->topics_dir);
        pulse_free(b);
        return PULSE_NOMEM;
    }
    b->started_at_ms = pulse_clock_wall_ms();
    pthread_rwlockattr_init(&rwattr);
    /* Writers (create/delete) must not starve behind a stream of lookups. */
    pthread_rwlockattr_setkind_np(&rwattr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&b->map_lock, &rwattr);
    pthread_rwlockattr_destroy(&rwattr);
    pthread_mutex_init(&b->mu, NULL);
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cv, &cattr);
    pthread_cond_init(&b->idle_cv, &cattr);
    pthread_condattr_destroy(&cattr);
    b->pending_tail = &b->pending_head;
    atomic_init(&b->inline_leaders, 0u);
    atomic_init(&b->clients, 0u);
    atomic_init(&b->sync_avg_us, 0);
    atomic_init(&b->inline_kick_at, pulse_clock_mono_us() + (int64_t)b->cfg.checkpoint_interval_ms * 1000);
    *out = b;
    return pulse_fdcache_create(b->cfg.segment_fd_cache, &b->fdcache);
}

/* Open, phase 2: the data directory's own metadata (datadir.c): usable
 * directories, the store opened with the directory's identity, then
 * topics/ and the store brought into agreement (unfinished creates and
 * deletes removed, topics the store lost adopted from their topic.json,
 * refusals where pulsed cannot decide). *defs (pulse_free) gets the topics
 * to open. */
static pulse_status_t open_metadata(struct pulse_local *b, struct pulse_meta_topic **defs, size_t *ndefs,
                                    struct pulse_broker_open_report *rep, char *errbuf, size_t errlen)
{
    pulse_status_t st = pulse_broker_datadir_prepare(b, errbuf, errlen);

    if (st != PULSE_OK)
        return st;
    st = pulse_broker_datadir_open_store(b, rep, errbuf, errlen);
    if (st != PULSE_OK)
        return st;
    st = pulse_meta_topic_list(b->meta, defs, ndefs);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "cannot read topic metadata: %s%s", pulse_status_message(st),
                         st == PULSE_CORRUPT ? "; run pulsed --repair-metadata (see docs/Operations.md)" : "");
        return st;
    }
    return pulse_broker_datadir_reconcile(b, defs, ndefs, rep, errbuf, errlen);
}

/* Open, phase 3: every topic into the map, every partition log recovered. */
static pulse_status_t open_topics(struct pulse_local *b, struct pulse_syncpool *pool,
                                  const struct pulse_meta_topic *defs, size_t ndefs,
                                  struct pulse_broker_open_report *rep, char *errbuf, size_t errlen)
{
    int64_t t0 = pulse_clock_mono_us();
    pulse_status_t st = pulse_broker_topics_open(b, pool, defs, ndefs, rep, errbuf, errlen);

    if (st != PULSE_OK)
        return st;
    rep->recovery_us = pulse_clock_mono_us() - t0;
    b->recovery_us = rep->recovery_us;
    b->recovery_truncated_bytes = rep->truncated_bytes;
    /* pulsed logs the one summary line of a start (main.c). */
    PULSE_DEBUG_LOG("broker: %" PRIu32 " topics, %" PRIu32 " partitions recovered in %" PRId64 " us", rep->topics,
                    rep->partitions, rep->recovery_us);
    return PULSE_OK;
}

/* Open, phase 4: the threads, in the order their dependencies need. */
static pulse_status_t start_threads(struct pulse_local *b, char *errbuf, size_t errlen)
{
    /* Before the syncer, which kicks it. */
    pulse_status_t st = pulse_broker_heal_start(b, &b->heal);

    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "cannot start the heal thread");
        return st;
    }
    b->next_interval_sync_us = pulse_clock_mono_us() + (int64_t)b->cfg.sync_interval_ms * 1000;
    if (b->cfg.sync_threads > 1 && pulse_syncpool_open(b->cfg.sync_threads, &b->syncpool) != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "cannot start the %" PRIu32 " sync threads", b->cfg.sync_threads);
        return PULSE_NOMEM;
    }
    if (pthread_create(&b->syncer, NULL, syncer_main, b) != 0) {
        pulse_errbuf_set(errbuf, errlen, "cannot start the syncer thread");
        return PULSE_NOMEM;
    }
    b->syncer_started = true;
    st = pulse_broker_admin_start(b, &b->admin);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "cannot start the committer and admin threads");
        return st;
    }
    /* Maintenance starts only after every log is recovered, so a trim or a
     * compaction never meets a log still being scanned. */
    st = pulse_broker_maint_start(b, &b->maint);
    if (st != PULSE_OK)
        pulse_errbuf_set(errbuf, errlen, "cannot start the maintenance thread");
    return st;
}

/* The sentence of a start that found its file system full (after a crash
 * on a full disk the metadata store cannot even open: LevelDB writes a new
 * log and manifest, and replays the old log into a table, at every open).
 * Nothing is lost by refusing; what is needed is room. */
static void explain_full(const char *data_dir, char *errbuf, size_t errlen)
{
    char why[768];
    char avail[64] = "";
    struct statvfs vfs;

    if (errbuf == NULL || errlen == 0)
        return;
    snprintf(why, sizeof why, "%s", errbuf[0] != '\0' ? errbuf : pulse_status_message(PULSE_NOSPACE));
    if (statvfs(data_dir, &vfs) == 0)
        snprintf(avail, sizeof avail, "; %llu bytes free now",
                 (unsigned long long)vfs.f_bavail * (unsigned long long)vfs.f_frsize);
    pulse_errbuf_set(errbuf, errlen,
                     "the file system holding %s is full (%s%s). pulsed needs some free space to start: the "
                     "metadata store writes at every open and recovery rewrites indexes and snapshots. Nothing "
                     "acknowledged is lost. Free space on that file system (or grow it), then start pulsed again; "
                     "see docs/Operations.md \"When the disk fills up\"",
                     data_dir, why, avail);
}

static void local_close(struct pulse_local *b);

pulse_status_t pulse_broker_open(const struct pulse_broker_config *cfg, struct pulse_broker **out,
                                 struct pulse_broker_open_report *report, char *errbuf, size_t errlen)
{
    pulse_status_t st = PULSE_OK;
    struct pulse_local *b = NULL;
    struct pulse_broker_open_report rep;
    struct pulse_meta_topic *defs = NULL;
    struct pulse_syncpool *start_pool = NULL;
    size_t ndefs = 0;

    memset(&rep, 0, sizeof rep);
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (!config_valid(cfg)) {
        pulse_errbuf_set(errbuf, errlen, "invalid broker configuration");
        return PULSE_INVALID;
    }
    st = broker_alloc(cfg, &b);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "out of memory");
        goto out;
    }
    st = pulse_broker_groups_create(cfg, &b->groups, errbuf, errlen);
    if (st == PULSE_OK)
        st = pulse_broker_idem_create(cfg->idempotency_window_ms, cfg->idempotency_max_keys, &b->idem_window);
    if (st == PULSE_OK)
        st = open_metadata(b, &defs, &ndefs, &rep, errbuf, errlen);
    /* The start's threads: every log opened, every idempotency key read
     * back, before the broker's own threads start. */
    if (st == PULSE_OK)
        start_pool = pulse_broker_start_pool(defs, ndefs);
    if (st == PULSE_OK)
        st = open_topics(b, start_pool, defs, ndefs, &rep, errbuf, errlen);
    /* Members of the previous run may hold leases still: groups.h. */
    if (st == PULSE_OK && b->ntopics > 0)
        pulse_broker_groups_hold(b->groups);
    if (st == PULSE_OK)
        st = pulse_broker_cursor_raise_ends(b, errbuf, errlen);
    if (st == PULSE_OK)
        st = pulse_broker_idem_rebuild(b, start_pool);
    pulse_syncpool_close(start_pool);
    start_pool = NULL;
    if (st == PULSE_OK)
        st = start_threads(b, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    if (report != NULL)
        *report = rep;
    *out = &b->base;
    b = NULL;
out:
    if (st == PULSE_NOSPACE)
        explain_full(cfg->data_dir, errbuf, errlen);
    pulse_free(defs);
    local_close(b);
    return st;
}

static void local_drain(struct pulse_local *b)
{
    struct pulse_broker_waiter *w;

    if (b == NULL)
        return;
    pthread_mutex_lock(&b->mu);
    b->draining = true;
    w = b->waiters;
    b->waiters = NULL;
    pthread_mutex_unlock(&b->mu);
    waiter_list_complete(b, w, PULSE_SHUTDOWN);
    pulse_broker_groups_drain(b);

    pthread_mutex_lock(&b->mu);
    if (b->syncer_started) {
        b->kick = true;
        pthread_cond_signal(&b->cv);
        while (b->inflight > 0 || b->pending_head != NULL || b->completing > 0)
            pthread_cond_wait(&b->idle_cv, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    /* Queued creates, deletes, commits: run to their end, callbacks
     * included; new ones are refused from here on. */
    pulse_broker_admin_drain(b->admin);
}

void pulse_local_drain(struct pulse_broker *base)
{
    local_drain(pulse_local_of(base));
}

static void local_close(struct pulse_local *b)
{
    struct pulse_broker_pending *p;

    if (b == NULL)
        return;
    /* First: a pass in progress finishes its partition and the thread
     * exits, so no trim or rewrite runs while the logs close. */
    pulse_broker_maint_stop(b->maint);
    b->maint = NULL;
    local_drain(b);
    if (b->syncer_started) {
        pthread_mutex_lock(&b->mu);
        b->stop = true;
        pthread_cond_signal(&b->cv);
        pthread_mutex_unlock(&b->mu);
        pthread_join(b->syncer, NULL);
        b->syncer_started = false;
    }
    pulse_syncpool_close(b->syncpool);
    b->syncpool = NULL;
    /* After the syncer, which kicks it; before the logs close. */
    pulse_broker_heal_stop(b->heal);
    b->heal = NULL;
    /* Last: until here a release (syncer, drain) may still wake it. */
    pulse_broker_admin_stop(b->admin);
    b->admin = NULL;
    /* Nothing can be left after a drain with a running syncer; without one
     * (a failed open) nothing was ever registered. Fail defensively. */
    p = b->pending_head;
    b->pending_head = NULL;
    while (p != NULL) {
        struct pulse_broker_pending *next = p->next;
        p->done(p->arg, PULSE_SHUTDOWN);
        pulse_broker_topic_release(b, p->topic);
        pulse_free(p);
        p = next;
    }
    /* Each failed close was logged with its cause; a stop's exit status
     * does not depend on it. After every log: the metadata store. */
    (void)pulse_broker_topic_close_all(b->topics, b->ntopics);
    for (size_t i = 0; i < b->ntopics; i++)
        pulse_broker_topic_destroy(b->topics[i]);
    pulse_free(b->topics);
    /* After a drain only stalled deletes are left here (their logs are
     * closed); the next start finishes them. */
    while (b->dying != NULL) {
        struct pulse_broker_topic *t = b->dying;
        b->dying = t->dying_next;
        pulse_broker_topic_destroy(t);
    }
    pulse_broker_groups_destroy(b->groups);
    pulse_broker_idem_destroy(b->idem_window);
    pulse_fdcache_destroy(b->fdcache);
    pulse_meta_close(b->meta);
    pthread_cond_destroy(&b->cv);
    pthread_cond_destroy(&b->idle_cv);
    pthread_mutex_destroy(&b->mu);
    pthread_rwlock_destroy(&b->map_lock);
    pulse_free(b->data_dir);
    pulse_free(b->topics_dir);
    pulse_free(b);
}

void pulse_local_close(struct pulse_broker *base)
{
    local_close(pulse_local_of(base));
}

const char *pulse_local_cluster_id(const struct pulse_broker *base)
{
    return pulse_meta_cluster_id(pulse_local_of_const(base)->meta);
}

const char *pulse_local_broker_id(const struct pulse_broker *base)
{
    return pulse_meta_broker_id(pulse_local_of_const(base)->meta);
}

int64_t pulse_local_started_at_ms(const struct pulse_broker *base)
{
    return pulse_local_of_const(base)->started_at_ms;
}

pulse_status_t pulse_local_fenced_list(struct pulse_broker *base, struct pulse_fenced_partition **out, size_t *n_out)
{
    struct pulse_local *b = pulse_local_of(base);
    struct pulse_broker_topic **list = NULL;
    size_t n = 0;
    pulse_status_t st = pulse_broker_topic_snapshot(b, &list, &n);

    if (st != PULSE_OK)
        return st;
    st = pulse_broker_heal_list(b->heal, list, n, out, n_out);
    for (size_t i = 0; i < n; i++)
        pulse_broker_topic_release(b, list[i]);
    pulse_free(list);
    return st;
}

/* ---- topic-wide failure (delete) ------------------------------------- */

void pulse_broker_fail_topic(struct pulse_local *b, struct pulse_broker_topic *t, pulse_status_t st)
{
    struct pulse_broker_pending *plist = NULL;
    struct pulse_broker_waiter *wlist = NULL;
    uint32_t taken = 0;

    pthread_mutex_lock(&b->mu);
    for (struct pulse_broker_pending **pp = &b->pending_head; *pp != NULL;) {
        struct pulse_broker_pending *p = *pp;
        if (p->topic == t) {
            *pp = p->next;
            p->next = plist;
            plist = p;
            taken++;
            continue;
        }
        pp = &p->next;
    }
    b->pending_tail = &b->pending_head;
    while (*b->pending_tail != NULL)
        b->pending_tail = &(*b->pending_tail)->next;
    for (struct pulse_broker_waiter **wp = &b->waiters; *wp != NULL;) {
        struct pulse_broker_waiter *w = *wp;
        bool mine = false;
        for (size_t i = 0; i < w->n && !mine; i++)
            mine = w->at[i].topic == t;
        if (mine) {
            *wp = w->next;
            w->next = wlist;
            wlist = w;
            taken++;
            continue;
        }
        wp = &w->next;
    }
    b->completing += taken;
    pthread_mutex_unlock(&b->mu);

    while (plist != NULL) {
        struct pulse_broker_pending *next = plist->next;
        plist->done(plist->arg, st);
        pulse_broker_topic_release(b, plist->topic);
        pulse_free(plist);
        plist = next;
    }
    waiter_list_complete(b, wlist, st);
    if (taken > 0)
        completing_done(b, taken);
}

/* ---- waiters (long-poll, event streams, group fetch) ------------------ */

/* A waiter for pos[0..n): each position's topic acquired and checked.
 * PULSE_TOPIC_NOT_FOUND / PULSE_PARTITION_NOT_FOUND for the first position
 * naming one, PULSE_NOMEM; on failure nothing is held. */
static pulse_status_t waiter_make(struct pulse_local *b, const struct pulse_wait_pos *pos, size_t n,
                                  struct pulse_broker_waiter **out)
{
    pulse_status_t st = PULSE_OK;
    struct pulse_broker_waiter *w = pulse_calloc(1, sizeof *w + n * sizeof w->at[0]);

    if (w == NULL)
        return PULSE_NOMEM;
    for (; w->n < n; w->n++) {
        struct pulse_broker_wait_at *at = &w->at[w->n];
        at->topic = pulse_broker_topic_acquire(b, pos[w->n].topic);
        if (at->topic == NULL) {
            st = PULSE_TOPIC_NOT_FOUND;
            break;
        }
        at->partition = pos[w->n].partition;
        at->offset = pos[w->n].offset;
        if (at->partition >= at->topic->nparts) {
            pulse_broker_topic_release(b, at->topic);
            st = PULSE_PARTITION_NOT_FOUND;
            break;
        }
    }
    if (st != PULSE_OK) {
        for (size_t i = 0; i < w->n; i++)
            pulse_broker_topic_release(b, w->at[i].topic);
        pulse_free(w);
        return st;
    }
    *out = w;
    return PULSE_OK;
}

pulse_status_t pulse_local_wait_any(struct pulse_broker *base, const struct pulse_wait_pos *pos, size_t n,
                                    int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out,
                                    size_t *ready_out)
{
    struct pulse_local *b = pulse_local_of(base);
    struct pulse_broker_waiter *w = NULL;
    bool parked = false;
    size_t ready = 0;

    if (fn == NULL || pos == NULL || n == 0 || n > PULSE_WAIT_MAX_POSITIONS)
        return PULSE_INVALID;
    pulse_status_t st = waiter_make(b, pos, n, &w);
    if (st != PULSE_OK)
        return st;
    w->deadline_us = deadline_mono_us;
    w->fn = fn;
    w->arg = arg;

    pthread_mutex_lock(&b->mu);
    for (size_t i = 0; i < n && st == PULSE_OK; i++)
        if (atomic_load(&w->at[i].topic->deleted))
            st = PULSE_TOPIC_NOT_FOUND;
    if (b->draining) {
        st = PULSE_SHUTDOWN;
    } else if (st != PULSE_OK) {
        /* a topic deleted since it was looked up */
    } else if ((ready = waiter_ready(w)) < n) {
        /* Checked under mu: the syncer advances HW and then scans waiters
         * under mu, so a waiter parked after this check cannot miss it. */
        parked = false;
    } else {
        w->next = b->waiters;
        b->waiters = w;
        w = NULL; /* the list owns it and its references now */
        parked = true;
        b->kick = true; /* recompute the nearest deadline */
        pthread_cond_signal(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    if (w != NULL) {
        for (size_t i = 0; i < w->n; i++)
            pulse_broker_topic_release(b, w->at[i].topic);
        pulse_free(w);
    }
    if (st == PULSE_OK) {
        *parked_out = parked;
        if (!parked && ready_out != NULL)
            *ready_out = ready;
    }
    return st;
}

bool pulse_local_wait_cancel(struct pulse_local *b, pulse_wait_fn fn, void *arg)
{
    struct pulse_broker_waiter *w = NULL;

    pthread_mutex_lock(&b->mu);
    for (struct pulse_broker_waiter **wp = &b->waiters; *wp != NULL; wp = &(*wp)->next) {
        if ((*wp)->fn == fn && (*wp)->arg == arg) {
            w = *wp;
            *wp = w->next;
            w->next = NULL;
            /* Counted until its callback returned, as the syncer does, so
             * a drain waits for it. */
            b->completing++;
            break;
        }
    }
    pthread_mutex_unlock(&b->mu);
    if (w == NULL)
        return false;
    waiter_list_complete(b, w, PULSE_OK);
    completing_done(b, 1);
    return true;
}

/* ---- metrics --------------------------------------------------------- */

/* Damaged ranges the storage engine steers readers around, all partitions
 * (docs/Storage.md "Corruption"). Any value above zero wants an operator. */
static pulse_status_t metrics_damage(struct pulse_broker_topic **list, size_t n, struct pulse_buf *out)
{
    uint64_t ranges = 0, bytes = 0;

    for (size_t i = 0; i < n; i++) {
        for (uint32_t p = 0; p < list[i]->nparts; p++) {
            struct pulse_plog_stats ps;
            pulse_plog_get_stats(list[i]->plogs[p], &ps);
            ranges += ps.damaged_ranges;
            bytes += ps.damaged_bytes;
        }
    }
    return pulse_buf_printf(out,
                            "# HELP pulse_storage_corrupt_ranges Damaged or missing offset ranges that fetches skip.\n"
                            "# TYPE pulse_storage_corrupt_ranges gauge\n"
                            "pulse_storage_corrupt_ranges %" PRIu64 "\n"
                            "# HELP pulse_storage_corrupt_bytes Bytes of segment files inside damaged ranges.\n"
                            "# TYPE pulse_storage_corrupt_bytes gauge\n"
                            "pulse_storage_corrupt_bytes %" PRIu64 "\n",
                            ranges, bytes);
}

/* One consumer's lag by topic: the cursors come sorted by topic (the
 * metadata store's key order), so each topic's run is summed. */
static pulse_status_t lag_by_topic(const char *consumer, const struct pulse_cursor *cs, size_t nc,
                                   struct pulse_buf *out)
{
    pulse_status_t st = PULSE_OK;

    for (size_t j = 0; j < nc && st == PULSE_OK;) {
        int64_t sum = 0;
        size_t k = j;
        for (; k < nc && strcmp(cs[k].topic, cs[j].topic) == 0; k++)
            sum += cs[k].lag;
        st = pulse_buf_printf(out, "pulse_consumer_lag{consumer=\"%s\",topic=\"%s\"} %" PRId64 "\n", consumer,
                              cs[j].topic, sum);
        j = k;
    }
    return st;
}

static pulse_status_t metrics_lag(struct pulse_local *b, bool per_topic, struct pulse_buf *out)
{
    pulse_status_t st;
    char **names = NULL;
    size_t nnames = 0;

    st = pulse_buf_printf(out,
                          "# HELP pulse_consumer_lag High watermark minus the committed cursor%s.\n"
                          "# TYPE pulse_consumer_lag gauge\n",
                          per_topic ? ", summed over the topic's partitions" : "");
    if (st != PULSE_OK)
        return st;
    st = pulse_local_consumer_list(b, &names, &nnames);
    if (st != PULSE_OK)
        return st;
    for (size_t i = 0; i < nnames && st == PULSE_OK; i++) {
        struct pulse_cursor *cs = NULL;
        size_t nc = 0;
        st = pulse_local_cursor_list(b, names[i], &cs, &nc);
        if (st == PULSE_OK && per_topic)
            st = lag_by_topic(names[i], cs, nc, out);
        for (size_t j = 0; j < nc && st == PULSE_OK && !per_topic; j++)
            st = pulse_buf_printf(out,
                                  "pulse_consumer_lag{consumer=\"%s\",topic=\"%s\",partition=\"%" PRIu32 "\"} %" PRId64
                                  "\n",
                                  names[i], cs[j].topic, cs[j].partition, cs[j].lag);
        pulse_free(cs);
    }
    pulse_broker_names_free(names, nnames);
    return st;
}

static pulse_status_t metrics_fdcache(struct pulse_local *b, struct pulse_buf *out)
{
    struct pulse_fdcache_stats fs;

    pulse_fdcache_get_stats(b->fdcache, &fs);
    return pulse_buf_printf(
        out,
        "# HELP pulse_segment_fds_open Segment file descriptors open now (cached, in use, or holding unsynced "
        "bytes).\n"
        "# TYPE pulse_segment_fds_open gauge\n"
        "pulse_segment_fds_open %zu\n"
        "# HELP pulse_segment_fds_in_use Of them, in use or holding unsynced bytes (never closed by the cache).\n"
        "# TYPE pulse_segment_fds_in_use gauge\n"
        "pulse_segment_fds_in_use %zu\n"
        "# HELP pulse_segment_fd_cache_capacity Segment files the cache keeps open at most when idle "
        "(storage.segment-fd-cache).\n"
        "# TYPE pulse_segment_fd_cache_capacity gauge\n"
        "pulse_segment_fd_cache_capacity %zu\n"
        "# HELP pulse_segment_fd_cache_hits_total Segment file uses that found it open.\n"
        "# TYPE pulse_segment_fd_cache_hits_total counter\n"
        "pulse_segment_fd_cache_hits_total %" PRIu64 "\n"
        "# HELP pulse_segment_fd_cache_opens_total Segment file uses that had to open it.\n"
        "# TYPE pulse_segment_fd_cache_opens_total counter\n"
        "pulse_segment_fd_cache_opens_total %" PRIu64 "\n"
        "# HELP pulse_segment_fd_cache_evictions_total Idle segment files closed to stay within the cache.\n"
        "# TYPE pulse_segment_fd_cache_evictions_total counter\n"
        "pulse_segment_fd_cache_evictions_total %" PRIu64 "\n"
        "# HELP pulse_segment_fd_cache_emfile_total Opens that hit the process descriptor limit.\n"
        "# TYPE pulse_segment_fd_cache_emfile_total counter\n"
        "pulse_segment_fd_cache_emfile_total %" PRIu64 "\n",
        fs.open, fs.pinned, fs.capacity, fs.hits, fs.opens, fs.evictions, fs.emfile);
}

static pulse_status_t metrics_fsync(struct pulse_local *b, struct pulse_buf *out)
{
    uint64_t cum = 0;
    pulse_status_t st =
        pulse_buf_printf(out,
                         "# HELP pulse_fsync_total fdatasync calls on partition logs.\n"
                         "# TYPE pulse_fsync_total counter\n"
                         "pulse_fsync_total %" PRIu64 "\n"
                         "# HELP pulse_fsync_failures_total fdatasync calls that failed (each fences a log).\n"
                         "# TYPE pulse_fsync_failures_total counter\n"
                         "pulse_fsync_failures_total %" PRIu64 "\n"
                         "# HELP pulse_fsync_duration_seconds fdatasync latency of partition logs.\n"
                         "# TYPE pulse_fsync_duration_seconds histogram\n",
                         (uint64_t)atomic_load(&b->fsync_total), (uint64_t)atomic_load(&b->fsync_failed));

    for (int i = 0; i < PULSE_BROKER_FSYNC_BUCKETS && st == PULSE_OK; i++) {
        cum += atomic_load(&b->fsync_buckets[i]);
        st = pulse_buf_printf(out, "pulse_fsync_duration_seconds_bucket{le=\"%g\"} %" PRIu64 "\n", fsync_bounds[i],
                              cum);
    }
    if (st == PULSE_OK) {
        uint64_t total = atomic_load(&b->fsync_total);
        st = pulse_buf_printf(out,
                              "pulse_fsync_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n"
                              "pulse_fsync_duration_seconds_sum %.6f\n"
                              "pulse_fsync_duration_seconds_count %" PRIu64 "\n",
                              total, (double)atomic_load(&b->fsync_sum_us) / 1e6, total);
    }
    return st;
}

/* The per-partition gauges summed by topic (GET /metrics?per=topic). */
static pulse_status_t metrics_partitions_by_topic(struct pulse_broker_topic **list, size_t n, struct pulse_buf *out)
{
    static const struct {
        const char *name;
        const char *help;
    } sums[] = {
        {"pulse_topic_partitions", "Partitions of the topic."},
        {"pulse_topic_size_bytes", "Bytes of all segment files of the topic's partitions."},
        {"pulse_topic_high_watermark_sum", "Sum of the topic's partition high watermarks."},
        {"pulse_topic_log_start_offset_sum", "Sum of the topic's partition log start offsets."},
    };
    int64_t(*v)[4] = pulse_calloc(n > 0 ? n : 1, sizeof *v);
    pulse_status_t st = v == NULL ? PULSE_NOMEM : PULSE_OK;

    for (size_t i = 0; i < n && st == PULSE_OK; i++) {
        v[i][0] = list[i]->nparts;
        for (uint32_t p = 0; p < list[i]->nparts; p++) {
            struct pulse_plog_stats ps;
            pulse_plog_get_stats(list[i]->plogs[p], &ps);
            v[i][1] += (int64_t)ps.size_bytes;
            v[i][2] += ps.high_watermark;
            v[i][3] += ps.log_start;
        }
    }
    for (size_t m = 0; m < 4 && st == PULSE_OK; m++) {
        st = pulse_buf_printf(out, "# HELP %s %s\n# TYPE %s gauge\n", sums[m].name, sums[m].help, sums[m].name);
        for (size_t i = 0; i < n && st == PULSE_OK; i++)
            st = pulse_buf_printf(out, "%s{topic=\"%s\"} %" PRId64 "\n", sums[m].name, list[i]->name, v[i][m]);
    }
    pulse_free(v);
    return st;
}

/* Per-partition gauges (or their sums by topic), then per-topic counters. */
static pulse_status_t metrics_topics(struct pulse_broker_topic **list, size_t n, bool per_topic, struct pulse_buf *out)
{
    pulse_status_t st = PULSE_OK;
    static const struct {
        const char *name;
        const char *help;
    } part_metrics[] = {
        {"pulse_partition_high_watermark", "End of the durable log: the offset the next record gets once synced."},
        {"pulse_partition_log_start_offset", "First offset still stored."},
        {"pulse_partition_size_bytes", "Bytes of all segment files."},
    };
    static const struct {
        const char *name;
        const char *help;
    } topic_metrics[] = {
        {"pulse_published_records_total", "Records appended by publishes."},
        {"pulse_published_bytes_total", "Encoded batch bytes appended by publishes."},
        {"pulse_fetched_records_total", "Records served by fetches."},
        {"pulse_fetched_bytes_total", "Bytes served by fetches."},
    };

    if (per_topic)
        st = metrics_partitions_by_topic(list, n, out);
    for (size_t m = 0; m < 3 && st == PULSE_OK && !per_topic; m++) {
        st = pulse_buf_printf(out, "# HELP %s %s\n# TYPE %s gauge\n", part_metrics[m].name, part_metrics[m].help,
                              part_metrics[m].name);
        for (size_t i = 0; i < n && st == PULSE_OK; i++) {
            for (uint32_t p = 0; p < list[i]->nparts && st == PULSE_OK; p++) {
                struct pulse_plog_stats ps;
                pulse_plog_get_stats(list[i]->plogs[p], &ps);
                int64_t v = m == 0 ? ps.high_watermark : m == 1 ? ps.log_start : (int64_t)ps.size_bytes;
                st = pulse_buf_printf(out, "%s{topic=\"%s\",partition=\"%" PRIu32 "\"} %" PRId64 "\n",
                                      part_metrics[m].name, list[i]->name, p, v);
            }
        }
    }
    for (size_t m = 0; m < 4 && st == PULSE_OK; m++) {
        st = pulse_buf_printf(out, "# HELP %s %s\n# TYPE %s counter\n", topic_metrics[m].name, topic_metrics[m].help,
                              topic_metrics[m].name);
        for (size_t i = 0; i < n && st == PULSE_OK; i++) {
            struct pulse_broker_topic *t = list[i];
            uint64_t v = m == 0   ? atomic_load(&t->published_records)
                         : m == 1 ? atomic_load(&t->published_bytes)
                         : m == 2 ? atomic_load(&t->fetched_records)
                                  : atomic_load(&t->fetched_bytes);
            st = pulse_buf_printf(out, "%s{topic=\"%s\"} %" PRIu64 "\n", topic_metrics[m].name, t->name, v);
        }
    }
    return st;
}

static pulse_status_t local_metrics(struct pulse_broker *base, bool per_topic, struct pulse_buf *out)
{
    struct pulse_local *b = pulse_local_of(base);
    pulse_status_t st = PULSE_OK;
    struct pulse_broker_topic **list = NULL;
    size_t n = 0;

    st = pulse_broker_topic_snapshot(b, &list, &n);
    if (st != PULSE_OK)
        return st;
    st = metrics_fsync(b, out);
    if (st == PULSE_OK)
        st = metrics_topics(list, n, per_topic, out);
    if (st == PULSE_OK)
        st = metrics_damage(list, n, out);
    if (st == PULSE_OK)
        st = metrics_lag(b, per_topic, out);
    if (st == PULSE_OK)
        st = pulse_buf_printf(out,
                              "# HELP pulse_recovery_truncated_bytes_total Torn tail bytes cut by recovery at start.\n"
                              "# TYPE pulse_recovery_truncated_bytes_total counter\n"
                              "pulse_recovery_truncated_bytes_total %" PRIu64 "\n"
                              "# HELP pulse_recovery_duration_seconds Time to recover every partition log at start.\n"
                              "# TYPE pulse_recovery_duration_seconds gauge\n"
                              "pulse_recovery_duration_seconds %.6f\n",
                              b->recovery_truncated_bytes, (double)b->recovery_us / 1e6);
    if (st == PULSE_OK)
        st = pulse_broker_maint_metrics(b->maint, out);
    if (st == PULSE_OK)
        st = pulse_broker_heal_metrics(b->heal, list, n, per_topic, out);
    if (st == PULSE_OK)
        st = metrics_fdcache(b, out);
    if (st == PULSE_OK)
        st = pulse_broker_admin_metrics(b, b->admin, out);
    if (st == PULSE_OK)
        st = pulse_broker_groups_metrics(b, out);

    for (size_t i = 0; i < n; i++)
        pulse_broker_topic_release(b, list[i]);
    pulse_free(list);
    return st;
}

pulse_status_t pulse_local_metrics(struct pulse_broker *base, struct pulse_buf *out)
{
    return local_metrics(base, false, out);
}

pulse_status_t pulse_local_metrics_per_topic(struct pulse_broker *base, struct pulse_buf *out)
{
    return local_metrics(base, true, out);
}
