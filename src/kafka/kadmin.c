/* SPDX-License-Identifier: MIT */
/*
 * kadmin.c - the calls that wait for the cluster, run one at a time on
 * kadmin: topic create and delete, cursor commits and reads. Each call of
 * the seam validates what it can on the caller's thread (refusals get no
 * callback), then queues a job; kadmin runs it (every librdkafka call
 * bounded by kafka.request-timeout) and calls done with no lock held.
 *
 * Cursors are Kafka consumer-group offsets of the group named like the
 * consumer, written with AlterConsumerGroupOffsets and read with
 * ListConsumerGroupOffsets (Admin API, no group membership), so Kafka's
 * own tools see them (kafka-consumer-groups.sh --describe --group NAME).
 * Lag is the high watermark (ListOffsets) minus the cursor.
 *
 * Topics: created with CreateTopics (cleanup, retention and segment size
 * as topic configs); on the mock cluster, whose CreateTopics cannot work
 * (it names no controller), with rd_kafka_mock_topic_create. Deleted with
 * DeleteTopics. The mock can neither delete a topic (its DeleteTopics
 * waits for a controller it never names) nor has a call to do it; there a
 * delete hides the topic: rd_kafka_mock_topic_set_error makes every
 * Metadata answer name it UNKNOWN_TOPIC_OR_PART, so the gateway's cache
 * drops it and every call of the seam then answers 404 as on a real
 * cluster. Its records stay in the mock's memory, so its name cannot be
 * created again (PULSE_NOT_SUPPORTED, saying why): tests only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "kafka/kafka_int.h"

enum kjob_kind { JOB_CREATE, JOB_DELETE, JOB_COMMIT, JOB_GET, JOB_LIST, JOB_FN };

struct kjob {
    struct kjob *next;
    enum kjob_kind kind;
    pulse_admin_done_fn done;
    void *arg;
    char *errbuf;
    size_t errlen;
    char name[PULSE_NAME_MAX + 1]; /* topic (create, delete) or consumer */
    struct pulse_topic_spec spec;
    struct pulse_topic_info **info_out;
    struct pulse_cursor *cursors; /* commit: a copy (owned); get: the caller's out */
    size_t n;
    struct pulse_cursor **list_out;
    size_t *n_out;
    pulse_kafka_job_fn fn; /* JOB_FN: the job, its context and its disposer */
    void *ctx;
    void (*ctx_free)(void *ctx);
};

static pulse_status_t submit(struct pulse_kafka *k, struct kjob *j)
{
    pthread_mutex_lock(&k->admin_mu);
    if (atomic_load(&k->draining)) {
        pthread_mutex_unlock(&k->admin_mu);
        pulse_free(j->kind == JOB_COMMIT ? j->cursors : NULL);
        if (j->ctx_free != NULL)
            j->ctx_free(j->ctx);
        pulse_free(j);
        return PULSE_SHUTDOWN;
    }
    if (k->jobs_tail != NULL)
        k->jobs_tail->next = j;
    else
        k->jobs_head = j;
    k->jobs_tail = j;
    pthread_cond_broadcast(&k->admin_cv);
    pthread_mutex_unlock(&k->admin_mu);
    return PULSE_OK;
}

static struct kjob *new_job(enum kjob_kind kind, const char *name, pulse_admin_done_fn done, void *arg)
{
    struct kjob *j = pulse_calloc(1, sizeof *j);
    if (j == NULL)
        return NULL;
    j->kind = kind;
    snprintf(j->name, sizeof j->name, "%s", name);
    j->done = done;
    j->arg = arg;
    return j;
}

/* Runs an Admin call's result event through q: waits for it (bounded) and
 * returns it, or NULL (timed out: PULSE_UNAVAILABLE). */
static rd_kafka_event_t *wait_event(struct pulse_kafka *k, rd_kafka_queue_t *q)
{
    return rd_kafka_queue_poll(q, (int)k->timeout_ms + 1000);
}

