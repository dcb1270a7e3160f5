/* SPDX-License-Identifier: MIT */
/*
 * meta.h - the metadata store: broker identity, topic and partition records
 * and consumer cursors, kept in LevelDB under <data-dir>/meta.
 *
 * Key layout (storage contract section 6; docs/Architecture.md "Metadata"):
 *   meta/schema-version            8-byte big-endian int64 (this code: 1)
 *   cluster/current                the cluster id (bytes of the id)
 *   cluster/<id>                   {"id":..,"created_at_ms":..}
 *   broker/current                 the broker id
 *   broker/<id>                    {"id":..,"created_at_ms":..}
 *   topic/<name>                   {"name":..,"partitions":..,"cleanup":"delete"|"compact",
 *                                   "retention_ms":..,"retention_bytes":..,
 *                                   "segment_bytes":..,"created_at_ms":..}
 *   partition/<topic>/<id>         {"topic":..,"partition":..,"created_at_ms":..}
 *   cursor/<consumer>/<topic>/<p>  8-byte big-endian int64 (the next offset to consume)
 * Partition ids are decimal. Names never contain '/', so a prefix that ends
 * in '/' selects exactly one topic or consumer ("partition/orders/" never
 * matches "orders2").
 *
 * Durability: every write this module makes is a LevelDB sync write
 * (the write-ahead log is fdatasynced before the call returns), and keys that
 * change together go in one write batch, so after a crash either all of them
 * or none are present.
 *
 * Failed writes: a write that returns an error (PULSE_IO, PULSE_NOSPACE, ...)
 * has an unknown outcome, as after a crash: its batch may have reached the
 * log, and then it takes effect, whole, when the store is next reopened
 * (before the next write, which reopens it, or at the next open), ordered
 * before every later write. Reads meanwhile may not show it. A caller that
 * must know the outcome writes again (e.g. deletes what a failed create
 * wrote): that later write wins.
 *
 * This module knows no broker types: it stores plain value structs below.
 * Values read back are hostile input: a record that fails to parse is
 * PULSE_CORRUPT, never a crash.
 *
 * Thread: every function may be called from any thread once the store is
 * open (a LevelDB handle is thread-safe; iterators and batches are local to
 * one call). Locks: none of ours; callers serialise read-check-write
 * sequences themselves (the broker's topic admin lock).
 */
#ifndef PULSE_META_META_H
#define PULSE_META_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_meta;

/* The schema this code writes and the newest it can read. */
#define PULSE_META_SCHEMA_VERSION 1
/* Longest topic or consumer name (kept equal to PULSE_NAME_MAX). */
#define PULSE_META_NAME_MAX 249
/* Identity ids: 16 lower-case hex characters. */
/* Table files LevelDB may keep open (plus its log, manifest, lock and info
 * log). */
#define PULSE_META_MAX_OPEN_FILES 64
#define PULSE_META_ID_LEN 16

/* A topic definition as stored. cleanup: 0 = delete, 1 = compact.
 * compression: 0 = none, 1 = zlib (stored as "compression":"zlib"; the
 * member is left out for none, so a topic without compression keeps the
 * record and topic.json of earlier versions byte for byte). */
struct pulse_meta_topic {
    char name[PULSE_META_NAME_MAX + 1];
    uint32_t partitions;
    int cleanup;
    int compression;
    int64_t retention_ms;
    int64_t retention_bytes;
    int64_t segment_bytes;
    int64_t created_at_ms;
};

/* One cursor of a consumer. */
struct pulse_meta_cursor {
    char topic[PULSE_META_NAME_MAX + 1];
    uint32_t partition;
    int64_t offset;
};

/*
 * Opens (creating if missing) the store in dir, checks the schema version
 * (writing it on a fresh store) and creates the cluster and broker identity
 * on first start. dir's parent must exist. Same as pulse_meta_open_ex with
 * neither an identity to keep nor a report.
 * errbuf (nullable, errlen bytes) gets a one-line reason on failure.
 * PULSE_BUSY: another process holds the store's lock (the data directory is
 * in use); PULSE_INVALID: the schema version is newer than this code;
 * PULSE_CORRUPT: a stored identity or version is malformed, or LevelDB
 * found damage (see pulse_meta_repair); PULSE_ACCESS for a directory that
 * may not be written (errbuf: "permission denied: DIR (running as uid N)");
 * PULSE_NOSPACE for a full file system; PULSE_IO otherwise.
 * *out is set on success only; close it with pulse_meta_close.
 */
pulse_status_t pulse_meta_open(const char *dir, struct pulse_meta **out, char *errbuf, size_t errlen);

