/* SPDX-License-Identifier: MIT */
/*
 * router.h - maps a request path to one of the API's route templates and
 * its path parameters, and knows which methods each route allows (for 405
 * and its Allow header) and which query parameters each route and method
 * accepts (anything else is refused with 400 before a handler runs).
 * Templates double as the metrics "route" label, so a raw path never
 * becomes a label value.
 *
 * Thread: any. Locks: none (static tables).
 */
#ifndef PULSE_HTTP_ROUTER_H
#define PULSE_HTTP_ROUTER_H

#include <stdbool.h>
#include <stddef.h>

#include "common/status.h"

enum pulse_route {
    PULSE_ROUTE_HEALTHZ,
    PULSE_ROUTE_READYZ,
    PULSE_ROUTE_METRICS,
    PULSE_ROUTE_OPENAPI,
    PULSE_ROUTE_BROKER,
    PULSE_ROUTE_TOPICS,
    PULSE_ROUTE_TOPIC,
    PULSE_ROUTE_PUBLISH,
    PULSE_ROUTE_FETCH,
    PULSE_ROUTE_CONSUMERS,
    PULSE_ROUTE_CONSUMER,
    PULSE_ROUTE_CURSORS,
    PULSE_ROUTE_CURSOR,
    PULSE_ROUTE_PARTITIONS,
    PULSE_ROUTE_PARTITION,
    PULSE_ROUTE_DASHBOARD, /* "/": the dashboard's page */
    PULSE_ROUTE_ASSET,     /* "/ui/{asset}": the files it loads */
    PULSE_ROUTE_GROUPS,
    PULSE_ROUTE_GROUP,
    PULSE_ROUTE_GROUP_MEMBERS,
    PULSE_ROUTE_GROUP_MEMBER,
    PULSE_ROUTE_GROUP_HEARTBEAT,
    PULSE_ROUTE_GROUP_RECORDS,
    PULSE_ROUTE_GROUP_COMMIT,
    PULSE_ROUTE_EVENTS, /* GET /v1/topics/{topic}/events: the topic-wide event stream */
    PULSE_ROUTE_NONE    /* unknown path; also the number of routes */
};

enum pulse_method {
    PULSE_METHOD_GET = 0,
    PULSE_METHOD_POST,
    PULSE_METHOD_PUT,
    PULSE_METHOD_PATCH,
    PULSE_METHOD_DELETE,
    /* Every route that takes GET takes HEAD (the same answer without its
     * body: libmicrohttpd leaves the body out), and every route takes
     * OPTIONS (answered from this table, never by a handler). */
    PULSE_METHOD_HEAD,
    PULSE_METHOD_OPTIONS,
    PULSE_METHOD_OTHER,
    PULSE_METHOD_COUNT
};

/* A path parameter: a slice of the request path (borrowed from it). */
struct pulse_route_param {
    const char *p;
    size_t len;
};

struct pulse_route_match {
    enum pulse_route route;
    struct pulse_route_param topic;
    struct pulse_route_param partition;
    struct pulse_route_param consumer;
    struct pulse_route_param asset;
    struct pulse_route_param group; /* consumer groups */
    struct pulse_route_param member;
};

/* PULSE_OK with *m filled, or PULSE_NOT_FOUND (m->route = PULSE_ROUTE_NONE). */
pulse_status_t pulse_router_match(const char *path, struct pulse_route_match *m);

/* "GET" -> PULSE_METHOD_GET; anything unknown -> OTHER. */
enum pulse_method pulse_router_method(const char *method);

/* Method name for labels ("GET", ..., "OTHER"). */
const char *pulse_router_method_name(enum pulse_method m);

/* The route template, e.g. "/v1/topics/{topic}"; "unmatched" for NONE. */
const char *pulse_router_template(enum pulse_route r);

/* True when route r serves method m (HEAD where GET is, OPTIONS always). */
bool pulse_router_allows(enum pulse_route r, enum pulse_method m);

/* Writes the Allow header value ("GET, HEAD, POST, OPTIONS") for r into
 * buf (truncated to len - 1 bytes; PULSE_ROUTER_ALLOW_MAX always fits). */
#define PULSE_ROUTER_ALLOW_MAX 64
void pulse_router_allow_header(enum pulse_route r, char *buf, size_t len);

/* The method whose handler and query parameters serve m: GET for HEAD,
 * m itself otherwise. */
enum pulse_method pulse_router_base_method(enum pulse_method m);

/* True for the methods that change state (POST, PUT, PATCH, DELETE). */
bool pulse_router_is_write(enum pulse_method m);

/* The request headers a browser may send to route r beyond the ones it
 * always may (the Access-Control-Allow-Headers value of a preflight):
 * Accept, Authorization and X-Request-Id everywhere, Content-Type and
 * Content-Encoding where the route takes a body, Last-Event-ID where it
 * takes GET, Idempotency-Key on the publish route. A static string. */
const char *pulse_router_request_headers(enum pulse_route r);

/*
 * What a request needs to be let in when auth.token-file is set
 * (docs/Security.md). PULSE_GRANT_UNSET is what a route left out of the
 * grant table gets: it is treated as broker-wide administration (admin:*)
 * at run time, and tests/unit/http/check_auth.c fails on it, so a new route
 * cannot be forgotten.
 */
enum pulse_grant_kind {
    PULSE_GRANT_UNSET = 0,
    PULSE_GRANT_NONE,   /* never a token (/healthz, /readyz, OPTIONS) */
    PULSE_GRANT_PUBLIC, /* no token when auth.public lists the route, else any valid token */
    PULSE_GRANT_TOKEN,  /* any valid token; lists show only what its grants cover */
    PULSE_GRANT_READ,   /* read:PATTERN on the topic */
    PULSE_GRANT_WRITE,  /* write:PATTERN on the topic */
    PULSE_GRANT_ADMIN,  /* admin:PATTERN on the topic */
    PULSE_GRANT_COMMIT, /* commit:PATTERN on the consumer or group */
    PULSE_GRANT_BROKER  /* admin:* (broker-wide administration) */
};

/* Which path parameter names what the grant must cover. BODY: the handler
 * checks the name it reads from the body (a topic create); NONE: none. */
enum pulse_grant_subject {
    PULSE_SUBJECT_NONE = 0,
    PULSE_SUBJECT_TOPIC,
    PULSE_SUBJECT_CONSUMER,
    PULSE_SUBJECT_GROUP,
    PULSE_SUBJECT_BODY
};

struct pulse_route_grant {
    enum pulse_grant_kind kind;
    enum pulse_grant_subject subject;
};

/* The grant route r needs for method m (HEAD: GET's; OPTIONS: NONE).
 * Never NULL: a route or method out of range gets an UNSET entry. */
const struct pulse_route_grant *pulse_router_grant(enum pulse_route r, enum pulse_method m);

/* "read", "write", "admin", "commit", "admin:*" (BROKER), "token",
 * "public", "none", "unset": the words of the docs and of 403 answers. */
const char *pulse_router_grant_name(enum pulse_grant_kind kind);

/* Most query parameters any route and method accepts. */
#define PULSE_ROUTER_MAX_QUERY 12

/*
 * The position of query parameter name in the list that route r accepts
 * with method m (0 .. PULSE_ROUTER_MAX_QUERY-1), or -1 when r and m take no
 * such parameter. Names compare exactly (case-sensitive), after decoding.
 */
int pulse_router_query_index(enum pulse_route r, enum pulse_method m, const char *name);

#endif
