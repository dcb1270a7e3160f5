/* SPDX-License-Identifier: MIT */
/*
 * broker.h - topics, partitions, routing, publish, fetch, cursors and the
 * broker's threads. The one interface the HTTP layer (and tools, tests,
 * benchmarks) use; it knows no HTTP, and the storage engine knows nothing of
 * it.
 *
 * A broker owns a data directory:
 *   <data-dir>/meta/                       LevelDB metadata (src/meta)
 *   <data-dir>/cluster.json                the identity, also kept outside the store
 *   <data-dir>/topics/<topic>/topic.json   the topic's definition (datadir.c)
 *   <data-dir>/topics/<topic>/<partition>/ one plog per partition
 *
 * Threads it runs between open and close:
 *   syncer      - fdatasyncs partitions with unsynced appends (group commit),
 *                 advances their high watermark, then completes the publishes
 *                 and wakes the long-poll waiters that were waiting for it;
 *                 also fires waiter deadlines and interval-mode syncs.
 *   maintenance - retention and compaction passes (issue 5; optional).
 *   committer   - metadata changes that must be ordered with each other:
 *                 cursor commits (group-committed: every commit queued while
 *                 one LevelDB sync write runs shares the next one), the
 *                 first step of a topic delete, retention changes, consumer
 *                 deletes.
 *   admin       - the slow file-system work of topics: create (directories,
 *                 logs, metadata) and the rest of a delete once the topic's
 *                 last user has let go (metadata, close, rename, removal).
 * Callbacks (pulse_publish_done_fn, pulse_wait_fn, pulse_admin_done_fn) run
 * on the syncer, committer or admin thread, or on the caller's thread when
 * noted. They must be quick and must not call back into the broker.
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
    uint64_t compaction_max_bytes_per_pass; /* sealed bytes one pass evaluates per partition */
    int64_t compaction_max_pass_ms;         /* 0 = no time bound */
    /* reopening a fenced partition (heal thread): first attempt after
     * initial ms, then doubling up to max ms */
    int64_t fence_retry_initial_ms; /* default 1000 */
    int64_t fence_retry_max_ms;     /* default 60000 */
    /* sealed and idle segment files kept open, shared by every partition
     * (storage/fdcache.h); default 1024 */
    uint32_t segment_fd_cache;
    /* the syncer rewrites a partition's snapshot (its durable-end
     * checkpoint) at most this often, when its durable end moved; default
     * 1000 (storage/plog.h "Checkpoints") */
    uint32_t checkpoint_interval_ms;
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
    uint32_t repaired_partitions; /* partitions whose recovery cut, rebuilt, removed or found damage (logged) */
    /* What the data directory's own metadata restored (docs/Operations.md
     * "When the metadata store is lost or damaged"). */
    uint32_t adopted_topics;  /* directories without metadata adopted from their topic.json */
    uint32_t migrated_topics; /* topic.json written for topics of an older data directory */
    bool identity_restored;   /* the store had no identity; cluster.json supplied it */
    bool metadata_damaged;    /* LevelDB reported dropping damaged records at open */
};

/*
 * Opens the metadata store (creating identity on first start, or taking it
 * from <data>/cluster.json when the store lost it), brings topics/ and the
 * store into agreement (removes unfinished creates and deletes, adopts topic
 * directories the store lost from their topic.json; see datadir.c), opens
 * every partition log with recovery, and starts the broker's threads.
 * errbuf (nullable, errlen bytes) gets a one-line reason on failure that
 * names the cause, e.g. "data directory ./data is in use by another
 * process", "permission denied: ./data (running as uid 1000)", "not a
 * directory: ./data".
 * PULSE_BUSY when the data directory is locked by another process;
 * PULSE_CORRUPT for a store LevelDB reports damaged (errbuf names
 * pulsed --repair-metadata); PULSE_INVALID for a metadata schema newer
 * than this code, a store of another data directory, a topic directory
 * pulsed cannot decide about (errbuf names it and pulsed --adopt-topic), or
 * topics the store names whose directories (or topics/ itself) are missing
 * (errbuf names them and pulsed --forget-topic; nothing is changed).
 */
pulse_status_t pulse_broker_open(const struct pulse_broker_config *cfg, struct pulse_broker **out,
                                 struct pulse_broker_open_report *report, char *errbuf, size_t errlen);

/* ---- offline maintenance of a data directory (pulsed stopped) -------- */

#define PULSE_BROKER_REPAIR_NOTES 8

struct pulse_topic_spec;
struct pulse_topic_info;

