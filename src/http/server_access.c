/* SPDX-License-Identifier: MIT */
/*
 * server_access.c - the life of a request: its context, the refusals
 * decided before its body is read, the body, the dispatch to the route's
 * handler, suspension and resumption, and its completion.
 *
 * Threading: MHD runs an epoll thread pool; every handler runs on the worker
 * that owns its connection and must never block. A publish, long-poll,
 * cursor commit, topic create/patch/delete or consumer delete suspends its
 * connection first and then calls the broker; the broker's callback (syncer,
 * committer or admin thread, or this thread) stores a status and resumes the
 * connection; MHD calls the access handler again on the owning worker, which
 * answers. Resume is called exactly once per suspend.
 *
 * Request flow in pulse_server_on_access:
 *   1st call  create the context; refuse early what can be refused from the
 *             headers alone, so an oversized body is never read: a raw NUL,
 *             control byte or blank in the request line, a header field
 *             name that is not a token or a control character in a header
 *             value, framing that could smuggle a second request
 *             (400/501/413, and the connection is closed; server_checks.c),
 *             a control character decoded from the target (400), 404, 405,
 *             an unknown query parameter (400), 503, 406, 415, 413 on
 *             Content-Length, and a body the memory budget cannot hold
 *             (503).
 *   body      append to a capped buffer; a chunked body past the cap is still
 *             consumed but remembered as too large (413 at the end).
 *   last call (size 0) decode gzip, then run the route's handler, or the
 *             resume function after a suspension.
 * The context is freed only in pulse_server_on_completed
 * (MHD_OPTION_NOTIFY_COMPLETED), which also counts the request out of the
 * in-flight gauge, records its metrics and gives its memory reservation
 * back to the budget (server_mem.c).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "http/conns.h"
#include "http/http_int.h"
#include "http/json.h"
#include "http/mhdfix.h"
#include "http/server_int.h"

/* ---- the request context ------------------------------------------------ */

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
    r->origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    r->cors = pulse_cors_judge_scheme(srv->cfg->server.cors_origins, r->origin,
                                      MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST),
                                      srv->tls_pem.cert != NULL);
    return r;
}

static void hreq_free(struct pulse_hreq *r)
{
    if (r == NULL)
        return;
    pulse_server_pool_free(r);
    json_decref(r->doc);
    pulse_buf_fini(&r->body);
    pulse_free(r);
}

/* ---- suspension ---------------------------------------------------------- */

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

/* ---- the access handler ------------------------------------------------- */

static bool route_wants_body(enum pulse_route route, enum pulse_method m)
{
    return (route == PULSE_ROUTE_TOPICS && m == PULSE_METHOD_POST) ||
           (route == PULSE_ROUTE_TOPIC && m == PULSE_METHOD_PATCH) ||
           (route == PULSE_ROUTE_PUBLISH && m == PULSE_METHOD_POST) ||
           (route == PULSE_ROUTE_CURSORS && m == PULSE_METHOD_POST) ||
           (route == PULSE_ROUTE_CURSOR && m == PULSE_METHOD_PUT) ||
           (route == PULSE_ROUTE_GROUP_MEMBERS && m == PULSE_METHOD_POST) ||
           (route == PULSE_ROUTE_GROUP_COMMIT && m == PULSE_METHOD_POST);
}

/* Files compiled into pulsed (h_static.c): served while the broker starts
 * too, so the dashboard can say that it does. */
static bool route_is_file(enum pulse_route route)
{
    return route == PULSE_ROUTE_DASHBOARD || route == PULSE_ROUTE_ASSET;
}

static bool route_answers_json(enum pulse_route route)
{
    return route != PULSE_ROUTE_METRICS && route != PULSE_ROUTE_OPENAPI && route != PULSE_ROUTE_FETCH &&
           route != PULSE_ROUTE_EVENTS && !route_is_file(route);
}

