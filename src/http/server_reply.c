/* SPDX-License-Identifier: MIT */
/*
 * server_reply.c - the answers of the HTTP server: every response is queued
 * through pulse_server_reply, which adds the common headers (X-Request-Id,
 * Content-Type, Connection: close while stopping or after a framing error,
 * Retry-After on 503 and 507) and records the status for the metrics.
 * Errors are JSON {"error": {"code", "message"}}, their codes from the
 * errmap (errmap.h); server faults are logged, rate-limited per code.
 *
 * An error answer is never charged to the memory budget: it often reports
 * that the budget refused the request's own parse.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "http/encode.h"
#include "http/errmap.h"
#include "http/http_int.h"
#include "http/json.h"
#include "http/server_int.h"

static const char oom_body[] = "{\"error\":{\"code\":\"storage_error\",\"message\":\"out of memory\"}}\n";

/* With CORS on, every answer varies by Origin (a cache must not hand one
 * origin's answer to another); an allowed origin's answers say so and name
 * the headers its page may read. */
static void add_cors_headers(struct pulse_hreq *r, struct MHD_Response *resp)
{
    const struct pulse_server_settings *set = &r->srv->cfg->server;
    if (!pulse_cors_enabled(set->cors_origins))
        return;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
    if (r->cors != PULSE_CORS_ALLOWED)
        return;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, r->origin);
    MHD_add_response_header(resp, "Access-Control-Expose-Headers", PULSE_CORS_EXPOSE_HEADERS);
    if (set->cors_credentials != NULL && strcmp(set->cors_credentials, "on") == 0)
        MHD_add_response_header(resp, "Access-Control-Allow-Credentials", "true");
}

void pulse_server_reply(struct pulse_hreq *r, unsigned status, struct MHD_Response *resp, const char *content_type)
{
    if (resp == NULL) {
        PULSE_ERROR("request %s: cannot create a response (status %u)", r->id, status);
        return;
    }
    MHD_add_response_header(resp, "X-Request-Id", r->id);
    add_cors_headers(r, resp);
    if (content_type != NULL)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (r->www_authenticate != NULL)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, r->www_authenticate);
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

void pulse_server_reply_oom(struct pulse_hreq *r)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(sizeof oom_body - 1, (void *)(uintptr_t)oom_body,
                                                                MHD_RESPMEM_PERSISTENT);
    pulse_server_reply(r, 500, resp, PULSE_MEDIA_JSON);
}

pulse_status_t pulse_server_json_text(const json_t *body, size_t flags, char **out, size_t *out_len)
{
    size_t need = pulse_json_dump_size(body, flags);
    if (need == 0)
        return PULSE_INVALID;
    char *text = pulse_malloc(need + 1);
    if (text == NULL)
        return PULSE_NOMEM;
    if (!pulse_json_dump_into(body, flags, text, need)) {
        pulse_free(text);
        return PULSE_INVALID;
    }
    text[need] = '\n';
    *out = text;
    *out_len = need + 1;
    return PULSE_OK;
}

struct MHD_Response *pulse_server_json_response(struct pulse_hreq *r, char *text, size_t len)
{
    bool big = len >= PULSE_ENCODE_GZIP_MIN;
    if (big && pulse_encode_accepts_gzip(
                   MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING))) {
        uint8_t *gz = NULL;
        size_t gz_len = 0;
        /* Failing to compress is no reason to fail the answer. */
        if (pulse_encode_gzip((const uint8_t *)text, len, &gz, &gz_len) == PULSE_OK) {
            pulse_free(text);
            text = (char *)gz;
            len = gz_len;
        } else {
            big = false;
        }
        if (big) {
            r->bytes_out = (int64_t)len;
            struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, text, pulse_free);
            if (resp == NULL) {
                pulse_free(text);
                return NULL;
            }
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
            MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
            return resp;
        }
    }
    r->bytes_out = (int64_t)len;
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, text, pulse_free);
    if (resp == NULL) {
        pulse_free(text);
        return NULL;
    }
    if (big)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
    return resp;
}

