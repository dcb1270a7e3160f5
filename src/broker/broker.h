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
 * (local.h, src/broker) keeps partitions on disk; the Kafka backend
 * (kafka/kafka.h, src/kafka) serves the same calls from a Kafka cluster.
 * Opening a broker is the backend's own affair (pulse_broker_open in
 * local.h, pulse_kafka_open in kafka.h); everything after that is this
 * header.
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
/* How a topic's batches are stored (docs/Format.md 1.8). */
enum pulse_compression { PULSE_COMPRESSION_NONE = 0, PULSE_COMPRESSION_ZLIB = 1 };

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

/* The same rule for a NUL-terminated name; false for NULL. */
bool pulse_broker_cname_valid(const char *name);

/* The one wording of "no such partition" (every route says it alike):
 * 'topic "t" has no partition P; its partitions are 0 to N-1' (or "its
 * only partition is 0"; no tail when partitions is 0), after prefix
 * (nullable), into errbuf. Pure. */
void pulse_broker_no_partition_message(char *errbuf, size_t errlen, const char *prefix, const char *topic,
                                       int64_t partition, uint32_t partitions);

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
    int compression;         /* enum pulse_compression, or -1 (or 0): none */
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
    enum pulse_compression compression;
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

/* A change of a topic's settings; a negative member keeps that value. */
struct pulse_topic_change {
    int64_t retention_ms;
    int64_t retention_bytes;
    int compression; /* enum pulse_compression, or -1 */
};

/*
 * pulse_broker_topic_set_retention_async for every setting that may change
 * after a create: retention, and the compression of the batches written
 * from then on (batches already stored keep theirs; a reader takes each
 * batch's own). Same completion, threads and statuses; a backend without
 * compression answers a change of it with PULSE_NOT_SUPPORTED at once.
 */
pulse_status_t pulse_broker_topic_change_async(struct pulse_broker *b, const char *name,
                                               const struct pulse_topic_change *chg, struct pulse_topic_info **out,
                                               pulse_admin_done_fn done, void *arg);

/*
 * Makes sure the backend can tell whether topic exists without waiting on
 * the caller's thread. A backend that serves a remote cluster (Kafka) keeps
 * a cache of its topics; a publish or fetch naming a topic the cache cannot
 * answer for would have to ask the cluster on the caller's thread. The
 * HTTP handlers call this first instead:
 *   PULSE_OK, *pending_out false: known now (the topic exists, or the
 *     backend always knows at once: local); the call that follows does not
 *     wait for a lookup;
 *   PULSE_OK, *pending_out true: done(arg, st) comes exactly once from a
 *     backend thread (possibly before this returns), with PULSE_OK,
 *     PULSE_TOPIC_NOT_FOUND, PULSE_UNAVAILABLE (errbuf names the cluster,
 *     so it must stay valid until then) or PULSE_SHUTDOWN;
 *   any other status at once (TOPIC_NOT_FOUND, UNAVAILABLE, SHUTDOWN,
 *     NOMEM), with no callback.
 * Thread: any; never blocks.
 */
pulse_status_t pulse_broker_topic_lookup_async(struct pulse_broker *b, const char *topic, pulse_admin_done_fn done,
                                               void *arg, bool *pending_out, char *errbuf, size_t errlen);

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
    int64_t offset; /* >= 0, or one of the two below */
};

/* A record of a publish that was not stored (its publish failed; the API
 * answers per record, docs/API.md "Per-record results"). */
#define PULSE_OFFSET_NONE (-1)
/* A record acknowledged as durable whose offset the backend does not know
 * (Kafka: a record "implicitly acknowledged by a later batch" carries no
 * offset); the API shows "offset": null. The local backend never gives it. */
#define PULSE_OFFSET_UNKNOWN (-2)

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

/* An idempotent publish (docs/API.md "Retrying a publish"). */
#define PULSE_IDEM_KEY_MAX 255

struct pulse_publish_idem {
    const char *key; /* the client's Idempotency-Key: 1..PULSE_IDEM_KEY_MAX bytes, borrowed for the call */
    size_t key_len;
    /* Out: true when the answer replays an earlier publish with this key
     * (offsets_out then holds that publish's offsets and nothing new was
     * stored). Written before done is called, or before the call returns
     * when no callback follows. */
    bool duplicate;
};

