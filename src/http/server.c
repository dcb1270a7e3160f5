/* SPDX-License-Identifier: MIT */
/*
 * server.c - the libmicrohttpd daemon and the request plumbing: context
 * lifetime, early refusals, body collection, dispatch, answers, metrics and
 * the graceful stop.
 *
 * Threading: MHD runs an epoll thread pool; every handler runs on the worker
 * that owns its connection and must never block. A publish, long-poll,
 * cursor commit, topic create/patch/delete or consumer delete suspends its
 * connection first and then calls the broker; the broker's callback (syncer,
 * committer or admin thread, or this thread) stores a status and resumes the
 * connection; MHD calls the access handler again on the owning worker, which
 * answers. Resume is called exactly once per suspend.
 *
 * Request flow in on_access:
 *   1st call  create the context; refuse early what can be refused from the
 *             headers alone, so an oversized body is never read: a raw NUL,
 *             control byte or blank in the request line, a header field
 *             name that is not a token or a control character in a header
 *             value, framing that could smuggle a second request
 *             (400/501/413, and the connection is closed), a control
 *             character decoded from the target (400), 404, 405, an unknown
 *             query parameter (400), 503, 406, 415, 413 on Content-Length,
 *             and a body the memory budget cannot hold (503).
 *   body      append to a capped buffer; a chunked body past the cap is still
 *             consumed but remembered as too large (413 at the end).
 *   last call (size 0) decode gzip, then run the route's handler, or the
 *             resume function after a suspension.
 * The context is freed only in on_completed (MHD_OPTION_NOTIFY_COMPLETED),
 * which also counts the request out of the in-flight gauge, records its
 * metrics and gives its memory reservation back to the budget (budget.h).
 * Besides bodies and fetch answers, the budget is charged with every block
 * jansson allocates while a request's JSON is parsed (a process-wide
 * jansson allocator that charges the request a thread-local names) and
 * with the request's pool.
 *
 * Connections: MHD_OPTION_NOTIFY_CONNECTION registers every connection with
 * the deadline registry (conns.h); the first on_access call for a request
 * tells it the head arrived (the body deadline starts), each upload call
 * how many body bytes came, the final call that the body is complete, and
 * on_completed that the next head is due. MHD_OPTION_UNESCAPE_CALLBACK
 * decodes the target as MHD would and flags a decoded control character,
 * which MHD would otherwise pass on as a string cut at a NUL
 * ("orders%00.archive" read as "orders");
 * MHD_OPTION_URI_LOG_CALLBACK notes the raw target before MHD cuts or
 * decodes it, so a raw NUL byte is caught as well (on_uri).
 */
#include "http/server.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/status.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "http/conns.h"
#include "http/errmap.h"
#include "http/http_int.h"
#include "http/json.h"
#include "http/mhdfix.h"

#define CONNECTION_MEMORY_LIMIT (16u * 1024)
/* A body without a Content-Length (chunked) or an inflated gzip body grows
 * its budget reservation in steps of at least this, doubling. */
#define BODY_STEP (64u * 1024)

static const double latency_bounds[PULSE_HTTP_LATENCY_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                                   0.1,   0.25,   0.5,   1.0,  5.0,   30.0};

struct pulse_hreq_chunk {
    struct pulse_hreq_chunk *next;
    _Alignas(max_align_t) unsigned char data[];
};

/* ---- memory charged as it is allocated -------------------------------- */

/* A request's charges are drawn from budget taken in steps: as large as
 * what it took so far (doubling), at least CHARGE_MIN, at most CHARGE_STEP,
 * so a small request holds little and a large parse few reservations. */
#define CHARGE_MIN (4u * 1024)
#define CHARGE_STEP (64u * 1024)

/* The request whose jansson allocations this thread charges right now
 * (pulse_server_json_begin); NULL: none are charged. */
static _Thread_local struct pulse_hreq *json_charge;

/* What glibc's malloc takes from the heap for a block of n bytes: n plus
 * its 8-byte size field, rounded up to 16, and at least 32. (Checked
 * against mallinfo2: parsing 1 M values through jansson, the heap grew by
 * exactly the sum of these; docs/Operations.md "Memory".) */
static uint64_t malloc_cost(size_t n)
{
    uint64_t c = ((uint64_t)n + 8 + 15) & ~(uint64_t)15;
    return c < 32 ? 32 : c;
}

bool pulse_server_mem_charge(struct pulse_hreq *r, uint64_t n)
{
    if (n <= r->mem_credit) {
        r->mem_credit -= n;
        return true;
    }
    uint64_t need = n - r->mem_credit;
    /* A step when the budget has room for it, else exactly what is
     * needed: one reservation either way, so one refusal counted. */
    const struct pulse_budget *b = &r->srv->budget;
    uint64_t step = r->mem_charged < CHARGE_MIN ? CHARGE_MIN : r->mem_charged;
    if (step > CHARGE_STEP)
        step = CHARGE_STEP;
    uint64_t used = pulse_budget_used(b);
    uint64_t room = used < b->limit ? b->limit - used : 0;
    uint64_t take = need < step && room >= step ? step : need;
    if (!pulse_server_mem_take(r, take)) {
        r->mem_refused = true;
        /* Past the whole budget even with nothing else in flight. */
        if (r->mem_held > b->limit || need > b->limit - r->mem_held)
            r->mem_never_fits = true;
        return false;
    }
    r->mem_charged += take;
    r->mem_credit += take - n;
    return true;
}

/*
 * jansson allocates through these for the whole process (installed before
 * main, so before any thread or jansson call). A block is charged only
 * while a request's parse runs on this thread (json_charge); every other
 * allocation, and every free, is the plain allocator's. Charges are never
 * given back block by block: the request gives back everything it took
 * when it completes, by which time its documents are freed.
 */
static void *json_alloc(size_t n)
{
    struct pulse_hreq *r = json_charge;
    if (r != NULL && !pulse_server_mem_charge(r, malloc_cost(n)))
        return NULL; /* jansson fails the parse or dump as out of memory */
    return pulse_malloc(n);
}

static void json_release(void *p)
{
    pulse_free(p);
}

__attribute__((constructor)) static void json_alloc_install(void)
{
    json_set_alloc_funcs(json_alloc, json_release);
}

struct pulse_hreq *pulse_server_json_begin(struct pulse_hreq *r)
{
    struct pulse_hreq *prev = json_charge;
    json_charge = r;
    return prev;
}

void pulse_server_json_end(struct pulse_hreq *prev)
{
    json_charge = prev;
}

/* ---- per-request pool ------------------------------------------------- */

void *pulse_server_palloc(struct pulse_hreq *r, size_t n)
{
    if (n > SIZE_MAX - sizeof(struct pulse_hreq_chunk))
        return NULL;
    if (!pulse_server_mem_charge(r, malloc_cost(sizeof(struct pulse_hreq_chunk) + n)))
        return NULL;
    struct pulse_hreq_chunk *c = pulse_calloc(1, sizeof *c + n);
    if (c == NULL)
        return NULL;
    c->next = r->pool;
    r->pool = c;
    return c->data;
}

static struct pulse_hreq *hreq_create(struct pulse_server *srv, struct MHD_Connection *conn, const char *url,
                                      const char *method)
{
    struct pulse_hreq *r = pulse_calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->srv = srv;
    r->conn = conn;
    r->url = url;
    r->method = pulse_router_method(method);
    r->start_us = pulse_clock_mono_us();
    atomic_init(&r->async_status, PULSE_OK);
    /* Cap 0: the body grows only within what begin_body or
     * pulse_server_mem_grow reserved for it. */
    pulse_buf_init(&r->body, 0);
    const char *id = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
    if (pulse_request_id_valid(id))
        snprintf(r->id, sizeof r->id, "%s", id);
    else
        pulse_request_id_generate(r->id);
    (void)pulse_router_match(url, &r->match);
    return r;
}

