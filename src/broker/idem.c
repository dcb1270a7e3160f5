/* SPDX-License-Identifier: MIT */
/*
 * idem.c - the window of idempotency keys (idem.h).
 *
 * Method: a hash table of entries keyed by (topic uid, key hash), chained,
 * with a power-of-two bucket count sized from max_keys, plus a list of the
 * entries in the order they were made (oldest first), which is what expiry
 * and the bound walk. An entry expires window_ms after it was made (a
 * rebuilt one: after the newest timestamp of its batches); expired entries
 * are dropped from the old end of the list at every begin, and an expired
 * entry found by a lookup is dropped there too (rebuilt entries are not in
 * time order). A running entry is never dropped: its publish owns it until
 * pulse_broker_idem_finish.
 *
 * Why CRC32C and murmur2 rather than a cryptographic hash: the fields
 * must fit the batch header's 96 reserved bits, and the comparison guards
 * against a client reusing a key by mistake, not against an adversary: a
 * client allowed to publish to the topic can store what it likes anyway.
 * In memory the key itself is compared, so a hash collision matters only
 * for keys rebuilt from disk after a restart, whose text is not stored
 * (docs/API.md "Limits of the guarantee").
 */
#include "broker/idem.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "broker/broker_int.h"
#include "broker/syncpool.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/endian.h"
#include "common/log.h"
#include "storage/batch.h"
#include "storage/plog.h"

struct pulse_idem_entry {
    struct pulse_idem_entry *hnext; /* bucket chain */
    struct pulse_idem_entry *older, *newer;
    uint64_t topic_uid;
    uint64_t khash;
    char *key; /* NULL for an entry rebuilt from disk until a retry names it */
    size_t key_len;
    uint64_t body;
    bool body_known; /* false: only body_fp is known (rebuilt) */
    uint32_t body_fp;
    int64_t created_ms;
    bool running;
    /* The partitions it touched (sorted by nothing; few): nshares of cap
     * entries. Only those are kept, so a key costs 40 bytes per partition
     * it wrote to, not per partition of its topic. */
    struct pulse_idem_share *shares;
    size_t nshares;
    size_t cap;
    uint32_t nparts; /* the topic's partitions when it was made */
    struct pulse_idem_waiter *waiters;
};

struct pulse_broker_idem {
    pthread_mutex_t mu;
    int64_t window_ms;
    uint32_t max_keys;
    struct pulse_idem_entry **buckets;
    size_t nbuckets; /* a power of two */
    struct pulse_idem_entry *oldest, *newest;
    size_t count;
};

pulse_status_t pulse_broker_idem_create(int64_t window_ms, uint32_t max_keys, struct pulse_broker_idem **out)
{
    struct pulse_broker_idem *w = pulse_calloc(1, sizeof *w);
    if (w == NULL)
        return PULSE_NOMEM;
    w->window_ms = window_ms;
    w->max_keys = max_keys > 0 ? max_keys : 1;
    w->nbuckets = 16;
    while (w->nbuckets < w->max_keys && w->nbuckets < ((size_t)1 << 20))
        w->nbuckets <<= 1;
    w->buckets = pulse_calloc(w->nbuckets, sizeof *w->buckets);
    if (w->buckets == NULL) {
        pulse_free(w);
        return PULSE_NOMEM;
    }
    pthread_mutex_init(&w->mu, NULL);
    *out = w;
    return PULSE_OK;
}

static void entry_free(struct pulse_idem_entry *e)
{
    if (e == NULL)
        return;
    pulse_free(e->key);
    pulse_free(e->shares);
    pulse_free(e);
}

void pulse_broker_idem_destroy(struct pulse_broker_idem *w)
{
    if (w == NULL)
        return;
    struct pulse_idem_entry *e = w->oldest;
    while (e != NULL) {
        struct pulse_idem_entry *next = e->newer;
        entry_free(e);
        e = next;
    }
    pthread_mutex_destroy(&w->mu);
    pulse_free(w->buckets);
    pulse_free(w);
}

