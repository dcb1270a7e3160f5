/* SPDX-License-Identifier: MIT */
/*
 * kafka_settings.h - the [kafka] settings of the Kafka backend
 * (broker.backend = kafka): where the cluster is, the pass-through of
 * librdkafka properties ("kafka.property.NAME = VALUE", handed to every
 * librdkafka handle the backend makes, after its own defaults so they
 * win), the bound of every call to the cluster, the size of the pool of
 * fetch handles, and the test-only in-process mock cluster.
 *
 * The table (common/settings.h) declares each key; docs/Configuration.md
 * and conf/pulse.conf describe them, and make check holds them to it. The
 * pass-through keys are a prefix beside the table (not listed one by one:
 * they are librdkafka's, see its CONFIGURATION.md).
 *
 * Thread: any. Locks: none.
 */
#ifndef PULSE_KAFKA_KAFKA_SETTINGS_H
#define PULSE_KAFKA_KAFKA_SETTINGS_H

#include <stdint.h>

#include "common/settings.h"

struct pulse_kafka_settings {
    char *bootstrap_servers;               /* host:port,... */
    int64_t mock_brokers;                  /* > 0: start librdkafka's mock cluster (tests) */
    int64_t request_timeout_ms;            /* bound of every call to the cluster */
    int64_t fetch_handles;                 /* warm consumer handles for fetches */
    struct pulse_setting_pairs properties; /* kafka.property.NAME = VALUE */
};

/* The table of the keys above (static storage). */
const struct pulse_settings_table *pulse_kafka_settings(void);

/* The pass-through prefix "kafka.property." over `properties` (static
 * storage); its pairs are freed with pulse_settings_prefix_fini. */
const struct pulse_settings_prefix *pulse_kafka_settings_prefix(void);

#endif
