/* SPDX-License-Identifier: MIT */
/*
 * http_int.h - private to src/http: the server and per-request structs and
 * the helpers the route handlers share. Never included outside src/http.
 *
 * Request lifetime: the access handler creates a struct pulse_hreq on the
 * first call for a request and MHD's request-completed callback frees it;
 * nothing else frees it, so a broker callback that resumes a connection can
 * never race with its context's free (the context outlives the suspension).
 * Everything a request allocates goes through its pool (pulse_server_palloc)
 * and is released in one place. struct pulse_hreq holds only what every
 * route shares; a handler that needs more (records and their offsets,
 * cursors, the broker's answer, its error message) keeps it in its own
 * struct, allocated from the pool (pulse_server_hstate), as h2o handlers
 * keep theirs in h2o_mem_alloc_pool memory.
 *
 * Thread: the helpers below run on the MHD worker that owns the request's
 * connection, except pulse_server_wake (any thread, typically the broker's
 * syncer). Locks: none, except the metrics mutex noted below.
 */
#ifndef PULSE_HTTP_HTTP_INT_H
#define PULSE_HTTP_HTTP_INT_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "broker/broker.h"
#include "common/buf.h"
#include "http/budget.h"
#include "http/config.h"
#include "http/cors.h"
#include "http/ratelimit.h"
#include "http/tls.h"
#include "http/request.h"
#include "http/router.h"

#define PULSE_HTTP_VERSION PACKAGE_VERSION
#define PULSE_HTTP_LATENCY_BUCKETS 12
/* Retry-After seconds of every 503 and of every 507 (docs/API.md). */
#define PULSE_HTTP_RETRY_AFTER_UNAVAILABLE "1"
#define PULSE_HTTP_RETRY_AFTER_FULL "5"

struct pulse_http_metric_row {
    enum pulse_route route;
    enum pulse_method method;
    unsigned status;
    uint64_t count;
};

struct pulse_conns;
struct pulse_conn;
struct pulse_auth;
struct pulse_auth_tokens;
struct pulse_auth_token;

struct pulse_server {
    const struct pulse_config *cfg;
    /* NULL until pulse_server_attach: requests answer 503 meanwhile */
    struct pulse_broker *_Atomic broker;
    struct MHD_Daemon *daemon;
    uint16_t port;
    int64_t started_mono_us;
    atomic_bool ready;
    atomic_bool stopping;
    atomic_long inflight;  /* contexts created and not yet completed */
    atomic_long suspended; /* connections suspended right now */
    atomic_long streams;   /* event streams open right now (h_stream.c) */
    atomic_long receiving; /* in flight whose body has not fully arrived */
    atomic_uint clients;   /* open connections (pulse_server_note_clients) */
    /* in-flight request and answer memory (server.memory-budget); every
     * request gives back what it took in pulse_server_on_completed */
    struct pulse_budget budget;
    /* open connections and the request-head deadline (server.header-timeout) */
    struct pulse_conns *conns;
    /* bearer tokens (auth.h); NULL when auth.token-file is not set */
    struct pulse_auth *auth;
    /* metrics; one mutex, taken once per completed request */
    pthread_mutex_t mlock;
    struct pulse_http_metric_row *rows;
    size_t n_rows;
    size_t cap_rows;
    uint64_t lat_buckets[PULSE_ROUTE_NONE + 1][PULSE_HTTP_LATENCY_BUCKETS];
    uint64_t lat_count[PULSE_ROUTE_NONE + 1];
    double lat_sum[PULSE_ROUTE_NONE + 1];
    /* HTTPS: the PEM text MHD was started with (kept for the daemon's
     * life); mtls: every request's client certificate is checked */
    struct pulse_tls_pem tls_pem;
    bool mtls;
    /* [limits]: token buckets per client (server_limits.c) */
    struct pulse_ratelimit *ratelimit;
};

enum pulse_hreq_state {
    PULSE_HREQ_NEW = 0,   /* headers seen, body (if any) arriving */
    PULSE_HREQ_SUSPENDED, /* waiting for a broker callback */
    PULSE_HREQ_ANSWERED   /* a response is queued */
};

enum pulse_body_kind { PULSE_BODY_JSON = 0, PULSE_BODY_OCTETS, PULSE_BODY_NDJSON };

struct pulse_hreq_chunk;
struct pulse_hreq;

