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

/* A topic definition as stored. cleanup: 0 = delete, 1 = compact. */
struct pulse_meta_topic {
    char name[PULSE_META_NAME_MAX + 1];
    uint32_t partitions;
    int cleanup;
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
 * on first start. dir's parent must exist.
 * errbuf (nullable, errlen bytes) gets a one-line reason on failure.
 * PULSE_BUSY: another process holds the store's lock (the data directory is
 * in use); PULSE_INVALID: the schema version is newer than this code;
 * PULSE_CORRUPT: a stored identity or version is malformed; PULSE_IO.
 * *out is set on success only; close it with pulse_meta_close.
 */
pulse_status_t pulse_meta_open(const char *dir, struct pulse_meta **out, char *errbuf, size_t errlen);

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
pulse_status_t pulse_meta_cursor_list(struct pulse_meta *meta, const char *consumer,
                                      struct pulse_meta_cursor **out, size_t *n_out);

/* Distinct consumer names that have at least one cursor, sorted; free with
 * pulse_meta_names_free. */
pulse_status_t pulse_meta_consumer_list(struct pulse_meta *meta, char ***names_out, size_t *n_out);
void pulse_meta_names_free(char **names, size_t n);

/* Deletes every cursor/<consumer>/ key in one sync batch. */
pulse_status_t pulse_meta_consumer_delete(struct pulse_meta *meta, const char *consumer);

#endif
