/* SPDX-License-Identifier: MIT */
/*
 * broker.h - the broker seam: what a broker promises to the HTTP layer (and
 * to tools, tests and benchmarks), whichever backend serves it. Topics,
 * publish with asynchronous completion, fetch (records; raw slices where
 * the backend has them), long-poll wake-ups, cursors, health and metrics.
 * It knows no HTTP, no storage engine and no LevelDB: every type in it is
 * a plain value of this header or of common/.
 *
 * A struct pulse_broker is a backend instance behind a table of functions
 * (backend.h); the functions below dispatch through it. The local backend
 * (local.h, src/broker) is the one there is today; a remote one (a Kafka
 * cluster) serves the same calls. Opening a broker is the backend's own
 * affair (pulse_broker_open in local.h for the local one); everything after
 * that is this header.
 *
 * How the calls behave (docs/Architecture.md section 10 has the whole
 * table):
 *   - Calls that may have to wait for something - a disk sync, a metadata
 *     write, a network round trip - complete asynchronously: they return at
 *     once and a callback reports the result, exactly once, on a thread of
 *     the backend, or on the calling thread before the call returns when
 *     the backend has the answer at hand. The caller must be ready for the
 *     callback before it calls (the HTTP layer suspends the request first,
 *     or uses http/async.c). A call that returns anything but PULSE_OK (and,
 *     for publish, a publish that is not pending) was refused at
 *     submission: no callback follows.
 *   - Calls that do not wait answer from what the backend has at hand
 *     (memory, page cache, a local cache of a remote system); each says
 *     what the worst it may block on is.
 *   - Callbacks are called with no lock of the broker held; they must be
 *     quick and must not call back into the broker.
 *   - Every blocking form (pulse_broker_topic_create, ...) is the
 *     asynchronous call plus a wait of its own, for tests and tools; it
 *     must not run on a thread of the backend (never from a callback).
 *
 * Thread: every function may be called from any thread unless noted.
 * Names (topics, consumers): see pulse_broker_name_valid.
 */
#ifndef PULSE_BROKER_BROKER_H
#define PULSE_BROKER_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/record.h"
#include "common/status.h"

struct pulse_broker;
struct pulse_fetch;
struct pulse_buf;

#define PULSE_NAME_MAX 249

enum pulse_cleanup { PULSE_CLEANUP_DELETE = 0, PULSE_CLEANUP_COMPACT = 1 };

/* ---- the broker ------------------------------------------------------- */

/*
 * First half of shutdown (Thread: any but the broker's own; Locks: none held
 * while it waits): refuses new publishes and waits (PULSE_SHUTDOWN),
 * completes every parked long-poll waiter at once (its callback gets
 * PULSE_SHUTDOWN), and lets publishes already written reach durability or
 * fail (their callbacks run as usual). Then refuses new admin operations
 * (the *_async calls return PULSE_SHUTDOWN) and runs every one already
 * queued to its end, callbacks included. Returns when no publish and no
 * admin operation is pending. Idempotent. (Local backend: a delete waiting
 * for its topic's last user keeps waiting for it - a maintenance step or a
 * heal reopen attempt on one of its partitions, or a request still reading
 * it - so the drain can last that long; a delete that stalled (topic.c) is
 * not waited for: the next start finishes it.)
 */
void pulse_broker_drain(struct pulse_broker *b);

/* Drains, stops the backend's threads, releases everything (local: closes
 * every log, writing snapshots, and the metadata store) and frees the
 * broker. Every struct pulse_fetch of it must be destroyed first. NULL is a
 * no-op. */
void pulse_broker_close(struct pulse_broker *b);

/* Identity strings, borrowed for the broker's lifetime; never block. */
const char *pulse_broker_cluster_id(const struct pulse_broker *b);
const char *pulse_broker_broker_id(const struct pulse_broker *b);

/* Wall-clock ms at which the broker was opened; never blocks. */
int64_t pulse_broker_started_at_ms(const struct pulse_broker *b);

/* 1..249 of [A-Za-z0-9._-], not "." or "..", not starting with "__".
 * Pure; the same rule for every backend. */
bool pulse_broker_name_valid(const char *name, size_t len);

