/* SPDX-License-Identifier: MIT */
/*
 * broker_int.h - state shared by the files of the local backend (local.c:
 * its table of the seam's functions; broker.c: lifecycle, syncer, waiters,
 * metrics; topic.c: topic admin; publish.c: routing and publish; fetch.c:
 * fetch; cursor.c: cursors; admin.c: the committer and admin threads;
 * maint.c: retention and compaction). Never included outside src/broker
 * except by the broker's unit tests.
 *
 * Topic objects are reference-counted. The name map holds one reference;
 * every lookup takes another (pulse_broker_topic_acquire) and gives it back
 * with pulse_broker_topic_release. Pending publishes and parked waiters hold
 * one each; the maintenance and heal threads hold one topic at a time.
 * Delete moves
 * the topic from the map to the dying list (which inherits the map's
 * reference), fails its pending publishes and waiters, and leaves the rest
 * to the admin thread, which waits - holding no lock - until only the dying
 * list's reference is left before closing the partition logs, so no plog is
 * closed under a reader and nobody waits for a delete but its own caller.
 *
 * Lock order (outer first): admin queue mutex (admin.c) -> map_lock -> mu.
 * Callbacks (publish done, waiter fn, admin done) are always called with
 * none of them held.
 */
#ifndef PULSE_BROKER_BROKER_INT_H
#define PULSE_BROKER_BROKER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "broker/backend.h"
#include "broker/local.h"

struct pulse_meta;
struct pulse_meta_topic;
struct pulse_compact;
struct pulse_fdcache;
struct pulse_broker_maint;
struct pulse_broker_admin;
struct pulse_admin_job;
struct pulse_broker_groups;
struct pulse_syncpool;

#define PULSE_BROKER_MAX_PARTITIONS 256
/* Cap of one encoded batch (one partition's share of one publish). */
#define PULSE_BROKER_MAX_BATCH_BYTES (64u * 1024 * 1024)
/* Prefix of a topic directory renamed aside by delete. Topic names may not
 * start with "__", so this can never be a live topic's directory. */
#define PULSE_BROKER_DELETED_PREFIX "__deleted-"
/* What a topic directory holds besides its partition directories (whose
 * names are decimal, so these never collide with one), and the data
 * directory's identity file; see datadir.c and docs/Storage.md. */
#define PULSE_BROKER_TOPIC_FILE "topic.json"
#define PULSE_BROKER_CREATE_MARK "creating"
#define PULSE_BROKER_DELETE_MARK "deleting"
#define PULSE_BROKER_IDENTITY_FILE "cluster.json"
/* fsync latency histogram bounds, seconds. */
#define PULSE_BROKER_FSYNC_BUCKETS 12

struct pulse_broker_topic {
    char name[PULSE_NAME_MAX + 1];
    /* Unique among every topic object this broker made (never reused, unlike
     * the object's address): what state kept beside a topic (heal.c) is
     * keyed by, so a recreated topic never inherits the old one's. */
    uint64_t uid;
    uint32_t nparts;
    enum pulse_cleanup cleanup;
    /* enum pulse_compression of the batches publish writes and compaction
     * rewrites; changed by the committer (a PATCH), read by any thread. */
    atomic_int compression;
    _Atomic int64_t retention_ms;
    _Atomic int64_t retention_bytes;
    int64_t segment_bytes;
    int64_t created_at_ms;
    struct pulse_plog **plogs; /* nparts entries */
    /* Per partition compaction state (cleanup=compact topics only, else
     * NULL); used by the maintenance thread alone. */
    struct pulse_compact **compactors;
    struct pulse_broker_topic *dying_next; /* the broker's dying list (map_lock) */
    atomic_int refs;
    atomic_bool deleted;
    /* On the dying list after its delete was decided but could not finish
     * (the metadata store could not be written): never served again, its
     * logs closed, the delete tried again by the next create of its name
     * and finished at the next start if not before (topic.c). */
    atomic_bool delete_stalled;
    atomic_uint rr; /* round-robin counter for keyless publishes */
    atomic_uint_fast64_t published_records;
    atomic_uint_fast64_t published_bytes;
    atomic_uint_fast64_t fetched_records;
    atomic_uint_fast64_t fetched_bytes;
};