uint64_t pulse_broker_idem_key_hash(const char *key, size_t len)
{
    uint32_t hi = pulse_broker_murmur2((const uint8_t *)key, len);
    uint32_t lo = pulse_crc32c(0, key, len);
    if (hi == 0)
        hi = 1;
    return (uint64_t)hi << 32 | lo;
}

/* Feeds one length-prefixed field (PULSE_BATCH_NULL for a null one). */
static uint32_t feed(uint32_t crc, uint64_t *len, const void *bytes, size_t n, bool null)
{
    uint8_t be[4];
    pulse_put_be32(be, null ? PULSE_BATCH_NULL : (uint32_t)n);
    crc = pulse_crc32c(crc, be, sizeof be);
    if (!null && n > 0)
        crc = pulse_crc32c(crc, bytes, n);
    *len += 4 + (null ? 0 : n);
    return crc;
}

uint64_t pulse_broker_idem_body_hash(const struct pulse_publish_record *recs, size_t n)
{
    uint32_t crc = 0;
    uint64_t len = 0;

    for (size_t i = 0; i < n; i++) {
        const struct pulse_publish_record *r = &recs[i];
        uint8_t place[13];
        pulse_put_be32(place, (uint32_t)r->partition);
        place[4] = r->has_timestamp ? 1 : 0;
        pulse_put_be64(place + 5, r->has_timestamp ? (uint64_t)r->timestamp : 0);
        crc = pulse_crc32c(crc, place, sizeof place);
        len += sizeof place;
        crc = feed(crc, &len, r->key, r->key_len, r->key == NULL);
        crc = feed(crc, &len, r->value, r->value_len, r->value == NULL);
        crc = feed(crc, &len, NULL, r->header_count, true);
        for (uint32_t h = 0; h < r->header_count; h++) {
            crc = feed(crc, &len, r->headers[h].key, r->headers[h].key_len, false);
            crc = feed(crc, &len, r->headers[h].value, r->headers[h].value_len, r->headers[h].value == NULL);
        }
    }
    return (uint64_t)crc << 32 | (uint32_t)len;
}

/* ---- the table (w->mu held) ------------------------------------------------ */

static size_t bucket_of(const struct pulse_broker_idem *w, uint64_t uid, uint64_t khash)
{
    uint64_t h = khash ^ (uid * 0x9e3779b97f4a7c15ull);
    return (size_t)(h ^ (h >> 29)) & (w->nbuckets - 1);
}

static void unlink_entry(struct pulse_broker_idem *w, struct pulse_idem_entry *e)
{
    struct pulse_idem_entry **pp = &w->buckets[bucket_of(w, e->topic_uid, e->khash)];
    while (*pp != NULL && *pp != e)
        pp = &(*pp)->hnext;
    if (*pp == e)
        *pp = e->hnext;
    if (e->older != NULL)
        e->older->newer = e->newer;
    else
        w->oldest = e->newer;
    if (e->newer != NULL)
        e->newer->older = e->older;
    else
        w->newest = e->older;
    w->count--;
}

static void link_entry(struct pulse_broker_idem *w, struct pulse_idem_entry *e)
{
    size_t bk = bucket_of(w, e->topic_uid, e->khash);
    e->hnext = w->buckets[bk];
    w->buckets[bk] = e;
    e->older = w->newest;
    e->newer = NULL;
    if (w->newest != NULL)
        w->newest->newer = e;
    else
        w->oldest = e;
    w->newest = e;
    w->count++;
}

static bool expired(const struct pulse_broker_idem *w, const struct pulse_idem_entry *e, int64_t now)
{
    return !e->running && e->created_ms <= now - w->window_ms;
}

static void expire(struct pulse_broker_idem *w, int64_t now)
{
    while (w->oldest != NULL && expired(w, w->oldest, now)) {
        struct pulse_idem_entry *e = w->oldest;
        unlink_entry(w, e);
        entry_free(e);
    }
}

/* Room for one more entry: the oldest finished one goes when the window is
 * full. False when every entry is running. */