rd_kafka_AdminOptions_t *pulse_kafka_admin_options(struct pulse_kafka *k, rd_kafka_admin_op_t op)
{
    char err[256];
    rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new(k->prod, op);
    (void)rd_kafka_AdminOptions_set_request_timeout(o, (int)k->timeout_ms, err, sizeof err);
    (void)rd_kafka_AdminOptions_set_operation_timeout(o, (int)k->timeout_ms, err, sizeof err);
    return o;
}

/* ---- topics -------------------------------------------------------------- */

static pulse_status_t create_real(struct pulse_kafka *k, struct kjob *j)
{
    char err[256] = "", v[32];
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(j->name, j->spec.partitions, -1, err, sizeof err);
    if (nt == NULL) {
        pulse_errbuf_set(j->errbuf, j->errlen, "%s", err);
        return PULSE_INVALID;
    }
    rd_kafka_NewTopic_set_config(nt, "cleanup.policy", j->spec.cleanup == PULSE_CLEANUP_COMPACT ? "compact" : "delete");
    if (j->spec.retention_ms >= 0) {
        snprintf(v, sizeof v, "%lld", j->spec.retention_ms == 0 ? -1LL : (long long)j->spec.retention_ms);
        rd_kafka_NewTopic_set_config(nt, "retention.ms", v);
    }
    if (j->spec.retention_bytes >= 0) {
        snprintf(v, sizeof v, "%lld", j->spec.retention_bytes == 0 ? -1LL : (long long)j->spec.retention_bytes);
        rd_kafka_NewTopic_set_config(nt, "retention.bytes", v);
    }
    if (j->spec.segment_bytes > 0) {
        snprintf(v, sizeof v, "%lld", (long long)j->spec.segment_bytes);
        rd_kafka_NewTopic_set_config(nt, "segment.bytes", v);
    }
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->prod);
    rd_kafka_AdminOptions_t *o = pulse_kafka_admin_options(k, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_CreateTopics(k->prod, &nt, 1, o, q);
    rd_kafka_event_t *ev = wait_event(k, q);
    pulse_status_t st = PULSE_UNAVAILABLE;
    if (ev != NULL) {
        size_t n = 0;
        const rd_kafka_CreateTopics_result_t *res = rd_kafka_event_CreateTopics_result(ev);
        const rd_kafka_topic_result_t **tr = res != NULL ? rd_kafka_CreateTopics_result_topics(res, &n) : NULL;
        rd_kafka_resp_err_t e = rd_kafka_event_error(ev);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR && n == 1)
            e = rd_kafka_topic_result_error(tr[0]);
        st = pulse_kafka_status(e);
        if (st != PULSE_OK)
            pulse_errbuf_set(j->errbuf, j->errlen, "the cluster refused the topic: %s",
                             n == 1 && rd_kafka_topic_result_error_string(tr[0])
                                 ? rd_kafka_topic_result_error_string(tr[0])
                                 : rd_kafka_err2str(e));
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    return st;
}

/* Whether the mock hid a topic of this name (kadmin only). */
static bool mock_deleted(const struct pulse_kafka *k, const char *name)
{
    for (size_t i = 0; i < k->n_mock_deleted; i++)
        if (strcmp(k->mock_deleted[i], name) == 0)
            return true;
    return false;
}