static void hreq_free(struct pulse_hreq *r)
{
    if (r == NULL)
        return;
    /* Before the pool: what it frees is found through handler state. */
    if (r->dispose != NULL)
        r->dispose(r);
    struct pulse_hreq_chunk *c = r->pool;
    while (c != NULL) {
        struct pulse_hreq_chunk *next = c->next;
        pulse_free(c);
        c = next;
    }
    json_decref(r->doc);
    pulse_topic_info_free(r->info);
    pulse_buf_fini(&r->body);
    pulse_free(r);
}

/* ---- answers ---------------------------------------------------------- */

static const char oom_body[] = "{\"error\":{\"code\":\"storage_error\",\"message\":\"out of memory\"}}";

void pulse_server_reply(struct pulse_hreq *r, unsigned status, struct MHD_Response *resp, const char *content_type)
{
    if (resp == NULL) {
        PULSE_ERROR("request %s: cannot create a response (status %u)", r->id, status);
        return;
    }
    MHD_add_response_header(resp, "X-Request-Id", r->id);
    if (content_type != NULL)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (atomic_load(&r->srv->stopping) || r->close)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    /* Every 503 and 507 means "come back later": the handler's own delay
     * (the memory budget), else a full disk usually takes an operator, a
     * fenced partition or a busy broker a moment. */
    if (r->retry_after > 0) {
        char v[16];
        snprintf(v, sizeof v, "%u", r->retry_after);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, v);
    } else if (status == 503) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, PULSE_HTTP_RETRY_AFTER_UNAVAILABLE);
    } else if (status == 507) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, PULSE_HTTP_RETRY_AFTER_FULL);
    }
    if (MHD_queue_response(r->conn, status, resp) == MHD_YES) {
        r->state = PULSE_HREQ_ANSWERED;
        r->status = status;
    } else {
        PULSE_WARN("request %s: MHD refused to queue a %u answer", r->id, status);
    }
    MHD_destroy_response(resp);
}

static void reply_oom(struct pulse_hreq *r)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(sizeof oom_body - 1, (void *)(uintptr_t)oom_body, MHD_RESPMEM_PERSISTENT);
    pulse_server_reply(r, 500, resp, PULSE_MEDIA_JSON);
}

void pulse_server_reply_json(struct pulse_hreq *r, unsigned status, json_t *body)
{
    char *text = NULL;
    size_t len = 0;
    /* 15 significant digits print 0.1 as 0.1 (the few reals we answer
     * with are configuration ratios, not stored data). */
    if (body == NULL || pulse_json_dump(body, JSON_REAL_PRECISION(15), &text, &len) != PULSE_OK) {
        json_decref(body);
        reply_oom(r);
        return;
    }
    json_decref(body);
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, text, pulse_free);
    if (resp == NULL) {
        pulse_free(text);
        reply_oom(r);
        return;
    }
    pulse_server_reply(r, status, resp, PULSE_MEDIA_JSON);
}

static void reply_error_v(struct pulse_hreq *r, unsigned status, const char *code, json_t *extra, const char *fmt,
                          va_list ap) __attribute__((format(printf, 5, 0)));

static void reply_error_v(struct pulse_hreq *r, unsigned status, const char *code, json_t *extra, const char *fmt,
                          va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* An error answer is small and never charged: it often reports that
     * the budget refused the request's own parse. */
    struct pulse_hreq *prev = pulse_server_json_begin(NULL);
    json_t *body = pulse_json_error(code, msg);
    if (body != NULL && extra != NULL) {
        json_t *err = json_object_get(body, "error");
        if (json_object_update(err, extra) != 0) {
            json_decref(body);
            body = NULL;
        }
    }
    json_decref(extra);
    /* Overload refusals (they carry their own Retry-After) are counted in
     * the metrics, not logged one by one: under load they would flood the
     * log; a 501 is the client's doing, not a server fault; a broker that
     * is starting or stopping says so once in its own lines (every /readyz
     * poll during recovery would warn otherwise). The rest are
     * rate-limited per error code (a static string): a full disk answers
     * every publish with 507, and one line per request would flood too. */
    if (r->not_serving)
        PULSE_DEBUG_LOG("request %s %s %s: %u %s: %s", r->id, pulse_router_method_name(r->method), r->url, status,
                        code, msg);
    else if (status >= 500 && status != 501 && r->retry_after == 0)
        pulse_log_limited(PULSE_LOG_WARN, code, "request %s %s %s: %u %s: %s", r->id,
                          pulse_router_method_name(r->method), r->url, status, code, msg);
    pulse_server_reply_json(r, status, body);
    pulse_server_json_end(prev);
}

void pulse_server_reply_error(struct pulse_hreq *r, unsigned status, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reply_error_v(r, status, code, NULL, fmt, ap);
    va_end(ap);
}

static void reply_error_extra(struct pulse_hreq *r, unsigned status, const char *code, json_t *extra,
                              const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void reply_error_extra(struct pulse_hreq *r, unsigned status, const char *code, json_t *extra,
                              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reply_error_v(r, status, code, extra, fmt, ap);
    va_end(ap);
}

void pulse_server_reply_not_serving(struct pulse_hreq *r, const char *msg)
{
    r->not_serving = true;
    pulse_server_reply_error(r, 503, "unavailable", "%s", msg);
}

void pulse_server_reply_status(struct pulse_hreq *r, pulse_status_t st, const char *msg)
{
    if (st == PULSE_SHUTDOWN)
        r->not_serving = true;
    /* Out of memory because the budget said no: not a server fault. */
    if (st == PULSE_NOMEM && r->mem_refused) {
        pulse_server_reply_refused(r);
        return;
    }
    const struct pulse_errmap_entry *e = pulse_errmap_lookup(st);
    pulse_server_reply_error(r, e->http_status, e->code, "%s",
                             msg != NULL && msg[0] != '\0' ? msg : pulse_status_message(st));
}

void pulse_server_reply_range(struct pulse_hreq *r, int64_t log_start, int64_t hw, const char *msg)
{
    json_t *extra = json_pack("{s:I,s:I}", "log_start_offset", (json_int_t)log_start, "high_watermark",
                              (json_int_t)hw);
    const struct pulse_errmap_entry *e = pulse_errmap_lookup(PULSE_RANGE);
    if (extra == NULL) {
        reply_oom(r);
        return;
    }
    reply_error_extra(r, e->http_status, e->code, extra, "%s",
                      msg != NULL && msg[0] != '\0' ? msg : "offset is outside the log");
}

void pulse_server_reply_empty(struct pulse_hreq *r, unsigned status)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)(uintptr_t) "", MHD_RESPMEM_PERSISTENT);
    pulse_server_reply(r, status, resp, NULL);
}

/* ---- the memory budget ------------------------------------------------ */

bool pulse_server_mem_take(struct pulse_hreq *r, uint64_t n)
{
    if (!pulse_budget_reserve(&r->srv->budget, n))
        return false;
    r->mem_held += n;
    return true;
}

pulse_status_t pulse_server_mem_grow(struct pulse_hreq *r, struct pulse_buf *buf, size_t n, size_t cap)
{
    if (n > cap || buf->len > cap - n)
        return PULSE_TOO_LARGE;
    if (buf->len + n <= buf->max)
        return PULSE_OK;
    /* Double the reserved cap (at least one step), never past cap. */
    size_t want = buf->max > cap / 2 ? cap : buf->max * 2;
    if (want < buf->len + n)
        want = buf->len + n;
    if (want < BODY_STEP)
        want = BODY_STEP < cap ? BODY_STEP : cap;
    if (!pulse_server_mem_take(r, want - buf->max))
        return PULSE_BUSY;
    pulse_buf_set_max(buf, want);
    return PULSE_OK;
}

void pulse_server_reply_over_budget(struct pulse_hreq *r)
{
    const struct pulse_budget *b = &r->srv->budget;
    r->retry_after = 1;
    pulse_server_reply_error(r, 503, "unavailable",
                             "the server's memory for requests in flight is in use (server.memory-budget = %llu "
                             "bytes, %llu reserved); retry later",
                             (unsigned long long)b->limit, (unsigned long long)pulse_budget_used(b));
}

