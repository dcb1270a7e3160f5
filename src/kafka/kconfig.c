/* SPDX-License-Identifier: MIT */
/*
 * kconfig.c - retention changes (PATCH /v1/topics/{topic}) as topic
 * configs of the cluster.
 *
 * Why DescribeConfigs first: librdkafka 2.0.2 has only the non-incremental
 * AlterConfigs, which replaces the topic's whole set of dynamic configs
 * with the one it is given (a config left out goes back to the broker's
 * default). So the change reads the topic's dynamic configs
 * (DescribeConfigs: the entries whose source is DYNAMIC_TOPIC_CONFIG, i.e.
 * set on the topic), replaces retention.ms and/or retention.bytes in that
 * set, and writes the full set back. Pulse's 0 (no limit) is Kafka's -1.
 *
 * What this cannot do (docs/Scaling.md): it is not atomic. A config
 * changed by someone else between the read and the write is overwritten
 * with the value read. A sensitive dynamic config (its value is never
 * sent back) could not be written back: the change is refused
 * (PULSE_NOT_SUPPORTED) rather than resetting it.
 *
 * On the mock cluster both calls wait for a controller it never names, so
 * the change is refused at once there (PULSE_NOT_SUPPORTED); the merge is
 * tested alone (check_kafka).
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "kafka/kafka_int.h"

void pulse_kafka_configs_free(struct kconfig *c, size_t n)
{
    for (size_t i = 0; c != NULL && i < n; i++) {
        pulse_free(c[i].name);
        pulse_free(c[i].value);
    }
    pulse_free(c);
}

/* Sets name to value in the set (replacing or appending). */
static pulse_status_t set_one(struct kconfig *c, size_t *n, const char *name, int64_t v)
{
    char text[32];
    snprintf(text, sizeof text, "%lld", v == 0 ? -1LL : (long long)v);
    size_t i = 0;
    while (i < *n && strcmp(c[i].name, name) != 0)
        i++;
    char *value = pulse_strdup(text);
    if (value == NULL)
        return PULSE_NOMEM;
    if (i == *n) {
        if ((c[i].name = pulse_strdup(name)) == NULL) {
            pulse_free(value);
            return PULSE_NOMEM;
        }
        c[i].dynamic = true;
        (*n)++;
    }
    pulse_free(c[i].value);
    c[i].value = value;
    return PULSE_OK;
}

pulse_status_t pulse_kafka_retention_configs(const struct kconfig *described, size_t n, int64_t retention_ms,
                                             int64_t retention_bytes, struct kconfig **out, size_t *n_out)
{
    struct kconfig *c = pulse_calloc(n + 3, sizeof *c);
    size_t m = 0;
    pulse_status_t st = c == NULL ? PULSE_NOMEM : PULSE_OK;
    for (size_t i = 0; st == PULSE_OK && i < n; i++) {
        if (!described[i].dynamic)
            continue;
        if (described[i].value == NULL) { /* sensitive: cannot be written back */
            st = PULSE_NOT_SUPPORTED;
            break;
        }
        c[m].name = pulse_strdup(described[i].name);
        c[m].value = pulse_strdup(described[i].value);
        c[m].dynamic = true;
        m++;
        if (c[m - 1].name == NULL || c[m - 1].value == NULL)
            st = PULSE_NOMEM;
    }
    if (st == PULSE_OK && retention_ms >= 0)
        st = set_one(c, &m, "retention.ms", retention_ms);
    if (st == PULSE_OK && retention_bytes >= 0)
        st = set_one(c, &m, "retention.bytes", retention_bytes);
    if (st != PULSE_OK) {
        pulse_kafka_configs_free(c, m);
        return st;
    }
    *out = c;
    *n_out = m;
    return PULSE_OK;
}

/* The topic's configs as DescribeConfigs reports them: *out (dynamic set
 * for those set on the topic; value NULL for a sensitive one). */
