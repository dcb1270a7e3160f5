/* SPDX-License-Identifier: MIT */
/*
 * publish.c - routing, the publish path and fetch.
 *
 * Routing follows Kafka's default partitioner so that keys land where a
 * Kafka client would put them: murmur2 of the key bytes (Utils.murmur2, seed
 * 0x9747b28c), made positive with & 0x7fffffff, modulo the partition count.
 * Keyless records of one publish all go to one partition, picked round-robin
 * per topic across publishes; an explicit partition wins.
 *
 * A publish of N records becomes one batch per partition, so each
 * partition's share gets contiguous offsets and is all-or-none after a
 * crash. One exception: a batch stores record timestamps as int32 deltas
 * from its first record, so when a partition's records lie more than 2^31 ms
 * (about 24.8 days) apart - the API's own example mixes an explicit 2025
 * timestamp with records stamped by the broker's clock - that share is cut
 * into the fewest runs that each fit, encoded back to back and appended as
 * one unit (pulse_plog_append_async numbers them consecutively and writes
 * them in one pwrite). Offsets stay contiguous and the answer still waits
 * for all of them; only the all-or-none property after a crash is weakened
 * for such a publish (a crash that tears that one write may keep a prefix
 * of its runs, never a part of one). Everything is validated and every batch
 * encoded before the first append, so a refused publish writes nothing. The appends only reach the
 * page cache (pulse_plog_append_async); durability comes from the syncer's
 * group commit, and the caller is told only then (every-write mode). Across
 * partitions a publish is not atomic: if the log of a later partition fails
 * its append, earlier partitions keep their batch (reported as an error, so
 * the client retries; offsets are never reused).
 *
 * Limits (struct pulse_broker_config): records per publish (default 10000),
 * key bytes (64 KiB), header bytes per record (keys + values, 64 KiB),
 * headers per record (128), and one partition's encoded batch (64 MiB,
 * PULSE_BROKER_MAX_BATCH_BYTES). Over a limit is PULSE_TOO_LARGE.
 */
#include "broker/broker.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "broker/broker_int.h"
#include "common/status.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"

/* Kafka's Utils.murmur2, with Java's wrapping int arithmetic done in
 * uint32_t and ">>>" as an unsigned shift. */