/* A publish waiting for durability (every-write mode). */
struct pulse_broker_pending {
    struct pulse_broker_pending *next;
    struct pulse_broker_topic *topic; /* holds a reference */
    uint32_t n;
    uint32_t parts[PULSE_BROKER_MAX_PARTITIONS];
    int64_t ends[PULSE_BROKER_MAX_PARTITIONS];
    /* The epoch each partition's append was written in: with ends, what
     * pulse_plog_fate judges (durable, pending, or discarded by a reopen). */
    uint64_t epochs[PULSE_BROKER_MAX_PARTITIONS];
    pulse_publish_done_fn done;
    void *arg;
    char *errbuf; /* the publisher's; gets the reason of a failure */
    size_t errlen;
};

/* One position of a parked waiter. */
struct pulse_broker_wait_at {
    struct pulse_broker_topic *topic; /* holds a reference */
    uint32_t partition;
    int64_t offset; /* fires when the partition's high watermark passes it */
};

/* A parked waiter (long-poll, event stream, group fetch): fires when any of
 * its n positions has data, at its deadline, when a topic of it is deleted
 * (fail_topic) or at drain. On b->waiters, under mu. */
struct pulse_broker_waiter {
    struct pulse_broker_waiter *next;
    int64_t deadline_us;
    pulse_wait_fn fn;
    void *arg;
    size_t n;
    struct pulse_broker_wait_at at[]; /* n of them */
};

/* The local backend's state. It begins with the seam's struct pulse_broker
 * (backend.h), which is what pulse_broker_open hands out; pulse_local_of
 * converts back. */
struct pulse_local {
    struct pulse_broker base; /* first: base.ops == &pulse_local_ops */
    struct pulse_broker_config cfg;
    char *data_dir;
    char *topics_dir;
    struct pulse_meta *meta;
    /* Every partition's segment files are opened through it; destroyed
     * after the last log is closed. */
    struct pulse_fdcache *fdcache;
    int64_t started_at_ms;

    /* The name map: sorted by name, for binary search. */
    pthread_rwlock_t map_lock;
    struct pulse_broker_topic **topics;
    size_t ntopics;
    size_t topics_cap;
    /* Topics a delete took off the map and the admin thread has not yet
     * finished (map_lock): their names are reserved, so a create of one
     * waits instead of reusing a directory still in use. */
    struct pulse_broker_topic *dying;
    /* The committer and admin threads and their queues (admin.c). */
    struct pulse_broker_admin *admin;

    /* Syncer state, pending publishes and waiters. */
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* wakes the syncer (CLOCK_MONOTONIC) */
    pthread_cond_t idle_cv; /* drain and delete wait on it */
    struct pulse_broker_pending *pending_head;
    struct pulse_broker_pending **pending_tail;
    struct pulse_broker_waiter *waiters;
    bool kick;
    bool stop;
    bool draining;
    uint32_t inflight;               /* publishes between their draining check and registration */
    uint32_t completing;             /* publishes and waiters taken off the lists whose callbacks are running */
    atomic_uint deleting;            /* topics on the dying list */
    atomic_uint_fast64_t topic_uids; /* the last pulse_broker_topic.uid given */
    pthread_t syncer;
    bool syncer_started;
    /* Runs a pass's fdatasyncs side by side (syncpool.h); the syncer's. */
    struct pulse_syncpool *syncpool;
    /* Publishers running a partition's sync on their own thread right now
     * (pulse_broker_sync_inline); at most one, so that a burst never
     * blocks every HTTP worker in an fdatasync. */
    atomic_uint inline_leaders;
    /* Inline syncs move durable ends behind the syncer's back; it plans
     * their checkpoints (pulse_plog_checkpoint) when one wakes it, at most
     * once per checkpoint interval: not before this monotonic time, at
     * which the syncer looks at the checkpoints again by itself. */
    _Atomic int64_t inline_kick_at;
    /* Whether a publisher may lead inline with other publishes around
     * (pulse_broker_inline_allowed): the open client connections the front
     * end reported (pulse_broker_note_clients; 0 until it does), and a
     * running average of the fdatasync durations (sync_observer), in
     * microseconds. */
    atomic_uint clients;
    _Atomic int64_t sync_avg_us;
    bool checkpoint_kick;                  /* mu: such a wake-up; the next pass checkpoints */
    struct pulse_broker_maint *maint;      /* retention and compaction thread */
    struct pulse_broker_heal *heal;        /* reopens fenced partitions */
    struct pulse_broker_groups *groups;    /* consumer groups (groups.c) */
    struct pulse_broker_idem *idem_window; /* idempotency keys (idem.c) */
    int64_t next_interval_sync_us;
    int64_t next_checkpoint_us; /* syncer thread only: the earliest checkpoint owed */

