/* SPDX-License-Identifier: MIT */
/*
 * syncpool.h - the threads that run a sync pass's fdatasyncs side by side.
 *
 * A pass of the syncer (broker.c) may find many partitions with unsynced
 * appends at once (a publish spread over 64 partitions, or 64 publishers
 * on as many partitions). One thread syncing them in turn pays the sum of
 * their fdatasyncs; the device (and ext4's journal, which commits the
 * concurrent ones together) does several at about the cost of one. The
 * pool runs the items of one pass on storage.sync-threads threads: the
 * calling thread and sync-threads - 1 of its own.
 *
 * The same threads run the one-off work of a start and a stop over every
 * partition (pulse_syncpool_for): a start opens the partition logs on a
 * pool of its own (opener.c), closed before the syncer's is made; a stop
 * closes them on another (pulse_broker_topic_close_all), made after the
 * syncer's pool is closed.
 *
 * Owner: the local backend (struct pulse_local.syncpool), created before
 * the syncer starts and closed after it stopped; the start's and the
 * stop's pools are their callers'.
 * Thread: pulse_syncpool_run from one thread at a time (the syncer; the
 * opener for the start's pool; the closer for the stop's).
 * Locks: the pool's own mutex, never held while an item runs; items run
 * with no lock of the pool held and may take any broker or storage lock.
 */
#ifndef PULSE_BROKER_SYNCPOOL_H
#define PULSE_BROKER_SYNCPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_syncpool;

/* One item of a run: index i of [0, n). */
typedef void (*pulse_syncpool_fn)(void *arg, size_t i);

/* A pool of nthreads in all (the caller of run counts as one, so 1 starts
 * no thread). PULSE_NOMEM when a thread cannot be started (none is left
 * running then). */
pulse_status_t pulse_syncpool_open(uint32_t nthreads, struct pulse_syncpool **out);

/* A pool for one run over n items of a start or a stop (one partition
 * each): the caller and one more thread per share items, at most
 * max_extra more. NULL when that is no more thread, or when no thread can
 * be started: pulse_syncpool_run then runs every item on the caller, which
 * is slower but the same outcome. share > 0. */
struct pulse_syncpool *pulse_syncpool_for(size_t n, size_t share, uint32_t max_extra);

/* Calls fn(arg, i) once for every i in [0, n), on the pool's threads and
 * the calling thread, and returns once every call has returned. A NULL sp
 * runs them on the calling thread, in order. */
void pulse_syncpool_run(struct pulse_syncpool *sp, size_t n, pulse_syncpool_fn fn, void *arg);

/* Threads in all, the caller of run included. */
uint32_t pulse_syncpool_size(const struct pulse_syncpool *sp);

/* Stops and joins the threads; no run may be in progress. NULL: no-op. */
void pulse_syncpool_close(struct pulse_syncpool *sp);

#endif
