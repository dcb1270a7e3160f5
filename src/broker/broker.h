/* SPDX-License-Identifier: MIT */
/*
 * broker.h - topics, partitions, routing, publish, fetch, cursors and the
 * broker's threads. The one interface the HTTP layer (and tools, tests,
 * benchmarks) use; it knows no HTTP, and the storage engine knows nothing of
 * it.
 *
 * A broker owns a data directory:
 *   <data-dir>/meta/                       LevelDB metadata (src/meta)
 *   <data-dir>/topics/<topic>/<partition>/ one plog per partition
 *
 * Threads it runs between open and close:
 *   syncer      - fdatasyncs partitions with unsynced appends (group commit),
 *                 advances their high watermark, then completes the publishes
 *                 and wakes the long-poll waiters that were waiting for it;
 *                 also fires waiter deadlines and interval-mode syncs.
 *   maintenance - retention and compaction passes (issue 5; optional).
 * Callbacks (pulse_publish_done_fn, pulse_wait_fn) run on the syncer thread,
 * or on the caller's thread when noted. They must be quick and must not call
 * back into the broker.
 *
 * Thread: every function may be called from any thread unless noted.
 * Names (topics, consumers): see pulse_broker_name_valid.
 */
#ifndef PULSE_BROKER_BROKER_H
#define PULSE_BROKER_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "storage/batch.h"
#include "storage/plog.h"

struct pulse_broker;
struct pulse_buf;

#define PULSE_NAME_MAX 249

enum pulse_cleanup { PULSE_CLEANUP_DELETE = 0, PULSE_CLEANUP_COMPACT = 1 };

struct pulse_broker_config {
    const char *data_dir; /* borrowed for pulse_broker_open only */
    /* storage (per-topic segment_bytes overrides segment_max_bytes) */
    uint64_t segment_max_bytes;
    uint32_t index_interval_bytes;
    enum pulse_sync_mode sync_mode;
    uint32_t sync_interval_ms;
    /* topic defaults */
    uint32_t default_partitions;
    int64_t default_retention_ms;    /* 0 = off */
    int64_t default_retention_bytes; /* 0 = off */
    /* publish limits */
    uint32_t max_records_per_publish; /* default 10000 */
    uint32_t max_key_bytes;           /* default 64 KiB */
    uint32_t max_headers_bytes;       /* all headers of one record, default 64 KiB */
    uint32_t max_headers_per_record;  /* default 128 */
    /* maintenance (0 disables that pass) */
    int64_t retention_interval_ms;
    int64_t compaction_interval_ms;
    int64_t compaction_tombstone_retention_ms;
    double compaction_min_gain_ratio;
    /* reopening a fenced partition (heal thread): first attempt after
     * initial ms, then doubling up to max ms */
    int64_t fence_retry_initial_ms; /* default 1000 */
    int64_t fence_retry_max_ms;     /* default 60000 */
    /* sealed and idle segment files kept open, shared by every partition
     * (storage/fdcache.h); default 1024 */
    uint32_t segment_fd_cache;
    const struct pulse_io *io; /* NULL = posix; tests inject faults */
};

/* Fills every field with the documented defaults (docs/Configuration.md). */
void pulse_broker_config_init(struct pulse_broker_config *cfg);

/* What opening the broker found. */
struct pulse_broker_open_report {
    uint32_t topics;
    uint32_t partitions;
    int64_t recovery_us;       /* all partition logs */
    uint64_t truncated_bytes;  /* torn tails cut, all partitions */
    uint32_t corrupt_segments; /* sealed segments cut short */
    uint32_t deleted_leftovers; /* half-deleted topic directories removed */
};

/*
 * Opens the metadata store (creating identity on first start), removes
 * leftovers of interrupted topic deletes, opens every partition log with
 * recovery, and starts the broker's threads.
 * errbuf (nullable, errlen bytes) gets a one-line reason on failure, e.g.
 * "data directory ./data is in use by another process".
 * PULSE_BUSY when the data directory is locked by another process;
 * PULSE_CORRUPT / PULSE_INVALID for a metadata schema newer than this code.
 */