void pulse_server_reply_json(struct pulse_hreq *r, unsigned status, json_t *body)
{
    char *text = NULL;
    size_t len = 0;
    /* 15 significant digits print 0.1 as 0.1 (the few reals we answer
     * with are configuration ratios, not stored data). */
    if (body == NULL || pulse_server_json_text(body, JSON_REAL_PRECISION(15), &text, &len) != PULSE_OK) {
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
        PULSE_DEBUG_LOG("request %s %s %s: %u %s: %s", r->id, pulse_router_method_name(r->method), r->url, status, code,
                        msg);
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

static void reply_error_extra(struct pulse_hreq *r, unsigned status, const char *code, json_t *extra, const char *fmt,
                              ...) __attribute__((format(printf, 5, 6)));

static void reply_error_extra(struct pulse_hreq *r, unsigned status, const char *code, json_t *extra, const char *fmt,
                              ...)
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

void pulse_server_reply_status_extra(struct pulse_hreq *r, pulse_status_t st, const char *msg, json_t *extra)
{
    const struct pulse_errmap_entry *e = pulse_errmap_lookup(st);
    if (st == PULSE_SHUTDOWN)
        r->not_serving = true;
    reply_error_extra(r, e->http_status, e->code, extra, "%s",
                      msg != NULL && msg[0] != '\0' ? msg : pulse_status_message(st));
}

void pulse_server_reply_range(struct pulse_hreq *r, const char *prefix, int64_t offset, int64_t log_start, int64_t hw)
{
    json_t *extra = json_pack("{s:I,s:I,s:I}", "offset", (json_int_t)offset, "log_start_offset", (json_int_t)log_start,
                              "high_watermark", (json_int_t)hw);
    const struct pulse_errmap_entry *e = pulse_errmap_lookup(PULSE_RANGE);
    if (extra == NULL) {
        pulse_server_reply_oom(r);
        return;
    }
    reply_error_extra(r, e->http_status, e->code, extra, "%soffset %lld is beyond the high watermark %lld",
                      prefix != NULL ? prefix : "", (long long)offset, (long long)hw);
}

void pulse_server_reply_negative_offset(struct pulse_hreq *r, const char *prefix, int64_t offset)
{
    pulse_server_reply_error(r, 400, "invalid_request", "%soffset %lld is negative; offsets start at 0",
                             prefix != NULL ? prefix : "", (long long)offset);
}

void pulse_server_reply_no_partition(struct pulse_hreq *r, const char *topic, uint32_t partition)
{
    struct pulse_topic_info *info = NULL;
    uint32_t n = 0;
    char msg[PULSE_NAME_MAX + 128];
    if (pulse_broker_topic_get(r->srv->broker, topic, false, &info) == PULSE_OK)
        n = info->partitions;
    pulse_topic_info_free(info);
    pulse_broker_no_partition_message(msg, sizeof msg, NULL, topic, partition, n);
    pulse_server_reply_error(r, 404, "partition_not_found", "%s", msg);
}

void pulse_server_reply_empty(struct pulse_hreq *r, unsigned status)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)(uintptr_t) "", MHD_RESPMEM_PERSISTENT);
    pulse_server_reply(r, status, resp, NULL);
}

void pulse_server_reply_options(struct pulse_hreq *r)
{
    enum pulse_route route = r->match.route;
    const char *want = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Access-Control-Request-Method");
    char allow[PULSE_ROUTER_ALLOW_MAX];
    pulse_router_allow_header(route, allow, sizeof allow);
    if (want != NULL && r->cors == PULSE_CORS_REFUSED) {
        char origin[160];
        pulse_server_reply_error(r, 403, "forbidden",
                                 "origin %s may not call this API: it is not this server and server.cors-origins "
                                 "does not list it",
                                 pulse_server_printable(r->origin, origin, sizeof origin));
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)(uintptr_t) "", MHD_RESPMEM_PERSISTENT);
    if (resp == NULL) {
        pulse_server_reply_oom(r);
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    if (want != NULL && r->cors == PULSE_CORS_ALLOWED) {
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", allow);
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", pulse_router_request_headers(route));
        MHD_add_response_header(resp, "Access-Control-Max-Age", PULSE_CORS_MAX_AGE);
    }
    pulse_server_reply(r, 204, resp, NULL);
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

void pulse_server_reply_names(struct pulse_hreq *r, const char *member, char **names, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        if (!pulse_server_may(r, PULSE_GRANT_COMMIT, names[i]))
            continue; /* with tokens, only the names it may commit for */
        if (json_array_append_new(arr, json_string(names[i])) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    pulse_broker_names_free(names, n);
    if (arr == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_server_reply_json(r, 200, json_pack("{s:o}", member, arr));
}
