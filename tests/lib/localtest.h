/* SPDX-License-Identifier: MIT */
/*
 * localtest.h - what the local backend's unit tests need beyond the seam:
 * its state behind a broker they opened, and reads of a partition's log as
 * the storage engine stores it (whole batches, or a slice's positions), for
 * tests that check how publishes were encoded or where a slice stands. The
 * seam's own fetch (records, raw slices) is tested through broker.h.
 */
#ifndef PULSE_TESTS_LOCALTEST_H
#define PULSE_TESTS_LOCALTEST_H

#include "broker/broker_int.h"
#include "storage/plog.h"

/* pulse_plog_read of partition p of topic: verified batches appended to
 * out; info (nullable) describes them. */
static inline pulse_status_t log_read(struct pulse_broker *b, const char *topic, uint32_t p, int64_t offset,
                                      uint64_t max_bytes, struct pulse_buf *out, struct pulse_slice *info)
{
    struct pulse_local *lb = pulse_local_of(b);
    struct pulse_broker_topic *t = pulse_broker_topic_acquire(lb, topic);
    pulse_status_t st;

    if (t == NULL)
        return PULSE_TOPIC_NOT_FOUND;
    st = p < t->nparts ? pulse_plog_read(t->plogs[p], offset, max_bytes, out, info) : PULSE_PARTITION_NOT_FOUND;
    pulse_broker_topic_release(lb, t);
    return st;
}

/* pulse_plog_slice of partition p of topic, without a descriptor. */
static inline pulse_status_t log_slice(struct pulse_broker *b, const char *topic, uint32_t p, int64_t offset,
                                       uint64_t max_bytes, struct pulse_slice *out)
{
    struct pulse_local *lb = pulse_local_of(b);
    struct pulse_broker_topic *t = pulse_broker_topic_acquire(lb, topic);
    pulse_status_t st;

    if (t == NULL)
        return PULSE_TOPIC_NOT_FOUND;
    st = p < t->nparts ? pulse_plog_slice(t->plogs[p], offset, max_bytes, false, out) : PULSE_PARTITION_NOT_FOUND;
    pulse_broker_topic_release(lb, t);
    return st;
}

#endif
