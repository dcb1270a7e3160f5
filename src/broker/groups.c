/* SPDX-License-Identifier: MIT */
/*
 * groups.c - consumer groups of the local backend: who is a member (leases),
 * which partitions each member should own (the assignment) and which it
 * does own (the hand-over), and the fences of group commits. broker.h
 * "consumer groups" is the contract; docs/Architecture.md section 11 has
 * the state machine with a diagram.
 *
 * State (all in memory, under the group lock g->mu):
 *   group   - name, generation, rebalance count, members, partitions.
 *   member  - id, topics, lease, expiry (monotonic), the generation it was
 *             last told, commits in flight, start_latest.
 *   part    - one partition of a consumed topic: its owner (the member that
 *             was told it owns it, or none), its target (the member the
 *             assignment gives it to), and the generation since which the
 *             owner has held it without a break.
 *
 * Read positions. The broker keeps none: a group fetch reads from where
 * the member says its last answer received left off (its "resume"; taken
 * only for partitions it has owned without a break since that answer's
 * generation), else from the group's committed cursor. An answer lost on
 * the wire is therefore read again rather than skipped. A partition
 * without a cursor starts at its log start, or for start=latest at its
 * end, which is committed as the group's cursor before the first answer
 * from it (pinned: a later owner starts there too, not at a later end).
 *
 * Assignment (assign()). Targets are sticky: a partition keeps its target
 * while that member lives and consumes its topic. Partitions without a
 * target go to the least-loaded member that consumes their topic; then,
 * while some partition's target has at least two more partitions than
 * another member that could take it, it moves there. With every member
 * consuming the same topics this ends with loads differing by at most one,
 * and moves only partitions of members above that, which is as few as an
 * even spread allows. Any change of members, of partitions or of a target
 * starts a new generation.
 *
 * Hand-over (touch()). A member learns its assignment only in the answer
 * to one of its own calls. At each call: the partitions it owns but is no
 * longer the target of are released (owner = none): this answer is the
 * acknowledgement that it lost them; the free partitions it is the target
 * of become its own. A partition owned by another member stays with that
 * member until that member calls (and is told) or is removed, so two
 * members are never both told they own a partition within their leases.
 * While a commit of a member is in flight, it releases nothing (and is not
 * removed at expiry), so a commit never lands after the next owner read
 * the cursor.
 *
 * Fences. A commit is accepted only from a member that exists, with the
 * generation it was last told, for partitions it owns; anything else is
 * refused before anything is written (PULSE_REJOIN, PULSE_GROUP_FENCED).
 * The positions go to the group's cursors through the ordinary cursor
 * commit (cursor.c): same keys, same atomicity, same durability.
 *
 * Leases. Every call of a member renews its lease (now + lease_ms). Every
 * call into a group first removes its members whose lease ran out, and the
 * syncer's tick (pulse_broker_groups_tick) does the same for every group,
 * so expiry never waits for a caller of that group. A group without
 * members is forgotten; its cursors stay.
 */
#include "broker/groups.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "broker/broker_int.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "storage/plog.h"

/* The tick's period (lease expiry is also checked on every call). */
#define TICK_US 100000

struct gmember {
    char id[PULSE_GROUP_MEMBER_ID_MAX + 1];
    char (*topics)[PULSE_NAME_MAX + 1];
    size_t ntopics;
    int64_t lease_ms;
    int64_t expires_us;  /* monotonic */
    int64_t joined_ms;   /* wall clock */
    uint64_t generation; /* last told */
    uint32_t commits;    /* in flight */
    bool start_latest;
    bool leaving;  /* left while a commit of it was in flight: no new partitions */
    uint32_t load; /* assign() scratch */
};

struct gpart {
    char topic[PULSE_NAME_MAX + 1];
    uint32_t partition;
    uint64_t topic_uid; /* the topic object's uid: a topic made again has another */
    struct gmember *owner;
    struct gmember *target;
    /* The generation from which owner has owned it without a break: a
     * resume position the member gives back from an answer of this or a
     * later generation was read by that owner, while it owned it. */
    uint64_t owned_gen;
};

/* A member's group fetch waiting (pulse_local_group_wait): woken by the
 * first of the broker's data waiter over its positions, a change of the
 * group that concerns its member, or its deadline. References: the
 * group's list (until woken or detached), the data waiter (until its
 * callback ran; none when there are no positions) and, while parking,
 * the parking caller's. When something else than data wakes it, its data
 * waiter is cancelled (pulse_local_wait_cancel, with gw as its argument):
 * it never stays parked, holding its topics, until its deadline. */
struct gwait {
    struct gwait *next; /* the group's list (group lock) */
    struct pulse_local *b;
    bool with_data; /* a data waiter was (or is being) parked for it */
    char group[PULSE_NAME_MAX + 1];
    atomic_int refs;
    atomic_bool fired; /* fn was called, or the caller answered itself */
    int64_t deadline_us;
    pulse_wait_fn fn;
    void *arg;
};

struct group {
    char name[PULSE_NAME_MAX + 1];
    struct gwait *waiters; /* group fetches parked (any member) */
    uint64_t generation;
    uint64_t rebalances;
    struct gmember **members; /* nmembers, in join order */
    size_t nmembers;
    size_t members_cap;
    struct gpart *parts; /* sorted by topic, partition */
    size_t nparts;
};

struct pulse_broker_groups {
    pthread_mutex_t mu;
    struct group **groups; /* sorted by name */
    size_t ngroups;
    size_t groups_cap;
    int64_t lease_min_ms, lease_max_ms, lease_default_ms;
    uint32_t max_members, max_groups;
    uint64_t id_seq;
    _Atomic int64_t next_tick_us;
    struct gwait *firing; /* woken, to be called once the lock is let go */
    bool draining;        /* no new group waits (PULSE_SHUTDOWN) */
    /* The earliest deadline of a parked group fetch without positions
     * (INT64_MAX: none): the syncer wakes for it (next_wake_us). */
    _Atomic int64_t next_deadline_us;
    atomic_uint_fast64_t expired_total;
    atomic_uint_fast64_t joins_total;
    /* After a start with topics: no partition is handed out before this
     * (monotonic us; 0: no hold). pulse_broker_groups_hold. */
    int64_t hold_until_us;
};

/* ---- table ------------------------------------------------------------ */

pulse_status_t pulse_broker_groups_create(const struct pulse_broker_config *cfg, struct pulse_broker_groups **out,
                                          char *errbuf, size_t errlen)
{
    struct pulse_broker_groups *g;

    if (cfg->group_lease_min_ms > cfg->group_lease_max_ms || cfg->group_lease_min_ms <= 0) {
        pulse_errbuf_set(errbuf, errlen,
                         "groups.lease-min (%" PRId64 " ms) must be positive and at most groups.lease-max (%" PRId64
                         " ms)",
                         cfg->group_lease_min_ms, cfg->group_lease_max_ms);
        return PULSE_INVALID;
    }
    g = pulse_calloc(1, sizeof *g);
    if (g == NULL)
        return PULSE_NOMEM;
    pthread_mutex_init(&g->mu, NULL);
    g->lease_min_ms = cfg->group_lease_min_ms;
    g->lease_max_ms = cfg->group_lease_max_ms;
    g->lease_default_ms = cfg->group_lease_default_ms;
    if (g->lease_default_ms < g->lease_min_ms)
        g->lease_default_ms = g->lease_min_ms;
    if (g->lease_default_ms > g->lease_max_ms)
        g->lease_default_ms = g->lease_max_ms;
    g->max_members = cfg->group_max_members > 0 ? cfg->group_max_members : 1;
    g->max_groups = cfg->group_max_groups > 0 ? cfg->group_max_groups : 1;
    atomic_init(&g->next_deadline_us, INT64_MAX);
    *out = g;
    return PULSE_OK;
}

void pulse_broker_groups_hold(struct pulse_broker_groups *g)
{
    g->hold_until_us = pulse_clock_mono_us() + g->lease_max_ms * 1000;
    atomic_store(&g->next_deadline_us, g->hold_until_us); /* the tick ends it */
}

/* Whether partitions are held back still. Locks: the group lock, held. */
static bool holding(const struct pulse_broker_groups *g, int64_t now_us)
{
    return g->hold_until_us != 0 && now_us < g->hold_until_us;
}