void pulse_server_reply_refused(struct pulse_hreq *r)
{
    if (!r->mem_never_fits) {
        pulse_server_reply_over_budget(r);
        return;
    }
    pulse_server_reply_error(r, 413, "payload_too_large",
                             "this request needs more memory than the whole server.memory-budget (%llu bytes): "
                             "parsed JSON takes up to 80 times its text (docs/Operations.md); send fewer or "
                             "smaller records, or values as strings",
                             (unsigned long long)r->srv->budget.limit);
}

/* ---- request helpers -------------------------------------------------- */

json_t *pulse_server_body_object(struct pulse_hreq *r)
{
    json_error_t jerr;
    const char *data = r->body.data != NULL ? (const char *)r->body.data : "";
    struct pulse_hreq *prev = pulse_server_json_begin(r);
    json_t *doc = json_loadb(data, r->body.len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    pulse_server_json_end(prev);
    if (doc == NULL && r->mem_refused) {
        pulse_server_reply_refused(r);
        return NULL;
    }
    if (doc == NULL) {
        pulse_server_reply_error(r, 400, "invalid_request", "malformed JSON body: %s", jerr.text);
        return NULL;
    }
    if (!json_is_object(doc)) {
        json_decref(doc);
        pulse_server_reply_error(r, 400, "invalid_request", "the request body must be a JSON object");
        return NULL;
    }
    json_decref(r->doc);
    r->doc = doc;
    return doc;
}

const char *pulse_server_query(struct pulse_hreq *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

static bool path_name(struct pulse_hreq *r, const struct pulse_route_param *prm, char *dst, const char *what)
{
    if (prm->p == NULL || !pulse_broker_name_valid(prm->p, prm->len) || prm->len > PULSE_NAME_MAX) {
        pulse_server_reply_error(r, 400, "invalid_name",
                                 "%s name must be 1 to 249 characters of [A-Za-z0-9._-], not \".\" or \"..\", "
                                 "not starting with \"__\"",
                                 what);
        return false;
    }
    memcpy(dst, prm->p, prm->len);
    dst[prm->len] = '\0';
    return true;
}

bool pulse_server_path_topic(struct pulse_hreq *r)
{
    return path_name(r, &r->match.topic, r->topic, "topic");
}

bool pulse_server_path_consumer(struct pulse_hreq *r)
{
    return path_name(r, &r->match.consumer, r->consumer, "consumer");
}

bool pulse_server_path_partition(struct pulse_hreq *r)
{
    char text[24];
    int64_t v = 0;
    const struct pulse_route_param *prm = &r->match.partition;
    if (prm->p == NULL || prm->len == 0 || prm->len >= sizeof text)
        goto bad;
    memcpy(text, prm->p, prm->len);
    text[prm->len] = '\0';
    if (text[0] == '-' || pulse_request_parse_i64(text, 0, UINT32_MAX, &v) != PULSE_OK)
        goto bad;
    r->partition = (uint32_t)v;
    return true;
bad:
    pulse_server_reply_error(r, 400, "invalid_request", "partition must be a non-negative integer");
    return false;
}

bool pulse_server_only_fields(struct pulse_hreq *r, json_t *obj, const char *const *allowed, const char *what)
{
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i] != NULL; i++)
            if (strcmp(key, allowed[i]) == 0)
                ok = true;
        if (!ok) {
            pulse_server_reply_error(r, 400, "invalid_request", "unknown field \"%s\" in %s", key, what);
            return false;
        }
    }
    return true;
}

bool pulse_server_int_field(struct pulse_hreq *r, json_t *obj, const char *name, int64_t min, int64_t max,
                            int64_t *out, bool *present)
{
    json_t *v = json_object_get(obj, name);
    if (present != NULL)
        *present = v != NULL;
    if (v == NULL)
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        pulse_server_reply_error(r, 400, "invalid_request", "\"%s\" must be an integer in %lld..%lld", name,
                                 (long long)min, (long long)max);
        return false;
    }
    *out = (int64_t)json_integer_value(v);
    return true;
}

void pulse_server_suspend(struct pulse_hreq *r, pulse_hreq_resume_fn resume)
{
    r->resume = resume;
    r->state = PULSE_HREQ_SUSPENDED;
    atomic_store(&r->async_status, PULSE_OK);
    atomic_fetch_add(&r->srv->suspended, 1);
    MHD_suspend_connection(r->conn);
}

void pulse_server_wake(struct pulse_hreq *r, pulse_status_t st)
{
    atomic_store(&r->async_status, (int)st);
    /* After this call the owning worker may answer and free r. */
    MHD_resume_connection(r->conn);
}

void pulse_server_on_done(void *arg, pulse_status_t st)
{
    pulse_server_wake(arg, st);
}

/* ---- the access handler ----------------------------------------------- */

static bool route_wants_body(enum pulse_route route, enum pulse_method m)
{
    return (route == PULSE_ROUTE_TOPICS && m == PULSE_METHOD_POST) ||
           (route == PULSE_ROUTE_TOPIC && m == PULSE_METHOD_PATCH) ||
           (route == PULSE_ROUTE_PUBLISH && m == PULSE_METHOD_POST) ||
           (route == PULSE_ROUTE_CURSORS && m == PULSE_METHOD_POST) ||
           (route == PULSE_ROUTE_CURSOR && m == PULSE_METHOD_PUT);
}

static bool route_answers_json(enum pulse_route route)
{
    return route != PULSE_ROUTE_METRICS && route != PULSE_ROUTE_OPENAPI && route != PULSE_ROUTE_FETCH;
}

/* Copies text for an error message: printable ASCII only (anything else
 * becomes '?'), so a hostile path or name cannot break the JSON body. */
static const char *printable(const char *text, char *out, size_t len)
{
    size_t i = 0;
    for (; text != NULL && text[i] != '\0' && i + 1 < len; i++)
        out[i] = isprint((unsigned char)text[i]) ? text[i] : '?';
    out[i] = '\0';
    return out;
}

struct framing {
    unsigned n_length;
    unsigned n_encoding;
    const char *length;
    const char *encoding;
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct framing *f = cls;
    if (key != NULL && strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        f->n_length++;
        f->length = value != NULL ? value : "";
    } else if (key != NULL && strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        f->n_encoding++;
        f->encoding = value != NULL ? value : "";
    }
    return MHD_YES;
}

/*
 * RFC 9112 6.3: a request whose body length is ambiguous is refused and its
 * connection closed, because the bytes after it cannot be trusted to start a
 * request (libmicrohttpd 0.9.75 takes the first of two Content-Lengths, or
 * chunked over Content-Length, and would parse a smuggled request). Checked
 * on every request, whether or not its route takes a body.
 *
 * Transfer-Encoding is taken only when it is exactly "chunked" (any case),
 * the one comparison MHD makes (MHD_str_equal_caseless_): anything else -
 * another coding, a list, "chunked " with a blank MHD keeps - would leave
 * MHD reading a body of unknown length that never ends, so it is 501.
 */
