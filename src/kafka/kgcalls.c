/* SPDX-License-Identifier: MIT */
/*
 * kgcalls.c - the seam's group calls on the Kafka backend (backend.h,
 * broker.h "consumer groups"), each an event of the group log (kgroups.c)
 * completed when the gateway's reader applies it:
 *
 *   join       "J": validated here first (names, topics and their partition
 *              counts from the metadata cache, lease bounds, caps);
 *   heartbeat  "H";
 *   leave      "L": an unknown member is PULSE_OK, as on the local backend;
 *   poll       "H", then the read positions: the member's resume text for
 *              partitions it has owned since that answer's generation, else
 *              the group's committed position, else the log start (or, for
 *              a member that joined with start latest, the high watermark),
 *              asked on kadmin (one ListOffsets round) when any is needed;
 *   fetched    "F": the state machine checks ownership in the generation;
 *   commit     "C": fenced by the state machine; an accepted commit is then
 *              written as the group's consumer-group offsets
 *              (AlterConsumerGroupOffsets through kadmin, as a cursor commit
 *              of the consumer named like the group), so the cursor routes
 *              and Kafka's tools see it, before done runs.
 * The group list and description read this gateway's state (the
 * description then asks the watermarks on kadmin, for the lag).
 *
 * Thread: the callers' (HTTP workers); completions on kgread or kadmin.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "kafka/kgroups.h"

/* ---- join, heartbeat, leave, fetched ------------------------------------------ */

static pulse_status_t join_check(struct pulse_kafka *k, const char *group, const struct pulse_group_join_spec *spec,
                                 int64_t *lease_ms, uint32_t *parts, char *errbuf, size_t errlen)
{
    struct kgroups *kg = k->groups;
    pulse_status_t st = pulse_group_join_names_check(group, spec, errbuf, errlen);
    for (size_t i = 0; st == PULSE_OK && i < spec->ntopics; i++) {
        st = pulse_kafka_meta_partitions(k, spec->topics[i], &parts[i]);
        if (st == PULSE_TOPIC_NOT_FOUND)
            pulse_errbuf_set(errbuf, errlen, "topic \"%s\" does not exist", spec->topics[i]);
    }
    if (st == PULSE_OK)
        st = pulse_group_join_lease(spec, kg->lease_min_ms, kg->lease_default_ms, kg->lease_max_ms, lease_ms, errbuf,
                                    errlen);
    if (st == PULSE_OK)
        st = pulse_kgroups_room(kg, group, errbuf, errlen);
    return st;
}

/* 16 random hex digits: the secret part of a new member's id. */
static void secret_hex(char out[17])
{
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        rnd = (uint64_t)pulse_clock_mono_us() * 0x9e3779b97f4a7c15ull;
    snprintf(out, 17, "%016" PRIx64, rnd);
}

pulse_status_t pulse_kafka_group_join_async(struct pulse_broker *b, const char *group,
                                            const struct pulse_group_join_spec *spec, struct pulse_group_view *view,
                                            pulse_admin_done_fn done, void *arg, char *errbuf, size_t errlen)
{
    struct pulse_kafka *k = kafka_of(b);
    uint32_t parts[PULSE_GROUP_MAX_TOPICS];
    int64_t lease_ms = 0;
    char secret[17];
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    pulse_status_t st = join_check(k, group, spec, &lease_ms, parts, errbuf, errlen);
    if (st != PULSE_OK)
        return st;
    struct kgcall *c = pulse_kgroups_call_new(k, KC_JOIN, group, done, arg);
    if (c == NULL)
        return PULSE_NOMEM;
    c->view = view;
    c->errbuf = errbuf;
    c->errlen = errlen;
    memset(view, 0, sizeof *view);
    secret_hex(secret);
    struct pulse_buf t;
    pulse_buf_init(&t, SIZE_MAX);
    st = pulse_kgroups_head(&t, 'J', k, c);
    if (st == PULSE_OK)
        st = pulse_buf_printf(&t, " %" PRId64 " %d %s %zu", lease_ms, spec->start_latest ? 1 : 0, secret,
                              spec->ntopics);
    for (size_t i = 0; st == PULSE_OK && i < spec->ntopics; i++)
        st = pulse_buf_printf(&t, " %s %" PRIu32, spec->topics[i], parts[i]);
    return pulse_kgroups_submit(k, c, &t, st);
}

