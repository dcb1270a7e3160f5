/* SPDX-License-Identifier: MIT */
/*
 * store_settings.c - the storage engine's keys (store_settings.h).
 */
#include "storage/store_settings.h"

#include <stddef.h>

#include "common/settings.h"

#define F(field) offsetof(struct pulse_store_settings, field)
#define GIB (1024ll * 1024 * 1024)
#define DAY_MS (86400000ll)

static const struct pulse_setting keys[] = {
    {"storage.segment-max-bytes", PULSE_SETTING_SIZE, F(segment_max_bytes), "512MiB", NULL, 1024, 2 * GIB - 1, NULL,
     "size at which a partition starts a new segment file"},
    {"storage.index-interval-bytes", PULSE_SETTING_SIZE, F(index_interval_bytes), "4096", NULL, 1, GIB, NULL,
     "bytes of log between two entries of a segment's sparse offset index"},
    {"storage.compaction-tombstone-retention", PULSE_SETTING_DURATION, F(compaction_tombstone_retention_ms), "24h",
     NULL, 0, 100000 * DAY_MS, NULL, "how long compaction keeps a tombstone (a keyed record with a null value)"},
    {"storage.compaction-min-gain-ratio", PULSE_SETTING_RATIO, F(compaction_min_gain_ratio), "0.1", NULL, 0, 1, NULL,
     "a segment is rewritten only if compaction removes at least this fraction of it"},
    {"storage.compaction-max-bytes-per-pass", PULSE_SETTING_SIZE, F(compaction_max_bytes_per_pass), "1GiB", NULL, 1,
     INT64_MAX, NULL, "bytes of sealed segments one compaction pass of a partition evaluates at most"},
    {"storage.compaction-max-pass-time", PULSE_SETTING_DURATION, F(compaction_max_pass_ms), "5s", NULL, 0, DAY_MS, NULL,
     "a compaction pass starts no further segment after running this long; 0 = no limit"},
    {"storage.segment-fd-cache", PULSE_SETTING_INT, F(segment_fd_cache), "1024", NULL, 16, 1000000, NULL,
     "segment files kept open while nobody uses them, shared by every partition"},
};

static const struct pulse_settings_table table = {"storage", keys, sizeof keys / sizeof keys[0],
                                                  sizeof(struct pulse_store_settings)};

const struct pulse_settings_table *pulse_store_settings(void)
{
    return &table;
}