typedef void (*pulse_hreq_resume_fn)(struct pulse_hreq *r);

struct pulse_hreq {
    struct pulse_server *srv;
    struct MHD_Connection *conn;
    struct pulse_conn *hc; /* the connection's registry entry (conns.h) */
    const char *url;       /* borrowed from MHD for the request's life */
    enum pulse_method method;
    struct pulse_route_match match;
    char id[PULSE_REQUEST_ID_MAX + 1];
    int64_t start_us;
    enum pulse_hreq_state state;
    unsigned status;              /* HTTP status of the queued answer; 0 = none */
    bool close;                   /* answer with "Connection: close" (framing errors) */
    const char *line_problem;     /* why the request line is refused (400, close); NULL = none */
    bool http11;                  /* HTTP/1.1 or later: a Host field is required */
    const char *origin;           /* the Origin header (borrowed from MHD), or NULL */
    enum pulse_cors_verdict cors; /* what server.cors-origins says of origin (cors.h) */
    unsigned retry_after;         /* seconds for a Retry-After header; 0 = none */
    const char *www_authenticate; /* a WWW-Authenticate value for a 401 (static); NULL = none */
    /* the request's token (server_auth.c): a reference to its table,
     * given back at completion; NULL without auth or before the check */
    struct pulse_auth_tokens *auth_tab;
    const struct pulse_auth_token *token;
    int64_t bytes_out;    /* answer body bytes as queued; -1 = streamed, size unknown */
    bool not_serving;     /* a 503 because the broker starts or stops: not a fault, not warned about */
    uint64_t mem_held;    /* taken from srv->budget; given back at completion */
    uint64_t mem_charged; /* of mem_held, taken by pulse_server_mem_charge */
    uint64_t mem_credit;  /* of that, not yet charged */
    bool mem_refused;     /* a charge was refused: NOMEM answers become 503 or 413 */
    bool mem_never_fits;  /* ... and it would pass the whole budget: 413 */
    /* body */
    bool wants_body;
    bool gzip;
    bool too_large;
    bool over_budget; /* the body could not be reserved: 503 at the end */
    bool received;    /* the whole request has arrived (counted out of receiving) */
    enum pulse_body_kind body_kind;
    struct pulse_buf body;
    /* suspension: written by a broker thread before MHD_resume_connection */
    pulse_hreq_resume_fn resume;
    atomic_int async_status;
    /* a call that completes inline or later (async.c) */
    atomic_int call_state;
    atomic_int call_status;
    /* memory that lives until the request completes (server_mem.c) */
    struct pulse_hreq_chunk *pool;
    /* the handler's own state, in the pool (pulse_server_hstate); dispose
     * (nullable) runs on it when the request completes */
    void *hstate;
    void (*hstate_dispose)(void *hstate);
    /* what every handler may read */
    json_t *doc;                       /* parsed body kept alive while records borrow from it */
    char topic[PULSE_NAME_MAX + 1];    /* pulse_server_path_topic */
    char consumer[PULSE_NAME_MAX + 1]; /* pulse_server_path_consumer */
    uint32_t partition;                /* pulse_server_path_partition */
    /* rate limits (server_limits.c): the client's bucket key, once
     * admitted; body bytes received, and how many the admission took */
    bool limit_keyed;
    unsigned char limit_key[PULSE_RATELIMIT_KEY_LEN];
    uint64_t bytes_in; /* body bytes as received (also the access log's bytes_in) */
    uint64_t bytes_in_charged;
};

/* ---- server.c: request plumbing shared by the handlers ---------------- */

/* Zeroed memory that lives until the request completes, charged to r's
 * memory budget first; NULL on NOMEM or when the budget refuses (answer
 * with pulse_server_reply_status(r, PULSE_NOMEM, ...) either way). */
void *pulse_server_palloc(struct pulse_hreq *r, size_t n);
/* As pulse_server_palloc, but the bytes are not zeroed: for arrays the
 * caller fills whole before reading them (a large publish's records). */
void *pulse_server_palloc_uninit(struct pulse_hreq *r, size_t n);

/* The handler's own state: n zeroed bytes from r's pool, kept in
 * r->hstate for its resume function. dispose (nullable) is called with
 * the state when r completes, before the pool is freed, for what the
 * state owns outside the pool. Once per request. NULL as for
 * pulse_server_palloc (nothing is then kept or disposed). */
