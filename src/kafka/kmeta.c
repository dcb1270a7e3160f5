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
 *
 * Lookups never wait on the caller's thread: a publish or fetch whose topic
 * the cache cannot answer for (a miss in a cache older than 100 ms, or a
 * cache over a second old) parks a lookup (pulse_kafka_topic_lookup_async,
 * the seam's topic_lookup_async, which the HTTP handlers call first) and
 * its request is suspended. kwait runs one refresh for every lookup
 * waiting, at once; each refresh answers the lookups parked before it
 * began (one that parked during a refresh may have been created after that
 * refresh asked, so it waits for the next), and a refresh that fails
 * answers all of them (PULSE_UNAVAILABLE: a request arriving now would be
 * told the same). So a lookup is answered within about two request
 * timeouts at most, and however many requests miss at once, one refresh
 * serves them and no HTTP worker waits for it.
 *
 * Watermarks: kwait's refresh also asks the log start and high watermark
 * of every partition (two ListOffsets calls for all of them), so topic_get
 * and topic_list - called on HTTP workers, which must not wait - answer
 * from the cache alone and never call the cluster. A delivery report of
 * this gateway raises its partition's cached high watermark at once (so a
 * publish is seen by the next topic read through the same gateway); a
 * refresh whose question was asked before such a raise never lowers it.
 * Data published through another gateway shows within a refresh (about a
 * second). When the refreshes fail (the cluster is gone), topic_get and
 * topic_list answer PULSE_UNAVAILABLE at once.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "kafka/kafka_int.h"

#define STALE_US 1000000
#define MISS_REFRESH_US 100000
/* topic_get/topic_list answer from a cache at most this old (kwait
 * refreshes it every second; older means its refreshes fail or take the
 * whole request timeout, i.e. the cluster is gone or overloaded). */
#define SERVE_MAX_AGE_US 5000000
/* A partition whose watermark the last round could not get (its own
 * error: no leader, deleted meanwhile): its cached marks stay as they were. */
#define MARK_UNKNOWN INT64_MIN

/* A topic lookup waiting for a refresh (pulse_kafka_topic_lookup_async). */
struct kmwait {
    struct kmwait *next;
    uint64_t seen;     /* refreshes begun before it parked */
    pulse_status_t st; /* its answer, once taken */
    pulse_admin_done_fn done;
    void *arg;
    char *errbuf;
    size_t errlen;
    char topic[PULSE_NAME_MAX + 1];
};

void pulse_kafka_meta_snapshot_free(struct kmeta_topic *t, size_t n)
{
    for (size_t i = 0; t != NULL && i < n; i++) {
        pulse_free(t[i].name);
        pulse_free(t[i].marks);
    }
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
        t[n].marks = pulse_calloc((size_t)t[n].partitions + 1, sizeof *t[n].marks);
        if (t[n].marks == NULL) {
            pulse_kafka_meta_snapshot_free(t, n + 1);
            return PULSE_NOMEM;
        }
        n++;
    }
    qsort(t, n, sizeof *t, by_name);
    *out = t;
    *n_out = n;
    return PULSE_OK;
}

/* Fills the marks of each topic of t[0..n): the old cache's for a topic of
 * the same name and partition count (under meta_mu), then the answers of
 * the ListOffsets round asked at asked_us (lo, hi; NULL when it failed),
 * except that a high watermark raised by a delivery report after asked_us
 * is never lowered. */
static void merge_marks(struct pulse_kafka *k, struct kmeta_topic *t, size_t n, const int64_t *lo, const int64_t *hi,
                        int64_t asked_us)
{
    size_t first = 0;
    for (size_t i = 0; i < n; first += t[i].partitions, i++) {
        /* The first refresh has no cache (NULL): bsearch wants an array. */
        struct kmeta_topic *o = k->n_topics > 0 ? bsearch(&t[i], k->topics, k->n_topics, sizeof *o, by_name) : NULL;
        for (uint32_t p = 0; t[i].marks != NULL && p < t[i].partitions; p++) {
            struct kmeta_marks *m = &t[i].marks[p];
            if (o != NULL && o->partitions == t[i].partitions && o->marks != NULL)
                *m = o->marks[p];
            if (hi == NULL || lo[first + p] == MARK_UNKNOWN || hi[first + p] == MARK_UNKNOWN)
                continue;
            m->lo = lo[first + p];
            m->hi = m->known && m->raised_us >= asked_us && m->hi > hi[first + p] ? m->hi : hi[first + p];
            m->known = true;
        }
    }
}