static pulse_status_t describe(struct pulse_kafka *k, const char *topic, struct kconfig **out, size_t *n_out)
{
    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->prod);
    rd_kafka_AdminOptions_t *o = pulse_kafka_admin_options(k, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    rd_kafka_DescribeConfigs(k->prod, &res, 1, o, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, (int)k->timeout_ms + 1000);
    pulse_status_t st = PULSE_UNAVAILABLE;
    size_t n = 0, nc = 0;
    const rd_kafka_DescribeConfigs_result_t *r = ev != NULL ? rd_kafka_event_DescribeConfigs_result(ev) : NULL;
    const rd_kafka_ConfigResource_t **rs = r != NULL ? rd_kafka_DescribeConfigs_result_resources(r, &n) : NULL;
    if (ev != NULL) {
        rd_kafka_resp_err_t e = rd_kafka_event_error(ev);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR && n == 1)
            e = rd_kafka_ConfigResource_error(rs[0]);
        st = e == RD_KAFKA_RESP_ERR_NO_ERROR && n != 1 ? PULSE_IO : pulse_kafka_status(e);
    }
    const rd_kafka_ConfigEntry_t **ce = st == PULSE_OK ? rd_kafka_ConfigResource_configs(rs[0], &nc) : NULL;
    struct kconfig *c = st == PULSE_OK ? pulse_calloc(nc + 1, sizeof *c) : NULL;
    if (st == PULSE_OK && c == NULL)
        st = PULSE_NOMEM;
    for (size_t i = 0; st == PULSE_OK && i < nc; i++) {
        const char *v = rd_kafka_ConfigEntry_value(ce[i]);
        c[i].dynamic = rd_kafka_ConfigEntry_source(ce[i]) == RD_KAFKA_CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG &&
                       !rd_kafka_ConfigEntry_is_read_only(ce[i]);
        c[i].name = pulse_strdup(rd_kafka_ConfigEntry_name(ce[i]));
        c[i].value = v != NULL && !rd_kafka_ConfigEntry_is_sensitive(ce[i]) ? pulse_strdup(v) : NULL;
        if (c[i].name == NULL || (v != NULL && !rd_kafka_ConfigEntry_is_sensitive(ce[i]) && c[i].value == NULL))
            st = PULSE_NOMEM;
    }
    if (ev != NULL)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    rd_kafka_ConfigResource_destroy(res);
    if (st != PULSE_OK) {
        pulse_kafka_configs_free(c, nc);
        return st;
    }
    *out = c;
    *n_out = nc;
    return PULSE_OK;
}

/* Writes the full set c[0..n) as the topic's dynamic configs. */
static pulse_status_t alter(struct pulse_kafka *k, const char *topic, const struct kconfig *c, size_t n)
{
    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    for (size_t i = 0; i < n; i++)
        (void)rd_kafka_ConfigResource_set_config(res, c[i].name, c[i].value);
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->prod);
    rd_kafka_AdminOptions_t *o = pulse_kafka_admin_options(k, RD_KAFKA_ADMIN_OP_ALTERCONFIGS);
    rd_kafka_AlterConfigs(k->prod, &res, 1, o, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, (int)k->timeout_ms + 1000);
    pulse_status_t st = PULSE_UNAVAILABLE;
    if (ev != NULL) {
        size_t nr = 0;
        const rd_kafka_AlterConfigs_result_t *r = rd_kafka_event_AlterConfigs_result(ev);
        const rd_kafka_ConfigResource_t **rs = r != NULL ? rd_kafka_AlterConfigs_result_resources(r, &nr) : NULL;
        rd_kafka_resp_err_t e = rd_kafka_event_error(ev);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR && nr == 1)
            e = rd_kafka_ConfigResource_error(rs[0]);
        st = pulse_kafka_status(e);
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    rd_kafka_ConfigResource_destroy(res);
    return st;
}

struct kretention {
    char topic[PULSE_NAME_MAX + 1];
    int64_t retention_ms, retention_bytes;
    struct pulse_topic_info **out;
};

static pulse_status_t run_retention(struct pulse_kafka *k, void *ctx)
{
    struct kretention *r = ctx;
    struct kconfig *got = NULL, *set = NULL;
    size_t n_got = 0, n_set = 0;
    pulse_status_t st = describe(k, r->topic, &got, &n_got);
    if (st == PULSE_OK)
        st = pulse_kafka_retention_configs(got, n_got, r->retention_ms, r->retention_bytes, &set, &n_set);
    if (st == PULSE_OK)
        st = alter(k, r->topic, set, n_set);
    pulse_kafka_configs_free(got, n_got);
    pulse_kafka_configs_free(set, n_set);
    if (st == PULSE_OK && r->out != NULL &&
        (st = pulse_kafka_topic_get(&k->base, r->topic, true, r->out)) == PULSE_OK) {
        /* What was just written; the gateway reads no config back. */
        if (r->retention_ms >= 0)
            (*r->out)->retention_ms = r->retention_ms;
        if (r->retention_bytes >= 0)
            (*r->out)->retention_bytes = r->retention_bytes;
    }
    return st;
}

pulse_status_t pulse_kafka_topic_set_retention_async(struct pulse_broker *b, const char *name, int64_t retention_ms,
                                                     int64_t retention_bytes, struct pulse_topic_info **out,
                                                     pulse_admin_done_fn done, void *arg)
{
    struct pulse_kafka *k = kafka_of(b);
    uint32_t parts = 0;
    pulse_status_t st = pulse_kafka_meta_partitions(k, name, &parts);
    if (st != PULSE_OK)
        return st;
    if (k->mock != NULL)
        return PULSE_NOT_SUPPORTED; /* no controller: the file's comment */
    struct kretention *r = pulse_calloc(1, sizeof *r);
    if (r == NULL)
        return PULSE_NOMEM;
    snprintf(r->topic, sizeof r->topic, "%s", name);
    r->retention_ms = retention_ms;
    r->retention_bytes = retention_bytes;
    r->out = out;
    return pulse_kafka_admin_submit(k, run_retention, r, pulse_free, done, arg);
}