pulse_status_t pulse_broker_open(const struct pulse_broker_config *cfg, struct pulse_broker **out,
                                 struct pulse_broker_open_report *report, char *errbuf, size_t errlen);

/*
 * First half of shutdown: refuses new publishes and waits (PULSE_SHUTDOWN),
 * completes every parked long-poll waiter at once (its callback gets
 * PULSE_SHUTDOWN), and lets publishes already written reach durability (their
 * callbacks run as usual). Returns when no publish is pending. Idempotent.
 */
void pulse_broker_drain(struct pulse_broker *b);

/* Drains, stops the threads, closes every log (writing snapshots) and the
 * metadata store, frees the broker. NULL is a no-op. */
void pulse_broker_close(struct pulse_broker *b);

/* Identity strings, borrowed for the broker's lifetime. */
const char *pulse_broker_cluster_id(const struct pulse_broker *b);
const char *pulse_broker_broker_id(const struct pulse_broker *b);

/* 1..249 of [A-Za-z0-9._-], not "." or "..", not starting with "__". */
bool pulse_broker_name_valid(const char *name, size_t len);

/* ---- topics ---------------------------------------------------------- */

/* A create request; negative numbers (and cleanup < 0) mean "default". */
struct pulse_topic_spec {
    const char *name;
    int32_t partitions;     /* 1..256 */
    int cleanup;            /* enum pulse_cleanup or -1 */
    int64_t retention_ms;   /* >= 0; 0 = off */
    int64_t retention_bytes;/* >= 0; 0 = off */
    int64_t segment_bytes;  /* PULSE_PLOG_MIN_SEGMENT_BYTES..PULSE_PLOG_MAX_SEGMENT_BYTES */
};

struct pulse_partition_stats {
    uint32_t partition;
    int64_t log_start_offset;
    int64_t high_watermark;
    uint64_t size_bytes;
    uint32_t segments;
};

struct pulse_topic_info {
    char name[PULSE_NAME_MAX + 1];
    uint32_t partitions;
    enum pulse_cleanup cleanup;
    int64_t retention_ms;
    int64_t retention_bytes;
    int64_t segment_bytes;
    int64_t created_at_ms; /* wall clock */
    struct pulse_partition_stats *stats; /* `partitions` entries; NULL unless asked for */
};

/* Frees one info (and its stats). NULL is a no-op. */
void pulse_topic_info_free(struct pulse_topic_info *info);
/* Frees an array from pulse_broker_topic_list. */
void pulse_topic_info_list_free(struct pulse_topic_info **list, size_t n);

/* PULSE_INVALID_NAME, PULSE_INVALID (a field out of range; errbuf says which),
 * PULSE_EXISTS (exactly one of two concurrent creates of a name wins).
 * *out (nullable) gets the created topic, with stats. */
pulse_status_t pulse_broker_topic_create(struct pulse_broker *b, const struct pulse_topic_spec *spec,
                                         struct pulse_topic_info **out, char *errbuf, size_t errlen);

/* PULSE_TOPIC_NOT_FOUND. */
pulse_status_t pulse_broker_topic_get(struct pulse_broker *b, const char *name, bool with_stats,
                                      struct pulse_topic_info **out);

/* Sorted by name. */
pulse_status_t pulse_broker_topic_list(struct pulse_broker *b, bool with_stats, struct pulse_topic_info ***out,
                                       size_t *n_out);

/* Changes retention; a negative argument keeps that value. Takes effect at
 * the next retention pass. *out (nullable) gets the updated topic. */
pulse_status_t pulse_broker_topic_set_retention(struct pulse_broker *b, const char *name, int64_t retention_ms,
                                                int64_t retention_bytes, struct pulse_topic_info **out);