/* Whether err says the cluster as a whole did not answer (rather than a
 * partition or topic refusing). */
static bool whole_failure(rd_kafka_resp_err_t err)
{
    return err == RD_KAFKA_RESP_ERR__TIMED_OUT || err == RD_KAFKA_RESP_ERR__TRANSPORT ||
           err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || err == RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE ||
           err == RD_KAFKA_RESP_ERR__DESTROY;
}

/* ListOffsets (which: -2 earliest, -1 latest) of entries [from, to) of list
 * into out[from..to): MARK_UNKNOWN for all of them when the call failed
 * for another reason than the cluster being gone (*gone). librdkafka 2.0.2
 * then reports one error for the whole call and no entry at all. */
static void ask_range(struct pulse_kafka *k, const rd_kafka_topic_partition_list_t *list, int from, int to,
                      int64_t which, int64_t *out, bool *gone)
{
    rd_kafka_topic_partition_list_t *q = rd_kafka_topic_partition_list_new(to - from);
    for (int i = from; i < to; i++)
        rd_kafka_topic_partition_list_add(q, list->elems[i].topic, list->elems[i].partition)->offset = which;
    rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(k->prod, q, (int)k->timeout_ms);
    *gone = whole_failure(err);
    for (int i = from; i < to; i++) {
        const rd_kafka_topic_partition_t *e = &q->elems[i - from];
        bool ok = err == RD_KAFKA_RESP_ERR_NO_ERROR && e->err == RD_KAFKA_RESP_ERR_NO_ERROR && e->offset >= 0;
        out[i] = ok ? e->offset : MARK_UNKNOWN;
    }
    rd_kafka_topic_partition_list_destroy(q);
}

/* One round for every entry of list (grouped by topic, as
 * ask_all_marks builds it) into out[]. One call for all; if it fails for
 * a topic's or a partition's own reason, one call per topic, so a
 * partition without a leader leaves only its topic's marks as they were,
 * and the others (and the gateway's health) are not taken with it.
 * PULSE_UNAVAILABLE when the cluster did not answer. */
static pulse_status_t ask_round(struct pulse_kafka *k, const rd_kafka_topic_partition_list_t *list, int64_t which,
                                int64_t *out)
{
    bool gone = false;
    ask_range(k, list, 0, list->cnt, which, out, &gone);
    if (gone)
        return PULSE_UNAVAILABLE;
    if (list->cnt == 0 || out[0] != MARK_UNKNOWN)
        return PULSE_OK; /* the call as a whole succeeded */
    for (int from = 0; from < list->cnt && !gone;) {
        int to = from + 1;
        while (to < list->cnt && strcmp(list->elems[to].topic, list->elems[from].topic) == 0)
            to++;
        ask_range(k, list, from, to, which, out, &gone);
        from = to;
    }
    return gone ? PULSE_UNAVAILABLE : PULSE_OK;
}

pulse_status_t pulse_kafka_latest_marks(struct pulse_kafka *k, const rd_kafka_topic_partition_list_t *list, int64_t *hi)
{
    return ask_round(k, list, RD_KAFKA_OFFSET_END, hi);
}

/* Asks the watermarks of every partition of t[0..n): *lo_out and *hi_out
 * (pulse_free both; MARK_UNKNOWN where a partition had its own error), or
 * PULSE_UNAVAILABLE & co. */
static pulse_status_t ask_all_marks(struct pulse_kafka *k, const struct kmeta_topic *t, size_t n, int64_t **lo_out,
                                    int64_t **hi_out)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(16);
    for (size_t i = 0; i < n; i++)
        for (uint32_t p = 0; p < t[i].partitions; p++)
            rd_kafka_topic_partition_list_add(list, t[i].name, (int32_t)p);
    int64_t *lo = pulse_calloc((size_t)list->cnt + 1, sizeof *lo);
    int64_t *hi = pulse_calloc((size_t)list->cnt + 1, sizeof *hi);
    pulse_status_t st = lo == NULL || hi == NULL ? PULSE_NOMEM : PULSE_OK;
    if (st == PULSE_OK && list->cnt > 0)
        st = ask_round(k, list, RD_KAFKA_OFFSET_BEGINNING, lo);
    if (st == PULSE_OK && list->cnt > 0)
        st = ask_round(k, list, RD_KAFKA_OFFSET_END, hi);
    rd_kafka_topic_partition_list_destroy(list);
    if (st != PULSE_OK) {
        pulse_free(lo);
        pulse_free(hi);
        return st;
    }
    *lo_out = lo;
    *hi_out = hi;
    return PULSE_OK;
}

