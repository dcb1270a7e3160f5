/* SPDX-License-Identifier: MIT */
/*
 * kconsumers.c - listing and deleting consumers (GET /v1/consumers,
 * DELETE /v1/consumers/{c}). A consumer's cursors are the offsets of the
 * Kafka consumer group of its name (kadmin.c), so:
 *
 *   - the list is the cluster's consumer groups (ListConsumerGroups, every
 *     broker asked), those whose names are valid Pulse names, sorted. It
 *     includes the groups of Kafka's own consumers: their offsets are
 *     cursors too (GET /v1/consumers/{c}/cursors shows them); a group that
 *     has members but has committed nothing has an empty cursor list;
 *   - a delete is DeleteGroups: every offset of the group goes. A group
 *     unknown to the cluster is deleted already (PULSE_OK, as the local
 *     backend's delete of an unknown consumer); a group with active Kafka
 *     members cannot be deleted (the cluster refuses: PULSE_BUSY, 503).
 *
 * On the mock cluster both are refused before anything is sent
 * (PULSE_NOT_SUPPORTED, 406): it lacks ListGroups and DeleteGroups, and
 * librdkafka 2.0.2 handles that badly - measured with a probe under ASan:
 * an unsupported ListConsumerGroups answers "not supported" from every
 * broker and leaks 176 bytes of the request, an unsupported DeleteGroups
 * (or DeleteConsumerGroupOffsets) aborts the process (an assertion in
 * rd_kafka_enq_once_del_source_return). On a cluster that lacks them
 * (brokers older than 0.10 / 1.1), the list answers PULSE_NOT_SUPPORTED.
 * Neither call has met a real cluster here (docs/Scaling.md).
 */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "kafka/kafka_int.h"

struct klist {
    char ***names_out;
    size_t *n_out;
};

static int by_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The valid groups of a ListConsumerGroups result, sorted: *names. */
static pulse_status_t names_of(const rd_kafka_ListConsumerGroups_result_t *r, char ***names, size_t *n_out)
{
    size_t nv = 0, n = 0;
    const rd_kafka_ConsumerGroupListing_t **v = rd_kafka_ListConsumerGroups_result_valid(r, &nv);
    char **out = pulse_calloc(nv + 1, sizeof *out);
    if (out == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < nv; i++) {
        const char *g = rd_kafka_ConsumerGroupListing_group_id(v[i]);
        if (g == NULL || !pulse_broker_name_valid(g, strlen(g)))
            continue;
        if ((out[n] = pulse_strdup(g)) == NULL) {
            pulse_broker_names_free(out, n);
            return PULSE_NOMEM;
        }
        n++;
    }
    qsort(out, n, sizeof *out, by_str);
    *names = out;
    *n_out = n;
    return PULSE_OK;
}

/* A broker's error of the listing: any one fails it (a partial list would
 * leave consumers out). "Not supported" is PULSE_NOT_SUPPORTED. */
static pulse_status_t list_errors(const rd_kafka_ListConsumerGroups_result_t *r)
{
    size_t ne = 0;
    const rd_kafka_error_t **e = rd_kafka_ListConsumerGroups_result_errors(r, &ne);
    if (ne == 0)
        return PULSE_OK;
    rd_kafka_resp_err_t code = rd_kafka_error_code(e[0]);
    if (code == RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE || code == RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION)
        return PULSE_NOT_SUPPORTED;
    pulse_status_t st = pulse_kafka_status(code);
    return st == PULSE_IO || st == PULSE_OK ? PULSE_UNAVAILABLE : st;
}

static pulse_status_t run_list(struct pulse_kafka *k, void *ctx)
{
    struct klist *l = ctx;
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->prod);
    rd_kafka_AdminOptions_t *o = pulse_kafka_admin_options(k, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS);
    rd_kafka_ListConsumerGroups(k->prod, o, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, (int)k->timeout_ms + 1000);
    pulse_status_t st = PULSE_UNAVAILABLE;
    const rd_kafka_ListConsumerGroups_result_t *r = ev != NULL ? rd_kafka_event_ListConsumerGroups_result(ev) : NULL;
    if (ev != NULL)
        st = rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR ? pulse_kafka_status(rd_kafka_event_error(ev))
             : r == NULL                                            ? PULSE_IO
                                                                    : list_errors(r);
    if (st == PULSE_IO)
        st = PULSE_UNAVAILABLE;
    *l->names_out = NULL;
    *l->n_out = 0;
    if (st == PULSE_OK)
        st = names_of(r, l->names_out, l->n_out);
    if (st == PULSE_OK && *l->n_out == 0) {
        pulse_free(*l->names_out);
        *l->names_out = NULL;
    }
    if (ev != NULL)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    return st;
}

pulse_status_t pulse_kafka_consumer_list_async(struct pulse_broker *b, char ***names_out, size_t *n_out,
                                               pulse_admin_done_fn done, void *arg)
{
    if (kafka_of(b)->mock != NULL)
        return PULSE_NOT_SUPPORTED; /* the file's comment */
    struct klist *l = pulse_calloc(1, sizeof *l);
    if (l == NULL)
        return PULSE_NOMEM;
    l->names_out = names_out;
    l->n_out = n_out;
    return pulse_kafka_admin_submit(kafka_of(b), run_list, l, pulse_free, done, arg);
}

static pulse_status_t run_delete(struct pulse_kafka *k, void *ctx)
{
    const char *group = ctx;
    rd_kafka_DeleteGroup_t *dg = rd_kafka_DeleteGroup_new(group);
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->prod);
    rd_kafka_AdminOptions_t *o = pulse_kafka_admin_options(k, RD_KAFKA_ADMIN_OP_DELETEGROUPS);
    rd_kafka_DeleteGroups(k->prod, &dg, 1, o, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, (int)k->timeout_ms + 1000);
    pulse_status_t st = PULSE_UNAVAILABLE;
    if (ev != NULL) {
        size_t n = 0;
        const rd_kafka_DeleteGroups_result_t *r = rd_kafka_event_DeleteGroups_result(ev);
        const rd_kafka_group_result_t **g = r != NULL ? rd_kafka_DeleteGroups_result_groups(r, &n) : NULL;
        rd_kafka_resp_err_t e = rd_kafka_event_error(ev);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR && n == 1 && rd_kafka_group_result_error(g[0]) != NULL)
            e = rd_kafka_error_code(rd_kafka_group_result_error(g[0]));
        if (e == RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND)
            st = PULSE_OK; /* nothing to delete */
        else if (e == RD_KAFKA_RESP_ERR_NON_EMPTY_GROUP)
            st = PULSE_BUSY; /* Kafka consumers are members now */
        else
            st = pulse_kafka_status(e) == PULSE_IO ? PULSE_UNAVAILABLE : pulse_kafka_status(e);
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    rd_kafka_DeleteGroup_destroy(dg);
    return st;
}

pulse_status_t pulse_kafka_consumer_delete_async(struct pulse_broker *b, const char *consumer, pulse_admin_done_fn done,
                                                 void *arg)
{
    struct pulse_kafka *k = kafka_of(b);
    if (!pulse_broker_name_valid(consumer, strlen(consumer)))
        return PULSE_INVALID_NAME;
    if (k->mock != NULL)
        return PULSE_NOT_SUPPORTED; /* the file's comment */
    char *group = pulse_strdup(consumer);
    if (group == NULL)
        return PULSE_NOMEM;
    return pulse_kafka_admin_submit(k, run_delete, group, pulse_free, done, arg);
}