static bool make_room(struct pulse_broker_idem *w)
{
    if (w->count < w->max_keys)
        return true;
    for (struct pulse_idem_entry *e = w->oldest; e != NULL; e = e->newer) {
        if (!e->running) {
            unlink_entry(w, e);
            entry_free(e);
            return true;
        }
    }
    return false;
}

static struct pulse_idem_entry *find(struct pulse_broker_idem *w, uint64_t uid, uint64_t khash)
{
    for (struct pulse_idem_entry *e = w->buckets[bucket_of(w, uid, khash)]; e != NULL; e = e->hnext)
        if (e->topic_uid == uid && e->khash == khash)
            return e;
    return NULL;
}

static struct pulse_idem_entry *entry_new(uint64_t uid, uint64_t khash, uint32_t nparts, size_t cap)
{
    struct pulse_idem_entry *e = pulse_calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    e->shares = pulse_calloc(cap > 0 ? cap : 1, sizeof *e->shares);
    if (e->shares == NULL) {
        pulse_free(e);
        return NULL;
    }
    e->cap = cap > 0 ? cap : 1;
    e->nparts = nparts;
    e->topic_uid = uid;
    e->khash = khash;
    return e;
}

/* Room for cap shares in e. */
static bool entry_reserve(struct pulse_idem_entry *e, size_t cap)
{
    if (e->cap >= cap)
        return true;
    struct pulse_idem_share *grown = pulse_realloc(e->shares, cap * sizeof *grown);
    if (grown == NULL)
        return false;
    e->shares = grown;
    e->cap = cap;
    return true;
}

/* ---- begin and finish ---------------------------------------------------- */

/* Whether the entry was made by this request's twin: same key text (when
 * known) and same records. A rebuilt entry knows only hashes. */
static bool same_key(const struct pulse_idem_entry *e, const struct pulse_idem_id *id)
{
    return e->key == NULL || (e->key_len == id->key_len && memcmp(e->key, id->key, id->key_len) == 0);
}

static bool same_body(const struct pulse_idem_entry *e, const struct pulse_idem_id *id)
{
    return e->body_known ? e->body == id->body : e->body_fp == id->body_fp;
}

/* A new running entry for id (w->mu held). */
static pulse_status_t begin_new(struct pulse_broker_idem *w, const struct pulse_idem_id *id, size_t nparts, int64_t now,
                                struct pulse_idem_entry **entry_out, char *errbuf, size_t errlen)
{
    if (!make_room(w)) {
        pulse_errbuf_set(errbuf, errlen,
                         "all %" PRIu32 " remembered idempotency keys belong to publishes still running; "
                         "retry later",
                         w->max_keys);
        return PULSE_BUSY;
    }
    struct pulse_idem_entry *e = entry_new(id->topic_uid, id->khash, (uint32_t)nparts, id->touched);
    char *key = pulse_malloc(id->key_len + 1);
    if (e == NULL || key == NULL) {
        entry_free(e);
        pulse_free(key);
        return PULSE_NOMEM;
    }
    memcpy(key, id->key, id->key_len);
    key[id->key_len] = '\0';
    e->key = key;
    e->key_len = id->key_len;
    e->body = id->body;
    e->body_known = true;
    e->body_fp = id->body_fp;
    e->created_ms = now;
    e->running = true;
    link_entry(w, e);
    *entry_out = e;
    return PULSE_OK;
}

