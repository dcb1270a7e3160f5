/* SPDX-License-Identifier: MIT */
/*
 * publish.c - routing and the publish path of the local backend.
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
 * page cache (pulse_plog_append_async); durability comes from a group
 * commit, led by the publisher itself for a lone one-partition publish or
 * by the syncer otherwise (broker.c), and the caller is told only then
 * (every-write mode). Across
 * partitions a publish is not atomic: partitions are appended in order, and
 * if the log of a later partition fails its append (a full disk, a fence
 * that came in between), earlier partitions keep their batch, since an
 * append is never rolled back (others may have appended after it). The
 * error then says so: errbuf names the partitions stored and their offsets,
 * and offsets_out holds the offset of every stored record (-1 for the
 * others), so the answer never claims "nothing stored" when something was.
 * A partition already fenced when the publish starts refuses it before
 * anything is appended, which keeps the usual fence all-or-nothing.
 *
 * Limits (struct pulse_broker_config): records per publish (default 10000),
 * key bytes (64 KiB), header bytes per record (keys + values, 64 KiB),
 * headers per record (128), and one partition's encoded batch (64 MiB,
 * PULSE_BROKER_MAX_BATCH_BYTES). Over a limit is PULSE_TOO_LARGE.
 */
#include "broker/broker.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "broker/broker_int.h"
#include "broker/idem.h"
#include "common/status.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "storage/batch.h"
#include "storage/plog.h"

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

/* Checks the limits of one record; errbuf names it by index. Lengths that
 * pass fit the codec's 32-bit fields (the limits are all below
 * PULSE_BATCH_NULL). */