static pulse_status_t run_create(struct pulse_kafka *k, struct kjob *j)
{
    uint32_t parts = 0;
    if (k->mock != NULL && mock_deleted(k, j->name)) {
        pulse_errbuf_set(j->errbuf, j->errlen,
                         "the test cluster cannot create \"%s\" again: it hides deleted topics, which keep "
                         "their records",
                         j->name);
        return PULSE_NOT_SUPPORTED;
    }
    pulse_status_t st = pulse_kafka_meta_partitions(k, j->name, &parts);
    if (st == PULSE_OK) {
        pulse_errbuf_set(j->errbuf, j->errlen, "topic \"%s\" already exists", j->name);
        return PULSE_EXISTS;
    }
    if (st != PULSE_TOPIC_NOT_FOUND)
        return st;
    if (k->mock != NULL) {
        int rf = k->mock_brokers < 3 ? k->mock_brokers : 3;
        st = pulse_kafka_status(rd_kafka_mock_topic_create(k->mock, j->name, j->spec.partitions, rf));
    } else {
        st = create_real(k, j);
    }
    if (st != PULSE_OK)
        return st;
    /* Until the cluster's metadata has it, the topic is not served: wait
     * for it to show up, so a publish right after the answer finds it (a
     * miss in a cache refreshed moments ago is answered 404 at once).
     * Bounded by the request timeout, at least a second: on a loaded
     * machine one second was seen not to be enough. */
    int64_t wait_ms = k->timeout_ms > 1000 ? k->timeout_ms : 1000;
    int64_t deadline = pulse_clock_mono_us() + wait_ms * 1000;
    bool seen = false;
    while (!seen && pulse_clock_mono_us() < deadline) {
        seen = pulse_kafka_meta_refresh_marks(k) == PULSE_OK &&
               pulse_kafka_meta_partitions(k, j->name, &parts) == PULSE_OK;
        if (!seen) {
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    if (!seen)
        PULSE_WARN("kafka: topic %s was created but the cluster's metadata did not show it within %lld ms", j->name,
                   (long long)wait_ms);
    if (j->info_out != NULL)
        st = pulse_kafka_topic_get(&k->base, j->name, true, j->info_out);
    return st;
}

pulse_status_t pulse_kafka_topic_create_async(struct pulse_broker *b, const struct pulse_topic_spec *spec,
                                              struct pulse_topic_info **out, pulse_admin_done_fn done, void *arg,
                                              char *errbuf, size_t errlen)
{
    struct pulse_kafka *k = kafka_of(b);
    if (spec->name == NULL || !pulse_broker_name_valid(spec->name, strlen(spec->name))) {
        pulse_errbuf_set(errbuf, errlen, "invalid topic name");
        return PULSE_INVALID_NAME;
    }
    int32_t parts = spec->partitions < 0 ? (int32_t)k->default_partitions : spec->partitions;
    if (parts < 1 || parts > 256) {
        pulse_errbuf_set(errbuf, errlen, "partitions must be 1..256");
        return PULSE_INVALID;
    }
    /* Pulse's zlib batches are the local engine's format; Kafka compresses
     * on its producers' terms. */
    if (spec->compression > 0) {
        pulse_errbuf_set(errbuf, errlen, "compression is a setting of the local backend only");
        return PULSE_NOT_SUPPORTED;
    }
    struct kjob *j = new_job(JOB_CREATE, spec->name, done, arg);
    if (j == NULL)
        return PULSE_NOMEM;
    j->spec = *spec;
    j->spec.name = NULL;
    j->spec.partitions = parts;
    j->info_out = out;
    j->errbuf = errbuf;
    j->errlen = errlen;
    return submit(k, j);
}

/* The mock's delete (the file's comment): hidden from Metadata answers. */
static pulse_status_t mock_delete(struct pulse_kafka *k, struct kjob *j)
{
    char **names = pulse_realloc(k->mock_deleted, (k->n_mock_deleted + 1) * sizeof *names);
    if (names == NULL)
        return PULSE_NOMEM;
    k->mock_deleted = names;
    if ((names[k->n_mock_deleted] = pulse_strdup(j->name)) == NULL)
        return PULSE_NOMEM;
    k->n_mock_deleted++;
    rd_kafka_mock_topic_set_error(k->mock, j->name, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
    /* Gone from the cache before the answer, as on a real cluster once
     * DeleteTopics answered and the metadata caught up. */
    uint32_t parts = 0;
    for (int i = 0; i < 50; i++) {
        if (pulse_kafka_meta_refresh_marks(k) == PULSE_OK &&
            pulse_kafka_meta_partitions(k, j->name, &parts) == PULSE_TOPIC_NOT_FOUND)
            return PULSE_OK;
        nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
    }
    return PULSE_UNAVAILABLE;
}

static pulse_status_t run_delete(struct pulse_kafka *k, struct kjob *j)
{
    uint32_t parts = 0;
    pulse_status_t st = pulse_kafka_meta_partitions(k, j->name, &parts);
    if (st != PULSE_OK)
        return st;
    if (k->mock != NULL)
        return mock_delete(k, j);
    rd_kafka_DeleteTopic_t *dt = rd_kafka_DeleteTopic_new(j->name);
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->prod);
    rd_kafka_AdminOptions_t *o = pulse_kafka_admin_options(k, RD_KAFKA_ADMIN_OP_DELETETOPICS);
    rd_kafka_DeleteTopics(k->prod, &dt, 1, o, q);
    rd_kafka_event_t *ev = wait_event(k, q);
    st = PULSE_UNAVAILABLE;
    if (ev != NULL) {
        size_t n = 0;
        const rd_kafka_DeleteTopics_result_t *res = rd_kafka_event_DeleteTopics_result(ev);
        const rd_kafka_topic_result_t **tr = res != NULL ? rd_kafka_DeleteTopics_result_topics(res, &n) : NULL;
        rd_kafka_resp_err_t e = rd_kafka_event_error(ev);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR && n == 1)
            e = rd_kafka_topic_result_error(tr[0]);
        st = pulse_kafka_status(e);
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    rd_kafka_DeleteTopic_destroy(dt);
    (void)pulse_kafka_meta_refresh_marks(k);
    return st;
}

pulse_status_t pulse_kafka_topic_delete_async(struct pulse_broker *b, const char *name, pulse_admin_done_fn done,
                                              void *arg)
{
    struct pulse_kafka *k = kafka_of(b);
    uint32_t parts = 0;
    pulse_status_t st = pulse_kafka_meta_partitions(k, name, &parts);
    if (st != PULSE_OK)
        return st; /* refused at once: unknown topic, cluster gone */
    struct kjob *j = new_job(JOB_DELETE, name, done, arg);
    return j == NULL ? PULSE_NOMEM : submit(k, j);
}

/* ---- cursors: consumer-group offsets ------------------------------------- */

/* The group's partitions from an Alter/List result event (borrowed from
 * ev), or NULL with *st set. */
static const rd_kafka_topic_partition_list_t *group_parts(rd_kafka_event_t *ev, bool alter, pulse_status_t *st)
{
    size_t n = 0;
    const rd_kafka_group_result_t **g = NULL;
    if (ev == NULL) {
        *st = PULSE_UNAVAILABLE;
        return NULL;
    }
    if (alter) {
        const rd_kafka_AlterConsumerGroupOffsets_result_t *r = rd_kafka_event_AlterConsumerGroupOffsets_result(ev);
        g = r != NULL ? rd_kafka_AlterConsumerGroupOffsets_result_groups(r, &n) : NULL;
    } else {
        const rd_kafka_ListConsumerGroupOffsets_result_t *r = rd_kafka_event_ListConsumerGroupOffsets_result(ev);
        g = r != NULL ? rd_kafka_ListConsumerGroupOffsets_result_groups(r, &n) : NULL;
    }
    rd_kafka_resp_err_t e = rd_kafka_event_error(ev);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR && n == 1 && rd_kafka_group_result_error(g[0]) != NULL)
        e = rd_kafka_error_code(rd_kafka_group_result_error(g[0]));
    *st = e == RD_KAFKA_RESP_ERR_NO_ERROR && n != 1 ? PULSE_IO : pulse_kafka_status(e);
    if (*st == PULSE_IO && e != RD_KAFKA_RESP_ERR_NO_ERROR)
        *st = PULSE_UNAVAILABLE;
    return *st == PULSE_OK ? rd_kafka_group_result_partitions(g[0]) : NULL;
}

/* Reads the group's offsets of parts (NULL: every partition it has). The
 * result event into *ev_out (the caller destroys it). */
static const rd_kafka_topic_partition_list_t *group_offsets(struct pulse_kafka *k, const char *group,
                                                            const rd_kafka_topic_partition_list_t *parts,
                                                            rd_kafka_event_t **ev_out, pulse_status_t *st)
{
    rd_kafka_ListConsumerGroupOffsets_t *l = rd_kafka_ListConsumerGroupOffsets_new(group, parts);
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->prod);
    rd_kafka_AdminOptions_t *o = pulse_kafka_admin_options(k, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS);
    rd_kafka_ListConsumerGroupOffsets(k->prod, &l, 1, o, q);
    *ev_out = wait_event(k, q);
    const rd_kafka_topic_partition_list_t *res = group_parts(*ev_out, false, st);
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    rd_kafka_ListConsumerGroupOffsets_destroy(l);
    return res;
}