    /* Metrics. */
    atomic_uint_fast64_t fsync_total;
    atomic_uint_fast64_t fsync_failed;
    atomic_uint_fast64_t fsync_sum_us;
    atomic_uint_fast64_t fsync_buckets[PULSE_BROKER_FSYNC_BUCKETS];
    uint64_t recovery_truncated_bytes;
    int64_t recovery_us;
};

/* Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), as the
 * signed 32-bit Java result reinterpreted unsigned. */
uint32_t pulse_broker_murmur2(const uint8_t *data, size_t len);

/* Kafka's default partition for a key: (murmur2(key) & 0x7fffffff) % n. */
uint32_t pulse_broker_key_partition(const uint8_t *key, size_t len, uint32_t nparts);

/* Looks a topic up and takes a reference; NULL if absent. Locks: map_lock
 * (read) briefly. */
struct pulse_broker_topic *pulse_broker_topic_acquire(struct pulse_local *b, const char *name);
void pulse_broker_topic_release(struct pulse_local *b, struct pulse_broker_topic *t);

/* References to every live topic, sorted by name; *out allocated
 * (pulse_free), each entry released by the caller. Holds every topic: for
 * short walks only (a sync pass, metrics), never for long work. */
pulse_status_t pulse_broker_topic_snapshot(struct pulse_local *b, struct pulse_broker_topic ***out, size_t *n_out);

/* The live topic whose name follows `after` ("" for the first), with a
 * reference; NULL past the last. Walks the map one topic at a time, so long
 * work (maintenance, the heal pass) holds only the topic it is working on.
 * Locks: map_lock (read) briefly. */
struct pulse_broker_topic *pulse_broker_topic_acquire_next(struct pulse_local *b, const char *after);

/* The first step of a delete. Thread: the committer only (so it is ordered
 * with cursor commits, see cursor.c). Moves the topic from the map to the
 * dying list, marks it deleted and fails its pending publishes and waiters
 * with PULSE_TOPIC_NOT_FOUND. *out gets the topic, borrowed: the dying list
 * keeps it until pulse_broker_topic_delete_finish. PULSE_TOPIC_NOT_FOUND if
 * it is not in the map. Locks: map_lock (write), then mu. Never blocks. */
pulse_status_t pulse_broker_topic_delete_unmap(struct pulse_local *b, const char *name,
                                               struct pulse_broker_topic **out);

/* The rest of a delete, once only the dying list's reference is left.
 * Thread: the admin thread only. Writes the "deleting" marker (the
 * decision), commits the metadata removal, closes the logs, renames the
 * directory aside, frees t, removes the files. When the marker cannot be
 * written (and is surely absent) nothing durable changed: the topic goes
 * back into the map and the error is returned. Once the marker may be
 * durable the topic is never served again: if a later step fails, t stays
 * on the dying list with delete_stalled set (see topic.c "Delete") and
 * PULSE_OK is returned for a decided delete, the error if even the marker
 * is uncertain. Blocks on the metadata sync write and the file system. */
pulse_status_t pulse_broker_topic_delete_finish(struct pulse_local *b, struct pulse_broker_topic *t);

/* A create whose spec pulse_broker_topic_create_async resolved into def.
 * Thread: the admin thread only (the only thread that adds topics, which is
 * what makes one of two creates of a name win). PULSE_BUSY when the name's
 * delete has not finished yet: nothing was done, run it again after that
 * delete. Blocks on the file system and the metadata sync write. */