static bool refuse_framing(struct pulse_hreq *r)
{
    struct framing f = {0, 0, NULL, NULL};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_framing, &f);
    if (f.n_length == 0 && f.n_encoding == 0)
        return false;
    r->close = true;
    if (f.n_length > 0 && f.n_encoding > 0) {
        pulse_server_reply_error(r, 400, "invalid_request",
                                 "a request must not carry both Content-Length and Transfer-Encoding");
        return true;
    }
    if (f.n_length > 1) {
        pulse_server_reply_error(r, 400, "invalid_request", "a request must carry at most one Content-Length");
        return true;
    }
    if (f.n_encoding > 0) {
        if (f.n_encoding == 1 && strcasecmp(f.encoding, "chunked") == 0) {
            r->close = false;
            return false;
        }
        char enc[64];
        pulse_server_reply_error(r, 501, "not_implemented",
                                 "Transfer-Encoding \"%s\" is not supported; only exactly \"chunked\" is (no other "
                                 "coding, no list, no blanks)",
                                 f.n_encoding > 1 ? "(several)" : printable(f.encoding, enc, sizeof enc));
        return true;
    }
    const char *p = f.length;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t digits = strspn(p, "0123456789");
    size_t blanks = strspn(p + digits, " \t");
    if (digits == 0 || p[digits + blanks] != '\0') {
        pulse_server_reply_error(r, 400, "invalid_request", "Content-Length must be a non-negative integer");
        return true;
    }
    while (digits > 1 && *p == '0') {
        p++;
        digits--;
    }
    char text[32];
    int64_t len = 0;
    bool fits = digits < sizeof text;
    if (fits) {
        memcpy(text, p, digits);
        text[digits] = '\0';
        fits = pulse_request_parse_i64(text, 0, INT64_MAX, &len) == PULSE_OK;
    }
    if (!fits) {
        /* Answered at once, instead of waiting for a body that never ends. */
        pulse_server_reply_error(r, 413, "payload_too_large", "Content-Length %.20s... does not fit in 63 bits", p);
        return true;
    }
    r->close = false;
    return false;
}

/*
 * Is the request line the one the client sent, with no NUL byte inside?
 * libmicrohttpd 0.9.75 parses the line in place in its read buffer: the
 * method runs from the line's start to the first blank (written over with
 * a NUL), then blanks, then the target (url), then a NUL written over the
 * blank before the version, which is 8 characters "HTTP/d.d" (a line
 * without a version is refused by MHD itself with 400). So the target MHD
 * saw is exactly version - 1 - url bytes long; on_uri noted its strlen
 * before anything was split or decoded, and a raw NUL makes the two
 * differ. The method likewise must end at the NUL MHD wrote, followed only
 * by blanks up to the target ("DELETE<NUL>x /..." would read as DELETE).
 */
static bool request_line_whole(const struct pulse_target_note *note, const char *method, const char *url,
                               const char *version)
{
    if (note->raw_len == SIZE_MAX || method == NULL || url == NULL || version == NULL || version[0] == '\0')
        return false;
    if (version <= url || (size_t)(version - 1 - url) != note->raw_len)
        return false;
    const char *p = method + strlen(method);
    if (p >= url)
        return false;
    for (p++; p < url; p++)
        if (*p != ' ')
            return false;
    return true;
}

/* Why the request line is refused (400 and close), or NULL. */
static const char *request_line_problem(struct pulse_conn *hc, const char *method, const char *url,
                                        const char *version)
{
    const struct pulse_target_note *note = pulse_conns_target(hc);
    if (!request_line_whole(note, method, url, version))
        return "the request line holds a NUL byte";
    if (note->raw_bad)
        return "the request target holds a raw blank, control character or DEL (percent-encode it)";
    return NULL;
}

struct header_check {
    const char *name;    /* the first bad field */
    const char *problem; /* NULL: all fields are clean */
    unsigned n_host;
};

/*
 * Did MHD store this field as it parsed it from one line? libmicrohttpd
 * 0.9.75 parses a field line in place: it writes a NUL over the colon and
 * skips the blanks after it, so the value starts right after the name's
 * NUL and some blanks in the same buffer. A field continued on a folded
 * line (obs-fold, a line starting with a blank) breaks that: MHD appends
 * the continuation to a copy of the NAME, elsewhere ("Content-Length: 0"
 * + " 27" becomes the field "Content-Length27" with the value "0"), and a
 * raw NUL inside the name cuts it short. Walking back from the value over
 * the blanks must land on the NUL that ends the name. (The walk stays in
 * the line: MHD's value always follows a colon in its read buffer.)
 */
static bool field_whole(const char *key, const char *value)
{
    const char *p = value;
    while (p[-1] == ' ' || p[-1] == '\t')
        p--;
    return p[-1] == '\0' && p - 1 == key + strlen(key);
}

/* Equal ignoring case, with '_' taken for '-' in name. */
static bool name_like(const char *name, const char *want)
{
    for (; *name != '\0' && *want != '\0'; name++, want++)
        if (tolower((unsigned char)(*name == '_' ? '-' : *name)) != tolower((unsigned char)*want))
            return false;
    return *name == '\0' && *want == '\0';
}

static enum MHD_Result check_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct header_check *h = cls;
    const unsigned char *k = (const unsigned char *)(key != NULL ? key : "");
    const unsigned char *v = (const unsigned char *)(value != NULL ? value : "");
    h->name = key != NULL ? key : "";
    if (k[0] == '\0')
        h->problem = "has an empty name";
    for (; h->problem == NULL && *k != '\0'; k++)
        if (*k <= 0x20 || *k >= 0x7f)
            h->problem = "has a blank, control character or non-ASCII byte in its name";
    for (; h->problem == NULL && *v != '\0'; v++)
        if ((*v < 0x20 && *v != '\t') || *v == 0x7f)
            h->problem = "has a control character in its value";
    if (h->problem == NULL && key != NULL && value != NULL && !field_whole(key, value))
        h->problem = "is continued on a folded line (obs-fold), or holds a NUL byte in its name";
    if (h->problem == NULL && strchr(h->name, '_') != NULL &&
        (name_like(h->name, MHD_HTTP_HEADER_CONTENT_LENGTH) || name_like(h->name, MHD_HTTP_HEADER_TRANSFER_ENCODING)))
        h->problem = "is a framing field spelt with '_' for '-', which a gateway may read as the real one";
    if (h->problem == NULL && strcasecmp(h->name, MHD_HTTP_HEADER_HOST) == 0)
        h->n_host++;
    return h->problem == NULL ? MHD_YES : MHD_NO;
}

/*
 * RFC 9112 5.1, 5.2 and RFC 9110 5.5: a field name is a token (no blank
 * before the colon), a field value holds no control character but HTAB, and
 * no field is folded onto a second line. MHD 0.9.75 checks none of these:
 * "Content-Length : 5" is stored under the name "Content-Length ", and a
 * folded Content-Length under a longer name (field_whole), neither of which
 * MHD or we read as the body's length, so the body would be parsed as the
 * next request. "Transfer_Encoding" is a token, but CGI-style gateways map
 * '-' and '_' alike, so a front end may take it for Transfer-Encoding while
 * we do not: refused too, as is Content_Length.
 * (A raw NUL in a value is another matter: MHD cuts the value there, and
 * MHD and these checks both see only the part before it; docs/API.md.)
 *
 * RFC 9112 3.2: an HTTP/1.1 request carries exactly one Host field; no
 * request carries two (which one a proxy routed by is anyone's guess).
 */
static bool refuse_headers(struct pulse_hreq *r)
{
    struct header_check h = {NULL, NULL, 0};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, check_header, &h);
    char name[72];
    if (h.problem != NULL) {
        r->close = true;
        pulse_server_reply_error(r, 400, "invalid_request", "header field \"%s\" %s",
                                 printable(h.name, name, sizeof name), h.problem);
        return true;
    }
    if (h.n_host > 1 || (h.n_host == 0 && r->http11)) {
        r->close = true;
        pulse_server_reply_error(r, 400, "invalid_request", "%s",
                                 h.n_host > 1 ? "a request must carry at most one Host header field"
                                              : "an HTTP/1.1 request must carry a Host header field");
        return true;
    }
    return false;
}

struct query_check {
    enum pulse_route route;
    enum pulse_method method;
    unsigned seen; /* bit i: the router's parameter i was given */
    const char *name;
    const char *problem; /* NULL: all known, once, with values */
};

static enum MHD_Result check_query_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct query_check *q = cls;
    int i = pulse_router_query_index(q->route, q->method, key != NULL ? key : "");
    q->name = key != NULL ? key : "";
    if (i < 0)
        q->problem = "is not known on this route";
    else if (q->seen & (1u << i))
        q->problem = "is given more than once";
    else if (value == NULL)
        q->problem = "needs a value (name=value)";
    if (q->problem != NULL)
        return MHD_NO;
    q->seen |= 1u << i;
    return MHD_YES;
}

