/* SPDX-License-Identifier: MIT */
/*
 * kgroupsm.c - the group log's state machine (kgroupsm.h: why, and the
 * rules). Everything here is a function of the events applied so far.
 *
 * State of one group: its members (sorted by their join event's offset),
 * the partition counts its joins reported, and one entry per partition of
 * the topics its members consume: the member it is assigned to, the member
 * that owns it now (they differ during a hand-over) and the committed
 * position. The assignment is recomputed after a join, a leave or an
 * expiry: first every partition stays with its member if that member
 * still consumes the topic and is under its share (ceil(partitions /
 * members)), then the others go, in order, to the consuming member with
 * the fewest. A changed assignment or membership is a new generation.
 */
#include "kafka/kgroupsm.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"

#define ID_MAX PULSE_GROUP_MEMBER_ID_MAX

struct kgsm_member {
    char id[ID_MAX + 1];
    int64_t joined_at; /* offset of its join: its order */
    char (*topics)[PULSE_NAME_MAX + 1];
    size_t ntopics;
    int64_t lease_ms, lease_end;
    int64_t joined_ms; /* the log's time at its join */
    uint64_t told;     /* the generation its last call was answered with */
    bool start_latest;
};

struct kgsm_part {
    char topic[PULSE_NAME_MAX + 1];
    uint32_t partition;
    char assigned[ID_MAX + 1]; /* "" none */
    char owner[ID_MAX + 1];    /* "" free */
    int64_t committed;         /* -1 none */
    uint64_t owned_since;      /* the generation owner got it in */
};

struct kgsm_count {
    char name[PULSE_NAME_MAX + 1];
    uint32_t partitions;
};

struct kgsm {
    int64_t last_offset, now_ms;
    uint64_t generation;
    struct kgsm_member *m;
    size_t nm;
    struct kgsm_part *p;
    size_t np;
    struct kgsm_count *counts; /* partition counts the joins reported */
    size_t ncounts;
};

struct kgsm *pulse_kgsm_new(void)
{
    struct kgsm *g = pulse_calloc(1, sizeof *g);
    if (g != NULL)
        g->last_offset = -1;
    return g;
}

void pulse_kgsm_free(struct kgsm *g)
{
    for (size_t i = 0; g != NULL && i < g->nm; i++)
        pulse_free(g->m[i].topics);
    if (g != NULL) {
        pulse_free(g->m);
        pulse_free(g->p);
        pulse_free(g->counts);
    }
    pulse_free(g);
}

uint64_t pulse_kgsm_generation(const struct kgsm *g)
{
    return g->generation;
}

size_t pulse_kgsm_members(const struct kgsm *g)
{
    return g->nm;
}

static struct kgsm_part *part_of(const struct kgsm *g, const char *topic, uint32_t partition)
{
    for (size_t i = 0; i < g->np; i++)
        if (g->p[i].partition == partition && strcmp(g->p[i].topic, topic) == 0)
            return &g->p[i];
    return NULL;
}

int64_t pulse_kgsm_committed(const struct kgsm *g, const char *topic, uint32_t partition)
{
    const struct kgsm_part *p = part_of(g, topic, partition);
    return p != NULL ? p->committed : -1;
}

static struct kgsm_member *member_of(const struct kgsm *g, const char *id)
{
    for (size_t i = 0; id != NULL && i < g->nm; i++)
        if (strcmp(g->m[i].id, id) == 0)
            return &g->m[i];
    return NULL;
}

static bool consumes(const struct kgsm_member *m, const char *topic)
{
    for (size_t i = 0; i < m->ntopics; i++)
        if (strcmp(m->topics[i], topic) == 0)
            return true;
    return false;
}

/* The partition entries the members' topics make, keeping what the old
 * entries of the same (topic, partition) held. */