pulse_status_t pulse_broker_idem_begin(struct pulse_broker_idem *w, const struct pulse_idem_id *id,
                                       struct pulse_idem_waiter *waiter, enum pulse_idem_begin *how,
                                       struct pulse_idem_entry **entry_out, struct pulse_idem_share **shares_out,
                                       size_t *nshares_out, char *errbuf, size_t errlen)
{
    int64_t now = pulse_clock_wall_ms();
    pulse_status_t st = PULSE_OK;
    size_t nparts = id->nparts;

    *shares_out = NULL;
    *nshares_out = 0;
    pthread_mutex_lock(&w->mu);
    expire(w, now);
    struct pulse_idem_entry *e = find(w, id->topic_uid, id->khash);
    if (e != NULL && (expired(w, e, now) || !same_key(e, id) || e->nparts != nparts)) {
        /* Expired, a hash twin of another key, or the topic changed shape:
         * the old entry cannot answer for this request. */
        if (e->running) {
            pulse_errbuf_set(errbuf, errlen,
                             "another publish with a colliding idempotency key is running; retry later");
            st = PULSE_BUSY;
            goto out;
        }
        unlink_entry(w, e);
        entry_free(e);
        e = NULL;
    }
    if (e == NULL) {
        *how = PULSE_IDEM_RUN;
        st = begin_new(w, id, nparts, now, entry_out, errbuf, errlen);
        goto out;
    }
    if (!same_body(e, id)) {
        pulse_errbuf_set(errbuf, errlen,
                         "the idempotency key was used %" PRId64 " s ago for a publish with other records; nothing "
                         "was stored: use a new key for new records",
                         now > e->created_ms ? (now - e->created_ms) / 1000 : 0);
        st = PULSE_KEY_REUSED;
        goto out;
    }
    if (e->running) {
        waiter->next = e->waiters;
        e->waiters = waiter;
        *how = PULSE_IDEM_WAIT;
        goto out;
    }
    /* The caller gets every partition (dense); finish keeps the touched
     * ones, at most max(its shares, this request's partitions). */
    struct pulse_idem_share *copy = pulse_calloc(nparts, sizeof *copy);
    if (copy == NULL || !entry_reserve(e, id->touched)) {
        pulse_free(copy);
        st = PULSE_NOMEM;
        goto out;
    }
    for (size_t p = 0; p < nparts; p++)
        copy[p].partition = (uint32_t)p;
    for (size_t i = 0; i < e->nshares; i++)
        if (e->shares[i].partition < nparts)
            copy[e->shares[i].partition] = e->shares[i];
    if (e->key == NULL) {
        /* A rebuilt entry learns its key and records from the first retry
         * whose hashes match. */
        e->key = pulse_malloc(id->key_len + 1);
        if (e->key != NULL) {
            memcpy(e->key, id->key, id->key_len);
            e->key[id->key_len] = '\0';
            e->key_len = id->key_len;
            e->body = id->body;
            e->body_known = true;
        }
    }
    e->running = true;
    *how = PULSE_IDEM_RUN;
    *entry_out = e;
    *shares_out = copy;
    *nshares_out = nparts;
out:
    pthread_mutex_unlock(&w->mu);
    return st;
}

/* Calls the waiters with the outcome and frees them, no lock held. */
static void complete_waiters(struct pulse_idem_waiter *wt, pulse_status_t st, const struct pulse_offset_pair *offsets,
                             size_t n, const char *errmsg)
{
    while (wt != NULL) {
        struct pulse_idem_waiter *next = wt->next;
        pulse_status_t wst = st;
        if (wst == PULSE_OK && (wt->n != n || offsets == NULL)) {
            pulse_errbuf_set(wt->errbuf, wt->errlen, "the idempotency key was used for a publish of %zu records", n);
            wst = PULSE_KEY_REUSED;
        } else if (wst == PULSE_OK) {
            memcpy(wt->offsets_out, offsets, n * sizeof *offsets);
            wt->idem->duplicate = true;
        } else {
            pulse_errbuf_set(wt->errbuf, wt->errlen, "%s",
                             errmsg != NULL && errmsg[0] != '\0' ? errmsg : pulse_status_message(wst));
        }
        wt->done(wt->arg, wst);
        pulse_free(wt);
        wt = next;
    }
}

