/* SPDX-License-Identifier: MIT */
/*
 * groups.h - the local backend's consumer groups (groups.c): membership
 * with leases, the assignment of partitions to members and its hand-over,
 * and the fences of a group commit. The seam's calls (broker.h "consumer
 * groups") are pulse_local_group_* in broker_int.h; this header is what
 * the rest of the backend calls: create and destroy with the broker, the
 * lease sweep the syncer drives, and the metrics.
 *
 * All of it is memory: one table of groups under one mutex (the group
 * lock), which is a leaf except that the assignment looks topics up
 * (map_lock for reading, briefly) while holding it. Lock order: group
 * lock -> map_lock -> mu. Nothing holding map_lock or mu ever takes the
 * group lock, and no callback runs under it.
 *
 * Thread: any, unless noted.
 */
#ifndef PULSE_BROKER_GROUPS_H
#define PULSE_BROKER_GROUPS_H

#include <stdint.h>

#include "common/status.h"

struct pulse_local;
struct pulse_broker_config;
struct pulse_broker_groups;
struct pulse_buf;

/* The empty group table with cfg's lease bounds and caps. PULSE_INVALID
 * (errbuf says which setting) when groups.lease-min is above
 * groups.lease-max; PULSE_NOMEM. */
pulse_status_t pulse_broker_groups_create(const struct pulse_broker_config *cfg, struct pulse_broker_groups **out,
                                          char *errbuf, size_t errlen);

/*
 * Holds every partition back for the longest lease (groups.lease-max) from
 * now: members may join, and are assigned partitions, but none is handed
 * out until then. The broker calls it when it starts with topics: members
 * of its previous run may still be processing inside leases granted
 * before it stopped, and their ids are gone, so nothing else keeps a new
 * member off their partitions. Thread: the opener, before any group call.
 */
void pulse_broker_groups_hold(struct pulse_broker_groups *g);

/* Frees the table and every group. NULL is a no-op. No call may run. */
void pulse_broker_groups_destroy(struct pulse_broker_groups *g);

/*
 * Removes the members whose lease ran out, notices consumed topics whose
 * partitions changed (created, deleted) and rebalances the groups that
 * changed. Every group call does the same for its own group first, so a
 * lease never outlives its expiry for a caller; this pass covers groups
 * nobody calls. Cheap when nothing is due (one atomic read); it runs at
 * most every 100 ms. Thread: the syncer. Locks: the group lock, then
 * map_lock for reading (topic lookups).
 */
void pulse_broker_groups_tick(struct pulse_local *b);

/* The earliest deadline of a parked group fetch (monotonic us; INT64_MAX
 * when none), for the syncer's wake-up. Never blocks (an atomic read). */
int64_t pulse_broker_groups_next_deadline(struct pulse_local *b);

/* Drain: answers every parked group fetch (PULSE_SHUTDOWN) and refuses new
 * ones. Thread: the drainer. Locks: the group lock, briefly. */
void pulse_broker_groups_drain(struct pulse_local *b);

/* Appends the group metrics (members, generation, rebalances, expired
 * members, lag) in Prometheus text. Locks: the group lock, briefly; one
 * cursor scan per group (outside it). */
pulse_status_t pulse_broker_groups_metrics(struct pulse_local *b, struct pulse_buf *out);

#endif
