/* SPDX-License-Identifier: MIT */
/*
 * h_groups.c - consumer groups over HTTP (docs/API.md "Consumer groups"):
 *
 *   GET    /v1/groups                                   the groups with members
 *   GET    /v1/groups/{group}                           members, partitions, cursors, lag
 *   POST   /v1/groups/{group}/members                   join (201 and the member's view)
 *   DELETE /v1/groups/{group}/members/{member}          leave (204)
 *   POST   /v1/groups/{group}/members/{member}/heartbeat  renew the lease (the view)
 *   POST   /v1/groups/{group}/members/{member}/commit     fenced commit (the view)
 *   GET    /v1/groups/{group}/members/{member}/records    group fetch (h_group_fetch.c)
 *
 * Every decision is the broker's (broker.h "consumer groups"): this file
 * parses, calls and answers. Each answer to a member carries its view
 * (generation and partitions), so a member learns of a rebalance from an
 * ordinary answer. A member the group does not know (it left, its lease
 * ran out, the broker restarted) is answered 409 "rejoin"; a commit the
 * group's fences refuse is 409 "commit_fenced", and nothing was stored.
 * Join, heartbeat and leave are asynchronous calls (async.c): the local
 * backend answers them from memory at once, the Kafka backend once their
 * event is read back from its group log; the commit suspends the
 * connection until the group's cursors are durable, as a cursor commit
 * does; the group description is an asynchronous read.
 */
#include <string.h>

#include "common/alloc.h"
#include "http/http_int.h"

/* ---- shared with the group fetch --------------------------------------- */

