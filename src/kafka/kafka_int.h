/* SPDX-License-Identifier: MIT */
/*
 * kafka_int.h - inside the Kafka backend (kafka.h). Never included from
 * another directory (tests include it to reach the mock cluster).
 *
 * Ownership and locks:
 *   - prod (the producer) serves publishes, metadata, watermarks and the
 *     Admin API; it is thread-safe (librdkafka). kpoll serves its delivery
 *     reports.
 *   - fetchers[i] are legacy consumers (no group): each is used by one
 *     reader at a time, under its own mutex (librdkafka silently re-seeks a
 *     second reader of the same partition of a handle, kafka-librdkafka
 *     notes section 4).
 *   - meta_mu guards the metadata cache (names, partition counts); no call
 *     to the cluster is made with it held.
 *   - wait_mu guards the waiter list; waiters are fired with it released.
 *   - admin_mu guards the admin job queue.
 *   - stats_mu guards the last statistics JSON of librdkafka.
 * Lock order: none is held while another is taken.
 */
#ifndef PULSE_KAFKA_KAFKA_INT_H
#define PULSE_KAFKA_KAFKA_INT_H

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "broker/backend.h"
#include "kafka/kafka.h"

struct kwaiter;
struct kjob;
struct kmwait;
struct kgroups;

/* What the cache knows of a partition's positions (kmeta.c). */
struct kmeta_marks {
    int64_t lo, hi;    /* log start, high watermark */
    int64_t raised_us; /* mono time a delivery report last raised hi; 0 never */
    bool known;        /* asked at least once */
};

/* One topic of the metadata cache. */
struct kmeta_topic {
    char *name;
    uint32_t partitions;
    struct kmeta_marks *marks; /* partitions entries */
};

struct kfetcher {
    pthread_mutex_t mu; /* one reader at a time */
    rd_kafka_t *rk;
};

struct pulse_kafka {
    struct pulse_broker base; /* first: the seam's handle */
    int64_t started_at_ms;
    char cluster_id[128];
    char broker_id[128];
    int64_t timeout_ms; /* kafka.request-timeout */
    uint32_t max_records;
    uint32_t default_partitions;

    rd_kafka_t *mock_owner; /* the mock's handle (tests), or NULL */
    rd_kafka_mock_cluster_t *mock;
    int mock_brokers;
    char **mock_deleted; /* topics the mock hides (kadmin.c; kadmin only) */
    size_t n_mock_deleted;
    rd_kafka_t *prod;
    struct kfetcher *fetchers;
    size_t n_fetchers;
    atomic_uint next_fetcher;
    atomic_uint round_robin; /* partition of the next keyless publish */

    atomic_bool draining;
    atomic_bool stopping;
    atomic_bool cluster_ok; /* the last metadata refresh reached the cluster */
    atomic_ullong published, publish_failed, fetched_records, fetched_bytes;
    atomic_long inflight; /* publishes submitted, not completed */

    pthread_mutex_t meta_mu;
    struct kmeta_topic *topics; /* sorted by name */
    size_t n_topics;
    int64_t meta_at_us;      /* mono time of the last refresh; 0 = never */
    int64_t marks_at_us;     /* of the last refresh that got the watermarks too */
    atomic_bool meta_wanted; /* a reader missed a topic: refresh soon */
    /* Topic lookups waiting for a refresh (kmeta.c, under meta_mu). */
    struct kmwait *meta_waiters;
    uint64_t meta_started;    /* refreshes begun (under meta_mu) */
    uint64_t meta_installed;  /* the round whose answer the cache holds (under meta_mu) */
    atomic_long meta_waiting; /* entries of meta_waiters */

    pthread_mutex_t stats_mu;
    char *stats_json;

    pthread_t poll_thread;
    bool poll_started;

    pthread_mutex_t wait_mu;
    pthread_cond_t wait_cv;
    struct kwaiter *waiters;
    pthread_t wait_thread;
    bool wait_started;

    pthread_mutex_t admin_mu;
    pthread_cond_t admin_cv;
    struct kjob *jobs_head, *jobs_tail;
    long jobs_running;
    pthread_t admin_thread;
    bool admin_started;