static pulse_status_t rebuild_parts(struct kgsm *g)
{
    size_t n = 0;
    for (size_t c = 0; c < g->ncounts; c++)
        n += g->counts[c].partitions;
    struct kgsm_part *p = pulse_calloc(n + 1, sizeof *p);
    if (p == NULL)
        return PULSE_NOMEM;
    size_t np = 0;
    for (size_t c = 0; c < g->ncounts; c++) {
        bool used = false;
        for (size_t i = 0; i < g->nm && !used; i++)
            used = consumes(&g->m[i], g->counts[c].name);
        for (uint32_t q = 0; used && q < g->counts[c].partitions; q++, np++) {
            const struct kgsm_part *old = part_of(g, g->counts[c].name, q);
            if (old != NULL) {
                p[np] = *old;
                continue;
            }
            snprintf(p[np].topic, sizeof p[np].topic, "%s", g->counts[c].name);
            p[np].partition = q;
            p[np].committed = -1;
        }
    }
    pulse_free(g->p);
    g->p = p;
    g->np = np;
    return PULSE_OK;
}

static size_t count_of(const struct kgsm *g, const char *id)
{
    size_t n = 0;
    for (size_t i = 0; i < g->np; i++)
        n += strcmp(g->p[i].assigned, id) == 0;
    return n;
}

/* Whether m may take one more partition: under the share q, or at it
 * while one of the r shares of q + 1 is left (*extra counts those used). */
static bool may_take(const struct kgsm *g, const char *id, size_t q, size_t r, const size_t *extra)
{
    size_t n = count_of(g, id);
    return n < q || (n == q && *extra < r);
}

static void take(struct kgsm *g, struct kgsm_part *p, const char *id, size_t q, size_t *extra)
{
    if (count_of(g, id) == q)
        (*extra)++;
    snprintf(p->assigned, sizeof p->assigned, "%s", id);
}

/* Even and sticky (the file's comment): P partitions over M members is q =
 * P / M each and q + 1 for r = P % M of them. True if any changed. */
static bool assign(struct kgsm *g)
{
    size_t q = g->nm > 0 ? g->np / g->nm : 0, r = g->nm > 0 ? g->np % g->nm : 0, extra = 0;
    bool changed = false;
    char *was = pulse_calloc(g->np + 1, ID_MAX + 1);
    if (was == NULL)
        return true; /* out of memory: keep the assignment, call it changed */
    for (size_t i = 0; i < g->np; i++) {
        memcpy(was + i * (ID_MAX + 1), g->p[i].assigned, ID_MAX + 1);
        g->p[i].assigned[0] = '\0';
    }
    for (size_t i = 0; i < g->np; i++) { /* sticky: kept while within the share */
        const struct kgsm_member *m = member_of(g, was + i * (ID_MAX + 1));
        if (m != NULL && consumes(m, g->p[i].topic) && may_take(g, m->id, q, r, &extra))
            take(g, &g->p[i], m->id, q, &extra);
    }
    for (size_t i = 0; i < g->np; i++) {
        struct kgsm_part *p = &g->p[i];
        const struct kgsm_member *best = NULL;
        size_t best_n = 0;
        for (size_t j = 0; p->assigned[0] == '\0' && j < g->nm; j++) {
            size_t n = count_of(g, g->m[j].id);
            if (consumes(&g->m[j], p->topic) && (best == NULL || n < best_n)) {
                best = &g->m[j];
                best_n = n;
            }
        }
        if (best != NULL)
            take(g, p, best->id, q, &extra);
        if (member_of(g, p->owner) == NULL) { /* free: moves at once, in the coming generation */
            snprintf(p->owner, sizeof p->owner, "%s", p->assigned);
            p->owned_since = g->generation + 1;
        }
        changed = changed || strcmp(was + i * (ID_MAX + 1), p->assigned) != 0;
    }
    pulse_free(was);
    return changed;
}

bool pulse_kgsm_is_member(const struct kgsm *g, const char *id)
{
    return member_of(g, id) != NULL;
}

const char *pulse_kgsm_owner(const struct kgsm *g, const char *topic, uint32_t partition, const char **assigned)
{
    const struct kgsm_part *p = part_of(g, topic, partition);
    if (p == NULL)
        return NULL;
    if (assigned != NULL)
        *assigned = p->assigned;
    return p->owner;
}

/* After a membership change: the partitions, the assignment, and a new
 * generation. */
static pulse_status_t rebalance(struct kgsm *g)
{
    pulse_status_t st = rebuild_parts(g);
    if (st != PULSE_OK)
        return st;
    (void)assign(g);
    g->generation++;
    return PULSE_OK;
}

static void remove_member(struct kgsm *g, size_t i)
{
    pulse_free(g->m[i].topics);
    memmove(&g->m[i], &g->m[i + 1], (g->nm - i - 1) * sizeof *g->m);
    g->nm--;
}