/*
 * pulse_broker_publish with an idempotency key. Within the backend's
 * window (local: publish.idempotency-window, at most
 * publish.idempotency-max-keys keys remembered) a publish whose key and
 * records equal those of an earlier one stores nothing and answers with
 * that one's offsets (idem->duplicate); one that is still running is
 * waited for (done is called when it completes, with its outcome), never by
 * blocking the caller. The same key with different records is
 * PULSE_KEY_REUSED, refused before anything is stored. Keyless records
 * are routed from the key, so a retry puts them where the first try did.
 * done must not be NULL (the answer may have to wait for another publish
 * whatever the sync mode). Everything else as pulse_broker_publish.
 * PULSE_NOT_SUPPORTED when the backend has no idempotent publish.
 */
pulse_status_t pulse_broker_publish_idem(struct pulse_broker *b, const char *topic,
                                         const struct pulse_publish_record *recs, size_t n,
                                         struct pulse_publish_idem *idem, struct pulse_offset_pair *offsets_out,
                                         pulse_publish_done_fn done, void *arg, bool *pending_out, char *errbuf,
                                         size_t errlen);

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
    uint64_t bytes;       /* bytes this read took (the backend's stored form of the
                             records, which is what max_bytes bounds); 0 = none */
    uint64_t plain_bytes; /* and what it keeps besides (the local backend: the
                             inflated records of compressed batches) */
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
 * destroyed; local backend, a record of a compressed batch: only until the
 * next call of pulse_broker_fetch_next or _rewind, since one inflated batch
 * is kept at a time), PULSE_EOF after the last one (a later read adds more,
 * and the walk goes on from there).
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

/*
 * Positions by time: the offset of the first record of the partition whose
 * timestamp is at or after ts_ms (ms since the epoch), below the high
 * watermark; the high watermark when there is none yet (where a reader
 * waits for one). Never below the log start. PULSE_TOPIC_NOT_FOUND,
 * PULSE_PARTITION_NOT_FOUND, PULSE_IO, PULSE_CORRUPT. Does not wait for
 * data. Local backend: the segments' newest timestamps (memory), then a
 * binary search of one segment's sparse index by the batch headers its
 * entries point at and one verified read of a batch (a few small preads:
 * pulse_plog_offset_for_time in storage/plog.h; exact when timestamps do
 * not decrease along the log, as for records the broker stamps). A Kafka
 * backend answers with ListOffsets by timestamp (offsets_for_times); a
 * backend without time lookups answers PULSE_NOT_SUPPORTED.
 */
pulse_status_t pulse_broker_offset_for_time(struct pulse_broker *b, const char *topic, uint32_t partition,
                                            int64_t ts_ms, int64_t *offset_out);

/* Counts fetched records and payload bytes for a topic's metrics. Never
 * blocks. */
void pulse_broker_note_fetched(struct pulse_broker *b, const char *topic, uint64_t records, uint64_t bytes);

/*
 * A hint from the front end: how many client connections are open right
 * now (the HTTP server calls it as they open and close). The local backend
 * lets a publisher sync its partition on its own thread, which spares it
 * two thread hand-offs, only while it serves the one connection open, or
 * while the device's fdatasyncs are fast: with more connections, an HTTP
 * worker blocked in a slow fdatasync holds back the requests of the other
 * connections it serves, each of which would then pay an fdatasync of its
 * own (docs/Performance.md "Durable publish: CPU per request"). Until the
 * first call the broker assumes one. Backends without such a choice
 * ignore it. Never blocks.
 */
void pulse_broker_note_clients(struct pulse_broker *b, uint32_t open);

/* Long-poll wake-up: PULSE_OK when data may be there (HW > offset) or the
 * deadline passed; PULSE_SHUTDOWN; PULSE_TOPIC_NOT_FOUND if deleted. */
typedef void (*pulse_wait_fn)(void *arg, pulse_status_t st);

/*
 * Parks a waiter until the partition's high watermark passes offset or the
 * monotonic deadline (pulse_clock_mono_us) passes (pulse_broker_wait_any
 * with one position; backend.c builds it from that). If it is past offset
 * already, nothing is parked and *parked_out = false (fn is not called).
 * Otherwise *parked_out = true and fn(arg, st) runs exactly once, on a
 * thread of the backend (local: the syncer), possibly before this returns.
 * PULSE_SHUTDOWN when draining. Never blocks on I/O.
 */
pulse_status_t pulse_broker_wait_data(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t offset,
                                      int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out);