/* What pulse_broker_repair_metadata did. */
struct pulse_broker_repair_report {
    bool store_found;          /* there was a metadata store to repair */
    uint32_t tables_set_aside; /* unreadable LevelDB tables moved to meta/lost: their records are lost */
    uint32_t damage_lines;     /* LevelDB's lines about damage; the first ones: */
    char damage[PULSE_BROKER_REPAIR_NOTES][256];
    struct pulse_broker_open_report open; /* the rebuild (adoptions, identity) */
    uint64_t cursors;                     /* cursor records after the repair */
};

/*
 * `pulsed --repair-metadata`: runs LevelDB's repair on <data>/meta (which
 * keeps every record it can read and sets unreadable files aside in
 * meta/lost), then opens and closes the broker once, which rebuilds what
 * the store lost from the data directory (identity, topics adopted from
 * their topic.json). Cursors that were lost stay lost: they are counted,
 * never made up. PULSE_BUSY when a broker runs on the directory; any
 * pulse_broker_open failure (errbuf says what to do, e.g. adopt a topic).
 * Thread: main, with no broker open on the directory in this process.
 */
pulse_status_t pulse_broker_repair_metadata(const struct pulse_broker_config *cfg,
                                            struct pulse_broker_repair_report *report, char *errbuf, size_t errlen);

/*
 * `pulsed --adopt-topic NAME`: writes <data>/topics/NAME/topic.json for a
 * topic directory that has no metadata and no valid topic.json (data of an
 * older version whose store was lost, or a damaged topic.json), so that the
 * next start adopts it. The partition count is that of the partition
 * directories (0..N-1, all present; spec->partitions >= 0 must match it);
 * cleanup, retention and segment size come from spec, or the configured
 * topic defaults where spec has -1. Refuses a topic with metadata
 * (PULSE_EXISTS), no directory (PULSE_TOPIC_NOT_FOUND) or an unfinished
 * create or delete (PULSE_INVALID). *out (nullable) gets what was written.
 * Thread: main, with no broker running on the directory (the store's lock
 * is held meanwhile).
 */
pulse_status_t pulse_broker_adopt_topic(const struct pulse_broker_config *cfg, const struct pulse_topic_spec *spec,
                                        struct pulse_topic_info *out, char *errbuf, size_t errlen);

/*
 * `pulsed --forget-topic NAME`: removes the metadata of a topic whose
 * directory is missing (the topic, its partitions and every consumer's
 * cursors on it, in one sync batch), the way out of a start refused because
 * the store names topics whose directories are not there, for a topic that
 * is gone for good. Should its directory come back later, the next start
 * adopts it from its topic.json; the cursors stay lost. Refuses a topic the
 * store does not have (PULSE_TOPIC_NOT_FOUND) or whose directory exists
 * (PULSE_EXISTS: delete it through the API). *cursors_out (nullable) gets
 * how many cursors went. Thread: main, with no broker running on the
 * directory (the store's lock is held meanwhile).
 */
pulse_status_t pulse_broker_forget_topic(const struct pulse_broker_config *cfg, const char *name, size_t *cursors_out,
                                        char *errbuf, size_t errlen);

/* What pulse_broker_recreate_partition did. */
struct pulse_broker_recreate_report {
    int64_t start_offset;   /* the first offset of the new, empty log */
    int64_t highest_cursor; /* highest cursor committed on the partition, -1 if none */
    size_t cursors;         /* consumer cursors on the partition (all kept) */
};

/* Upper bound of the start offset of a recreated partition (2^62). */
#define PULSE_BROKER_MAX_START_OFFSET (INT64_C(1) << 62)

/*
 * `pulsed --recreate-partition TOPIC/P [--start-offset N]`: the way out of a
 * start refused because partition P's directory is missing or empty, for a
 * log that is gone for good. Makes the directory again holding an empty log
 * whose first offset is the larger of start_offset and the highest cursor
 * any consumer committed on the partition (a cursor proves the log reached
 * it), so no offset a consumer saw is handed out again; the records are
 * lost, the cursors kept. Refuses a topic or partition the store does not
 * have (PULSE_TOPIC_NOT_FOUND, PULSE_PARTITION_NOT_FOUND; also a missing
 * topic directory: that is --forget-topic's case), a partition directory
 * that holds files (PULSE_EXISTS), a start_offset outside
 * 0..PULSE_BROKER_MAX_START_OFFSET (PULSE_INVALID). *out (nullable) gets
 * what was done. Thread: main, with no broker running on the directory (the
 * store's lock is held meanwhile).
 */
pulse_status_t pulse_broker_recreate_partition(const struct pulse_broker_config *cfg, const char *topic,
                                               uint32_t partition, int64_t start_offset,
                                               struct pulse_broker_recreate_report *out, char *errbuf, size_t errlen);