json_t *pulse_h_groups_view(const char *group, const struct pulse_group_view *v)
{
    json_t *parts = json_array();
    for (size_t i = 0; parts != NULL && i < v->nparts; i++) {
        if (json_array_append_new(parts, json_pack("{s:s,s:I}", "topic", v->parts[i].topic, "partition",
                                                   (json_int_t)v->parts[i].partition)) != 0) {
            json_decref(parts);
            parts = NULL;
        }
    }
    if (parts == NULL)
        return NULL;
    json_t *doc = json_pack("{s:s,s:s,s:I,s:I,s:o,s:I}", "group", group, "member_id", v->member_id, "generation",
                            (json_int_t)v->generation, "lease_ms", (json_int_t)v->lease_ms, "partitions", parts,
                            "pending_partitions", (json_int_t)v->npending);
    /* Only after a restart (docs/API.md "After a broker restart"). */
    if (doc != NULL && v->hold_ms > 0 && json_object_set_new(doc, "hold_ms", json_integer(v->hold_ms)) != 0) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

bool pulse_h_groups_path(struct pulse_hreq *r, char *member)
{
    const struct pulse_route_param *g = &r->match.group;
    const struct pulse_route_param *m = &r->match.member;
    if (g->p == NULL || g->len > PULSE_NAME_MAX || !pulse_broker_name_valid(g->p, g->len)) {
        pulse_server_reply_error(r, 400, "invalid_name",
                                 "group name must be 1 to 249 characters of [A-Za-z0-9._-], not \".\" or \"..\", "
                                 "not starting with \"__\"");
        return false;
    }
    memcpy(r->consumer, g->p, g->len);
    r->consumer[g->len] = '\0';
    if (member == NULL)
        return true;
    bool ok = m->p != NULL && m->len > 0 && m->len <= PULSE_GROUP_MEMBER_ID_MAX;
    for (size_t i = 0; ok && i < m->len; i++) {
        char c = m->p[i];
        ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
    }
    if (!ok) {
        pulse_server_reply_error(r, 400, "invalid_request",
                                 "a member id is 1 to %d characters of [A-Za-z0-9-], as join answered it",
                                 PULSE_GROUP_MEMBER_ID_MAX);
        return false;
    }
    memcpy(member, m->p, m->len);
    member[m->len] = '\0';
    return true;
}

void pulse_h_groups_reply_error(struct pulse_hreq *r, pulse_status_t st, const char *msg)
{
    if (st == PULSE_REJOIN) {
        pulse_server_reply_error(r, 409, "rejoin",
                                 "group \"%s\" does not know this member (it left, its lease ran out, or the broker "
                                 "restarted): join again with POST /v1/groups/%s/members; the group resumes from its "
                                 "committed cursors",
                                 r->consumer, r->consumer);
        return;
    }
    pulse_server_reply_status(r, st, msg != NULL && msg[0] != '\0' ? msg : NULL);
}

/* Answers 200 (or status) with the member's view; frees what v holds. */
static void reply_view(struct pulse_hreq *r, unsigned status, struct pulse_group_view *v)
{
    json_t *doc = pulse_h_groups_view(r->consumer, v);
    pulse_group_view_fini(v);
    if (doc == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_server_reply_json(r, status, doc);
}

/* ---- join, heartbeat, leave ------------------------------------------------ */

/* r->hstate of a join, heartbeat or leave: the broker completes them
 * asynchronously (pulse_broker_group_*_async; on the Kafka backend each
 * waits for its event in the group log, never on this worker). */
struct gcall_state {
    struct pulse_group_view view; /* written by the broker before the callback */
    char errmsg[256];
};

static void dispose_call(void *hstate)
{
    struct gcall_state *cs = hstate;
    pulse_group_view_fini(&cs->view);
}

static struct gcall_state *call_state(struct pulse_hreq *r)
{
    struct gcall_state *cs = pulse_server_hstate(r, sizeof *cs, dispose_call);
    if (cs == NULL)
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
    return cs;
}

/* Reads "topics" (or "topic") into names (in r->doc); answers 400. */
static bool join_topics(struct pulse_hreq *r, json_t *body, const char **names, size_t *n)
{
    json_t *one = json_object_get(body, "topic");
    json_t *arr = json_object_get(body, "topics");
    if ((one == NULL) == (arr == NULL)) {
        pulse_server_reply_error(r, 400, "invalid_request",
                                 "give the topics to consume: \"topics\" (an array of "
                                 "names) or \"topic\" (one name)");
        return false;
    }
    if (one != NULL) {
        if (!json_is_string(one)) {
            pulse_server_reply_error(r, 400, "invalid_request", "\"topic\" must be a string");
            return false;
        }
        names[0] = json_string_value(one);
        *n = 1;
        return true;
    }
    if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > PULSE_GROUP_MAX_TOPICS) {
        pulse_server_reply_error(r, 400, "invalid_request", "\"topics\" must be an array of 1 to %d names",
                                 PULSE_GROUP_MAX_TOPICS);
        return false;
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *t = json_array_get(arr, i);
        if (!json_is_string(t) || strlen(json_string_value(t)) != json_string_length(t)) {
            pulse_server_reply_error(r, 400, "invalid_request", "topics[%zu] must be a string", i);
            return false;
        }
        names[i] = json_string_value(t);
    }
    *n = json_array_size(arr);
    return true;
}

static void join_resume(struct pulse_hreq *r)
{
    struct gcall_state *cs = r->hstate;
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st == PULSE_TOPIC_NOT_FOUND) {
        pulse_server_reply_error(r, 404, "topic_not_found", "%s", cs->errmsg);
        return;
    }
    if (st == PULSE_TOO_LARGE) {
        pulse_server_reply_error(r, 429, "too_many_requests", "%s", cs->errmsg);
        return;
    }
    if (st != PULSE_OK) {
        pulse_server_reply_status(r, st, cs->errmsg[0] != '\0' ? cs->errmsg : NULL);
        return;
    }
    reply_view(r, 201, &cs->view);
}