/* One position a waiter watches: a partition of a topic and the offset
 * whose arrival wakes it (the partition's high watermark passing it). */
struct pulse_wait_pos {
    const char *topic; /* borrowed for the call only */
    uint32_t partition;
    int64_t offset;
};

/* The most positions one waiter may watch. */
#define PULSE_WAIT_MAX_POSITIONS 4096

/*
 * Parks one waiter on several positions, of one topic or of several: it
 * fires when the high watermark of ANY of them passes its offset, or when
 * the monotonic deadline (pulse_clock_mono_us) passes.
 * pulse_broker_wait_data is the case n == 1.
 *
 * If a position is past its offset already, nothing is parked:
 * *parked_out = false and *ready_out (nullable) gets the index of the first
 * such position; fn is not called. Otherwise *parked_out = true and
 * fn(arg, st) runs exactly once, on a thread of the backend (local: the
 * syncer), possibly before this returns, so the caller must be ready for
 * it first (the HTTP layer suspends its connection before the call). The
 * callback does not say which position woke it: the caller probes them
 * again (pulse_broker_fetch_probe, or a read) - more than one may have
 * data by then.
 *
 * Statuses the callback gets: PULSE_OK (data at some position, or the
 * deadline passed), PULSE_SHUTDOWN (draining), PULSE_TOPIC_NOT_FOUND (a
 * topic of ANY position was deleted). Returned at once, no callback:
 * PULSE_INVALID (n == 0, n > PULSE_WAIT_MAX_POSITIONS, fn NULL),
 * PULSE_TOPIC_NOT_FOUND / PULSE_PARTITION_NOT_FOUND (the first position
 * naming one), PULSE_SHUTDOWN, PULSE_NOMEM. pos is read during the call
 * only. There is no cancel: a caller that loses interest lets the deadline
 * fire, so keep deadlines short (a long-poll's wait, an event stream's
 * heartbeat). Never blocks on I/O. Local backend: one waiter on the
 * syncer's list holding a topic reference per position; the syncer checks
 * its positions after every sync pass (each a read of an atomic high
 * watermark), so the cost of a pass grows with the positions parked.
 */
pulse_status_t pulse_broker_wait_any(struct pulse_broker *b, const struct pulse_wait_pos *pos, size_t n,
                                     int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out,
                                     size_t *ready_out);

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

/*
 * The same, with every family labelled by partition summed by topic, so a
 * scrape of many partitions stays small (GET /metrics?per=topic): the
 * local backend renders pulse_topic_partitions, pulse_topic_size_bytes,
 * pulse_topic_high_watermark_sum and pulse_topic_log_start_offset_sum
 * instead of the three pulse_partition_* gauges, and pulse_consumer_lag
 * by consumer and topic. A backend without per-partition families answers
 * as pulse_broker_metrics. Does not wait.
 */
pulse_status_t pulse_broker_metrics_per_topic(struct pulse_broker *b, struct pulse_buf *out);

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

/* ---- consumer groups ------------------------------------------------- */

/*
 * A consumer group shares the partitions of the topics its members consume
 * among them (docs/API.md "Consumer groups", docs/Architecture.md section
 * 11). Membership is held with leases, not sessions: a member joins, gets
 * an id, and every call it makes renews its lease; a member that makes no
 * call for its lease is removed. The group's committed positions are the
 * consumer cursors of the group's name (the same store, routes and lag).
 *
 * Every answer to a member tells it its generation and the partitions it
 * owns (struct pulse_group_view); a rebalance is learnt there, never as an
 * error. A partition moves to a new member only once its previous owner
 * acknowledged losing it (it made a call and was told) or was removed, so
 * two members never both hold it. Commits are fenced: only the owner may
 * commit a partition, with the generation it was last told.
 *
 * Membership lives in the backend's memory: after a restart every member
 * id is unknown and its calls answer PULSE_REJOIN (join again; the group
 * resumes from its committed cursors). Members of the previous run may
 * still be working inside leases granted before the restart, so a backend
 * that starts with topics hands out no partition for its longest lease
 * (the view's hold_ms says how long is left).
 */

/* Longest member id (text), and most topics one member consumes. */
#define PULSE_GROUP_MEMBER_ID_MAX 40
#define PULSE_GROUP_MAX_TOPICS 16

/* One partition of a member: where its group fetch reads next (offset, -1
 * when the view does not say), or a position to commit. */