static int by_name_key(const void *key, const void *elem);

/* Takes off the list the lookups parked before refresh number round began
 * (all of them for UINT64_MAX), each with its answer: st when it is not
 * PULSE_OK, else whether the cache (just replaced; meta_mu held) has its
 * topic. */
static struct kmwait *take_lookups_locked(struct pulse_kafka *k, uint64_t round, pulse_status_t st)
{
    struct kmwait *due = NULL;
    struct kmwait **pp = &k->meta_waiters;
    while (*pp != NULL) {
        struct kmwait *w = *pp;
        if (w->seen >= round) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        w->next = due;
        due = w;
        atomic_fetch_sub(&k->meta_waiting, 1);
        bool known = bsearch(w->topic, k->topics, k->n_topics, sizeof *k->topics, by_name_key) != NULL;
        w->st = st != PULSE_OK ? st : known ? PULSE_OK : PULSE_TOPIC_NOT_FOUND;
        if (st == PULSE_UNAVAILABLE)
            pulse_errbuf_set(w->errbuf, w->errlen, "the Kafka cluster cannot be reached");
    }
    return due;
}

static struct kmwait *take_lookups(struct pulse_kafka *k, uint64_t round, pulse_status_t st)
{
    pthread_mutex_lock(&k->meta_mu);
    struct kmwait *due = take_lookups_locked(k, round, st);
    pthread_mutex_unlock(&k->meta_mu);
    return due;
}

/* Calls each taken lookup's done with its answer; no lock held. */
static void fire_lookups(struct kmwait *w)
{
    while (w != NULL) {
        struct kmwait *next = w->next;
        w->done(w->arg, w->st);
        pulse_free(w);
        w = next;
    }
}

/* One refresh: the names (always), the watermarks of every partition when
 * with_marks; then the cache is replaced under meta_mu. */
static pulse_status_t refresh(struct pulse_kafka *k, bool with_marks)
{
    const struct rd_kafka_metadata *md = NULL;
    struct kmeta_topic *t = NULL;
    size_t n = 0;
    int64_t *lo = NULL, *hi = NULL;
    pthread_mutex_lock(&k->meta_mu);
    uint64_t round = ++k->meta_started;
    pthread_mutex_unlock(&k->meta_mu);
    rd_kafka_resp_err_t err = rd_kafka_metadata(k->prod, 1, NULL, &md, (int)k->timeout_ms);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        atomic_store(&k->cluster_ok, false);
        pulse_status_t fst = pulse_kafka_status(err) == PULSE_IO ? PULSE_UNAVAILABLE : pulse_kafka_status(err);
        fire_lookups(take_lookups(k, UINT64_MAX, fst));
        return fst;
    }
    pulse_status_t st = topics_of(md, &t, &n);
    rd_kafka_metadata_destroy(md);
    if (st != PULSE_OK) {
        fire_lookups(take_lookups(k, UINT64_MAX, st));
        return st;
    }
    int64_t asked_us = pulse_clock_mono_us();
    pulse_status_t mst = with_marks ? ask_all_marks(k, t, n, &lo, &hi) : PULSE_UNAVAILABLE;
    if (with_marks && mst == PULSE_UNAVAILABLE) {
        /* Metadata answered but ListOffsets did not in time: not healthy. */
        atomic_store(&k->cluster_ok, false);
    } else {
        atomic_store(&k->cluster_ok, true);
    }
    pthread_mutex_lock(&k->meta_mu);
    struct kmeta_topic *old = t;
    size_t n_old = n;
    /* A refresh that began before the one the cache holds answered later:
     * its names are older (a topic created in between would vanish from a
     * fresh cache, and a miss there is a 404), so it is dropped. */
    if (round > k->meta_installed) {
        merge_marks(k, t, n, mst == PULSE_OK ? lo : NULL, mst == PULSE_OK ? hi : NULL, asked_us);
        old = k->topics;
        n_old = k->n_topics;
        k->topics = t;
        k->n_topics = n;
        k->meta_installed = round;
        k->meta_at_us = pulse_clock_mono_us();
        if (mst == PULSE_OK)
            k->marks_at_us = k->meta_at_us;
    }
    /* The names are known now, whatever the watermarks gave. */
    struct kmwait *due = take_lookups_locked(k, round, PULSE_OK);
    pthread_mutex_unlock(&k->meta_mu);
    fire_lookups(due);
    pulse_kafka_meta_snapshot_free(old, n_old);
    pulse_free(lo);
    pulse_free(hi);
    return with_marks ? mst : PULSE_OK;
}