void pulse_broker_idem_finish(struct pulse_broker_idem *w, struct pulse_idem_entry *entry,
                              const struct pulse_idem_share *shares, size_t nshares, pulse_status_t st,
                              const struct pulse_offset_pair *offsets, size_t n, const char *errmsg)
{
    bool any = false;

    pthread_mutex_lock(&w->mu);
    if (shares != NULL) {
        /* At most cap are touched (begin reserved for this request's
         * partitions; a try that appends nothing keeps what it found). */
        entry->nshares = 0;
        for (size_t p = 0; p < nshares && entry->nshares < entry->cap; p++) {
            if (shares[p].state == PULSE_IDEM_SHARE_NONE)
                continue;
            struct pulse_idem_share *s = &entry->shares[entry->nshares++];
            *s = shares[p];
            if (st == PULSE_OK && s->state == PULSE_IDEM_SHARE_APPENDED)
                s->state = PULSE_IDEM_SHARE_STORED;
        }
    }
    any = entry->nshares > 0;
    entry->running = false;
    struct pulse_idem_waiter *wt = entry->waiters;
    entry->waiters = NULL;
    if (!any) {
        /* Nothing of it is anywhere: forget the key, as if never used. */
        unlink_entry(w, entry);
        entry_free(entry);
    }
    pthread_mutex_unlock(&w->mu);
    complete_waiters(wt, st, offsets, n, errmsg);
}

size_t pulse_broker_idem_count(struct pulse_broker_idem *w)
{
    pthread_mutex_lock(&w->mu);
    size_t n = w->count;
    pthread_mutex_unlock(&w->mu);
    return n;
}

/* ---- rebuild at open ------------------------------------------------------- */

/* Remembers the batch with producer fields hdr of partition p (w->mu not
 * needed: the opener is alone). */
static void remember_batch(struct pulse_broker_idem *w, const struct pulse_broker_topic *t, uint32_t p,
                           const struct pulse_batch_header *hdr)
{
    uint64_t khash = (uint64_t)hdr->producer_id << 32 | hdr->producer_epoch;
    struct pulse_idem_entry *e = find(w, t->uid, khash);
    uint32_t fp = (uint32_t)hdr->base_sequence;

    if (e != NULL && e->body_fp != fp) {
        if (hdr->last_timestamp < e->created_ms)
            return; /* an older use of the key, before the window */
        unlink_entry(w, e);
        entry_free(e);
        e = NULL;
    }
    if (e == NULL) {
        if (!make_room(w))
            return;
        e = entry_new(t->uid, khash, t->nparts, 1);
        if (e == NULL)
            return;
        e->body_fp = fp;
        e->created_ms = hdr->last_timestamp;
        link_entry(w, e);
    }
    struct pulse_idem_share *s = NULL;
    for (size_t i = 0; i < e->nshares && s == NULL; i++)
        s = e->shares[i].partition == p ? &e->shares[i] : NULL;
    if (s == NULL) {
        if (!entry_reserve(e, e->nshares + 1))
            return; /* out of memory: this share is not remembered */
        s = &e->shares[e->nshares++];
        memset(s, 0, sizeof *s);
        s->partition = p;
    }
    if (s->state == PULSE_IDEM_SHARE_STORED && s->base + (int64_t)s->count == hdr->base_offset) {
        s->count += hdr->record_count; /* the next run of one append unit */
    } else {
        s->state = PULSE_IDEM_SHARE_STORED;
        s->base = hdr->base_offset;
        s->count = hdr->record_count;
    }
    s->end = s->base + s->count;
    if (hdr->last_timestamp > e->created_ms)
        e->created_ms = hdr->last_timestamp;
}

/* The first offset of the segments whose newest record is at or after
 * cutoff (INT64_MAX: none). */
static pulse_status_t scan_start(struct pulse_plog *plog, int64_t cutoff, int64_t *from)
{
    struct pulse_segment_info *segs = NULL;
    size_t nsegs = 0;
    pulse_status_t st = pulse_plog_list_segments(plog, &segs, &nsegs);
    if (st != PULSE_OK)
        return st;
    *from = INT64_MAX;
    for (size_t i = nsegs; i > 0; i--) {
        if (segs[i - 1].max_timestamp == INT64_MIN || segs[i - 1].max_timestamp < cutoff)
            break;
        *from = segs[i - 1].base_offset;
    }
    pulse_free(segs);
    return PULSE_OK;
}

/* Calls visit(ctx, hdr) for every batch with producer fields of plog from
 * the window's first segment to HW, in offset order (the batches a rebuild
 * remembers). */