struct pulse_group_partition {
    char topic[PULSE_NAME_MAX + 1];
    uint32_t partition;
    int64_t offset;
};

/* What a join asks for. */
struct pulse_group_join_spec {
    const char *const *topics; /* ntopics distinct, existing topic names */
    size_t ntopics;            /* 1..PULSE_GROUP_MAX_TOPICS */
    int64_t lease_ms;          /* 0: the backend's default; else within its bounds */
    bool start_latest;         /* a partition without a cursor starts at its end, not its log start */
};

/*
 * The checks of a join every backend makes before it looks anything up:
 * the group's name and each topic's (pulse_broker_name_valid),
 * 1..PULSE_GROUP_MAX_TOPICS topics, none named twice. PULSE_INVALID_NAME
 * or PULSE_INVALID with errbuf naming the cause. Pure. The backend then
 * checks that the topics exist, then the lease (pulse_group_join_lease).
 */
pulse_status_t pulse_group_join_names_check(const char *group, const struct pulse_group_join_spec *spec, char *errbuf,
                                            size_t errlen);

/*
 * The lease a join gets: spec's, or lease_default_ms when it asks for none
 * (0). PULSE_INVALID, with errbuf naming the bounds and their settings
 * (groups.lease-min, groups.lease-max), outside [lease_min_ms,
 * lease_max_ms]. Pure.
 */
pulse_status_t pulse_group_join_lease(const struct pulse_group_join_spec *spec, int64_t lease_min_ms,
                                      int64_t lease_default_ms, int64_t lease_max_ms, int64_t *lease_ms, char *errbuf,
                                      size_t errlen);

/* A member's view of its group, carried by every answer to a member. */
struct pulse_group_view {
    char member_id[PULSE_GROUP_MEMBER_ID_MAX + 1];
    uint64_t generation; /* the group's generation, as told to this member now */
    int64_t lease_ms;
    struct pulse_group_partition *parts; /* owned now; nparts entries, pulse_free (pulse_group_view_fini) */
    size_t nparts;
    size_t npending; /* partitions assigned to it still held by their previous owner, or by the start hold */
    /* > 0: the backend started less than groups.lease-max ago and hands
     * out no partition for this many more ms (members of its previous run
     * may still be inside their leases); the npending partitions come then. */
    int64_t hold_ms;
};

/* Frees what a view holds (not the view). */
void pulse_group_view_fini(struct pulse_group_view *v);

/* One partition of a group as pulse_broker_group_describe_async shows it. */
struct pulse_group_part_info {
    char topic[PULSE_NAME_MAX + 1];
    uint32_t partition;
    char owner[PULSE_GROUP_MEMBER_ID_MAX + 1];          /* "" when free */
    char assigned[PULSE_GROUP_MEMBER_ID_MAX + 1];       /* who it goes to; differs from owner during a hand-over */
    char owner_label[PULSE_GROUP_MEMBER_ID_MAX + 1];    /* owner, masked (member_info.label) */
    char assigned_label[PULSE_GROUP_MEMBER_ID_MAX + 1]; /* assigned, masked */
    int64_t committed;                                  /* the group's cursor, -1 if none */
    int64_t high_watermark;
    int64_t lag; /* high_watermark - committed (from the log start without a cursor) */
};

struct pulse_group_member_info {
    char member_id[PULSE_GROUP_MEMBER_ID_MAX + 1];
    /* The id with its secret part masked: unique in the group, names the
     * member to people, and authorises nothing (a member id is what lets
     * a caller act as the member, so only administrators see it). */
    char label[PULSE_GROUP_MEMBER_ID_MAX + 1];
    int64_t lease_ms;
    int64_t lease_expires_in_ms; /* from now; may be <= 0 just before removal */
    uint64_t generation;         /* the last generation this member was told */
    uint32_t nparts;             /* owned now */
    int64_t joined_at_ms;        /* wall clock */
    char **topics;               /* ntopics names */
    size_t ntopics;
};

struct pulse_group_info {
    char name[PULSE_NAME_MAX + 1];
    uint64_t generation;
    uint64_t rebalances;
    struct pulse_group_member_info *members; /* sorted by id */
    size_t nmembers;
    struct pulse_group_part_info *parts; /* sorted by topic then partition */
    size_t nparts;
};

/* Frees an info from pulse_broker_group_describe_async. NULL is a no-op. */
void pulse_group_info_free(struct pulse_group_info *info);