/* Members whose lease ended at the log's time are removed. */
static pulse_status_t expire(struct kgsm *g)
{
    bool any = false;
    for (size_t i = g->nm; i-- > 0;) {
        if (g->m[i].lease_end <= g->now_ms) {
            remove_member(g, i);
            any = true;
        }
    }
    return any ? rebalance(g) : PULSE_OK;
}

/* A member's call: its lease is renewed, and the partitions it owns but
 * is no longer assigned go to their new member now. */
static void member_call(struct kgsm *g, struct kgsm_member *m)
{
    m->lease_end = g->now_ms + m->lease_ms;
    for (size_t i = 0; i < g->np; i++)
        if (strcmp(g->p[i].owner, m->id) == 0 && strcmp(g->p[i].assigned, m->id) != 0) {
            snprintf(g->p[i].owner, sizeof g->p[i].owner, "%s", g->p[i].assigned);
            g->p[i].owned_since = g->generation;
        }
}

static pulse_status_t note_count(struct kgsm *g, const struct kgsm_topic *t)
{
    for (size_t i = 0; i < g->ncounts; i++) {
        if (strcmp(g->counts[i].name, t->name) == 0) {
            g->counts[i].partitions = t->partitions;
            return PULSE_OK;
        }
    }
    struct kgsm_count *c = pulse_realloc(g->counts, (g->ncounts + 1) * sizeof *c);
    if (c == NULL)
        return PULSE_NOMEM;
    g->counts = c;
    snprintf(c[g->ncounts].name, sizeof c[g->ncounts].name, "%s", t->name);
    c[g->ncounts].partitions = t->partitions;
    g->ncounts++;
    return PULSE_OK;
}

static pulse_status_t join(struct kgsm *g, const struct kgsm_event *ev, struct kgsm_member **out)
{
    struct kgsm_member *m = pulse_realloc(g->m, (g->nm + 1) * sizeof *m);
    if (m == NULL)
        return PULSE_NOMEM;
    g->m = m;
    m = &g->m[g->nm];
    memset(m, 0, sizeof *m);
    if (ev->secret != NULL)
        snprintf(m->id, sizeof m->id, "m-%.16s-%lld", ev->secret, (long long)ev->offset);
    else
        snprintf(m->id, sizeof m->id, "m-%lld", (long long)ev->offset);
    m->joined_at = ev->offset;
    m->joined_ms = g->now_ms;
    m->start_latest = ev->start_latest;
    m->lease_ms = ev->lease_ms;
    m->lease_end = g->now_ms + ev->lease_ms;
    m->topics = pulse_calloc(ev->ntopics + 1, sizeof *m->topics);
    if (m->topics == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < ev->ntopics; i++) {
        snprintf(m->topics[i], sizeof m->topics[i], "%s", ev->topics[i].name);
        if (note_count(g, &ev->topics[i]) != PULSE_OK) {
            pulse_free(m->topics);
            return PULSE_NOMEM;
        }
    }
    m->ntopics = ev->ntopics;
    g->nm++; /* joins come in offset order: the array stays sorted */
    *out = &g->m[g->nm - 1];
    return rebalance(g);
}

/* A commit: every position owned by the member in this generation, or
 * nothing is stored. */
static pulse_status_t commit(struct kgsm *g, const struct kgsm_member *m, const struct kgsm_event *ev)
{
    if (ev->generation != g->generation)
        return PULSE_GROUP_FENCED;
    for (size_t i = 0; i < ev->npos; i++) {
        const struct kgsm_part *p = part_of(g, ev->pos[i].topic, ev->pos[i].partition);
        if (p == NULL || strcmp(p->owner, m->id) != 0 || strcmp(p->assigned, m->id) != 0)
            return PULSE_GROUP_FENCED;
    }
    for (size_t i = 0; i < ev->npos; i++)
        part_of(g, ev->pos[i].topic, ev->pos[i].partition)->committed = ev->pos[i].offset;
    return PULSE_OK;
}

/* The end of a group fetch: the member still owns what it read, in the
 * generation it read in (after its call handed over what it lost). */
