/* SPDX-License-Identifier: MIT */
/*
 * kmeta.c - what the Kafka backend knows of the cluster's topics: a cache
 * of the all-topics metadata (names and partition counts), the watermarks
 * of partitions, and topic_get / topic_list built from them.
 *
 * Why all-topics metadata and never a request naming a topic: a Metadata
 * request that names an unknown topic creates it on the mock cluster (and
 * on a real cluster with auto.create.topics.enable), so a lookup of a
 * topic that does not exist must not name it. Every call that names a
 * topic (publish, fetch, cursor) checks the cache first.
 *
 * Freshness: the cache is refreshed by kwait every second and on a miss
 * (at most every 100 ms), so a topic created through another gateway is
 * seen within a second, and one deleted elsewhere is served for at most a
 * second more (its requests then fail at the cluster).
 */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "kafka/kafka_int.h"

#define STALE_US 1000000
#define MISS_REFRESH_US 100000

void pulse_kafka_meta_snapshot_free(struct kmeta_topic *t, size_t n)
{
    for (size_t i = 0; t != NULL && i < n; i++)
        pulse_free(t[i].name);
    pulse_free(t);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct kmeta_topic *)a)->name, ((const struct kmeta_topic *)b)->name);
}

/* The topics of md, sorted, leaving out Kafka's internal ones (names
 * starting with "__", which Pulse names never do). */
static pulse_status_t topics_of(const rd_kafka_metadata_t *md, struct kmeta_topic **out, size_t *n_out)
{
    struct kmeta_topic *t = pulse_calloc((size_t)md->topic_cnt + 1, sizeof *t);
    size_t n = 0;
    if (t == NULL)
        return PULSE_NOMEM;
    for (int i = 0; i < md->topic_cnt; i++) {
        const rd_kafka_metadata_topic_t *mt = &md->topics[i];
        if (mt->err != RD_KAFKA_RESP_ERR_NO_ERROR || strncmp(mt->topic, "__", 2) == 0)
            continue;
        t[n].name = pulse_strdup(mt->topic);
        if (t[n].name == NULL) {
            pulse_kafka_meta_snapshot_free(t, n);
            return PULSE_NOMEM;
        }
        t[n].partitions = (uint32_t)mt->partition_cnt;
        n++;
    }
    qsort(t, n, sizeof *t, by_name);
    *out = t;
    *n_out = n;
    return PULSE_OK;
}

pulse_status_t pulse_kafka_meta_refresh(struct pulse_kafka *k)
{
    const struct rd_kafka_metadata *md = NULL;
    struct kmeta_topic *t = NULL;
    size_t n = 0;
    rd_kafka_resp_err_t err = rd_kafka_metadata(k->prod, 1, NULL, &md, (int)k->timeout_ms);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        atomic_store(&k->cluster_ok, false);
        return pulse_kafka_status(err) == PULSE_IO ? PULSE_UNAVAILABLE : pulse_kafka_status(err);
    }
    pulse_status_t st = topics_of(md, &t, &n);
    rd_kafka_metadata_destroy(md);
    if (st != PULSE_OK)
        return st;
    atomic_store(&k->cluster_ok, true);
    pthread_mutex_lock(&k->meta_mu);
    struct kmeta_topic *old = k->topics;
    size_t n_old = k->n_topics;
    k->topics = t;
    k->n_topics = n;
    k->meta_at_us = pulse_clock_mono_us();
    pthread_mutex_unlock(&k->meta_mu);
    pulse_kafka_meta_snapshot_free(old, n_old);
    return PULSE_OK;
}

/* The cached count of topic into *n_out: 1 found, 0 not, -1 the cache is
 * older than max_age_us (nothing answered). */
static int cached(struct pulse_kafka *k, const char *topic, int64_t max_age_us, uint32_t *n_out)
{
    int rc = -1;
    pthread_mutex_lock(&k->meta_mu);
    if (k->meta_at_us != 0 && pulse_clock_mono_us() - k->meta_at_us < max_age_us) {
        struct kmeta_topic key = {(char *)(uintptr_t)topic, 0};
        const struct kmeta_topic *t = bsearch(&key, k->topics, k->n_topics, sizeof key, by_name);
        rc = t != NULL;
        if (t != NULL)
            *n_out = t->partitions;
    }
    pthread_mutex_unlock(&k->meta_mu);
    return rc;
}

