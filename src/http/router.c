/* SPDX-License-Identifier: MIT */
/*
 * router.c - see router.h. Paths are matched segment by segment against a
 * small table; "{x}" segments capture any non-empty segment. One trailing
 * slash is tolerated ("/v1/topics/" is "/v1/topics", as a user typing a
 * path expects); a doubled slash (an empty segment) never matches.
 */
#include "http/router.h"

#include <stdio.h>
#include <string.h>

#define M(x) (1u << PULSE_METHOD_##x)

struct route_def {
    enum pulse_route route;
    const char *tmpl;
    unsigned methods;
    /* Query parameters per method (NULL-terminated); NULL: none. */
    const char *const *query[PULSE_METHOD_HEAD]; /* HEAD and OPTIONS: GET's, none */
};

/* The one list of query parameters of the API (api/openapi.yaml documents
 * the same). A parameter a route does not list is a 400, so a misspelt one
 * ("ofset") can never be silently ignored. */
static const char *const fetch_query[] = {"offset", "consumer",  "max_records", "max_bytes",     "wait_ms",
                                          "format", "timestamp", "from",        "last_event_id", NULL};
static const char *const publish_query[] = {"key", "partition", NULL};
static const char *const group_fetch_query[] = {"max_records", "max_bytes", "max_wait_ms", "resume", NULL};
/* Event streams (h_stream.c) and topic-wide reads (h_topicread.c). The
 * fetch route takes the stream's parameters too: Accept picks the form. */
static const char *const events_query[] = {"from", "offset", "timestamp", "positions", "last_event_id", NULL};
static const char *const topic_read_query[] = {"positions",   "consumer",  "offset",  "timestamp",
                                               "max_records", "max_bytes", "wait_ms", NULL};
/* Smaller answers with many partitions: /metrics summed by topic, a topic
 * list without each partition's stats (h_ops.c, h_topics.c). */
static const char *const metrics_query[] = {"per", NULL};
static const char *const topics_query[] = {"partition_stats", NULL};

/* One route a row. */
/* clang-format off */
static const struct route_def routes[PULSE_ROUTE_NONE] = {
    {PULSE_ROUTE_HEALTHZ, "/healthz", M(GET), {NULL}},
    {PULSE_ROUTE_READYZ, "/readyz", M(GET), {NULL}},
    {PULSE_ROUTE_METRICS, "/metrics", M(GET), {[PULSE_METHOD_GET] = metrics_query}},
    {PULSE_ROUTE_OPENAPI, "/openapi.yaml", M(GET), {NULL}},
    {PULSE_ROUTE_BROKER, "/v1/broker", M(GET), {NULL}},
    {PULSE_ROUTE_TOPICS, "/v1/topics", M(GET) | M(POST), {[PULSE_METHOD_GET] = topics_query}},
    {PULSE_ROUTE_TOPIC, "/v1/topics/{topic}", M(GET) | M(PATCH) | M(DELETE), {NULL}},
    {PULSE_ROUTE_PUBLISH, "/v1/topics/{topic}/records", M(GET) | M(POST),
     {[PULSE_METHOD_GET] = topic_read_query, [PULSE_METHOD_POST] = publish_query}},
    {PULSE_ROUTE_FETCH, "/v1/topics/{topic}/partitions/{partition}/records", M(GET),
     {[PULSE_METHOD_GET] = fetch_query}},
    {PULSE_ROUTE_CONSUMERS, "/v1/consumers", M(GET), {NULL}},
    {PULSE_ROUTE_CONSUMER, "/v1/consumers/{consumer}", M(DELETE), {NULL}},
    {PULSE_ROUTE_CURSORS, "/v1/consumers/{consumer}/cursors", M(GET) | M(POST), {NULL}},
    {PULSE_ROUTE_CURSOR, "/v1/consumers/{consumer}/cursors/{topic}/{partition}", M(GET) | M(PUT), {NULL}},
    {PULSE_ROUTE_PARTITIONS, "/v1/topics/{topic}/partitions", M(GET), {NULL}},
    {PULSE_ROUTE_PARTITION, "/v1/topics/{topic}/partitions/{partition}", M(GET), {NULL}},
    {PULSE_ROUTE_DASHBOARD, "/", M(GET), {NULL}},
    {PULSE_ROUTE_ASSET, "/ui/{asset}", M(GET), {NULL}},
    {PULSE_ROUTE_GROUPS, "/v1/groups", M(GET), {NULL}},
    {PULSE_ROUTE_GROUP, "/v1/groups/{group}", M(GET), {NULL}},
    {PULSE_ROUTE_GROUP_MEMBERS, "/v1/groups/{group}/members", M(POST), {NULL}},
    {PULSE_ROUTE_GROUP_MEMBER, "/v1/groups/{group}/members/{member}", M(DELETE), {NULL}},
    {PULSE_ROUTE_GROUP_HEARTBEAT, "/v1/groups/{group}/members/{member}/heartbeat", M(POST), {NULL}},
    {PULSE_ROUTE_GROUP_RECORDS, "/v1/groups/{group}/members/{member}/records", M(GET),
     {[PULSE_METHOD_GET] = group_fetch_query}},
    {PULSE_ROUTE_GROUP_COMMIT, "/v1/groups/{group}/members/{member}/commit", M(POST), {NULL}},
    {PULSE_ROUTE_EVENTS, "/v1/topics/{topic}/events", M(GET), {[PULSE_METHOD_GET] = events_query}},
};
/* clang-format on */

