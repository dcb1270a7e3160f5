/* SPDX-License-Identifier: MIT */
/*
 * kafka.h - the Kafka backend (broker.backend = kafka): a broker whose
 * topics live in a Kafka cluster, reached through librdkafka. It keeps no
 * state of its own on disk: pulsed becomes a stateless gateway, and any
 * number of them may serve the same cluster. What a broker promises is
 * broker.h; how each call maps onto Kafka, and what differs from the local
 * backend, is docs/Architecture.md section 12 and docs/Scaling.md.
 *
 * Threads it runs between open and close (besides librdkafka's own):
 *   kpoll  - serves the producer's delivery reports (rd_kafka_poll) and
 *            completes publishes from them: one thread for every request,
 *            none per request.
 *   kadmin - the calls that wait for the cluster (topic create and delete,
 *            cursor commits and reads through the Admin API), one at a
 *            time, each bounded by kafka.request-timeout.
 *   kwait  - long-poll waiters: asks the cluster for the high watermarks of
 *            the partitions someone waits on (one ListOffsets for all) and
 *            fires them; refreshes the topic metadata every second, which is
 *            also the health /readyz reports.
 *
 * Thread: pulse_kafka_open on the main thread.
 */
#ifndef PULSE_KAFKA_KAFKA_H
#define PULSE_KAFKA_KAFKA_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_broker;
struct pulse_kafka_settings;

struct pulse_kafka_config {
    const struct pulse_kafka_settings *settings; /* borrowed for pulse_kafka_open only */
    uint32_t max_records_per_publish;            /* as the local backend's */
    uint32_t default_partitions;                 /* of a create without the field */
    /* consumer groups ([groups], as the local backend's; 0: its default) */
    int64_t group_lease_min_ms, group_lease_max_ms, group_lease_default_ms;
    uint32_t group_max_members, group_max_groups;
};

/*
 * Makes the librdkafka handles (a producer, kafka.fetch-handles consumers;
 * with kafka.mock-brokers > 0 first the mock cluster, whose address then
 * replaces kafka.bootstrap-servers) and starts the threads above. Does not
 * wait for the cluster: a gateway may start before it, and /readyz says
 * when it can be reached. *out is served through broker.h
 * (pulse_broker_close frees it). PULSE_INVALID with errbuf when librdkafka
 * refuses a property (errbuf names it), PULSE_NOMEM.
 */
pulse_status_t pulse_kafka_open(const struct pulse_kafka_config *cfg, struct pulse_broker **out, char *errbuf,
                                size_t errlen);

#endif
