/* SPDX-License-Identifier: MIT */
/*
 * kgroups.c - consumer groups of the Kafka backend: the group log
 * (docs/Scaling.md "Consumer groups on Kafka").
 *
 * Every group call that changes or checks membership (join, heartbeat,
 * leave, the start and end of a group fetch, commit) is an event appended
 * to the single-partition topic __pulse_groups, keyed by the group's name.
 * Each gateway runs one reader (kgread) that reads the log from its start,
 * in order, and applies every event to its group's state machine
 * (kgroupsm.c, deterministic: no clock, no cluster). So every gateway that
 * read the same prefix holds the same members, generation, assignment and
 * committed positions, and a restarted gateway rebuilds them by reading
 * the log again.
 *
 * A call of this gateway is answered from the state right after its own
 * event: the caller's call is registered (struct kgcall, with a sequence
 * number) before its event is produced; the event carries this gateway's
 * random id and that number; when kgread applies an event with both, it
 * completes the call, with no lock held. No HTTP worker waits: the seam's
 * calls return at once and complete on kgread (or on kadmin when a
 * follow-up call to the cluster is needed: the watermarks of a group
 * fetch's start, the consumer-group offsets of an accepted commit). A call
 * whose event is not read back within kafka.request-timeout (plus a
 * second) fails with PULSE_UNAVAILABLE; its event may still land later,
 * as with any timed-out write (a join then makes a member nobody knows,
 * whose lease runs out; a commit is then accepted without an answer).
 *
 * Events are produced with the backend's idempotent producer (acks=all)
 * with no opaque, so kpublish's delivery reports ignore them. The text of
 * an event (space-separated; names are [A-Za-z0-9._-], member ids
 * [A-Za-z0-9-]):
 *   J <gw> <seq> <lease_ms> <latest 0|1> <secret> <ntopics> (<topic> <partitions>)*
 *   H <gw> <seq> <member>                      heartbeat, and a group fetch's start
 *   L <gw> <seq> <member>
 *   D <gw> 0 <topic>                          the topic is gone (before an H of its group)
 *   F <gw> <seq> <member> <generation> <n> (<topic> <partition>)*
 *   C <gw> <seq> <member> <generation> <n> (<topic> <partition> <offset>)*
 * Bytes read from the log are hostile: an event that does not parse is
 * skipped (by every gateway alike) and counted.
 *
 * Group waits (the long-poll of a group fetch) need no event: a waiter
 * is parked on the data positions (kwait) and on its group here; it fires
 * on data, on news for its member (a new generation, a partition handed
 * over to it or taken from it), or at its deadline (checked by kgread every
 * KG_POLL_MS).
 *
 * Locks: kgroups.h. Threads: kgread (the reader, below), and the callers
 * of the seam (kgcalls.c), which only register calls and produce.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "kafka/kafka_int.h"
#include "kafka/kgroups.h"

struct kgwait {
    struct kgwait *next; /* in its group's list, or in a list to fire */
    struct kggroup *gr;
    atomic_int refs; /* the group's list, and kwait's waiter when it has one */
    atomic_bool fired;
    bool listed; /* kg->mu */
    pulse_wait_fn fn;
    void *arg;
    char member[PULSE_GROUP_MEMBER_ID_MAX + 1];
    uint64_t generation;
    size_t owned, pending;
    int64_t deadline_us;
};

static void random_hex(char *out16)
{
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        rnd = (uint64_t)pulse_clock_mono_us() * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
    snprintf(out16, 17, "%016" PRIx64, rnd);
}

/* ---- the group table (kg->mu held) ---------------------------------------- */