/*
 * The grant every route and method needs (router.h, docs/Security.md): one
 * table, beside the routes, indexed by route and method. A route missing
 * here is UNSET, which the server treats as admin:* and check_auth fails.
 */
#define G(k, s)                            \
    {                                      \
        PULSE_GRANT_##k, PULSE_SUBJECT_##s \
    }
static const struct pulse_route_grant route_grants[PULSE_ROUTE_NONE][PULSE_METHOD_HEAD] = {
    [PULSE_ROUTE_HEALTHZ] = {[PULSE_METHOD_GET] = G(NONE, NONE)},
    [PULSE_ROUTE_READYZ] = {[PULSE_METHOD_GET] = G(NONE, NONE)},
    [PULSE_ROUTE_METRICS] = {[PULSE_METHOD_GET] = G(PUBLIC, NONE)},
    [PULSE_ROUTE_OPENAPI] = {[PULSE_METHOD_GET] = G(PUBLIC, NONE)},
    [PULSE_ROUTE_DASHBOARD] = {[PULSE_METHOD_GET] = G(PUBLIC, NONE)},
    [PULSE_ROUTE_ASSET] = {[PULSE_METHOD_GET] = G(PUBLIC, NONE)},
    [PULSE_ROUTE_BROKER] = {[PULSE_METHOD_GET] = G(TOKEN, NONE)},
    [PULSE_ROUTE_TOPICS] = {[PULSE_METHOD_GET] = G(TOKEN, NONE), [PULSE_METHOD_POST] = G(ADMIN, BODY)},
    [PULSE_ROUTE_TOPIC] = {[PULSE_METHOD_GET] = G(READ, TOPIC),
                           [PULSE_METHOD_PATCH] = G(ADMIN, TOPIC),
                           [PULSE_METHOD_DELETE] = G(ADMIN, TOPIC)},
    /* GET is the topic-wide read; with ?consumer= the handler also needs
     * commit on that consumer (h_topicread.c). */
    [PULSE_ROUTE_PUBLISH] = {[PULSE_METHOD_GET] = G(READ, TOPIC), [PULSE_METHOD_POST] = G(WRITE, TOPIC)},
    [PULSE_ROUTE_EVENTS] = {[PULSE_METHOD_GET] = G(READ, TOPIC)},
    /* With ?consumer= the handler also needs commit on that consumer. */
    [PULSE_ROUTE_FETCH] = {[PULSE_METHOD_GET] = G(READ, TOPIC)},
    [PULSE_ROUTE_PARTITIONS] = {[PULSE_METHOD_GET] = G(READ, TOPIC)},
    [PULSE_ROUTE_PARTITION] = {[PULSE_METHOD_GET] = G(READ, TOPIC)},
    [PULSE_ROUTE_CONSUMERS] = {[PULSE_METHOD_GET] = G(TOKEN, NONE)},
    [PULSE_ROUTE_CONSUMER] = {[PULSE_METHOD_DELETE] = G(COMMIT, CONSUMER)},
    [PULSE_ROUTE_CURSORS] = {[PULSE_METHOD_GET] = G(COMMIT, CONSUMER), [PULSE_METHOD_POST] = G(COMMIT, CONSUMER)},
    [PULSE_ROUTE_CURSOR] = {[PULSE_METHOD_GET] = G(COMMIT, CONSUMER), [PULSE_METHOD_PUT] = G(COMMIT, CONSUMER)},
    [PULSE_ROUTE_GROUPS] = {[PULSE_METHOD_GET] = G(TOKEN, NONE)},
    [PULSE_ROUTE_GROUP] = {[PULSE_METHOD_GET] = G(COMMIT, GROUP)},
    /* A join also needs read on every topic it names (h_groups.c). */
    [PULSE_ROUTE_GROUP_MEMBERS] = {[PULSE_METHOD_POST] = G(COMMIT, GROUP)},
    [PULSE_ROUTE_GROUP_MEMBER] = {[PULSE_METHOD_DELETE] = G(COMMIT, GROUP)},
    [PULSE_ROUTE_GROUP_HEARTBEAT] = {[PULSE_METHOD_POST] = G(COMMIT, GROUP)},
    [PULSE_ROUTE_GROUP_RECORDS] = {[PULSE_METHOD_GET] = G(COMMIT, GROUP)},
    [PULSE_ROUTE_GROUP_COMMIT] = {[PULSE_METHOD_POST] = G(COMMIT, GROUP)},
};
#undef G