    struct kgroups *groups; /* consumer groups: the group log (kgroups.h) */
};

static inline struct pulse_kafka *kafka_of(struct pulse_broker *b)
{
    return (struct pulse_kafka *)(void *)b;
}

/* Maps a librdkafka error to a status (UNAVAILABLE for a cluster that
 * cannot be reached or answered too late). */
pulse_status_t pulse_kafka_status(rd_kafka_resp_err_t err);
/* Whether a broker's error passes by itself (a leader that moved or is
 * not elected yet, a replica behind, a request timed out in the broker):
 * the calls librdkafka does not retry on its own (ListOffsets) ask again,
 * and a read skips it while its consumer goes on fetching. */
bool pulse_kafka_retriable(rd_kafka_resp_err_t err);

extern const struct pulse_broker_ops pulse_kafka_ops;

/* ---- kmeta.c: the metadata cache -------------------------------------- */

/* Refreshes the cache from the cluster (all topics; naming none, so the
 * mock creates nothing). Blocks up to the request timeout; sets
 * cluster_ok. Thread: any but kpoll. */
pulse_status_t pulse_kafka_meta_refresh(struct pulse_kafka *k);
/* The same, then the log start and high watermark of every partition (two
 * ListOffsets calls for all, bounded by the request timeout): what
 * topic_get and topic_list serve. kwait calls it every second. */
pulse_status_t pulse_kafka_meta_refresh_marks(struct pulse_kafka *k);
/* A delivery report acknowledged offset hw - 1 of (topic, partition):
 * raises the cached high watermark to hw. Thread: kpoll. */
void pulse_kafka_meta_note_hw(struct pulse_kafka *k, const char *topic, int32_t partition, int64_t hw);

/* The partition count of topic: from the cache when it is fresh (under a
 * second), else after a refresh; PULSE_TOPIC_NOT_FOUND after a refresh
 * that does not know it either; PULSE_UNAVAILABLE when the cluster is
 * known to be gone (at once) or does not answer. */
pulse_status_t pulse_kafka_meta_partitions(struct pulse_kafka *k, const char *topic, uint32_t *n_out);

/* topic_lookup_async of the table: answers from the cache when it can
 * (the decision pulse_kafka_meta_partitions makes), else parks the caller's
 * done until a refresh that began after it parked finishes (kwait runs one
 * for all waiters; a refresh that fails answers every waiter). done gets
 * PULSE_OK, PULSE_TOPIC_NOT_FOUND, PULSE_UNAVAILABLE (errbuf says the
 * cluster cannot be reached) or PULSE_SHUTDOWN. Never calls the cluster.
 * Thread: any. */
pulse_status_t pulse_kafka_topic_lookup_async(struct pulse_broker *b, const char *topic, pulse_admin_done_fn done,
                                              void *arg, bool *pending_out, char *errbuf, size_t errlen);
/* Whether a lookup waits for a refresh (kwait then runs one at once). */
bool pulse_kafka_meta_lookups_waiting(struct pulse_kafka *k);
/* Answers every waiting lookup with st (drain). */
void pulse_kafka_meta_lookups_fire_all(struct pulse_kafka *k, pulse_status_t st);

/* The cache alone, whatever its age: 1 (and *n_out) when it has topic, 0
 * when it does not, -1 when it was never filled. Never calls the cluster. */
int pulse_kafka_meta_cached(struct pulse_kafka *k, const char *topic, uint32_t *n_out);

/* Copies the cached names, counts and marks (a refresh of the names first
 * when stale): *out (pulse_kafka_meta_snapshot_free). */
pulse_status_t pulse_kafka_meta_snapshot(struct pulse_kafka *k, struct kmeta_topic **out, size_t *n_out);
void pulse_kafka_meta_snapshot_free(struct kmeta_topic *t, size_t n);

/* Log start and high watermark of each entry of list (topic, partition),
 * in two ListOffsets calls (earliest, latest) bounded by the timeout:
 * list->elems[i].offset gets the HW; lo (n entries, nullable) the start. */
pulse_status_t pulse_kafka_watermarks(struct pulse_kafka *k, rd_kafka_topic_partition_list_t *list, int64_t *lo);