pulse_status_t pulse_broker_topic_create_run(struct pulse_local *b, const struct pulse_meta_topic *def,
                                             struct pulse_topic_info **out, char *errbuf, size_t errlen);

/* A retention (and compression: -1 keeps it) change. Thread: the
 * committer only (ordered with deletes). Blocks on the metadata sync
 * write. */
pulse_status_t pulse_broker_topic_retention_run(struct pulse_local *b, const char *name, int64_t retention_ms,
                                                int64_t retention_bytes, int compression,
                                                struct pulse_topic_info **out);

/* Validates and writes a group of queued cursor commits in one sync batch,
 * setting each job's status (and errbuf). Thread: the committer only. */
void pulse_broker_cursor_commit_group(struct pulse_local *b, struct pulse_admin_job **jobs, size_t n);

/* At open: makes the topic of a stored definition and puts it into the map,
 * its logs not open yet (pulse_broker_topics_open opens them). *out is
 * borrowed: the map's reference, closed with the broker. PULSE_CORRUPT for
 * a definition out of range; errbuf names the topic and the cause. Thread:
 * the opener, before the broker's threads start. */
pulse_status_t pulse_broker_topic_add(struct pulse_local *b, const struct pulse_meta_topic *def,
                                      struct pulse_broker_topic **out, char *errbuf, size_t errlen);

/* At open, once every log is recovered: a consumer's cursor is committed
 * only at or below HW, so the highest cursor of a partition proves its HW
 * reached that offset. A partition whose recovered log end is below it
 * lost acknowledged data that nothing on its disk proves (a damaged tail
 * no checkpoint covers, a lost active segment): pulse_plog_raise_end
 * records the gap as missing and moves the log end, so those offsets are
 * never handed out again. One scan of the cursors. A failure to record
 * fails the open (errbuf says which partition). Thread: the opener, before
 * the broker's threads start. */
pulse_status_t pulse_broker_cursor_raise_ends(struct pulse_local *b, char *errbuf, size_t errlen);

/* Closes a topic's logs and frees it (refs must be down to the caller's). */
void pulse_broker_topic_destroy(struct pulse_broker_topic *t);

/* At most this many extra threads close partition logs at shutdown, one
 * per PULSE_BROKER_CLOSE_SHARE partitions: the syncs and snapshot writes of
 * a stop of many written partitions overlap instead of queueing behind one
 * another. A journalling file system commits concurrent syncs together; on
 * one without a journal each sync waits for its own small writes and they
 * overlap only in the device queue, where 32 closers stopped 10,000
 * written partitions in about half the time 8 took (docs/Performance.md
 * "Closing the partitions on several threads"). The threads live for the
 * stop only and do nothing but wait. */
#define PULSE_BROKER_CLOSERS 32
#define PULSE_BROKER_CLOSE_SHARE 64

/* Closes every partition log of topics[0..n) (pulse_plog_close: sync, and
 * the snapshot when the durable state moved) on a pool of the caller and up
 * to PULSE_BROKER_CLOSERS more threads (pulse_syncpool_for), each log
 * exactly once, and leaves the topics with their logs closed (NULL) for
 * pulse_broker_topic_destroy. A failed close is logged with its topic,
 * partition and cause, as a destroy logs it, and the others are still
 * closed; the answer is the first failure in (topic, partition) order,
 * PULSE_OK when none failed. Returns once every close returned.
 * Thread: the closer of the broker, once nothing else uses the logs (the
 * broker's threads are joined). Out of threads it closes them on the
 * caller alone; out of memory it closes none, leaving them to the destroy
 * (which logs their failures the same way). */
pulse_status_t pulse_broker_topic_close_all(struct pulse_broker_topic **topics, size_t n);

/* At most this many extra threads open partition logs at start, one per
 * PULSE_BROKER_OPEN_SHARE partitions (opener.c): a start of many cleanly
 * stopped partitions is CPU and system calls, which several cores share. */
#define PULSE_BROKER_OPENERS 3
#define PULSE_BROKER_OPEN_SHARE 64