pulse_status_t pulse_kafka_meta_partitions(struct pulse_kafka *k, const char *topic, uint32_t *n_out)
{
    int rc = cached(k, topic, STALE_US, n_out);
    if (rc == 1)
        return PULSE_OK;
    if (!atomic_load(&k->cluster_ok) && rc == -1)
        return PULSE_UNAVAILABLE;
    /* A miss in a fresh cache may be a topic just created elsewhere: one
     * refresh, unless the cache is younger than MISS_REFRESH_US. */
    if (rc == 0 && cached(k, topic, MISS_REFRESH_US, n_out) == 0)
        return PULSE_TOPIC_NOT_FOUND;
    pulse_status_t st = pulse_kafka_meta_refresh(k);
    if (st != PULSE_OK)
        return st;
    return cached(k, topic, STALE_US, n_out) == 1 ? PULSE_OK : PULSE_TOPIC_NOT_FOUND;
}

pulse_status_t pulse_kafka_meta_snapshot(struct pulse_kafka *k, struct kmeta_topic **out, size_t *n_out)
{
    pulse_status_t st = PULSE_OK;
    pthread_mutex_lock(&k->meta_mu);
    bool stale = k->meta_at_us == 0 || pulse_clock_mono_us() - k->meta_at_us >= STALE_US;
    pthread_mutex_unlock(&k->meta_mu);
    if (stale && (st = pulse_kafka_meta_refresh(k)) != PULSE_OK)
        return st;
    pthread_mutex_lock(&k->meta_mu);
    struct kmeta_topic *t = pulse_calloc(k->n_topics + 1, sizeof *t);
    size_t n = 0;
    for (; t != NULL && n < k->n_topics; n++) {
        t[n].partitions = k->topics[n].partitions;
        if ((t[n].name = pulse_strdup(k->topics[n].name)) == NULL)
            break;
    }
    bool ok = t != NULL && n == k->n_topics;
    pthread_mutex_unlock(&k->meta_mu);
    if (!ok) {
        pulse_kafka_meta_snapshot_free(t, n);
        return PULSE_NOMEM;
    }
    *out = t;
    *n_out = n;
    return PULSE_OK;
}

/* One ListOffsets round for every entry (offset -2: earliest, -1: latest),
 * results written back into a copy; each entry's own error is kept. */
static pulse_status_t list_offsets(struct pulse_kafka *k, rd_kafka_topic_partition_list_t *list, int64_t which,
                                   int64_t *out)
{
    rd_kafka_topic_partition_list_t *q = rd_kafka_topic_partition_list_copy(list);
    for (int i = 0; i < q->cnt; i++)
        q->elems[i].offset = which;
    rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(k->prod, q, (int)k->timeout_ms);
    pulse_status_t st = pulse_kafka_status(err);
    for (int i = 0; st == PULSE_OK && i < q->cnt; i++) {
        if (q->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR)
            st = pulse_kafka_status(q->elems[i].err);
        out[i] = q->elems[i].offset;
    }
    rd_kafka_topic_partition_list_destroy(q);
    if (st == PULSE_IO)
        st = PULSE_UNAVAILABLE;
    return st;
}

pulse_status_t pulse_kafka_watermarks(struct pulse_kafka *k, rd_kafka_topic_partition_list_t *list, int64_t *lo)
{
    pulse_status_t st = PULSE_OK;
    int64_t *hi = pulse_calloc((size_t)list->cnt + 1, sizeof *hi);
    if (hi == NULL)
        return PULSE_NOMEM;
    if (lo != NULL)
        st = list_offsets(k, list, RD_KAFKA_OFFSET_BEGINNING, lo);
    if (st == PULSE_OK)
        st = list_offsets(k, list, RD_KAFKA_OFFSET_END, hi);
    for (int i = 0; st == PULSE_OK && i < list->cnt; i++)
        list->elems[i].offset = hi[i];
    pulse_free(hi);
    return st;
}

