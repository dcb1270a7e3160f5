/* SPDX-License-Identifier: MIT */
/*
 * server_metrics.c - the HTTP metrics registry: a request counter per
 * (route, method, status) and a latency histogram per route, updated once
 * per completed request under srv->mlock, and their Prometheus text with
 * the gauges of the connection registry and the memory budget.
 */
#include <stdio.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "http/conns.h"
#include "http/http_int.h"
#include "http/server_int.h"

static const double latency_bounds[PULSE_HTTP_LATENCY_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                                  0.1,   0.25,   0.5,   1.0,  5.0,   30.0};

static size_t latency_bucket(double secs)
{
    size_t i = 0;
    while (i < PULSE_HTTP_LATENCY_BUCKETS && secs > latency_bounds[i])
        i++;
    return i; /* PULSE_HTTP_LATENCY_BUCKETS = +Inf only */
}

void pulse_server_metrics_record(struct pulse_server *srv, const struct pulse_hreq *r, double secs)
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
        (unsigned long long)cst.open, (unsigned long long)cst.head_timeouts, (unsigned long long)cst.body_timeouts,
        (unsigned long long)cst.busy_closes, (unsigned long long)srv->budget.limit,
        (unsigned long long)pulse_budget_used(&srv->budget), (unsigned long long)pulse_budget_refusals(&srv->budget));
}

/* [limits] (ratelimit.h): refusals and the clients remembered. */
static pulse_status_t rate_metrics(struct pulse_server *srv, struct pulse_buf *out)
{
    struct pulse_ratelimit *rl = srv->ratelimit;
    return pulse_buf_printf(
        out,
        "# HELP pulse_http_rate_limited_total Requests refused with 429 by limits.requests-per-second or "
        "limits.bytes-per-second.\n"
        "# TYPE pulse_http_rate_limited_total counter\n"
        "pulse_http_rate_limited_total %llu\n"
        "# HELP pulse_http_rate_limit_clients Clients whose rate-limit buckets are remembered (at most "
        "limits.max-clients).\n"
        "# TYPE pulse_http_rate_limit_clients gauge\n"
        "pulse_http_rate_limit_clients %llu\n"
        "# HELP pulse_http_rate_limit_evictions_total Clients forgotten to stay within limits.max-clients.\n"
        "# TYPE pulse_http_rate_limit_evictions_total counter\n"
        "pulse_http_rate_limit_evictions_total %llu\n",
        (unsigned long long)(rl != NULL ? pulse_ratelimit_refusals(rl) : 0),
        (unsigned long long)(rl != NULL ? pulse_ratelimit_count(rl) : 0),
        (unsigned long long)(rl != NULL ? pulse_ratelimit_evictions(rl) : 0));
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
                              pulse_router_template(row->route), pulse_router_method_name(row->method), row->status,
                              (unsigned long long)row->count);
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
    if (st == PULSE_OK)
        st = rate_metrics(srv, out);
    return st;
}