/* The threads of a start over defs[0..ndefs): a pool of the caller and
 * one more thread per PULSE_BROKER_OPEN_SHARE partitions, at most
 * PULSE_BROKER_OPENERS more; NULL when there are too few partitions for a
 * second thread or no thread can be started (the caller then does the work
 * alone: pulse_syncpool_run runs a NULL pool's items on the caller). The
 * caller closes it (pulse_syncpool_close) before the broker's threads
 * start. Thread: the opener. */
struct pulse_syncpool *pulse_broker_start_pool(const struct pulse_meta_topic *defs, size_t ndefs);

/* At open: makes the topics of defs[0..ndefs) (sorted by name, as the
 * store lists them) and puts them into the map, then opens every partition
 * log (recovery) on pool (nullable: on the caller alone), adding to rep.
 * The answer, errbuf and rep are those of opening them one after the other
 * in order: the first failure in (topic, partition) order (PULSE_CORRUPT
 * for an invalid stored definition; errbuf names the topic and the cause).
 * Returns once every open has returned. On failure the topics made stay in
 * the map with whichever logs opened: the caller closes the broker.
 * Thread: the opener, before the broker's threads start. */
pulse_status_t pulse_broker_topics_open(struct pulse_local *b, struct pulse_syncpool *pool,
                                        const struct pulse_meta_topic *defs, size_t ndefs,
                                        struct pulse_broker_open_report *rep, char *errbuf, size_t errlen);

/* Opens the partition logs of t under <topics>/<name>/<p>, adding what
 * recovery did to the totals (nullable). */
pulse_status_t pulse_broker_topic_open_logs(struct pulse_local *b, struct pulse_broker_topic *t,
                                            struct pulse_broker_open_report *report);

/* The configuration every partition log of t is opened with. */
void pulse_broker_log_config(struct pulse_local *b, const struct pulse_broker_topic *t, struct pulse_plog_config *pcfg);

/* Opens partition p of t into t->plogs[p] with pcfg (from
 * pulse_broker_log_config): checks that its directory is there and
 * writable, runs recovery, and logs the failure or what recovery repaired
 * or found damaged (one line at most, naming the topic and partition). rec
 * gets what recovery did. Thread: any; different partitions may be opened
 * on different threads at once (the opener's threads, opener.c), none of
 * them twice. */
pulse_status_t pulse_broker_partition_open(const struct pulse_local *b, struct pulse_broker_topic *t, uint32_t p,
                                           const struct pulse_plog_config *pcfg, struct pulse_plog_recovery *rec);

/* Adds one opened partition's recovery to the totals of report (nullable). */
void pulse_broker_open_report_add(struct pulse_broker_open_report *report, const struct pulse_plog_recovery *rec);

/* Fails every pending publish and waiter of t with st (delete). Locks: mu,
 * released before the callbacks run. */
void pulse_broker_fail_topic(struct pulse_local *b, struct pulse_broker_topic *t, pulse_status_t st);

/*
 * The publisher leads its own partition's sync (every-write mode; broker.c).
 * A one-partition publish that finds no other publish pending when it
 * registers its own (on b->pending_head; publish.c hand_to_syncer, under
 * b->mu) claims the broker's one inline slot
 * (pulse_broker_sync_inline_claim: false when another publisher holds it;
 * the publish then goes to the syncer as before) and calls
 * pulse_broker_sync_inline with the end of its append: when no sync of
 * that partition is running it runs one on this thread
 * (pulse_plog_try_sync), then completes every pending publish that sync
 * made durable, its own included, from this thread (complete_ready: their
 * done callbacks run here, batched); when one is running, or the sync
 * could not run, it kicks the syncer, which runs the next one. Either way
 * the claim is given back. The caller holds a reference on t and counts in
 * b->inflight meanwhile (so a drain waits for it). Never acknowledges
 * anything HW does not cover: completion is decided by pulse_plog_fate, as
 * for the syncer's passes.
 * Thread: a publisher (an HTTP worker). Locks: none held on entry; takes
 * the log's sync_lock and wlock (plog.h), then b->mu; blocks on one
 * fdatasync.
 */
bool pulse_broker_sync_inline_claim(struct pulse_local *b);
/* Whether a publisher may lead its sync inline at all: true while at most
 * one client connection is open (a lone publisher; lonely: no other
 * publish waits for a sync either), or while fdatasyncs take less than
 * PULSE_BROKER_FAST_SYNC_US on average, when blocking a worker in one costs
 * less than handing the publish to the syncer and back. Otherwise the
 * syncer's group commit serves it, and no worker blocks. Thread: any.
 * Locks: none (atomics). */
