/* SPDX-License-Identifier: MIT */
/*
 * h_ops.c - operational routes: /healthz (process alive), /readyz (recovery
 * done and not draining; lists fenced partitions), /metrics (Prometheus text 0.0.4: the gateway's
 * request metrics, then the broker's), /v1/broker (identity, uptime and the
 * effective configuration). /openapi.yaml is a compiled-in file
 * (h_static.c).
 */
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "http/http_int.h"

/* Metrics text can grow with topics and partitions; a hard cap keeps a
 * runaway from eating memory. */
#define METRICS_MAX_BYTES (64u * 1024 * 1024)

void pulse_h_ops_healthz(struct pulse_hreq *r)
{
    pulse_server_reply_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

/* {"topic", "partition", "fenced_ms", "next_attempt_ms", "failed_attempts"
 * [, "last_error"]} for each fenced partition. */
static json_t *fenced_json(const struct pulse_fenced_partition *f, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I}", "topic", f[i].topic, "partition", (json_int_t)f[i].partition,
                              "fenced_ms", (json_int_t)f[i].fenced_ms, "next_attempt_ms",
                              (json_int_t)f[i].next_attempt_ms, "failed_attempts", (json_int_t)f[i].failed_attempts);
        if (o != NULL && f[i].last_error != PULSE_OK &&
            json_object_set_new(o, "last_error", json_string(pulse_status_message(f[i].last_error))) != 0) {
            json_decref(o);
            o = NULL;
        }
        if (o == NULL || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    return arr;
}

/* Fenced partitions do not make the broker unready: every other partition
 * (and reads of the fenced one) still work, and with a single broker a
 * failing readiness check would take all of them out of service. They turn
 * the status to "degraded" and are listed (docs/API.md). */
void pulse_h_ops_readyz(struct pulse_hreq *r)
{
    struct pulse_fenced_partition *fenced = NULL;
    size_t nfenced = 0;

    if (!atomic_load(&r->srv->ready) || atomic_load(&r->srv->stopping)) {
        pulse_server_reply_not_serving(r, "not ready");
        return;
    }
    pulse_status_t st = pulse_broker_fenced_list(r->srv->broker, &fenced, &nfenced);
    if (st == PULSE_UNAVAILABLE) {
        /* A remote backend whose cluster cannot be reached: this replica
         * serves nothing useful, take it out of the load balancer. */
        pulse_server_reply_not_serving(r, "the backend's cluster cannot be reached");
        return;
    }
    if (st != PULSE_OK) {
        pulse_server_reply_status(r, st, "cannot list fenced partitions");
        return;
    }
    json_t *list = fenced_json(fenced, nfenced);
    pulse_free(fenced);
    if (list == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_server_reply_json(
        r, 200, json_pack("{s:s,s:o}", "status", nfenced > 0 ? "degraded" : "ready", "fenced_partitions", list));
}

void pulse_h_ops_metrics(struct pulse_hreq *r)
{
    struct pulse_buf out;
    /* per=partition (the default) or per=topic: the broker's families
     * labelled by partition summed by topic (docs/API.md "Metrics"). */
    const char *per = pulse_server_query(r, "per");
    bool per_topic = per != NULL && strcmp(per, "topic") == 0;
    if (per != NULL && !per_topic && strcmp(per, "partition") != 0) {
        pulse_server_reply_error(r, 400, "invalid_request", "per must be partition or topic, not \"%s\"", per);
        return;
    }
    pulse_buf_init(&out, METRICS_MAX_BYTES);
    pulse_status_t st = pulse_server_metrics(r->srv, &out);
    if (st == PULSE_OK)
        st = per_topic ? pulse_broker_metrics_per_topic(r->srv->broker, &out)
                       : pulse_broker_metrics(r->srv->broker, &out);
    if (st != PULSE_OK) {
        pulse_buf_fini(&out);
        pulse_server_reply_status(r, st, "cannot render metrics");
        return;
    }
    size_t len = 0;
    uint8_t *text = pulse_buf_steal(&out, &len);
    r->bytes_out = (int64_t)len;
    struct MHD_Response *resp = NULL;
    if (text == NULL)
        resp = MHD_create_response_from_buffer(0, (void *)(uintptr_t) "", MHD_RESPMEM_PERSISTENT);
    else
        resp = MHD_create_response_from_buffer_with_free_callback(len, text, pulse_free);
    if (resp == NULL) {
        pulse_free(text);
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_server_reply(r, 200, resp, "text/plain; version=0.0.4; charset=utf-8");
}

void pulse_h_ops_broker(struct pulse_hreq *r)
{
    struct pulse_broker *b = r->srv->broker;
    json_t *config = pulse_config_to_json(r->srv->cfg);
    if (config == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    int64_t uptime_ms = (pulse_clock_mono_us() - r->srv->started_mono_us) / 1000;
    pulse_server_reply_json(r, 200,
                            json_pack("{s:s,s:s,s:s,s:I,s:o}", "cluster_id", pulse_broker_cluster_id(b), "broker_id",
                                      pulse_broker_broker_id(b), "version", PULSE_HTTP_VERSION, "uptime_ms",
                                      (json_int_t)uptime_ms, "config", config));
}