static void join(struct pulse_hreq *r)
{
    static const char *const allowed[] = {"topics", "topic", "lease_ms", "start", NULL};
    const char *names[PULSE_GROUP_MAX_TOPICS];
    struct pulse_group_join_spec spec;
    struct gcall_state *cs = call_state(r);
    if (cs == NULL)
        return;
    memset(&spec, 0, sizeof spec);
    json_t *body = pulse_server_body_object(r);
    if (body == NULL || !pulse_server_only_fields(r, body, allowed, "a join"))
        return;
    if (!join_topics(r, body, names, &spec.ntopics))
        return;
    /* A member reads the records of every topic it names. */
    for (size_t i = 0; i < spec.ntopics; i++)
        if (!pulse_server_authorize(r, PULSE_GRANT_READ, names[i]))
            return;
    spec.topics = names;
    if (!pulse_server_int_field(r, body, "lease_ms", 1, INT64_MAX / 1000, &spec.lease_ms, NULL))
        return;
    json_t *start = json_object_get(body, "start");
    if (start != NULL) {
        const char *s = json_is_string(start) ? json_string_value(start) : "";
        if (strcmp(s, "latest") != 0 && strcmp(s, "earliest") != 0) {
            pulse_server_reply_error(r, 400, "invalid_request", "\"start\" must be \"earliest\" or \"latest\"");
            return;
        }
        spec.start_latest = strcmp(s, "latest") == 0;
    }
    pulse_server_call_begin(r, join_resume);
    pulse_status_t st = pulse_broker_group_join_async(r->srv->broker, r->consumer, &spec, &cs->view,
                                                      pulse_server_call_done, r, cs->errmsg, sizeof cs->errmsg);
    pulse_server_call_end(r, st, st == PULSE_OK);
}

static void heartbeat_resume(struct pulse_hreq *r)
{
    struct gcall_state *cs = r->hstate;
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st != PULSE_OK) {
        pulse_h_groups_reply_error(r, st, NULL);
        return;
    }
    reply_view(r, 200, &cs->view);
}

static void heartbeat(struct pulse_hreq *r, const char *member)
{
    struct gcall_state *cs = call_state(r);
    if (cs == NULL)
        return;
    pulse_server_call_begin(r, heartbeat_resume);
    pulse_status_t st = pulse_broker_group_heartbeat_async(r->srv->broker, r->consumer, member, &cs->view,
                                                           pulse_server_call_done, r);
    pulse_server_call_end(r, st, st == PULSE_OK);
}

static void leave_resume(struct pulse_hreq *r)
{
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st != PULSE_OK) {
        pulse_h_groups_reply_error(r, st, NULL);
        return;
    }
    pulse_server_reply_empty(r, 204);
}

static void leave(struct pulse_hreq *r, const char *member)
{
    pulse_server_call_begin(r, leave_resume);
    pulse_status_t st = pulse_broker_group_leave_async(r->srv->broker, r->consumer, member, pulse_server_call_done, r);
    pulse_server_call_end(r, st, st == PULSE_OK);
}

/* ---- commit ---------------------------------------------------------------- */

/* r->hstate of a group commit. */
struct gcommit_state {
    struct pulse_group_partition *pos; /* in the pool */
    size_t n;
    struct pulse_group_view view; /* written by the broker before the callback */
    char errmsg[256];
};

static void dispose_commit(void *hstate)
{
    struct gcommit_state *cs = hstate;
    pulse_group_view_fini(&cs->view);
}

static void commit_resume(struct pulse_hreq *r)
{
    struct gcommit_state *cs = r->hstate;
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st == PULSE_RANGE) {
        pulse_server_reply_error(r, 416, "offset_out_of_range", "%s", cs->errmsg);
        return;
    }
    if (st != PULSE_OK) {
        pulse_h_groups_reply_error(r, st, cs->errmsg);
        return;
    }
    json_t *doc = pulse_h_groups_view(r->consumer, &cs->view);
    json_t *offs = json_array();
    for (size_t i = 0; doc != NULL && offs != NULL && i < cs->n; i++) {
        if (json_array_append_new(offs, json_pack("{s:s,s:I,s:I}", "topic", cs->pos[i].topic, "partition",
                                                  (json_int_t)cs->pos[i].partition, "offset",
                                                  (json_int_t)cs->pos[i].offset)) != 0) {
            json_decref(offs);
            offs = NULL;
        }
    }
    if (doc == NULL || offs == NULL || json_object_set_new(doc, "committed", offs) != 0) {
        json_decref(doc);
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_server_reply_json(r, 200, doc);
}