/*
 * Completion of an asynchronous call that reports only a status (the
 * topic, cursor and consumer calls below): st is what the blocking form
 * would have returned. Called exactly once, on a thread of the backend, or
 * on the caller's thread before the call returns; out-parameters and errbuf
 * given to the call are written before it runs and must stay valid until
 * then.
 */
typedef void (*pulse_admin_done_fn)(void *arg, pulse_status_t st);

/* ---- topics ---------------------------------------------------------- */

/* A create request; negative numbers (and cleanup < 0) mean "default". */
struct pulse_topic_spec {
    const char *name;
    int32_t partitions;      /* 1..256 */
    int cleanup;             /* enum pulse_cleanup or -1 */
    int64_t retention_ms;    /* >= 0; 0 = off */
    int64_t retention_bytes; /* >= 0; 0 = off */
    int64_t segment_bytes;   /* 1024 .. just under 2 GiB (the local backend's segment limits) */
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
    int64_t created_at_ms;               /* wall clock */
    struct pulse_partition_stats *stats; /* `partitions` entries; NULL unless asked for */
};

/* Frees one info (and its stats). NULL is a no-op. */
void pulse_topic_info_free(struct pulse_topic_info *info);
/* Frees an array from pulse_broker_topic_list. */
void pulse_topic_info_list_free(struct pulse_topic_info **list, size_t n);

/*
 * Creates a topic and calls done(arg, st) with the result: PULSE_OK,
 * PULSE_EXISTS (exactly one of two concurrent creates of a name wins),
 * PULSE_IO, PULSE_NOSPACE, ... (errbuf says why). *out (nullable) gets the
 * created topic, with stats. The spec is checked first, on the caller's
 * thread: PULSE_INVALID_NAME / PULSE_INVALID (errbuf says which field) are
 * returned at once, as is PULSE_SHUTDOWN once the broker drains, and done
 * is then never called. spec is copied. Never blocks on I/O.
 * Local backend: runs on its admin thread; a create of a name whose delete
 * is still finishing waits for it, and one whose delete stalled on the
 * metadata store finishes that delete first, failing with its error
 * ("still being deleted") while it still cannot.
 */
pulse_status_t pulse_broker_topic_create_async(struct pulse_broker *b, const struct pulse_topic_spec *spec,
                                               struct pulse_topic_info **out, pulse_admin_done_fn done, void *arg,
                                               char *errbuf, size_t errlen);

/* Blocking form of pulse_broker_topic_create_async (tests, tools). */
pulse_status_t pulse_broker_topic_create(struct pulse_broker *b, const struct pulse_topic_spec *spec,
                                         struct pulse_topic_info **out, char *errbuf, size_t errlen);

/*
 * The topic (with its partitions' positions when with_stats), into *out
 * (pulse_topic_info_free). PULSE_TOPIC_NOT_FOUND. Does not wait: answered
 * from what the backend holds in memory (local: the name map and each
 * log's positions, under short locks; no I/O). A remote backend answers
 * from its metadata cache.
 */
pulse_status_t pulse_broker_topic_get(struct pulse_broker *b, const char *name, bool with_stats,
                                      struct pulse_topic_info **out);

/* Every topic, sorted by name (pulse_topic_info_list_free). Does not wait,
 * as pulse_broker_topic_get. */
pulse_status_t pulse_broker_topic_list(struct pulse_broker *b, bool with_stats, struct pulse_topic_info ***out,
                                       size_t *n_out);

/*
 * Changes retention (a negative argument keeps that value) and calls
 * done(arg, st): PULSE_OK or PULSE_TOPIC_NOT_FOUND, PULSE_IO, ... It takes
 * effect at the next retention pass. *out (nullable) gets the updated
 * topic. Returns PULSE_SHUTDOWN or PULSE_NOMEM at once (done never called).
 * Never blocks on I/O. Local backend: on the committer thread (ordered with
 * deletes, so it never rewrites the record of a topic being deleted);
 * topic.json first, then the store.
 */
pulse_status_t pulse_broker_topic_set_retention_async(struct pulse_broker *b, const char *name, int64_t retention_ms,
                                                      int64_t retention_bytes, struct pulse_topic_info **out,
                                                      pulse_admin_done_fn done, void *arg);

/* Blocking form of pulse_broker_topic_set_retention_async. */
pulse_status_t pulse_broker_topic_set_retention(struct pulse_broker *b, const char *name, int64_t retention_ms,
                                                int64_t retention_bytes, struct pulse_topic_info **out);