pulse_status_t pulse_kafka_meta_refresh(struct pulse_kafka *k)
{
    return refresh(k, false);
}

pulse_status_t pulse_kafka_meta_refresh_marks(struct pulse_kafka *k)
{
    return refresh(k, true);
}

void pulse_kafka_meta_note_hw(struct pulse_kafka *k, const char *topic, int32_t partition, int64_t hw)
{
    struct kmeta_topic key = {(char *)(uintptr_t)topic, 0, NULL};
    pthread_mutex_lock(&k->meta_mu);
    struct kmeta_topic *t = bsearch(&key, k->topics, k->n_topics, sizeof key, by_name);
    if (t != NULL && t->marks != NULL && partition >= 0 && (uint32_t)partition < t->partitions) {
        struct kmeta_marks *m = &t->marks[partition];
        if (m->known && hw > m->hi)
            m->hi = hw;
        m->raised_us = pulse_clock_mono_us();
    }
    pthread_mutex_unlock(&k->meta_mu);
}

/* The cached count of topic into *n_out: 1 found, 0 not, -1 the cache is
 * older than max_age_us (nothing answered). */
static int cached(struct pulse_kafka *k, const char *topic, int64_t max_age_us, uint32_t *n_out)
{
    int rc = -1;
    pthread_mutex_lock(&k->meta_mu);
    if (k->meta_at_us != 0 && pulse_clock_mono_us() - k->meta_at_us < max_age_us) {
        struct kmeta_topic key = {(char *)(uintptr_t)topic, 0, NULL};
        const struct kmeta_topic *t = bsearch(&key, k->topics, k->n_topics, sizeof key, by_name);
        rc = t != NULL;
        if (t != NULL)
            *n_out = t->partitions;
    }
    pthread_mutex_unlock(&k->meta_mu);
    return rc;
}

int pulse_kafka_meta_cached(struct pulse_kafka *k, const char *topic, uint32_t *n_out)
{
    return cached(k, topic, INT64_MAX, n_out);
}

/* What the cache says of topic without a refresh: PULSE_OK (*n_out),
 * PULSE_TOPIC_NOT_FOUND, PULSE_UNAVAILABLE (the cluster is known to be gone
 * and the cache is stale), or PULSE_BUSY: only a refresh can tell (an
 * answer inside this file, never returned by its functions). */
static pulse_status_t decide(struct pulse_kafka *k, const char *topic, uint32_t *n_out)
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
    return PULSE_BUSY;
}

pulse_status_t pulse_kafka_topic_lookup_async(struct pulse_broker *b, const char *topic, pulse_admin_done_fn done,
                                              void *arg, bool *pending_out, char *errbuf, size_t errlen)
{
    struct pulse_kafka *k = kafka_of(b);
    uint32_t n = 0;
    *pending_out = false;
    if (atomic_load(&k->draining))
        return PULSE_SHUTDOWN;
    pulse_status_t st = decide(k, topic, &n);
    if (st == PULSE_UNAVAILABLE)
        pulse_errbuf_set(errbuf, errlen, "the Kafka cluster cannot be reached");
    if (st != PULSE_BUSY)
        return st;
    struct kmwait *w = pulse_calloc(1, sizeof *w);
    if (w == NULL)
        return PULSE_NOMEM;
    snprintf(w->topic, sizeof w->topic, "%s", topic);
    w->done = done;
    w->arg = arg;
    w->errbuf = errbuf;
    w->errlen = errlen;
    pthread_mutex_lock(&k->meta_mu);
    if (atomic_load(&k->draining)) {
        pthread_mutex_unlock(&k->meta_mu);
        pulse_free(w);
        return PULSE_SHUTDOWN;
    }
    w->seen = k->meta_started;
    w->next = k->meta_waiters;
    k->meta_waiters = w;
    atomic_fetch_add(&k->meta_waiting, 1);
    pthread_mutex_unlock(&k->meta_mu);
    *pending_out = true;
    pulse_kafka_wait_kick(k); /* kwait refreshes at once */
    return PULSE_OK;
}