static struct kggroup *group_find(struct kgroups *kg, const char *name, size_t *at)
{
    size_t lo = 0, hi = kg->ngroups;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(kg->groups[mid]->name, name);
        if (c == 0)
            return kg->groups[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (at != NULL)
        *at = lo;
    return NULL;
}

struct kggroup *pulse_kgroups_find(struct kgroups *kg, const char *name)
{
    return group_find(kg, name, NULL);
}

static struct kggroup *group_get(struct kgroups *kg, const char *name)
{
    size_t at = 0;
    struct kggroup *gr = group_find(kg, name, &at);
    if (gr != NULL)
        return gr;
    struct kggroup **ng = pulse_realloc(kg->groups, (kg->ngroups + 1) * sizeof *ng);
    if (ng == NULL)
        return NULL;
    kg->groups = ng;
    gr = pulse_calloc(1, sizeof *gr);
    if (gr == NULL || (gr->sm = pulse_kgsm_new()) == NULL) {
        pulse_free(gr);
        return NULL;
    }
    snprintf(gr->name, sizeof gr->name, "%s", name);
    memmove(&kg->groups[at + 1], &kg->groups[at], (kg->ngroups - at) * sizeof *kg->groups);
    kg->groups[at] = gr;
    kg->ngroups++;
    return gr;
}

pulse_status_t pulse_kgroups_room(struct kgroups *kg, const char *group, char *errbuf, size_t errlen)
{
    pulse_status_t st = PULSE_OK;
    pthread_mutex_lock(&kg->mu);
    struct kggroup *gr = group_find(kg, group, NULL);
    size_t members = gr != NULL ? pulse_kgsm_members(gr->sm) : 0, with = 0;
    for (size_t i = 0; i < kg->ngroups; i++)
        with += pulse_kgsm_members(kg->groups[i]->sm) > 0;
    if (members >= kg->max_members) {
        pulse_errbuf_set(errbuf, errlen, "group \"%s\" has %zu members, its limit (groups.max-members)", group,
                         members);
        st = PULSE_TOO_LARGE;
    } else if (members == 0 && with >= kg->max_groups) {
        pulse_errbuf_set(errbuf, errlen, "the gateway knows %zu groups with members, its limit (groups.max-groups)",
                         with);
        st = PULSE_TOO_LARGE;
    }
    pthread_mutex_unlock(&kg->mu);
    return st;
}

/* ---- waiters ---------------------------------------------------------------- */

static void wait_release(struct kgwait *w)
{
    if (atomic_fetch_sub(&w->refs, 1) == 1)
        pulse_free(w);
}

static void wait_fire(struct kgwait *w, pulse_status_t st)
{
    if (!atomic_exchange(&w->fired, true))
        w->fn(w->arg, st);
}

static void wait_unlink(struct kgwait *w)
{
    struct kgwait **pp = &w->gr->waiters;
    while (*pp != NULL && *pp != w)
        pp = &(*pp)->next;
    if (*pp == w)
        *pp = w->next;
    w->next = NULL;
    w->listed = false;
}

/* Moves the waiters of gr that are due to *out: all of them when all, else
 * those whose deadline is before now_us, already fired (by data), or with
 * news for their member. kg->mu held. */
static void waiters_due(struct kggroup *gr, bool all, int64_t now_us, struct kgwait **out)
{
    struct kgwait *w = gr->waiters, *next;
    for (; w != NULL; w = next) {
        next = w->next;
        if (all || w->deadline_us <= now_us || atomic_load(&w->fired) ||
            pulse_kgsm_news_for(gr->sm, w->member, w->generation, w->owned, w->pending)) {
            wait_unlink(w);
            w->next = *out;
            *out = w;
        }
    }
}

/* Fires the waiters of a list made by waiters_due; no lock held. */
static void waiters_fire(struct kgwait *list, pulse_status_t st)
{
    while (list != NULL) {
        struct kgwait *w = list;
        list = w->next;
        wait_fire(w, st);
        wait_release(w);
    }
}

/* kwait fired the data side; the group side is unlinked by kgread's next
 * pass (it skips fired waiters). */
static void on_data(void *arg, pulse_status_t st)
{
    struct kgwait *w = arg;
    wait_fire(w, st);
    wait_release(w);
}

/* Parks w on its data positions (n > 0; w->refs counts kwait's side). */
static pulse_status_t wait_data(struct pulse_kafka *k, struct kgwait *w, const struct pulse_group_partition *pos,
                                size_t n)
{
    const char **topics = pulse_calloc(n, sizeof *topics);
    uint32_t *parts = pulse_calloc(n, sizeof *parts);
    int64_t *offs = pulse_calloc(n, sizeof *offs);
    pulse_status_t st = PULSE_NOMEM;
    bool parked = false;
    if (topics != NULL && parts != NULL && offs != NULL) {
        for (size_t i = 0; i < n; i++) {
            topics[i] = pos[i].topic;
            parts[i] = pos[i].partition;
            offs[i] = pos[i].offset;
        }
        st = pulse_kafka_wait_positions(k, topics, parts, offs, n, w->deadline_us, on_data, w, &parked);
    }
    pulse_free(topics);
    pulse_free(parts);
    pulse_free(offs);
    return st;
}

pulse_status_t pulse_kafka_group_wait(struct pulse_broker *b, const char *group, const char *member,
                                      uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                      int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out)
{
    struct pulse_kafka *k = kafka_of(b);
    struct kgroups *kg = k->groups;
    *parked_out = false;
    if (atomic_load(&k->draining))
        return PULSE_SHUTDOWN;
    if (fn == NULL || n > PULSE_WAIT_MAX_POSITIONS)
        return PULSE_INVALID;
    struct kgwait *w = pulse_calloc(1, sizeof *w);
    if (w == NULL)
        return PULSE_NOMEM;
    w->fn = fn;
    w->arg = arg;
    w->generation = generation;
    w->deadline_us = deadline_mono_us;
    snprintf(w->member, sizeof w->member, "%s", member);
    atomic_store(&w->refs, n > 0 ? 2 : 1);
    pthread_mutex_lock(&kg->mu);
    struct kggroup *gr = group_find(kg, group, NULL);
    bool news = gr == NULL || !pulse_kgsm_is_member(gr->sm, member) || pulse_kgsm_generation(gr->sm) != generation;
    if (!news) {
        /* The member's view now: a change of it is news. */
        pulse_kgsm_counts(gr->sm, member, &w->owned, &w->pending);
        w->gr = gr;
        w->listed = true;
        w->next = gr->waiters;
        gr->waiters = w;
    }
    pthread_mutex_unlock(&kg->mu);
    if (news) { /* answer at once: the fetch's end makes the call that tells */
        pulse_free(w);
        return PULSE_OK;
    }
    *parked_out = true;
    if (n > 0) {
        pulse_status_t st = wait_data(k, w, pos, n);
        if (st != PULSE_OK) { /* kwait never fires it: fire it here, kgread unlinks it */
            wait_fire(w, st == PULSE_SHUTDOWN ? PULSE_SHUTDOWN : PULSE_OK);
            wait_release(w);
        }
    }
    return PULSE_OK;
}

/* ---- calls and their events ---------------------------------------------- */

void pulse_kgroups_call_free(struct kgcall *c)
{
    if (c == NULL)
        return;
    pulse_free(c->from);
    pulse_free(c->pos);
    pulse_free(c->committed);
    pulse_free(c);
}

struct kgcall *pulse_kgroups_call_new(struct pulse_kafka *k, enum kgcall_kind kind, const char *group,
                                      pulse_admin_done_fn done, void *arg)
{
    struct kgcall *c = pulse_calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->kind = kind;
    c->seq = atomic_fetch_add(&k->groups->seq, 1) + 1;
    c->deadline_us = pulse_clock_mono_us() + (k->timeout_ms + 1000) * 1000;
    snprintf(c->group, sizeof c->group, "%s", group);
    c->done = done;
    c->arg = arg;
    return c;
}

static bool call_unlink(struct kgroups *kg, struct kgcall *c)
{
    for (struct kgcall **pp = &kg->pending; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            return true;
        }
    }
    return false;
}

