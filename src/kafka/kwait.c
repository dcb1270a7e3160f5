/* SPDX-License-Identifier: MIT */
/*
 * kwait.c - long-poll waiters of the Kafka backend, and the once-a-second
 * metadata refresh that is also the backend's health.
 *
 * Method: a waiter (positions - topic, partition, offset - and a deadline)
 * is parked in a list under wait_mu; it fires when any of its positions
 * has data. kwait wakes every TICK_MS while there are waiters
 * (at once when a publish of this gateway completes, which may have
 * raised a high watermark), copies the distinct partitions waited on, asks
 * their high watermarks in one ListOffsets round (bounded by the request
 * timeout, made with no lock held), and fires each waiter whose partition
 * passed its offset (PULSE_OK), whose deadline passed (PULSE_OK: the caller
 * reads again and finds nothing), or whose topic is gone
 * (PULSE_TOPIC_NOT_FOUND). Callbacks run on kwait with no lock held.
 * Records published through another gateway are seen within a tick.
 *
 * The refresh (names, partition counts, every partition's watermarks:
 * kmeta.c) runs every second, and sooner (at most every 100 ms) when a
 * topic read missed a topic; each of its calls is bounded by the request
 * timeout, so a cluster that goes away stalls this thread for at most
 * that long per call, never an HTTP worker. Topic lookups that wait for a
 * refresh (kmeta.c, pulse_kafka_topic_lookup_async) get one at once, names
 * only, shared by all of them.
 */
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "kafka/kafka_int.h"

#define TICK_MS 20
#define META_EVERY_US 1000000
#define MISS_EVERY_US 100000 /* a missed topic asks a refresh, at most this often */

/* One position a waiter watches. */
struct kwpos {
    char topic[PULSE_NAME_MAX + 1];
    int32_t partition;
    int64_t offset;
};

struct kwaiter {
    struct kwaiter *next;
    int64_t deadline_us;
    pulse_wait_fn fn;
    void *arg;
    pulse_status_t st; /* when fired */
    size_t n;
    struct kwpos pos[]; /* n positions: any one with data fires it */
};

pulse_status_t pulse_kafka_wait_positions(struct pulse_kafka *k, const char *const *topics, const uint32_t *partitions,
                                          const int64_t *offsets, size_t n, int64_t deadline_mono_us, pulse_wait_fn fn,
                                          void *arg, bool *parked_out)
{
    if (n == 0 || fn == NULL)
        return PULSE_INVALID;
    if (atomic_load(&k->draining))
        return PULSE_SHUTDOWN;
    struct kwaiter *w = pulse_calloc(1, sizeof *w + n * sizeof w->pos[0]);
    if (w == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < n; i++) {
        snprintf(w->pos[i].topic, sizeof w->pos[i].topic, "%s", topics[i]);
        w->pos[i].partition = (int32_t)partitions[i];
        w->pos[i].offset = offsets[i];
    }
    w->n = n;
    w->deadline_us = deadline_mono_us;
    w->fn = fn;
    w->arg = arg;
    /* Always parked, even when a position has data already: finding out
     * would be a round trip on the caller's thread; kwait fires it at its
     * next tick (within TICK_MS). */
    *parked_out = true;
    pthread_mutex_lock(&k->wait_mu);
    w->next = k->waiters;
    k->waiters = w;
    pthread_cond_signal(&k->wait_cv);
    pthread_mutex_unlock(&k->wait_mu);
    return PULSE_OK;
}