static pulse_status_t fetched(const struct kgsm *g, const struct kgsm_member *m, const struct kgsm_event *ev)
{
    if (ev->generation != g->generation)
        return PULSE_GROUP_FENCED;
    for (size_t i = 0; i < ev->npos; i++) {
        const struct kgsm_part *p = part_of(g, ev->pos[i].topic, ev->pos[i].partition);
        if (p == NULL || strcmp(p->owner, m->id) != 0)
            return PULSE_GROUP_FENCED;
    }
    return PULSE_OK;
}

/* The member's view: partitions it owns (with the committed positions),
 * and how many assigned to it are still held by another. */
static pulse_status_t view_of(const struct kgsm *g, const struct kgsm_member *m, struct pulse_group_view *v)
{
    memset(v, 0, sizeof *v);
    snprintf(v->member_id, sizeof v->member_id, "%s", m->id);
    v->generation = g->generation;
    v->lease_ms = m->lease_ms;
    v->parts = pulse_calloc(g->np + 1, sizeof *v->parts);
    if (v->parts == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < g->np; i++) {
        const struct kgsm_part *p = &g->p[i];
        if (strcmp(p->assigned, m->id) != 0)
            continue;
        if (strcmp(p->owner, m->id) != 0) {
            v->npending++;
            continue;
        }
        snprintf(v->parts[v->nparts].topic, sizeof v->parts[v->nparts].topic, "%s", p->topic);
        v->parts[v->nparts].partition = p->partition;
        v->parts[v->nparts].offset = p->committed;
        v->nparts++;
    }
    return PULSE_OK;
}

/* A deleted topic: its count goes, so do its partitions (a new
 * generation only when it had any). */
static pulse_status_t topic_gone(struct kgsm *g, const char *name)
{
    for (size_t i = 0; i < g->ncounts; i++) {
        if (strcmp(g->counts[i].name, name) != 0)
            continue;
        memmove(&g->counts[i], &g->counts[i + 1], (g->ncounts - i - 1) * sizeof *g->counts);
        g->ncounts--;
        bool had = false;
        for (size_t j = 0; j < g->np && !had; j++)
            had = strcmp(g->p[j].topic, name) == 0;
        return had ? rebalance(g) : PULSE_OK;
    }
    return PULSE_OK;
}

size_t pulse_kgsm_topics(const struct kgsm *g, const char **names, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < g->ncounts && n < max; i++)
        names[n++] = g->counts[i].name;
    return n;
}

pulse_status_t pulse_kgsm_apply(struct kgsm *g, const struct kgsm_event *ev, struct pulse_group_view *view)
{
    if (ev->offset <= g->last_offset)
        return PULSE_INVALID;
    g->last_offset = ev->offset;
    if (ev->time_ms > g->now_ms)
        g->now_ms = ev->time_ms; /* never back: another gateway's clock may be behind */
    pulse_status_t st = expire(g);
    struct kgsm_member *m = NULL;
    if (st == PULSE_OK && ev->kind == KGSM_TOPIC_GONE)
        return ev->ntopics == 1 ? topic_gone(g, ev->topics[0].name) : PULSE_INVALID;
    if (st == PULSE_OK && ev->kind == KGSM_JOIN)
        st = join(g, ev, &m);
    else if (st == PULSE_OK && (m = member_of(g, ev->member)) == NULL)
        st = PULSE_REJOIN;
    if (st == PULSE_OK && ev->kind == KGSM_LEAVE) {
        remove_member(g, (size_t)(m - g->m));
        return rebalance(g);
    }
    if (st == PULSE_OK && ev->kind != KGSM_JOIN)
        member_call(g, m);
    if (st == PULSE_OK && ev->kind == KGSM_COMMIT)
        st = commit(g, m, ev);
    if (st == PULSE_OK && ev->kind == KGSM_FETCHED)
        st = fetched(g, m, ev);
    if (m != NULL && (st == PULSE_OK || st == PULSE_GROUP_FENCED))
        m->told = g->generation;
    if (view != NULL && m != NULL && (st == PULSE_OK || st == PULSE_GROUP_FENCED)) {
        pulse_status_t vst = view_of(g, m, view);
        st = vst != PULSE_OK ? vst : st;
    }
    return st;
}