static pulse_status_t scan_partition(struct pulse_plog *plog, int64_t cutoff,
                                     void (*visit)(void *ctx, const struct pulse_batch_header *hdr), void *ctx)
{
    int64_t off = 0;
    struct pulse_buf buf;
    pulse_status_t st = scan_start(plog, cutoff, &off);

    pulse_buf_init(&buf, 2 * PULSE_BROKER_MAX_BATCH_BYTES);
    while (st == PULSE_OK && off < pulse_plog_high_watermark(plog)) {
        struct pulse_slice info;
        pulse_buf_reset(&buf);
        st = pulse_plog_read(plog, off, 1024 * 1024, &buf, &info);
        if (st != PULSE_OK)
            break;
        if (info.len == 0) {
            if (info.skip_to <= off)
                break;
            off = info.skip_to;
            continue;
        }
        for (size_t pos = 0; pos < buf.len;) {
            struct pulse_batch_header hdr;
            if (pulse_batch_parse_header(buf.data + pos, buf.len - pos, &hdr) != PULSE_OK)
                break;
            if (hdr.producer_id != 0 && hdr.last_timestamp >= cutoff && hdr.base_offset >= off)
                visit(ctx, &hdr);
            pos += pulse_batch_total_size(&hdr);
        }
        if (info.next_offset <= off)
            break;
        off = info.next_offset;
    }
    pulse_buf_fini(&buf);
    return st;
}

/*
 * The rebuild reads every partition on the start's threads and remembers
 * what it read on the opener, in (topic, partition) order, so the window
 * ends as a read of one partition after the other would leave it (which
 * key an older use loses to, which entries the bound drops first). The
 * headers read wait in memory for their turn; past REBUILD_HELD headers in
 * all, a partition's read is dropped and done again on the opener in its
 * turn, so the memory stays bounded whatever the window holds.
 */
#define REBUILD_HELD (256u * 1024)

struct rebuild_part {
    const struct pulse_broker_topic *t;
    uint32_t p;
    bool held; /* hdrs are all its batches (else: read again in its turn) */
    pulse_status_t st;
    struct pulse_batch_header *hdrs;
    size_t n, cap;
};

struct rebuild_job {
    struct pulse_broker_idem *w;
    int64_t cutoff;
    struct rebuild_part *parts;
    size_t budget;        /* headers all parts may hold at once */
    _Atomic size_t held;  /* room for headers taken by every part */
    _Atomic size_t again; /* parts over the budget, read again in their turn */
};

/* Gives part rp's room back to the budget and frees it. */
static void part_drop(struct rebuild_job *job, struct rebuild_part *rp)
{
    atomic_fetch_sub(&job->held, rp->cap);
    pulse_free(rp->hdrs);
    rp->hdrs = NULL;
    rp->n = rp->cap = 0;
}

struct hold_ctx {
    struct rebuild_job *job;
    struct rebuild_part *part;
    bool over;
};

/* Holds one header for later, within the budget. */
static void hold_batch(void *arg, const struct pulse_batch_header *hdr)
{
    struct hold_ctx *c = arg;
    struct rebuild_part *rp = c->part;

    if (c->over)
        return;
    if (rp->n == rp->cap) {
        size_t ncap = rp->cap ? rp->cap * 2 : 8;
        size_t more = ncap - rp->cap;
        struct pulse_batch_header *nh;
        /* Room is taken before the memory, and given back when either
         * fails: only rp->cap stays counted for this part. */
        if (atomic_fetch_add(&c->job->held, more) + more > c->job->budget ||
            (nh = pulse_realloc(rp->hdrs, ncap * sizeof *nh)) == NULL) {
            atomic_fetch_sub(&c->job->held, more);
            c->over = true;
            return;
        }
        rp->hdrs = nh;
        rp->cap = ncap;
    }
    rp->hdrs[rp->n++] = *hdr;
}

/* Item i of the parallel read: partition i's headers, held. */
static void read_item(void *arg, size_t i)
{
    struct rebuild_job *job = arg;
    struct rebuild_part *rp = &job->parts[i];
    struct hold_ctx c = {job, rp, false};

    rp->st = scan_partition(rp->t->plogs[rp->p], job->cutoff, hold_batch, &c);
    rp->held = !c.over;
    if (c.over) {
        atomic_fetch_add(&job->again, 1);
        part_drop(job, rp);
    }
}