/* Reads the body's offsets into cs; answers 400/413 and returns false. */
static bool commit_parse(struct pulse_hreq *r, json_t *body, struct gcommit_state *cs)
{
    static const char *const allowed[] = {"topic", "partition", "offset", NULL};
    json_t *arr = json_object_get(body, "offsets");
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        pulse_server_reply_error(r, 400, "invalid_request", "\"offsets\" must be a non-empty array");
        return false;
    }
    cs->n = json_array_size(arr);
    if (cs->n > (size_t)r->srv->cfg->server.max_records_per_request) {
        pulse_server_reply_error(r, 413, "payload_too_large", "too many offsets in one commit");
        return false;
    }
    cs->pos = pulse_server_palloc(r, cs->n * sizeof *cs->pos);
    if (cs->pos == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return false;
    }
    for (size_t i = 0; i < cs->n; i++) {
        json_t *c = json_array_get(arr, i);
        if (!json_is_object(c) || !pulse_server_only_fields(r, c, allowed, "an offset"))
            goto bad;
        json_t *t = json_object_get(c, "topic");
        json_t *p = json_object_get(c, "partition");
        json_t *o = json_object_get(c, "offset");
        if (!json_is_string(t) || !json_is_integer(p) || !json_is_integer(o) || json_integer_value(p) < 0 ||
            json_integer_value(p) > (json_int_t)UINT32_MAX || json_integer_value(o) < 0)
            goto bad;
        size_t tlen = json_string_length(t);
        if (strlen(json_string_value(t)) != tlen || !pulse_broker_name_valid(json_string_value(t), tlen))
            goto bad;
        memcpy(cs->pos[i].topic, json_string_value(t), tlen + 1);
        cs->pos[i].partition = (uint32_t)json_integer_value(p);
        cs->pos[i].offset = (int64_t)json_integer_value(o);
        continue;
    bad:
        if (r->status == 0)
            pulse_server_reply_error(r, 400, "invalid_request",
                                     "offsets[%zu] needs \"topic\" (a topic name), \"partition\" and \"offset\" "
                                     "(non-negative integers)",
                                     i);
        return false;
    }
    return true;
}