/* Checks each cursor (topic, partition, offset in [0, HW]); errbuf names
 * the first bad one. *list_out gets the offsets to write. */
static pulse_status_t check_cursors(struct pulse_kafka *k, struct kjob *j, rd_kafka_topic_partition_list_t **list_out)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)j->n);
    pulse_status_t st = PULSE_OK;
    for (size_t i = 0; st == PULSE_OK && i < j->n; i++) {
        uint32_t parts = 0;
        const struct pulse_cursor *c = &j->cursors[i];
        st = pulse_kafka_meta_partitions(k, c->topic, &parts);
        if (st == PULSE_OK && c->partition >= parts)
            st = PULSE_PARTITION_NOT_FOUND;
        /* The wording of the local backend (one wording per error). */
        if (st == PULSE_TOPIC_NOT_FOUND)
            pulse_errbuf_set(j->errbuf, j->errlen, "cursors[%zu]: topic \"%s\" does not exist", i, c->topic);
        else if (st == PULSE_PARTITION_NOT_FOUND)
            pulse_errbuf_set(j->errbuf, j->errlen,
                             "cursors[%zu]: topic \"%s\" has no partition %u; its partitions "
                             "are 0 to %u",
                             i, c->topic, c->partition, parts - 1);
        else if (st != PULSE_OK)
            pulse_errbuf_set(j->errbuf, j->errlen, "cursors[%zu] (%s/%u): %s", i, c->topic, c->partition,
                             pulse_status_message(st));
        else
            rd_kafka_topic_partition_list_add(list, c->topic, (int32_t)c->partition);
    }
    if (st == PULSE_OK)
        st = pulse_kafka_watermarks(k, list, NULL);
    for (int i = 0; st == PULSE_OK && i < list->cnt; i++) {
        if (j->cursors[i].offset < 0 || j->cursors[i].offset > list->elems[i].offset) {
            pulse_errbuf_set(j->errbuf, j->errlen, "cursors[%d]: offset %lld is outside [0, %lld] of %s/%u", i,
                             (long long)j->cursors[i].offset, (long long)list->elems[i].offset, j->cursors[i].topic,
                             j->cursors[i].partition);
            st = PULSE_RANGE;
        }
        list->elems[i].offset = j->cursors[i].offset;
    }
    if (st != PULSE_OK) {
        rd_kafka_topic_partition_list_destroy(list);
        return st;
    }
    *list_out = list;
    return PULSE_OK;
}