/* Every query parameter must be one the route takes, once: a misspelt one
 * ("ofset") must never be ignored in silence. */
static bool refuse_query(struct pulse_hreq *r)
{
    struct query_check q = {r->match.route, r->method, 0, NULL, NULL};
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, check_query_arg, &q);
    if (q.problem == NULL)
        return false;
    char name[104];
    pulse_server_reply_error(r, 400, "invalid_request", "query parameter \"%s\" %s",
                             printable(q.name, name, sizeof name), q.problem);
    return true;
}

static void reply_not_allowed(struct pulse_hreq *r)
{
    char allow[64];
    pulse_router_allow_header(r->match.route, allow, sizeof allow);
    char msg[128];
    snprintf(msg, sizeof msg, "method not allowed; allowed: %s", allow);
    json_t *body = pulse_json_error("method_not_allowed", msg);
    char *text = NULL;
    size_t len = 0;
    if (body == NULL || pulse_json_dump(body, 0, &text, &len) != PULSE_OK) {
        json_decref(body);
        reply_oom(r);
        return;
    }
    json_decref(body);
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, text, pulse_free);
    if (resp == NULL) {
        pulse_free(text);
        reply_oom(r);
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    pulse_server_reply(r, 405, resp, PULSE_MEDIA_JSON);
}

/* Headers of a body-taking request: encoding, type, declared size, and
 * the budget for the body. */
static void begin_body(struct pulse_hreq *r)
{
    struct pulse_server *srv = r->srv;
    enum pulse_route route = r->match.route;
    const char *enc = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
    if (enc != NULL && !pulse_request_media_is(enc, "identity")) {
        if (!pulse_request_media_is(enc, "gzip")) {
            pulse_server_reply_error(r, 415, "unsupported_media_type", "Content-Encoding \"%s\" is not supported",
                                     enc);
            return;
        }
        r->gzip = true;
    }
    const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ct == NULL || pulse_request_media_is(ct, PULSE_MEDIA_JSON)) {
        r->body_kind = PULSE_BODY_JSON;
    } else if (route == PULSE_ROUTE_PUBLISH && pulse_request_media_is(ct, PULSE_MEDIA_OCTETS)) {
        r->body_kind = PULSE_BODY_OCTETS;
    } else if (route == PULSE_ROUTE_PUBLISH && pulse_request_media_is(ct, PULSE_MEDIA_NDJSON)) {
        r->body_kind = PULSE_BODY_NDJSON;
    } else {
        pulse_server_reply_error(r, 415, "unsupported_media_type", "Content-Type \"%s\" is not accepted here", ct);
        return;
    }
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    int64_t len = 0;
    if (cl == NULL || pulse_request_parse_i64(cl, 0, INT64_MAX, &len) != PULSE_OK)
        return; /* chunked: the reservation grows with the body */
    if ((uint64_t)len > srv->cfg->max_body_bytes) {
        /* Answered before the body is read: MHD skips "100 Continue" and
         * closes the connection instead of reading megabytes we refuse. */
        pulse_server_reply_error(r, 413, "payload_too_large", "request body is larger than %llu bytes",
                                 (unsigned long long)srv->cfg->max_body_bytes);
        return;
    }
    /* A declared body is reserved whole, before a byte of it is read, and
     * its buffer can never grow past what was reserved. */
    if (!pulse_server_mem_take(r, (uint64_t)len)) {
        r->close = true; /* its body is not read */
        pulse_server_reply_over_budget(r);
        return;
    }
    pulse_buf_set_max(&r->body, (size_t)len);
}

/* Refusals decided from the request line and headers alone. */
static void begin(struct pulse_hreq *r)
{
    struct pulse_server *srv = r->srv;
    enum pulse_route route = r->match.route;
    if (r->line_problem != NULL) {
        r->close = true;
        pulse_server_reply_error(r, 400, "invalid_request", "%s", r->line_problem);
        return;
    }
    if (refuse_headers(r) || refuse_framing(r))
        return;
    if (pulse_conns_target(r->hc)->decoded_bad) {
        pulse_server_reply_error(r, 400, "invalid_request",
                                 "the request path or a query parameter holds a control character once decoded "
                                 "(such as %%00)");
        return;
    }
    if (route == PULSE_ROUTE_NONE) {
        char path[160];
        pulse_server_reply_error(r, 404, "not_found", "no such resource: %s", printable(r->url, path, sizeof path));
        return;
    }
    if (!pulse_router_allows(route, r->method)) {
        reply_not_allowed(r);
        return;
    }
    if (refuse_query(r))
        return;
    if (atomic_load(&srv->stopping) && route != PULSE_ROUTE_HEALTHZ) {
        pulse_server_reply_not_serving(r, "the broker is shutting down");
        return;
    }
    if (srv->broker == NULL && route != PULSE_ROUTE_HEALTHZ) {
        pulse_server_reply_not_serving(r, "the broker is starting (recovery in progress)");
        return;
    }
    if (route_answers_json(route)) {
        const char *accept = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
        if (pulse_request_accept(accept, false) == PULSE_ACCEPT_NONE) {
            pulse_server_reply_error(r, 406, "not_acceptable", "this resource is only available as %s",
                                     PULSE_MEDIA_JSON);
            return;
        }
    }
    r->wants_body = route_wants_body(route, r->method);
    if (r->wants_body)
        begin_body(r);
}

static void dispatch(struct pulse_hreq *r)
{
    switch (r->match.route) {
    case PULSE_ROUTE_HEALTHZ:
        pulse_h_ops_healthz(r);
        return;
    case PULSE_ROUTE_READYZ:
        pulse_h_ops_readyz(r);
        return;
    case PULSE_ROUTE_METRICS:
        pulse_h_ops_metrics(r);
        return;
    case PULSE_ROUTE_OPENAPI:
        pulse_h_ops_openapi(r);
        return;
    case PULSE_ROUTE_BROKER:
        pulse_h_ops_broker(r);
        return;
    case PULSE_ROUTE_TOPICS:
        if (r->method == PULSE_METHOD_POST)
            pulse_h_topics_create(r);
        else
            pulse_h_topics_list(r);
        return;
    case PULSE_ROUTE_TOPIC:
        if (r->method == PULSE_METHOD_PATCH)
            pulse_h_topics_patch(r);
        else if (r->method == PULSE_METHOD_DELETE)
            pulse_h_topics_delete(r);
        else
            pulse_h_topics_get(r);
        return;
    case PULSE_ROUTE_PUBLISH:
        pulse_h_publish_post(r);
        return;
    case PULSE_ROUTE_FETCH:
        pulse_h_fetch_get(r);
        return;
    case PULSE_ROUTE_CONSUMERS:
        pulse_h_consumers_list(r);
        return;
    case PULSE_ROUTE_CONSUMER:
        pulse_h_consumers_delete(r);
        return;
    case PULSE_ROUTE_CURSORS:
        if (r->method == PULSE_METHOD_POST)
            pulse_h_consumers_cursors_commit(r);
        else
            pulse_h_consumers_cursors_list(r);
        return;
    case PULSE_ROUTE_CURSOR:
        if (r->method == PULSE_METHOD_PUT)
            pulse_h_consumers_cursor_put(r);
        else
            pulse_h_consumers_cursor_get(r);
        return;
    case PULSE_ROUTE_NONE:
        break;
    }
    pulse_server_reply_error(r, 404, "not_found", "no such resource: %s", r->url);
}

/* The inflated body grows within the budget, up to max-body-bytes. */
static pulse_status_t grow_inflated(void *arg, struct pulse_buf *out, size_t n)
{
    struct pulse_hreq *r = arg;
    return pulse_server_mem_grow(r, out, n, (size_t)r->srv->cfg->max_body_bytes);
}

