/* SPDX-License-Identifier: MIT */
/*
 * local.h - the local backend (broker.backend = local): the broker that
 * keeps its partitions as logs of the storage engine (src/storage) and its
 * metadata in LevelDB (src/meta), in one data directory. What a broker
 * promises, whichever its backend, is broker.h; this header adds what only
 * the local one has: its configuration, opening it on a data directory
 * (which returns a struct pulse_broker that serves broker.h), and the
 * offline tools of pulsed that work on a data directory while no broker
 * runs on it.
 *
 * A local broker owns a data directory:
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
 *   heal        - reopens fenced partition logs in process (heal.h).
 * How each call of broker.h behaves in this backend (which thread completes
 * it, what it may block on) is docs/Architecture.md section 10.
 *
 * Thread: the functions here run on the main thread (open, and the offline
 * tools, with no broker running on the directory).
 */
#ifndef PULSE_BROKER_LOCAL_H
#define PULSE_BROKER_LOCAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/broker.h"
#include "common/status.h"
#include "storage/plog.h"

struct pulse_io;

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
    /* consumer groups (groups.c): bounds and default of a member's lease,
     * and caps of the in-memory group table */
    int64_t group_lease_min_ms;     /* default 1000 */
    int64_t group_lease_max_ms;     /* default 300000 */
    int64_t group_lease_default_ms; /* default 30000 */
    uint32_t group_max_members;     /* per group, default 1000 */
    uint32_t group_max_groups;      /* default 10000 */
    /* idempotent publishes (idem.h): how long a key is remembered, and how
     * many keys at most (the oldest finished one is forgotten first) */
    int64_t idempotency_window_ms; /* default 300000 */
    uint32_t idempotency_max_keys; /* default 100000 */
    /* every-write mode: threads that run one sync pass's fdatasyncs side
     * by side (syncpool.h), the syncer included; default 4, 1 = the
     * syncer alone */
    uint32_t sync_threads;
    /* every-write mode: a publisher to one partition runs its sync itself
     * when none is running (broker_int.h pulse_broker_sync_inline);
     * default true. false: the syncer runs every sync (tests that stage
     * the syncer's passes). */
    bool sync_inline;
};

/* Fills every field with the documented defaults (docs/Configuration.md). */
void pulse_broker_config_init(struct pulse_broker_config *cfg);

/* What opening the broker found. */
struct pulse_broker_open_report {
    uint32_t topics;
    uint32_t partitions;
    int64_t recovery_us;          /* all partition logs */
    uint64_t truncated_bytes;     /* torn tails cut, all partitions */
    uint32_t corrupt_segments;    /* sealed segments cut short */
    uint32_t deleted_leftovers;   /* half-deleted topic directories removed */
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
 * *out is the broker, served through broker.h (pulse_broker_close frees
 * it). errbuf (nullable, errlen bytes) gets a one-line reason on failure that
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

#endif