/* The pending call of this gateway numbered seq, taken off the list. */
static struct kgcall *call_take(struct kgroups *kg, uint64_t seq)
{
    for (struct kgcall **pp = &kg->pending; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->seq == seq) {
            struct kgcall *c = *pp;
            *pp = c->next;
            return c;
        }
    }
    return NULL;
}

pulse_status_t pulse_kgroups_head(struct pulse_buf *b, char kind, const struct pulse_kafka *k, const struct kgcall *c)
{
    return pulse_buf_printf(b, "%c %s %" PRIu64, kind, k->groups->gw, c->seq);
}

static pulse_status_t produce(struct pulse_kafka *k, struct kgcall *c, const struct pulse_buf *text)
{
    struct kgroups *kg = k->groups;
    pthread_mutex_lock(&kg->mu);
    c->next = kg->pending;
    kg->pending = c;
    pthread_mutex_unlock(&kg->mu);
    /* No opaque: kpublish's delivery reports skip the event; a failure
     * shows as the call's deadline. */
    rd_kafka_resp_err_t err = rd_kafka_producev(k->prod, RD_KAFKA_V_TOPIC(PULSE_KAFKA_GROUP_LOG),
                                                RD_KAFKA_V_PARTITION(0), RD_KAFKA_V_KEY(c->group, strlen(c->group)),
                                                RD_KAFKA_V_VALUE(text->data, text->len),
                                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        atomic_fetch_add(&kg->calls, 1);
        return PULSE_OK;
    }
    pthread_mutex_lock(&kg->mu);
    bool mine = call_unlink(kg, c); /* not in the log: kgread cannot have it */
    pthread_mutex_unlock(&kg->mu);
    if (mine)
        pulse_kgroups_call_free(c);
    pulse_status_t st = pulse_kafka_status(err);
    return st == PULSE_OK ? PULSE_IO : st;
}

/* Before a member's call: a "D" event for each topic of the group that
 * the metadata cache no longer has (deleted), so that every gateway drops
 * its partitions at the same point of the log. The cache alone: no call
 * to the cluster. */
