/* SPDX-License-Identifier: MIT */
/*
 * store_settings.h - the settings of the storage engine itself: segment and
 * index sizes, the segment file cache, and the bounds of a compaction pass
 * (the [storage] keys the engine reads; when to sync and when to run
 * maintenance is the broker's, broker/broker_settings.h).
 *
 * The table (common/settings.h) declares each key with its default,
 * bounds and a one-line description; docs/Configuration.md and
 * conf/pulse.conf describe the same keys, and make check holds them to it.
 *
 * Thread: any. Locks: none.
 */
#ifndef PULSE_STORAGE_STORE_SETTINGS_H
#define PULSE_STORAGE_STORE_SETTINGS_H

#include <stdint.h>

struct pulse_settings_table;

struct pulse_store_settings {
    uint64_t segment_max_bytes;
    uint64_t index_interval_bytes;
    int64_t compaction_tombstone_retention_ms;
    double compaction_min_gain_ratio;
    uint64_t compaction_max_bytes_per_pass;
    int64_t compaction_max_pass_ms; /* 0 = no time bound */
    int64_t segment_fd_cache;
};

/* The table of the keys above (static storage). */
const struct pulse_settings_table *pulse_store_settings(void);

#endif