pulse_status_t pulse_kafka_wait_any(struct pulse_broker *b, const struct pulse_wait_pos *pos, size_t n,
                                    int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out,
                                    size_t *ready_out)
{
    struct pulse_kafka *k = kafka_of(b);
    pulse_status_t st = PULSE_OK;
    (void)ready_out; /* always parked: never written */
    if (n == 0 || n > PULSE_WAIT_MAX_POSITIONS || fn == NULL)
        return PULSE_INVALID;
    const char **topics = pulse_calloc(n, sizeof *topics);
    uint32_t *parts = pulse_calloc(n, sizeof *parts);
    int64_t *offs = pulse_calloc(n, sizeof *offs);
    if (topics == NULL || parts == NULL || offs == NULL)
        st = PULSE_NOMEM;
    /* Unknown topics and partitions are refused at once, from the cache.
     * While the last refresh reached the cluster, a topic the cache has,
     * however old, is enough to park on (kwait finds out if it is gone):
     * no refresh on the caller's thread, which is an HTTP worker (a
     * long-poll, a stream, a topic-wide read). */
    bool ok = atomic_load(&k->cluster_ok);
    for (size_t i = 0; st == PULSE_OK && i < n; i++) {
        uint32_t count = 0;
        if (!ok || pulse_kafka_meta_cached(k, pos[i].topic, &count) != 1)
            st = pulse_kafka_meta_partitions(k, pos[i].topic, &count);
        if (st == PULSE_OK && pos[i].partition >= count)
            st = PULSE_PARTITION_NOT_FOUND;
        topics[i] = pos[i].topic;
        parts[i] = pos[i].partition;
        offs[i] = pos[i].offset;
    }
    if (st == PULSE_OK)
        st = pulse_kafka_wait_positions(k, topics, parts, offs, n, deadline_mono_us, fn, arg, parked_out);
    pulse_free(topics);
    pulse_free(parts);
    pulse_free(offs);
    return st;
}

void pulse_kafka_wait_kick(struct pulse_kafka *k)
{
    pthread_mutex_lock(&k->wait_mu);
    pthread_cond_signal(&k->wait_cv);
    pthread_mutex_unlock(&k->wait_mu);
}

static void fire_list(struct kwaiter *w)
{
    while (w != NULL) {
        struct kwaiter *next = w->next;
        w->fn(w->arg, w->st);
        pulse_free(w);
        w = next;
    }
}

void pulse_kafka_wait_fire_all(struct pulse_kafka *k, pulse_status_t st)
{
    pthread_mutex_lock(&k->wait_mu);
    struct kwaiter *w = k->waiters;
    k->waiters = NULL;
    pthread_mutex_unlock(&k->wait_mu);
    for (struct kwaiter *x = w; x != NULL; x = x->next)
        x->st = st;
    fire_list(w);
}

/* The distinct partitions waited on, as a list to ask. */
static rd_kafka_topic_partition_list_t *waited_partitions(struct pulse_kafka *k)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(8);
    pthread_mutex_lock(&k->wait_mu);
    for (struct kwaiter *w = k->waiters; w != NULL; w = w->next)
        for (size_t i = 0; i < w->n; i++)
            if (rd_kafka_topic_partition_list_find(list, w->pos[i].topic, w->pos[i].partition) == NULL)
                rd_kafka_topic_partition_list_add(list, w->pos[i].topic, w->pos[i].partition);
    pthread_mutex_unlock(&k->wait_mu);
    return list;
}

/* Takes the waiters that are due off the list (given the high watermarks
 * in list, or none when ok is false) and returns them, each with its
 * status. */
static struct kwaiter *take_due(struct pulse_kafka *k, rd_kafka_topic_partition_list_t *list, bool ok)
{
    struct kwaiter *due = NULL;
    int64_t now = pulse_clock_mono_us();
    pthread_mutex_lock(&k->wait_mu);
    struct kwaiter **pp = &k->waiters;
    while (*pp != NULL) {
        struct kwaiter *w = *pp;
        bool gone = false, data = false;
        for (size_t i = 0; ok && i < w->n; i++) {
            const struct kwpos *p = &w->pos[i];
            rd_kafka_topic_partition_t *tp = rd_kafka_topic_partition_list_find(list, p->topic, p->partition);
            gone = gone || (tp != NULL && pulse_kafka_status(tp->err) == PULSE_TOPIC_NOT_FOUND);
            data = data || (tp != NULL && tp->err == RD_KAFKA_RESP_ERR_NO_ERROR && tp->offset > p->offset);
        }
        if (gone || data || now >= w->deadline_us) {
            w->st = gone ? PULSE_TOPIC_NOT_FOUND : PULSE_OK;
            *pp = w->next;
            w->next = due;
            due = w;
        } else {
            pp = &w->next;
        }
    }
    pthread_mutex_unlock(&k->wait_mu);
    return due;
}