/* A broker's identity: the ids of pulse_meta_cluster_id / _broker_id. */
struct pulse_meta_identity {
    char cluster_id[PULSE_META_ID_LEN + 1];
    char broker_id[PULSE_META_ID_LEN + 1];
};

/* Where an identity id came from at open. */
enum pulse_meta_id_origin {
    PULSE_META_ID_LOADED = 0, /* the store had it */
    PULSE_META_ID_ADOPTED,    /* the store had none; the caller's copy was written */
    PULSE_META_ID_CREATED     /* the store had none and the caller no copy: drawn at random */
};

/* Longest LevelDB log line kept in a report. */
#define PULSE_META_NOTE_MAX 256

/* What pulse_meta_open_ex found. */
struct pulse_meta_open_report {
    bool created; /* no schema version: a new store (first start, or meta/ was lost) */
    enum pulse_meta_id_origin cluster_origin;
    enum pulse_meta_id_origin broker_origin;
    bool identity_mismatch; /* PULSE_INVALID because the store's ids differ from want's */
    uint64_t topics;        /* topic records */
    uint64_t cursors;       /* cursor records */
    /* LevelDB opens with paranoid checks off, so a damaged record in its
     * log is dropped, leaving only a line in <dir>/LOG: how many such lines
     * this open wrote, and the first. */
    uint32_t damage_lines;
    char damage[PULSE_META_NOTE_MAX];
};

/* Options of pulse_meta_open_ex; all-zero is pulse_meta_open. */
struct pulse_meta_open_opts {
    /* Nullable: the identity the caller keeps outside the store (the data
     * directory's identity file). */
    const struct pulse_meta_identity *identity;
    /* The store must already hold an identity: PULSE_NOT_FOUND rather than
     * drawing new ids (the caller's copy is damaged and a new id would be
     * made up). */
    bool identity_required;
};

/*
 * pulse_meta_open, plus:
 *  - opts->identity: an id the store lacks is written from it instead of
 *    being drawn at random, so a lost store keeps its cluster; a stored id
 *    that differs from it is PULSE_INVALID with report->identity_mismatch
 *    set and both ids in errbuf.
 *  - every record is read once with checksums verified before anything is
 *    written, so damage is PULSE_CORRUPT here and not later; a directory
 *    with tables or logs but no CURRENT file is PULSE_CORRUPT too (LevelDB
 *    would otherwise start an empty store over it).
 *  - report (nullable) is filled as far as the open got, on failure too.
 */
pulse_status_t pulse_meta_open_ex(const char *dir, const struct pulse_meta_open_opts *opts, struct pulse_meta **out,
                                  struct pulse_meta_open_report *report, char *errbuf, size_t errlen);

/* Most LevelDB log lines kept by a repair report. */
#define PULSE_META_REPAIR_NOTES 8

/* What pulse_meta_repair did. */
struct pulse_meta_repair_report {
    bool found;                /* dir existed; false: nothing to repair */
    uint32_t tables_set_aside; /* unreadable tables LevelDB moved to <dir>/lost (their records are lost) */
    uint32_t damage_lines;     /* lines of LevelDB's report that mention damage */
    char damage[PULSE_META_REPAIR_NOTES][PULSE_META_NOTE_MAX]; /* the first of them */
};

/*
 * Runs LevelDB's repair (leveldb_repair_db) on the store in dir, which must
 * not be open anywhere: it rebuilds the manifest and CURRENT from whatever
 * tables and logs are readable, turns logs into tables, and moves what it
 * cannot read to <dir>/lost. Records in damaged files are lost; the caller
 * rebuilds what it can from its own copies. Holds LevelDB's lock meanwhile.
 * A missing dir is PULSE_OK with report->found false.
 * PULSE_BUSY (the store is open in another process), PULSE_IO, PULSE_NOMEM.
 * Thread: only with no open handle on dir in this process.
 */
pulse_status_t pulse_meta_repair(const char *dir, struct pulse_meta_repair_report *report, char *errbuf, size_t errlen);

/* Closes the store. NULL is a no-op. No other call may run or follow. */
void pulse_meta_close(struct pulse_meta *meta);

/* Identity ids (NUL-terminated, PULSE_META_ID_LEN chars), borrowed until
 * close. Stable across restarts. */
const char *pulse_meta_cluster_id(const struct pulse_meta *meta);
const char *pulse_meta_broker_id(const struct pulse_meta *meta);

/* Writes topic/<name> and partition/<name>/0..partitions-1 in one sync batch.
 * Does not check for an existing record (the caller holds its admin lock). */
pulse_status_t pulse_meta_topic_create(struct pulse_meta *meta, const struct pulse_meta_topic *topic);

/* Rewrites topic/<name> (sync), e.g. after a retention change. */
pulse_status_t pulse_meta_topic_put(struct pulse_meta *meta, const struct pulse_meta_topic *topic);