/* Keeps a body chunk, within max-body-bytes and the budget; past either it
 * is dropped and remembered (answered at the end: the client sees the
 * answer instead of a reset). */
static void take_upload(struct pulse_hreq *r, const char *data, size_t n)
{
    if (r->state != PULSE_HREQ_NEW || !r->wants_body || r->too_large || r->over_budget)
        return;
    pulse_status_t st = pulse_server_mem_grow(r, &r->body, n, (size_t)r->srv->cfg->max_body_bytes);
    if (st == PULSE_OK)
        st = pulse_buf_append(&r->body, data, n);
    if (st == PULSE_OK)
        return;
    if (st == PULSE_BUSY)
        r->over_budget = true;
    else
        r->too_large = true;
    pulse_buf_fini(&r->body);
}

/* The whole request is in: decode the body and run the handler. */
static void finish(struct pulse_hreq *r)
{
    struct pulse_server *srv = r->srv;
    if (atomic_load(&srv->stopping) && r->match.route != PULSE_ROUTE_HEALTHZ) {
        pulse_server_reply_not_serving(r, "the broker is shutting down");
        return;
    }
    if (r->too_large) {
        pulse_server_reply_error(r, 413, "payload_too_large", "request body is larger than %llu bytes",
                                 (unsigned long long)srv->cfg->max_body_bytes);
        return;
    }
    if (r->over_budget) {
        pulse_server_reply_over_budget(r);
        return;
    }
    if (r->gzip) {
        struct pulse_buf plain;
        pulse_buf_init(&plain, 0);
        pulse_status_t st = pulse_request_gunzip(r->body.data, r->body.len, &plain, grow_inflated, r);
        if (st != PULSE_OK) {
            pulse_buf_fini(&plain);
            if (st == PULSE_BUSY)
                pulse_server_reply_over_budget(r);
            else if (st == PULSE_TOO_LARGE)
                pulse_server_reply_error(r, 413, "payload_too_large",
                                         "decompressed request body is larger than %llu bytes",
                                         (unsigned long long)srv->cfg->max_body_bytes);
            else if (st == PULSE_INVALID)
                pulse_server_reply_error(r, 400, "invalid_request", "request body is not valid gzip");
            else
                pulse_server_reply_status(r, st, NULL);
            return;
        }
        pulse_buf_fini(&r->body);
        r->body = plain;
    }
    dispatch(r);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size,
                                 void **con_cls)
{
    struct pulse_server *srv = cls;
    struct pulse_hreq *r = *con_cls;

    if (r == NULL) {
        pulse_mhdfix_head_handled();
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        struct pulse_conn *hc = ci != NULL ? ci->socket_context : NULL;
        /* No registry entry (it could not be made) or the head came after
         * its deadline (the socket is being shut down): drop the request. */
        if (hc == NULL || !pulse_conns_head_arrived(srv->conns, hc))
            return MHD_NO;
        r = hreq_create(srv, conn, url, method);
        if (r == NULL)
            return MHD_NO; /* out of memory: drop the connection */
        r->hc = hc;
        r->line_problem = request_line_problem(hc, method, url, version);
        /* HTTP/1.1 and any later 1.x (MHD takes those as 1.1) need Host. */
        r->http11 = version != NULL && strncmp(version, "HTTP/1.", 7) == 0 && strcmp(version, "HTTP/1.0") != 0;
        atomic_fetch_add(&srv->inflight, 1);
        atomic_fetch_add(&srv->receiving, 1);
        *con_cls = r;
        begin(r);
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        pulse_conns_body_bytes(r->hc, *upload_data_size);
        take_upload(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (!r->received) {
        r->received = true;
        atomic_fetch_sub(&srv->receiving, 1);
        /* The body came after its deadline (the socket is being shut
         * down): no answer could reach the client, so never act on it. */
        if (!pulse_conns_body_done(srv->conns, r->hc))
            return MHD_NO;
    }
    switch (r->state) {
    case PULSE_HREQ_NEW:
        finish(r);
        break;
    case PULSE_HREQ_SUSPENDED:
        r->state = PULSE_HREQ_NEW;
        atomic_fetch_sub(&srv->suspended, 1);
        r->resume(r);
        break;
    case PULSE_HREQ_ANSWERED:
        return MHD_YES;
    }
    /* Neither answered nor suspended: the answer could not be queued. */
    return r->state == PULSE_HREQ_NEW ? MHD_NO : MHD_YES;
}

static size_t latency_bucket(double secs)
{
    size_t i = 0;
    while (i < PULSE_HTTP_LATENCY_BUCKETS && secs > latency_bounds[i])
        i++;
    return i; /* PULSE_HTTP_LATENCY_BUCKETS = +Inf only */
}

static void record_metrics(struct pulse_server *srv, const struct pulse_hreq *r, double secs)
{
    enum pulse_route route = r->match.route;
    pthread_mutex_lock(&srv->mlock);
    if (r->status != 0) {
        size_t i = 0;
        for (; i < srv->n_rows; i++) {
            struct pulse_http_metric_row *row = &srv->rows[i];
            if (row->route == route && row->method == r->method && row->status == r->status)
                break;
        }
        if (i == srv->n_rows && srv->n_rows == srv->cap_rows) {
            size_t ncap = srv->cap_rows == 0 ? 32 : srv->cap_rows * 2;
            struct pulse_http_metric_row *nrows = pulse_realloc(srv->rows, ncap * sizeof *nrows);
            if (nrows != NULL) {
                srv->rows = nrows;
                srv->cap_rows = ncap;
            }
        }
        if (i < srv->n_rows) {
            srv->rows[i].count++;
        } else if (srv->n_rows < srv->cap_rows) {
            srv->rows[i] = (struct pulse_http_metric_row){route, r->method, r->status, 1};
            srv->n_rows++;
        }
    }
    size_t b = latency_bucket(secs);
    if (b < PULSE_HTTP_LATENCY_BUCKETS)
        srv->lat_buckets[route][b]++;
    srv->lat_count[route]++;
    srv->lat_sum[route] += secs;
    pthread_mutex_unlock(&srv->mlock);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    struct pulse_server *srv = cls;
    struct pulse_hreq *r = *con_cls;
    /* A kept-alive connection owes its next request head from now. */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci != NULL && ci->socket_context != NULL)
        pulse_conns_request_done(srv->conns, ci->socket_context);
    if (r == NULL)
        return;
    *con_cls = NULL;
    double secs = (double)(pulse_clock_mono_us() - r->start_us) / 1e6;
    record_metrics(srv, r, secs);
    if (pulse_log_enabled(PULSE_LOG_DEBUG))
        PULSE_DEBUG_LOG("http %s %s status=%u duration_ms=%.3f request_id=%s%s",
                        pulse_router_method_name(r->method), r->url, r->status, secs * 1000.0, r->id,
                        toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)");
    if (!r->received)
        atomic_fetch_sub(&srv->receiving, 1);
    /* The one place a request's memory reservation is given back. */
    pulse_budget_release(&srv->budget, r->mem_held);
    r->mem_held = 0;
    hreq_free(r);
    atomic_fetch_sub(&srv->inflight, 1);
}

/* ---- connections ------------------------------------------------------ */

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct pulse_server *srv = cls;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        pulse_mhdfix_closed(conn);
        /* Called before MHD closes the socket (see conns.h). */
        pulse_conns_closed(srv->conns, *socket_context);
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    int fd = ci != NULL ? (int)ci->connect_fd : -1;
    *socket_context = fd >= 0 ? pulse_conns_opened(srv->conns, fd) : NULL;
    /* A connection without an entry would have no head deadline: refuse
     * it (MHD reads end-of-file and closes it; on_access drops it too). */
    if (*socket_context == NULL && fd >= 0)
        (void)shutdown(fd, SHUT_RDWR);
}

