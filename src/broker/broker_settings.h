/* SPDX-License-Identifier: MIT */
/*
 * broker_settings.h - the broker's settings: when partition logs are synced
 * and checkpointed, how often the maintenance passes run (the [storage]
 * keys that pace the engine, which never chooses a policy itself), the
 * defaults of new topics ([topic-defaults]) and the leases and caps of
 * consumer groups ([groups]).
 *
 * The table (common/settings.h) declares each key with its default,
 * bounds and a one-line description; docs/Configuration.md and
 * conf/pulse.conf describe the same keys, and make check holds them to it.
 * pulse_broker_settings_to_config turns these values, with the storage
 * engine's (storage/store_settings.h), into a struct pulse_broker_config.
 *
 * Thread: any. Locks: none.
 */
#ifndef PULSE_BROKER_BROKER_SETTINGS_H
#define PULSE_BROKER_BROKER_SETTINGS_H

#include <stdint.h>

/* The engine's settings, which the broker hands to the engine: included so
 * that a process configuration can hold both by value. */
#include "storage/store_settings.h"

struct pulse_settings_table;
struct pulse_broker_config;

struct pulse_broker_settings {
    /* [broker] */
    char *backend; /* "local" | "kafka" (main.c opens the one named) */
    /* [storage] */
    char *sync_mode; /* "every-write" | "interval" */
    int64_t sync_interval_ms;
    int64_t retention_interval_ms;
    int64_t compaction_interval_ms;
    int64_t checkpoint_interval_ms; /* durable-end checkpoint of a partition at most this often */
    int64_t sync_threads;           /* fdatasyncs of one sync pass run side by side on this many threads */
    /* [topic-defaults] */
    int64_t partitions;
    int64_t retention_ms;
    uint64_t retention_bytes;
    uint64_t segment_bytes; /* 0 until set: follows storage.segment-max-bytes */
    /* [groups] */
    int64_t group_lease_min_ms;
    int64_t group_lease_max_ms;
    int64_t group_lease_default_ms;
    int64_t group_max_members;
    int64_t group_max_groups;
    int64_t idempotency_window_ms;
    int64_t idempotency_max_keys;
};

/* The table of the keys above (static storage). */
const struct pulse_settings_table *pulse_broker_settings(void);

/* Fills the fields of cfg (after pulse_broker_config_init) that these
 * settings and the engine's decide; data_dir, io and the publish limits
 * are the caller's. */
void pulse_broker_settings_to_config(const struct pulse_broker_settings *bs, const struct pulse_store_settings *ss,
                                     struct pulse_broker_config *cfg);

#endif
