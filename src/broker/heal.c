/* SPDX-License-Identifier: MIT */
/*
 * heal.c - the heal thread (see heal.h): notices fenced partitions and
 * reopens them in process, with a per-partition backoff.
 *
 * State: one record per fenced partition the thread has noticed, keyed by
 * the topic object's uid and the partition number (never by an address: a
 * topic deleted and created again may get its old log's address, and must
 * not inherit its failure count or backoff), with when it was noticed,
 * when the next attempt is due and how many attempts failed. Only the
 * thread adds, changes or removes records; readers (readyz, metrics) copy
 * them under the mutex. A pass marks the records it meets and drops the
 * others (the topic was deleted, or the partition is no longer fenced).
 *
 * A pass walks the topics with pulse_broker_topic_acquire_next and holds
 * one topic reference at a time, so a delete of a topic waits at most for
 * the one reopen attempt in progress on that topic, never for attempts on
 * others.
 */
#include "broker/heal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "broker/broker_int.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/failpoint.h"
#include "common/log.h"

/* Fences are looked for at least this often. */
#define HEAL_POLL_US 1000000

struct heal_rec {
    uint64_t uid; /* the topic object's (with partition: the key) */
    char topic[PULSE_NAME_MAX + 1];
    uint32_t partition;
    int64_t since_us;
    int64_t next_us;
    uint32_t failures;
    pulse_status_t last;
    bool seen;
};

struct pulse_broker_heal {
    struct pulse_local *b;
    int64_t initial_us;
    int64_t max_us;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    bool stop;         /* mu */
    bool kick;         /* mu */
    pthread_t thread;
    bool started;
    struct heal_rec *recs; /* mu */
    size_t n, cap;
    atomic_uint_fast64_t fences;
    atomic_uint_fast64_t reopens;
    atomic_uint_fast64_t failures;
};

/* Caller holds mu. */
static struct heal_rec *rec_find(struct pulse_broker_heal *h, const struct pulse_broker_topic *t, uint32_t p)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->recs[i].uid == t->uid && h->recs[i].partition == p)
            return &h->recs[i];
    return NULL;
}

/* Finds or adds the record of a fenced partition; marks it seen. NULL on
 * out of memory (the partition is simply tried at the next pass). Caller
 * holds mu. */
static struct heal_rec *rec_note(struct pulse_broker_heal *h, const struct pulse_broker_topic *t, uint32_t p,
                                 int64_t now)
{
    struct heal_rec *r = rec_find(h, t, p);

    if (r == NULL) {
        if (h->n == h->cap) {
            size_t ncap = h->cap == 0 ? 8 : h->cap * 2;
            struct heal_rec *nr = pulse_realloc(h->recs, ncap * sizeof *nr);
            if (nr == NULL)
                return NULL;
            h->recs = nr;
            h->cap = ncap;
        }
        r = &h->recs[h->n++];
        memset(r, 0, sizeof *r);
        r->uid = t->uid;
        snprintf(r->topic, sizeof r->topic, "%s", t->name);
        r->partition = p;
        r->since_us = now;
        r->next_us = now + h->initial_us;
        r->last = PULSE_OK;
        atomic_fetch_add(&h->fences, 1);
        PULSE_WARN("topic %s partition %" PRIu32 ": log fenced; publishes to it answer 503 until it is reopened "
                   "(first attempt in %" PRId64 " ms)",
                   t->name, p, h->initial_us / 1000);
    }
    r->seen = true;
    return r;
}

/* Caller holds mu. */
static void rec_remove(struct pulse_broker_heal *h, struct heal_rec *r)
{
    size_t i = (size_t)(r - h->recs);
    memmove(&h->recs[i], &h->recs[i + 1], (h->n - i - 1) * sizeof *h->recs);
    h->n--;
}

static int64_t backoff_us(const struct pulse_broker_heal *h, uint32_t failures)
{
    int64_t d = h->initial_us;
    for (uint32_t i = 0; i < failures && d < h->max_us; i++)
        d *= 2;
    return d < h->max_us ? d : h->max_us;
}

/* One reopen attempt of a partition whose record is due. */
static void attempt(struct pulse_broker_heal *h, struct pulse_broker_topic *t, uint32_t p)
{
    struct pulse_plog_recovery rec;
    pulse_status_t st;
    int64_t now;

    /* Tests make an attempt slow here, to see who waits for it. */
    pulse_failpoint_delay("heal_attempt");
    st = pulse_plog_reopen(t->plogs[p], &rec);
    now = pulse_clock_mono_us();
    pthread_mutex_lock(&h->mu);
    struct heal_rec *r = rec_find(h, t, p);
    if (r != NULL && (st == PULSE_OK || st == PULSE_INVALID)) {
        if (st == PULSE_OK) {
            atomic_fetch_add(&h->reopens, 1);
            PULSE_WARN("topic %s partition %" PRIu32 ": reopened in process after %" PRId64 " ms fenced (%" PRIu32
                       " failed attempts); appends resume at offset %" PRId64,
                       t->name, p, (now - r->since_us) / 1000, r->failures, pulse_plog_log_end(t->plogs[p]));
        }
        rec_remove(h, r);
    } else if (r != NULL) {
        r->failures++;
        r->last = st;
        r->next_us = now + backoff_us(h, r->failures);
        atomic_fetch_add(&h->failures, 1);
        PULSE_ERROR_RL("topic %s partition %" PRIu32 ": reopen failed (%s); next attempt in %" PRId64 " ms", t->name, p,
                       pulse_status_message(st), (r->next_us - now) / 1000);
    }
    pthread_mutex_unlock(&h->mu);
}