/* A member's call whose event is "K gw seq member". */
static pulse_status_t member_call(struct pulse_kafka *k, char kind, struct kgcall *c, const char *member)
{
    struct pulse_buf t;
    pulse_buf_init(&t, SIZE_MAX);
    if (kind == 'H')
        pulse_kgroups_note_gone(k, c->group);
    pulse_status_t st = pulse_kgroups_head(&t, kind, k, c);
    if (st == PULSE_OK)
        st = pulse_buf_printf(&t, " %s", member);
    return pulse_kgroups_submit(k, c, &t, st);
}

/* A group name a client may use follows the name rule, which keeps "__..."
 * names (Kafka's internal topics and the group log) out of reach. */
static bool names_valid(const char *group, const char *member)
{
    return pulse_broker_cname_valid(group) && pulse_kgroups_member_valid(member);
}

pulse_status_t pulse_kafka_group_heartbeat_async(struct pulse_broker *b, const char *group, const char *member,
                                                 struct pulse_group_view *view, pulse_admin_done_fn done, void *arg)
{
    struct pulse_kafka *k = kafka_of(b);
    if (!names_valid(group, member))
        return PULSE_REJOIN;
    struct kgcall *c = pulse_kgroups_call_new(k, KC_HEARTBEAT, group, done, arg);
    if (c == NULL)
        return PULSE_NOMEM;
    memset(view, 0, sizeof *view);
    c->view = view;
    return member_call(k, 'H', c, member);
}

/* A leave of a member the group does not know is done already. */
static pulse_status_t leave_at(struct kgcall *c, const struct kgsm *sm, pulse_status_t st)
{
    (void)c, (void)sm;
    return st == PULSE_REJOIN ? PULSE_OK : st;
}

pulse_status_t pulse_kafka_group_leave_async(struct pulse_broker *b, const char *group, const char *member,
                                             pulse_admin_done_fn done, void *arg)
{
    struct pulse_kafka *k = kafka_of(b);
    if (!names_valid(group, member))
        return PULSE_OK;
    struct kgcall *c = pulse_kgroups_call_new(k, KC_LEAVE, group, done, arg);
    if (c == NULL)
        return PULSE_NOMEM;
    c->at_event = leave_at;
    return member_call(k, 'L', c, member);
}

pulse_status_t pulse_kafka_group_fetched_async(struct pulse_broker *b, const char *group, const char *member,
                                               uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                               pulse_admin_done_fn done, void *arg)
{
    struct pulse_kafka *k = kafka_of(b);
    if (!names_valid(group, member))
        return PULSE_REJOIN;
    struct kgcall *c = pulse_kgroups_call_new(k, KC_FETCHED, group, done, arg);
    if (c == NULL)
        return PULSE_NOMEM;
    struct pulse_buf t;
    pulse_buf_init(&t, SIZE_MAX);
    pulse_status_t st = pulse_kgroups_head(&t, 'F', k, c);
    if (st == PULSE_OK)
        st = pulse_buf_printf(&t, " %s %" PRIu64 " %zu", member, generation, n);
    for (size_t i = 0; st == PULSE_OK && i < n; i++)
        st = pulse_buf_printf(&t, " %s %" PRIu32, pos[i].topic, pos[i].partition);
    return pulse_kgroups_submit(k, c, &t, st);
}

/* ---- poll: the start of a group fetch ------------------------------------------- */

/* Under kg->mu, right after the poll's heartbeat: the member's resume
 * text where it has owned the partition without a break since that
 * answer's generation; the other partitions are read from the group's
 * cursors on kadmin (poll_marks), with the state's committed positions
 * kept as their fallback. */
static pulse_status_t poll_at(struct kgcall *c, const struct kgsm *sm, pulse_status_t st)
{
    struct pulse_group_view *v = c->view;
    if (st != PULSE_OK)
        return st;
    c->start_latest = pulse_kgsm_start_latest(sm, v->member_id);
    c->pos = pulse_calloc(v->nparts + 1, sizeof *c->pos);
    c->committed = pulse_calloc(v->nparts + 1, sizeof *c->committed);
    if (c->pos == NULL || c->committed == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < v->nparts; i++) {
        struct pulse_group_partition *vp = &v->parts[i];
        c->committed[i] = vp->offset;
        vp->offset = -1;
        for (size_t j = 0; j < c->nfrom; j++) {
            const struct pulse_group_partition *f = &c->from[j];
            if (f->partition != vp->partition || strcmp(f->topic, vp->topic) != 0 ||
                pulse_kgsm_owned_since(sm, vp->topic, vp->partition, v->member_id) > c->from_gen)
                continue;
            vp->offset = f->offset;
            c->pos[c->npos++] = *f; /* checked against the high watermark */
        }
    }
    c->need_marks = v->nparts > 0;
    return PULSE_OK;
}

