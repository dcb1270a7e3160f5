/* SPDX-License-Identifier: MIT */
/*
 * admin.c - see admin.h: the committer thread, the admin thread, their
 * queues and the drain.
 *
 * Method. One mutex (mu) guards both queues, the admin thread's lists and
 * the counters below; no I/O and no callback ever runs under it. The
 * committer swaps out its whole queue, runs the jobs in arrival order and
 * completes each; consecutive commits become one group write (cursor.c), so
 * every commit that arrived while the previous write was running shares the
 * next one - the same group commit the syncer does for publishes, with no
 * timer. The admin thread picks, in this order, a delete whose topic has no
 * user left (reference count 1: the dying list's own), then the oldest
 * create that is not parked; with neither it sleeps until a submit, a
 * reference drop (pulse_broker_admin_wake) or at most ADMIN_MAX_SLEEP_US.
 * A create that finds its name still being deleted is parked and unparked
 * when any delete finishes.
 *
 * Drain accounting: `running` counts jobs taken off a queue whose
 * completion has not returned. A delete moves from the committer to the
 * dying list in one critical section, so between the queue, `running`, the
 * create list and the dying list every accepted job is always visible to
 * pulse_broker_admin_drain.
 */
#include "broker/admin.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "broker/broker_int.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "meta/meta.h"

/* The admin thread looks at its dying topics at least this often, so a lost
 * wake-up (there should be none) costs at most this much. */
#define ADMIN_MAX_SLEEP_US 1000000
/* Bounds of one group write: a commit may carry up to
 * max_records_per_request cursors, and one LevelDB batch should stay a few
 * MiB at most. A single commit over the cursor bound still goes, alone. */
#define GROUP_MAX_JOBS 1024
#define GROUP_MAX_CURSORS 65536

struct pulse_broker_admin {
    struct pulse_local *b;
    pthread_mutex_t mu;
    pthread_cond_t commit_cv;        /* the committer has a job, or stop */
    pthread_cond_t work_cv;          /* the admin thread may have work, or stop (CLOCK_MONOTONIC) */
    pthread_cond_t idle_cv;          /* a job completed (drain waits on it) */
    struct pulse_admin_job *cq_head; /* committer queue, arrival order */
    struct pulse_admin_job **cq_tail;
    struct pulse_admin_job *creates; /* admin thread: creates, arrival order */
    struct pulse_admin_job *dying;   /* admin thread: deletes past their first step */
    unsigned running;                /* taken off a list, completion not yet returned */
    bool draining;
    bool stop;
    pthread_t committer;
    bool committer_started;
    pthread_t worker;
    bool worker_started;
    atomic_uint_fast64_t commits; /* cursor commits stored */
};

/* ---- jobs ------------------------------------------------------------ */

struct pulse_admin_job *pulse_broker_admin_job_create(enum pulse_admin_kind kind, pulse_admin_done_fn done, void *arg)
{
    struct pulse_admin_job *job = pulse_calloc(1, sizeof *job);

    if (job == NULL)
        return NULL;
    job->kind = kind;
    job->done = done;
    job->arg = arg;
    job->st = PULSE_OK;
    return job;
}

void pulse_broker_admin_job_free(struct pulse_admin_job *job)
{
    if (job == NULL)
        return;
    pulse_free(job->cursors);
    pulse_free(job);
}

/* Calls the job's callback (no lock held), frees it, and counts it out. */
static void complete(struct pulse_broker_admin *a, struct pulse_admin_job *job)
{
    job->done(job->arg, job->st);
    pulse_broker_admin_job_free(job);
    pthread_mutex_lock(&a->mu);
    a->running--;
    pthread_cond_broadcast(&a->idle_cv);
    pthread_mutex_unlock(&a->mu);
}

static void append(struct pulse_admin_job **head, struct pulse_admin_job *job)
{
    while (*head != NULL)
        head = &(*head)->next;
    job->next = NULL;
    *head = job;
}

pulse_status_t pulse_broker_admin_submit(struct pulse_broker_admin *a, struct pulse_admin_job *job)
{
    pthread_mutex_lock(&a->mu);
    if (a->draining || a->stop) {
        pthread_mutex_unlock(&a->mu);
        return PULSE_SHUTDOWN;
    }
    job->next = NULL;
    if (job->kind == PULSE_ADMIN_CREATE) {
        append(&a->creates, job);
        pthread_cond_signal(&a->work_cv);
    } else {
        *a->cq_tail = job;
        a->cq_tail = &job->next;
        pthread_cond_signal(&a->commit_cv);
    }
    pthread_mutex_unlock(&a->mu);
    return PULSE_OK;
}