void pulse_kgroups_note_gone(struct pulse_kafka *k, const char *group)
{
    struct kgroups *kg = k->groups;
    const char *names[64];
    char(*copy)[PULSE_NAME_MAX + 1] = pulse_calloc(64, sizeof *copy);
    if (copy == NULL)
        return;
    pthread_mutex_lock(&kg->mu);
    struct kggroup *gr = group_find(kg, group, NULL);
    size_t n = gr != NULL ? pulse_kgsm_topics(gr->sm, names, 64) : 0;
    for (size_t i = 0; i < n; i++)
        snprintf(copy[i], sizeof copy[i], "%s", names[i]);
    pthread_mutex_unlock(&kg->mu);
    for (size_t i = 0; i < n; i++) {
        uint32_t parts = 0;
        char text[PULSE_NAME_MAX + 64];
        if (pulse_kafka_meta_cached(k, copy[i], &parts) != 0)
            continue; /* there, or the cache was never filled */
        int len = snprintf(text, sizeof text, "D %s 0 %s", kg->gw, copy[i]);
        (void)rd_kafka_producev(k->prod, RD_KAFKA_V_TOPIC(PULSE_KAFKA_GROUP_LOG), RD_KAFKA_V_PARTITION(0),
                                RD_KAFKA_V_KEY(group, strlen(group)), RD_KAFKA_V_VALUE(text, (size_t)len),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    }
    pulse_free(copy);
}

pulse_status_t pulse_kgroups_submit(struct pulse_kafka *k, struct kgcall *c, struct pulse_buf *b, pulse_status_t st)
{
    if (st == PULSE_OK && atomic_load(&k->draining))
        st = PULSE_SHUTDOWN;
    if (st == PULSE_OK && !atomic_load(&k->groups->ready)) {
        pulse_errbuf_set(c->errbuf, c->errlen, "the group log %s cannot be read yet", PULSE_KAFKA_GROUP_LOG);
        st = PULSE_UNAVAILABLE;
    }
    if (st == PULSE_OK && b->len > KG_EVENT_MAX) {
        pulse_errbuf_set(c->errbuf, c->errlen, "the call is too large for one event of the group log");
        st = PULSE_TOO_LARGE;
    }
    if (st == PULSE_OK)
        st = produce(k, c, b);
    else
        pulse_kgroups_call_free(c);
    pulse_buf_fini(b);
    return st;
}

bool pulse_kgroups_member_valid(const char *m)
{
    size_t n = m != NULL ? strlen(m) : 0;
    if (n == 0 || n > PULSE_GROUP_MEMBER_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = m[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '-'))
            return false;
    }
    return true;
}

/* ---- reading the log --------------------------------------------------------- */

/* One event as parsed from the log (its strings point into text). */
struct kgev {
    char *text;
    char kind;
    const char *gw;
    uint64_t seq;
    char group[PULSE_NAME_MAX + 1];
    struct kgsm_event ev;
    struct kgsm_topic topics[PULSE_GROUP_MAX_TOPICS];
    struct pulse_group_partition *pos;
};

/* The next space-separated token of *p (NUL-terminated in place), or NULL. */
static char *token(char **p)
{
    char *t = *p;
    if (t == NULL || *t == '\0')
        return NULL;
    char *sp = strchr(t, ' ');
    if (sp != NULL) {
        *sp = '\0';
        *p = sp + 1;
    } else {
        *p = t + strlen(t);
    }
    return t;
}

