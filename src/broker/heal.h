/* SPDX-License-Identifier: MIT */
/*
 * heal.h - the broker's heal thread: brings fenced partitions back without a
 * restart (docs/Operations.md "A fenced partition").
 *
 * A partition log fences itself after a failed fdatasync or a write that
 * failed for another reason than a full disk; from then on it refuses
 * appends (PULSE_FENCED) and never retries the sync. This thread notices
 * (it looks at every partition at least once a second, and the syncer kicks
 * it when a sync fails) and reopens the log in process with
 * pulse_plog_reopen: the bytes that were never durable are cut, the
 * directory goes through the normal recovery scan, the recovered segments
 * replace the old ones, and appends resume at the recovered end. Attempts
 * back off per partition: the first comes fence_retry_initial_ms after the
 * fence was noticed, each failure doubles the wait, up to
 * fence_retry_max_ms.
 *
 * One topic at a time: a pass holds a reference on the topic it is looking
 * at and no other, so a delete of a topic waits at most for one reopen
 * attempt on that topic. Records of fenced partitions are keyed by the
 * topic object's uid, never by an address that a recreated topic could
 * reuse.
 *
 * Safety against concurrent users: the plog object stays the same (readers,
 * fetches, waiters and maintenance keep their pointer); the swap happens
 * inside it under its own locks, and segments of the old list stay valid
 * until their last reference goes. Pending publishes whose records the
 * reopen discarded are failed by the syncer, never completed by data
 * appended after the reopen; those durable before the fence complete
 * (pulse_plog_fate).
 *
 * Internal to src/broker.
 */
#ifndef PULSE_BROKER_HEAL_H
#define PULSE_BROKER_HEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_local;
struct pulse_broker_heal;
struct pulse_broker_topic;
struct pulse_buf;
struct pulse_fenced_partition;

/* Starts the thread. Thread: the opener, after every log is open. */
pulse_status_t pulse_broker_heal_start(struct pulse_local *b, struct pulse_broker_heal **out);

/* Stops and joins the thread (a reopen in progress finishes first), frees
 * h. NULL is a no-op. Call before the logs close. */
void pulse_broker_heal_stop(struct pulse_broker_heal *h);

/* Wakes the thread now (a sync just failed). Thread: any. Locks: the heal
 * thread's mutex, briefly. */
void pulse_broker_heal_kick(struct pulse_broker_heal *h);

/* Fills (*out)[i] with the fenced partitions of the given topics, in their
 * order; *out is allocated (pulse_free), NULL when none. The caller holds a
 * reference on each topic. Thread: any. Locks: the heal thread's mutex
 * while it reads the records (never held during a reopen); no I/O. */
pulse_status_t pulse_broker_heal_list(struct pulse_broker_heal *h, struct pulse_broker_topic *const *topics,
                                      size_t ntopics, struct pulse_fenced_partition **out, size_t *n_out);

/* Appends pulse_partition_fenced{topic,partition} for every partition of the
 * given topics (per_topic: pulse_topic_fenced_partitions{topic}, their count
 * by topic), then the fence and reopen counters (Prometheus text). The
 * caller holds a reference on each topic. Thread: any. Locks: none (the
 * fence flags and counters are atomic). */
pulse_status_t pulse_broker_heal_metrics(struct pulse_broker_heal *h, struct pulse_broker_topic *const *topics,
                                         size_t ntopics, bool per_topic, struct pulse_buf *out);

#endif