#define PULSE_BROKER_FAST_SYNC_US 50
bool pulse_broker_inline_allowed(struct pulse_local *b, bool lonely);
void pulse_broker_sync_inline(struct pulse_local *b, struct pulse_broker_topic *t, uint32_t p, int64_t end);

/* ---- the local backend's functions of the seam (local.c's table) ---- */

/* The table: every call of broker.h, served by this backend. */
extern const struct pulse_broker_ops pulse_local_ops;

/* The local state behind a broker this backend opened. */
static inline struct pulse_local *pulse_local_of(struct pulse_broker *base)
{
    return (struct pulse_local *)base;
}

static inline const struct pulse_local *pulse_local_of_const(const struct pulse_broker *base)
{
    return (const struct pulse_local *)base;
}

/* Each has the contract of its broker.h counterpart (pulse_broker_X is
 * pulse_local_X) and the behaviour that header notes for this backend. */
void pulse_local_drain(struct pulse_broker *base);
void pulse_local_close(struct pulse_broker *base);
const char *pulse_local_cluster_id(const struct pulse_broker *base);
const char *pulse_local_broker_id(const struct pulse_broker *base);
int64_t pulse_local_started_at_ms(const struct pulse_broker *base);
pulse_status_t pulse_local_topic_create_async(struct pulse_broker *base, const struct pulse_topic_spec *spec,
                                              struct pulse_topic_info **out, pulse_admin_done_fn done, void *arg,
                                              char *errbuf, size_t errlen);
pulse_status_t pulse_local_topic_get(struct pulse_broker *base, const char *name, bool with_stats,
                                     struct pulse_topic_info **out);
pulse_status_t pulse_local_topic_list(struct pulse_broker *base, bool with_stats, struct pulse_topic_info ***out,
                                      size_t *n_out);
pulse_status_t pulse_local_topic_set_retention_async(struct pulse_broker *base, const char *name, int64_t retention_ms,
                                                     int64_t retention_bytes, struct pulse_topic_info **out,
                                                     pulse_admin_done_fn done, void *arg);
pulse_status_t pulse_local_topic_change_async(struct pulse_broker *base, const char *name,
                                              const struct pulse_topic_change *chg, struct pulse_topic_info **out,
                                              pulse_admin_done_fn done, void *arg);
pulse_status_t pulse_local_topic_delete_async(struct pulse_broker *base, const char *name, pulse_admin_done_fn done,
                                              void *arg);
pulse_status_t pulse_local_publish(struct pulse_broker *base, const char *topic,
                                   const struct pulse_publish_record *recs, size_t n,
                                   struct pulse_offset_pair *offsets_out, pulse_publish_done_fn done, void *arg,
                                   bool *pending_out, char *errbuf, size_t errlen);
pulse_status_t pulse_local_publish_idem(struct pulse_broker *base, const char *topic,
                                        const struct pulse_publish_record *recs, size_t n,
                                        struct pulse_publish_idem *idem, struct pulse_offset_pair *offsets_out,
                                        pulse_publish_done_fn done, void *arg, bool *pending_out, char *errbuf,
                                        size_t errlen);
pulse_status_t pulse_local_fetch_create(struct pulse_broker *base, const char *topic, uint32_t partition,
                                        struct pulse_fetch **out);
pulse_status_t pulse_local_fetch_read(struct pulse_broker *base, struct pulse_fetch *f, int64_t offset,
                                      uint64_t max_bytes, struct pulse_fetch_pos *pos, uint64_t *need);
pulse_status_t pulse_local_fetch_next(struct pulse_fetch *f, struct pulse_record *rec);
void pulse_local_fetch_rewind(struct pulse_fetch *f);
void pulse_local_fetch_destroy(struct pulse_fetch *f);
pulse_status_t pulse_local_fetch_probe(struct pulse_broker *base, const char *topic, uint32_t partition, int64_t offset,
                                       struct pulse_fetch_pos *pos);