static void reply_not_allowed(struct pulse_hreq *r)
{
    char allow[PULSE_ROUTER_ALLOW_MAX];
    pulse_router_allow_header(r->match.route, allow, sizeof allow);
    char msg[320];
    snprintf(msg, sizeof msg, "method not allowed; allowed: %s", allow);
    json_t *body = pulse_json_error("method_not_allowed", msg);
    char *text = NULL;
    size_t len = 0;
    if (body == NULL || pulse_server_json_text(body, 0, &text, &len) != PULSE_OK) {
        json_decref(body);
        pulse_server_reply_oom(r);
        return;
    }
    json_decref(body);
    struct MHD_Response *resp = pulse_server_json_response(r, text, len);
    if (resp == NULL) {
        pulse_server_reply_oom(r);
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
            pulse_server_reply_error(r, 415, "unsupported_media_type", "Content-Encoding \"%s\" is not supported", enc);
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
        pulse_server_reply_error(r, 415, "unsupported_media_type",
                                 "Content-Type \"%s\" is not accepted here; send %s (with curl: -H 'Content-Type: "
                                 "application/json')",
                                 ct,
                                 route == PULSE_ROUTE_PUBLISH
                                     ? "application/json, application/x-ndjson or application/octet-stream"
                                     : "application/json");
        return;
    }
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    int64_t len = 0;
    if (cl == NULL || pulse_request_parse_i64(cl, 0, INT64_MAX, &len) != PULSE_OK)
        return; /* chunked: the reservation grows with the body */
    if ((uint64_t)len > srv->cfg->server.max_body_bytes) {
        /* Answered before the body is read: MHD skips "100 Continue" and
         * closes the connection instead of reading megabytes we refuse. */
        pulse_server_reply_error(r, 413, "payload_too_large", "request body is larger than %llu bytes",
                                 (unsigned long long)srv->cfg->server.max_body_bytes);
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
    /* mTLS: a client without a certificate the configured authority
     * signed gets nothing but this, on any route. */
    char why[256];
    if (srv->mtls && pulse_tls_client_problem(r->conn, why, sizeof why)) {
        r->close = true;
        pulse_server_reply_error(r, 403, "forbidden",
                                 "this server requires a client certificate signed by the authority of "
                                 "tls.client-ca-file: %s",
                                 why);
        return;
    }
    if (r->line_problem != NULL) {
        r->close = true;
        pulse_server_reply_error(r, 400, "invalid_request", "%s", r->line_problem);
        return;
    }
    if (pulse_server_refuse_headers(r) || pulse_server_refuse_framing(r))
        return;
    if (pulse_conns_target(r->hc)->decoded_bad) {
        pulse_server_reply_error(r, 400, "invalid_request",
                                 "the request path or a query parameter holds a control character once decoded "
                                 "(such as %%00)");
        return;
    }
    /* Rate limits come before anything that looks at the route: a client
     * over its limit is refused whatever it asks, and its body is never
     * read. With bearer tokens the client is its token, known only once
     * the token is verified: the check waits for that (below). */
    if (srv->auth == NULL && pulse_server_refuse_rate(r))
        return;
    if (route == PULSE_ROUTE_NONE) {
        char path[160];
        pulse_server_reply_error(r, 404, "not_found", "no such resource: %s",
                                 pulse_server_printable(r->url, path, sizeof path));
        return;
    }
    /* OPTIONS is answered from the router's table once the request is in
     * (finish), so the connection stays open for the browser's request
     * that follows a preflight. */
    if (r->method == PULSE_METHOD_OPTIONS)
        return;
    if (!pulse_router_allows(route, r->method)) {
        reply_not_allowed(r);
        return;
    }
    /* Refused before its body is read: it is never executed. */
    if (r->cors == PULSE_CORS_REFUSED && pulse_router_is_write(r->method)) {
        char origin[160];
        r->close = true;
        pulse_server_reply_error(r, 403, "forbidden",
                                 "origin %s may not write here: it is not this server and server.cors-origins does "
                                 "not list it",
                                 pulse_server_printable(r->origin, origin, sizeof origin));
        return;
    }
    /* Who asks, before anything else is looked at (server_auth.c). */
    if (pulse_server_refuse_auth(r))
        return;
    if (srv->auth != NULL && pulse_server_refuse_rate(r))
        return;
    if (pulse_server_refuse_query(r))
        return;
    if (atomic_load(&srv->stopping) && route != PULSE_ROUTE_HEALTHZ) {
        pulse_server_reply_not_serving(r, "the broker is shutting down");
        return;
    }
    if (srv->broker == NULL && route != PULSE_ROUTE_HEALTHZ && !route_is_file(route)) {
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
    if (r->method == PULSE_METHOD_OPTIONS) {
        pulse_server_reply_options(r);
        return;
    }
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
        pulse_h_static_openapi(r);
        return;
    case PULSE_ROUTE_DASHBOARD:
        pulse_h_static_dashboard(r);
        return;
    case PULSE_ROUTE_ASSET:
        pulse_h_static_asset(r);
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
        if (r->method == PULSE_METHOD_POST)
            pulse_h_publish_post(r);
        else
            pulse_h_topic_read(r); /* GET and HEAD */
        return;
    case PULSE_ROUTE_EVENTS:
        pulse_h_stream_topic(r);
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
    case PULSE_ROUTE_GROUPS:
    case PULSE_ROUTE_GROUP:
    case PULSE_ROUTE_GROUP_MEMBERS:
    case PULSE_ROUTE_GROUP_MEMBER:
    case PULSE_ROUTE_GROUP_HEARTBEAT:
    case PULSE_ROUTE_GROUP_RECORDS:
    case PULSE_ROUTE_GROUP_COMMIT:
        pulse_h_groups(r);
        return;
    case PULSE_ROUTE_PARTITIONS:
    case PULSE_ROUTE_PARTITION:
        pulse_h_topics_partitions(r);
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
    return pulse_server_mem_grow(r, out, n, (size_t)r->srv->cfg->server.max_body_bytes);
}

/* Keeps a body chunk, within max-body-bytes and the budget; past either it
 * is dropped and remembered (answered at the end: the client sees the
 * answer instead of a reset). */
static void take_upload(struct pulse_hreq *r, const char *data, size_t n)
{
    if (r->state != PULSE_HREQ_NEW || !r->wants_body || r->too_large || r->over_budget)
        return;
    pulse_status_t st = pulse_server_mem_grow(r, &r->body, n, (size_t)r->srv->cfg->server.max_body_bytes);
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
                                 (unsigned long long)srv->cfg->server.max_body_bytes);
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
                                         (unsigned long long)srv->cfg->server.max_body_bytes);
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

enum MHD_Result pulse_server_on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
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
        r->line_problem = pulse_server_line_problem(hc, method, url, version);
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
        r->bytes_in += *upload_data_size;
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

/* ---- the access log ------------------------------------------------------- */

/* The client's address as "1.2.3.4:port" or "[::1]:port". */
static void client_address(struct MHD_Connection *conn, char *out, size_t len)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char host[INET6_ADDRSTRLEN] = "-";
    snprintf(out, len, "-");
    if (ci == NULL || ci->client_addr == NULL)
        return;
    if (ci->client_addr->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)(const void *)ci->client_addr;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        snprintf(out, len, "%s:%u", host, (unsigned)ntohs(a->sin_port));
    } else if (ci->client_addr->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)(const void *)ci->client_addr;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        snprintf(out, len, "[%s]:%u", host, (unsigned)ntohs(a->sin6_port));
    }
}