/* Asks the high watermarks of the partitions waited on: one call for all,
 * one per topic when that call fails for a topic's own reason (kmeta.c's
 * pulse_kafka_latest_marks), so a partition without a leader does not keep
 * the waiters of every other partition from waking. An entry not answered
 * gets an error (its waiters wait for their deadline or the next tick). */
static bool ask_marks(struct pulse_kafka *k, rd_kafka_topic_partition_list_t *list)
{
    int64_t *hi = pulse_calloc((size_t)list->cnt + 1, sizeof *hi);
    if (hi == NULL)
        return false;
    rd_kafka_topic_partition_list_sort(list, NULL, NULL); /* by topic: one range each */
    bool ok = pulse_kafka_latest_marks(k, list, hi) == PULSE_OK;
    for (int i = 0; ok && i < list->cnt; i++) {
        list->elems[i].offset = hi[i] >= 0 ? hi[i] : RD_KAFKA_OFFSET_END;
        list->elems[i].err = hi[i] >= 0 ? RD_KAFKA_RESP_ERR_NO_ERROR : RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION;
    }
    pulse_free(hi);
    return ok;
}

/* Marks the entries of topics the cache no longer has (deleted through
 * this gateway or seen gone by a refresh) UNKNOWN_TOPIC_OR_PART, whatever
 * ListOffsets said of them; true if there was one. */
static bool mark_deleted(struct pulse_kafka *k, rd_kafka_topic_partition_list_t *list)
{
    bool any = false;
    for (int i = 0; i < list->cnt; i++) {
        uint32_t n = 0;
        if (pulse_kafka_meta_cached(k, list->elems[i].topic, &n) == 0) {
            list->elems[i].err = RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
            any = true;
        }
    }
    return any;
}

static void sleep_tick(struct pulse_kafka *k, int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&k->wait_mu);
    /* A lookup parks before it kicks (under wait_mu): seen here, or woken. */
    if (!atomic_load(&k->stopping) && !pulse_kafka_meta_lookups_waiting(k))
        pthread_cond_timedwait(&k->wait_cv, &k->wait_mu, &ts);
    pthread_mutex_unlock(&k->wait_mu);
}

void *pulse_kafka_wait_main(void *arg)
{
    struct pulse_kafka *k = arg;
    int64_t meta_at = pulse_clock_mono_us();
    while (!atomic_load(&k->stopping)) {
        int64_t since = pulse_clock_mono_us() - meta_at;
        if (since >= META_EVERY_US || (since >= MISS_EVERY_US && atomic_exchange(&k->meta_wanted, false))) {
            (void)pulse_kafka_meta_refresh_marks(k);
            meta_at = pulse_clock_mono_us();
        }
        /* Lookups parked during that refresh (or since): one more, names
         * only, for all of them (kmeta.c). */
        if (pulse_kafka_meta_lookups_waiting(k))
            (void)pulse_kafka_meta_refresh(k);
        pthread_mutex_lock(&k->wait_mu);
        bool any = k->waiters != NULL;
        pthread_mutex_unlock(&k->wait_mu);
        if (any) {
            rd_kafka_topic_partition_list_t *list = waited_partitions(k);
            bool ok = list->cnt > 0 && ask_marks(k, list);
            ok = mark_deleted(k, list) || ok;
            fire_list(take_due(k, list, ok));
            rd_kafka_topic_partition_list_destroy(list);
        }
        sleep_tick(k, any ? TICK_MS : 200);
    }
    pulse_kafka_wait_fire_all(k, PULSE_SHUTDOWN);
    pulse_kafka_meta_lookups_fire_all(k, PULSE_SHUTDOWN);
    return NULL;
}