static void member_free(struct gmember *m)
{
    if (m == NULL)
        return;
    pulse_free(m->topics);
    pulse_free(m);
}

static void group_free(struct group *gr)
{
    if (gr == NULL)
        return;
    for (size_t i = 0; i < gr->nmembers; i++)
        member_free(gr->members[i]);
    pulse_free(gr->members);
    pulse_free(gr->parts);
    pulse_free(gr);
}

void pulse_broker_groups_destroy(struct pulse_broker_groups *g)
{
    if (g == NULL)
        return;
    for (size_t i = 0; i < g->ngroups; i++)
        group_free(g->groups[i]);
    pulse_free(g->groups);
    pthread_mutex_destroy(&g->mu);
    pulse_free(g);
}

/* Binary search: the group's index, or where it would go (*found false). */
static size_t group_index(const struct pulse_broker_groups *g, const char *name, bool *found)
{
    size_t lo = 0, hi = g->ngroups;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->groups[mid]->name, name);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

static struct group *group_find(struct pulse_broker_groups *g, const char *name)
{
    bool found = false;
    size_t i = group_index(g, name, &found);
    return found ? g->groups[i] : NULL;
}

/* ---- waking parked group fetches ------------------------------------------ */

static void gwait_release(struct gwait *gw)
{
    if (atomic_fetch_sub(&gw->refs, 1) == 1)
        pulse_free(gw);
}

/* Calls the waiter's function unless someone did already. */
static void gwait_fire(struct gwait *gw, pulse_status_t st)
{
    if (!atomic_exchange(&gw->fired, true))
        gw->fn(gw->arg, st);
}

/* Something changed for gr's members: every waiter of it is to be woken
 * (the few that did not need it answer with no records and wait again).
 * Locks: the group lock, held; the waiters are called by unlock_and_fire. */
static void wake_group(struct pulse_broker_groups *g, struct group *gr)
{
    while (gr->waiters != NULL) {
        struct gwait *gw = gr->waiters;
        gr->waiters = gw->next;
        gw->next = g->firing;
        g->firing = gw;
    }
}

static void gwait_data_fn(void *arg, pulse_status_t st);

/* Lets the group lock go, then calls the waiters woken meanwhile (never
 * under the lock: their functions resume HTTP connections) and ends their
 * data waiters, which have nothing left to wake. */
static void unlock_and_fire(struct pulse_broker_groups *g)
{
    struct gwait *list = g->firing;
    pulse_status_t st = g->draining ? PULSE_SHUTDOWN : PULSE_OK;
    g->firing = NULL;
    pthread_mutex_unlock(&g->mu);
    while (list != NULL) {
        struct gwait *gw = list;
        list = gw->next;
        gwait_fire(gw, st);
        if (gw->with_data)
            (void)pulse_local_wait_cancel(gw->b, gwait_data_fn, gw);
        gwait_release(gw); /* the list's reference */
    }
}

static bool unlink_waiter(struct group *gr, struct gwait *gw)
{
    for (struct gwait **pp = &gr->waiters; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == gw) {
            *pp = gw->next;
            return true;
        }
    }
    return false;
}

static void group_remove(struct pulse_broker_groups *g, struct group *gr)
{
    bool found = false;
    size_t i = group_index(g, gr->name, &found);
    wake_group(g, gr);
    if (!found)
        return;
    memmove(&g->groups[i], &g->groups[i + 1], (g->ngroups - i - 1) * sizeof *g->groups);
    g->ngroups--;
    group_free(gr);
}

static struct gmember *member_find(struct group *gr, const char *id)
{
    for (size_t i = 0; i < gr->nmembers; i++)
        if (strcmp(gr->members[i]->id, id) == 0)
            return gr->members[i];
    return NULL;
}

static bool member_consumes(const struct gmember *m, const char *topic)
{
    if (m->leaving)
        return false;
    for (size_t i = 0; i < m->ntopics; i++)
        if (strcmp(m->topics[i], topic) == 0)
            return true;
    return false;
}

/* ---- partitions and assignment ------------------------------------------ */

static int part_cmp(const char *topic_a, uint32_t pa, const char *topic_b, uint32_t pb)
{
    int c = strcmp(topic_a, topic_b);
    if (c != 0)
        return c;
    return pa < pb ? -1 : pa > pb ? 1 : 0;
}