/* A resumed offset above its partition's high watermark is PULSE_RANGE. */
static pulse_status_t poll_check_resume(struct kgcall *c, const rd_kafka_topic_partition_list_t *list)
{
    const struct pulse_group_view *v = c->view;
    for (size_t i = 0; i < v->nparts; i++) {
        int64_t hi = list->elems[i].offset;
        for (size_t j = 0; j < c->npos; j++) {
            if (c->pos[j].partition != v->parts[i].partition || strcmp(c->pos[j].topic, v->parts[i].topic) != 0 ||
                hi < 0 || c->pos[j].offset <= hi)
                continue;
            pulse_errbuf_set(c->errbuf, c->errlen,
                             "resume: offset %" PRId64 " of %s/%" PRIu32 " is beyond the high watermark %" PRId64,
                             c->pos[j].offset, v->parts[i].topic, v->parts[i].partition, hi);
            return PULSE_RANGE;
        }
    }
    return PULSE_OK;
}

/* The partitions without a position start at the group's cursor (its
 * consumer-group offset, which the cursor routes also set), else the
 * state's committed position, else the log start; or, for a member that
 * joined with start latest, the high watermark, then pinned as the
 * group's cursor before the answer (pin: the offsets to write). */
static pulse_status_t poll_starts(struct pulse_kafka *k, struct kgcall *c, const rd_kafka_topic_partition_list_t *list,
                                  const int64_t *lo, rd_kafka_topic_partition_list_t *pin)
{
    struct pulse_group_view *v = c->view;
    int64_t *cur = pulse_calloc(v->nparts + 1, sizeof *cur);
    if (cur == NULL)
        return PULSE_NOMEM;
    pulse_status_t st = pulse_kafka_group_offsets_read(k, c->group, list, cur);
    for (size_t i = 0; st == PULSE_OK && i < v->nparts; i++) {
        if (v->parts[i].offset >= 0)
            continue;
        int64_t hi = list->elems[i].offset, at = cur[i] >= 0 ? cur[i] : c->committed[i];
        if (at < 0 && c->start_latest) {
            at = hi;
            rd_kafka_topic_partition_list_add(pin, v->parts[i].topic, (int32_t)v->parts[i].partition)->offset = hi;
        }
        v->parts[i].offset = at >= 0 ? at : lo[i];
    }
    pulse_free(cur);
    return st;
}

/* kadmin: the watermarks of the member's partitions, then the starts. */
static pulse_status_t poll_marks(struct pulse_kafka *k, void *ctx)
{
    struct kgcall *c = ctx;
    struct pulse_group_view *v = c->view;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)v->nparts + 1);
    rd_kafka_topic_partition_list_t *pin = rd_kafka_topic_partition_list_new((int)v->nparts + 1);
    int64_t *lo = pulse_calloc(v->nparts + 1, sizeof *lo);
    pulse_status_t st = PULSE_NOMEM;
    if (list == NULL || pin == NULL || lo == NULL)
        goto out;
    for (size_t i = 0; i < v->nparts; i++)
        rd_kafka_topic_partition_list_add(list, v->parts[i].topic, (int32_t)v->parts[i].partition);
    if ((st = pulse_kafka_watermarks(k, list, lo)) != PULSE_OK || (st = poll_check_resume(c, list)) != PULSE_OK)
        goto out;
    st = poll_starts(k, c, list, lo, pin);
    if (st == PULSE_OK && pin->cnt > 0)
        st = pulse_kafka_group_offsets_write(k, c->group, pin);
out:
    if (list != NULL)
        rd_kafka_topic_partition_list_destroy(list);
    if (pin != NULL)
        rd_kafka_topic_partition_list_destroy(pin);
    pulse_free(lo);
    return st;
}

static void call_free_ctx(void *ctx)
{
    pulse_kgroups_call_free(ctx);
}

static void poll_after(struct pulse_kafka *k, struct kgcall *c, pulse_status_t st)
{
    pulse_admin_done_fn done = c->done;
    void *arg = c->arg;
    if (st != PULSE_OK || !c->need_marks) {
        pulse_kgroups_call_free(c);
        done(arg, st);
        return;
    }
    st = pulse_kafka_admin_submit(k, poll_marks, c, call_free_ctx, done, arg);
    if (st != PULSE_OK)
        done(arg, st);
}

