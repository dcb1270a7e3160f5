/* SPDX-License-Identifier: MIT */
/*
 * kgroupsm.h - consumer groups for the Kafka backend: the state machine of
 * the group log (docs/Scaling.md "Consumer groups on Kafka").
 *
 * The design: every group call (join, heartbeat, leave, commit) is an
 * event appended to one log in the cluster (a single-partition topic,
 * __pulse_groups); the log's order is the one order every gateway agrees
 * on. Each gateway applies the log, event by event, to this state machine
 * and answers a call from the state right after its own event. The state
 * machine is deterministic: it reads no clock and no cluster - "now" is
 * the events' own timestamps (never going back: a gateway with a slow
 * clock cannot move time backwards), partition counts travel in the join
 * events, and a member's id is made from its join event's offset. So any
 * two gateways that applied the same prefix of the log hold the same
 * members, generation, assignment and committed positions, and agree on
 * every answer: which is what several gateway replicas need.
 *
 * Rules (those of the local backend, docs/API.md "Consumer groups"): a
 * member holds a lease, renewed by each of its calls, and is removed when
 * an event's time passes its end; the assignment is even and sticky; a
 * partition moves only after its previous owner's next call (or its lease
 * end, or its leave), so two members never own it at once; a commit is
 * accepted only from a member of the current generation for partitions it
 * owns, and the accepted positions are the group's cursors.
 *
 * The log around it (producing events, the reader that applies them and
 * completes the calls) is kgroups.c.
 *
 * Thread: a state is used by one thread at a time (the log reader).
 */
#ifndef PULSE_KAFKA_KGROUPSM_H
#define PULSE_KAFKA_KGROUPSM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/broker.h"

/* KGSM_FETCHED: a heartbeat that also checks the member still owns pos
 * (npos entries) in generation (the end of a group fetch). */
/* KGSM_TOPIC_GONE: a gateway saw topics[0] deleted: its partitions leave
 * the group (a later join naming it brings them back). */
enum kgsm_kind { KGSM_JOIN, KGSM_HEARTBEAT, KGSM_LEAVE, KGSM_COMMIT, KGSM_FETCHED, KGSM_TOPIC_GONE };

/* One topic a join names, with its partition count as the joining
 * gateway saw it. */
struct kgsm_topic {
    const char *name;
    uint32_t partitions;
};

/* One event of the log, as read back. */
struct kgsm_event {
    enum kgsm_kind kind;
    int64_t offset;     /* its offset in the log */
    int64_t time_ms;    /* its timestamp in the log */
    const char *member; /* heartbeat, leave, commit */
    /* join */
    const struct kgsm_topic *topics;
    size_t ntopics;
    int64_t lease_ms;
    /* commit, fetched */
    uint64_t generation;
    const struct pulse_group_partition *pos;
    size_t npos;
    /* join: 16 hex digits the joining gateway drew at random (NULL: none),
     * so that ids cannot be guessed from offsets: "m-<secret>-<offset>";
     * and whether partitions without a cursor start at their end */
    const char *secret;
    bool start_latest;
};

struct kgsm; /* one group's state */

struct kgsm *pulse_kgsm_new(void);
void pulse_kgsm_free(struct kgsm *g);

/*
 * Applies one event (offsets must increase) and writes the answer its
 * caller gets into *view (nullable; pulse_group_view_fini): PULSE_OK;
 * PULSE_REJOIN for a member the group does not know (never joined, left,
 * lease ended); PULSE_GROUP_FENCED for a commit (or fetched) of another
 * generation or of partitions the member does not own (nothing stored); PULSE_INVALID
 * for an event out of order; PULSE_NOMEM (the state may then be part-way:
 * the reader builds it again from the log's start).
 */
pulse_status_t pulse_kgsm_apply(struct kgsm *g, const struct kgsm_event *ev, struct pulse_group_view *view);

uint64_t pulse_kgsm_generation(const struct kgsm *g);
size_t pulse_kgsm_members(const struct kgsm *g);
bool pulse_kgsm_is_member(const struct kgsm *g, const char *id);
/* Who owns (topic, partition) now ("" free) and, in *assigned (nullable),
 * who it is assigned to; NULL when the group has no such partition. */
const char *pulse_kgsm_owner(const struct kgsm *g, const char *topic, uint32_t partition, const char **assigned);
/* The committed position of (topic, partition), -1 if none. */
int64_t pulse_kgsm_committed(const struct kgsm *g, const char *topic, uint32_t partition);

/* The generation since which member has owned (topic, partition) without
 * a break; UINT64_MAX when it does not own it. */
uint64_t pulse_kgsm_owned_since(const struct kgsm *g, const char *topic, uint32_t partition, const char *member);
/* Whether member joined with start latest (false for an unknown one). */
bool pulse_kgsm_start_latest(const struct kgsm *g, const char *member);
/* What a waiting member would learn from a call: its generation is not
 * `generation`, or it owns not `owned` partitions or awaits not `pending`
 * (owned and pending of its view now), or it is gone (true). */
/* The names of the topics the group has partitions of (borrowed from g,
 * valid until its next event): up to max into names; returns the count. */
size_t pulse_kgsm_topics(const struct kgsm *g, const char **names, size_t max);
/* Partitions assigned to member that it owns, and that it awaits. */
void pulse_kgsm_counts(const struct kgsm *g, const char *member, size_t *owned, size_t *pending);
bool pulse_kgsm_news_for(const struct kgsm *g, const char *member, uint64_t generation, size_t owned, size_t pending);
/* The group as a description shows it at now_ms (a reader's clock):
 * members whose lease ended by then are left out (the group's next event
 * removes them), and so are they as owners. Does not change g. Fills
 * info's members, parts (committed; high_watermark and lag left 0),
 * generation and rebalances; info->name is the caller's. PULSE_NOMEM. */
pulse_status_t pulse_kgsm_describe(const struct kgsm *g, int64_t now_ms, struct pulse_group_info *info);

#endif