void *pulse_server_hstate(struct pulse_hreq *r, size_t n, void (*dispose)(void *hstate));

/* Takes n bytes of the memory budget for r (given back when r completes).
 * false when the budget cannot cover them: answer with
 * pulse_server_reply_over_budget. */
bool pulse_server_mem_take(struct pulse_hreq *r, uint64_t n);
/* Lets buf grow by n more bytes within cap (the request's size limit),
 * raising buf's cap in steps taken from the budget first, so its storage
 * never passes what r holds. PULSE_TOO_LARGE past cap, PULSE_BUSY when the
 * budget refuses. */
pulse_status_t pulse_server_mem_grow(struct pulse_hreq *r, struct pulse_buf *buf, size_t n, size_t cap);
/* 503 unavailable with Retry-After, naming server.memory-budget. */
void pulse_server_reply_over_budget(struct pulse_hreq *r);
/* Charges n bytes of heap (allocator overhead included) to r, drawing on
 * budget r already took and taking more in steps. false when the budget
 * refuses: r->mem_refused is set, and pulse_server_reply_status turns the
 * caller's PULSE_NOMEM answer into pulse_server_reply_refused. */
bool pulse_server_mem_charge(struct pulse_hreq *r, uint64_t n);
/* The answer to a refused charge: 503 over budget, or 413 when r alone
 * needs more than the whole budget. */
void pulse_server_reply_refused(struct pulse_hreq *r);
/* From begin to end, every jansson allocation on this thread is charged
 * to r (pulse_server_mem_charge) and fails when the budget refuses it:
 * parse and dump request JSON only inside such a window. begin returns
 * the window it replaces (windows nest); pass it to end. */
struct pulse_hreq *pulse_server_json_begin(struct pulse_hreq *r);
void pulse_server_json_end(struct pulse_hreq *prev);

/* Queues resp (taking it) with status plus the common headers. */
void pulse_server_reply(struct pulse_hreq *r, unsigned status, struct MHD_Response *resp, const char *content_type);
/* Every JSON answer's text: body (not stolen) serialised compactly with
 * flags, and a newline, in a new pulse_malloc buffer (*out, *out_len).
 * PULSE_NOMEM or PULSE_INVALID. */
pulse_status_t pulse_server_json_text(const json_t *body, size_t flags, char **out, size_t *out_len);
/* The response for a JSON answer's text (taken: pulse_malloc'd, ending in
 * a newline): gzip'ed when it has at least PULSE_ENCODE_GZIP_MIN bytes and
 * the request's Accept-Encoding allows it (encode.h), with Vary:
 * Accept-Encoding. NULL on NOMEM (text freed); queue it with
 * pulse_server_reply. */
struct MHD_Response *pulse_server_json_response(struct pulse_hreq *r, char *text, size_t len);
/* 200 {"<member>": [names...]}, only the names r's token may commit for
 * (consumers, groups); takes names (pulse_broker_names_free) either way. */