/*
 * MHD_OPTION_URI_LOG_CALLBACK. libmicrohttpd 0.9.75 (connection.c,
 * parse_initial_message_line) calls it once per request with the raw
 * request target - path and query as they came, before either is split at
 * '?' or decoded - after writing a NUL over the blank before the HTTP
 * version, and before the unescape callback and the access handler. A raw
 * NUL byte inside the target cuts every string MHD hands over later
 * ("DELETE /v1/topics/orders<NUL>.archive" reaches the handler as
 * "/v1/topics/orders"), and nothing else reports it; so the length seen
 * here is kept for the access handler, which compares it with where MHD
 * put the version (request_line_whole). A raw control byte, blank or DEL
 * in the target (never valid there, RFC 9112 3.2) is flagged here too, so
 * it is refused whatever decoding makes of it. Returns NULL: the request's
 * context is still made by the access handler.
 */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    pulse_mhdfix_request_line(conn);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci == NULL || ci->socket_context == NULL)
        return NULL;
    struct pulse_target_note *note = pulse_conns_target(ci->socket_context);
    note->raw_len = SIZE_MAX;
    note->raw_bad = false;
    note->decoded_bad = false;
    if (uri == NULL)
        return NULL;
    size_t n = 0;
    for (; uri[n] != '\0'; n++) {
        unsigned char c = (unsigned char)uri[n];
        if (c <= 0x20 || c == 0x7f)
            note->raw_bad = true;
    }
    note->raw_len = n;
    return NULL;
}

/*
 * MHD's own decoding (MHD_http_unescape: %HH, nothing else), plus a check
 * MHD lacks: a control character in the result (a NUL cuts the string MHD
 * hands over; CR, LF and the rest have no place in a name, key or number)
 * flags the request, which begin() refuses with 400. Called for the path
 * and for every query name and value, on the connection's own thread,
 * before the access handler.
 */
static size_t on_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
    (void)cls;
    size_t n = MHD_http_unescape(s);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) {
            const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
            if (ci != NULL && ci->socket_context != NULL)
                pulse_conns_target(ci->socket_context)->decoded_bad = true;
            break;
        }
    }
    return n;
}

/* ---- metrics ---------------------------------------------------------- */

/* The connection registry and the memory budget. */
static pulse_status_t limits_metrics(struct pulse_server *srv, struct pulse_buf *out)
{
    struct pulse_conns_counts cst;
    pulse_conns_stats(srv->conns, &cst);
    return pulse_buf_printf(
        out,
        "# HELP pulse_http_connections Open client connections.\n"
        "# TYPE pulse_http_connections gauge\n"
        "pulse_http_connections %llu\n"
        "# HELP pulse_http_header_timeouts_total Connections closed because no request head arrived within "
        "server.header-timeout.\n"
        "# TYPE pulse_http_header_timeouts_total counter\n"
        "pulse_http_header_timeouts_total %llu\n"
        "# HELP pulse_http_body_timeouts_total Connections closed because a request body did not arrive within "
        "server.body-timeout, or slower than server.body-min-rate after that.\n"
        "# TYPE pulse_http_body_timeouts_total counter\n"
        "pulse_http_body_timeouts_total %llu\n"
        "# HELP pulse_http_busy_closes_total Of the head and body timeouts, connections closed after 1 s already "
        "because every connection slot (server.max-connections) was taken.\n"
        "# TYPE pulse_http_busy_closes_total counter\n"
        "pulse_http_busy_closes_total %llu\n"
        "# HELP pulse_http_memory_budget_bytes The in-flight request and answer memory budget "
        "(server.memory-budget).\n"
        "# TYPE pulse_http_memory_budget_bytes gauge\n"
        "pulse_http_memory_budget_bytes %llu\n"
        "# HELP pulse_http_memory_reserved_bytes Budget reserved by requests in flight.\n"
        "# TYPE pulse_http_memory_reserved_bytes gauge\n"
        "pulse_http_memory_reserved_bytes %llu\n"
        "# HELP pulse_http_memory_refusals_total Reservations the budget refused (answered 503).\n"
        "# TYPE pulse_http_memory_refusals_total counter\n"
        "pulse_http_memory_refusals_total %llu\n",
        (unsigned long long)cst.open, (unsigned long long)cst.head_timeouts,
        (unsigned long long)cst.body_timeouts, (unsigned long long)cst.busy_closes,
        (unsigned long long)srv->budget.limit,
        (unsigned long long)pulse_budget_used(&srv->budget),
        (unsigned long long)pulse_budget_refusals(&srv->budget));
}

pulse_status_t pulse_server_metrics(struct pulse_server *srv, struct pulse_buf *out)
{
    pulse_status_t st = PULSE_OK;
    pthread_mutex_lock(&srv->mlock);
    st = pulse_buf_printf(out, "# HELP pulse_http_requests_total HTTP requests answered.\n"
                               "# TYPE pulse_http_requests_total counter\n");
    for (size_t i = 0; st == PULSE_OK && i < srv->n_rows; i++) {
        const struct pulse_http_metric_row *row = &srv->rows[i];
        st = pulse_buf_printf(out, "pulse_http_requests_total{route=\"%s\",method=\"%s\",status=\"%u\"} %llu\n",
                              pulse_router_template(row->route), pulse_router_method_name(row->method),
                              row->status, (unsigned long long)row->count);
    }
    if (st == PULSE_OK)
        st = pulse_buf_printf(out, "# HELP pulse_http_request_duration_seconds Time from request to answer.\n"
                                   "# TYPE pulse_http_request_duration_seconds histogram\n");
    for (size_t rt = 0; st == PULSE_OK && rt <= PULSE_ROUTE_NONE; rt++) {
        if (srv->lat_count[rt] == 0)
            continue;
        const char *tmpl = pulse_router_template((enum pulse_route)rt);
        uint64_t cum = 0;
        for (size_t b = 0; st == PULSE_OK && b < PULSE_HTTP_LATENCY_BUCKETS; b++) {
            cum += srv->lat_buckets[rt][b];
            st = pulse_buf_printf(out, "pulse_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                                  tmpl, latency_bounds[b], (unsigned long long)cum);
        }
        if (st == PULSE_OK)
            st = pulse_buf_printf(out,
                                  "pulse_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n"
                                  "pulse_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n"
                                  "pulse_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
                                  tmpl, (unsigned long long)srv->lat_count[rt], tmpl, srv->lat_sum[rt], tmpl,
                                  (unsigned long long)srv->lat_count[rt]);
    }
    pthread_mutex_unlock(&srv->mlock);
    if (st == PULSE_OK)
        st = pulse_buf_printf(out,
                              "# HELP pulse_http_requests_in_flight Requests received and not yet completed.\n"
                              "# TYPE pulse_http_requests_in_flight gauge\n"
                              "pulse_http_requests_in_flight %ld\n"
                              "# HELP pulse_build_info Build information.\n"
                              "# TYPE pulse_build_info gauge\n"
                              "pulse_build_info{version=\"%s\"} 1\n"
                              "# HELP pulse_uptime_seconds Seconds since the server started.\n"
                              "# TYPE pulse_uptime_seconds gauge\n"
                              "pulse_uptime_seconds %.3f\n",
                              atomic_load(&srv->inflight), PULSE_HTTP_VERSION,
                              (double)(pulse_clock_mono_us() - srv->started_mono_us) / 1e6);
    if (st == PULSE_OK)
        st = limits_metrics(srv, out);
    return st;
}

/* ---- lifecycle -------------------------------------------------------- */

static void mhd_logger(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Rate-limited by MHD's format string: at the descriptor limit MHD retries
 * accept() in a loop and reports every failure (c-notes section 8). Two of
 * MHD's refusals are answered by mhdfix.h before MHD answers them wrongly. */
static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    (void)pulse_mhdfix_log(fmt);
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    pulse_log_limited(PULSE_LOG_WARN, fmt, "libmicrohttpd: %s", msg);
}

/* Binds and listens ourselves so a busy port is reported with its errno,
 * then hands the socket to MHD. */
static pulse_status_t open_listener(const char *listen_addr, int *fd_out, bool *v6_out, uint16_t *port_out,
                                    char *errbuf, size_t errlen)
{
    pulse_status_t st = PULSE_OK;
    char host[256];
    uint16_t port = 0;
    bool v6 = false;
    int fd = -1;
    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    memset(&ss, 0, sizeof ss);

    if (pulse_config_split_listen(listen_addr, host, sizeof host, &port, &v6) != PULSE_OK) {
        st = PULSE_INVALID;
        pulse_errbuf_set(errbuf, errlen, "server.listen: \"%s\" is not HOST:PORT", listen_addr);
        goto out;
    }
    if (!v6 && strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    if (v6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(port);
        if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
            st = PULSE_INVALID;
        sslen = sizeof *a6;
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
        a4->sin_family = AF_INET;
        a4->sin_port = htons(port);
        if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
            st = PULSE_INVALID;
        sslen = sizeof *a4;
    }
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "server.listen: \"%s\" is not an IP address", host);
        goto out;
    }
    fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        int err = errno;
        st = PULSE_IO;
        pulse_errbuf_set(errbuf, errlen, "socket: %s", strerror(err));
        goto out;
    }
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sslen) != 0 || listen(fd, 511) != 0) {
        int err = errno;
        st = PULSE_IO;
        pulse_errbuf_set(errbuf, errlen, "cannot listen on %s: %s", listen_addr, strerror(err));
        goto out;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
        port = ntohs(v6 ? ((struct sockaddr_in6 *)&bound)->sin6_port : ((struct sockaddr_in *)&bound)->sin_port);
    *fd_out = fd;
    *v6_out = v6;
    *port_out = port;
    fd = -1;
out:
    if (fd >= 0)
        close(fd);
    return st;
}