/* The high watermark of each entry of list (grouped by topic) into hi[]:
 * one ListOffsets call, or one per topic when that fails for a topic's
 * own reason (librdkafka 2.0.2 then answers no entry at all); a negative
 * value for an entry not answered. PULSE_UNAVAILABLE when the cluster did
 * not answer. Blocks up to the request timeout (per call). */
pulse_status_t pulse_kafka_latest_marks(struct pulse_kafka *k, const rd_kafka_topic_partition_list_t *list,
                                        int64_t *hi);

/* topic_get / topic_list of the table: from the cache alone, never a call
 * to the cluster (the seam's rule for them); PULSE_UNAVAILABLE when the
 * cluster is gone or the cache is too old. */
pulse_status_t pulse_kafka_topic_get(struct pulse_broker *b, const char *name, bool with_stats,
                                     struct pulse_topic_info **out);
pulse_status_t pulse_kafka_topic_list(struct pulse_broker *b, bool with_stats, struct pulse_topic_info ***out,
                                      size_t *n_out);

/* ---- kpublish.c --------------------------------------------------------- */

void pulse_kafka_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque);
pulse_status_t pulse_kafka_publish(struct pulse_broker *b, const char *topic, const struct pulse_publish_record *recs,
                                   size_t n, struct pulse_offset_pair *offsets_out, pulse_publish_done_fn done,
                                   void *arg, bool *pending_out, char *errbuf, size_t errlen);

/* ---- kfetch.c ----------------------------------------------------------- */

pulse_status_t pulse_kafka_fetch_create(struct pulse_broker *b, const char *topic, uint32_t partition,
                                        struct pulse_fetch **out);
pulse_status_t pulse_kafka_fetch_read(struct pulse_broker *b, struct pulse_fetch *f, int64_t offset, uint64_t max_bytes,
                                      struct pulse_fetch_pos *pos, uint64_t *need);
pulse_status_t pulse_kafka_fetch_next(struct pulse_fetch *f, struct pulse_record *rec);
void pulse_kafka_fetch_rewind(struct pulse_fetch *f);
void pulse_kafka_fetch_destroy(struct pulse_fetch *f);
pulse_status_t pulse_kafka_fetch_probe(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t offset,
                                       struct pulse_fetch_pos *pos);
pulse_status_t pulse_kafka_offset_for_time(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t ts_ms,
                                           int64_t *offset_out);

/* ---- kwait.c -------------------------------------------------------------- */

pulse_status_t pulse_kafka_wait_any(struct pulse_broker *b, const struct pulse_wait_pos *pos, size_t n,
                                    int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out,
                                    size_t *ready_out);
/* Parks one waiter on n positions (topics[i], partitions[i], offsets[i]):
 * it fires when the high watermark of any passes its offset, a topic of
 * any is deleted (PULSE_TOPIC_NOT_FOUND) or the deadline passes
 * (PULSE_OK); always parked (wait_any of the table checks the positions
 * first). PULSE_INVALID, PULSE_SHUTDOWN, PULSE_NOMEM at once. */
pulse_status_t pulse_kafka_wait_positions(struct pulse_kafka *k, const char *const *topics, const uint32_t *partitions,
                                          const int64_t *offsets, size_t n, int64_t deadline_mono_us, pulse_wait_fn fn,
                                          void *arg, bool *parked_out);
/* Wakes kwait early (a publish completed: a waiter may be due). */
void pulse_kafka_wait_kick(struct pulse_kafka *k);
/* Fires every waiter with st (drain). */
void pulse_kafka_wait_fire_all(struct pulse_kafka *k, pulse_status_t st);
void *pulse_kafka_wait_main(void *arg);

/* ---- kadmin.c ------------------------------------------------------------- */

void *pulse_kafka_admin_main(void *arg);
/* A job of another file for kadmin: fn(k, ctx) runs there (it may call the
 * cluster, each call bounded by the request timeout), then done(arg, its
 * status) with no lock held, then ctx_free(ctx) (nullable). Returns
 * PULSE_SHUTDOWN (draining) or PULSE_NOMEM at once, after ctx_free, and
 * done is never called. */
