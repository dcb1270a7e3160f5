/* SPDX-License-Identifier: MIT */
/*
 * kafka_settings.c - the [kafka] keys (kafka_settings.h).
 */
#include "kafka/kafka_settings.h"

#include <stddef.h>

#define F(field) offsetof(struct pulse_kafka_settings, field)

static const struct pulse_setting keys[] = {
    {"kafka.bootstrap-servers", PULSE_SETTING_STRING, F(bootstrap_servers), "localhost:9092", NULL, 0, 0, NULL,
     "host:port,... of the Kafka cluster (broker.backend = kafka)"},
    {"kafka.request-timeout", PULSE_SETTING_DURATION, F(request_timeout_ms), "5s", NULL, 100, 600000, NULL,
     "bound of every call to the cluster; past it the API answers 503 with Retry-After"},
    {"kafka.fetch-handles", PULSE_SETTING_INT, F(fetch_handles), "4", NULL, 1, 256, NULL,
     "warm consumer handles that serve fetches; one reader per handle at a time"},
    {"kafka.mock-brokers", PULSE_SETTING_INT, F(mock_brokers), "0", NULL, 0, 16, NULL,
     "tests only: start librdkafka's in-process mock cluster of this many brokers and use it; 0 = off"},
};

static const struct pulse_settings_table table = {"kafka", keys, sizeof keys / sizeof keys[0],
                                                  sizeof(struct pulse_kafka_settings)};

static const struct pulse_settings_prefix properties = {"kafka.property.", F(properties)};

const struct pulse_settings_table *pulse_kafka_settings(void)
{
    return &table;
}

const struct pulse_settings_prefix *pulse_kafka_settings_prefix(void)
{
    return &properties;
}