/* Crash-safe delete: metadata (topic, partitions, the topic's cursors) in one
 * sync batch, then the directory is renamed aside and removed. Pending
 * long-poll waiters on it complete with PULSE_TOPIC_NOT_FOUND. */
pulse_status_t pulse_broker_topic_delete(struct pulse_broker *b, const char *name);

/* ---- publish --------------------------------------------------------- */

struct pulse_publish_record {
    struct pulse_record_in rec; /* rec.offset_delta is ignored */
    bool has_timestamp;         /* false: the broker's clock at append */
    int32_t partition;          /* -1: route (murmur2 of the key, or round-robin) */
};

struct pulse_offset_pair {
    uint32_t partition;
    int64_t offset;
};

/* Completion of an asynchronous publish: PULSE_OK once every batch of it is
 * durable; PULSE_FENCED / PULSE_IO / PULSE_NOSPACE / PULSE_SHUTDOWN if it
 * never will be. Called exactly once. */
typedef void (*pulse_publish_done_fn)(void *arg, pulse_status_t st);

/*
 * Routes, validates and appends the records of one publish: at most one batch
 * per partition (contiguous offsets, all or none), written to the page cache.
 * offsets_out (n entries, caller's) gets (partition, offset) in request order.
 * Validation happens before anything is written, so a refused publish stores
 * nothing: PULSE_TOPIC_NOT_FOUND, PULSE_PARTITION_NOT_FOUND (explicit
 * partition out of range), PULSE_INVALID (n == 0, timestamps of one
 * partition spanning more than an int32 of ms, ...), PULSE_TOO_LARGE (more
 * records than max_records_per_publish, a key or headers over their limits);
 * errbuf says why.
 * On PULSE_OK:
 *   *pending_out = false: already durable as the sync mode requires (interval
 *     mode); done is never called.
 *   *pending_out = true: done(arg, st) will be called exactly once from the
 *     syncer thread, possibly before this function returns, so the caller
 *     must be ready for it first (e.g. its connection already suspended).
 *     When it fails, errbuf gets the reason before done runs (naming the
 *     fenced partition), so errbuf must stay valid until then.
 * On failure done is never called. PULSE_FENCED: a partition of the publish
 * is fenced (it is reopened in process; retry later); PULSE_NOSPACE: the
 * device is full (nothing of that partition was written; retry later).
 */
pulse_status_t pulse_broker_publish(struct pulse_broker *b, const char *topic, const struct pulse_publish_record *recs,
                                    size_t n, struct pulse_offset_pair *offsets_out, pulse_publish_done_fn done,
                                    void *arg, bool *pending_out, char *errbuf, size_t errlen);

/* Blocking form of pulse_broker_publish: returns once durable (or failed). */
pulse_status_t pulse_broker_publish_wait(struct pulse_broker *b, const char *topic,
                                         const struct pulse_publish_record *recs, size_t n,
                                         struct pulse_offset_pair *offsets_out, char *errbuf, size_t errlen);

/* ---- fetch ----------------------------------------------------------- */

/* See pulse_plog_slice: PULSE_TOPIC_NOT_FOUND, PULSE_PARTITION_NOT_FOUND,
 * PULSE_RANGE (offset above HW; out->log_start / high_watermark filled). */
pulse_status_t pulse_broker_fetch_slice(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t offset,
                                        uint64_t max_bytes, bool want_fd, struct pulse_slice *out);

/* See pulse_plog_read: verified batch bytes appended to out. */
pulse_status_t pulse_broker_fetch(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t offset,
                                  uint64_t max_bytes, struct pulse_buf *out, struct pulse_slice *info);

/* Counts fetched records and bytes for a topic's metrics. */
void pulse_broker_note_fetched(struct pulse_broker *b, const char *topic, uint64_t records, uint64_t bytes);