pulse_status_t pulse_kafka_group_poll_async(struct pulse_broker *b, const char *group, const char *member,
                                            const struct pulse_group_resume *from, struct pulse_group_view *view,
                                            pulse_admin_done_fn done, void *arg, char *errbuf, size_t errlen)
{
    struct pulse_kafka *k = kafka_of(b);
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (!names_valid(group, member))
        return PULSE_REJOIN;
    struct kgcall *c = pulse_kgroups_call_new(k, KC_POLL, group, done, arg);
    if (c == NULL)
        return PULSE_NOMEM;
    memset(view, 0, sizeof *view);
    c->view = view;
    c->errbuf = errbuf;
    c->errlen = errlen;
    c->at_event = poll_at;
    c->after = poll_after;
    if (from != NULL && from->n > 0) {
        c->from = pulse_calloc(from->n, sizeof *c->from);
        if (c->from == NULL) {
            pulse_kgroups_call_free(c);
            return PULSE_NOMEM;
        }
        memcpy(c->from, from->pos, from->n * sizeof *c->from);
        c->nfrom = from->n;
        c->from_gen = from->generation;
    }
    return member_call(k, 'H', c, member);
}

/* ---- commit --------------------------------------------------------------------- */

static pulse_status_t commit_at(struct kgcall *c, const struct kgsm *sm, pulse_status_t st)
{
    if (st == PULSE_REJOIN)
        pulse_errbuf_set(c->errbuf, c->errlen,
                         "group \"%s\" has no such member (it left or its lease ran out): join again", c->group);
    else if (st == PULSE_GROUP_FENCED && pulse_kgsm_generation(sm) != c->from_gen)
        pulse_errbuf_set(c->errbuf, c->errlen,
                         "generation %" PRIu64 " is not the group's current generation %" PRIu64
                         ": nothing was committed",
                         c->from_gen, pulse_kgsm_generation(sm));
    else if (st == PULSE_GROUP_FENCED)
        pulse_errbuf_set(c->errbuf, c->errlen,
                         "the member does not own every partition of the commit in generation %" PRIu64
                         ": nothing was committed",
                         c->from_gen);
    return st;
}

/* An accepted commit: the group's consumer-group offsets, then done (on
 * kadmin, by the cursor commit, which copies the cursors). */
static void commit_after(struct pulse_kafka *k, struct kgcall *c, pulse_status_t st)
{
    pulse_admin_done_fn done = c->done;
    void *arg = c->arg;
    struct pulse_cursor *cur = NULL;
    if (st == PULSE_OK && (cur = pulse_calloc(c->npos, sizeof *cur)) == NULL)
        st = PULSE_NOMEM;
    if (st == PULSE_OK) {
        for (size_t i = 0; i < c->npos; i++) {
            snprintf(cur[i].topic, sizeof cur[i].topic, "%s", c->pos[i].topic);
            cur[i].partition = c->pos[i].partition;
            cur[i].offset = c->pos[i].offset;
        }
        atomic_fetch_add(&k->groups->commits, 1);
        st = pulse_kafka_cursor_commit_async(&k->base, c->group, cur, c->npos, done, arg, c->errbuf, c->errlen);
    }
    pulse_free(cur);
    pulse_kgroups_call_free(c);
    if (st != PULSE_OK)
        done(arg, st);
}

pulse_status_t pulse_kafka_group_commit_async(struct pulse_broker *b, const char *group, const char *member,
                                              uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                              struct pulse_group_view *view, pulse_admin_done_fn done, void *arg,
                                              char *errbuf, size_t errlen)
{
    struct pulse_kafka *k = kafka_of(b);
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (n == 0 || pos == NULL || !pulse_kgroups_member_valid(member)) {
        pulse_errbuf_set(errbuf, errlen, n == 0 ? "no offsets to commit" : "bad member id");
        return PULSE_INVALID;
    }
    if (!pulse_broker_cname_valid(group))
        return PULSE_REJOIN;
    struct kgcall *c = pulse_kgroups_call_new(k, KC_COMMIT, group, done, arg);
    if (c == NULL || (c->pos = pulse_calloc(n, sizeof *c->pos)) == NULL) {
        pulse_kgroups_call_free(c);
        return PULSE_NOMEM;
    }
    memcpy(c->pos, pos, n * sizeof *c->pos);
    c->npos = n;
    c->from_gen = generation;
    memset(view, 0, sizeof *view);
    c->view = view;
    c->errbuf = errbuf;
    c->errlen = errlen;
    c->at_event = commit_at;
    c->after = commit_after;
    struct pulse_buf t;
    pulse_buf_init(&t, SIZE_MAX);
    pulse_status_t st = pulse_kgroups_head(&t, 'C', k, c);
    if (st == PULSE_OK)
        st = pulse_buf_printf(&t, " %s %" PRIu64 " %zu", member, generation, n);
    for (size_t i = 0; st == PULSE_OK && i < n; i++)
        st = pulse_buf_printf(&t, " %s %" PRIu32 " %" PRId64, pos[i].topic, pos[i].partition, pos[i].offset);
    return pulse_kgroups_submit(k, c, &t, st);
}