/*
 * Deletes a topic and calls done(arg, st): PULSE_OK, PULSE_TOPIC_NOT_FOUND,
 * or the error of a delete that could not be recorded (PULSE_IO,
 * PULSE_NOSPACE, ...), after which the topic is back as it was. From the
 * moment the delete is accepted, lookups, publishes, fetches and commits of
 * the topic see PULSE_TOPIC_NOT_FOUND; its pending publishes and waiters
 * complete with it. Returns PULSE_SHUTDOWN or PULSE_NOMEM at once (done
 * never called). Never blocks on I/O.
 * Local backend: the committer takes the topic off the name map at once;
 * the admin thread then waits, holding no lock, until the topic's last user
 * lets go, commits the metadata removal, removes the files and calls done.
 * Once recorded (the "deleting" marker) the delete is decided: PULSE_OK
 * even if the metadata store then fails, the topic is never served again,
 * and the rest is finished by the next create of the name or the next
 * start (if even the marker is uncertain: the error, and the topic is not
 * served; the next start decides). A create of the same name waits until
 * the delete is done.
 */
pulse_status_t pulse_broker_topic_delete_async(struct pulse_broker *b, const char *name, pulse_admin_done_fn done,
                                               void *arg);

/* Blocking form of pulse_broker_topic_delete_async. */
pulse_status_t pulse_broker_topic_delete(struct pulse_broker *b, const char *name);

/* ---- publish --------------------------------------------------------- */

/* One record to publish. Its bytes are the caller's until the call
 * returns (the backend copies what it keeps). */
struct pulse_publish_record {
    const uint8_t *key; /* NULL: no key (a keyless record is routed round-robin) */
    size_t key_len;
    const uint8_t *value; /* NULL: a null value (a tombstone when keyed) */
    size_t value_len;
    const struct pulse_header *headers; /* header_count entries */
    uint32_t header_count;
    int64_t timestamp;  /* ms since the epoch, when has_timestamp */
    bool has_timestamp; /* false: the broker's clock at append */
    int32_t partition;  /* -1: route (murmur2 of the key, or round-robin) */
};

struct pulse_offset_pair {
    uint32_t partition;
    int64_t offset;
};

/* Completion of an asynchronous publish: PULSE_OK once every record of it
 * is durable; PULSE_FENCED / PULSE_IO / PULSE_NOSPACE / PULSE_SHUTDOWN if
 * it never will be. Called exactly once. */
typedef void (*pulse_publish_done_fn)(void *arg, pulse_status_t st);

/*
 * Routes, validates and stores the records of one publish, each partition's
 * share with contiguous offsets. offsets_out (n entries, caller's) gets
 * (partition, offset) in request order. Validation happens before anything
 * is stored, so a refused publish stores nothing: PULSE_TOPIC_NOT_FOUND,
 * PULSE_PARTITION_NOT_FOUND (explicit partition out of range),
 * PULSE_INVALID (n == 0, timestamps of one partition spanning more than an
 * int32 of ms, ...), PULSE_TOO_LARGE (more records than the backend takes
 * in one publish, a key or headers over their limits); errbuf says why.
 * On PULSE_OK:
 *   *pending_out = false: already as durable as the backend acknowledges
 *     (local interval mode); done is never called.
 *   *pending_out = true: done(arg, st) will be called exactly once from a
 *     thread of the backend (local: the syncer), possibly before this
 *     function returns, so the caller must be ready for it first (e.g. its
 *     connection already suspended). When it fails, errbuf gets the reason
 *     before done runs (naming the fenced partition), so errbuf must stay
 *     valid until then.
 * On failure done is never called. PULSE_FENCED: a partition of the publish
 * is fenced (it is reopened in process; retry later); PULSE_NOSPACE: the
 * device is full (nothing of that partition was written; retry later).
 * Across partitions a publish is not atomic: when one partition's append
 * fails, the partitions appended before it keep their records (they become
 * durable as usual); offsets_out then still gets each record's offset (-1
 * for a record not stored) and errbuf names the partitions stored before it
 * with their offsets. Never waits for a sync. Local backend: encodes one
 * batch per partition and writes it to the page cache (a pwrite, which may
 * block on a full page cache; never an fsync).
 */