static void commit(struct pulse_hreq *r, const char *member)
{
    static const char *const allowed[] = {"generation", "offsets", NULL};
    struct gcommit_state *cs = pulse_server_hstate(r, sizeof *cs, dispose_commit);
    if (cs == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    json_t *body = pulse_server_body_object(r);
    if (body == NULL || !pulse_server_only_fields(r, body, allowed, "a group commit"))
        return;
    json_t *g = json_object_get(body, "generation");
    if (!json_is_integer(g) || json_integer_value(g) < 0) {
        pulse_server_reply_error(r, 400, "invalid_request",
                                 "\"generation\" is required: the generation of the answer that delivered the records");
        return;
    }
    if (!commit_parse(r, body, cs))
        return;
    /* Suspended first: the callback may come before the call returns. */
    pulse_server_suspend(r, commit_resume);
    pulse_status_t st = pulse_broker_group_commit_async(r->srv->broker, r->consumer, member,
                                                        (uint64_t)json_integer_value(g), cs->pos, cs->n, &cs->view,
                                                        pulse_server_on_done, r, cs->errmsg, sizeof cs->errmsg);
    if (st != PULSE_OK)
        pulse_server_wake(r, st);
}

/* ---- visibility ------------------------------------------------------------- */

static void list(struct pulse_hreq *r)
{
    char **names = NULL;
    size_t n = 0;
    pulse_status_t st = pulse_broker_group_list(r->srv->broker, &names, &n);
    if (st != PULSE_OK) {
        pulse_server_reply_status(r, st, NULL);
        return;
    }
    pulse_server_reply_names(r, "groups", names, n);
}

/* r->hstate of a group description. */
struct describe_state {
    struct pulse_group_info *info;
};

static void dispose_describe(void *hstate)
{
    struct describe_state *ds = hstate;
    pulse_group_info_free(ds->info);
    ds->info = NULL;
}

/* A member id authorises the member's calls: only tokens with admin:* see
 * ids, the others their labels (docs/API.md "Group details"). */
static json_t *member_object(const struct pulse_group_member_info *m, bool ids)
{
    json_t *topics = json_array();
    for (size_t i = 0; topics != NULL && i < m->ntopics; i++) {
        if (json_array_append_new(topics, json_string(m->topics[i])) != 0) {
            json_decref(topics);
            topics = NULL;
        }
    }
    if (topics == NULL)
        return NULL;
    return json_pack("{s:s,s:o,s:I,s:I,s:I,s:I,s:I}", "member_id", ids ? m->member_id : m->label, "topics", topics,
                     "lease_ms", (json_int_t)m->lease_ms, "lease_expires_in_ms", (json_int_t)m->lease_expires_in_ms,
                     "generation", (json_int_t)m->generation, "partitions", (json_int_t)m->nparts, "joined_at_ms",
                     (json_int_t)m->joined_at_ms);
}

static json_t *part_object(const struct pulse_group_part_info *p, bool ids)
{
    const char *owner = ids ? p->owner : p->owner_label;
    const char *assigned = ids ? p->assigned : p->assigned_label;
    json_t *o = json_pack("{s:s,s:I,s:I,s:I}", "topic", p->topic, "partition", (json_int_t)p->partition,
                          "high_watermark", (json_int_t)p->high_watermark, "lag", (json_int_t)p->lag);
    if (o == NULL)
        return NULL;
    int rc = json_object_set_new(o, "owner", owner[0] != '\0' ? json_string(owner) : json_null());
    rc |= json_object_set_new(o, "assigned_to", assigned[0] != '\0' ? json_string(assigned) : json_null());
    rc |= json_object_set_new(o, "committed", p->committed >= 0 ? json_integer(p->committed) : json_null());
    if (rc != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static void describe_resume(struct pulse_hreq *r)
{
    struct describe_state *ds = r->hstate;
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st == PULSE_NOT_FOUND) {
        pulse_server_reply_error(r, 404, "group_not_found", "group \"%s\" has no members", r->consumer);
        return;
    }
    if (st != PULSE_OK) {
        pulse_server_reply_status(r, st, NULL);
        return;
    }
    const struct pulse_group_info *info = ds->info;
    bool ids = pulse_server_may(r, PULSE_GRANT_BROKER, NULL);
    json_t *members = json_array();
    json_t *parts = json_array();
    for (size_t i = 0; members != NULL && i < info->nmembers; i++)
        if (json_array_append_new(members, member_object(&info->members[i], ids)) != 0)
            goto oom;
    for (size_t i = 0; parts != NULL && i < info->nparts; i++)
        if (json_array_append_new(parts, part_object(&info->parts[i], ids)) != 0)
            goto oom;
    if (members == NULL || parts == NULL)
        goto oom;
    pulse_server_reply_json(r, 200,
                            json_pack("{s:s,s:I,s:I,s:o,s:o}", "group", info->name, "generation",
                                      (json_int_t)info->generation, "rebalances", (json_int_t)info->rebalances,
                                      "members", members, "partitions", parts));
    return;
oom:
    json_decref(members);
    json_decref(parts);
    pulse_server_reply_status(r, PULSE_NOMEM, NULL);
}

static void describe(struct pulse_hreq *r)
{
    struct describe_state *ds = pulse_server_hstate(r, sizeof *ds, dispose_describe);
    if (ds == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_server_call_begin(r, describe_resume);
    pulse_status_t st = pulse_broker_group_describe_async(r->srv->broker, r->consumer, &ds->info,
                                                          pulse_server_call_done, r);
    pulse_server_call_end(r, st, st == PULSE_OK);
}

/* ---- routing ------------------------------------------------------------------ */

void pulse_h_groups(struct pulse_hreq *r)
{
    char member[PULSE_GROUP_MEMBER_ID_MAX + 1];
    enum pulse_route route = r->match.route;
    if (route == PULSE_ROUTE_GROUPS) {
        list(r);
        return;
    }
    bool with_member = route != PULSE_ROUTE_GROUP && route != PULSE_ROUTE_GROUP_MEMBERS;
    if (!pulse_h_groups_path(r, with_member ? member : NULL))
        return;
    switch (route) {
    case PULSE_ROUTE_GROUP:
        describe(r);
        return;
    case PULSE_ROUTE_GROUP_MEMBERS:
        join(r);
        return;
    case PULSE_ROUTE_GROUP_MEMBER:
        leave(r, member);
        return;
    case PULSE_ROUTE_GROUP_HEARTBEAT:
        heartbeat(r, member);
        return;
    case PULSE_ROUTE_GROUP_COMMIT:
        commit(r, member);
        return;
    case PULSE_ROUTE_GROUP_RECORDS:
        pulse_h_group_fetch(r);
        return;
    default:
        pulse_server_reply_error(r, 404, "not_found", "no such resource");
        return;
    }
}
