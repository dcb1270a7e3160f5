/* SPDX-License-Identifier: MIT */
/*
 * admin.h - the broker's two admin threads and their queues, so that no
 * admin operation ever blocks the thread that asked for it (an HTTP worker)
 * or an unrelated request.
 *
 *   committer  takes every queued job at once and runs them in arrival
 *              order. Runs of consecutive cursor commits are one group:
 *              each commit is validated alone against the live name map,
 *              the valid ones go to LevelDB in one sync write batch, and
 *              each job then gets its own status. A delete's first step
 *              (the topic leaves the map), retention changes and consumer
 *              deletes run here too, between the groups. Nothing here waits
 *              for another thread: a job waits only for its own I/O, one
 *              LevelDB sync write (a retention change first rewrites the
 *              topic's topic.json: fdatasync, rename, directory fsync).
 *              (Cursor reads run on the caller's thread; only a test that
 *              delays them, PULSE_FAILPOINT_DELAY=cursor_read:<ms>, queues
 *              them here, to make them complete later as a remote
 *              backend's would.)
 *   admin      topic creates (directories, logs, metadata: one at a time,
 *              which is what makes one of two creates of a name win), and
 *              the rest of each delete once its topic's last user has let
 *              go (pulse_broker_topic_delete_finish). It never sleeps while
 *              it has runnable work: a delete whose topic is still in use
 *              waits on a list, and a create of that name waits beside it,
 *              while other creates and deletes go ahead. (A delete that
 *              stalled after its decision is no job any more: a create of
 *              its name tries to finish it, and fails at once if it still
 *              cannot; topic.c.)
 *
 * Completion: every submitted job is completed exactly once, by the thread
 * that finishes it, with job->done(job->arg, job->st) and no lock held;
 * the job is then freed.
 *
 * Shutdown: pulse_broker_admin_drain refuses new jobs and waits until every
 * queued one has completed; pulse_broker_admin_stop then joins the threads.
 *
 * Internal to src/broker.
 */
#ifndef PULSE_BROKER_ADMIN_H
#define PULSE_BROKER_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/broker.h"
#include "common/status.h"
#include "meta/meta.h"

struct pulse_broker_admin;
struct pulse_broker_topic;
struct pulse_buf;
struct pulse_local;

enum pulse_admin_kind {
    PULSE_ADMIN_COMMIT = 0,      /* committer: cursor commit (grouped) */
    PULSE_ADMIN_CONSUMER_DELETE, /* committer */
    PULSE_ADMIN_RETENTION,       /* committer */
    PULSE_ADMIN_DELETE,          /* committer (unmap), then admin (finish) */
    PULSE_ADMIN_CREATE,          /* admin */
    PULSE_ADMIN_READ             /* committer: a cursor read, only when a test delays it (cursor.c) */
};

/* One queued operation. Allocated by the submitter (pulse_broker_admin_job_create),
 * owned by the admin module once submitted. */
struct pulse_admin_job {
    struct pulse_admin_job *next;
    enum pulse_admin_kind kind;
    pulse_admin_done_fn done;
    void *arg;
    char *errbuf; /* the submitter's, nullable; written before done */
    size_t errlen;
    pulse_status_t st;
    bool parked;                   /* create: waiting for a delete of its name */
    char name[PULSE_NAME_MAX + 1]; /* the consumer (commit, consumer delete) or the topic */
    /* commit: an owned copy of the cursors */
    struct pulse_cursor *cursors;
    size_t n;
    /* create */
    struct pulse_meta_topic def;
    /* create, retention: the submitter's out-parameter, nullable */
    struct pulse_topic_info **out;
    /* retention (a change of settings) */
    int64_t retention_ms;
    int64_t retention_bytes;
    int compression; /* -1: unchanged */
    /* delete: the topic on the dying list, between its two steps */
    struct pulse_broker_topic *topic;
    /* read: what it runs, on what, and the submitter's out-parameters */
    pulse_status_t (*read)(struct pulse_local *b, struct pulse_admin_job *job);
    char topic_name[PULSE_NAME_MAX + 1];
    uint32_t partition;
    void *read_out;
    size_t *n_out;
};

/* A zeroed job of kind with its completion; NULL on NOMEM. Thread: any
 * (the submitter's). Locks: none. */
struct pulse_admin_job *pulse_broker_admin_job_create(enum pulse_admin_kind kind, pulse_admin_done_fn done, void *arg);
/* Frees a job that was never submitted (or was refused), and the admin
 * module's own after completion. NULL is a no-op. Thread: whoever owns the
 * job (the submitter until pulse_broker_admin_submit took it). Locks:
 * none. */
void pulse_broker_admin_job_free(struct pulse_admin_job *job);

/* Starts both threads. Thread: the opener. */
pulse_status_t pulse_broker_admin_start(struct pulse_local *b, struct pulse_broker_admin **out);

/* Queues job (the admin module owns it from then on) and wakes its thread.
 * PULSE_SHUTDOWN once draining: the job is not taken (the caller frees it)
 * and will never complete. Thread: any. Locks: the admin mutex, briefly. */
pulse_status_t pulse_broker_admin_submit(struct pulse_broker_admin *a, struct pulse_admin_job *job);

/* A dying topic's reference count dropped to 1: the admin thread may finish
 * its delete. Called by pulse_broker_topic_release. Locks: the admin mutex,
 * briefly. */
void pulse_broker_admin_wake(struct pulse_broker_admin *a);

/* Refuses new jobs, then blocks until every queued job has completed. Thread:
 * any but the admin threads. Idempotent; NULL is a no-op. */
void pulse_broker_admin_drain(struct pulse_broker_admin *a);

/* Stops and joins both threads (after a drain: nothing may be queued) and
 * frees a. NULL is a no-op. */
void pulse_broker_admin_stop(struct pulse_broker_admin *a);

/* Appends the admin metrics (Prometheus text): cursor commits stored, the
 * metadata store's sync writes, deletes waiting for their topic's last
 * user. NULL a is allowed (zeros). */
pulse_status_t pulse_broker_admin_metrics(struct pulse_local *b, struct pulse_broker_admin *a, struct pulse_buf *out);

/* Counts n cursor commits stored by one group write (metrics). Thread: the
 * committer. */
void pulse_broker_admin_count_commits(struct pulse_broker_admin *a, uint64_t n);

#endif