typedef pulse_status_t (*pulse_kafka_job_fn)(struct pulse_kafka *k, void *ctx);
pulse_status_t pulse_kafka_admin_submit(struct pulse_kafka *k, pulse_kafka_job_fn fn, void *ctx,
                                        void (*ctx_free)(void *ctx), pulse_admin_done_fn done, void *arg);
/* Waits until the admin queue is empty and idle (drain). */
void pulse_kafka_admin_drain(struct pulse_kafka *k);
pulse_status_t pulse_kafka_topic_create_async(struct pulse_broker *b, const struct pulse_topic_spec *spec,
                                              struct pulse_topic_info **out, pulse_admin_done_fn done, void *arg,
                                              char *errbuf, size_t errlen);
pulse_status_t pulse_kafka_topic_set_retention_async(struct pulse_broker *b, const char *name, int64_t retention_ms,
                                                     int64_t retention_bytes, struct pulse_topic_info **out,
                                                     pulse_admin_done_fn done, void *arg);
pulse_status_t pulse_kafka_topic_delete_async(struct pulse_broker *b, const char *name, pulse_admin_done_fn done,
                                              void *arg);
pulse_status_t pulse_kafka_cursor_commit_async(struct pulse_broker *b, const char *consumer,
                                               const struct pulse_cursor *cursors, size_t n, pulse_admin_done_fn done,
                                               void *arg, char *errbuf, size_t errlen);
pulse_status_t pulse_kafka_cursor_get_async(struct pulse_broker *b, const char *consumer, const char *topic,
                                            uint32_t partition, struct pulse_cursor *out, pulse_admin_done_fn done,
                                            void *arg);
pulse_status_t pulse_kafka_cursor_list_async(struct pulse_broker *b, const char *consumer, struct pulse_cursor **out,
                                             size_t *n_out, pulse_admin_done_fn done, void *arg);

/* Consumer groups (kgcalls.c), on kadmin only: the committed offsets of
 * group for parts into offsets[] (-1 none), one ListConsumerGroupOffsets;
 * and an AlterConsumerGroupOffsets of list (its offsets). Each blocks up to
 * the request timeout. */
pulse_status_t pulse_kafka_group_offsets_read(struct pulse_kafka *k, const char *group,
                                              const rd_kafka_topic_partition_list_t *parts, int64_t *offsets);
pulse_status_t pulse_kafka_group_offsets_write(struct pulse_kafka *k, const char *group,
                                               const rd_kafka_topic_partition_list_t *list);

/* Admin options for op, both timeouts set to the request timeout. */
rd_kafka_AdminOptions_t *pulse_kafka_admin_options(struct pulse_kafka *k, rd_kafka_admin_op_t op);

/* ---- kconfig.c: retention changes ----------------------------------------- */

/* One topic config as DescribeConfigs gives it. */
struct kconfig {
    char *name;
    char *value;  /* NULL: sensitive, not sent back */
    bool dynamic; /* set on the topic (source DYNAMIC_TOPIC_CONFIG), writable */
};

void pulse_kafka_configs_free(struct kconfig *c, size_t n);
/* The full set of dynamic configs to write with the non-incremental
 * AlterConfigs: the dynamic entries of described[0..n) with retention.ms /
 * retention.bytes replaced or added (a negative value keeps it; Pulse's 0,
 * no limit, is Kafka's -1). PULSE_NOT_SUPPORTED when a dynamic entry is
 * sensitive (it could not be written back), PULSE_NOMEM. */
pulse_status_t pulse_kafka_retention_configs(const struct kconfig *described, size_t n, int64_t retention_ms,
                                             int64_t retention_bytes, struct kconfig **out, size_t *n_out);

/* ---- kconsumers.c: consumer list and delete (consumer groups) -------- */

pulse_status_t pulse_kafka_consumer_list_async(struct pulse_broker *b, char ***names_out, size_t *n_out,
                                               pulse_admin_done_fn done, void *arg);
pulse_status_t pulse_kafka_consumer_delete_async(struct pulse_broker *b, const char *consumer, pulse_admin_done_fn done,
                                                 void *arg);

/* Test hook: the mock cluster (NULL unless kafka.mock-brokers > 0). */
rd_kafka_mock_cluster_t *pulse_kafka_mock(struct pulse_broker *b);

#endif