static pulse_status_t run_commit(struct pulse_kafka *k, struct kjob *j)
{
    rd_kafka_topic_partition_list_t *list = NULL;
    pulse_status_t st = check_cursors(k, j, &list);
    if (st != PULSE_OK)
        return st;
    st = pulse_kafka_group_offsets_write(k, j->name, list);
    if (st != PULSE_OK)
        pulse_errbuf_set(j->errbuf, j->errlen, "the cluster did not take the cursors: %s", pulse_status_message(st));
    rd_kafka_topic_partition_list_destroy(list);
    return st;
}

static void set_lag(struct pulse_cursor *c, int64_t hw)
{
    c->high_watermark = hw;
    c->lag = hw > c->offset ? hw - c->offset : 0;
}

static pulse_status_t run_get(struct pulse_kafka *k, struct kjob *j)
{
    struct pulse_cursor *c = j->cursors;
    uint32_t parts = 0;
    pulse_status_t st = pulse_kafka_meta_partitions(k, c->topic, &parts);
    if (st == PULSE_OK && c->partition >= parts)
        st = PULSE_PARTITION_NOT_FOUND;
    if (st != PULSE_OK)
        return st;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, c->topic, (int32_t)c->partition);
    rd_kafka_event_t *ev = NULL;
    const rd_kafka_topic_partition_list_t *res = group_offsets(k, j->name, list, &ev, &st);
    if (st == PULSE_OK && (res == NULL || res->cnt != 1 || res->elems[0].offset < 0))
        st = PULSE_CURSOR_NOT_FOUND;
    if (st == PULSE_OK)
        c->offset = res->elems[0].offset;
    if (ev != NULL)
        rd_kafka_event_destroy(ev);
    if (st == PULSE_OK && (st = pulse_kafka_watermarks(k, list, NULL)) == PULSE_OK)
        set_lag(c, list->elems[0].offset);
    rd_kafka_topic_partition_list_destroy(list);
    return st;
}