void pulse_broker_admin_wake(struct pulse_broker_admin *a)
{
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->mu);
    pthread_cond_signal(&a->work_cv);
    pthread_mutex_unlock(&a->mu);
}

void pulse_broker_admin_count_commits(struct pulse_broker_admin *a, uint64_t n)
{
    atomic_fetch_add(&a->commits, n);
}

/* ---- the committer ---------------------------------------------------- */

/* A delete whose topic left the map: from now on the admin thread's. */
static void hand_to_admin(struct pulse_broker_admin *a, struct pulse_admin_job *job)
{
    pthread_mutex_lock(&a->mu);
    job->next = a->dying;
    a->dying = job;
    a->running--;
    pthread_cond_signal(&a->work_cv);
    pthread_mutex_unlock(&a->mu);
}

static void run_committer_job(struct pulse_broker_admin *a, struct pulse_admin_job *job)
{
    struct pulse_local *b = a->b;

    switch (job->kind) {
    case PULSE_ADMIN_CONSUMER_DELETE:
        job->st = pulse_meta_consumer_delete(b->meta, job->name);
        break;
    case PULSE_ADMIN_RETENTION:
        job->st = pulse_broker_topic_retention_run(b, job->name, job->retention_ms, job->retention_bytes,
                                                   job->compression, job->out);
        break;
    case PULSE_ADMIN_DELETE:
        job->st = pulse_broker_topic_delete_unmap(b, job->name, &job->topic);
        if (job->st == PULSE_OK) {
            hand_to_admin(a, job);
            return;
        }
        break;
    case PULSE_ADMIN_READ:
        pulse_failpoint_delay("cursor_read");
        job->st = job->read(b, job);
        break;
    case PULSE_ADMIN_COMMIT:
    case PULSE_ADMIN_CREATE:
        /* Never queued here alone (see run_committer_list, submit). */
        job->st = PULSE_INVALID;
        break;
    }
    complete(a, job);
}

/* Runs a list taken off the queue, in order; consecutive commits form one
 * group (one sync write). */
static void run_committer_list(struct pulse_broker_admin *a, struct pulse_admin_job *list)
{
    struct pulse_admin_job *group[GROUP_MAX_JOBS];

    while (list != NULL) {
        struct pulse_admin_job *job = list;
        if (job->kind != PULSE_ADMIN_COMMIT) {
            list = job->next;
            job->next = NULL;
            run_committer_job(a, job);
            continue;
        }
        size_t n = 0, cursors = 0;
        while (list != NULL && list->kind == PULSE_ADMIN_COMMIT && n < GROUP_MAX_JOBS &&
               (n == 0 || cursors + list->n <= GROUP_MAX_CURSORS)) {
            cursors += list->n;
            group[n++] = list;
            list = list->next;
        }
        pulse_broker_cursor_commit_group(a->b, group, n);
        for (size_t i = 0; i < n; i++)
            complete(a, group[i]);
    }
}