/* Long-poll wake-up: PULSE_OK when data may be there (HW > offset) or the
 * deadline passed; PULSE_SHUTDOWN; PULSE_TOPIC_NOT_FOUND if deleted. */
typedef void (*pulse_wait_fn)(void *arg, pulse_status_t st);

/*
 * Parks a waiter until the partition's HW passes offset or the monotonic
 * deadline (pulse_clock_mono_us) passes. If HW > offset already, nothing is
 * parked and *parked_out = false (fn is not called). Otherwise
 * *parked_out = true and fn(arg, st) runs exactly once, on the syncer thread,
 * possibly before this returns. PULSE_SHUTDOWN when draining.
 */
pulse_status_t pulse_broker_wait_data(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t offset,
                                      int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out);

/* ---- consumers and cursors ------------------------------------------- */

struct pulse_cursor {
    char topic[PULSE_NAME_MAX + 1];
    uint32_t partition;
    int64_t offset;
    int64_t high_watermark; /* filled by get/list */
    int64_t lag;            /* high_watermark - offset, never negative */
};

/*
 * Commits cursors atomically (one sync write batch) or none. Each must name
 * an existing topic and partition (PULSE_TOPIC_NOT_FOUND,
 * PULSE_PARTITION_NOT_FOUND) and an offset in [0, HW] (PULSE_RANGE);
 * PULSE_INVALID_NAME for a bad consumer name. errbuf says which cursor.
 */
pulse_status_t pulse_broker_cursor_commit(struct pulse_broker *b, const char *consumer,
                                          const struct pulse_cursor *cursors, size_t n, char *errbuf, size_t errlen);

/* PULSE_CURSOR_NOT_FOUND if never committed. */
pulse_status_t pulse_broker_cursor_get(struct pulse_broker *b, const char *consumer, const char *topic,
                                       uint32_t partition, struct pulse_cursor *out);

/* A consumer's cursors sorted by topic then partition; *out allocated
 * (pulse_free), possibly NULL with *n_out == 0. */
pulse_status_t pulse_broker_cursor_list(struct pulse_broker *b, const char *consumer, struct pulse_cursor **out,
                                        size_t *n_out);

/* Consumer names (with at least one cursor), sorted; free with
 * pulse_broker_names_free. */
pulse_status_t pulse_broker_consumer_list(struct pulse_broker *b, char ***names_out, size_t *n_out);
void pulse_broker_names_free(char **names, size_t n);

/* Removes every cursor of the consumer; deleting an unknown one is PULSE_OK. */
pulse_status_t pulse_broker_consumer_delete(struct pulse_broker *b, const char *consumer);

/* ---- observability --------------------------------------------------- */

/* Appends the broker's metrics in Prometheus text format 0.0.4: fsync count
 * and latency histogram, per-partition high watermark / log start / size,
 * published and fetched records and bytes by topic, consumer lag, recovery
 * truncations, retention and compaction counters, fenced partitions and the
 * segment descriptor cache. */
pulse_status_t pulse_broker_metrics(struct pulse_broker *b, struct pulse_buf *out);

/* A partition whose log is fenced, waiting to be reopened in process. */
struct pulse_fenced_partition {
    char topic[PULSE_NAME_MAX + 1];
    uint32_t partition;
    int64_t fenced_ms;       /* since the fence was noticed (0: just now) */
    int64_t next_attempt_ms; /* until the next reopen attempt (0: due) */
    uint32_t failed_attempts;
    pulse_status_t last_error; /* of the last failed attempt, else PULSE_OK */
};

/* The fenced partitions, sorted by topic then partition; *out allocated
 * (pulse_free), NULL with *n_out == 0 when there are none. */
pulse_status_t pulse_broker_fenced_list(struct pulse_broker *b, struct pulse_fenced_partition **out, size_t *n_out);

/* Wall-clock ms at which the broker was opened. */
int64_t pulse_broker_started_at_ms(const struct pulse_broker *b);

#endif