pulse_status_t pulse_local_fetch_raw(struct pulse_broker *base, const char *topic, uint32_t partition, int64_t offset,
                                     uint64_t max_bytes, struct pulse_raw_slice *out);
pulse_status_t pulse_local_offset_for_time(struct pulse_broker *base, const char *topic, uint32_t partition,
                                           int64_t ts_ms, int64_t *offset_out);
void pulse_local_note_fetched(struct pulse_broker *base, const char *topic, uint64_t records, uint64_t bytes);
void pulse_local_note_clients(struct pulse_broker *base, uint32_t open);
pulse_status_t pulse_local_wait_any(struct pulse_broker *base, const struct pulse_wait_pos *pos, size_t n,
                                    int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out,
                                    size_t *ready_out);
/*
 * Ends the parked waiter that pulse_local_wait_any parked with (fn, arg)
 * now: it is taken off the syncer's list and fn(arg, PULSE_OK) runs on the
 * caller's thread before this returns (it must not hold a lock fn takes).
 * false when no such waiter is parked (it fired, is firing, or never
 * parked). The caller guarantees (fn, arg) names one waiter: arg stays
 * allocated while it may be parked. Not in the seam: the local backend's
 * own waits (groups.c) use it when their wait ends another way. Locks: mu,
 * briefly.
 */
bool pulse_local_wait_cancel(struct pulse_local *b, pulse_wait_fn fn, void *arg);
pulse_status_t pulse_local_cursor_commit_async(struct pulse_broker *base, const char *consumer,
                                               const struct pulse_cursor *cursors, size_t n, pulse_admin_done_fn done,
                                               void *arg, char *errbuf, size_t errlen);
pulse_status_t pulse_local_cursor_get_async(struct pulse_broker *base, const char *consumer, const char *topic,
                                            uint32_t partition, struct pulse_cursor *out, pulse_admin_done_fn done,
                                            void *arg);
pulse_status_t pulse_local_cursor_list_async(struct pulse_broker *base, const char *consumer, struct pulse_cursor **out,
                                             size_t *n_out, pulse_admin_done_fn done, void *arg);
pulse_status_t pulse_local_consumer_list_async(struct pulse_broker *base, char ***names_out, size_t *n_out,
                                               pulse_admin_done_fn done, void *arg);
pulse_status_t pulse_local_consumer_delete_async(struct pulse_broker *base, const char *consumer,
                                                 pulse_admin_done_fn done, void *arg);
pulse_status_t pulse_local_metrics(struct pulse_broker *base, struct pulse_buf *out);
pulse_status_t pulse_local_metrics_per_topic(struct pulse_broker *base, struct pulse_buf *out);
pulse_status_t pulse_local_fenced_list(struct pulse_broker *base, struct pulse_fenced_partition **out, size_t *n_out);

/* Consumer groups (groups.c). */
pulse_status_t pulse_local_group_join(struct pulse_broker *base, const char *group,
                                      const struct pulse_group_join_spec *spec, struct pulse_group_view *view,
                                      char *errbuf, size_t errlen);
pulse_status_t pulse_local_group_heartbeat(struct pulse_broker *base, const char *group, const char *member,
                                           struct pulse_group_view *view);
pulse_status_t pulse_local_group_leave(struct pulse_broker *base, const char *group, const char *member);
pulse_status_t pulse_local_group_poll_async(struct pulse_broker *base, const char *group, const char *member,
                                            const struct pulse_group_resume *from, struct pulse_group_view *view,
                                            pulse_admin_done_fn done, void *arg, char *errbuf, size_t errlen);
pulse_status_t pulse_local_group_fetched(struct pulse_broker *base, const char *group, const char *member,
                                         uint64_t generation, const struct pulse_group_partition *pos, size_t n);
pulse_status_t pulse_local_group_wait(struct pulse_broker *base, const char *group, const char *member,
                                      uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                      int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out);
pulse_status_t pulse_local_group_commit_async(struct pulse_broker *base, const char *group, const char *member,
                                              uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                              struct pulse_group_view *view, pulse_admin_done_fn done, void *arg,
                                              char *errbuf, size_t errlen);