static const struct pulse_route_grant grant_unset = {PULSE_GRANT_UNSET, PULSE_SUBJECT_NONE};
static const struct pulse_route_grant grant_none = {PULSE_GRANT_NONE, PULSE_SUBJECT_NONE};

const struct pulse_route_grant *pulse_router_grant(enum pulse_route r, enum pulse_method m)
{
    if (m == PULSE_METHOD_OPTIONS)
        return &grant_none; /* a preflight carries no Authorization */
    m = pulse_router_base_method(m);
    if ((unsigned)r >= PULSE_ROUTE_NONE || (unsigned)m >= PULSE_METHOD_HEAD)
        return &grant_unset;
    return &route_grants[r][m];
}

const char *pulse_router_grant_name(enum pulse_grant_kind kind)
{
    switch (kind) {
    case PULSE_GRANT_NONE:
        return "none";
    case PULSE_GRANT_PUBLIC:
        return "public";
    case PULSE_GRANT_TOKEN:
        return "token";
    case PULSE_GRANT_READ:
        return "read";
    case PULSE_GRANT_WRITE:
        return "write";
    case PULSE_GRANT_ADMIN:
        return "admin";
    case PULSE_GRANT_COMMIT:
        return "commit";
    case PULSE_GRANT_BROKER:
        return "admin:*";
    case PULSE_GRANT_UNSET:
        break;
    }
    return "unset";
}

static const char *const method_names[PULSE_METHOD_COUNT] = {"GET",    "POST", "PUT",     "PATCH",
                                                             "DELETE", "HEAD", "OPTIONS", "OTHER"};

/* Matches path against one template; fills params on success. */
static bool match_one(const char *tmpl, const char *path, struct pulse_route_match *m)
{
    struct pulse_route_match tmp;
    memset(&tmp, 0, sizeof tmp);
    /* The root has no segment to match: only "/" itself is it. */
    if (strcmp(tmpl, "/") == 0) {
        if (strcmp(path, "/") != 0)
            return false;
        tmp.route = m->route;
        *m = tmp;
        return true;
    }
    const char *t = tmpl;
    const char *p = path;
    while (*t != '\0') {
        if (*t != '/' || *p != '/')
            return false;
        t++;
        p++;
        size_t tl = strcspn(t, "/");
        size_t pl = strcspn(p, "/");
        if (pl == 0)
            return false;
        if (t[0] == '{') {
            struct pulse_route_param *slot = NULL;
            if (strncmp(t, "{topic}", tl) == 0)
                slot = &tmp.topic;
            else if (strncmp(t, "{partition}", tl) == 0)
                slot = &tmp.partition;
            else if (strncmp(t, "{asset}", tl) == 0)
                slot = &tmp.asset;
            else if (strncmp(t, "{group}", tl) == 0)
                slot = &tmp.group;
            else if (strncmp(t, "{member}", tl) == 0)
                slot = &tmp.member;
            else
                slot = &tmp.consumer;
            slot->p = p;
            slot->len = pl;
        } else if (tl != pl || strncmp(t, p, tl) != 0) {
            return false;
        }
        t += tl;
        p += pl;
    }
    if (*p == '/' && p[1] == '\0')
        p++; /* one trailing slash */
    if (*p != '\0')
        return false;
    tmp.route = m->route;
    *m = tmp;
    return true;
}