static bool stopping(struct pulse_broker_heal *h)
{
    pthread_mutex_lock(&h->mu);
    bool stop = h->stop;
    pthread_mutex_unlock(&h->mu);
    return stop;
}

/* The fenced partitions of one topic: noted, and reopened when due. */
static void heal_topic(struct pulse_broker_heal *h, struct pulse_broker_topic *t)
{
    for (uint32_t p = 0; p < t->nparts && !atomic_load(&t->deleted); p++) {
        bool due = false;
        if (!pulse_plog_fenced(t->plogs[p]))
            continue;
        pthread_mutex_lock(&h->mu);
        struct heal_rec *r = rec_note(h, t, p, pulse_clock_mono_us());
        due = r != NULL && pulse_clock_mono_us() >= r->next_us;
        pthread_mutex_unlock(&h->mu);
        if (due)
            attempt(h, t, p);
    }
}

/* Looks at every partition, one topic at a time; reopens the fenced ones
 * that are due. */
static void heal_pass(struct pulse_broker_heal *h)
{
    char after[PULSE_NAME_MAX + 1] = "";
    struct pulse_broker_topic *t;

    pthread_mutex_lock(&h->mu);
    for (size_t k = 0; k < h->n; k++)
        h->recs[k].seen = false;
    pthread_mutex_unlock(&h->mu);
    while (!stopping(h) && (t = pulse_broker_topic_acquire_next(h->b, after)) != NULL) {
        memcpy(after, t->name, sizeof after);
        heal_topic(h, t);
        pulse_broker_topic_release(h->b, t);
    }
    pthread_mutex_lock(&h->mu);
    for (size_t k = 0; k < h->n;) {
        if (!h->recs[k].seen)
            rec_remove(h, &h->recs[k]);
        else
            k++;
    }
    pthread_mutex_unlock(&h->mu);
}

/* The next wake-up: a poll, or the earliest due attempt. Caller holds mu. */
static int64_t next_wake_us(const struct pulse_broker_heal *h, int64_t now)
{
    int64_t poll = h->initial_us < HEAL_POLL_US ? h->initial_us : HEAL_POLL_US;
    int64_t wake = now + poll;
    for (size_t i = 0; i < h->n; i++)
        if (h->recs[i].next_us < wake)
            wake = h->recs[i].next_us;
    return wake;
}

static void *heal_main(void *arg)
{
    struct pulse_broker_heal *h = arg;

    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        int64_t now = pulse_clock_mono_us();
        int64_t wake = next_wake_us(h, now);
        if (!h->kick && wake > now) {
            struct timespec ts;
            ts.tv_sec = (time_t)(wake / 1000000);
            ts.tv_nsec = (long)(wake % 1000000) * 1000;
            pthread_cond_timedwait(&h->cv, &h->mu, &ts);
        }
        h->kick = false;
        if (h->stop)
            break;
        pthread_mutex_unlock(&h->mu);
        heal_pass(h);
        pthread_mutex_lock(&h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

pulse_status_t pulse_broker_heal_start(struct pulse_local *b, struct pulse_broker_heal **out)
{
    struct pulse_broker_heal *h = pulse_calloc(1, sizeof *h);
    pthread_condattr_t cattr;

    if (h == NULL)
        return PULSE_NOMEM;
    h->b = b;
    h->initial_us = (b->cfg.fence_retry_initial_ms > 0 ? b->cfg.fence_retry_initial_ms : 1) * 1000;
    h->max_us = (b->cfg.fence_retry_max_ms > 0 ? b->cfg.fence_retry_max_ms : 1) * 1000;
    if (h->max_us < h->initial_us)
        h->max_us = h->initial_us;
    pthread_mutex_init(&h->mu, NULL);
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cv, &cattr);
    pthread_condattr_destroy(&cattr);
    atomic_init(&h->fences, 0);
    atomic_init(&h->reopens, 0);
    atomic_init(&h->failures, 0);
    if (pthread_create(&h->thread, NULL, heal_main, h) != 0) {
        pulse_broker_heal_stop(h);
        return PULSE_NOMEM;
    }
    h->started = true;
    *out = h;
    return PULSE_OK;
}

void pulse_broker_heal_stop(struct pulse_broker_heal *h)
{
    if (h == NULL)
        return;
    if (h->started) {
        pthread_mutex_lock(&h->mu);
        h->stop = true;
        pthread_cond_signal(&h->cv);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->thread, NULL);
    }
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    pulse_free(h->recs);
    pulse_free(h);
}