static struct gpart *part_find(struct group *gr, const char *topic, uint32_t partition)
{
    size_t lo = 0, hi = gr->nparts;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = part_cmp(gr->parts[mid].topic, gr->parts[mid].partition, topic, partition);
        if (c == 0)
            return &gr->parts[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The partitions of the topics the members consume, as they are now (a
 * missing topic has none), in *out (sorted; carries over owner, target and
 * owned_gen of partitions gr already has). Locks: map_lock, briefly,
 * per topic. PULSE_NOMEM. */
static pulse_status_t parts_build(struct pulse_local *b, struct group *gr, struct gpart **out, size_t *n_out)
{
    char(*names)[PULSE_NAME_MAX + 1] = NULL;
    size_t nnames = 0, cap = 0, total = 0;
    struct gpart *parts = NULL;
    uint32_t *counts = NULL;
    uint64_t *uids = NULL;
    pulse_status_t st = PULSE_OK;

    for (size_t i = 0; i < gr->nmembers; i++)
        cap += gr->members[i]->ntopics;
    names = pulse_calloc(cap > 0 ? cap : 1, sizeof *names);
    if (names == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < gr->nmembers; i++)
        for (size_t j = 0; j < gr->members[i]->ntopics; j++)
            memcpy(names[nnames++], gr->members[i]->topics[j], sizeof names[0]);
    qsort(names, nnames, sizeof names[0], name_cmp);
    size_t uniq = 0;
    for (size_t i = 0; i < nnames; i++)
        if (uniq == 0 || strcmp(names[uniq - 1], names[i]) != 0)
            memmove(names[uniq++], names[i], sizeof names[0]);
    /* Every topic of every member: members may consume different topics,
     * so a group may span many more than one member names. */
    nnames = uniq;
    counts = pulse_calloc(nnames > 0 ? nnames : 1, sizeof *counts);
    uids = pulse_calloc(nnames > 0 ? nnames : 1, sizeof *uids);
    if (counts == NULL || uids == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < nnames; i++) {
        struct pulse_broker_topic *t = pulse_broker_topic_acquire(b, names[i]);
        counts[i] = t != NULL ? t->nparts : 0;
        uids[i] = t != NULL ? t->uid : 0;
        total += counts[i];
        pulse_broker_topic_release(b, t);
    }
    parts = pulse_calloc(total > 0 ? total : 1, sizeof *parts);
    if (parts == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    size_t k = 0;
    for (size_t i = 0; i < nnames; i++) {
        for (uint32_t p = 0; p < counts[i]; p++, k++) {
            struct gpart *old = part_find(gr, names[i], p);
            memcpy(parts[k].topic, names[i], sizeof parts[k].topic);
            parts[k].partition = p;
            parts[k].topic_uid = uids[i];
            if (old != NULL) {
                parts[k].owner = old->owner;
                parts[k].target = old->target;
                /* Where a fetch of a deleted topic got to means nothing
                 * in the topic made again under its name: its ownership
                 * counts from the generation this change starts (a
                 * changed uid always starts one, rebalance()). */
                parts[k].owned_gen = old->topic_uid == uids[i] ? old->owned_gen : gr->generation + 1;
            }
        }
    }
    *out = parts;
    *n_out = total;
    parts = NULL;
out:
    pulse_free(parts);
    pulse_free(uids);
    pulse_free(counts);
    pulse_free(names);
    return st;
}

/* The least-loaded member consuming topic (first in join order on ties). */
static struct gmember *least_loaded(struct group *gr, const char *topic)
{
    struct gmember *best = NULL;
    for (size_t i = 0; i < gr->nmembers; i++) {
        struct gmember *m = gr->members[i];
        if (member_consumes(m, topic) && (best == NULL || m->load < best->load))
            best = m;
    }
    return best;
}

/* Sets every partition's target (the file comment's rule); true when any
 * target changed. */
static bool assign(struct group *gr)
{
    bool changed = false;

    for (size_t i = 0; i < gr->nmembers; i++)
        gr->members[i]->load = 0;
    for (size_t i = 0; i < gr->nparts; i++) {
        struct gpart *p = &gr->parts[i];
        if (p->target != NULL && member_consumes(p->target, p->topic))
            p->target->load++;
        else if (p->target != NULL) {
            p->target = NULL;
            changed = true;
        }
    }
    for (size_t i = 0; i < gr->nparts; i++) {
        struct gpart *p = &gr->parts[i];
        if (p->target != NULL)
            continue;
        p->target = least_loaded(gr, p->topic);
        if (p->target != NULL) {
            p->target->load++;
            changed = true;
        }
    }
    /* Each move lowers the sum of squared loads, so this ends. */
    for (bool moved = true; moved;) {
        moved = false;
        for (size_t i = 0; i < gr->nparts; i++) {
            struct gpart *p = &gr->parts[i];
            struct gmember *to = p->target != NULL ? least_loaded(gr, p->topic) : NULL;
            if (to != NULL && to->load + 1 < p->target->load) {
                p->target->load--;
                to->load++;
                p->target = to;
                moved = changed = true;
            }
        }
    }
    return changed;
}

/* Recomputes gr's partitions and targets after membership changed (or,
 * with members_changed false, to notice changed topics); a change starts a
 * new generation. Keeps the old state on PULSE_NOMEM. */
static pulse_status_t rebalance(struct pulse_local *b, struct group *gr, bool members_changed)
{
    struct gpart *parts = NULL;
    size_t n = 0;
    pulse_status_t st = parts_build(b, gr, &parts, &n);
    if (st != PULSE_OK)
        return st;
    bool changed = members_changed || n != gr->nparts;
    for (size_t i = 0; !changed && i < n; i++)
        changed = part_cmp(parts[i].topic, parts[i].partition, gr->parts[i].topic, gr->parts[i].partition) != 0 ||
                  parts[i].topic_uid != gr->parts[i].topic_uid;
    pulse_free(gr->parts);
    gr->parts = parts;
    gr->nparts = n;
    if (assign(gr))
        changed = true;
    if (changed) {
        gr->generation++;
        gr->rebalances++;
        wake_group(b->groups, gr);
    }
    return PULSE_OK;
}

/* Takes m out of gr (its partitions become free) and frees it. */
static void member_remove(struct group *gr, struct gmember *m)
{
    for (size_t i = 0; i < gr->nparts; i++) {
        if (gr->parts[i].owner == m)
            gr->parts[i].owner = NULL;
        if (gr->parts[i].target == m)
            gr->parts[i].target = NULL;
    }
    for (size_t i = 0; i < gr->nmembers; i++) {
        if (gr->members[i] == m) {
            memmove(&gr->members[i], &gr->members[i + 1], (gr->nmembers - i - 1) * sizeof *gr->members);
            gr->nmembers--;
            break;
        }
    }
    member_free(m);
}

/* Removes gr's members whose lease ran out (none with a commit in flight)
 * and rebalances; frees gr when no member is left (*gone). */
static void sweep(struct pulse_local *b, struct group *gr, int64_t now_us, bool *gone)
{
    struct pulse_broker_groups *g = b->groups;
    bool removed = false;

    for (size_t i = 0; i < gr->nmembers;) {
        struct gmember *m = gr->members[i];
        if (m->expires_us <= now_us && m->commits == 0) {
            member_remove(gr, m);
            atomic_fetch_add(&g->expired_total, 1);
            removed = true;
            continue;
        }
        i++;
    }
    *gone = gr->nmembers == 0;
    if (*gone) {
        group_remove(g, gr);
        return;
    }
    if (removed)
        (void)rebalance(b, gr, true);
}

/* ---- a member's view -------------------------------------------------- */

/* A member's call: renews its lease, releases what it lost (unless a commit
 * of it is in flight), takes the free partitions it is the target of, and
 * records that it was told this generation. */
static void touch(struct pulse_broker_groups *g, struct group *gr, struct gmember *m, int64_t now_us)
{
    m->expires_us = now_us + m->lease_ms * 1000;
    for (size_t i = 0; i < gr->nparts; i++) {
        struct gpart *p = &gr->parts[i];
        if (p->owner == m && p->target != m && m->commits == 0) {
            p->owner = NULL;
            wake_group(g, gr); /* its next owner may be waiting */
        }
        if (p->target == m && p->owner == NULL && !holding(g, now_us)) {
            p->owner = m;
            p->owned_gen = gr->generation;
        }
    }
    m->generation = gr->generation;
}

/* Fills v from m's state (after touch); every part's offset is -1.
 * PULSE_NOMEM. Locks: the group lock, held. */
static pulse_status_t view_fill(const struct pulse_broker_groups *g, struct group *gr, struct gmember *m,
                                struct pulse_group_view *v)
{
    size_t n = 0, pending = 0;
    int64_t now = pulse_clock_mono_us();
    memset(v, 0, sizeof *v);
    if (holding(g, now))
        v->hold_ms = (g->hold_until_us - now + 999) / 1000;
    for (size_t i = 0; i < gr->nparts; i++) {
        if (gr->parts[i].owner == m)
            n++;
        else if (gr->parts[i].target == m)
            pending++;
    }
    v->parts = pulse_calloc(n > 0 ? n : 1, sizeof *v->parts);
    if (v->parts == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0, k = 0; i < gr->nparts; i++) {
        const struct gpart *p = &gr->parts[i];
        if (p->owner != m)
            continue;
        memcpy(v->parts[k].topic, p->topic, sizeof v->parts[k].topic);
        v->parts[k].partition = p->partition;
        v->parts[k].offset = -1;
        k++;
    }
    memcpy(v->member_id, m->id, sizeof v->member_id);
    v->generation = m->generation;
    v->lease_ms = m->lease_ms;
    v->nparts = n;
    v->npending = pending;
    return PULSE_OK;
}

/* Finds gr and m after sweeping gr: PULSE_REJOIN when either is gone (or
 * m left).
 * Locks: the group lock, held by the caller. */
static pulse_status_t find_member(struct pulse_local *b, const char *group, const char *member, int64_t now_us,
                                  struct group **gr_out, struct gmember **m_out)
{
    struct group *gr = group_find(b->groups, group);
    bool gone = false;
    if (gr == NULL)
        return PULSE_REJOIN;
    sweep(b, gr, now_us, &gone);
    if (gone)
        return PULSE_REJOIN;
    struct gmember *m = member_find(gr, member);
    /* A member that left while its commit was written stays only until
     * that commit ends: for its own calls it is gone. */
    if (m == NULL || m->leaving)
        return PULSE_REJOIN;
    *gr_out = gr;
    *m_out = m;
    return PULSE_OK;
}

/* ---- join ----------------------------------------------------------------- */

static pulse_status_t join_check(struct pulse_local *b, const char *group, const struct pulse_group_join_spec *spec,
                                 int64_t *lease_ms, char *errbuf, size_t errlen)
{
    struct pulse_broker_groups *g = b->groups;
    pulse_status_t st = pulse_group_join_names_check(group, spec, errbuf, errlen);
    for (size_t i = 0; st == PULSE_OK && i < spec->ntopics; i++) {
        struct pulse_broker_topic *t = pulse_broker_topic_acquire(b, spec->topics[i]);
        if (t == NULL) {
            pulse_errbuf_set(errbuf, errlen, "topic \"%s\" does not exist", spec->topics[i]);
            return PULSE_TOPIC_NOT_FOUND;
        }
        pulse_broker_topic_release(b, t);
    }
    if (st == PULSE_OK)
        st = pulse_group_join_lease(spec, g->lease_min_ms, g->lease_default_ms, g->lease_max_ms, lease_ms, errbuf,
                                    errlen);
    return st;
}

/* A new member (not yet in a group): a random id, so that no id of an
 * earlier run of the broker comes back. */
static struct gmember *member_new(struct pulse_broker_groups *g, const struct pulse_group_join_spec *spec,
                                  int64_t lease_ms, int64_t now_us)
{
    struct gmember *m = pulse_calloc(1, sizeof *m);
    uint64_t rnd = 0;
    if (m == NULL)
        return NULL;
    m->topics = pulse_calloc(spec->ntopics, sizeof *m->topics);
    if (m->topics == NULL) {
        pulse_free(m);
        return NULL;
    }
    for (size_t i = 0; i < spec->ntopics; i++)
        snprintf(m->topics[i], sizeof m->topics[i], "%s", spec->topics[i]);
    m->ntopics = spec->ntopics;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        rnd = (uint64_t)pulse_clock_mono_us() * 0x9e3779b97f4a7c15ull; /* the sequence keeps it unique */
    snprintf(m->id, sizeof m->id, "m-%016" PRIx64 "-%" PRIu64, rnd, ++g->id_seq);
    m->lease_ms = lease_ms;
    m->expires_us = now_us + lease_ms * 1000;
    m->joined_ms = pulse_clock_wall_ms();
    m->start_latest = spec->start_latest;
    return m;
}

/* The group called name, made (empty) if it does not exist. Locks: the
 * group lock, held. */
static pulse_status_t group_get_or_add(struct pulse_broker_groups *g, const char *name, struct group **out,
                                       char *errbuf, size_t errlen)
{
    bool found = false;
    size_t at = group_index(g, name, &found);
    if (found) {
        *out = g->groups[at];
        return PULSE_OK;
    }
    if (g->ngroups >= g->max_groups) {
        pulse_errbuf_set(errbuf, errlen, "the broker has %zu groups with members, its limit (groups.max-groups)",
                         g->ngroups);
        return PULSE_TOO_LARGE;
    }
    if (g->ngroups == g->groups_cap) {
        size_t cap = g->groups_cap ? g->groups_cap * 2 : 8;
        struct group **ng = pulse_realloc(g->groups, cap * sizeof *ng);
        if (ng == NULL)
            return PULSE_NOMEM;
        g->groups = ng;
        g->groups_cap = cap;
    }
    struct group *gr = pulse_calloc(1, sizeof *gr);
    if (gr == NULL)
        return PULSE_NOMEM;
    snprintf(gr->name, sizeof gr->name, "%s", name);
    memmove(&g->groups[at + 1], &g->groups[at], (g->ngroups - at) * sizeof *g->groups);
    g->groups[at] = gr;
    g->ngroups++;
    *out = gr;
    return PULSE_OK;
}

static pulse_status_t member_add(struct group *gr, struct gmember *m)
{
    if (gr->nmembers == gr->members_cap) {
        size_t cap = gr->members_cap ? gr->members_cap * 2 : 4;
        struct gmember **nm = pulse_realloc(gr->members, cap * sizeof *nm);
        if (nm == NULL)
            return PULSE_NOMEM;
        gr->members = nm;
        gr->members_cap = cap;
    }
    gr->members[gr->nmembers++] = m;
    return PULSE_OK;
}

pulse_status_t pulse_local_group_join(struct pulse_broker *base, const char *group,
                                      const struct pulse_group_join_spec *spec, struct pulse_group_view *view,
                                      char *errbuf, size_t errlen)
{
    struct pulse_local *b = pulse_local_of(base);
    struct pulse_broker_groups *g = b->groups;
    struct gmember *m = NULL;
    struct group *gr = NULL;
    int64_t lease_ms = 0;
    int64_t now = pulse_clock_mono_us();
    bool gone = false;

    pulse_status_t st = join_check(b, group, spec, &lease_ms, errbuf, errlen);
    if (st != PULSE_OK)
        return st;
    pthread_mutex_lock(&g->mu);
    st = group_get_or_add(g, group, &gr, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    if (gr->nmembers >= g->max_members) {
        pulse_errbuf_set(errbuf, errlen, "group \"%s\" has %zu members, its limit (groups.max-members)", group,
                         gr->nmembers);
        st = PULSE_TOO_LARGE;
        goto out;
    }
    m = member_new(g, spec, lease_ms, now);
    if (m == NULL || member_add(gr, m) != PULSE_OK) {
        st = PULSE_NOMEM;
        goto out;
    }
    st = rebalance(b, gr, true);
    if (st == PULSE_OK) {
        touch(b->groups, gr, m, now);
        st = view_fill(g, gr, m, view);
    }
    if (st != PULSE_OK) {
        member_remove(gr, m);
        (void)rebalance(b, gr, true);
    } else {
        atomic_fetch_add(&g->joins_total, 1);
    }
    m = NULL;
out:
    member_free(m);
    if (gr != NULL && gr->nmembers == 0)
        sweep(b, gr, now, &gone); /* forgets the empty group */
    unlock_and_fire(g);
    return st;
}

/* ---- heartbeat, leave ----------------------------------------------------- */

pulse_status_t pulse_local_group_heartbeat(struct pulse_broker *base, const char *group, const char *member,
                                           struct pulse_group_view *view)
{
    struct pulse_local *b = pulse_local_of(base);
    struct group *gr = NULL;
    struct gmember *m = NULL;
    int64_t now = pulse_clock_mono_us();

    pthread_mutex_lock(&b->groups->mu);
    pulse_status_t st = find_member(b, group, member, now, &gr, &m);
    if (st == PULSE_OK) {
        touch(b->groups, gr, m, now);
        st = view_fill(b->groups, gr, m, view);
    }
    unlock_and_fire(b->groups);
    return st;
}

pulse_status_t pulse_local_group_leave(struct pulse_broker *base, const char *group, const char *member)
{
    struct pulse_local *b = pulse_local_of(base);
    struct group *gr = NULL;
    struct gmember *m = NULL;
    int64_t now = pulse_clock_mono_us();
    bool gone = false;

    pthread_mutex_lock(&b->groups->mu);
    if (find_member(b, group, member, now, &gr, &m) == PULSE_OK) {
        if (m->commits > 0) {
            /* Its commit completes first (no hand-over under it): leave
             * as a lease that has run out, removed when the commit ends. */
            m->expires_us = now;
            m->leaving = true;
        } else {
            member_remove(gr, m);
            if (gr->nmembers == 0)
                sweep(b, gr, now, &gone);
        }
        if (!gone)
            (void)rebalance(b, gr, true);
    }
    unlock_and_fire(b->groups);
    return PULSE_OK;
}

/* ---- group fetch ---------------------------------------------------------- */

/* Orders group partitions as gr->parts and views are (topic, partition). */
static int gpos_cmp(const struct pulse_group_partition *a, const struct pulse_group_partition *b)
{
    return part_cmp(a->topic, a->partition, b->topic, b->partition);
}

/* Takes the member's resume positions (broker.h pulse_broker_group_resume)
 * into v for the partitions it has owned without a break since the answer
 * they come from; the others keep -1. A partition whose topic was deleted
 * and made again since (its uid differs; the tick or the next rebalance
 * will see it) keeps -1 too: the resume was of the old topic. An offset
 * above a partition's high watermark was never answered: PULSE_RANGE
 * (errbuf names it). Both lists are sorted: one merge. Locks: the group
 * lock, held; map_lock, briefly, per partition resumed. */
static pulse_status_t view_resume(struct pulse_local *b, struct group *gr, const struct gmember *m,
                                  const struct pulse_group_resume *from, struct pulse_group_view *v, char *errbuf,
                                  size_t errlen)
{
    if (from == NULL || from->generation > m->generation)
        return PULSE_OK; /* not an answer this member was given */
    size_t j = 0;
    for (size_t i = 0; i < v->nparts; i++) {
        struct pulse_group_partition *vp = &v->parts[i];
        while (j < from->n && gpos_cmp(&from->pos[j], vp) < 0)
            j++;
        if (j == from->n)
            break;
        const struct gpart *p = part_find(gr, vp->topic, vp->partition);
        if (gpos_cmp(&from->pos[j], vp) != 0 || p == NULL || p->owner != m || p->owned_gen > from->generation)
            continue;
        int64_t hw = -1;
        struct pulse_broker_topic *t = pulse_broker_topic_acquire(b, p->topic);
        if (t != NULL && t->uid == p->topic_uid && p->partition < t->nparts)
            hw = pulse_plog_high_watermark(t->plogs[p->partition]);
        pulse_broker_topic_release(b, t);
        if (hw < 0)
            continue;
        if (from->pos[j].offset > hw) {
            pulse_errbuf_set(errbuf, errlen,
                             "resume: offset %" PRId64 " of %s/%" PRIu32 " is beyond the high watermark %" PRId64,
                             from->pos[j].offset, p->topic, p->partition, hw);
            return PULSE_RANGE;
        }
        vp->offset = from->pos[j].offset;
    }
    return PULSE_OK;
}

/* Fills the positions the view has not: the group's cursor, else the log
 * start, or for start_latest the end, which is then a start to pin (added
 * to pins, *npins; pins has room for every part). Drops partitions whose
 * topic went away meanwhile. Locks: none held (a cursor read, a topic
 * lookup). */
static pulse_status_t view_positions(struct pulse_local *b, const char *group, bool latest, struct pulse_group_view *v,
                                     struct pulse_group_partition *pins, size_t *npins)
{
    size_t k = 0;
    *npins = 0;
    for (size_t i = 0; i < v->nparts; i++) {
        struct pulse_group_partition *p = &v->parts[i];
        if (p->offset < 0) {
            struct pulse_cursor c;
            pulse_status_t st = pulse_local_cursor_get(b, group, p->topic, p->partition, &c);
            if (st == PULSE_OK) {
                p->offset = c.offset;
            } else if (st == PULSE_CURSOR_NOT_FOUND) {
                struct pulse_broker_topic *t = pulse_broker_topic_acquire(b, p->topic);
                if (t != NULL && p->partition < t->nparts)
                    p->offset = latest ? pulse_plog_high_watermark(t->plogs[p->partition])
                                       : pulse_plog_log_start(t->plogs[p->partition]);
                pulse_broker_topic_release(b, t);
                if (latest && p->offset >= 0)
                    pins[(*npins)++] = *p;
            } else if (st != PULSE_TOPIC_NOT_FOUND && st != PULSE_PARTITION_NOT_FOUND) {
                return st;
            }
        }
        if (p->offset >= 0)
            v->parts[k++] = *p;
    }
    v->nparts = k;
    return PULSE_OK;
}

/* A pinned start being committed: what its completion needs. */
struct gpin {
    struct pulse_local *b;
    char group[PULSE_NAME_MAX + 1];
    char member[PULSE_GROUP_MEMBER_ID_MAX + 1];
    pulse_admin_done_fn done;
    void *arg;
};

static pulse_status_t commit_fence(struct pulse_local *b, const char *group, const char *member, uint64_t generation,
                                   const struct pulse_group_partition *pos, size_t n, char *errbuf, size_t errlen);
static void commit_abandon(struct pulse_local *b, const char *group, const char *member);

/* The pin's cursor commit ended (the committer, no lock held): the member's
 * commit is no longer in flight; the poll completes. */
static void pin_done(void *arg, pulse_status_t st)
{
    struct gpin *pin = arg;
    struct pulse_broker_groups *g = pin->b->groups;
    int64_t now = pulse_clock_mono_us();

    pthread_mutex_lock(&g->mu);
    struct group *gr = group_find(g, pin->group);
    struct gmember *m = gr != NULL ? member_find(gr, pin->member) : NULL;
    if (m != NULL) {
        bool gone = false;
        m->commits--;
        if (m->expires_us <= now)
            sweep(pin->b, gr, now, &gone); /* its lease ran out meanwhile */
    }
    unlock_and_fire(g);
    pin->done(pin->arg, st);
    pulse_free(pin);
}

/* The cursors a commit of these positions writes (pulse_free them); NULL
 * when out of memory. */
static struct pulse_cursor *cursors_of(const struct pulse_group_partition *pos, size_t n)
{
    struct pulse_cursor *cursors = pulse_calloc(n, sizeof *cursors);
    if (cursors == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        memcpy(cursors[i].topic, pos[i].topic, sizeof cursors[i].topic);
        cursors[i].partition = pos[i].partition;
        cursors[i].offset = pos[i].offset;
    }
    return cursors;
}

/*
 * start=latest: the end where the group begins on a partition without a
 * cursor is committed as its cursor before the first answer from it, so a
 * rebalance (or a restart) starts the next owner there rather than at a
 * later end, which would skip what was published in between. Fenced as a
 * commit of the member (it must still own them in this generation; while
 * it is written no hand-over happens). A fence that fails pins nothing:
 * the fetch is then refused by pulse_local_group_fetched anyway. PULSE_OK
 * when done will be called.
 */
static pulse_status_t pin_starts(struct pulse_local *b, const char *group, const char *member, uint64_t generation,
                                 const struct pulse_group_partition *pins, size_t n, pulse_admin_done_fn done,
                                 void *arg, bool *called, char *errbuf, size_t errlen)
{
    struct pulse_cursor *cursors = cursors_of(pins, n);
    struct gpin *pin = pulse_calloc(1, sizeof *pin);
    pulse_status_t st = PULSE_OK;

    *called = false;
    if (cursors == NULL || pin == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    *pin = (struct gpin){.b = b, .done = done, .arg = arg};
    snprintf(pin->group, sizeof pin->group, "%s", group);
    snprintf(pin->member, sizeof pin->member, "%s", member);
    pthread_mutex_lock(&b->groups->mu);
    pulse_status_t fst = commit_fence(b, group, member, generation, pins, n, NULL, 0);
    unlock_and_fire(b->groups);
    if (fst != PULSE_OK)
        goto out; /* nothing pinned; done is the caller's to call */
    st = pulse_local_cursor_commit_async(&b->base, group, cursors, n, pin_done, pin, errbuf, errlen);
    if (st != PULSE_OK) {
        commit_abandon(b, group, member);
        goto out;
    }
    pin = NULL; /* pin_done frees it */
    *called = true;
out:
    pulse_free(cursors);
    pulse_free(pin);
    return st;
}

pulse_status_t pulse_local_group_poll_async(struct pulse_broker *base, const char *group, const char *member,
                                            const struct pulse_group_resume *from, struct pulse_group_view *view,
                                            pulse_admin_done_fn done, void *arg, char *errbuf, size_t errlen)
{
    struct pulse_local *b = pulse_local_of(base);
    struct pulse_group_partition *pins = NULL;
    struct group *gr = NULL;
    struct gmember *m = NULL;
    int64_t now = pulse_clock_mono_us();
    bool latest = false, called = false;
    size_t npins = 0;

    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    pthread_mutex_lock(&b->groups->mu);
    pulse_status_t st = find_member(b, group, member, now, &gr, &m);
    if (st == PULSE_OK) {
        touch(b->groups, gr, m, now);
        latest = m->start_latest;
        st = view_fill(b->groups, gr, m, view);
    }
    if (st == PULSE_OK) {
        st = view_resume(b, gr, m, from, view, errbuf, errlen);
        if (st != PULSE_OK)
            pulse_group_view_fini(view);
    }
    unlock_and_fire(b->groups);
    if (st != PULSE_OK)
        return st;
    pins = pulse_calloc(view->nparts > 0 ? view->nparts : 1, sizeof *pins);
    st = pins == NULL ? PULSE_NOMEM : view_positions(b, group, latest, view, pins, &npins);
    if (st == PULSE_OK && npins > 0)
        st = pin_starts(b, group, member, view->generation, pins, npins, done, arg, &called, errbuf, errlen);
    pulse_free(pins);
    if (st != PULSE_OK) {
        pulse_group_view_fini(view);
        return st;
    }
    if (!called)
        done(arg, PULSE_OK);
    return PULSE_OK;
}

pulse_status_t pulse_local_group_fetched(struct pulse_broker *base, const char *group, const char *member,
                                         uint64_t generation, const struct pulse_group_partition *pos, size_t n)
{
    struct pulse_local *b = pulse_local_of(base);
    struct group *gr = NULL;
    struct gmember *m = NULL;
    int64_t now = pulse_clock_mono_us();

    pthread_mutex_lock(&b->groups->mu);
    pulse_status_t st = find_member(b, group, member, now, &gr, &m);
    if (st == PULSE_OK && m->generation != generation)
        st = PULSE_GROUP_FENCED;
    for (size_t i = 0; st == PULSE_OK && i < n; i++) {
        struct gpart *p = part_find(gr, pos[i].topic, pos[i].partition);
        if (p == NULL || p->owner != m)
            st = PULSE_GROUP_FENCED;
    }
    /* Only the lease: the hand-over waits for the member's next call, so
     * the records about to be answered are of partitions it still owns.
     * No position is kept: the member says where it is (its resume). */
    if (st == PULSE_OK)
        m->expires_us = now + m->lease_ms * 1000;
    unlock_and_fire(b->groups);
    return st;
}

/* ---- a group fetch that waits ------------------------------------------------- */

/* Whether m's next call would change what it was told: a partition to
 * release or one to take up. Locks: the group lock, held. */
static bool member_has_news(const struct pulse_broker_groups *g, const struct group *gr, const struct gmember *m,
                            int64_t now_us)
{
    if (m->generation != gr->generation)
        return true;
    bool held = holding(g, now_us);
    for (size_t i = 0; i < gr->nparts; i++) {
        const struct gpart *p = &gr->parts[i];
        if ((p->owner == m && p->target != m && m->commits == 0) || (p->target == m && p->owner == NULL && !held))
            return true;
    }
    return false;
}

/* Takes gw off its group's list if it is still there (its list reference
 * goes with it). Locks: takes the group lock. */
static void gwait_detach(struct pulse_broker_groups *g, struct gwait *gw)
{
    pthread_mutex_lock(&g->mu);
    struct group *gr = group_find(g, gw->group);
    bool linked = gr != NULL && unlink_waiter(gr, gw);
    unlock_and_fire(g);
    if (linked)
        gwait_release(gw);
}

/* The data waiter fired or was cancelled (the syncer, or whoever
 * cancelled it; no lock held). */
static void gwait_data_fn(void *arg, pulse_status_t st)
{
    struct gwait *gw = arg;
    gwait_fire(gw, st);
    gwait_detach(gw->b->groups, gw);
    gwait_release(gw); /* the data waiter's reference */
}

/* Registers gw on the member's group (its references set), or says why
 * not: PULSE_REJOIN, PULSE_SHUTDOWN, or PULSE_EOF for "answer now" (a
 * newer generation, or news for the member). Kicks the syncer when gw's
 * deadline is the earliest (next_wake_us). */
static pulse_status_t gwait_register(struct pulse_local *b, const char *member, uint64_t generation, struct gwait *gw,
                                     bool with_data)
{
    struct pulse_broker_groups *g = b->groups;
    struct group *gr = NULL;
    struct gmember *m = NULL;
    int64_t now = pulse_clock_mono_us();
    bool kick = false;

    pthread_mutex_lock(&g->mu);
    pulse_status_t st = g->draining ? PULSE_SHUTDOWN : find_member(b, gw->group, member, now, &gr, &m);
    if (st == PULSE_OK && (m->generation != generation || member_has_news(g, gr, m, now)))
        st = PULSE_EOF;
    if (st == PULSE_OK) {
        /* the list's; with data, the data waiter's and the parker's */
        gw->with_data = with_data;
        atomic_store(&gw->refs, with_data ? 3 : 1);
        gw->next = gr->waiters;
        gr->waiters = gw;
        m->expires_us = now + m->lease_ms * 1000; /* a call of the member */
        if (gw->deadline_us < atomic_load(&g->next_deadline_us)) {
            atomic_store(&g->next_deadline_us, gw->deadline_us);
            kick = true;
        }
    }
    unlock_and_fire(g);
    if (kick) {
        pthread_mutex_lock(&b->mu);
        b->kick = true;
        pthread_cond_signal(&b->cv);
        pthread_mutex_unlock(&b->mu);
    }
    return st;
}

/* After registering gw with a data reference: parks the broker's data
 * waiter over the positions. Whoever fires gw first answers; when nothing
 * is parked and a change fired gw meanwhile, fn already ran, which counts
 * as parked. Drops the parker's reference. */
static pulse_status_t gwait_park(struct pulse_local *b, struct gwait *gw, const struct pulse_group_partition *pos,
                                 size_t n, struct pulse_wait_pos *wp, bool *parked_out)
{
    bool parked = false;
    for (size_t i = 0; i < n; i++)
        wp[i] = (struct pulse_wait_pos){pos[i].topic, pos[i].partition, pos[i].offset};
    pulse_status_t st = pulse_local_wait_any(&b->base, wp, n, gw->deadline_us, gwait_data_fn, gw, &parked, NULL);
    if (st == PULSE_OK && parked) {
        /* A change that fired gw before its data waiter was parked found
         * nothing to cancel: end it here. */
        if (atomic_load(&gw->fired))
            (void)pulse_local_wait_cancel(b, gwait_data_fn, gw);
        gwait_release(gw); /* the parker's */
        *parked_out = true;
        return PULSE_OK;
    }
    bool won = !atomic_exchange(&gw->fired, true);
    gwait_detach(b->groups, gw);
    gwait_release(gw); /* the data waiter's reference: no callback will come */
    gwait_release(gw); /* the parker's */
    *parked_out = !won;
    return won ? st : PULSE_OK;
}

pulse_status_t pulse_local_group_wait(struct pulse_broker *base, const char *group, const char *member,
                                      uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                      int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out)
{
    struct pulse_local *b = pulse_local_of(base);
    struct pulse_wait_pos *wp = NULL;
    struct gwait *gw = NULL;
    pulse_status_t st = PULSE_OK;

    *parked_out = false;
    if (n > PULSE_WAIT_MAX_POSITIONS || fn == NULL)
        return PULSE_INVALID;
    gw = pulse_calloc(1, sizeof *gw);
    if (n > 0)
        wp = pulse_calloc(n, sizeof *wp);
    if (gw == NULL || (n > 0 && wp == NULL)) {
        st = PULSE_NOMEM;
        goto out;
    }
    snprintf(gw->group, sizeof gw->group, "%s", group);
    gw->b = b;
    gw->deadline_us = deadline_mono_us;
    gw->fn = fn;
    gw->arg = arg;
    st = gwait_register(b, member, generation, gw, n > 0);
    if (st != PULSE_OK) {
        st = st == PULSE_EOF ? PULSE_OK : st; /* answer now */
        goto out;
    }
    if (n == 0) {
        *parked_out = true; /* woken by a change, the tick at its deadline, or drain */
        gw = NULL;
        goto out;
    }
    st = gwait_park(b, gw, pos, n, wp, parked_out);
    gw = NULL; /* its references are the group's and the waiter's */
out:
    pulse_free(wp);
    pulse_free(gw);
    return st;
}

/* Moves the waiters whose deadline passed to the firing list and returns
 * the earliest deadline left. Locks: the group lock, held. */
static int64_t expire_waiters(struct pulse_broker_groups *g, int64_t now_us)
{
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < g->ngroups; i++) {
        for (struct gwait **pp = &g->groups[i]->waiters; *pp != NULL;) {
            struct gwait *gw = *pp;
            if (gw->deadline_us <= now_us) {
                *pp = gw->next;
                gw->next = g->firing;
                g->firing = gw;
                continue;
            }
            if (gw->deadline_us < next)
                next = gw->deadline_us;
            pp = &gw->next;
        }
    }
    return next;
}

int64_t pulse_broker_groups_next_deadline(struct pulse_local *b)
{
    return b->groups != NULL ? atomic_load(&b->groups->next_deadline_us) : INT64_MAX;
}

void pulse_broker_groups_drain(struct pulse_local *b)
{
    struct pulse_broker_groups *g = b->groups;
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->mu);
    g->draining = true;
    for (size_t i = 0; i < g->ngroups; i++)
        wake_group(g, g->groups[i]);
    unlock_and_fire(g);
}

/* ---- commit --------------------------------------------------------------- */

/* A group commit in flight: what its completion needs. */
struct gcommit {
    struct pulse_local *b;
    char group[PULSE_NAME_MAX + 1];
    char member[PULSE_GROUP_MEMBER_ID_MAX + 1];
    struct pulse_group_view *view;
    pulse_admin_done_fn done;
    void *arg;
};

/* The cursor commit's completion (the committer thread, no lock held):
 * the member's commit is no longer in flight; it answers with the view
 * after it (a call of the member: the hand-over goes on). */
static void commit_done(void *arg, pulse_status_t st)
{
    struct gcommit *c = arg;
    struct pulse_broker_groups *g = c->b->groups;
    int64_t now = pulse_clock_mono_us();

    pthread_mutex_lock(&g->mu);
    struct group *gr = group_find(g, c->group);
    struct gmember *m = gr != NULL ? member_find(gr, c->member) : NULL;
    memset(c->view, 0, sizeof *c->view);
    if (m != NULL) {
        bool gone = false;
        m->commits--;
        if (m->expires_us > now) {
            touch(g, gr, m, now);
            if (view_fill(g, gr, m, c->view) != PULSE_OK)
                memset(c->view, 0, sizeof *c->view);
        } else {
            sweep(c->b, gr, now, &gone); /* its lease ran out meanwhile */
        }
    }
    unlock_and_fire(g);
    c->done(c->arg, st);
    pulse_free(c);
}

/* Checks the fences of a commit and, when it passes, counts it in flight.
 * Locks: the group lock, held. */
static pulse_status_t commit_fence(struct pulse_local *b, const char *group, const char *member, uint64_t generation,
                                   const struct pulse_group_partition *pos, size_t n, char *errbuf, size_t errlen)
{
    struct group *gr = NULL;
    struct gmember *m = NULL;
    int64_t now = pulse_clock_mono_us();
    pulse_status_t st = find_member(b, group, member, now, &gr, &m);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen,
                         "group \"%s\" has no member \"%s\" (it left, its lease ran out, or the "
                         "broker restarted): join again",
                         group, member);
        return st;
    }
    if (generation != m->generation) {
        pulse_errbuf_set(errbuf, errlen,
                         "generation %" PRIu64 " is not the member's current generation %" PRIu64
                         ": nothing was committed",
                         generation, m->generation);
        return PULSE_GROUP_FENCED;
    }
    for (size_t i = 0; i < n; i++) {
        struct gpart *p = part_find(gr, pos[i].topic, pos[i].partition);
        if (p == NULL || p->owner != m) {
            pulse_errbuf_set(errbuf, errlen,
                             "offsets[%zu]: the member does not own %s/%" PRIu32 " in generation %" PRIu64
                             ": nothing was committed",
                             i, pos[i].topic, pos[i].partition, generation);
            return PULSE_GROUP_FENCED;
        }
    }
    m->expires_us = now + m->lease_ms * 1000;
    m->commits++;
    return PULSE_OK;
}

static void commit_abandon(struct pulse_local *b, const char *group, const char *member)
{
    pthread_mutex_lock(&b->groups->mu);
    struct group *gr = group_find(b->groups, group);
    struct gmember *m = gr != NULL ? member_find(gr, member) : NULL;
    if (m != NULL)
        m->commits--;
    unlock_and_fire(b->groups);
}

pulse_status_t pulse_local_group_commit_async(struct pulse_broker *base, const char *group, const char *member,
                                              uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                              struct pulse_group_view *view, pulse_admin_done_fn done, void *arg,
                                              char *errbuf, size_t errlen)
{
    struct pulse_local *b = pulse_local_of(base);
    struct pulse_cursor *cursors = NULL;
    struct gcommit *c = NULL;
    pulse_status_t st = PULSE_OK;

    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (n == 0 || pos == NULL || strlen(member) > PULSE_GROUP_MEMBER_ID_MAX) {
        pulse_errbuf_set(errbuf, errlen, n == 0 ? "no offsets to commit" : "bad member id");
        return PULSE_INVALID;
    }
    cursors = cursors_of(pos, n);
    c = pulse_calloc(1, sizeof *c);
    if (cursors == NULL || c == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    *c = (struct gcommit){.b = b, .view = view, .done = done, .arg = arg};
    snprintf(c->group, sizeof c->group, "%s", group);
    snprintf(c->member, sizeof c->member, "%s", member);
    pthread_mutex_lock(&b->groups->mu);
    st = commit_fence(b, group, member, generation, pos, n, errbuf, errlen);
    unlock_and_fire(b->groups);
    if (st != PULSE_OK)
        goto out;
    st = pulse_local_cursor_commit_async(base, group, cursors, n, commit_done, c, errbuf, errlen);
    if (st != PULSE_OK) {
        commit_abandon(b, group, member);
        goto out;
    }
    c = NULL; /* commit_done frees it */
out:
    pulse_free(cursors);
    pulse_free(c);
    return st;
}

/* ---- visibility ------------------------------------------------------------ */

pulse_status_t pulse_local_group_list(struct pulse_broker *base, char ***names_out, size_t *n_out)
{
    struct pulse_local *b = pulse_local_of(base);
    struct pulse_broker_groups *g = b->groups;
    pulse_status_t st = PULSE_OK;
    char **names = NULL;
    size_t n = 0;

    pthread_mutex_lock(&g->mu);
    int64_t now = pulse_clock_mono_us();
    for (size_t i = 0; i < g->ngroups;) {
        bool gone = false;
        sweep(b, g->groups[i], now, &gone);
        if (!gone)
            i++;
    }
    if (g->ngroups > 0) {
        names = pulse_calloc(g->ngroups, sizeof *names);
        if (names == NULL)
            st = PULSE_NOMEM;
    }
    for (size_t i = 0; st == PULSE_OK && i < g->ngroups; i++) {
        names[i] = pulse_strdup(g->groups[i]->name);
        if (names[i] == NULL)
            st = PULSE_NOMEM;
        n = i + 1;
    }
    unlock_and_fire(g);
    if (st != PULSE_OK) {
        pulse_broker_names_free(names, n);
        return st;
    }
    *names_out = names;
    *n_out = n;
    return PULSE_OK;
}

/* The label of a member id "m-<16 hex, random>-<n>": the random digits,
 * which are what makes the id impossible to guess, become '*'; the rest
 * (the sequence number, unique per broker run) stays. */
static void member_label(const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "%s", id);
    if (strncmp(out, "m-", 2) != 0)
        return; /* "" (no member) */
    for (size_t i = 2; out[i] != '\0' && out[i] != '-'; i++)
        out[i] = '*';
}

/* Copies gr's members and partitions into info (no cursors yet). Locks:
 * the group lock, held. */
static pulse_status_t describe_copy(struct group *gr, int64_t now_us, struct pulse_group_info *info)
{
    snprintf(info->name, sizeof info->name, "%s", gr->name);
    info->generation = gr->generation;
    info->rebalances = gr->rebalances;
    info->members = pulse_calloc(gr->nmembers > 0 ? gr->nmembers : 1, sizeof *info->members);
    info->parts = pulse_calloc(gr->nparts > 0 ? gr->nparts : 1, sizeof *info->parts);
    if (info->members == NULL || info->parts == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < gr->nmembers; i++) {
        const struct gmember *m = gr->members[i];
        struct pulse_group_member_info *mi = &info->members[i];
        info->nmembers = i + 1;
        memcpy(mi->member_id, m->id, sizeof mi->member_id);
        member_label(m->id, mi->label, sizeof mi->label);
        mi->lease_ms = m->lease_ms;
        mi->lease_expires_in_ms = (m->expires_us - now_us) / 1000;
        mi->generation = m->generation;
        mi->joined_at_ms = m->joined_ms;
        mi->topics = pulse_calloc(m->ntopics, sizeof *mi->topics);
        if (mi->topics == NULL)
            return PULSE_NOMEM;
        for (size_t j = 0; j < m->ntopics; j++) {
            mi->topics[j] = pulse_strdup(m->topics[j]);
            if (mi->topics[j] == NULL)
                return PULSE_NOMEM;
            mi->ntopics = j + 1;
        }
        for (size_t j = 0; j < gr->nparts; j++)
            if (gr->parts[j].owner == m)
                mi->nparts++;
    }
    for (size_t i = 0; i < gr->nparts; i++) {
        const struct gpart *p = &gr->parts[i];
        struct pulse_group_part_info *pi = &info->parts[i];
        memcpy(pi->topic, p->topic, sizeof pi->topic);
        pi->partition = p->partition;
        snprintf(pi->owner, sizeof pi->owner, "%s", p->owner != NULL ? p->owner->id : "");
        snprintf(pi->assigned, sizeof pi->assigned, "%s", p->target != NULL ? p->target->id : "");
        member_label(pi->owner, pi->owner_label, sizeof pi->owner_label);
        member_label(pi->assigned, pi->assigned_label, sizeof pi->assigned_label);
        pi->committed = -1;
    }
    info->nparts = gr->nparts;
    return PULSE_OK;
}

/* Adds the committed cursor, high watermark and lag of each partition.
 * Locks: none held (a cursor scan, topic lookups). */
static pulse_status_t describe_cursors(struct pulse_local *b, struct pulse_group_info *info)
{
    struct pulse_cursor *cursors = NULL;
    size_t nc = 0;
    pulse_status_t st = pulse_local_cursor_list(b, info->name, &cursors, &nc);
    if (st != PULSE_OK)
        return st;
    for (size_t i = 0; i < info->nparts; i++) {
        struct pulse_group_part_info *pi = &info->parts[i];
        int64_t start = 0;
        struct pulse_broker_topic *t = pulse_broker_topic_acquire(b, pi->topic);
        if (t != NULL && pi->partition < t->nparts) {
            pi->high_watermark = pulse_plog_high_watermark(t->plogs[pi->partition]);
            start = pulse_plog_log_start(t->plogs[pi->partition]);
        }
        pulse_broker_topic_release(b, t);
        for (size_t j = 0; j < nc; j++)
            if (cursors[j].partition == pi->partition && strcmp(cursors[j].topic, pi->topic) == 0)
                pi->committed = cursors[j].offset;
        int64_t from = pi->committed >= 0 ? pi->committed : start;
        pi->lag = pi->high_watermark > from ? pi->high_watermark - from : 0;
    }
    pulse_free(cursors);
    return PULSE_OK;
}

pulse_status_t pulse_local_group_describe_async(struct pulse_broker *base, const char *group,
                                                struct pulse_group_info **out, pulse_admin_done_fn done, void *arg)
{
    struct pulse_local *b = pulse_local_of(base);
    struct pulse_group_info *info = NULL;
    pulse_status_t st = PULSE_OK;
    int64_t now = pulse_clock_mono_us();

