/* SPDX-License-Identifier: MIT */
/*
 * router.c - see router.h. Paths are matched segment by segment against a
 * small table; "{x}" segments capture any non-empty segment. Empty segments
 * (a trailing or doubled slash) never match, so "/v1/topics/" is a 404
 * rather than a silent alias.
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
    const char *const *query[PULSE_METHOD_OTHER];
};

/* The one list of query parameters of the API (api/openapi.yaml documents
 * the same). A parameter a route does not list is a 400, so a misspelt one
 * ("ofset") can never be silently ignored. */
static const char *const fetch_query[] = {"offset", "consumer", "max_records", "max_bytes", "wait_ms", "format", NULL};
static const char *const publish_query[] = {"key", "partition", NULL};

/* One route a row. */
/* clang-format off */
static const struct route_def routes[PULSE_ROUTE_NONE] = {
    {PULSE_ROUTE_HEALTHZ, "/healthz", M(GET), {NULL}},
    {PULSE_ROUTE_READYZ, "/readyz", M(GET), {NULL}},
    {PULSE_ROUTE_METRICS, "/metrics", M(GET), {NULL}},
    {PULSE_ROUTE_OPENAPI, "/openapi.yaml", M(GET), {NULL}},
    {PULSE_ROUTE_BROKER, "/v1/broker", M(GET), {NULL}},
    {PULSE_ROUTE_TOPICS, "/v1/topics", M(GET) | M(POST), {NULL}},
    {PULSE_ROUTE_TOPIC, "/v1/topics/{topic}", M(GET) | M(PATCH) | M(DELETE), {NULL}},
    {PULSE_ROUTE_PUBLISH, "/v1/topics/{topic}/records", M(POST), {[PULSE_METHOD_POST] = publish_query}},
    {PULSE_ROUTE_FETCH, "/v1/topics/{topic}/partitions/{partition}/records", M(GET),
     {[PULSE_METHOD_GET] = fetch_query}},
    {PULSE_ROUTE_CONSUMERS, "/v1/consumers", M(GET), {NULL}},
    {PULSE_ROUTE_CONSUMER, "/v1/consumers/{consumer}", M(DELETE), {NULL}},
    {PULSE_ROUTE_CURSORS, "/v1/consumers/{consumer}/cursors", M(GET) | M(POST), {NULL}},
    {PULSE_ROUTE_CURSOR, "/v1/consumers/{consumer}/cursors/{topic}/{partition}", M(GET) | M(PUT), {NULL}},
};
/* clang-format on */

static const char *const method_names[PULSE_METHOD_COUNT] = {"GET", "POST", "PUT", "PATCH", "DELETE", "OTHER"};

/* Matches path against one template; fills params on success. */
static bool match_one(const char *tmpl, const char *path, struct pulse_route_match *m)
{
    struct pulse_route_match tmp;
    memset(&tmp, 0, sizeof tmp);
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

bool pulse_router_allows(enum pulse_route r, enum pulse_method m)
{
    return (unsigned)r < PULSE_ROUTE_NONE && (unsigned)m < PULSE_METHOD_OTHER && (routes[r].methods & (1u << m));
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
    if ((unsigned)r >= PULSE_ROUTE_NONE || (unsigned)m >= PULSE_METHOD_OTHER || routes[r].query[m] == NULL)
        return -1;
    const char *const *list = routes[r].query[m];
    for (int i = 0; i < PULSE_ROUTER_MAX_QUERY && list[i] != NULL; i++)
        if (strcmp(list[i], name) == 0)
            return i;
    return -1;
}