/*
 * Joins group (created on its first member) as a new member consuming the
 * topics, and fills *view (the new member's id, the generation, the
 * partitions it owns at once: none it must wait for). PULSE_INVALID_NAME
 * (group or topic name), PULSE_INVALID (no topics, too many, repeated, a
 * lease out of bounds: errbuf says), PULSE_TOPIC_NOT_FOUND (errbuf names
 * it), PULSE_TOO_LARGE (too many members or groups), PULSE_SHUTDOWN.
 * Does not wait: memory only (local: the group table's lock and a topic
 * lookup per topic).
 */
pulse_status_t pulse_broker_group_join(struct pulse_broker *b, const char *group,
                                       const struct pulse_group_join_spec *spec, struct pulse_group_view *view,
                                       char *errbuf, size_t errlen);

/*
 * A member's call with nothing else to do (the heartbeat): renews its
 * lease, hands over the partitions it no longer owns and takes up the
 * free ones assigned to it; *view as for join. PULSE_REJOIN when the group
 * does not know the member (it left, its lease ran out, the broker
 * restarted). Does not wait.
 */
pulse_status_t pulse_broker_group_heartbeat(struct pulse_broker *b, const char *group, const char *member,
                                            struct pulse_group_view *view);

/* Leaves at once: the member's partitions are free for the others at
 * their next call. PULSE_OK also for a member the group does not know.
 * Does not wait. */
pulse_status_t pulse_broker_group_leave(struct pulse_broker *b, const char *group, const char *member);

/*
 * Where a member's previous group fetch answer left off, as the member
 * gives it back (docs/API.md "Group fetch": the answer's "resume"): the
 * generation that answer was made in and, per partition, the next offset
 * to read (pos sorted by topic then partition, each at most once).
 */
struct pulse_group_resume {
    uint64_t generation;
    const struct pulse_group_partition *pos; /* borrowed for the call */
    size_t n;
};

/*
 * The start of a group fetch: a heartbeat whose view also says, per owned
 * partition, where to read (parts[i].offset). The broker keeps no read
 * position of its own, so that an answer lost on the wire is never
 * skipped: a partition resumes from `from` (the member's last answer it
 * did receive; NULL: none) when the member has owned that partition
 * without a break since from->generation; else from the group's committed
 * cursor; else, with no cursor, from the partition's log start, or (a
 * member that joined with start_latest) from its high watermark, which is
 * then committed as the group's cursor (durably, before done runs) so that
 * the group's start is pinned for every later owner. Entries of `from` for
 * partitions the member does not own are ignored. done(arg, st) once;
 * PULSE_REJOIN is returned at once (done never called), as are
 * PULSE_RANGE (an offset of `from` above its partition's high watermark;
 * errbuf names it), PULSE_SHUTDOWN and PULSE_NOMEM. Through done: the
 * errors of the pinning cursor commit. Local backend: completes on the
 * caller's thread before it returns (one cursor read per partition without
 * a position) unless a start is pinned (then on the committer's).
 */
pulse_status_t pulse_broker_group_poll_async(struct pulse_broker *b, const char *group, const char *member,
                                             const struct pulse_group_resume *from, struct pulse_group_view *view,
                                             pulse_admin_done_fn done, void *arg, char *errbuf, size_t errlen);

/*
 * The end of a group fetch: checks that the member still owns the
 * partitions it read (n entries) in `generation`, and renews its lease.
 * PULSE_GROUP_FENCED when the member's generation is no longer
 * `generation` or it lost one of the partitions meanwhile (the records
 * read must not be handed out: answer with a fresh heartbeat instead);
 * PULSE_REJOIN. Stores no position. Does not wait.
 */
pulse_status_t pulse_broker_group_fetched(struct pulse_broker *b, const char *group, const char *member,
                                          uint64_t generation, const struct pulse_group_partition *pos, size_t n);