    if (!pulse_broker_cname_valid(group))
        return PULSE_INVALID_NAME;
    info = pulse_calloc(1, sizeof *info);
    if (info == NULL)
        return PULSE_NOMEM;
    pthread_mutex_lock(&b->groups->mu);
    struct group *gr = group_find(b->groups, group);
    bool gone = gr == NULL;
    if (gr != NULL)
        sweep(b, gr, now, &gone);
    st = gone ? PULSE_NOT_FOUND : describe_copy(gr, now, info);
    unlock_and_fire(b->groups);
    if (st == PULSE_OK)
        st = describe_cursors(b, info);
    if (st == PULSE_NOMEM) {
        pulse_group_info_free(info);
        return st;
    }
    if (st == PULSE_OK)
        *out = info;
    else
        pulse_group_info_free(info);
    done(arg, st);
    return PULSE_OK;
}

/* ---- tick and metrics ------------------------------------------------------ */

void pulse_broker_groups_tick(struct pulse_local *b)
{
    struct pulse_broker_groups *g = b->groups;
    int64_t now = pulse_clock_mono_us();

    if (g == NULL || (now < atomic_load(&g->next_tick_us) && now < atomic_load(&g->next_deadline_us)))
        return;
    atomic_store(&g->next_tick_us, now + TICK_US);
    pthread_mutex_lock(&g->mu);
    int64_t next = expire_waiters(g, now);
    if (g->hold_until_us != 0 && now >= g->hold_until_us) {
        /* The hold after the start is over: every member waiting for its
         * partitions learns it now. */
        g->hold_until_us = 0;
        for (size_t i = 0; i < g->ngroups; i++)
            wake_group(g, g->groups[i]);
    }
    if (g->hold_until_us != 0 && g->hold_until_us < next)
        next = g->hold_until_us;
    atomic_store(&g->next_deadline_us, next);
    for (size_t i = 0; i < g->ngroups;) {
        struct group *gr = g->groups[i];
        bool gone = false;
        sweep(b, gr, now, &gone);
        if (gone)
            continue;
        (void)rebalance(b, gr, false); /* a consumed topic created or deleted */
        i++;
    }
    unlock_and_fire(g);
}

/* One group's numbers for the metrics, copied under the group lock. */
struct gstat {
    char name[PULSE_NAME_MAX + 1];
    size_t members;
    uint64_t generation, rebalances;
};

static pulse_status_t metrics_lag(struct pulse_local *b, const struct gstat *s, size_t n, struct pulse_buf *out)
{
    pulse_status_t st = pulse_buf_printf(out, "# HELP pulse_group_lag Records after the group's committed cursors, "
                                              "over the partitions it has cursors on.\n"
                                              "# TYPE pulse_group_lag gauge\n");
    for (size_t i = 0; st == PULSE_OK && i < n; i++) {
        struct pulse_cursor *cursors = NULL;
        size_t nc = 0;
        int64_t lag = 0;
        if (pulse_local_cursor_list(b, s[i].name, &cursors, &nc) != PULSE_OK)
            continue;
        for (size_t j = 0; j < nc; j++)
            lag += cursors[j].lag;
        pulse_free(cursors);
        st = pulse_buf_printf(out, "pulse_group_lag{group=\"%s\"} %" PRId64 "\n", s[i].name, lag);
    }
    return st;
}

pulse_status_t pulse_broker_groups_metrics(struct pulse_local *b, struct pulse_buf *out)
{
    struct pulse_broker_groups *g = b->groups;
    struct gstat *s = NULL;
    size_t n = 0;
    pulse_status_t st = PULSE_OK;

    pthread_mutex_lock(&g->mu);
    s = pulse_calloc(g->ngroups > 0 ? g->ngroups : 1, sizeof *s);
    for (size_t i = 0; s != NULL && i < g->ngroups; i++, n++) {
        snprintf(s[i].name, sizeof s[i].name, "%s", g->groups[i]->name);
        s[i].members = g->groups[i]->nmembers;
        s[i].generation = g->groups[i]->generation;
        s[i].rebalances = g->groups[i]->rebalances;
    }
    unlock_and_fire(g);
    if (s == NULL)
        return PULSE_NOMEM;
    st = pulse_buf_printf(out, "# HELP pulse_group_members Members of a consumer group.\n"
                               "# TYPE pulse_group_members gauge\n");
    for (size_t i = 0; st == PULSE_OK && i < n; i++)
        st = pulse_buf_printf(out, "pulse_group_members{group=\"%s\"} %zu\n", s[i].name, s[i].members);
    if (st == PULSE_OK)
        st = pulse_buf_printf(out, "# HELP pulse_group_generation The group's generation (one more per rebalance).\n"
                                   "# TYPE pulse_group_generation gauge\n");
    for (size_t i = 0; st == PULSE_OK && i < n; i++)
        st = pulse_buf_printf(out, "pulse_group_generation{group=\"%s\"} %" PRIu64 "\n", s[i].name, s[i].generation);
    if (st == PULSE_OK)
        st = pulse_buf_printf(
            out, "# HELP pulse_group_rebalances_total Rebalances of the group since it got its first member.\n"
                 "# TYPE pulse_group_rebalances_total counter\n");
    for (size_t i = 0; st == PULSE_OK && i < n; i++)
        st = pulse_buf_printf(out, "pulse_group_rebalances_total{group=\"%s\"} %" PRIu64 "\n", s[i].name,
                              s[i].rebalances);
    if (st == PULSE_OK)
        st = metrics_lag(b, s, n, out);
    if (st == PULSE_OK)
        st = pulse_buf_printf(out,
                              "# HELP pulse_group_joins_total Members that joined a group.\n"
                              "# TYPE pulse_group_joins_total counter\n"
                              "pulse_group_joins_total %" PRIu64 "\n"
                              "# HELP pulse_group_expired_members_total Members removed because their lease ran out.\n"
                              "# TYPE pulse_group_expired_members_total counter\n"
                              "pulse_group_expired_members_total %" PRIu64 "\n",
                              (uint64_t)atomic_load(&g->joins_total), (uint64_t)atomic_load(&g->expired_total));
    pulse_free(s);
    return st;
}