pulse_status_t pulse_broker_publish(struct pulse_broker *b, const char *topic, const struct pulse_publish_record *recs,
                                    size_t n, struct pulse_offset_pair *offsets_out, pulse_publish_done_fn done,
                                    void *arg, bool *pending_out, char *errbuf, size_t errlen);

/* Blocking form of pulse_broker_publish: returns once durable (or failed). */
pulse_status_t pulse_broker_publish_wait(struct pulse_broker *b, const char *topic,
                                         const struct pulse_publish_record *recs, size_t n,
                                         struct pulse_offset_pair *offsets_out, char *errbuf, size_t errlen);

/* ---- fetch ----------------------------------------------------------- */

/* Why offsets were stepped over (docs/API.md "Damaged data"). */
enum pulse_skip_reason {
    PULSE_SKIP_MISSING = 0, /* the records are gone (a lost segment, a gap proven by a cursor) */
    PULSE_SKIP_CORRUPT = 1  /* the stored bytes are damaged */
};

/*
 * Where one read of a partition stood. A read never serves offsets at or
 * above the high watermark, never steps over a skipped range except before
 * its first record, and reports that range here.
 */
struct pulse_fetch_pos {
    int64_t start_offset;   /* the offset asked for, raised to the log start */
    int64_t next_offset;    /* the offset after the last record read; when
                               nothing was read: start_offset, or skip_to when
                               the rest of the visible log is a skipped range */
    int64_t log_start;      /* the partition's log start and high watermark */
    int64_t high_watermark; /*   as this read saw them */
    int64_t skip_from;      /* offsets [skip_from, skip_to) at or after */
    int64_t skip_to;        /*   start_offset that cannot be served; equal when none */
    enum pulse_skip_reason skip_reason;
    uint64_t bytes; /* bytes this read took (the backend's stored form of the
                       records, which is what max_bytes bounds); 0 = none */
};

/*
 * Starts a fetch of one partition: an empty set of records that
 * pulse_broker_fetch_read fills and pulse_broker_fetch_next walks. The
 * records are the fetch's own copies (a fetch holds no reference on the
 * topic, so it never delays a delete), alive until
 * pulse_broker_fetch_destroy. PULSE_NOMEM. Does not wait. A fetch is used
 * by one thread at a time.
 */
pulse_status_t pulse_broker_fetch_create(struct pulse_broker *b, const char *topic, uint32_t partition,
                                         struct pulse_fetch **out);

/*
 * Reads the records at offset (raised to the log start) and after it into
 * f: whole units of the backend's stored form (local: CRC-verified batches)
 * of at most max_bytes together, never past the high watermark. *pos says
 * where the read stood; records below start_offset in the first unit are
 * not returned by pulse_broker_fetch_next. PULSE_TOPIC_NOT_FOUND,
 * PULSE_PARTITION_NOT_FOUND, PULSE_RANGE (offset above the high watermark;
 * pos->log_start and pos->high_watermark filled), PULSE_CORRUPT (damage
 * that could not be stepped around), PULSE_NOMEM. PULSE_TOO_LARGE: the
 * first unit alone takes more than max_bytes; nothing was read and *need
 * gets how many bytes a read must be allowed to take it (more than
 * max_bytes). Never waits for new data: a read at the high watermark
 * answers with nothing (pos->bytes == 0); pulse_broker_wait_data wakes the
 * caller when there is more. A remote backend reads what it has fetched
 * already and reports nothing at hand the same way. Local backend: a pread
 * of at most max_bytes from the page cache or the disk, under no lock but
 * a segment reference.
 */
pulse_status_t pulse_broker_fetch_read(struct pulse_broker *b, struct pulse_fetch *f, int64_t offset,
                                       uint64_t max_bytes, struct pulse_fetch_pos *pos, uint64_t *need);

/*
 * The next record of f, in offset order over everything read so far:
 * PULSE_OK with *rec filled (its bytes borrowed from f until it is
 * destroyed), PULSE_EOF after the last one (a later read adds more, and the
 * walk goes on from there).
 */
pulse_status_t pulse_broker_fetch_next(struct pulse_fetch *f, struct pulse_record *rec);

/* Starts the walk of f's records again from the first (an answer walks them
 * twice: once to plan, once to write). */
void pulse_broker_fetch_rewind(struct pulse_fetch *f);