void pulse_broker_heal_kick(struct pulse_broker_heal *h)
{
    if (h == NULL)
        return;
    pthread_mutex_lock(&h->mu);
    h->kick = true;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

pulse_status_t pulse_broker_heal_list(struct pulse_broker_heal *h, struct pulse_broker_topic *const *topics,
                                      size_t ntopics, struct pulse_fenced_partition **out, size_t *n_out)
{
    struct pulse_fenced_partition *arr = NULL;
    size_t n = 0, cap = 0;
    int64_t now = pulse_clock_mono_us();

    *out = NULL;
    *n_out = 0;
    pthread_mutex_lock(&h->mu);
    for (size_t i = 0; i < ntopics; i++) {
        const struct pulse_broker_topic *t = topics[i];
        for (uint32_t p = 0; p < t->nparts; p++) {
            if (!pulse_plog_fenced(t->plogs[p]))
                continue;
            if (n == cap) {
                size_t ncap = cap == 0 ? 8 : cap * 2;
                struct pulse_fenced_partition *na = pulse_realloc(arr, ncap * sizeof *na);
                if (na == NULL) {
                    pthread_mutex_unlock(&h->mu);
                    pulse_free(arr);
                    return PULSE_NOMEM;
                }
                arr = na;
                cap = ncap;
            }
            struct pulse_fenced_partition *f = &arr[n++];
            const struct heal_rec *r = rec_find(h, t, p);
            memset(f, 0, sizeof *f);
            snprintf(f->topic, sizeof f->topic, "%s", t->name);
            f->partition = p;
            f->last_error = PULSE_OK;
            if (r != NULL) {
                f->fenced_ms = (now - r->since_us) / 1000;
                f->next_attempt_ms = r->next_us > now ? (r->next_us - now + 999) / 1000 : 0;
                f->failed_attempts = r->failures;
                f->last_error = r->last;
            }
        }
    }
    pthread_mutex_unlock(&h->mu);
    *out = arr;
    *n_out = n;
    return PULSE_OK;
}

/* pulse_partition_fenced summed by topic. */
static pulse_status_t fenced_by_topic(struct pulse_broker_topic *const *topics, size_t ntopics, struct pulse_buf *out)
{
    pulse_status_t st = pulse_buf_printf(out, "# HELP pulse_topic_fenced_partitions Partitions of the topic whose "
                                              "log is fenced (publishes to them answer 503 until it is reopened "
                                              "in process).\n"
                                              "# TYPE pulse_topic_fenced_partitions gauge\n");
    for (size_t i = 0; i < ntopics && st == PULSE_OK; i++) {
        uint32_t fenced = 0;
        for (uint32_t p = 0; p < topics[i]->nparts; p++)
            fenced += pulse_plog_fenced(topics[i]->plogs[p]) ? 1 : 0;
        st = pulse_buf_printf(out, "pulse_topic_fenced_partitions{topic=\"%s\"} %" PRIu32 "\n", topics[i]->name,
                              fenced);
    }
    return st;
}

pulse_status_t pulse_broker_heal_metrics(struct pulse_broker_heal *h, struct pulse_broker_topic *const *topics,
                                         size_t ntopics, bool per_topic, struct pulse_buf *out)
{
    pulse_status_t st = PULSE_OK;
    if (per_topic)
        st = fenced_by_topic(topics, ntopics, out);
    else
        st = pulse_buf_printf(out, "# HELP pulse_partition_fenced 1 while the partition's log is fenced "
                                   "(publishes answer 503 until it is reopened in process).\n"
                                   "# TYPE pulse_partition_fenced gauge\n");
    for (size_t i = 0; i < ntopics && st == PULSE_OK && !per_topic; i++)
        for (uint32_t p = 0; p < topics[i]->nparts && st == PULSE_OK; p++)
            st = pulse_buf_printf(out, "pulse_partition_fenced{topic=\"%s\",partition=\"%" PRIu32 "\"} %d\n",
                                  topics[i]->name, p, pulse_plog_fenced(topics[i]->plogs[p]) ? 1 : 0);
    if (st == PULSE_OK)
        st = pulse_buf_printf(out,
                              "# HELP pulse_partition_fences_total Partition logs found fenced.\n"
                              "# TYPE pulse_partition_fences_total counter\n"
                              "pulse_partition_fences_total %" PRIu64 "\n"
                              "# HELP pulse_partition_reopens_total Fenced partition logs reopened in process.\n"
                              "# TYPE pulse_partition_reopens_total counter\n"
                              "pulse_partition_reopens_total %" PRIu64 "\n"
                              "# HELP pulse_partition_reopen_failures_total Reopen attempts that failed (retried "
                              "with backoff).\n"
                              "# TYPE pulse_partition_reopen_failures_total counter\n"
                              "pulse_partition_reopen_failures_total %" PRIu64 "\n",
                              (uint64_t)atomic_load(&h->fences), (uint64_t)atomic_load(&h->reopens),
                              (uint64_t)atomic_load(&h->failures));
    return st;
}