/* The info of one topic; with stats, its partitions' positions come from
 * the list (filled by pulse_kafka_watermarks) starting at entry first. */
static struct pulse_topic_info *info_of(const struct kmeta_topic *t, const rd_kafka_topic_partition_list_t *list,
                                        const int64_t *lo, int first)
{
    struct pulse_topic_info *info = pulse_calloc(1, sizeof *info);
    if (info == NULL)
        return NULL;
    snprintf(info->name, sizeof info->name, "%s", t->name);
    info->partitions = t->partitions;
    info->cleanup = PULSE_CLEANUP_DELETE;
    /* The gateway does not read topic configurations (docs/Scaling.md). */
    info->retention_ms = -1;
    info->retention_bytes = -1;
    info->segment_bytes = -1;
    info->created_at_ms = -1;
    if (list == NULL)
        return info;
    info->stats = pulse_calloc(t->partitions + 1, sizeof *info->stats);
    if (info->stats == NULL) {
        pulse_free(info);
        return NULL;
    }
    for (uint32_t p = 0; p < t->partitions; p++) {
        info->stats[p].partition = p;
        info->stats[p].log_start_offset = lo[first + (int)p];
        info->stats[p].high_watermark = list->elems[first + (int)p].offset;
    }
    return info;
}

/* The infos of topics t[0..n), with stats when asked (one pair of
 * ListOffsets calls for every partition of all of them). */
static pulse_status_t infos_of(struct pulse_kafka *k, const struct kmeta_topic *t, size_t n, bool with_stats,
                               struct pulse_topic_info **infos)
{
    pulse_status_t st = PULSE_OK;
    rd_kafka_topic_partition_list_t *list = NULL;
    int64_t *lo = NULL;
    if (with_stats) {
        list = rd_kafka_topic_partition_list_new(16);
        for (size_t i = 0; i < n; i++)
            for (uint32_t p = 0; p < t[i].partitions; p++)
                rd_kafka_topic_partition_list_add(list, t[i].name, (int32_t)p);
        lo = pulse_calloc((size_t)list->cnt + 1, sizeof *lo);
        st = lo == NULL ? PULSE_NOMEM : list->cnt > 0 ? pulse_kafka_watermarks(k, list, lo) : PULSE_OK;
    }
    int first = 0;
    for (size_t i = 0; st == PULSE_OK && i < n; i++) {
        if ((infos[i] = info_of(&t[i], list, lo, first)) == NULL)
            st = PULSE_NOMEM;
        first += (int)t[i].partitions;
    }
    if (list != NULL)
        rd_kafka_topic_partition_list_destroy(list);
    pulse_free(lo);
    return st;
}

pulse_status_t pulse_kafka_topic_get(struct pulse_broker *b, const char *name, bool with_stats,
                                     struct pulse_topic_info **out)
{
    struct pulse_kafka *k = kafka_of(b);
    struct kmeta_topic t = {(char *)(uintptr_t)name, 0};
    pulse_status_t st = pulse_kafka_meta_partitions(k, name, &t.partitions);
    if (st != PULSE_OK)
        return st;
    *out = NULL;
    st = infos_of(k, &t, 1, with_stats, out);
    if (st != PULSE_OK) {
        pulse_topic_info_free(*out);
        *out = NULL;
    }
    return st;
}

pulse_status_t pulse_kafka_topic_list(struct pulse_broker *b, bool with_stats, struct pulse_topic_info ***out,
                                      size_t *n_out)
{
    struct pulse_kafka *k = kafka_of(b);
    struct kmeta_topic *t = NULL;
    size_t n = 0;
    pulse_status_t st = pulse_kafka_meta_snapshot(k, &t, &n);
    if (st != PULSE_OK)
        return st;
    struct pulse_topic_info **infos = pulse_calloc(n + 1, sizeof *infos);
    st = infos == NULL ? PULSE_NOMEM : infos_of(k, t, n, with_stats, infos);
    pulse_kafka_meta_snapshot_free(t, n);
    if (st != PULSE_OK) {
        pulse_topic_info_list_free(infos, n);
        return st;
    }
    *out = infos;
    *n_out = n;
    return PULSE_OK;
}