/* PULSE_NOT_FOUND when absent; PULSE_CORRUPT for a malformed record. */
pulse_status_t pulse_meta_topic_get(struct pulse_meta *meta, const char *name, struct pulse_meta_topic *out);

/* Every topic, sorted by name; *out is allocated (pulse_free), NULL when
 * *n_out == 0. */
pulse_status_t pulse_meta_topic_list(struct pulse_meta *meta, struct pulse_meta_topic **out, size_t *n_out);

/* Deletes topic/<name>, every partition/<name>/<id> and every cursor whose
 * topic component is exactly name, in one sync batch. Absent keys are not an
 * error. *cursors_out (nullable) gets how many cursors went. */
pulse_status_t pulse_meta_topic_delete(struct pulse_meta *meta, const char *name, size_t *cursors_out);

/* Number of partition/<name>/ records (for checks and tests). */
pulse_status_t pulse_meta_partition_count(struct pulse_meta *meta, const char *name, uint32_t *n_out);

/* Number of cursor records of every consumer. */
pulse_status_t pulse_meta_cursor_count(struct pulse_meta *meta, uint64_t *n_out);

/* Writes n cursors of consumer in one sync batch (all or none). The caller
 * validated names and ranges. */
pulse_status_t pulse_meta_cursor_put(struct pulse_meta *meta, const char *consumer,
                                     const struct pulse_meta_cursor *cursors, size_t n);

/* Cursors of one consumer, for pulse_meta_cursor_put_sets. */
struct pulse_meta_cursor_set {
    const char *consumer;
    const struct pulse_meta_cursor *cursors;
    size_t n;
};

/* Writes the cursors of every set (several consumers, e.g. the commits the
 * broker's committer gathered) in one sync batch: all sets or none, one
 * fdatasync of the metadata log. A key given twice keeps the value of the
 * later set. PULSE_INVALID (nothing written) if any set is malformed; the
 * caller validated topics and ranges. */
pulse_status_t pulse_meta_cursor_put_sets(struct pulse_meta *meta, const struct pulse_meta_cursor_set *sets,
                                          size_t nsets);

/* Sync writes (write batches) this store has completed since it opened:
 * how many fdatasyncs of the metadata log the broker's changes cost (tests
 * and metrics). */
uint64_t pulse_meta_sync_writes(const struct pulse_meta *meta);

/* PULSE_NOT_FOUND when never committed; PULSE_CORRUPT for a value that is not
 * 8 bytes or is negative. */
pulse_status_t pulse_meta_cursor_get(struct pulse_meta *meta, const char *consumer, const char *topic,
                                     uint32_t partition, int64_t *offset_out);

/* A consumer's cursors sorted by topic then partition; *out allocated
 * (pulse_free), NULL when *n_out == 0. */
pulse_status_t pulse_meta_cursor_list(struct pulse_meta *meta, const char *consumer, struct pulse_meta_cursor **out,
                                      size_t *n_out);

/* The highest cursor any consumer committed for each topic partition, in
 * one scan of every cursor: *out allocated (pulse_free), sorted by topic
 * then partition, each partition once; NULL when *n_out == 0.
 * PULSE_CORRUPT for a malformed cursor record. */
pulse_status_t pulse_meta_cursor_highest(struct pulse_meta *meta, struct pulse_meta_cursor **out, size_t *n_out);

/* Distinct consumer names that have at least one cursor, sorted; free with
 * pulse_meta_names_free. */
pulse_status_t pulse_meta_consumer_list(struct pulse_meta *meta, char ***names_out, size_t *n_out);
void pulse_meta_names_free(char **names, size_t n);

/* Deletes every cursor/<consumer>/ key in one sync batch. */
pulse_status_t pulse_meta_consumer_delete(struct pulse_meta *meta, const char *consumer);

/* ---- testing ---------------------------------------------------------- */

/* How a write failed by pulse_meta_fail_writes ends. */
enum pulse_meta_fault {
    PULSE_META_FAULT_LOST = 0,     /* torn in the log: never takes effect */
    PULSE_META_FAULT_APPLIED_LATER /* whole in the log, its sync failed: takes effect at the next reopen or open */
};

/*
 * Tests only (LevelDB's C API has no Env to inject faults through): the
 * next n write batches fail with PULSE_IO as a failed sync write does (the
 * store is marked stale and reopened before the next write), and each one
 * ends as `how` says (see "Failed writes" above). n = 0 disarms. Thread:
 * any. Locks: a mutex of the hook, briefly.
 */
void pulse_meta_fail_writes(struct pulse_meta *meta, unsigned n, enum pulse_meta_fault how);

#endif
