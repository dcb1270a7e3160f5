/* SPDX-License-Identifier: MIT */
/*
 * broker_settings.c - the broker's keys (broker_settings.h).
 */
#include "broker/broker_settings.h"

#include <stddef.h>
#include <string.h>

#include "broker/local.h"
#include "common/settings.h"
#include "storage/store_settings.h"

#define F(field) offsetof(struct pulse_broker_settings, field)
#define GIB (1024ll * 1024 * 1024)
#define DAY_MS (86400000ll)

static pulse_status_t check_sync_mode(const char *name, const char *value, char *errbuf, size_t errlen)
{
    if (strcmp(value, "every-write") == 0 || strcmp(value, "interval") == 0)
        return PULSE_OK;
    pulse_errbuf_set(errbuf, errlen, "%s: \"%s\" is not every-write or interval", name, value);
    return PULSE_INVALID;
}

static pulse_status_t check_backend(const char *name, const char *value, char *errbuf, size_t errlen)
{
    if (strcmp(value, "local") == 0 || strcmp(value, "kafka") == 0)
        return PULSE_OK;
    pulse_errbuf_set(errbuf, errlen, "%s: \"%s\" is not local or kafka", name, value);
    return PULSE_INVALID;
}

static const struct pulse_setting keys[] = {
    {"broker.backend", PULSE_SETTING_STRING, F(backend), "local", NULL, 0, 0, check_backend,
     "local: partitions in the data directory; kafka: topics in a Kafka cluster ([kafka] section)"},
    {"storage.sync-mode", PULSE_SETTING_STRING, F(sync_mode), "every-write", NULL, 0, 0, check_sync_mode,
     "every-write: a publish is answered once fsynced; interval: once written, fsynced every sync-interval"},
    {"storage.sync-interval", PULSE_SETTING_DURATION, F(sync_interval_ms), "1s", NULL, 1, DAY_MS, NULL,
     "fsync period in interval mode"},
    {"storage.retention-interval", PULSE_SETTING_DURATION, F(retention_interval_ms), "30s", NULL, 0, 365 * DAY_MS, NULL,
     "how often retention deletes old segments; 0 = never"},
    {"storage.compaction-interval", PULSE_SETTING_DURATION, F(compaction_interval_ms), "30s", NULL, 0, 365 * DAY_MS,
     NULL, "how often compact topics are compacted; 0 = never"},
    {"storage.checkpoint-interval", PULSE_SETTING_DURATION, F(checkpoint_interval_ms), "1s", NULL, 0, DAY_MS, NULL,
     "a written partition's durable end is checkpointed at most this often; 0 = after every sync"},
    {"storage.sync-threads", PULSE_SETTING_INT, F(sync_threads), "4", NULL, 1, 64, NULL,
     "threads that fsync partitions side by side when many have unsynced publishes at once"},
    {"topic-defaults.partitions", PULSE_SETTING_INT, F(partitions), "1", NULL, 1, 256, NULL,
     "partitions of a topic created without the field"},
    {"topic-defaults.retention-ms", PULSE_SETTING_DURATION, F(retention_ms), "7d", NULL, 0, INT64_MAX, NULL,
     "segments whose newest record is older than this are deleted; 0 = keep"},
    {"topic-defaults.retention-bytes", PULSE_SETTING_SIZE, F(retention_bytes), "0", NULL, 0, INT64_MAX, NULL,
     "oldest segments are deleted while a partition is bigger than this; 0 = no limit"},
    /* No default: unset follows the engine's segment size. */
    {"topic-defaults.segment-bytes", PULSE_SETTING_SIZE, F(segment_bytes), NULL, "storage.segment-max-bytes", 1024,
     2 * GIB - 1, NULL, "segment size of a topic created without the field"},
    {"groups.lease-min", PULSE_SETTING_DURATION, F(group_lease_min_ms), "1s", NULL, 10, DAY_MS, NULL,
     "shortest lease a group member may ask for"},
    {"groups.lease-max", PULSE_SETTING_DURATION, F(group_lease_max_ms), "5m", NULL, 10, DAY_MS, NULL,
     "longest lease a group member may ask for; also how long groups hold partitions back after a start with topics"},
    {"groups.lease-default", PULSE_SETTING_DURATION, F(group_lease_default_ms), "30s", NULL, 10, DAY_MS, NULL,
     "lease of a member that joins without asking for one (kept within lease-min .. lease-max)"},
    {"groups.max-members", PULSE_SETTING_INT, F(group_max_members), "1000", NULL, 1, 100000, NULL,
     "most members of one consumer group"},
    {"groups.max-groups", PULSE_SETTING_INT, F(group_max_groups), "10000", NULL, 1, 1000000, NULL,
     "most consumer groups with members at once"},
    {"publish.idempotency-window", PULSE_SETTING_DURATION, F(idempotency_window_ms), "5m", NULL, 1000, DAY_MS, NULL,
     "how long a publish's Idempotency-Key is remembered (a retry within it stores nothing twice)"},
    {"publish.idempotency-max-keys", PULSE_SETTING_INT, F(idempotency_max_keys), "100000", NULL, 1, 10000000, NULL,
     "most idempotency keys remembered at once; past it the oldest is forgotten first"},
};

static const struct pulse_settings_table table = {"broker", keys, sizeof keys / sizeof keys[0],
                                                  sizeof(struct pulse_broker_settings)};

const struct pulse_settings_table *pulse_broker_settings(void)
{
    return &table;
}

void pulse_broker_settings_to_config(const struct pulse_broker_settings *bs, const struct pulse_store_settings *ss,
                                     struct pulse_broker_config *cfg)
{
    cfg->segment_max_bytes = ss->segment_max_bytes;
    cfg->index_interval_bytes = (uint32_t)ss->index_interval_bytes;
    cfg->sync_mode = strcmp(bs->sync_mode, "interval") == 0 ? PULSE_SYNC_INTERVAL : PULSE_SYNC_EVERY_WRITE;
    cfg->sync_interval_ms = (uint32_t)bs->sync_interval_ms;
    cfg->default_partitions = (uint32_t)bs->partitions;
    cfg->default_retention_ms = bs->retention_ms;
    cfg->default_retention_bytes = (int64_t)bs->retention_bytes;
    cfg->retention_interval_ms = bs->retention_interval_ms;
    cfg->compaction_interval_ms = bs->compaction_interval_ms;
    cfg->compaction_tombstone_retention_ms = ss->compaction_tombstone_retention_ms;
    cfg->compaction_min_gain_ratio = ss->compaction_min_gain_ratio;
    cfg->compaction_max_bytes_per_pass = ss->compaction_max_bytes_per_pass;
    cfg->compaction_max_pass_ms = ss->compaction_max_pass_ms;
    cfg->segment_fd_cache = (uint32_t)ss->segment_fd_cache;
    cfg->checkpoint_interval_ms = (uint32_t)bs->checkpoint_interval_ms;
    cfg->sync_threads = (uint32_t)bs->sync_threads;
    cfg->group_lease_min_ms = bs->group_lease_min_ms;
    cfg->group_lease_max_ms = bs->group_lease_max_ms;
    cfg->group_lease_default_ms = bs->group_lease_default_ms;
    cfg->group_max_members = (uint32_t)bs->group_max_members;
    cfg->group_max_groups = (uint32_t)bs->group_max_groups;
    cfg->idempotency_window_ms = bs->idempotency_window_ms;
    cfg->idempotency_max_keys = (uint32_t)bs->idempotency_max_keys;
}