pulse_status_t pulse_local_group_list(struct pulse_broker *base, char ***names_out, size_t *n_out);
pulse_status_t pulse_local_group_describe_async(struct pulse_broker *base, const char *group,
                                                struct pulse_group_info **out, pulse_admin_done_fn done, void *arg);

/* The reads behind the asynchronous cursor calls, on the caller's thread
 * (cursor.c): also what metrics use. */
pulse_status_t pulse_local_cursor_get(struct pulse_local *b, const char *consumer, const char *topic,
                                      uint32_t partition, struct pulse_cursor *out);
pulse_status_t pulse_local_cursor_list(struct pulse_local *b, const char *consumer, struct pulse_cursor **out,
                                       size_t *n_out);
pulse_status_t pulse_local_consumer_list(struct pulse_local *b, char ***names_out, size_t *n_out);

/* ---- datadir.c: the data directory's own metadata --------------------- */

struct pulse_meta_topic;

/* Makes the data directory and topics/ if missing and checks that both are
 * directories this process may write; errbuf names the cause ("permission
 * denied: PATH (running as uid N)", "not a directory: PATH"). */
pulse_status_t pulse_broker_datadir_prepare(struct pulse_local *b, char *errbuf, size_t errlen);

/* Reads <data>/cluster.json, opens the metadata store with it (a store
 * without identity gets the file's; a store with another one is refused),
 * and writes the file when it is missing or damaged. Sets b->meta. */
pulse_status_t pulse_broker_datadir_open_store(struct pulse_local *b, struct pulse_broker_open_report *rep,
                                               char *errbuf, size_t errlen);

/* Brings topics/ and the store into agreement (the rule at the top of
 * datadir.c): removes unfinished creates and deletes, adopts directories
 * whose topic.json is valid, writes missing topic.json files, and refuses
 * (PULSE_INVALID, nothing changed) when a directory is undecidable. *defs
 * (pulse_free) is replaced by the store's final topic list. */
pulse_status_t pulse_broker_datadir_reconcile(struct pulse_local *b, struct pulse_meta_topic **defs, size_t *ndefs,
                                              struct pulse_broker_open_report *rep, char *errbuf, size_t errlen);

/* After a topic's logs failed to open: when the cause is a file or
 * directory of the topic this process may not write, says so in errbuf
 * ("permission denied: PATH (running as uid N)") and returns true. */
bool pulse_broker_datadir_explain(struct pulse_local *b, const char *topic, char *errbuf, size_t errlen);

/* Writes <topics>/<name>/topic.json durably (temp, fdatasync, rename,
 * directory fsync). The directory must exist. */
pulse_status_t pulse_broker_topic_file_write(struct pulse_local *b, const struct pulse_meta_topic *def);

/* Creates (durably) or removes (unlink + directory fsync; absent is fine)
 * the marker file `mark` (PULSE_BROKER_CREATE_MARK or _DELETE_MARK) in the
 * topic's directory. */
pulse_status_t pulse_broker_mark_set(struct pulse_local *b, const char *topic, const char *mark);
pulse_status_t pulse_broker_mark_clear(struct pulse_local *b, const char *topic, const char *mark);

/* Renames <topics>/<topic> to <topics>/__deleted-<nonce> (aside, asidelen
 * bytes, gets the new path) and fsyncs topics/. */
pulse_status_t pulse_broker_dir_set_aside(struct pulse_local *b, const char *topic, char *aside, size_t asidelen);

/* The broker's file system: cfg.io, or the real one when that is NULL.
 * Every file-system call of the broker goes through it (datadir.c,
 * topic.c, broker.c), so a test's faulty io (tests/lib/faultio.c) reaches
 * every step of topic create and delete. */
const struct pulse_io *pulse_broker_io(const struct pulse_local *b);

/* fsync of a directory through pulse_broker_io; 0 or -1 (logged). */
int pulse_broker_fsync_dir(const struct pulse_local *b, const char *path);

/* rm -rf of path through pulse_broker_io (pulse_io_remove_tree: never
 * follows a link, logs what it cannot remove); 0 when path is gone, -1
 * otherwise. The parent is not fsynced. */
int pulse_broker_remove_tree(const struct pulse_local *b, const char *path);

#endif