/* Accept policy: once the server is stopping, a new connection is closed
 * as soon as it is accepted (see pulse_server_shutdown). Thread: an MHD
 * worker. */
static enum MHD_Result on_accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    struct pulse_server *srv = cls;

    (void)addr;
    (void)addrlen;
    return atomic_load(&srv->stopping) ? MHD_NO : MHD_YES;
}

pulse_status_t pulse_server_create(const struct pulse_config *cfg, struct pulse_broker *broker,
                                   struct pulse_server **out, char *errbuf, size_t errlen)
{
    pulse_status_t st = PULSE_OK;
    struct pulse_server *srv = NULL;
    int fd = -1;
    bool v6 = false;
    uint16_t port = 0;

    st = open_listener(cfg->listen, &fd, &v6, &port, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    srv = pulse_calloc(1, sizeof *srv);
    if (srv == NULL) {
        st = PULSE_NOMEM;
        pulse_errbuf_set(errbuf, errlen, "out of memory");
        goto out;
    }
    srv->cfg = cfg;
    srv->broker = broker;
    srv->port = port;
    srv->started_mono_us = pulse_clock_mono_us();
    pthread_mutex_init(&srv->mlock, NULL);
    pulse_budget_init(&srv->budget, cfg->memory_budget);
    struct pulse_conns_limits limits = {cfg->header_timeout_ms, cfg->body_timeout_ms, cfg->body_min_rate,
                                        (uint64_t)cfg->max_connections};
    st = pulse_conns_create(&limits, &srv->conns);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "cannot start the connection registry: %s", pulse_status_message(st));
        goto out;
    }

    unsigned threads = (unsigned)cfg->threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    /* One worker means MHD's single internal thread: the pool option is
     * passed only for two or more (MHD warns about a pool of 0 or 1). */
    struct MHD_OptionItem pool[2] = {{MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}};
    if (threads > 1)
        pool[0] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)threads, NULL};
    /* MHD's timeout is whole seconds; 0 would mean "never", so round up. */
    unsigned timeout_s = (unsigned)((cfg->connection_timeout_ms + 999) / 1000);
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (v6)
        flags |= MHD_USE_IPv6;
    srv->daemon = MHD_start_daemon(
        flags, 0, on_accept_policy, srv, on_access, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, srv,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
        MHD_OPTION_ARRAY, pool, MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)cfg->max_connections_per_ip, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY_LIMIT,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
        MHD_OPTION_UNESCAPE_CALLBACK, on_unescape, srv, MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv, MHD_OPTION_END);
    if (srv->daemon == NULL) {
        st = PULSE_IO;
        pulse_errbuf_set(errbuf, errlen, "cannot start the HTTP server on %s (see the libmicrohttpd message above)",
                cfg->listen);
        goto out;
    }
    fd = -1; /* the daemon owns it now */
    *out = srv;
    srv = NULL;
out:
    if (fd >= 0)
        close(fd);
    if (srv != NULL) {
        pulse_conns_destroy(srv->conns);
        pthread_mutex_destroy(&srv->mlock);
        pulse_free(srv);
    }
    return st;
}

uint16_t pulse_server_port(const struct pulse_server *srv)
{
    return srv->port;
}

void pulse_server_attach(struct pulse_server *srv, struct pulse_broker *broker)
{
    srv->broker = broker;
}

void pulse_server_set_ready(struct pulse_server *srv, bool ready)
{
    atomic_store(&srv->ready, ready);
}

pulse_status_t pulse_server_shutdown(struct pulse_server *srv, int64_t deadline_ms)
{
    if (srv->daemon == NULL)
        return PULSE_OK;
    atomic_store(&srv->ready, false);
    /* From here new connections are refused at accept (on_accept_policy),
     * and handlers answer 503 and never suspend. Not MHD_quiesce_daemon:
     * in libmicrohttpd 0.9.75 it races with the epoll workers, which
     * remove the listen socket from their epoll sets themselves once they
     * see the daemon quiesced, and the loser of that race aborts the
     * process ("Failed to remove listen FD from epoll set"). */
    atomic_store(&srv->stopping, true);
    /* Parked long-polls are completed (their connections resume and
     * answer); publishes already written reach durability and answer. */
    if (srv->broker != NULL)
        pulse_broker_drain(srv->broker);
    /* Wait for every request that has fully arrived to be answered. A
     * request whose body is still coming in is not waited for: its client
     * may have gone away without MHD noticing (a suspended-free idle
     * upload), and MHD_stop_daemon closes it; it was never acted on. */
    int64_t until = pulse_clock_mono_us() + deadline_ms * 1000;
    while (atomic_load(&srv->inflight) - atomic_load(&srv->receiving) > 0 && pulse_clock_mono_us() < until) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    long left = atomic_load(&srv->inflight) - atomic_load(&srv->receiving);
    if (left > 0)
        PULSE_WARN("shutdown: %ld request(s) still in flight after %lld ms", left, (long long)deadline_ms);
    if (atomic_load(&srv->receiving) > 0)
        PULSE_INFO("shutdown: closing %ld connection(s) whose request body never finished arriving",
                   atomic_load(&srv->receiving));
    if (atomic_load(&srv->suspended) > 0) {
        /* MHD_stop_daemon aborts the process with a suspended connection. */
        PULSE_ERROR("shutdown: %ld connection(s) still suspended; not stopping the HTTP server cleanly",
                    atomic_load(&srv->suspended));
        return PULSE_BUSY;
    }
    MHD_stop_daemon(srv->daemon); /* closes the listen socket too */
    srv->daemon = NULL;
    return PULSE_OK;
}

void pulse_server_destroy(struct pulse_server *srv)
{
    if (srv == NULL)
        return;
    if (srv->daemon != NULL && atomic_load(&srv->suspended) == 0) {
        MHD_stop_daemon(srv->daemon);
        srv->daemon = NULL;
    }
    /* With the daemon still running (a suspended connection kept it), its
     * workers may still call into the registry: leave it to the exit. */
    if (srv->daemon == NULL)
        pulse_conns_destroy(srv->conns);
    pthread_mutex_destroy(&srv->mlock);
    pulse_free(srv->rows);
    pulse_free(srv);
}