/* Frees f and its records. NULL is a no-op. Thread: any (the last user). */
void pulse_broker_fetch_destroy(struct pulse_fetch *f);

/*
 * Where a read at offset would stand, without reading: *pos as
 * pulse_broker_fetch_read fills it, with pos->bytes > 0 when records are at
 * hand at or after start_offset. The same errors. Does not wait (local:
 * the segment index and batch headers only).
 */
pulse_status_t pulse_broker_fetch_probe(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t offset,
                                        struct pulse_fetch_pos *pos);

/* A raw slice: bytes of the stored form, to send as they are. */
struct pulse_raw_slice {
    int fd;                    /* a descriptor the caller owns and closes, or -1 */
    uint64_t pos;              /* where the bytes start in it */
    struct pulse_fetch_pos at; /* at.bytes: how many to send (0: none, fd -1) */
};

/*
 * The bytes of whole stored units at offset and after it, up to max_bytes
 * but at least one unit, never past the high watermark, as a descriptor
 * and a range the caller may send with sendfile (local: a dup() of the
 * segment file, which stays readable even if retention deletes the segment
 * meanwhile; the format is docs/Format.md's batch format). The errors of
 * pulse_broker_fetch_read, and PULSE_NOT_SUPPORTED from a backend that has
 * no stored form to hand out (answer with records instead). Does not wait.
 */
pulse_status_t pulse_broker_fetch_raw(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t offset,
                                      uint64_t max_bytes, struct pulse_raw_slice *out);

/* Counts fetched records and payload bytes for a topic's metrics. Never
 * blocks. */
void pulse_broker_note_fetched(struct pulse_broker *b, const char *topic, uint64_t records, uint64_t bytes);

/* Long-poll wake-up: PULSE_OK when data may be there (HW > offset) or the
 * deadline passed; PULSE_SHUTDOWN; PULSE_TOPIC_NOT_FOUND if deleted. */
typedef void (*pulse_wait_fn)(void *arg, pulse_status_t st);

/*
 * Parks a waiter until the partition's high watermark passes offset or the
 * monotonic deadline (pulse_clock_mono_us) passes. If it is past offset
 * already, nothing is parked and *parked_out = false (fn is not called).
 * Otherwise *parked_out = true and fn(arg, st) runs exactly once, on a
 * thread of the backend (local: the syncer), possibly before this returns.
 * PULSE_SHUTDOWN when draining. Never blocks on I/O.
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
 * Commits cursors atomically or none, durably before done runs. Each must
 * name an existing topic and partition (PULSE_TOPIC_NOT_FOUND,
 * PULSE_PARTITION_NOT_FOUND) and an offset in [0, HW] (PULSE_RANGE); errbuf
 * says which cursor. The consumer name and n are checked here:
 * PULSE_INVALID_NAME / PULSE_INVALID (errbuf), PULSE_SHUTDOWN, PULSE_NOMEM
 * are returned at once and done is never called. cursors is copied. Never
 * blocks on I/O. Local backend: the committer thread takes every commit
 * queued while its previous write ran, validates each one alone against
 * the live topics, writes all the valid ones in one LevelDB sync batch and
 * then calls each done with its own result (a commit that fails validation
 * takes no part in the write; a failed write fails every commit in it).
 */
pulse_status_t pulse_broker_cursor_commit_async(struct pulse_broker *b, const char *consumer,
                                                const struct pulse_cursor *cursors, size_t n, pulse_admin_done_fn done,
                                                void *arg, char *errbuf, size_t errlen);

/* Blocking form of pulse_broker_cursor_commit_async. */
pulse_status_t pulse_broker_cursor_commit(struct pulse_broker *b, const char *consumer,
                                          const struct pulse_cursor *cursors, size_t n, char *errbuf, size_t errlen);

/*
 * A consumer's cursor on one partition, with the partition's high watermark
 * and the lag, into *out; done(arg, st) with PULSE_OK,
 * PULSE_CURSOR_NOT_FOUND (never committed), PULSE_TOPIC_NOT_FOUND,
 * PULSE_PARTITION_NOT_FOUND, PULSE_IO. PULSE_INVALID_NAME, PULSE_SHUTDOWN,
 * PULSE_NOMEM at once (done never called). Never blocks on the network or
 * a write. Local backend: completes on the caller's thread before it
 * returns (see docs/Architecture.md section 10 for why that is short).
 */