static int by_cursor(const void *a, const void *b)
{
    const struct pulse_cursor *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    return c != 0 ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

/* Every partition of every topic the cache knows. */
static pulse_status_t all_partitions(struct pulse_kafka *k, rd_kafka_topic_partition_list_t **out)
{
    struct kmeta_topic *t = NULL;
    size_t n = 0;
    pulse_status_t st = pulse_kafka_meta_snapshot(k, &t, &n);
    if (st != PULSE_OK)
        return st;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(16);
    for (size_t i = 0; i < n; i++)
        for (uint32_t p = 0; p < t[i].partitions; p++)
            rd_kafka_topic_partition_list_add(list, t[i].name, (int32_t)p);
    pulse_kafka_meta_snapshot_free(t, n);
    *out = list;
    return PULSE_OK;
}

/* The group's committed partitions of live topics, sorted, with lag. */
static pulse_status_t run_list(struct pulse_kafka *k, struct kjob *j)
{
    rd_kafka_event_t *ev = NULL;
    pulse_status_t st = PULSE_OK;
    const rd_kafka_topic_partition_list_t *res = group_offsets(k, j->name, NULL, &ev, &st);
    if (st == PULSE_OK && (res == NULL || res->cnt == 0)) {
        /* The mock cluster answers "every partition" with none: ask for
         * each partition of every topic by name. */
        if (ev != NULL)
            rd_kafka_event_destroy(ev);
        ev = NULL;
        rd_kafka_topic_partition_list_t *all = NULL;
        st = all_partitions(k, &all);
        res = st == PULSE_OK && all->cnt > 0 ? group_offsets(k, j->name, all, &ev, &st) : NULL;
        if (all != NULL)
            rd_kafka_topic_partition_list_destroy(all);
    }
    struct pulse_cursor *cs = NULL;
    size_t n = 0;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(8);
    if (st == PULSE_OK && res != NULL && (cs = pulse_calloc((size_t)res->cnt + 1, sizeof *cs)) == NULL)
        st = PULSE_NOMEM;
    for (int i = 0; st == PULSE_OK && res != NULL && i < res->cnt; i++) {
        uint32_t parts = 0;
        const rd_kafka_topic_partition_t *tp = &res->elems[i];
        if (tp->offset < 0 || pulse_kafka_meta_partitions(k, tp->topic, &parts) != PULSE_OK ||
            (uint32_t)tp->partition >= parts)
            continue; /* never committed, or its topic is gone */
        snprintf(cs[n].topic, sizeof cs[n].topic, "%s", tp->topic);
        cs[n].partition = (uint32_t)tp->partition;
        cs[n].offset = tp->offset;
        n++;
    }
    if (ev != NULL)
        rd_kafka_event_destroy(ev);
    if (n > 0) /* cs may be NULL then: qsort wants an array */
        qsort(cs, n, sizeof *cs, by_cursor);
    for (size_t i = 0; st == PULSE_OK && i < n; i++)
        rd_kafka_topic_partition_list_add(list, cs[i].topic, (int32_t)cs[i].partition);
    if (st == PULSE_OK && n > 0 && (st = pulse_kafka_watermarks(k, list, NULL)) == PULSE_OK)
        for (size_t i = 0; i < n; i++)
            set_lag(&cs[i], list->elems[i].offset);
    rd_kafka_topic_partition_list_destroy(list);
    if (st != PULSE_OK) {
        pulse_free(cs);
        return st;
    }
    *j->list_out = n > 0 ? cs : NULL;
    if (n == 0)
        pulse_free(cs);
    *j->n_out = n;
    return PULSE_OK;
}

pulse_status_t pulse_kafka_cursor_commit_async(struct pulse_broker *b, const char *consumer,
                                               const struct pulse_cursor *cursors, size_t n, pulse_admin_done_fn done,
                                               void *arg, char *errbuf, size_t errlen)
{
    if (!pulse_broker_name_valid(consumer, strlen(consumer))) {
        pulse_errbuf_set(errbuf, errlen, "invalid consumer name");
        return PULSE_INVALID_NAME;
    }
    if (n == 0) {
        pulse_errbuf_set(errbuf, errlen, "no cursors to commit");
        return PULSE_INVALID;
    }
    struct kjob *j = new_job(JOB_COMMIT, consumer, done, arg);
    struct pulse_cursor *copy = pulse_calloc(n, sizeof *copy);
    if (j == NULL || copy == NULL) {
        pulse_free(j);
        pulse_free(copy);
        return PULSE_NOMEM;
    }
    memcpy(copy, cursors, n * sizeof *copy);
    j->cursors = copy;
    j->n = n;
    j->errbuf = errbuf;
    j->errlen = errlen;
    return submit(kafka_of(b), j);
}

pulse_status_t pulse_kafka_cursor_get_async(struct pulse_broker *b, const char *consumer, const char *topic,
                                            uint32_t partition, struct pulse_cursor *out, pulse_admin_done_fn done,
                                            void *arg)
{
    if (!pulse_broker_name_valid(consumer, strlen(consumer)))
        return PULSE_INVALID_NAME;
    struct kjob *j = new_job(JOB_GET, consumer, done, arg);
    if (j == NULL)
        return PULSE_NOMEM;
    memset(out, 0, sizeof *out);
    snprintf(out->topic, sizeof out->topic, "%s", topic);
    out->partition = partition;
    j->cursors = out;
    return submit(kafka_of(b), j);
}

pulse_status_t pulse_kafka_cursor_list_async(struct pulse_broker *b, const char *consumer, struct pulse_cursor **out,
                                             size_t *n_out, pulse_admin_done_fn done, void *arg)
{
    if (!pulse_broker_name_valid(consumer, strlen(consumer)))
        return PULSE_INVALID_NAME;
    struct kjob *j = new_job(JOB_LIST, consumer, done, arg);
    if (j == NULL)
        return PULSE_NOMEM;
    j->list_out = out;
    j->n_out = n_out;
    return submit(kafka_of(b), j);
}

pulse_status_t pulse_kafka_admin_submit(struct pulse_kafka *k, pulse_kafka_job_fn fn, void *ctx,
                                        void (*ctx_free)(void *ctx), pulse_admin_done_fn done, void *arg)
{
    struct kjob *j = new_job(JOB_FN, "", done, arg);
    if (j == NULL) {
        if (ctx_free != NULL)
            ctx_free(ctx);
        return PULSE_NOMEM;
    }
    j->fn = fn;
    j->ctx = ctx;
    j->ctx_free = ctx_free;
    return submit(k, j);
}

/* ---- the kadmin thread ------------------------------------------------------ */

static pulse_status_t run(struct pulse_kafka *k, struct kjob *j)
{
    switch (j->kind) {
    case JOB_CREATE:
        return run_create(k, j);
    case JOB_DELETE:
        return run_delete(k, j);
    case JOB_COMMIT:
        return run_commit(k, j);
    case JOB_GET:
        return run_get(k, j);
    case JOB_LIST:
        return run_list(k, j);
    case JOB_FN:
        return j->fn(k, j->ctx);
    }
    return PULSE_INVALID;
}

void *pulse_kafka_admin_main(void *arg)
{
    struct pulse_kafka *k = arg;
    pthread_mutex_lock(&k->admin_mu);
    for (;;) {
        while (k->jobs_head == NULL && !atomic_load(&k->stopping))
            pthread_cond_wait(&k->admin_cv, &k->admin_mu);
        if (k->jobs_head == NULL)
            break;
        struct kjob *j = k->jobs_head;
        k->jobs_head = j->next;
        if (k->jobs_head == NULL)
            k->jobs_tail = NULL;
        k->jobs_running++;
        pthread_mutex_unlock(&k->admin_mu);
        pulse_status_t st = run(k, j);
        j->done(j->arg, st);
        if (j->kind == JOB_COMMIT)
            pulse_free(j->cursors);
        if (j->ctx_free != NULL)
            j->ctx_free(j->ctx);
        pulse_free(j);
        pthread_mutex_lock(&k->admin_mu);
        k->jobs_running--;
        pthread_cond_broadcast(&k->admin_cv);
    }
    pthread_mutex_unlock(&k->admin_mu);
    return NULL;
}

void pulse_kafka_admin_drain(struct pulse_kafka *k)
{
    pthread_mutex_lock(&k->admin_mu);
    while (k->admin_started && (k->jobs_head != NULL || k->jobs_running > 0))
        pthread_cond_wait(&k->admin_cv, &k->admin_mu);
    pthread_mutex_unlock(&k->admin_mu);
}

/* ---- for the consumer groups (kgcalls.c), on kadmin itself ---------------- */

pulse_status_t pulse_kafka_group_offsets_read(struct pulse_kafka *k, const char *group,
                                              const rd_kafka_topic_partition_list_t *parts, int64_t *offsets)
{
    rd_kafka_event_t *ev = NULL;
    pulse_status_t st = PULSE_OK;
    const rd_kafka_topic_partition_list_t *res = group_offsets(k, group, parts, &ev, &st);
    for (int i = 0; i < parts->cnt; i++) {
        offsets[i] = -1;
        for (int j = 0; res != NULL && st == PULSE_OK && j < res->cnt; j++)
            if (res->elems[j].partition == parts->elems[i].partition &&
                strcmp(res->elems[j].topic, parts->elems[i].topic) == 0 && res->elems[j].err == 0)
                offsets[i] = res->elems[j].offset >= 0 ? res->elems[j].offset : -1;
    }
    if (ev != NULL)
        rd_kafka_event_destroy(ev);
    return st;
}

pulse_status_t pulse_kafka_group_offsets_write(struct pulse_kafka *k, const char *group,
                                               const rd_kafka_topic_partition_list_t *list)
{
    pulse_status_t st = PULSE_OK;
    rd_kafka_AlterConsumerGroupOffsets_t *a = rd_kafka_AlterConsumerGroupOffsets_new(group, list);
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->prod);
    rd_kafka_AdminOptions_t *o = pulse_kafka_admin_options(k, RD_KAFKA_ADMIN_OP_ALTERCONSUMERGROUPOFFSETS);
    rd_kafka_AlterConsumerGroupOffsets(k->prod, &a, 1, o, q);
    rd_kafka_event_t *ev = wait_event(k, q);
    const rd_kafka_topic_partition_list_t *res = group_parts(ev, true, &st);
    for (int i = 0; res != NULL && st == PULSE_OK && i < res->cnt; i++)
        st = pulse_kafka_status(res->elems[i].err);
    if (ev != NULL)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    rd_kafka_AlterConsumerGroupOffsets_destroy(a);
    return st;
}