static bool number(char **p, uint64_t max, uint64_t *out)
{
    const char *t = token(p);
    uint64_t v = 0;
    if (t == NULL || *t == '\0')
        return false;
    for (; *t != '\0'; t++) {
        if (*t < '0' || *t > '9' || v > (max - (uint64_t)(*t - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*t - '0');
    }
    *out = v;
    return true;
}

static bool name_token(char **p, const char **out)
{
    const char *t = token(p);
    if (t == NULL || strlen(t) > PULSE_NAME_MAX || !pulse_broker_name_valid(t, strlen(t)))
        return false;
    *out = t;
    return true;
}

static bool parse_join(char **p, struct kgev *e)
{
    uint64_t lease = 0, latest = 0, n = 0;
    if (!number(p, INT64_MAX / 1000, &lease) || lease == 0 || !number(p, 1, &latest))
        return false;
    const char *secret = token(p);
    if (secret == NULL || strlen(secret) != 16 || strspn(secret, "0123456789abcdef") != 16 ||
        !number(p, PULSE_GROUP_MAX_TOPICS, &n) || n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        uint64_t parts = 0;
        if (!name_token(p, &e->topics[i].name) || !number(p, KG_PARTITIONS_MAX, &parts) || parts == 0)
            return false;
        e->topics[i].partitions = (uint32_t)parts;
    }
    e->ev.kind = KGSM_JOIN;
    e->ev.lease_ms = (int64_t)lease;
    e->ev.start_latest = latest == 1;
    e->ev.secret = secret;
    e->ev.topics = e->topics;
    e->ev.ntopics = n;
    return true;
}

/* F and C: "<member> <generation> <n> (<topic> <partition>[ <offset>])*". */
static bool parse_positions(char **p, struct kgev *e, bool offsets)
{
    uint64_t gen = 0, n = 0;
    if (!number(p, UINT64_MAX, &gen) || !number(p, KG_POS_MAX, &n))
        return false;
    e->pos = pulse_calloc(n + 1, sizeof *e->pos);
    if (e->pos == NULL)
        return false;
    for (size_t i = 0; i < n; i++) {
        const char *t = NULL;
        uint64_t part = 0, off = 0;
        if (!name_token(p, &t) || !number(p, UINT32_MAX, &part) || (offsets && !number(p, INT64_MAX, &off)))
            return false;
        snprintf(e->pos[i].topic, sizeof e->pos[i].topic, "%s", t);
        e->pos[i].partition = (uint32_t)part;
        e->pos[i].offset = offsets ? (int64_t)off : -1;
    }
    e->ev.generation = gen;
    e->ev.pos = e->pos;
    e->ev.npos = n;
    return true;
}

/* Parses msg into e (e->text and e->pos to free: kgev_fini). */
static bool parse(const rd_kafka_message_t *msg, struct kgev *e)
{
    memset(e, 0, sizeof *e);
    if (msg->key_len == 0 || msg->key_len > PULSE_NAME_MAX || msg->len == 0 || msg->len > KG_EVENT_MAX)
        return false;
    memcpy(e->group, msg->key, msg->key_len);
    if (!pulse_broker_name_valid(e->group, msg->key_len) || (e->text = pulse_malloc(msg->len + 1)) == NULL)
        return false;
    memcpy(e->text, msg->payload, msg->len);
    e->text[msg->len] = '\0';
    char *p = e->text;
    const char *kind = token(&p);
    e->gw = token(&p);
    if (kind == NULL || strlen(kind) != 1 || e->gw == NULL || !number(&p, UINT64_MAX, &e->seq))
        return false;
    e->kind = kind[0];
    if (e->kind == 'J')
        return parse_join(&p, e) && *p == '\0';
    if (e->kind == 'D') {
        e->ev.kind = KGSM_TOPIC_GONE;
        e->ev.topics = e->topics;
        e->ev.ntopics = 1;
        return name_token(&p, &e->topics[0].name) && *p == '\0';
    }
    e->ev.member = token(&p);
    if (!pulse_kgroups_member_valid(e->ev.member))
        return false;
    switch (e->kind) {
    case 'H':
        e->ev.kind = KGSM_HEARTBEAT;
        return *p == '\0';
    case 'L':
        e->ev.kind = KGSM_LEAVE;
        return *p == '\0';
    case 'F':
        e->ev.kind = KGSM_FETCHED;
        return parse_positions(&p, e, false) && *p == '\0';
    case 'C':
        e->ev.kind = KGSM_COMMIT;
        return parse_positions(&p, e, true) && *p == '\0';
    default:
        return false;
    }
}

static void kgev_fini(struct kgev *e)
{
    pulse_free(e->text);
    pulse_free(e->pos);
}

/* The call's completion, with no lock held. */
static void finish(struct pulse_kafka *k, struct kgcall *c, pulse_status_t st)
{
    if (st == PULSE_GROUP_FENCED)
        atomic_fetch_add(&k->groups->fenced, 1);
    if (c->after != NULL) {
        c->after(k, c, st);
        return;
    }
    c->done(c->arg, st);
    pulse_kgroups_call_free(c);
}

/* Applies one event of the log: its group's state moves, the call of this
 * gateway it answers completes, and waiters with news wake. */
static void apply_msg(struct pulse_kafka *k, const rd_kafka_message_t *msg)
{
    struct kgroups *kg = k->groups;
    struct kgev e;
    if (!parse(msg, &e)) {
        atomic_fetch_add(&kg->bad_events, 1);
        PULSE_WARN_RL("kafka: skipped event %lld of %s: it does not parse", (long long)msg->offset,
                      PULSE_KAFKA_GROUP_LOG);
        kgev_fini(&e);
        return;
    }
    rd_kafka_timestamp_type_t tt;
    int64_t ts = rd_kafka_message_timestamp(msg, &tt);
    e.ev.offset = msg->offset;
    e.ev.time_ms = ts > 0 ? ts : 0;
    struct kgwait *due = NULL;
    pthread_mutex_lock(&kg->mu);
    kg->applied = msg->offset;
    struct kgcall *c = strcmp(e.gw, kg->gw) == 0 ? call_take(kg, e.seq) : NULL;
    struct kggroup *gr = group_get(kg, e.group);
    pulse_status_t st = PULSE_NOMEM;
    if (gr != NULL) {
        st = pulse_kgsm_apply(gr->sm, &e.ev, c != NULL ? c->view : NULL);
        if (c != NULL && c->at_event != NULL)
            st = c->at_event(c, gr->sm, st);
        waiters_due(gr, false, INT64_MIN, &due);
    }
    pthread_mutex_unlock(&kg->mu);
    if (st == PULSE_NOMEM)
        PULSE_ERROR("kafka: out of memory applying event %lld of %s: group \"%s\" may differ from other gateways "
                    "until a restart",
                    (long long)msg->offset, PULSE_KAFKA_GROUP_LOG, e.group);
    atomic_fetch_add(&kg->events, 1);
    waiters_fire(due, PULSE_OK);
    if (c != NULL)
        finish(k, c, st);
    kgev_fini(&e);
}

/* Calls past their deadline fail, waiters past theirs wake. With all, every
 * call and waiter goes, with st (drain). */
static void expire(struct pulse_kafka *k, bool all, pulse_status_t st)
{
    struct kgroups *kg = k->groups;
    int64_t now = pulse_clock_mono_us();
    struct kgcall *late = NULL;
    struct kgwait *due = NULL;
    pthread_mutex_lock(&kg->mu);
    for (struct kgcall **pp = &kg->pending; *pp != NULL;) {
        struct kgcall *c = *pp;
        if (all || c->deadline_us <= now) {
            *pp = c->next;
            c->next = late;
            late = c;
        } else {
            pp = &c->next;
        }
    }
    for (size_t i = 0; i < kg->ngroups; i++)
        if (kg->groups[i]->waiters != NULL)
            waiters_due(kg->groups[i], all, now, &due);
    pthread_mutex_unlock(&kg->mu);
    waiters_fire(due, all ? st : PULSE_OK);
    while (late != NULL) {
        struct kgcall *c = late;
        late = c->next;
        if (!all) {
            atomic_fetch_add(&kg->timeouts, 1);
            pulse_errbuf_set(c->errbuf, c->errlen, "the group log (%s) did not answer within kafka.request-timeout",
                             PULSE_KAFKA_GROUP_LOG);
        }
        c->done(c->arg, all ? st : PULSE_UNAVAILABLE);
        pulse_kgroups_call_free(c);
    }
}

static bool start_reading(struct pulse_kafka *k);

/* Until caught up: the log's end at start (asked once a second until the
 * cluster answers), then whether kgread applied everything before it. */
static void catch_up(struct pulse_kafka *k, int64_t last, int64_t *next_ask_us)
{
    struct kgroups *kg = k->groups;
    if (kg->start_end < 0 && pulse_clock_mono_us() >= *next_ask_us) {
        rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(list, PULSE_KAFKA_GROUP_LOG, 0);
        if (pulse_kafka_watermarks(k, list, NULL) == PULSE_OK && list->elems[0].offset >= 0)
            kg->start_end = list->elems[0].offset;
        rd_kafka_topic_partition_list_destroy(list);
        *next_ask_us = pulse_clock_mono_us() + 1000000;
    }
    if (kg->start_end >= 0 && last >= kg->start_end - 1)
        atomic_store(&kg->caught_up, true);
}

/* kgread: applies the log from its start, in order, until the backend stops. */
static void *reader_main(void *arg)
{
    struct pulse_kafka *k = arg;
    struct kgroups *kg = k->groups;
    int64_t last = -1, next_ask_us = 0, next_start_us = 0;
    while (!atomic_load(&k->stopping)) {
        if (!kg->consuming) {
            struct timespec ts = {0, KG_POLL_MS * 1000000L};
            if (pulse_clock_mono_us() >= next_start_us && !start_reading(k))
                next_start_us = pulse_clock_mono_us() + 1000000;
            if (!kg->consuming)
                nanosleep(&ts, NULL);
            expire(k, false, PULSE_OK);
            continue;
        }
        if (!atomic_load(&kg->caught_up))
            catch_up(k, last, &next_ask_us);
        rd_kafka_message_t *msg = rd_kafka_consume(kg->rkt, 0, KG_POLL_MS);
        if (msg != NULL) {
            if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR)
                last = msg->offset;
            if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR)
                apply_msg(k, msg);
            else if (msg->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                PULSE_WARN_RL("kafka: reading %s: %s", PULSE_KAFKA_GROUP_LOG, rd_kafka_err2str(msg->err));
            rd_kafka_message_destroy(msg);
        }
        expire(k, false, PULSE_OK);
    }
    return NULL;
}

/* ---- life ---------------------------------------------------------------------- */

/* Whether the cluster has the log (all-topics metadata: naming it would
 * make the mock create it with 4 partitions). -1: cannot tell. */
static int log_exists(struct pulse_kafka *k)
{
    const struct rd_kafka_metadata *md = NULL;
    if (rd_kafka_metadata(k->prod, 1, NULL, &md, (int)k->timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return -1;
    int found = 0;
    for (int i = 0; i < md->topic_cnt && !found; i++)
        found = strcmp(md->topics[i].topic, PULSE_KAFKA_GROUP_LOG) == 0 && md->topics[i].partition_cnt > 0;
    rd_kafka_metadata_destroy(md);
    return found;
}

/* CreateTopics of the log on a real cluster: one partition (its order is
 * the groups' one order), the broker's replication, kept forever (a
 * gateway that starts rebuilds the groups from the whole log). */
static pulse_status_t create_log(struct pulse_kafka *k)
{
    char err[512] = "";
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(PULSE_KAFKA_GROUP_LOG, 1, -1, err, sizeof err);
    if (nt == NULL)
        return PULSE_INVALID;
    (void)rd_kafka_NewTopic_set_config(nt, "retention.ms", "-1");
    (void)rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "delete");
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->prod);
    rd_kafka_AdminOptions_t *opt = pulse_kafka_admin_options(k, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_CreateTopics(k->prod, &nt, 1, opt, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, (int)k->timeout_ms + 1000);
    pulse_status_t st = PULSE_UNAVAILABLE;
    if (ev != NULL) {
        const rd_kafka_CreateTopics_result_t *res = rd_kafka_event_CreateTopics_result(ev);
        size_t n = 0;
        const rd_kafka_topic_result_t **tr = res != NULL ? rd_kafka_CreateTopics_result_topics(res, &n) : NULL;
        rd_kafka_resp_err_t e = rd_kafka_event_error(ev);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR && n == 1)
            e = rd_kafka_topic_result_error(tr[0]);
        st = e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS ? PULSE_OK : pulse_kafka_status(e);
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    return st;
}

/* The log exists before anything reads or writes it (a produce to a
 * missing topic could make it with several partitions). */
static pulse_status_t ensure_log(struct pulse_kafka *k)
{
    if (k->mock != NULL) {
        rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(k->mock, PULSE_KAFKA_GROUP_LOG, 1,
                                                             k->mock_brokers < 3 ? k->mock_brokers : 3);
        return err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS ? PULSE_OK : pulse_kafka_status(err);
    }
    int have = log_exists(k);
    return have == 1 ? PULSE_OK : have == 0 ? create_log(k) : PULSE_UNAVAILABLE;
}

/* Once the log exists: the reader starts at its beginning and group calls
 * are taken (kg->ready). Not before: librdkafka 2.0.2 leaks the topic
 * handle of a consumer started on a cluster it never reached. At open,
 * then once a second on kgread until it works. */
static bool start_reading(struct pulse_kafka *k)
{
    struct kgroups *kg = k->groups;
    pulse_status_t st = ensure_log(k);
    if (st == PULSE_OK && kg->rkt == NULL &&
        (kg->rkt = rd_kafka_topic_new(kg->reader, PULSE_KAFKA_GROUP_LOG, NULL)) == NULL)
        st = PULSE_NOMEM;
    if (st == PULSE_OK && rd_kafka_consume_start(kg->rkt, 0, RD_KAFKA_OFFSET_BEGINNING) != 0)
        st = pulse_kafka_status(rd_kafka_last_error());
    if (st != PULSE_OK) {
        PULSE_WARN_RL("kafka: the group log %s cannot be read yet (%s); group calls answer 503 until it can",
                      PULSE_KAFKA_GROUP_LOG, pulse_status_name(st));
        return false;
    }
    kg->consuming = true;
    atomic_store(&kg->ready, true);
    return true;
}

pulse_status_t pulse_kgroups_open(struct pulse_kafka *k, const struct pulse_kafka_config *cfg, rd_kafka_conf_t *conf,
                                  char *errbuf, size_t errlen)
{
    char err[512] = "";
    struct kgroups *kg = pulse_calloc(1, sizeof *kg);
    if (kg == NULL) {
        rd_kafka_conf_destroy(conf);
        return PULSE_NOMEM;
    }
    k->groups = kg;
    pthread_mutex_init(&kg->mu, NULL);
    random_hex(kg->gw);
    kg->applied = -1;
    kg->start_end = -1;
    kg->lease_min_ms = cfg->group_lease_min_ms > 0 ? cfg->group_lease_min_ms : 1000;
    kg->lease_max_ms = cfg->group_lease_max_ms > 0 ? cfg->group_lease_max_ms : 300000;
    kg->lease_default_ms = cfg->group_lease_default_ms > 0 ? cfg->group_lease_default_ms : 30000;
    kg->max_members = cfg->group_max_members > 0 ? cfg->group_max_members : 1000;
    kg->max_groups = cfg->group_max_groups > 0 ? cfg->group_max_groups : 10000;
    kg->reader = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (kg->reader == NULL) {
        rd_kafka_conf_destroy(conf);
        pulse_errbuf_set(errbuf, errlen, "cannot make the group log's reader: %s", err);
        return PULSE_INVALID;
    }
    (void)start_reading(k); /* else kgread tries again */
    if (pthread_create(&kg->thread, NULL, reader_main, k) != 0) {
        pulse_errbuf_set(errbuf, errlen, "cannot start the group log's reader");
        return PULSE_NOMEM;
    }
    kg->started = true;
    return PULSE_OK;
}

void pulse_kgroups_drain(struct pulse_kafka *k)
{
    if (k->groups != NULL)
        expire(k, true, PULSE_SHUTDOWN);
}

void pulse_kgroups_close(struct pulse_kafka *k)
{
    struct kgroups *kg = k->groups;
    if (kg == NULL)
        return;
    if (kg->started)
        pthread_join(kg->thread, NULL); /* k->stopping is set */
    expire(k, true, PULSE_SHUTDOWN);
    if (kg->consuming)
        rd_kafka_consume_stop(kg->rkt, 0);
    if (kg->rkt != NULL)
        rd_kafka_topic_destroy(kg->rkt);
    if (kg->reader != NULL)
        rd_kafka_destroy(kg->reader);
    for (size_t i = 0; i < kg->ngroups; i++) {
        pulse_kgsm_free(kg->groups[i]->sm);
        pulse_free(kg->groups[i]);
    }
    pulse_free(kg->groups);
    pthread_mutex_destroy(&kg->mu);
    pulse_free(kg);
    k->groups = NULL;
}

/* pulse_group_members, _generation and _rebalances_total per group with members,
 * as the local backend names them. kg->mu held (memory only). */
static pulse_status_t group_gauges(struct kgroups *kg, struct pulse_buf *out)
{
    pulse_status_t st = pulse_buf_printf(out, "# HELP pulse_group_members Members of a consumer group.\n"
                                              "# TYPE pulse_group_members gauge\n");
    for (size_t i = 0; st == PULSE_OK && i < kg->ngroups; i++)
        if (pulse_kgsm_members(kg->groups[i]->sm) > 0)
            st = pulse_buf_printf(out, "pulse_group_members{group=\"%s\"} %zu\n", kg->groups[i]->name,
                                  pulse_kgsm_members(kg->groups[i]->sm));
    if (st == PULSE_OK)
        st = pulse_buf_printf(out, "# HELP pulse_group_generation The group's generation (one more per rebalance).\n"
                                   "# TYPE pulse_group_generation gauge\n");
    for (size_t i = 0; st == PULSE_OK && i < kg->ngroups; i++)
        if (pulse_kgsm_members(kg->groups[i]->sm) > 0)
            st = pulse_buf_printf(out, "pulse_group_generation{group=\"%s\"} %" PRIu64 "\n", kg->groups[i]->name,
                                  pulse_kgsm_generation(kg->groups[i]->sm));
    if (st == PULSE_OK) /* one rebalance per generation: the state machine counts them alike */
        st = pulse_buf_printf(out, "# HELP pulse_group_rebalances_total Rebalances of the group since it got its first "
                                   "member.\n# TYPE pulse_group_rebalances_total counter\n");
    for (size_t i = 0; st == PULSE_OK && i < kg->ngroups; i++)
        if (pulse_kgsm_members(kg->groups[i]->sm) > 0)
            st = pulse_buf_printf(out, "pulse_group_rebalances_total{group=\"%s\"} %" PRIu64 "\n", kg->groups[i]->name,
                                  pulse_kgsm_generation(kg->groups[i]->sm));
    return st;
}

pulse_status_t pulse_kgroups_metrics(struct pulse_kafka *k, struct pulse_buf *out)
{
    struct kgroups *kg = k->groups;
    pthread_mutex_lock(&kg->mu);
    long long applied = (long long)kg->applied;
    size_t ngroups = 0;
    for (size_t i = 0; i < kg->ngroups; i++)
        ngroups += pulse_kgsm_members(kg->groups[i]->sm) > 0;
    pulse_status_t st = group_gauges(kg, out);
    pthread_mutex_unlock(&kg->mu);
    if (st != PULSE_OK)
        return st;
    return pulse_buf_printf(
        out,
        "# HELP pulse_kafka_group_log_events_total Events of the group log this gateway applied.\n"
        "# TYPE pulse_kafka_group_log_events_total counter\npulse_kafka_group_log_events_total %llu\n"
        "# HELP pulse_kafka_group_log_bad_events_total Events of the group log skipped because they do not parse.\n"
        "# TYPE pulse_kafka_group_log_bad_events_total counter\npulse_kafka_group_log_bad_events_total %llu\n"
        "# HELP pulse_kafka_group_log_offset Offset of the last event of the group log applied (-1 none).\n"
        "# TYPE pulse_kafka_group_log_offset gauge\npulse_kafka_group_log_offset %lld\n"
        "# HELP pulse_kafka_group_calls_total Group calls of this gateway written to the group log.\n"
        "# TYPE pulse_kafka_group_calls_total counter\npulse_kafka_group_calls_total %llu\n"
        "# HELP pulse_kafka_group_call_timeouts_total Group calls whose event was not read back in time.\n"
        "# TYPE pulse_kafka_group_call_timeouts_total counter\npulse_kafka_group_call_timeouts_total %llu\n"
        "# HELP pulse_kafka_group_fenced_total Group commits and fetches of this gateway refused by the fences.\n"
        "# TYPE pulse_kafka_group_fenced_total counter\npulse_kafka_group_fenced_total %llu\n"
        "# HELP pulse_kafka_groups Consumer groups with members, as this gateway's state has them.\n"
        "# TYPE pulse_kafka_groups gauge\npulse_kafka_groups %zu\n",
        (unsigned long long)atomic_load(&kg->events), (unsigned long long)atomic_load(&kg->bad_events), applied,
        (unsigned long long)atomic_load(&kg->calls), (unsigned long long)atomic_load(&kg->timeouts),
        (unsigned long long)atomic_load(&kg->fenced), ngroups);
}
