/* SPDX-License-Identifier: MIT */
/*
 * kpublish.c - publish through the idempotent producer, completed from its
 * delivery reports.
 *
 * Method: a publish is one struct kpub holding a slot per record; each
 * record is handed to rd_kafka_producev with its slot as the message's
 * opaque. kpoll serves the delivery reports: each writes its record's
 * (partition, offset) or failure into the caller's offsets_out and counts
 * down the publish; the last one calls done. No thread waits per request.
 * `remaining` starts at n + 1: the extra unit is the submitter's, dropped
 * once every record was handed over, so done cannot run while records are
 * still being submitted (and a record refused at submission counts down
 * at once).
 *
 * What a client sees (docs/API.md "Per-record results"):
 *   - every record acknowledged: PULSE_OK; a record acknowledged with no
 *     offset (librdkafka reports -1001 for one "implicitly acknowledged by
 *     a later batch") gets PULSE_OFFSET_UNKNOWN, which the API shows as
 *     "offset": null;
 *   - some records failed: done gets the first failure's status, errbuf
 *     names it, and each failed record has PULSE_OFFSET_NONE (-1), the
 *     others their offsets, so the API can answer per record.
 * Retriable errors are retried by librdkafka inside message.timeout.ms
 * (= kafka.request-timeout) and never reach the client.
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "kafka/kafka_int.h"

struct kpub;

struct kslot {
    struct kpub *pub;
    size_t idx;
};

struct kpub {
    struct pulse_kafka *k;
    atomic_long remaining;
    struct pulse_offset_pair *offsets; /* the caller's, n entries */
    pulse_publish_done_fn done;
    void *arg;
    char *errbuf;
    size_t errlen;
    atomic_int first_err; /* pulse_status_t of the first failure; 0 = none */
    atomic_bool err_written;
    struct kslot slots[];
};

/* Records a record's failure: the first one names itself in errbuf. */
static void fail_record(struct kpub *p, size_t idx, int32_t partition, rd_kafka_resp_err_t err)
{
    pulse_status_t st = pulse_kafka_status(err);
    if (st == PULSE_OK)
        st = PULSE_IO;
    p->offsets[idx].partition = partition < 0 ? 0 : (uint32_t)partition;
    p->offsets[idx].offset = PULSE_OFFSET_NONE;
    int expected = 0;
    if (atomic_compare_exchange_strong(&p->first_err, &expected, (int)st) && !atomic_exchange(&p->err_written, true))
        pulse_errbuf_set(p->errbuf, p->errlen, "record %zu (partition %d) was not stored: %s", idx, (int)partition,
                         rd_kafka_err2str(err));
    atomic_fetch_add(&p->k->publish_failed, 1);
}

/* Counts one record down; the last one completes the publish. */
static void count_down(struct kpub *p)
{
    if (atomic_fetch_sub(&p->remaining, 1) != 1)
        return;
    struct pulse_kafka *k = p->k;
    pulse_status_t st = (pulse_status_t)atomic_load(&p->first_err);
    /* The backend's own bookkeeping first: once done has run, the caller
     * may go on to close the broker (close joins this thread first). */
    atomic_fetch_sub(&k->inflight, 1);
    pulse_kafka_wait_kick(k);
    p->done(p->arg, st);
    pulse_free(p);
}

void pulse_kafka_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    struct kslot *slot = msg->_private;
    (void)rk;
    (void)opaque;
    if (slot == NULL)
        return;
    struct kpub *p = slot->pub;
    if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fail_record(p, slot->idx, msg->partition, msg->err);
    } else {
        p->offsets[slot->idx].partition = (uint32_t)msg->partition;
        p->offsets[slot->idx].offset = msg->offset >= 0 ? msg->offset : PULSE_OFFSET_UNKNOWN;
        atomic_fetch_add(&p->k->published, 1);
        /* Before done: the next topic read through this gateway sees it. */
        if (msg->offset >= 0)
            pulse_kafka_meta_note_hw(p->k, rd_kafka_topic_name(msg->rkt), msg->partition, msg->offset + 1);
    }
    count_down(p);
}