static pulse_status_t check_record(const struct pulse_broker_config *cfg, const struct pulse_publish_record *r,
                                   size_t i, const char *topic, uint32_t nparts, char *errbuf, size_t errlen)
{
    uint64_t hbytes = 0;

    if (r->partition < -1 || (r->partition >= 0 && (uint32_t)r->partition >= nparts)) {
        char prefix[40];
        snprintf(prefix, sizeof prefix, "records[%zu]: ", i);
        pulse_broker_no_partition_message(errbuf, errlen, prefix, topic, r->partition, nparts);
        return PULSE_PARTITION_NOT_FOUND;
    }
    if (r->key != NULL && (r->key_len > cfg->max_key_bytes || r->key_len >= PULSE_BATCH_NULL)) {
        pulse_errbuf_set(errbuf, errlen, "record %zu: key of %zu bytes is over the %" PRIu32 "-byte limit", i,
                         r->key_len, cfg->max_key_bytes);
        return PULSE_TOO_LARGE;
    }
    if ((r->key == NULL && r->key_len > 0) || (r->value == NULL && r->value_len > 0)) {
        pulse_errbuf_set(errbuf, errlen, "record %zu: %s bytes missing", i,
                         r->key == NULL && r->key_len > 0 ? "key" : "value");
        return PULSE_INVALID;
    }
    if (r->value != NULL && r->value_len > PULSE_BROKER_MAX_BATCH_BYTES) {
        pulse_errbuf_set(errbuf, errlen, "record %zu: value of %zu bytes is too large", i, r->value_len);
        return PULSE_TOO_LARGE;
    }
    if (r->header_count > cfg->max_headers_per_record) {
        pulse_errbuf_set(errbuf, errlen, "record %zu: %" PRIu32 " headers is over the limit of %" PRIu32, i,
                         r->header_count, cfg->max_headers_per_record);
        return PULSE_TOO_LARGE;
    }
    if (r->header_count > 0 && r->headers == NULL) {
        pulse_errbuf_set(errbuf, errlen, "record %zu: headers missing", i);
        return PULSE_INVALID;
    }
    for (uint32_t h = 0; h < r->header_count; h++) {
        const struct pulse_header *hd = &r->headers[h];
        if ((hd->key == NULL && hd->key_len > 0) || (hd->value == NULL && hd->value_len > 0)) {
            pulse_errbuf_set(errbuf, errlen, "record %zu: header %" PRIu32 " is malformed", i, h);
            return PULSE_INVALID;
        }
        hbytes += hd->key_len;
        if (hd->value != NULL)
            hbytes += hd->value_len;
    }
    if (hbytes > cfg->max_headers_bytes || hbytes >= PULSE_BATCH_NULL) {
        pulse_errbuf_set(errbuf, errlen, "record %zu: headers of %" PRIu64 " bytes are over the %" PRIu32 "-byte limit",
                         i, hbytes, cfg->max_headers_bytes);
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

/* What one publish knows of one partition of its topic. */
struct publish_part {
    uint32_t count;   /* records routed here */
    uint32_t first;   /* the partition's first index in grouped */
    size_t run_first; /* its runs: runs[run_first, run_end) */
    size_t run_end;
    struct pulse_buf buf; /* its encoded append unit */
    bool appended;        /* the unit is in the log */
    /* An idempotent publish only. skip: the partition's share is stored
     * already (an earlier try of the same request); its runs' bases are
     * set. await: skipped, but an earlier try's append there is not
     * durable yet: this try waits for it (await_end/await_epoch) as for
     * its own. */
    bool skip;
    bool await;
    int64_t await_end;
    uint64_t await_epoch;
    int64_t end;    /* appended: where its unit ends */
    uint64_t epoch; /* appended: the epoch it was written in */
};

/* One publish between its phases (pulse_broker_publish). It lives on the
 * publisher's stack and is set up by publish_ctx_init, which clears only
 * the header and, once the topic is known, the entries of part[] its
 * partitions use (publish_ctx_parts): a publish costs no clearing of the
 * whole table. */
struct publish_ctx {
    struct pulse_local *b;
    struct pulse_broker_topic *t; /* one reference, while routing to appending */
    const struct pulse_publish_record *recs;
    size_t n;
    char *errbuf;
    size_t errlen;
    /* Per record, carved from one block (recs_mem): */
    uint32_t *part_of;               /* partition of record i */
    uint32_t *slot;                  /* record i's index within its partition's batch */
    struct pulse_record_in *grouped; /* records in partition order */
    struct run *runs;
    uint32_t *run_of; /* run of each grouped record */
    void *recs_mem;
    struct pulse_header_in *hdrs; /* their headers, in the codec's form */
    size_t nhdrs;                 /* headers of the whole publish */
    size_t nruns;
    uint32_t nparts; /* part[0, nparts) is set up (publish_ctx_parts) */
    uint64_t bytes;  /* of the appended units */
    /* An idempotent publish (NULL otherwise): its identity goes into the
     * producer fields of every batch, and its keyless records are routed
     * from its key. */
    const struct pulse_idem_id *idem;
    struct publish_part part[PULSE_BROKER_MAX_PARTITIONS];
};

static void publish_ctx_init(struct publish_ctx *c, struct pulse_local *b, const struct pulse_publish_record *recs,
                             size_t n, char *errbuf, size_t errlen)
{
    memset(c, 0, offsetof(struct publish_ctx, part));
    c->b = b;
    c->recs = recs;
    c->n = n;
    c->errbuf = errbuf;
    c->errlen = errlen;
}

/* Clears the entries of the topic's partitions (c->t acquired). */
static void publish_ctx_parts(struct publish_ctx *c)
{
    memset(c->part, 0, c->t->nparts * sizeof c->part[0]);
    for (uint32_t p = 0; p < c->t->nparts; p++)
        pulse_buf_init(&c->part[p].buf, PULSE_BROKER_MAX_BATCH_BYTES);
    c->nparts = c->t->nparts;
}

/* Phase 1: every record validated and routed before anything is written. */
static pulse_status_t route(struct publish_ctx *c)
{
    struct pulse_broker_topic *t = c->t;
    uint32_t rr_part = UINT32_MAX;

    publish_ctx_parts(c);
    /* The per-record arrays of every phase in one block, the widest
     * first so each stays aligned (n is at most
     * max_records_per_publish: no overflow). */
    c->recs_mem = pulse_malloc(c->n * (sizeof *c->grouped + sizeof *c->runs + 3 * sizeof(uint32_t)));
    if (c->recs_mem == NULL)
        return PULSE_NOMEM;
    c->grouped = c->recs_mem;
    c->runs = (struct run *)(c->grouped + c->n);
    c->part_of = (uint32_t *)(c->runs + c->n);
    c->slot = c->part_of + c->n;
    c->run_of = c->slot + c->n;
    for (size_t i = 0; i < c->n; i++) {
        const struct pulse_publish_record *r = &c->recs[i];
        pulse_status_t st = check_record(&c->b->cfg, r, i, t->name, t->nparts, c->errbuf, c->errlen);
        if (st != PULSE_OK)
            return st;
        uint32_t p;
        if (r->partition >= 0) {
            p = (uint32_t)r->partition;
        } else if (r->key != NULL) {
            p = pulse_broker_key_partition(r->key, r->key_len, t->nparts);
        } else if (c->idem != NULL) {
            /* Deterministic, so a retry lands where the first try did; all
             * keyless records of the publish still go to one partition. */
            p = pulse_broker_key_partition((const uint8_t *)c->idem->key, c->idem->key_len, t->nparts);
        } else {
            if (rr_part == UINT32_MAX)
                rr_part = atomic_fetch_add(&t->rr, 1) % t->nparts;
            p = rr_part;
        }
        c->part_of[i] = p;
        c->slot[i] = c->part[p].count++;
        c->nhdrs += r->header_count;
    }
    if (c->nhdrs > 0) {
        c->hdrs = pulse_malloc(c->nhdrs * sizeof *c->hdrs);
        if (c->hdrs == NULL)
            return PULSE_NOMEM;
    }
    return PULSE_OK;
}

/* The codec's form of record r (checked): nulls as PULSE_BATCH_NULL
 * lengths, headers copied into hdrs. */
static void to_codec(const struct pulse_publish_record *r, struct pulse_header_in *hdrs, struct pulse_record_in *g)
{
    memset(g, 0, sizeof *g);
    g->timestamp = r->timestamp;
    g->key = r->key;
    g->key_len = r->key != NULL ? (uint32_t)r->key_len : PULSE_BATCH_NULL;
    g->value = r->value;
    g->value_len = r->value != NULL ? (uint32_t)r->value_len : PULSE_BATCH_NULL;
    for (uint32_t h = 0; h < r->header_count; h++) {
        const struct pulse_header *hd = &r->headers[h];
        hdrs[h].key = hd->key;
        hdrs[h].key_len = (uint32_t)hd->key_len;
        hdrs[h].value = hd->value;
        hdrs[h].value_len = hd->value != NULL ? (uint32_t)hd->value_len : PULSE_BATCH_NULL;
    }
    g->headers = r->header_count > 0 ? hdrs : NULL;
    g->header_count = r->header_count;
}

/* Phase 2: grouped per partition (request order kept within each), each
 * partition's records split into runs whose timestamps all lie within an
 * int32 of milliseconds of the run's first record (what one batch can
 * represent; almost always one run per partition). */
static pulse_status_t group(struct publish_ctx *c)
{
    int64_t now = pulse_clock_wall_ms();
    uint32_t pos = 0;

    for (uint32_t p = 0; p < c->t->nparts; p++) {
        c->part[p].first = pos;
        pos += c->part[p].count;
    }
    size_t h = 0;
    for (size_t i = 0; i < c->n; i++) {
        struct pulse_record_in *g = &c->grouped[c->part[c->part_of[i]].first + c->slot[i]];
        to_codec(&c->recs[i], c->hdrs != NULL ? c->hdrs + h : NULL, g);
        h += c->recs[i].header_count;
        if (!c->recs[i].has_timestamp)
            g->timestamp = now;
    }
    for (uint32_t p = 0; p < c->t->nparts; p++) {
        c->part[p].run_first = c->nruns;
        for (uint32_t j = c->part[p].first; j < c->part[p].first + c->part[p].count; j++) {
            int64_t delta = 0;
            if (c->nruns == c->part[p].run_first ||
                __builtin_sub_overflow(c->grouped[j].timestamp, c->grouped[c->runs[c->nruns - 1].first].timestamp,
                                       &delta) ||
                delta < INT32_MIN || delta > INT32_MAX) {
                c->runs[c->nruns].first = j;
                c->runs[c->nruns].count = 0;
                c->nruns++;
            }
            c->runs[c->nruns - 1].count++;
            c->run_of[j] = (uint32_t)(c->nruns - 1);
        }
        c->part[p].run_end = c->nruns;
    }
    return PULSE_OK;
}

/* Phase 3: each partition's runs encoded back to back into its buffer. */
static pulse_status_t encode(struct publish_ctx *c)
{
    /* The topic's compression as it is now: a PATCH applies from the next
     * publish on (batches stored keep their own codec). */
    uint16_t flags = atomic_load(&c->t->compression) == PULSE_COMPRESSION_ZLIB ? PULSE_BATCH_CODEC_ZLIB : 0;
    for (uint32_t p = 0; p < c->t->nparts; p++) {
        for (size_t r = c->part[p].run_first; r < c->part[p].run_end; r++) {
            size_t at = c->part[p].buf.len;
            pulse_status_t st = pulse_batch_encode(&c->part[p].buf, 0, flags, &c->grouped[c->runs[r].first],
                                                   c->runs[r].count);
            if (st == PULSE_OK && c->idem != NULL)
                pulse_batch_set_producer(c->part[p].buf.data + at, c->part[p].buf.len - at,
                                         (uint32_t)(c->idem->khash >> 32), (uint32_t)c->idem->khash,
                                         (int32_t)c->idem->body_fp);
            if (st == PULSE_TOO_LARGE) {
                pulse_errbuf_set(c->errbuf, c->errlen,
                                 "the records for partition %" PRIu32 " encode to more than %u bytes", p,
                                 PULSE_BROKER_MAX_BATCH_BYTES);
                return st;
            }
            if (st != PULSE_OK) {
                pulse_errbuf_set(c->errbuf, c->errlen, "cannot encode the batch for partition %" PRIu32 ": %s", p,
                                 pulse_status_message(st));
                return st == PULSE_RANGE ? PULSE_INVALID : st;
            }
        }
    }
    return PULSE_OK;
}

/* "0 (offsets 10-12), 2 (offset 5)": the partitions appended so far, at
 * most a few, then how many more. */
static void describe_appended(const struct publish_ctx *c, char *out, size_t len)
{
    size_t used = 0, shown = 0, total = 0;

    out[0] = '\0';
    for (uint32_t p = 0; p < c->t->nparts; p++) {
        if (!c->part[p].appended)
            continue;
        total++;
        if (shown < 3 && used < len) {
            int64_t lo = c->runs[c->part[p].run_first].base;
            int64_t hi = lo + (int64_t)c->part[p].count - 1;
            int k = lo == hi ? snprintf(out + used, len - used, "%s%" PRIu32 " (offset %" PRId64 ")", shown ? ", " : "",
                                        p, lo)
                             : snprintf(out + used, len - used, "%s%" PRIu32 " (offsets %" PRId64 "-%" PRId64 ")",
                                        shown ? ", " : "", p, lo, hi);
            used += k > 0 ? (size_t)k : 0;
            shown++;
        }
    }
    if (total > shown && used < len)
        snprintf(out + used, len - used, " and %zu more", total - shown);
}

/* errbuf for an append to partition p that failed with st. A publish is
 * not atomic across partitions: what the partitions before p took stays in
 * their logs (an append is never rolled back), and the answer says so. */
static void append_error(const struct publish_ctx *c, uint32_t p, pulse_status_t st)
{
    const char *why = st == PULSE_FENCED    ? "is fenced after a failed write or sync; it is being reopened"
                      : st == PULSE_NOSPACE ? "has no space left on its storage device"
                                            : pulse_status_message(st);
    char stored[160];

    describe_appended(c, stored, sizeof stored);
    if (stored[0] != '\0' && c->idem != NULL) {
        pulse_errbuf_set(c->errbuf, c->errlen,
                         "partition %" PRIu32 " %s, and nothing of it was stored; stored before it and kept (a retry "
                         "with the same Idempotency-Key stores only the rest): partitions %s; topic \"%s\"",
                         p, why, stored, c->t->name);
    } else if (stored[0] != '\0') {
        /* The list before the topic name: errbuf may be short (an HTTP
         * answer's message), and what was stored matters most. */
        pulse_errbuf_set(c->errbuf, c->errlen,
                         "partition %" PRIu32 " %s, and nothing of it was stored; stored before it and kept (a retry "
                         "stores them again): partitions %s; topic \"%s\"",
                         p, why, stored, c->t->name);
    } else if (st == PULSE_FENCED || st == PULSE_NOSPACE) {
        pulse_errbuf_set(c->errbuf, c->errlen,
                         "partition %" PRIu32 " of topic \"%s\" %s; nothing of this publish was stored, retry later", p,
                         c->t->name, why);
    } else {
        pulse_errbuf_set(c->errbuf, c->errlen, "append to partition %" PRIu32 " failed: %s", p, why);
    }
}

/* A partition fenced before anything is appended refuses the whole publish,
 * so the common case of a fence stays all-or-nothing. */
static pulse_status_t refuse_fenced(struct publish_ctx *c)
{
    for (uint32_t p = 0; p < c->t->nparts; p++) {
        if (c->part[p].count > 0 && !c->part[p].skip && pulse_plog_fenced(c->t->plogs[p])) {
            append_error(c, p, PULSE_FENCED);
            return PULSE_FENCED;
        }
    }
    return PULSE_OK;
}

/* A pending publish with an empty list of partitions. Not zeroed: its
 * arrays are written entry by entry as append_all fills them (n counts
 * them), and clearing them would cost more than the rest of a small
 * publish's bookkeeping. */
static struct pulse_broker_pending *pending_new(void)
{
    struct pulse_broker_pending *pend = pulse_malloc(sizeof *pend);

    if (pend == NULL)
        return NULL;
    pend->next = NULL;
    pend->topic = NULL;
    pend->n = 0;
    pend->done = NULL;
    pend->arg = NULL;
    pend->errbuf = NULL;
    pend->errlen = 0;
    return pend;
}

/* Phase 4: the append units go to the page cache, partition after
 * partition; pend (nullable) notes what durability must reach. On failure
 * the partitions appended before keep their records (append_error). */
static pulse_status_t append_all(struct publish_ctx *c, struct pulse_broker_pending *pend)
{
    for (uint32_t p = 0; p < c->t->nparts; p++) {
        int64_t base = 0, end = 0;
        if (c->part[p].count == 0 || c->part[p].skip)
            continue;
        /* The epoch the bytes were written in (see pulse_plog_fate). */
        uint64_t epoch = 0;
        /* All runs of the partition go in as one append unit: consecutive
         * offsets, one write. */
        pulse_status_t st = pulse_plog_append_async(c->t->plogs[p], c->part[p].buf.data, c->part[p].buf.len, &base,
                                                    &end, &epoch);
        if (st != PULSE_OK) {
            append_error(c, p, st);
            return st;
        }
        c->part[p].appended = true;
        c->part[p].end = end;
        c->part[p].epoch = epoch;
        c->bytes += c->part[p].buf.len;
        if (c->idem != NULL)
            pulse_failpoint("publish_idem_after_partition");
        for (size_t r = c->part[p].run_first; r < c->part[p].run_end; r++) {
            c->runs[r].base = base;
            base += c->runs[r].count;
        }
        if (pend != NULL) {
            pend->parts[pend->n] = p;
            pend->ends[pend->n] = end;
            pend->epochs[pend->n] = epoch;
            pend->n++;
        }
    }
    return PULSE_OK;
}

/* offsets_out in request order: each record's offset, or -1 for a record
 * whose partition's append did not happen. Returns the records stored. */
static size_t fill_offsets(const struct publish_ctx *c, struct pulse_offset_pair *offsets_out)
{
    size_t stored = 0;

    for (size_t i = 0; i < c->n; i++) {
        uint32_t j = c->part[c->part_of[i]].first + c->slot[i];
        const struct run *r = &c->runs[c->run_of[j]];
        offsets_out[i].partition = c->part_of[i];
        bool there = c->part[c->part_of[i]].appended || c->part[c->part_of[i]].skip;
        offsets_out[i].offset = there ? r->base + (int64_t)(j - r->first) : -1;
        stored += c->part[c->part_of[i]].appended ? 1 : 0;
    }
    return stored;
}

static void publish_ctx_fini(struct publish_ctx *c)
{
    for (uint32_t p = 0; p < c->nparts; p++)
        pulse_buf_fini(&c->part[p].buf);
    pulse_free(c->hdrs);
    pulse_free(c->recs_mem);
}

/* Counts the publish out of b->inflight (drain waits for it). */
static void inflight_done(struct pulse_local *b)
{
    pthread_mutex_lock(&b->mu);
    b->inflight--;
    if (b->inflight == 0 && b->pending_head == NULL)
        pthread_cond_broadcast(&b->idle_cv);
    pthread_mutex_unlock(&b->mu);
}

/* Phase 5 (every-write mode): the publish goes on the pending list, which
 * owns pend and the topic reference from then on. Whoever syncs completes
 * it (complete_ready), possibly before this returns. PULSE_TOPIC_NOT_FOUND
 * when the topic was deleted while appending (its data is going away).
 *
 * lead (NULL for the idempotent publish, which never leads): set to the
 * topic, with a reference of the caller's own, when this publish is to
 * sync its partition on the caller's thread (pulse_broker_sync_inline):
 * only a one-partition publish (may_lead) that gets the inline slot, and
 * only when pulse_broker_inline_allowed says so: a lone publisher (one
 * client connection, no other publish waiting on the list), or any while
 * fdatasyncs are fast. Otherwise the syncer's next sync covers this
 * publish with the others (a bigger group) while this thread goes on
 * serving its other connections instead of blocking in an fdatasync that
 * covers one publish, their requests waiting behind it. Who does not lead
 * kicks the syncer and, on success, leaves b->inflight here under the same
 * lock (drain then waits for it as a pending publish): the caller must
 * not count it out again, nor touch b afterwards. */
static pulse_status_t hand_to_syncer(struct publish_ctx *c, struct pulse_broker_pending *pend, bool may_lead,
                                     struct pulse_broker_topic **lead)
{
    struct pulse_local *b = c->b;

    pend->topic = c->t;
    pthread_mutex_lock(&b->mu);
    if (atomic_load(&c->t->deleted)) {
        pthread_mutex_unlock(&b->mu);
        pulse_errbuf_set(c->errbuf, c->errlen, "topic \"%s\" was deleted", c->t->name);
        return PULSE_TOPIC_NOT_FOUND;
    }
    if (lead != NULL && may_lead && pulse_broker_inline_allowed(b, b->pending_head == NULL) &&
        pulse_broker_sync_inline_claim(b)) {
        atomic_fetch_add(&c->t->refs, 1);
        *lead = c->t;
    }
    *b->pending_tail = pend;
    b->pending_tail = &pend->next;
    if (lead == NULL || *lead == NULL) {
        b->kick = true;
        pthread_cond_signal(&b->cv);
    }
    if (lead != NULL && *lead == NULL)
        b->inflight--; /* pending_head is not NULL: no one to wake */
    pthread_mutex_unlock(&b->mu);
    c->t = NULL;
    return PULSE_OK;
}

/* Wakes the syncer: records a failed publish left in the logs should not
 * wait for the next publish to become durable. */
static void kick_syncer(struct pulse_local *b)
{
    pthread_mutex_lock(&b->mu);
    b->kick = true;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

pulse_status_t pulse_local_publish(struct pulse_broker *base, const char *topic,
                                   const struct pulse_publish_record *recs, size_t n,
                                   struct pulse_offset_pair *offsets_out, pulse_publish_done_fn done, void *arg,
                                   bool *pending_out, char *errbuf, size_t errlen)
{
    struct pulse_local *b = pulse_local_of(base);
    pulse_status_t st = PULSE_OK;
    struct publish_ctx c;
    struct pulse_broker_pending *pend = NULL;
    struct pulse_broker_topic *lead = NULL; /* the topic this thread syncs, one reference */
    bool pending = false;
    bool counted = true; /* still in b->inflight */

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
    pthread_mutex_unlock(&b->mu);

    publish_ctx_init(&c, b, recs, n, errbuf, errlen);
    c.t = pulse_broker_topic_acquire(b, topic);
    if (c.t == NULL) {
        pulse_errbuf_set(errbuf, errlen, "topic \"%s\" does not exist", topic != NULL ? topic : "");
        st = PULSE_TOPIC_NOT_FOUND;
        goto out;
    }
    st = route(&c);
    if (st == PULSE_OK)
        st = group(&c);
    if (st == PULSE_OK)
        st = encode(&c);
    if (st == PULSE_OK && b->cfg.sync_mode == PULSE_SYNC_EVERY_WRITE) {
        pend = pending_new();
        if (pend == NULL)
            st = PULSE_NOMEM;
    }
    if (st == PULSE_OK)
        st = refuse_fenced(&c);
    if (st == PULSE_OK) {
        st = append_all(&c, pend);
        /* Also after a failure: the records appended before it are stored. */
        size_t stored = fill_offsets(&c, offsets_out);
        atomic_fetch_add(&c.t->published_records, (uint64_t)stored);
        atomic_fetch_add(&c.t->published_bytes, c.bytes);
        if (st != PULSE_OK && stored > 0)
            kick_syncer(b);
    }
    if (st != PULSE_OK)
        goto out;
    if (pend != NULL) {
        pend->done = done;
        pend->arg = arg;
        pend->errbuf = errbuf;
        pend->errlen = errlen;
        /* A lone one-partition publish syncs on this thread
         * (pulse_broker_sync_inline), which spares it two thread
         * hand-offs. pend is not ours once handed over: keep what the sync
         * needs. */
        uint32_t lead_part = pend->parts[0];
        int64_t lead_end = pend->ends[0];
        st = hand_to_syncer(&c, pend, pend->n == 1, &lead);
        if (st == PULSE_OK) {
            pend = NULL;
            pending = true;
            counted = lead != NULL;
            if (lead != NULL)
                pulse_broker_sync_inline(b, lead, lead_part, lead_end);
        }
    }
out:
    if (counted)
        inflight_done(b);
    publish_ctx_fini(&c);
    pulse_free(pend);
    pulse_broker_topic_release(b, c.t);
    pulse_broker_topic_release(b, lead);
    if (st == PULSE_OK)
        *pending_out = pending;
    return st;
}

/* ---- the idempotent publish (idem.h) ---------------------------------- */

/* The checks both publishes make before anything else, and the count of
 * publishes in flight that drain waits for (inflight_done undoes it). */
static pulse_status_t publish_enter(struct pulse_local *b, const struct pulse_publish_record *recs, size_t n,
                                    char *errbuf, size_t errlen)
{
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
    pthread_mutex_lock(&b->mu);
    if (b->draining) {
        pthread_mutex_unlock(&b->mu);
        pulse_errbuf_set(errbuf, errlen, "the broker is shutting down");
        return PULSE_SHUTDOWN;
    }
    b->inflight++;
    pthread_mutex_unlock(&b->mu);
    return PULSE_OK;
}

/* What an earlier try of this request left (sh, one per partition): a
 * stored share is skipped (its runs get their offsets), one appended but
 * not durable yet is skipped and waited for, one a reopen discarded is
 * appended again. A share of another size than this request routes there
 * cannot be completed exactly: refused, nothing stored. */
static pulse_status_t judge_shares(struct publish_ctx *c, struct pulse_idem_share *sh)
{
    for (uint32_t p = 0; p < c->t->nparts; p++) {
        struct pulse_idem_share *s = &sh[p];
        if (s->state == PULSE_IDEM_SHARE_APPENDED) {
            enum pulse_plog_fate f = pulse_plog_fate(c->t->plogs[p], s->epoch, s->end);
            if (f != PULSE_PLOG_PENDING)
                s->state = f == PULSE_PLOG_DURABLE ? PULSE_IDEM_SHARE_STORED : PULSE_IDEM_SHARE_NONE;
        }
        if (s->state == PULSE_IDEM_SHARE_NONE)
            continue;
        if (s->count != c->part[p].count) {
            pulse_errbuf_set(c->errbuf, c->errlen,
                             "partition %" PRIu32 " holds %" PRIu32 " records of an earlier try with this idempotency "
                             "key (offsets %" PRId64 "-%" PRId64 "), but this request routes %" PRIu32 " there; "
                             "nothing more was stored",
                             p, s->count, s->base, s->base + (int64_t)s->count - 1, c->part[p].count);
            return PULSE_KEY_REUSED;
        }
        c->part[p].skip = true;
        c->part[p].await = s->state == PULSE_IDEM_SHARE_APPENDED;
        c->part[p].await_end = s->end;
        c->part[p].await_epoch = s->epoch;
        int64_t base = s->base;
        for (size_t r = c->part[p].run_first; r < c->part[p].run_end; r++) {
            c->runs[r].base = base;
            base += c->runs[r].count;
        }
    }
    return PULSE_OK;
}

/* sh as this try leaves it: the partitions it appended are APPENDED (their
 * fate is settled by the finish, or judged by a retry). */
static void note_shares(const struct publish_ctx *c, struct pulse_idem_share *sh)
{
    for (uint32_t p = 0; p < c->t->nparts; p++) {
        if (!c->part[p].appended)
            continue;
        sh[p].state = PULSE_IDEM_SHARE_APPENDED;
        sh[p].base = c->runs[c->part[p].run_first].base;
        sh[p].count = c->part[p].count;
        sh[p].end = c->part[p].end;
        sh[p].epoch = c->part[p].epoch;
    }
}

/* Completion of a running idempotent publish (every-write mode): the
 * syncer calls it in place of the caller's done. */
struct idem_call {
    struct pulse_broker_idem *w;
    struct pulse_idem_entry *entry;
    struct pulse_idem_share *shares;
    size_t nshares;
    pulse_publish_done_fn done;
    void *arg;
    const struct pulse_offset_pair *offsets;
    size_t n;
    const char *errbuf;
};

static void idem_call_done(void *arg, pulse_status_t st)
{
    struct idem_call *k = arg;
    pulse_publish_done_fn done = k->done;
    void *darg = k->arg;

    pulse_broker_idem_finish(k->w, k->entry, k->shares, k->nshares, st, k->offsets, k->n, k->errbuf);
    pulse_free(k->shares);
    pulse_free(k);
    done(darg, st);
}

/* Validation, routing and encoding of an idempotent publish, with its
 * identity (filled here) in every batch. */
static pulse_status_t idem_prepare(struct publish_ctx *c, const char *topic, struct pulse_idem_id *id,
                                   const struct pulse_publish_idem *idem)
{
    c->t = pulse_broker_topic_acquire(c->b, topic);
    if (c->t == NULL) {
        pulse_errbuf_set(c->errbuf, c->errlen, "topic \"%s\" does not exist", topic != NULL ? topic : "");
        return PULSE_TOPIC_NOT_FOUND;
    }
    id->topic_uid = c->t->uid;
    id->nparts = c->t->nparts;
    id->key = idem->key;
    id->key_len = idem->key_len;
    id->khash = pulse_broker_idem_key_hash(idem->key, idem->key_len);
    id->body = pulse_broker_idem_body_hash(c->recs, c->n);
    id->body_fp = (uint32_t)((id->body >> 32) ^ id->body) & 0x7fffffffu;
    if (id->body_fp == 0)
        id->body_fp = 1;
    c->idem = id;
    pulse_status_t st = route(c);
    if (st == PULSE_OK)
        st = group(c);
    if (st == PULSE_OK)
        st = encode(c);
    for (uint32_t p = 0; p < c->t->nparts; p++)
        id->touched += c->part[p].count > 0 ? 1 : 0;
    return st;
}

/* The running try: skip what is stored, append the rest, finish at once
 * (nothing to wait for, or interval mode) or hand the finish to the
 * syncer. *pending and idem->duplicate as the seam says. */
static pulse_status_t idem_run(struct publish_ctx *c, struct pulse_idem_entry *entry, struct pulse_idem_share *sh,
                               struct pulse_publish_idem *idem, struct pulse_offset_pair *offsets_out,
                               pulse_publish_done_fn done, void *arg, bool *pending)
{
    struct pulse_local *b = c->b;
    struct pulse_broker_idem *w = b->idem_window;
    struct pulse_broker_pending *pend = NULL;
    struct idem_call *k = NULL;
    uint32_t nparts = c->t->nparts;
    bool appends = false, waits = false;

    /* Tests hold the key running here to queue a concurrent twin. */
    pulse_failpoint_delay("publish_idem_run");
    pulse_status_t st = judge_shares(c, sh);
    for (uint32_t p = 0; st == PULSE_OK && p < nparts; p++) {
        appends = appends || (c->part[p].count > 0 && !c->part[p].skip);
        waits = waits || c->part[p].await;
    }
    if (st == PULSE_OK && (appends || waits) && b->cfg.sync_mode == PULSE_SYNC_EVERY_WRITE) {
        pend = pending_new();
        k = pulse_calloc(1, sizeof *k);
        if (pend == NULL || k == NULL)
            st = PULSE_NOMEM;
    }
    if (st == PULSE_OK)
        st = refuse_fenced(c);
    if (st == PULSE_OK) {
        st = append_all(c, pend);
        uint64_t added = 0;
        fill_offsets(c, offsets_out);
        for (uint32_t p = 0; p < nparts; p++)
            added += c->part[p].appended ? c->part[p].count : 0;
        atomic_fetch_add(&c->t->published_records, added);
        atomic_fetch_add(&c->t->published_bytes, c->bytes);
        note_shares(c, sh);
        if (st != PULSE_OK && c->bytes > 0)
            kick_syncer(b);
    }
    for (uint32_t p = 0; st == PULSE_OK && pend != NULL && p < nparts; p++) {
        if (!c->part[p].await)
            continue;
        pend->parts[pend->n] = p;
        pend->ends[pend->n] = c->part[p].await_end;
        pend->epochs[pend->n] = c->part[p].await_epoch;
        pend->n++;
    }
    if (st == PULSE_OK)
        idem->duplicate = !appends;
    if (st == PULSE_OK && pend != NULL) {
        *k = (struct idem_call){w, entry, sh, nparts, done, arg, offsets_out, c->n, c->errbuf};
        pend->done = idem_call_done;
        pend->arg = k;
        pend->errbuf = c->errbuf;
        pend->errlen = c->errlen;
        st = hand_to_syncer(c, pend, false, NULL);
        if (st == PULSE_OK) {
            *pending = true;
            return PULSE_OK; /* the syncer owns pend, k and sh */
        }
    }
    pulse_free(pend);
    pulse_free(k);
    pulse_broker_idem_finish(w, entry, sh, nparts, st, offsets_out, c->n, c->errbuf);
    pulse_free(sh);
    *pending = false;
    return st;
}

pulse_status_t pulse_local_publish_idem(struct pulse_broker *base, const char *topic,
                                        const struct pulse_publish_record *recs, size_t n,
                                        struct pulse_publish_idem *idem, struct pulse_offset_pair *offsets_out,
                                        pulse_publish_done_fn done, void *arg, bool *pending_out, char *errbuf,
                                        size_t errlen)
{
    struct pulse_local *b = pulse_local_of(base);
    struct publish_ctx c;
    struct pulse_idem_id id;
    struct pulse_idem_waiter *waiter = NULL;
    struct pulse_idem_entry *entry = NULL;
    struct pulse_idem_share *sh = NULL;
    size_t nsh = 0;
    enum pulse_idem_begin how = PULSE_IDEM_RUN;
    bool pending = false;

    if (idem == NULL || idem->key == NULL || idem->key_len == 0 || idem->key_len > PULSE_IDEM_KEY_MAX || done == NULL) {
        pulse_errbuf_set(errbuf, errlen, "an idempotency key is 1 to %d bytes", PULSE_IDEM_KEY_MAX);
        return PULSE_INVALID;
    }
    idem->duplicate = false;
    pulse_status_t st = publish_enter(b, recs, n, errbuf, errlen);
    if (st != PULSE_OK)
        return st;
    publish_ctx_init(&c, b, recs, n, errbuf, errlen);
    memset(&id, 0, sizeof id);
    st = idem_prepare(&c, topic, &id, idem);
    if (st == PULSE_OK) {
        waiter = pulse_calloc(1, sizeof *waiter);
        st = waiter == NULL ? PULSE_NOMEM : PULSE_OK;
    }
    if (st == PULSE_OK) {
        *waiter = (struct pulse_idem_waiter){NULL, done, arg, offsets_out, n, idem, errbuf, errlen};
        st = pulse_broker_idem_begin(b->idem_window, &id, waiter, &how, &entry, &sh, &nsh, errbuf, errlen);
    }
    if (st == PULSE_OK && how == PULSE_IDEM_WAIT) {
        waiter = NULL; /* the window calls it */
        pending = true;
    } else if (st == PULSE_OK) {
        if (sh == NULL)
            sh = pulse_calloc(c.t->nparts, sizeof *sh);
        if (sh == NULL) {
            pulse_broker_idem_finish(b->idem_window, entry, NULL, 0, PULSE_NOMEM, NULL, 0, NULL);
            st = PULSE_NOMEM;
        } else {
            for (uint32_t p = 0; p < c.t->nparts; p++)
                sh[p].partition = p;
            st = idem_run(&c, entry, sh, idem, offsets_out, done, arg, &pending);
        }
    }
    pulse_free(waiter);
    inflight_done(b);
    publish_ctx_fini(&c);
    pulse_broker_topic_release(b, c.t);
    if (st == PULSE_OK)
        *pending_out = pending;
    return st;
}