uint64_t pulse_kgsm_owned_since(const struct kgsm *g, const char *topic, uint32_t partition, const char *member)
{
    const struct kgsm_part *p = part_of(g, topic, partition);
    if (p == NULL || member == NULL || strcmp(p->owner, member) != 0)
        return UINT64_MAX;
    return p->owned_since;
}

bool pulse_kgsm_start_latest(const struct kgsm *g, const char *member)
{
    const struct kgsm_member *m = member_of(g, member);
    return m != NULL && m->start_latest;
}

void pulse_kgsm_counts(const struct kgsm *g, const char *member, size_t *owned, size_t *pending)
{
    size_t o = 0, q = 0;
    for (size_t i = 0; member != NULL && i < g->np; i++) {
        if (strcmp(g->p[i].assigned, member) != 0)
            continue;
        if (strcmp(g->p[i].owner, member) == 0)
            o++;
        else
            q++;
    }
    *owned = o;
    *pending = q;
}

bool pulse_kgsm_news_for(const struct kgsm *g, const char *member, uint64_t generation, size_t owned, size_t pending)
{
    size_t o = 0, q = 0;
    if (member_of(g, member) == NULL || generation != g->generation)
        return true;
    pulse_kgsm_counts(g, member, &o, &q);
    return o != owned || q != pending;
}

/* An id with its secret digits masked (as the local backend shows them):
 * "m-****************-<offset>"; an id without a secret is its own label. */
static void label_of(const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "%s", id);
    const char *dash = strchr(id + (id[0] != '\0' ? 1 : 0), '-');
    const char *last = strrchr(id, '-');
    for (size_t i = dash != NULL ? (size_t)(dash - id) + 1 : 0; last != NULL && last != dash && i < (size_t)(last - id);
         i++)
        out[i] = '*';
}

static pulse_status_t describe_member(const struct kgsm *g, const struct kgsm_member *m, int64_t now_ms,
                                      struct pulse_group_member_info *mi)
{
    snprintf(mi->member_id, sizeof mi->member_id, "%s", m->id);
    label_of(m->id, mi->label, sizeof mi->label);
    mi->lease_ms = m->lease_ms;
    mi->lease_expires_in_ms = m->lease_end - now_ms;
    mi->generation = m->told;
    mi->joined_at_ms = m->joined_ms;
    for (size_t i = 0; i < g->np; i++)
        mi->nparts += strcmp(g->p[i].owner, m->id) == 0;
    mi->topics = pulse_calloc(m->ntopics + 1, sizeof *mi->topics);
    if (mi->topics == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < m->ntopics; i++) {
        if ((mi->topics[i] = pulse_strdup(m->topics[i])) == NULL)
            return PULSE_NOMEM;
        mi->ntopics++;
    }
    return PULSE_OK;
}

pulse_status_t pulse_kgsm_describe(const struct kgsm *g, int64_t now_ms, struct pulse_group_info *info)
{
    info->generation = g->generation;
    info->rebalances = g->generation;
    info->members = pulse_calloc(g->nm + 1, sizeof *info->members);
    info->parts = pulse_calloc(g->np + 1, sizeof *info->parts);
    if (info->members == NULL || info->parts == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < g->nm; i++) {
        if (g->m[i].lease_end <= now_ms)
            continue; /* removed by the group's next event */
        pulse_status_t st = describe_member(g, &g->m[i], now_ms, &info->members[info->nmembers]);
        info->nmembers++;
        if (st != PULSE_OK)
            return st;
    }
    for (size_t i = 0; i < g->np; i++) {
        struct pulse_group_part_info *pi = &info->parts[i];
        const struct kgsm_member *owner = member_of(g, g->p[i].owner), *to = member_of(g, g->p[i].assigned);
        snprintf(pi->topic, sizeof pi->topic, "%s", g->p[i].topic);
        pi->partition = g->p[i].partition;
        if (owner != NULL && owner->lease_end > now_ms)
            snprintf(pi->owner, sizeof pi->owner, "%s", owner->id);
        if (to != NULL && to->lease_end > now_ms)
            snprintf(pi->assigned, sizeof pi->assigned, "%s", to->id);
        label_of(pi->owner, pi->owner_label, sizeof pi->owner_label);
        label_of(pi->assigned, pi->assigned_label, sizeof pi->assigned_label);
        pi->committed = g->p[i].committed;
    }
    info->nparts = g->np;
    return PULSE_OK;
}