bool pulse_kafka_meta_lookups_waiting(struct pulse_kafka *k)
{
    return atomic_load(&k->meta_waiting) > 0;
}

void pulse_kafka_meta_lookups_fire_all(struct pulse_kafka *k, pulse_status_t st)
{
    fire_lookups(take_lookups(k, UINT64_MAX, st));
}

pulse_status_t pulse_kafka_meta_partitions(struct pulse_kafka *k, const char *topic, uint32_t *n_out)
{
    pulse_status_t st = decide(k, topic, n_out);
    if (st != PULSE_BUSY)
        return st;
    st = pulse_kafka_meta_refresh(k);
    if (st != PULSE_OK)
        return st;
    return cached(k, topic, STALE_US, n_out) == 1 ? PULSE_OK : PULSE_TOPIC_NOT_FOUND;
}

/* Copies the cache (names, counts, marks) under meta_mu; the caller holds
 * it. */
static pulse_status_t copy_cache(struct pulse_kafka *k, struct kmeta_topic **out, size_t *n_out)
{
    struct kmeta_topic *t = pulse_calloc(k->n_topics + 1, sizeof *t);
    size_t n = 0;
    for (; t != NULL && n < k->n_topics; n++) {
        const struct kmeta_topic *o = &k->topics[n];
        t[n].partitions = o->partitions;
        t[n].name = pulse_strdup(o->name);
        t[n].marks = pulse_calloc((size_t)o->partitions + 1, sizeof *t[n].marks);
        if (t[n].name == NULL || t[n].marks == NULL) {
            n++;
            pulse_kafka_meta_snapshot_free(t, n);
            return PULSE_NOMEM;
        }
        if (o->marks != NULL)
            memcpy(t[n].marks, o->marks, o->partitions * sizeof *t[n].marks);
    }
    if (t == NULL)
        return PULSE_NOMEM;
    *out = t;
    *n_out = n;
    return PULSE_OK;
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
    st = copy_cache(k, out, n_out);
    pthread_mutex_unlock(&k->meta_mu);
    return st;
}

/* The cache as it is, with no call to the cluster: PULSE_UNAVAILABLE when
 * the cluster is known to be gone or the cache is older than
 * SERVE_MAX_AGE_US (with_marks: the watermarks too). */
static pulse_status_t cached_snapshot(struct pulse_kafka *k, bool with_marks, struct kmeta_topic **out, size_t *n_out)
{
    pulse_status_t st = PULSE_UNAVAILABLE;
    int64_t now = pulse_clock_mono_us();
    pthread_mutex_lock(&k->meta_mu);
    int64_t at = with_marks ? k->marks_at_us : k->meta_at_us;
    if (atomic_load(&k->cluster_ok) && at != 0 && now - at < SERVE_MAX_AGE_US)
        st = copy_cache(k, out, n_out);
    pthread_mutex_unlock(&k->meta_mu);
    return st;
}

/* One ListOffsets call for every entry (offset -2: earliest, -1: latest)
 * of a copy of list, the offsets into out[]; returns the call's error, or
 * else the first entry's own. */
static rd_kafka_resp_err_t list_offsets_once(struct pulse_kafka *k, const rd_kafka_topic_partition_list_t *list,
                                             int64_t which, int timeout_ms, int64_t *out)
{
    rd_kafka_topic_partition_list_t *q = rd_kafka_topic_partition_list_copy(list);
    for (int i = 0; i < q->cnt; i++)
        q->elems[i].offset = which;
    rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(k->prod, q, timeout_ms);
    for (int i = 0; err == RD_KAFKA_RESP_ERR_NO_ERROR && i < q->cnt; i++) {
        err = q->elems[i].err;
        out[i] = q->elems[i].offset;
    }
    rd_kafka_topic_partition_list_destroy(q);
    return err;
}

/* One ListOffsets round for every entry, asked again after a short pause
 * while an entry's error is retriable and the request timeout lasts (the
 * last error decides): librdkafka's offsets_for_times hands a leader that
 * moved or is not elected yet to its caller as it is. */