/* ---- list and describe ------------------------------------------------------------ */

pulse_status_t pulse_kafka_group_list(struct pulse_broker *b, char ***names_out, size_t *n_out)
{
    struct kgroups *kg = kafka_of(b)->groups;
    pulse_status_t st = PULSE_OK;
    size_t n = 0;
    if (!atomic_load(&kg->caught_up))
        return PULSE_UNAVAILABLE; /* still reading the group log (kgroups.h) */
    pthread_mutex_lock(&kg->mu);
    char **names = pulse_calloc(kg->ngroups + 1, sizeof *names);
    for (size_t i = 0; names != NULL && i < kg->ngroups && st == PULSE_OK; i++) {
        if (pulse_kgsm_members(kg->groups[i]->sm) == 0)
            continue;
        if ((names[n] = pulse_strdup(kg->groups[i]->name)) == NULL)
            st = PULSE_NOMEM;
        else
            n++;
    }
    pthread_mutex_unlock(&kg->mu);
    if (names == NULL || st != PULSE_OK) {
        pulse_broker_names_free(names, n);
        return PULSE_NOMEM;
    }
    *names_out = names;
    *n_out = n;
    return PULSE_OK;
}

struct kgdesc {
    struct pulse_group_info *info;
    struct pulse_group_info **out;
};

static void desc_free(void *ctx)
{
    struct kgdesc *d = ctx;
    pulse_group_info_free(d->info);
    pulse_free(d);
}

/* kadmin: the high watermark and lag of every partition. */
static pulse_status_t desc_marks(struct pulse_kafka *k, void *ctx)
{
    struct kgdesc *d = ctx;
    struct pulse_group_info *info = d->info;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)info->nparts + 1);
    int64_t *lo = pulse_calloc(info->nparts + 1, sizeof *lo);
    pulse_status_t st = PULSE_NOMEM;
    if (list != NULL && lo != NULL) {
        for (size_t i = 0; i < info->nparts; i++)
            rd_kafka_topic_partition_list_add(list, info->parts[i].topic, (int32_t)info->parts[i].partition);
        st = info->nparts > 0 ? pulse_kafka_watermarks(k, list, lo) : PULSE_OK;
    }
    for (size_t i = 0; st == PULSE_OK && i < info->nparts; i++) {
        struct pulse_group_part_info *p = &info->parts[i];
        p->high_watermark = list->elems[i].offset;
        int64_t from = p->committed >= 0 ? p->committed : lo[i];
        p->lag = p->high_watermark > from ? p->high_watermark - from : 0;
    }
    if (list != NULL)
        rd_kafka_topic_partition_list_destroy(list);
    pulse_free(lo);
    if (st == PULSE_OK) {
        *d->out = info;
        d->info = NULL;
    }
    return st;
}

pulse_status_t pulse_kafka_group_describe_async(struct pulse_broker *b, const char *group,
                                                struct pulse_group_info **out, pulse_admin_done_fn done, void *arg)
{
    struct pulse_kafka *k = kafka_of(b);
    struct kgroups *kg = k->groups;
    if (!pulse_broker_cname_valid(group))
        return PULSE_INVALID_NAME;
    if (!atomic_load(&kg->caught_up))
        return PULSE_UNAVAILABLE; /* still reading the group log (kgroups.h) */
    struct kgdesc *d = pulse_calloc(1, sizeof *d);
    struct pulse_group_info *info = pulse_calloc(1, sizeof *info);
    if (d == NULL || info == NULL) {
        pulse_free(d);
        pulse_free(info);
        return PULSE_NOMEM;
    }
    d->info = info;
    d->out = out;
    snprintf(info->name, sizeof info->name, "%s", group);
    pthread_mutex_lock(&kg->mu);
    struct kggroup *gr = pulse_kgroups_find(kg, group);
    bool found = gr != NULL && pulse_kgsm_members(gr->sm) > 0;
    pulse_status_t st = found ? pulse_kgsm_describe(gr->sm, pulse_clock_wall_ms(), info) : PULSE_OK;
    pthread_mutex_unlock(&kg->mu);
    if (!found || st != PULSE_OK) {
        desc_free(d);
        if (st != PULSE_OK)
            return st;
        done(arg, PULSE_NOT_FOUND);
        return PULSE_OK;
    }
    return pulse_kafka_admin_submit(k, desc_marks, d, desc_free, done, arg);
}