pulse_status_t pulse_router_match(const char *path, struct pulse_route_match *m)
{
    memset(m, 0, sizeof *m);
    for (size_t i = 0; i < PULSE_ROUTE_NONE; i++) {
        m->route = routes[i].route;
        if (match_one(routes[i].tmpl, path, m))
            return PULSE_OK;
    }
    memset(m, 0, sizeof *m);
    m->route = PULSE_ROUTE_NONE;
    return PULSE_NOT_FOUND;
}

enum pulse_method pulse_router_method(const char *method)
{
    for (int i = 0; i < PULSE_METHOD_OTHER; i++)
        if (strcmp(method, method_names[i]) == 0)
            return (enum pulse_method)i;
    return PULSE_METHOD_OTHER;
}

const char *pulse_router_method_name(enum pulse_method m)
{
    return (unsigned)m < PULSE_METHOD_COUNT ? method_names[m] : "OTHER";
}

const char *pulse_router_template(enum pulse_route r)
{
    return (unsigned)r < PULSE_ROUTE_NONE ? routes[r].tmpl : "unmatched";
}

enum pulse_method pulse_router_base_method(enum pulse_method m)
{
    return m == PULSE_METHOD_HEAD ? PULSE_METHOD_GET : m;
}

bool pulse_router_is_write(enum pulse_method m)
{
    return m == PULSE_METHOD_POST || m == PULSE_METHOD_PUT || m == PULSE_METHOD_PATCH || m == PULSE_METHOD_DELETE;
}

bool pulse_router_allows(enum pulse_route r, enum pulse_method m)
{
    if ((unsigned)r >= PULSE_ROUTE_NONE || (unsigned)m >= PULSE_METHOD_OTHER)
        return false;
    if (m == PULSE_METHOD_OPTIONS)
        return true;
    return (routes[r].methods & (1u << pulse_router_base_method(m))) != 0;
}

const char *pulse_router_request_headers(enum pulse_route r)
{
    bool body = false;
    for (int i = PULSE_METHOD_POST; i < PULSE_METHOD_DELETE; i++)
        body = body || pulse_router_allows(r, (enum pulse_method)i);
    bool get = pulse_router_allows(r, PULSE_METHOD_GET);
    /* Authorization: the dashboard's bearer token; Last-Event-ID: a
     * stream resumed by a reader that can set headers (fetch, not
     * EventSource). */
    /* Idempotency-Key: a publish that is safe to retry (h_publish.c); the
     * same route's GET is the topic-wide read (h_topicread.c). */
    if (r == PULSE_ROUTE_PUBLISH && body && get)
        return "Accept, Authorization, Content-Type, Content-Encoding, Idempotency-Key, Last-Event-ID, X-Request-Id";
    if (r == PULSE_ROUTE_PUBLISH && body)
        return "Accept, Authorization, Content-Type, Content-Encoding, Idempotency-Key, X-Request-Id";
    if (body && get)
        return "Accept, Authorization, Content-Type, Content-Encoding, Last-Event-ID, X-Request-Id";
    if (body)
        return "Accept, Authorization, Content-Type, Content-Encoding, X-Request-Id";
    if (get)
        return "Accept, Authorization, Last-Event-ID, X-Request-Id";
    return "Accept, Authorization, X-Request-Id";
}

void pulse_router_allow_header(enum pulse_route r, char *buf, size_t len)
{
    size_t used = 0;
    if (len == 0)
        return;
    buf[0] = '\0';
    for (int i = 0; i < PULSE_METHOD_OTHER; i++) {
        if (!pulse_router_allows(r, (enum pulse_method)i))
            continue;
        int n = snprintf(buf + used, len - used, "%s%s", used == 0 ? "" : ", ", method_names[i]);
        if (n < 0 || (size_t)n >= len - used)
            return;
        used += (size_t)n;
    }
}

int pulse_router_query_index(enum pulse_route r, enum pulse_method m, const char *name)
{
    m = pulse_router_base_method(m);
    if ((unsigned)r >= PULSE_ROUTE_NONE || (unsigned)m >= PULSE_METHOD_HEAD || routes[r].query[m] == NULL)
        return -1;
    const char *const *list = routes[r].query[m];
    for (int i = 0; i < PULSE_ROUTER_MAX_QUERY && list[i] != NULL; i++)
        if (strcmp(list[i], name) == 0)
            return i;
    return -1;
}
