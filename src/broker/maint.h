/* SPDX-License-Identifier: MIT */
/*
 * maint.h - the broker's maintenance thread: retention and compaction passes
 * (storage contract section 8; docs/Storage.md "Retention", "Compaction").
 *
 * One pthread, started after recovery and stopped (flag + condition variable
 * + join, never pthread_cancel) before the logs close. It runs a retention
 * pass every retention_interval_ms and a compaction pass every
 * compaction_interval_ms (0 disables that pass alone). Both run on this one
 * thread, so they never overlap, and a segment can never be trimmed away
 * under a compaction of it.
 *
 * Bounded work: a retention pass trims each partition once; a compaction pass
 * evaluates at most compaction_max_bytes_per_pass sealed bytes of each
 * partition and starts no segment of it after compaction_max_pass_ms (then
 * up to one segment's rewrite and commit more); the stop flag is checked
 * between partitions, so shutdown waits for at most one partition's work.
 * A pass holds one topic at a time, so a topic delete waits for at most the
 * partition in hand of its own topic, and never for the rest of the pass.
 * Publishes are never starved: the log's writer lock is held only for the
 * unlink of a trimmed segment or the rename of a compacted one, never for
 * the reading and writing.
 *
 * Internal to src/broker.
 */
#ifndef PULSE_BROKER_MAINT_H
#define PULSE_BROKER_MAINT_H

#include <stdint.h>

#include "common/status.h"

struct pulse_local;
struct pulse_broker_maint;
struct pulse_buf;

/* Starts the thread (or nothing, when both intervals are 0: *out is then a
 * stopped object that only reports zero metrics). Thread: the opener. */
pulse_status_t pulse_broker_maint_start(struct pulse_local *b, struct pulse_broker_maint **out);

/* Stops and joins the thread, frees m. NULL is a no-op. */
void pulse_broker_maint_stop(struct pulse_broker_maint *m);

/* Runs one retention pass / one compaction pass now, on the caller's thread
 * (tests, and the thread itself). Must not run concurrently with the thread:
 * tests call them on a broker opened with both intervals 0. */
void pulse_broker_maint_retention_pass(struct pulse_broker_maint *m);
void pulse_broker_maint_compaction_pass(struct pulse_broker_maint *m);

/* Appends the maintenance metrics (Prometheus text). */
pulse_status_t pulse_broker_maint_metrics(struct pulse_broker_maint *m, struct pulse_buf *out);

#endif