pulse_status_t pulse_broker_cursor_get_async(struct pulse_broker *b, const char *consumer, const char *topic,
                                             uint32_t partition, struct pulse_cursor *out, pulse_admin_done_fn done,
                                             void *arg);

/* Blocking form of pulse_broker_cursor_get_async. */
pulse_status_t pulse_broker_cursor_get(struct pulse_broker *b, const char *consumer, const char *topic,
                                       uint32_t partition, struct pulse_cursor *out);

/*
 * A consumer's cursors sorted by topic then partition, each with its
 * partition's high watermark and lag: *out allocated (pulse_free), possibly
 * NULL with *n_out == 0; done(arg, st). Cursors of topics deleted meanwhile
 * are left out. Refusals as pulse_broker_cursor_get_async; the same
 * completion.
 */
pulse_status_t pulse_broker_cursor_list_async(struct pulse_broker *b, const char *consumer, struct pulse_cursor **out,
                                              size_t *n_out, pulse_admin_done_fn done, void *arg);

/* Blocking form of pulse_broker_cursor_list_async. */
pulse_status_t pulse_broker_cursor_list(struct pulse_broker *b, const char *consumer, struct pulse_cursor **out,
                                        size_t *n_out);

/*
 * Consumer names (with at least one cursor), sorted, into *names_out (free
 * with pulse_broker_names_free; NULL with *n_out == 0 when none);
 * done(arg, st). Refusals and completion as pulse_broker_cursor_get_async.
 */
pulse_status_t pulse_broker_consumer_list_async(struct pulse_broker *b, char ***names_out, size_t *n_out,
                                                pulse_admin_done_fn done, void *arg);

/* Blocking form of pulse_broker_consumer_list_async. */
pulse_status_t pulse_broker_consumer_list(struct pulse_broker *b, char ***names_out, size_t *n_out);

/* Frees a list of names: each name and the array (pulse_free). */
void pulse_broker_names_free(char **names, size_t n);

/*
 * Removes every cursor of the consumer (deleting an unknown one is
 * PULSE_OK); done(arg, st). PULSE_INVALID_NAME, PULSE_SHUTDOWN, PULSE_NOMEM
 * at once (done never called). Never blocks on I/O. Local backend: on the
 * committer thread, ordered with commits; one metadata sync write.
 */
pulse_status_t pulse_broker_consumer_delete_async(struct pulse_broker *b, const char *consumer,
                                                  pulse_admin_done_fn done, void *arg);

/* Blocking form of pulse_broker_consumer_delete_async. */
pulse_status_t pulse_broker_consumer_delete(struct pulse_broker *b, const char *consumer);

/* ---- health and metrics ------------------------------------------------ */

/*
 * Appends the broker's metrics in Prometheus text format 0.0.4. Does not
 * wait: rendered from what the backend holds (counters, positions, its
 * view of consumer lag). Local backend: fsync count and latency histogram,
 * per-partition high watermark / log start / size, published and fetched
 * records and bytes by topic, consumer lag (one scan of the cursor keys of
 * the metadata store: memtable and block cache, at worst reads of its
 * table files), recovery truncations, retention and compaction counters,
 * fenced partitions and the segment descriptor cache.
 */
pulse_status_t pulse_broker_metrics(struct pulse_broker *b, struct pulse_buf *out);

/* A partition the backend cannot serve writes for right now (local: its
 * log is fenced, waiting to be reopened in process). */
struct pulse_fenced_partition {
    char topic[PULSE_NAME_MAX + 1];
    uint32_t partition;
    int64_t fenced_ms;       /* since the fence was noticed (0: just now) */
    int64_t next_attempt_ms; /* until the next reopen attempt (0: due) */
    uint32_t failed_attempts;
    pulse_status_t last_error; /* of the last failed attempt, else PULSE_OK */
};

/* The fenced partitions (health, /readyz), sorted by topic then partition;
 * *out allocated (pulse_free), NULL with *n_out == 0 when there are none.
 * Does not wait. Local backend: map_lock (read) and the heal thread's
 * mutex, briefly; never waits for a reopen or any I/O. */
pulse_status_t pulse_broker_fenced_list(struct pulse_broker *b, struct pulse_fenced_partition **out, size_t *n_out);

#endif