/*
 * The wait of a group fetch: parks until any of the positions (n entries,
 * the offsets to read next; n may be 0 for a member without partitions)
 * has data, until something changes for the member's group (a rebalance,
 * a partition it waits for is released), or until the monotonic deadline.
 * Nothing is parked (*parked_out = false, PULSE_OK) when data is at hand
 * or the member's generation is no longer `generation` or its next call
 * would bring news: answer at once. Otherwise *parked_out = true and
 * fn(arg, st) runs exactly once (PULSE_OK, PULSE_SHUTDOWN at drain,
 * PULSE_TOPIC_NOT_FOUND when a topic of a position was deleted), on a
 * thread of the backend, possibly before this returns. PULSE_REJOIN,
 * PULSE_SHUTDOWN, PULSE_INVALID, PULSE_NOMEM at once (no callback). The
 * wait renews the member's lease; keep deadlines below it. Local backend:
 * one pulse_broker_wait_any waiter over the positions, plus an entry on
 * the group that a change wakes first; deadlines of waits without
 * positions are kept by the syncer's tick.
 */
pulse_status_t pulse_broker_group_wait(struct pulse_broker *b, const char *group, const char *member,
                                       uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                       int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out);

/*
 * A fenced commit: stores the positions (n entries, offset = the next
 * record to process) as the group's cursors, atomically, as
 * pulse_broker_cursor_commit_async does for the consumer named group, and
 * fills *view (after the commit) before done runs. Refused at once (done
 * never called, nothing stored): PULSE_REJOIN (unknown member),
 * PULSE_GROUP_FENCED (generation is not the one the member was last told,
 * or a partition it does not own; errbuf names it), PULSE_INVALID,
 * PULSE_SHUTDOWN, PULSE_NOMEM. Later, through done: the errors of a
 * cursor commit (PULSE_RANGE, ...). While a commit runs, the member's
 * partitions are not handed over, so it never lands after a new owner
 * started from the cursor. Never blocks on I/O (local: the committer).
 */
pulse_status_t pulse_broker_group_commit_async(struct pulse_broker *b, const char *group, const char *member,
                                               uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                               struct pulse_group_view *view, pulse_admin_done_fn done, void *arg,
                                               char *errbuf, size_t errlen);

/* Blocking form of pulse_broker_group_commit_async (tests, tools). */
pulse_status_t pulse_broker_group_commit(struct pulse_broker *b, const char *group, const char *member,
                                         uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                         struct pulse_group_view *view, char *errbuf, size_t errlen);

/* The groups with at least one member, sorted (pulse_broker_names_free).
 * Does not wait. */
pulse_status_t pulse_broker_group_list(struct pulse_broker *b, char ***names_out, size_t *n_out);

/*
 * A group's members, generation and partitions with the committed cursor,
 * high watermark and lag of each, into *out (pulse_group_info_free);
 * done(arg, st): PULSE_OK or PULSE_NOT_FOUND (no member). PULSE_INVALID_NAME
 * and PULSE_NOMEM at once. Local backend: on the caller's thread before it
 * returns (one scan of the group's cursors).
 */
pulse_status_t pulse_broker_group_describe_async(struct pulse_broker *b, const char *group,
                                                 struct pulse_group_info **out, pulse_admin_done_fn done, void *arg);

/* Blocking form of pulse_broker_group_describe_async. */
pulse_status_t pulse_broker_group_describe(struct pulse_broker *b, const char *group, struct pulse_group_info **out);

/*
 * Asynchronous forms of join, heartbeat, leave and fetched, for the HTTP
 * handlers: the same arguments, statuses and *view as the calls above, but
 * the result comes through done(arg, st), exactly once, unless the call
 * is refused at once (a status other than PULSE_OK returned; done never
 * called). The local backend answers from memory, calling done on the
 * caller's thread before return; the Kafka backend's calls are events of
 * its group log and complete on its log reader once the event is read
 * back (docs/Scaling.md "Consumer groups on Kafka"), with
 * PULSE_UNAVAILABLE when the event could not be written in time.
 * pos (fetched) is copied; view must live until done.
 */
pulse_status_t pulse_broker_group_join_async(struct pulse_broker *b, const char *group,
                                             const struct pulse_group_join_spec *spec, struct pulse_group_view *view,
                                             pulse_admin_done_fn done, void *arg, char *errbuf, size_t errlen);
pulse_status_t pulse_broker_group_heartbeat_async(struct pulse_broker *b, const char *group, const char *member,
                                                  struct pulse_group_view *view, pulse_admin_done_fn done, void *arg);
pulse_status_t pulse_broker_group_leave_async(struct pulse_broker *b, const char *group, const char *member,
                                              pulse_admin_done_fn done, void *arg);
pulse_status_t pulse_broker_group_fetched_async(struct pulse_broker *b, const char *group, const char *member,
                                                uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                                pulse_admin_done_fn done, void *arg);

#endif