struct remember_ctx {
    struct pulse_broker_idem *w;
    const struct pulse_broker_topic *t;
    uint32_t p;
};

static void remember_visit(void *arg, const struct pulse_batch_header *hdr)
{
    const struct remember_ctx *c = arg;

    remember_batch(c->w, c->t, c->p, hdr);
}

/* Partition rp's turn on the opener: what was read (or read it now). */
static void remember_part(struct rebuild_job *job, struct rebuild_part *rp)
{
    struct remember_ctx c = {job->w, rp->t, rp->p};
    pulse_status_t st = rp->st;

    if (rp->held) {
        for (size_t k = 0; k < rp->n; k++)
            remember_batch(job->w, rp->t, rp->p, &rp->hdrs[k]);
    } else {
        st = scan_partition(rp->t->plogs[rp->p], job->cutoff, remember_visit, &c);
    }
    if (st != PULSE_OK)
        pulse_log(PULSE_LOG_WARN,
                  "topic \"%s\" partition %" PRIu32 ": cannot read back its idempotency keys (%s); "
                  "retries of its recent publishes are not recognised",
                  rp->t->name, rp->p, pulse_status_message(st));
}

/* The partitions of every topic in the map, in order; NULL out of memory. */
static struct rebuild_part *list_parts(const struct pulse_local *b, size_t *n_out)
{
    struct rebuild_part *parts;
    size_t n = 0, k = 0;

    for (size_t i = 0; i < b->ntopics; i++)
        n += b->topics[i]->nparts;
    parts = pulse_calloc(n > 0 ? n : 1, sizeof *parts);
    if (parts == NULL)
        return NULL;
    for (size_t i = 0; i < b->ntopics; i++)
        for (uint32_t p = 0; p < b->topics[i]->nparts; p++)
            parts[k++] = (struct rebuild_part){.t = b->topics[i], .p = p, .st = PULSE_OK};
    *n_out = n;
    return parts;
}

pulse_status_t pulse_broker_idem_rebuild(struct pulse_local *b, struct pulse_syncpool *pool)
{
    return pulse_broker_idem_rebuild_within(b, pool, REBUILD_HELD, NULL);
}

pulse_status_t pulse_broker_idem_rebuild_within(struct pulse_local *b, struct pulse_syncpool *pool, size_t budget,
                                                struct pulse_idem_rebuild_stats *stats)
{
    struct rebuild_job job = {.w = b->idem_window,
                              .cutoff = pulse_clock_wall_ms() - b->idem_window->window_ms,
                              .budget = budget};
    int64_t t0 = pulse_clock_mono_us();
    size_t n = 0;

    atomic_init(&job.held, 0);
    atomic_init(&job.again, 0);
    job.parts = list_parts(b, &n);
    if (job.parts == NULL) {
        /* Out of memory for the list: each partition read in its turn. */
        for (size_t i = 0; i < b->ntopics; i++) {
            for (uint32_t p = 0; p < b->topics[i]->nparts; p++) {
                struct rebuild_part rp = {.t = b->topics[i], .p = p, .st = PULSE_OK};
                remember_part(&job, &rp);
            }
        }
    } else {
        /* Without a pool every partition is read in its turn, held nowhere. */
        if (pool != NULL)
            pulse_syncpool_run(pool, n, read_item, &job);
        for (size_t i = 0; i < n; i++) {
            remember_part(&job, &job.parts[i]);
            part_drop(&job, &job.parts[i]);
        }
        pulse_free(job.parts);
    }
    pulse_log(PULSE_LOG_INFO,
              "idempotency window rebuilt: %zu keys in %" PRId64 " ms (%zu partitions read twice to stay within "
              "memory)",
              b->idem_window->count, (pulse_clock_mono_us() - t0) / 1000, atomic_load(&job.again));
    if (stats != NULL) {
        stats->read_again = atomic_load(&job.again);
        stats->held_after = atomic_load(&job.held);
    }
    return PULSE_OK;
}