void pulse_server_reply_names(struct pulse_hreq *r, const char *member, char **names, size_t n);
/* Serialises body (stolen) as the answer. */
void pulse_server_reply_json(struct pulse_hreq *r, unsigned status, json_t *body);
void pulse_server_reply_error(struct pulse_hreq *r, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* 503 unavailable because the broker is not serving yet or any more
 * (recovery, drain): expected, so logged at debug level only, never as a
 * server fault; msg says which. */
void pulse_server_reply_not_serving(struct pulse_hreq *r, const char *msg);
/* Error answer for st through the errmap; msg NULL = the status message.
 * PULSE_SHUTDOWN is answered as pulse_server_reply_not_serving. */
void pulse_server_reply_status(struct pulse_hreq *r, pulse_status_t st, const char *msg);
/* 416 offset_out_of_range, the one answer to an offset above the high
 * watermark: "<prefix>offset 1000 is beyond the high watermark 2", with
 * offset, log_start_offset and high_watermark as fields of the error.
 * prefix (nullable) names the item of a batch ("cursors[1]: "). */
void pulse_server_reply_range(struct pulse_hreq *r, const char *prefix, int64_t offset, int64_t log_start, int64_t hw);
/* 400 invalid_request, the one answer to a negative offset. */
void pulse_server_reply_negative_offset(struct pulse_hreq *r, const char *prefix, int64_t offset);
/* 404 partition_not_found in the one wording of the API: topic "t" has
 * no partition P, and which partitions it has (looked up). */
void pulse_server_reply_no_partition(struct pulse_hreq *r, const char *topic, uint32_t partition);
/* As pulse_server_reply_status, with the members of extra (a new
 * reference, taken) added to the "error" object. */
void pulse_server_reply_status_extra(struct pulse_hreq *r, pulse_status_t st, const char *msg, json_t *extra);
/* An answer without a body (204). */
void pulse_server_reply_empty(struct pulse_hreq *r, unsigned status);
/* The answer to OPTIONS on a matched route: 204 with Allow, plus the
 * preflight headers (Access-Control-Allow-Methods, -Headers, -Max-Age)
 * for an allowed origin; 403 for a preflight from an origin that is not
 * allowed (docs/API.md "Browsers and CORS"). */
void pulse_server_reply_options(struct pulse_hreq *r);
/* Parses the body as one JSON object; on failure answers 400 and gives NULL.
 * The returned reference is kept in r->doc (borrowed by the caller). */
json_t *pulse_server_body_object(struct pulse_hreq *r);
/* A query argument or NULL. Only parameters the router lists for the route
 * ever reach a handler (others were refused with 400). */
const char *pulse_server_query(struct pulse_hreq *r, const char *name);
/* The integer query argument name into *out when present and within
 * min..max (absent: *out untouched, true); otherwise answers 400 naming the
 * parameter and its range and returns false. */
bool pulse_server_query_int(struct pulse_hreq *r, const char *name, int64_t min, int64_t max, int64_t *out);
/* Copies the {topic}/{consumer} path parameter into r->topic / r->consumer
 * after checking the name rule; answers 400 invalid_name and returns false. */
bool pulse_server_path_topic(struct pulse_hreq *r);
bool pulse_server_path_consumer(struct pulse_hreq *r);
/* Parses {partition}; answers 400 invalid_request and returns false. */
bool pulse_server_path_partition(struct pulse_hreq *r);
/* Suspends r's connection before a broker call whose callback resumes it;
 * resume runs on re-entry. */
void pulse_server_suspend(struct pulse_hreq *r, pulse_hreq_resume_fn resume);
/* Called by a broker callback (any thread): stores st and resumes. r must
 * not be touched after this returns. */
void pulse_server_wake(struct pulse_hreq *r, pulse_status_t st);
/* pulse_server_wake as a broker completion callback (pulse_publish_done_fn,
 * pulse_admin_done_fn): arg is the suspended request. */
void pulse_server_on_done(void *arg, pulse_status_t st);
/* ---- async.c: broker calls that complete inline or later ------------- */

/* Before a broker call whose completion (pulse_server_call_done, arg r)
 * may run on this thread before the call returns, or later on another
 * one: resume is what answers. */
void pulse_server_call_begin(struct pulse_hreq *r, pulse_hreq_resume_fn resume);
/* The completion to hand the broker (any thread, exactly once). */
void pulse_server_call_done(void *arg, pulse_status_t st);
/* After the call returned st; called_back says whether a completion will
 * come (or came). Runs resume on this thread at once when the completion
 * already came (or none will, with st), else suspends r until it comes;
 * resume then runs on re-entry. Either way resume runs exactly once, with
 * the status in r->async_status. Thread: r's worker. */
void pulse_server_call_end(struct pulse_hreq *r, pulse_status_t st, bool called_back);

/* Checks that only the allowed keys are in obj; answers 400 naming the
 * first unknown one and returns false. allowed is NULL-terminated. */
bool pulse_server_only_fields(struct pulse_hreq *r, json_t *obj, const char *const *allowed, const char *what);
/* Reads an optional integer field in [min, max]: true when absent (*out
 * untouched) or valid; false after answering 400. */
bool pulse_server_int_field(struct pulse_hreq *r, json_t *obj, const char *name, int64_t min, int64_t max, int64_t *out,
                            bool *present);

/* ---- server_auth.c: grants ----------------------------------------------- */

/* True when r's token holds kind on name (auth.h pulse_auth_token_allows;
 * name NULL: any grant of the kind); always true without auth. */
bool pulse_server_may(const struct pulse_hreq *r, enum pulse_grant_kind kind, const char *name);
/* pulse_server_may, or answers 403 forbidden naming the missing grant
 * ("read:orders") and returns false. For names read from a body. */
bool pulse_server_authorize(struct pulse_hreq *r, enum pulse_grant_kind kind, const char *name);
/* The name of r's token (borrowed until r completes), or NULL. */
const char *pulse_server_token_name(const struct pulse_hreq *r);
/* ---- server_limits.c: rate limits per client ------------------------- */

/* Admits r under [limits] (before its body is read): false after
 * answering 429 with Retry-After, counted in /metrics; nothing of r is
 * executed then. /healthz and /readyz are never limited. */
bool pulse_server_refuse_rate(struct pulse_hreq *r);
/* Takes bytes r moves beyond its declared body (records a fetch serves)
 * from its client's byte bucket. */
void pulse_server_limit_charge(struct pulse_hreq *r, uint64_t bytes);
/* At completion: takes the body bytes that arrived beyond what the
 * admission took (a chunked body). */
void pulse_server_limit_done(struct pulse_hreq *r);

/* ---- handlers --------------------------------------------------------- */
void pulse_h_topics_list(struct pulse_hreq *r);
void pulse_h_topics_create(struct pulse_hreq *r);
void pulse_h_topics_get(struct pulse_hreq *r);
void pulse_h_topics_patch(struct pulse_hreq *r);
void pulse_h_topics_delete(struct pulse_hreq *r);
/* GET /v1/topics/{topic}/partitions and /v1/topics/{topic}/partitions/{partition}. */
void pulse_h_topics_partitions(struct pulse_hreq *r);
/* The topic object of the API (with partition_stats when info has them). */
json_t *pulse_h_topics_object(const struct pulse_topic_info *info);
void pulse_h_publish_post(struct pulse_hreq *r);
void pulse_h_fetch_get(struct pulse_hreq *r);
/* h_stream.c: event streams. wanted: Accept names text/event-stream. */
bool pulse_h_stream_wanted(struct pulse_hreq *r);
void pulse_h_stream_partition(struct pulse_hreq *r); /* r->topic, r->partition parsed */
void pulse_h_stream_topic(struct pulse_hreq *r);
/* h_topicread.c: GET /v1/topics/{topic}/records, several partitions at once. */
void pulse_h_topic_read(struct pulse_hreq *r);
void pulse_h_consumers_list(struct pulse_hreq *r);
void pulse_h_consumers_delete(struct pulse_hreq *r);
void pulse_h_consumers_cursors_list(struct pulse_hreq *r);
void pulse_h_consumers_cursors_commit(struct pulse_hreq *r);
void pulse_h_consumers_cursor_get(struct pulse_hreq *r);
void pulse_h_consumers_cursor_put(struct pulse_hreq *r);
/* Every /v1/groups route (h_groups.c); the group fetch is
 * pulse_h_group_fetch (h_group_fetch.c). */
void pulse_h_groups(struct pulse_hreq *r);
void pulse_h_group_fetch(struct pulse_hreq *r);
/* The member's part of every answer to a group member (h_groups.c):
 * group, member_id, generation, lease_ms, partitions, pending_partitions. */
json_t *pulse_h_groups_view(const char *group, const struct pulse_group_view *v);
/* Checks {group} and {member} and copies them into r->consumer and
 * member (PULSE_GROUP_MEMBER_ID_MAX + 1 bytes); answers 400 and returns
 * false. */
bool pulse_h_groups_path(struct pulse_hreq *r, char *member);
/* The answer to a refused member call (PULSE_REJOIN: 409 rejoin, ...). */
void pulse_h_groups_reply_error(struct pulse_hreq *r, pulse_status_t st, const char *msg);
void pulse_h_ops_healthz(struct pulse_hreq *r);
void pulse_h_ops_readyz(struct pulse_hreq *r);
void pulse_h_ops_metrics(struct pulse_hreq *r);
void pulse_h_ops_broker(struct pulse_hreq *r);
/* h_static.c: the files compiled into pulsed (embed.h). */
void pulse_h_static_dashboard(struct pulse_hreq *r);
void pulse_h_static_asset(struct pulse_hreq *r);
void pulse_h_static_openapi(struct pulse_hreq *r);
/* Appends the HTTP metrics (Prometheus text) to out. Locks: srv->mlock. */
pulse_status_t pulse_server_metrics(struct pulse_server *srv, struct pulse_buf *out);

#endif