static pulse_status_t list_offsets(struct pulse_kafka *k, rd_kafka_topic_partition_list_t *list, int64_t which,
                                   int64_t *out)
{
    int64_t deadline = pulse_clock_mono_us() + k->timeout_ms * 1000;
    int64_t pause_us = 10000;
    rd_kafka_resp_err_t err;
    for (;;) {
        int64_t left_ms = (deadline - pulse_clock_mono_us()) / 1000;
        err = list_offsets_once(k, list, which, (int)(left_ms > 1 ? left_ms : 1), out);
        if (!pulse_kafka_retriable(err) || pulse_clock_mono_us() + pause_us >= deadline)
            break;
        struct timespec ts = {0, (long)pause_us * 1000};
        nanosleep(&ts, NULL);
        pause_us = pause_us * 2 > 200000 ? 200000 : pause_us * 2;
    }
    pulse_status_t st = pulse_kafka_status(err);
    return st == PULSE_IO ? PULSE_UNAVAILABLE : st;
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

/* The info of one topic; with stats, its partitions' positions from the
 * cached marks. One not known yet (a topic younger than the last refresh
 * of the watermarks, a partition whose ListOffsets keeps failing):
 * PULSE_UNAVAILABLE in *st, or with unknown_ok no stats at all (a listing
 * shows an empty partition_stats for that topic rather than failing). */
static struct pulse_topic_info *info_of(const struct kmeta_topic *t, bool with_stats, bool unknown_ok,
                                        pulse_status_t *st)
{
    struct pulse_topic_info *info = pulse_calloc(1, sizeof *info);
    *st = PULSE_NOMEM;
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
    *st = PULSE_OK;
    if (!with_stats)
        return info;
    info->stats = pulse_calloc(t->partitions + 1, sizeof *info->stats);
    for (uint32_t p = 0; info->stats != NULL && p < t->partitions; p++) {
        if (!t->marks[p].known)
            *st = PULSE_UNAVAILABLE;
        info->stats[p].partition = p;
        info->stats[p].log_start_offset = t->marks[p].lo;
        info->stats[p].high_watermark = t->marks[p].hi;
    }
    if (info->stats == NULL)
        *st = PULSE_NOMEM;
    if (*st == PULSE_UNAVAILABLE && unknown_ok) {
        pulse_free(info->stats);
        info->stats = NULL;
        *st = PULSE_OK;
    }
    if (*st != PULSE_OK) {
        pulse_topic_info_free(info);
        return NULL;
    }
    return info;
}

static int by_name_key(const void *key, const void *elem)
{
    return strcmp(key, ((const struct kmeta_topic *)elem)->name);
}

/* Served from the cache alone (kmeta's comment): never waits for the
 * cluster. A topic the cache does not know is PULSE_TOPIC_NOT_FOUND; a
 * topic created through another gateway is known within a refresh. */
pulse_status_t pulse_kafka_topic_get(struct pulse_broker *b, const char *name, bool with_stats,
                                     struct pulse_topic_info **out)
{
    struct pulse_kafka *k = kafka_of(b);
    struct kmeta_topic *t = NULL;
    size_t n = 0;
    pulse_status_t st = cached_snapshot(k, with_stats, &t, &n);
    if (st != PULSE_OK)
        return st;
    const struct kmeta_topic *mine = bsearch(name, t, n, sizeof *t, by_name_key);
    *out = NULL;
    if (mine == NULL) {
        st = PULSE_TOPIC_NOT_FOUND;
        atomic_store(&k->meta_wanted, true); /* maybe created elsewhere: refresh soon */
        pulse_kafka_wait_kick(k);
    } else {
        *out = info_of(mine, with_stats, false, &st);
    }
    pulse_kafka_meta_snapshot_free(t, n);
    return st;
}

pulse_status_t pulse_kafka_topic_list(struct pulse_broker *b, bool with_stats, struct pulse_topic_info ***out,
                                      size_t *n_out)
{
    struct pulse_kafka *k = kafka_of(b);
    struct kmeta_topic *t = NULL;
    size_t n = 0;
    pulse_status_t st = cached_snapshot(k, with_stats, &t, &n);
    if (st != PULSE_OK)
        return st;
    struct pulse_topic_info **infos = pulse_calloc(n + 1, sizeof *infos);
    st = infos == NULL ? PULSE_NOMEM : PULSE_OK;
    for (size_t i = 0; st == PULSE_OK && i < n; i++)
        infos[i] = info_of(&t[i], with_stats, true, &st);
    pulse_kafka_meta_snapshot_free(t, n);
    if (st != PULSE_OK) {
        pulse_topic_info_list_free(infos, n);
        return st;
    }
    *out = infos;
    *n_out = n;
    return PULSE_OK;
}