/* The path for a log line: bytes that would break the line's key=value
 * shape (blanks, quotes, backslashes, control and non-ASCII bytes) as %XX,
 * cut at len - 1 bytes. */
static const char *log_path(const char *url, char *out, size_t len)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)url; *p != '\0' && o + 4 < len; p++) {
        if (*p <= 0x20 || *p >= 0x7f || *p == '"' || *p == '\\' || *p == '%')
            o += (size_t)snprintf(out + o, len - o, "%%%02X", *p);
        else
            out[o++] = (char)*p;
    }
    out[o] = '\0';
    return out;
}

/*
 * The one line per request: with server.access-log=on, at info level (time
 * and level come first, from the log); otherwise at debug level when the
 * log shows debug. The token's name, never the token. bytes_out is the
 * answer's body as queued, "-" when it was streamed (its size unknown).
 */
static void log_request(struct pulse_hreq *r, struct MHD_Connection *conn, double secs, bool completed)
{
    bool access = strcmp(r->srv->cfg->server.access_log, "on") == 0;
    if (!access && !pulse_log_enabled(PULSE_LOG_DEBUG))
        return;
    char client[INET6_ADDRSTRLEN + 16];
    char path[512];
    char out[24] = "-";
    const char *token = pulse_server_token_name(r);
    client_address(conn, client, sizeof client);
    if (r->method == PULSE_METHOD_HEAD)
        snprintf(out, sizeof out, "0");
    else if (r->bytes_out >= 0)
        snprintf(out, sizeof out, "%lld", (long long)r->bytes_out);
    char line[1024];
    snprintf(line, sizeof line,
             "access client=%s token=%s method=%s path=%s status=%u bytes_in=%llu bytes_out=%s duration_ms=%.3f "
             "request_id=%s%s",
             client, token != NULL ? token : "-", pulse_router_method_name(r->method),
             log_path(r->url, path, sizeof path), r->status, (unsigned long long)r->bytes_in, out, secs * 1000.0, r->id,
             completed ? "" : " ended=early");
    if (access)
        pulse_log_always(PULSE_LOG_INFO, "%s", line);
    else
        pulse_log(PULSE_LOG_DEBUG, "%s", line);
}

void pulse_server_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                               enum MHD_RequestTerminationCode toe)
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
    pulse_server_metrics_record(srv, r, secs);
    pulse_server_limit_done(r);
    log_request(r, conn, secs, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    pulse_server_auth_done(r);
    if (!r->received)
        atomic_fetch_sub(&srv->receiving, 1);
    /* The one place a request's memory reservation is given back. */
    pulse_budget_release(&srv->budget, r->mem_held);
    r->mem_held = 0;
    hreq_free(r);
    atomic_fetch_sub(&srv->inflight, 1);
}