uint32_t pulse_broker_murmur2(const uint8_t *data, size_t len)
{
    const uint32_t m = 0x5bd1e995u;
    const int r = 24;
    uint32_t h = 0x9747b28cu ^ (uint32_t)len;
    size_t len4 = len / 4;

    for (size_t i = 0; i < len4; i++) {
        size_t i4 = i * 4;
        uint32_t k = (uint32_t)data[i4] | (uint32_t)data[i4 + 1] << 8 | (uint32_t)data[i4 + 2] << 16 |
                     (uint32_t)data[i4 + 3] << 24;
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    size_t tail = len & ~(size_t)3;
    switch (len % 4) {
    case 3:
        h ^= (uint32_t)data[tail + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[tail + 1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)data[tail];
        h *= m;
        break;
    default:
        break;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

uint32_t pulse_broker_key_partition(const uint8_t *key, size_t len, uint32_t nparts)
{
    return (pulse_broker_murmur2(key, len) & 0x7fffffffu) % nparts;
}

/* Checks the limits of one record; errbuf names it by index. */
static pulse_status_t check_record(const struct pulse_broker_config *cfg, const struct pulse_publish_record *r,
                                   size_t i, uint32_t nparts, char *errbuf, size_t errlen)
{
    const struct pulse_record_in *rec = &r->rec;
    uint64_t hbytes = 0;

    if (r->partition < -1 || (r->partition >= 0 && (uint32_t)r->partition >= nparts)) {
        pulse_errbuf_set(errbuf, errlen, "record %zu: partition %" PRId32 " does not exist (the topic has %" PRIu32 ")", i,
                r->partition, nparts);
        return PULSE_PARTITION_NOT_FOUND;
    }
    if (rec->key_len != PULSE_BATCH_NULL) {
        if (rec->key_len > cfg->max_key_bytes) {
            pulse_errbuf_set(errbuf, errlen, "record %zu: key of %" PRIu32 " bytes is over the %" PRIu32 "-byte limit", i,
                    rec->key_len, cfg->max_key_bytes);
            return PULSE_TOO_LARGE;
        }
        if (rec->key == NULL && rec->key_len > 0) {
            pulse_errbuf_set(errbuf, errlen, "record %zu: key bytes missing", i);
            return PULSE_INVALID;
        }
    }
    if (rec->value_len != PULSE_BATCH_NULL) {
        if (rec->value == NULL && rec->value_len > 0) {
            pulse_errbuf_set(errbuf, errlen, "record %zu: value bytes missing", i);
            return PULSE_INVALID;
        }
        if (rec->value_len > PULSE_BROKER_MAX_BATCH_BYTES) {
            pulse_errbuf_set(errbuf, errlen, "record %zu: value of %" PRIu32 " bytes is too large", i, rec->value_len);
            return PULSE_TOO_LARGE;
        }
    }
    if (rec->header_count > cfg->max_headers_per_record) {
        pulse_errbuf_set(errbuf, errlen, "record %zu: %" PRIu32 " headers is over the limit of %" PRIu32, i, rec->header_count,
                cfg->max_headers_per_record);
        return PULSE_TOO_LARGE;
    }
    if (rec->header_count > 0 && rec->headers == NULL) {
        pulse_errbuf_set(errbuf, errlen, "record %zu: headers missing", i);
        return PULSE_INVALID;
    }
    for (uint32_t h = 0; h < rec->header_count; h++) {
        const struct pulse_header_in *hd = &rec->headers[h];
        if (hd->key_len == PULSE_BATCH_NULL || (hd->key == NULL && hd->key_len > 0) ||
            (hd->value_len != PULSE_BATCH_NULL && hd->value == NULL && hd->value_len > 0)) {
            pulse_errbuf_set(errbuf, errlen, "record %zu: header %" PRIu32 " is malformed", i, h);
            return PULSE_INVALID;
        }
        hbytes += hd->key_len;
        if (hd->value_len != PULSE_BATCH_NULL)
            hbytes += hd->value_len;
    }
    if (hbytes > cfg->max_headers_bytes) {
        pulse_errbuf_set(errbuf, errlen, "record %zu: headers of %" PRIu64 " bytes are over the %" PRIu32 "-byte limit", i,
                hbytes, cfg->max_headers_bytes);
        return PULSE_TOO_LARGE;
    }
    return PULSE_OK;
}

/* One batch of a partition's append unit: grouped[first, first + count). */
struct run {
    uint32_t first;
    uint32_t count;
    int64_t base; /* offset the log gave its first record */
};

pulse_status_t pulse_broker_publish(struct pulse_broker *b, const char *topic, const struct pulse_publish_record *recs,
                                    size_t n, struct pulse_offset_pair *offsets_out, pulse_publish_done_fn done,
                                    void *arg, bool *pending_out, char *errbuf, size_t errlen)
{
    pulse_status_t st = PULSE_OK;
    struct pulse_broker_topic *t = NULL;
    bool counted = false;
    uint32_t *part_of = NULL; /* partition of record i */
    uint32_t *slot = NULL;    /* record i's index within its partition's batch */
    struct pulse_record_in *grouped = NULL;
    uint32_t count[PULSE_BROKER_MAX_PARTITIONS];
    uint32_t first[PULSE_BROKER_MAX_PARTITIONS];
    size_t run_first[PULSE_BROKER_MAX_PARTITIONS];
    size_t run_end[PULSE_BROKER_MAX_PARTITIONS];
    struct run *runs = NULL;
    uint32_t *run_of = NULL; /* run of each grouped record */
    size_t nruns = 0;
    struct pulse_buf *bufs = NULL;
    uint32_t nbufs = 0;
    struct pulse_broker_pending *pend = NULL;
    uint32_t rr_part = UINT32_MAX;
    int64_t now;
    uint64_t bytes = 0;
    bool pending = false;

    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (recs == NULL || n == 0) {
        pulse_errbuf_set(errbuf, errlen, "a publish needs at least one record");
        return PULSE_INVALID;
    }
    if (n > b->cfg.max_records_per_publish) {
        pulse_errbuf_set(errbuf, errlen, "%zu records is over the limit of %" PRIu32 " per publish", n,
                b->cfg.max_records_per_publish);
        return PULSE_TOO_LARGE;
    }
    if (b->cfg.sync_mode == PULSE_SYNC_EVERY_WRITE && done == NULL)
        return PULSE_INVALID;

    pthread_mutex_lock(&b->mu);
    if (b->draining) {
        pthread_mutex_unlock(&b->mu);
        pulse_errbuf_set(errbuf, errlen, "the broker is shutting down");
        return PULSE_SHUTDOWN;
    }
    b->inflight++;
    counted = true;
    pthread_mutex_unlock(&b->mu);

    t = pulse_broker_topic_acquire(b, topic);
    if (t == NULL) {
        pulse_errbuf_set(errbuf, errlen, "topic \"%s\" does not exist", topic != NULL ? topic : "");
        st = PULSE_TOPIC_NOT_FOUND;
        goto out;
    }

    /* 1. Validate and route every record before anything is written. */
    part_of = pulse_malloc(n * sizeof *part_of);
    slot = pulse_malloc(n * sizeof *slot);
    grouped = pulse_malloc(n * sizeof *grouped);
    if (part_of == NULL || slot == NULL || grouped == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++) {
        const struct pulse_publish_record *r = &recs[i];
        st = check_record(&b->cfg, r, i, t->nparts, errbuf, errlen);
        if (st != PULSE_OK)
            goto out;
        uint32_t p;
        if (r->partition >= 0) {
            p = (uint32_t)r->partition;
        } else if (r->rec.key_len != PULSE_BATCH_NULL) {
            p = pulse_broker_key_partition(r->rec.key, r->rec.key_len, t->nparts);
        } else {
            if (rr_part == UINT32_MAX)
                rr_part = atomic_fetch_add(&t->rr, 1) % t->nparts;
            p = rr_part;
        }
        part_of[i] = p;
        slot[i] = count[p]++;
    }

    /* 2. Group per partition (request order kept within each) and encode. */
    now = pulse_clock_wall_ms();
    {
        uint32_t pos = 0;
        for (uint32_t p = 0; p < t->nparts; p++) {
            first[p] = pos;
            pos += count[p];
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct pulse_record_in *g = &grouped[first[part_of[i]] + slot[i]];
        *g = recs[i].rec;
        g->offset_delta = 0;
        if (!recs[i].has_timestamp)
            g->timestamp = now;
    }
    /* Split each partition's records into runs whose timestamps all lie
     * within an int32 of milliseconds of the run's first record (what one
     * batch can represent). Almost always one run per partition. */
    runs = pulse_malloc(n * sizeof *runs);
    run_of = pulse_malloc(n * sizeof *run_of);
    if (runs == NULL || run_of == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    for (uint32_t p = 0; p < t->nparts; p++) {
        run_first[p] = nruns;
        for (uint32_t j = first[p]; j < first[p] + count[p]; j++) {
            int64_t delta = 0;
            if (nruns == run_first[p] ||
                __builtin_sub_overflow(grouped[j].timestamp, grouped[runs[nruns - 1].first].timestamp, &delta) ||
                delta < INT32_MIN || delta > INT32_MAX) {
                runs[nruns].first = j;
                runs[nruns].count = 0;
                nruns++;
            }
            runs[nruns - 1].count++;
            run_of[j] = (uint32_t)(nruns - 1);
        }
        run_end[p] = nruns;
    }

    bufs = pulse_calloc(t->nparts, sizeof *bufs);
    if (bufs == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    nbufs = t->nparts;
    for (uint32_t p = 0; p < t->nparts; p++) {
        pulse_buf_init(&bufs[p], PULSE_BROKER_MAX_BATCH_BYTES);
        for (size_t r = run_first[p]; r < run_end[p]; r++) {
            st = pulse_batch_encode(&bufs[p], 0, 0, &grouped[runs[r].first], runs[r].count);
            if (st == PULSE_TOO_LARGE) {
                pulse_errbuf_set(errbuf, errlen, "the records for partition %" PRIu32 " encode to more than %u bytes", p,
                        PULSE_BROKER_MAX_BATCH_BYTES);
                goto out;
            }
            if (st != PULSE_OK) {
                pulse_errbuf_set(errbuf, errlen, "cannot encode the batch for partition %" PRIu32 ": %s", p,
                        pulse_status_message(st));
                st = st == PULSE_RANGE ? PULSE_INVALID : st;
                goto out;
            }
        }
        bytes += bufs[p].len;
    }

    /* 3. Append (page cache only) and note what durability must reach. */
    if (b->cfg.sync_mode == PULSE_SYNC_EVERY_WRITE) {
        pend = pulse_calloc(1, sizeof *pend);
        if (pend == NULL) {
            st = PULSE_NOMEM;
            goto out;
        }
    }
    for (uint32_t p = 0; p < t->nparts; p++) {
        int64_t end = 0;
        if (count[p] == 0)
            continue;
        /* All runs of the partition go in as one append unit: consecutive
         * offsets, one write. */
        int64_t base = 0;
        /* The epoch the bytes were written in (see pulse_plog_fate). */
        uint64_t epoch = 0;
        st = pulse_plog_append_async(t->plogs[p], bufs[p].data, bufs[p].len, &base, &end, &epoch);
        if (st == PULSE_FENCED) {
            pulse_errbuf_set(errbuf, errlen,
                             "partition %" PRIu32 " of topic \"%s\" is fenced after a failed write or sync; it is "
                             "being reopened, retry later",
                             p, t->name);
            goto out;
        }
        if (st == PULSE_NOSPACE) {
            pulse_errbuf_set(errbuf, errlen,
                             "no space left on the storage device for partition %" PRIu32
                             " of topic \"%s\"; nothing of it was stored, retry once space is freed",
                             p, t->name);
            goto out;
        }
        if (st != PULSE_OK) {
            pulse_errbuf_set(errbuf, errlen, "append to partition %" PRIu32 " failed: %s", p, pulse_status_message(st));
            goto out;
        }
        for (size_t r = run_first[p]; r < run_end[p]; r++) {
            runs[r].base = base;
            base += runs[r].count;
        }
        if (pend != NULL) {
            pend->parts[pend->n] = p;
            pend->ends[pend->n] = end;
            pend->epochs[pend->n] = epoch;
            pend->n++;
        }
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t j = first[part_of[i]] + slot[i];
        const struct run *r = &runs[run_of[j]];
        offsets_out[i].partition = part_of[i];
        offsets_out[i].offset = r->base + (int64_t)(j - r->first);
    }
    atomic_fetch_add(&t->published_records, (uint64_t)n);
    atomic_fetch_add(&t->published_bytes, bytes);

    /* 4. Every-write: hand the publish to the syncer. */
    if (pend != NULL) {
        pend->topic = t;
        pend->done = done;
        pend->arg = arg;
        pend->errbuf = errbuf;
        pend->errlen = errlen;
        pthread_mutex_lock(&b->mu);
        if (atomic_load(&t->deleted)) {
            /* Deleted while appending; its data is going away. */
            pthread_mutex_unlock(&b->mu);
            pulse_errbuf_set(errbuf, errlen, "topic \"%s\" was deleted", t->name);
            st = PULSE_TOPIC_NOT_FOUND;
            goto out;
        }
        *b->pending_tail = pend;
        b->pending_tail = &pend->next;
        b->kick = true;
        pthread_cond_signal(&b->cv);
        pthread_mutex_unlock(&b->mu);
        pend = NULL;
        t = NULL; /* the pending publish owns the reference now */
        pending = true;
    }
out:
    if (counted) {
        pthread_mutex_lock(&b->mu);
        b->inflight--;
        if (b->inflight == 0 && b->pending_head == NULL)
            pthread_cond_broadcast(&b->idle_cv);
        pthread_mutex_unlock(&b->mu);
    }
    for (uint32_t p = 0; p < nbufs; p++)
        pulse_buf_fini(&bufs[p]);
    pulse_free(bufs);
    pulse_free(pend);
    pulse_free(run_of);
    pulse_free(runs);
    pulse_free(grouped);
    pulse_free(slot);
    pulse_free(part_of);
    pulse_broker_topic_release(b, t);
    if (st == PULSE_OK)
        *pending_out = pending;
    return st;
}

pulse_status_t pulse_broker_publish_wait(struct pulse_broker *b, const char *topic,
                                         const struct pulse_publish_record *recs, size_t n,
                                         struct pulse_offset_pair *offsets_out, char *errbuf, size_t errlen)
{
    struct pulse_broker_sync w;
    bool pending = false;
    pulse_status_t st;

    pulse_broker_sync_init(&w);
    st = pulse_broker_publish(b, topic, recs, n, offsets_out, pulse_broker_sync_done, &w, &pending, errbuf, errlen);
    if (st != PULSE_OK || !pending) {
        pulse_broker_sync_fini(&w);
        return st;
    }
    st = pulse_broker_sync_wait(&w);
    if (st != PULSE_OK)
        pulse_errbuf_set(errbuf, errlen, "the records did not become durable: %s", pulse_status_message(st));
    return st;
}

/* ---- fetch ----------------------------------------------------------- */

pulse_status_t pulse_broker_fetch_slice(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t offset,
                                        uint64_t max_bytes, bool want_fd, struct pulse_slice *out)
{
    struct pulse_broker_topic *t = pulse_broker_topic_acquire(b, topic);
    pulse_status_t st;

    if (t == NULL)
        return PULSE_TOPIC_NOT_FOUND;
    if (partition >= t->nparts)
        st = PULSE_PARTITION_NOT_FOUND;
    else
        st = pulse_plog_slice(t->plogs[partition], offset, max_bytes, want_fd, out);
    pulse_broker_topic_release(b, t);
    return st;
}

pulse_status_t pulse_broker_fetch(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t offset,
                                  uint64_t max_bytes, struct pulse_buf *out, struct pulse_slice *info)
{
    struct pulse_broker_topic *t = pulse_broker_topic_acquire(b, topic);
    pulse_status_t st;

    if (t == NULL)
        return PULSE_TOPIC_NOT_FOUND;
    if (partition >= t->nparts)
        st = PULSE_PARTITION_NOT_FOUND;
    else
        st = pulse_plog_read(t->plogs[partition], offset, max_bytes, out, info);
    pulse_broker_topic_release(b, t);
    return st;
}

void pulse_broker_note_fetched(struct pulse_broker *b, const char *topic, uint64_t records, uint64_t bytes)
{
    struct pulse_broker_topic *t = pulse_broker_topic_acquire(b, topic);

    if (t == NULL)
        return;
    atomic_fetch_add(&t->fetched_records, records);
    atomic_fetch_add(&t->fetched_bytes, bytes);
    pulse_broker_topic_release(b, t);
}