static void *committer_main(void *arg)
{
    struct pulse_broker_admin *a = arg;

    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (a->cq_head == NULL && !a->stop)
            pthread_cond_wait(&a->commit_cv, &a->mu);
        if (a->cq_head == NULL)
            break; /* stopping, and nothing left */
        struct pulse_admin_job *list = a->cq_head;
        a->cq_head = NULL;
        a->cq_tail = &a->cq_head;
        for (struct pulse_admin_job *j = list; j != NULL; j = j->next)
            a->running++;
        pthread_mutex_unlock(&a->mu);
        run_committer_list(a, list);
        pthread_mutex_lock(&a->mu);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* ---- the admin thread ------------------------------------------------- */

/* Under mu: a delete whose topic nobody else holds, else the oldest create
 * not parked; taken off its list and counted as running. */
static struct pulse_admin_job *take_work(struct pulse_broker_admin *a)
{
    struct pulse_admin_job **pp;

    for (pp = &a->dying; *pp != NULL; pp = &(*pp)->next) {
        if (atomic_load(&(*pp)->topic->refs) == 1)
            break;
    }
    if (*pp == NULL) {
        for (pp = &a->creates; *pp != NULL; pp = &(*pp)->next)
            if (!(*pp)->parked)
                break;
    }
    if (*pp == NULL)
        return NULL;
    struct pulse_admin_job *job = *pp;
    *pp = job->next;
    job->next = NULL;
    a->running++;
    return job;
}

static void run_worker_job(struct pulse_broker_admin *a, struct pulse_admin_job *job)
{
    struct pulse_local *b = a->b;

    if (job->kind == PULSE_ADMIN_DELETE) {
        job->st = pulse_broker_topic_delete_finish(b, job->topic);
        job->topic = NULL;
        /* The name is free (or the topic back): parked creates look again. */
        pthread_mutex_lock(&a->mu);
        for (struct pulse_admin_job *c = a->creates; c != NULL; c = c->next)
            c->parked = false;
        pthread_mutex_unlock(&a->mu);
        complete(a, job);
        return;
    }
    job->st = pulse_broker_topic_create_run(b, &job->def, job->out, job->errbuf, job->errlen);
    if (job->st == PULSE_BUSY) {
        /* A delete of this name has not finished: wait beside it. */
        pthread_mutex_lock(&a->mu);
        job->parked = true;
        append(&a->creates, job);
        a->running--;
        pthread_mutex_unlock(&a->mu);
        return;
    }
    complete(a, job);
}

static void *worker_main(void *arg)
{
    struct pulse_broker_admin *a = arg;

    pthread_mutex_lock(&a->mu);
    for (;;) {
        struct pulse_admin_job *job = take_work(a);
        if (job == NULL) {
            if (a->stop && a->creates == NULL && a->dying == NULL)
                break;
            int64_t wake = pulse_clock_mono_us() + ADMIN_MAX_SLEEP_US;
            struct timespec ts = {.tv_sec = (time_t)(wake / 1000000), .tv_nsec = (long)(wake % 1000000) * 1000};
            pthread_cond_timedwait(&a->work_cv, &a->mu, &ts);
            continue;
        }
        pthread_mutex_unlock(&a->mu);
        run_worker_job(a, job);
        pthread_mutex_lock(&a->mu);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* ---- lifecycle -------------------------------------------------------- */

pulse_status_t pulse_broker_admin_start(struct pulse_local *b, struct pulse_broker_admin **out)
{
    pulse_status_t st = PULSE_OK;
    struct pulse_broker_admin *a = pulse_calloc(1, sizeof *a);
    pthread_condattr_t ca;

    if (a == NULL)
        return PULSE_NOMEM;
    a->b = b;
    a->cq_tail = &a->cq_head;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->commit_cv, NULL);
    pthread_cond_init(&a->idle_cv, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->work_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&a->committer, NULL, committer_main, a) != 0) {
        PULSE_ERROR("admin: cannot start the committer thread");
        st = PULSE_NOMEM;
        goto out;
    }
    a->committer_started = true;
    if (pthread_create(&a->worker, NULL, worker_main, a) != 0) {
        PULSE_ERROR("admin: cannot start the admin thread");
        st = PULSE_NOMEM;
        goto out;
    }
    a->worker_started = true;
    *out = a;
    a = NULL;
out:
    pulse_broker_admin_stop(a);
    return st;
}

void pulse_broker_admin_drain(struct pulse_broker_admin *a)
{
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->mu);
    a->draining = true;
    while (a->cq_head != NULL || a->creates != NULL || a->dying != NULL || a->running > 0)
        pthread_cond_wait(&a->idle_cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
}

void pulse_broker_admin_stop(struct pulse_broker_admin *a)
{
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->mu);
    a->stop = true;
    pthread_cond_broadcast(&a->commit_cv);
    pthread_cond_broadcast(&a->work_cv);
    pthread_mutex_unlock(&a->mu);
    if (a->committer_started)
        pthread_join(a->committer, NULL);
    if (a->worker_started)
        pthread_join(a->worker, NULL);
    pthread_cond_destroy(&a->commit_cv);
    pthread_cond_destroy(&a->work_cv);
    pthread_cond_destroy(&a->idle_cv);
    pthread_mutex_destroy(&a->mu);
    pulse_free(a);
}

pulse_status_t pulse_broker_admin_metrics(struct pulse_local *b, struct pulse_broker_admin *a, struct pulse_buf *out)
{
    return pulse_buf_printf(
        out,
        "# HELP pulse_cursor_commits_total Cursor commits stored (concurrent ones share one metadata write).\n"
        "# TYPE pulse_cursor_commits_total counter\n"
        "pulse_cursor_commits_total %" PRIu64 "\n"
        "# HELP pulse_meta_sync_writes_total Sync writes of the metadata store, each one fdatasync of its log.\n"
        "# TYPE pulse_meta_sync_writes_total counter\n"
        "pulse_meta_sync_writes_total %" PRIu64 "\n"
        "# HELP pulse_topic_deletes_pending Deleted topics not yet removed: waiting for their last user to let go, or "
        "stalled on a failed metadata write.\n"
        "# TYPE pulse_topic_deletes_pending gauge\n"
        "pulse_topic_deletes_pending %u\n",
        a != NULL ? (uint64_t)atomic_load(&a->commits) : 0, b->meta != NULL ? pulse_meta_sync_writes(b->meta) : 0,
        atomic_load(&b->deleting));
}