/*
 * First half of shutdown (Thread: any but the broker's own; Locks: none held
 * while it waits): refuses new publishes and waits (PULSE_SHUTDOWN),
 * completes every parked long-poll waiter at once (its callback gets
 * PULSE_SHUTDOWN), and lets publishes already written reach durability or
 * fail (their callbacks run as usual). Then refuses new admin operations
 * (the *_async calls return PULSE_SHUTDOWN) and runs every one already
 * queued to its end, callbacks included; a delete waiting for its topic's
 * last user keeps waiting for it (a maintenance step or a heal reopen
 * attempt on one of its partitions, or a request still reading it), so the
 * drain can last that long. A delete that stalled (topic.c) is not waited
 * for: the next start finishes it. Returns when no publish and no admin
 * operation is pending. Idempotent.
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

/*
 * Completion of an asynchronous admin operation (the *_async functions
 * below): st is what the blocking form would have returned. Called exactly
 * once, on the committer or the admin thread, possibly before the *_async
 * call returns, so the caller must be ready for it first (e.g. its
 * connection already suspended). Out-parameters and errbuf given to the
 * *_async call are written before it runs, and must stay valid until then.
 * It must be quick and must not call back into the broker.
 */
typedef void (*pulse_admin_done_fn)(void *arg, pulse_status_t st);

/* PULSE_INVALID_NAME, PULSE_INVALID (a field out of range; errbuf says which),
 * PULSE_EXISTS (exactly one of two concurrent creates of a name wins).
 * *out (nullable) gets the created topic, with stats.
 * Blocking form of pulse_broker_topic_create_async (tests, tools).
 * Thread: any but the broker's own (never from a broker callback). Locks:
 * none held while it waits. Blocks for the directories' and the metadata's
 * fsyncs, and behind a delete of the same name that is waiting for its
 * topic's last user. */
pulse_status_t pulse_broker_topic_create(struct pulse_broker *b, const struct pulse_topic_spec *spec,
                                         struct pulse_topic_info **out, char *errbuf, size_t errlen);

/*
 * Creates a topic on the admin thread and calls done(arg, st) with the
 * result (PULSE_OK, PULSE_EXISTS, PULSE_IO, PULSE_NOSPACE, ...; errbuf says
 * why). A create of a name whose delete is still finishing waits for it;
 * one whose delete stalled on the metadata store (see
 * pulse_broker_topic_delete_async) finishes that delete first, and fails
 * with its error ("still being deleted") while it still cannot.
 * The spec is checked first, on the caller's thread: PULSE_INVALID_NAME /
 * PULSE_INVALID (errbuf says which field) are returned at once, as is
 * PULSE_SHUTDOWN once the broker drains, and done is then never called.
 * spec is copied. Thread: any. Locks: the admin queue's mutex, briefly;
 * never blocks on I/O.
 */
pulse_status_t pulse_broker_topic_create_async(struct pulse_broker *b, const struct pulse_topic_spec *spec,
                                               struct pulse_topic_info **out, pulse_admin_done_fn done, void *arg,
                                               char *errbuf, size_t errlen);

/* PULSE_TOPIC_NOT_FOUND. */
pulse_status_t pulse_broker_topic_get(struct pulse_broker *b, const char *name, bool with_stats,
                                      struct pulse_topic_info **out);

/* Sorted by name. */
pulse_status_t pulse_broker_topic_list(struct pulse_broker *b, bool with_stats, struct pulse_topic_info ***out,
                                       size_t *n_out);

/* Changes retention; a negative argument keeps that value. Written to the
 * topic's topic.json, then to the store. Takes effect at the next retention
 * pass. *out (nullable) gets the updated topic.
 * Blocking form of pulse_broker_topic_set_retention_async. Thread: any but
 * the broker's own. Locks: none held while it waits. Blocks for one
 * metadata sync write (and the committer's queue ahead of it). */
pulse_status_t pulse_broker_topic_set_retention(struct pulse_broker *b, const char *name, int64_t retention_ms,
                                                int64_t retention_bytes, struct pulse_topic_info **out);

/* The retention change on the committer thread (ordered with deletes, so it
 * never rewrites the record of a topic being deleted); done(arg, st) gets
 * PULSE_OK or PULSE_TOPIC_NOT_FOUND, PULSE_IO, ... Returns PULSE_SHUTDOWN or
 * PULSE_NOMEM at once (done never called). Thread: any. Locks: the admin
 * queue's mutex, briefly; never blocks on I/O. */
pulse_status_t pulse_broker_topic_set_retention_async(struct pulse_broker *b, const char *name,
                                                      int64_t retention_ms, int64_t retention_bytes,
                                                      struct pulse_topic_info **out, pulse_admin_done_fn done,
                                                      void *arg);