/* Refusals before anything is handed over (nothing stored, no callback). */
static pulse_status_t validate(struct pulse_kafka *k, const char *topic, const struct pulse_publish_record *recs,
                               size_t n, uint32_t *parts_out, char *errbuf, size_t errlen)
{
    uint32_t parts = 0;
    if (atomic_load(&k->draining))
        return PULSE_SHUTDOWN;
    if (n == 0) {
        pulse_errbuf_set(errbuf, errlen, "no records to publish");
        return PULSE_INVALID;
    }
    if (k->max_records > 0 && n > k->max_records) {
        pulse_errbuf_set(errbuf, errlen, "more than %u records in one publish", k->max_records);
        return PULSE_TOO_LARGE;
    }
    pulse_status_t st = pulse_kafka_meta_partitions(k, topic, &parts);
    if (st != PULSE_OK) {
        if (st == PULSE_UNAVAILABLE)
            pulse_errbuf_set(errbuf, errlen, "the Kafka cluster cannot be reached");
        return st;
    }
    for (size_t i = 0; i < n; i++) {
        if (recs[i].partition >= 0 && (uint32_t)recs[i].partition >= parts) {
            pulse_errbuf_set(errbuf, errlen,
                             "records[%zu]: topic \"%s\" has no partition %d; its partitions are 0 to %u", i, topic,
                             (int)recs[i].partition, parts - 1);
            return PULSE_PARTITION_NOT_FOUND;
        }
    }
    *parts_out = parts;
    return PULSE_OK;
}

/* Hands one record to the producer (copied by librdkafka). */
static rd_kafka_resp_err_t produce_one(struct pulse_kafka *k, const char *topic, const struct pulse_publish_record *rec,
                                       int32_t partition, struct kslot *slot)
{
    rd_kafka_headers_t *hdrs = NULL;
    if (rec->header_count > 0) {
        hdrs = rd_kafka_headers_new(rec->header_count);
        for (uint32_t h = 0; h < rec->header_count; h++)
            rd_kafka_header_add(hdrs, (const char *)rec->headers[h].key, (ssize_t)rec->headers[h].key_len,
                                rec->headers[h].value, (ssize_t)rec->headers[h].value_len);
    }
    /* A NULL key pointer is a null key; an empty key stays empty. */
    static const uint8_t empty[1];
    const void *key = rec->key != NULL ? (const void *)rec->key : NULL;
    if (rec->key != NULL && rec->key_len == 0)
        key = empty;
    rd_kafka_resp_err_t err = rd_kafka_producev(k->prod, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                                RD_KAFKA_V_KEY(key, rec->key_len),
                                                RD_KAFKA_V_VALUE((void *)(uintptr_t)rec->value, rec->value_len),
                                                RD_KAFKA_V_TIMESTAMP(rec->has_timestamp ? rec->timestamp : 0),
                                                RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE(slot), RD_KAFKA_V_END);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR && hdrs != NULL)
        rd_kafka_headers_destroy(hdrs); /* not taken over on failure */
    return err;
}

pulse_status_t pulse_kafka_publish(struct pulse_broker *b, const char *topic, const struct pulse_publish_record *recs,
                                   size_t n, struct pulse_offset_pair *offsets_out, pulse_publish_done_fn done,
                                   void *arg, bool *pending_out, char *errbuf, size_t errlen)
{
    struct pulse_kafka *k = kafka_of(b);
    uint32_t parts = 0;
    pulse_status_t st = validate(k, topic, recs, n, &parts, errbuf, errlen);
    if (st != PULSE_OK)
        return st;
    /* Keyless records of one request share one partition, chosen round
     * robin per request, as the local backend does (and as Java's sticky
     * partitioner keeps a batch together); keyed ones go through
     * murmur2_random. */
    int32_t keyless = (int32_t)(atomic_fetch_add(&k->round_robin, 1) % parts);
    struct kpub *p = pulse_calloc(1, sizeof *p + n * sizeof p->slots[0]);
    if (p == NULL)
        return PULSE_NOMEM;
    p->k = k;
    p->offsets = offsets_out;
    p->done = done;
    p->arg = arg;
    p->errbuf = errbuf;
    p->errlen = errlen;
    atomic_init(&p->remaining, (long)n + 1);
    atomic_fetch_add(&k->inflight, 1);
    size_t handed = 0;
    for (size_t i = 0; i < n; i++) {
        p->slots[i].pub = p;
        p->slots[i].idx = i;
        p->offsets[i].partition = recs[i].partition >= 0 ? (uint32_t)recs[i].partition : 0;
        p->offsets[i].offset = PULSE_OFFSET_NONE;
        int32_t part = recs[i].partition >= 0 ? recs[i].partition
                       : recs[i].key == NULL  ? keyless
                                              : RD_KAFKA_PARTITION_UA;
        rd_kafka_resp_err_t err = produce_one(k, topic, &recs[i], part, &p->slots[i]);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            fail_record(p, i, recs[i].partition, err);
            atomic_fetch_sub(&p->remaining, 1);
        } else {
            handed++;
        }
    }
    if (handed == 0) {
        /* Nothing reached the producer: refused as a whole, no callback. */
        st = (pulse_status_t)atomic_load(&p->first_err);
        pulse_free(p);
        atomic_fetch_sub(&k->inflight, 1);
        return st;
    }
    *pending_out = true;
    count_down(p); /* the submitter's unit: done may run right here */
    return PULSE_OK;
}