/* Crash-safe delete: a "deleting" marker in the topic's directory (the
 * decision), metadata (topic, partitions, the topic's cursors) in one sync
 * batch, then the directory is renamed aside and removed. Pending
 * long-poll waiters on it complete with PULSE_TOPIC_NOT_FOUND.
 * Blocking form of pulse_broker_topic_delete_async. Thread: any but the
 * broker's own. Locks: none held while it waits. Blocks until the topic's
 * last user (e.g. a compaction of one of its partitions) has let go and the
 * files are gone. */
pulse_status_t pulse_broker_topic_delete(struct pulse_broker *b, const char *name);

/*
 * Deletes a topic without blocking the caller. On the committer thread the
 * topic leaves the name map at once (lookups, publishes, fetches, commits
 * then see PULSE_TOPIC_NOT_FOUND; its pending publishes and waiters complete
 * with it); the admin thread then waits, holding no lock, until the topic's
 * last user lets go, commits the metadata removal and removes the files,
 * and calls done(arg, st): PULSE_OK, PULSE_TOPIC_NOT_FOUND, or the error of
 * a delete that could not be recorded (PULSE_IO, PULSE_NOSPACE, ...), after
 * which the topic is back as it was. Once recorded (the "deleting" marker)
 * the delete is decided: PULSE_OK even if the metadata store then fails,
 * the topic is never served again, and the rest is finished by the next
 * create of the name or the next start (if even the marker is uncertain:
 * the error, and the topic is not served; the next start decides). A
 * create of the same name waits until the delete is done. Returns
 * PULSE_SHUTDOWN or PULSE_NOMEM at once (done never called). Thread: any.
 * Locks: the admin queue's mutex, briefly; never blocks on I/O.
 */
pulse_status_t pulse_broker_topic_delete_async(struct pulse_broker *b, const char *name, pulse_admin_done_fn done,
                                               void *arg);

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
 * Partitions are appended one after another and an append is never rolled
 * back: when one fails, the partitions appended before it keep their
 * records (they become durable as usual). A partition fenced before the
 * first append refuses the whole publish. When an append fails, offsets_out
 * still gets each record's offset (-1 for a record not stored) and errbuf
 * names the partitions stored before it with their offsets.
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
 * Blocking form of pulse_broker_cursor_commit_async. Thread: any but the
 * broker's own. Locks: none held while it waits. Blocks until the commit is
 * durable (one metadata sync write, shared with concurrent commits).
 */
pulse_status_t pulse_broker_cursor_commit(struct pulse_broker *b, const char *consumer,
                                          const struct pulse_cursor *cursors, size_t n, char *errbuf, size_t errlen);

/*
 * Queues a commit for the committer thread, which takes every commit queued
 * while its previous write ran, validates each one alone against the live
 * topics (the rules above), writes all the valid ones in one LevelDB sync
 * batch and then calls each done(arg, st) with its own result: a commit that
 * fails validation gets its error (errbuf says which cursor) and takes no
 * part in the write; a failed write fails every commit in it. The consumer
 * name and n are checked here: PULSE_INVALID_NAME / PULSE_INVALID (errbuf),
 * PULSE_SHUTDOWN, PULSE_NOMEM are returned at once and done is never called.
 * cursors is copied. Thread: any. Locks: the admin queue's mutex, briefly;
 * never blocks on I/O.
 */
pulse_status_t pulse_broker_cursor_commit_async(struct pulse_broker *b, const char *consumer,
                                                const struct pulse_cursor *cursors, size_t n,
                                                pulse_admin_done_fn done, void *arg, char *errbuf, size_t errlen);

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

/* Removes every cursor of the consumer; deleting an unknown one is PULSE_OK.
 * Blocking form of pulse_broker_consumer_delete_async. Thread: any but the
 * broker's own. Locks: none held while it waits. Blocks for one metadata
 * sync write. */
pulse_status_t pulse_broker_consumer_delete(struct pulse_broker *b, const char *consumer);

/* The same on the committer thread (ordered with commits); done(arg, st).
 * PULSE_INVALID_NAME, PULSE_SHUTDOWN, PULSE_NOMEM at once (done never
 * called). Thread: any. Locks: the admin queue's mutex, briefly; never
 * blocks on I/O. */
pulse_status_t pulse_broker_consumer_delete_async(struct pulse_broker *b, const char *consumer,
                                                  pulse_admin_done_fn done, void *arg);

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
 * (pulse_free), NULL with *n_out == 0 when there are none. Thread: any.
 * Locks: map_lock (read) and the heal thread's mutex, briefly; never waits
 * for a reopen or any I/O. */
pulse_status_t pulse_broker_fenced_list(struct pulse_broker *b, struct pulse_fenced_partition **out, size_t *n_out);

/* Wall-clock ms at which the broker was opened. */
int64_t pulse_broker_started_at_ms(const struct pulse_broker *b);

#endif
