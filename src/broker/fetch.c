/* SPDX-License-Identifier: MIT */
/*
 * fetch.c - fetch in the local backend: records read from a partition log
 * and handed out as plain records (broker.h "fetch"), raw slices of the
 * segment files, and the fetch metrics.
 *
 * A struct pulse_fetch of this backend holds chunks: each read appends one,
 * the CRC-verified batches pulse_plog_read copied out of the log (never a
 * byte that failed its CRC), tagged with the offset the read asked for.
 * Chunks never move once read, so a record handed out stays valid until
 * the fetch is destroyed, however many reads follow; the walk goes batch by
 * batch through the chunks in order and skips the records of a chunk's
 * first batch that lie below that chunk's offset (a read starts at the
 * batch holding the offset). The fetch holds no reference on the topic:
 * each read takes one for its own length only, so a long answer streaming
 * to a slow client never delays a delete.
 *
 * The walk decodes batches with the codec's iterator (storage/batch.h,
 * pulse_batch_iter) over verified bytes. A compressed batch is inflated
 * once, by the read's verification, which keeps the plain records of each
 * one in the chunk (pulse_plog_read_plain) for every later walk, rewinds
 * included. (The one batch walker over a
 * buffer that storage's segscan is becoming should replace batch_at once it
 * offers one; the codec's checks are the same either way.)
 *
 * Thread: a fetch is used by one thread at a time; reads take the topic
 * map's lock and the log's locks briefly (plog.h).
 */
#include <string.h>
#include <unistd.h>

#include "broker/broker_int.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/endian.h"
#include "common/failpoint.h"
#include "storage/batch.h"
#include "storage/plog.h"

/* What one read took: whole verified batches. */
struct chunk {
    struct chunk *next;
    int64_t start; /* the offset the read asked for (raised to the log start) */
    struct pulse_buf buf;
    struct pulse_buf plain; /* the plain records of buf's compressed batches, in order */
};

struct local_fetch {
    struct pulse_fetch base; /* first: base.ops == &pulse_local_ops */
    char topic[PULSE_NAME_MAX + 1];
    uint32_t partition;
    struct chunk *head;
    struct chunk **tail;
    /* the walk */
    struct chunk *at; /* the chunk walked; NULL before the first */
    size_t bpos;      /* the next batch in it */
    size_t ppos;      /* the plain records of its next compressed batch */
    struct pulse_batch_iter it;
    bool in_batch;
};

static struct local_fetch *fetch_of(struct pulse_fetch *f)
{
    return (struct local_fetch *)f;
}

/* The broker's view of a slice. */
static void pos_of(const struct pulse_slice *s, struct pulse_fetch_pos *pos)
{
    pos->start_offset = s->start_offset;
    pos->next_offset = s->next_offset;
    pos->log_start = s->log_start;
    pos->high_watermark = s->high_watermark;
    pos->skip_from = s->skip_from;
    pos->skip_to = s->skip_to;
    pos->skip_reason = s->skip_damaged ? PULSE_SKIP_CORRUPT : PULSE_SKIP_MISSING;
    pos->bytes = s->len;
}

/* The partition's log, with a reference on its topic (release *tp). */
static pulse_status_t find_log(struct pulse_local *b, const char *topic, uint32_t partition,
                               struct pulse_broker_topic **tp, struct pulse_plog **out)
{
    struct pulse_broker_topic *t = pulse_broker_topic_acquire(b, topic);

    *tp = t;
    if (t == NULL)
        return PULSE_TOPIC_NOT_FOUND;
    if (partition >= t->nparts)
        return PULSE_PARTITION_NOT_FOUND;
    *out = t->plogs[partition];
    return PULSE_OK;
}

/* ---- records ------------------------------------------------------------ */

pulse_status_t pulse_local_fetch_create(struct pulse_broker *base, const char *topic, uint32_t partition,
                                        struct pulse_fetch **out)
{
    (void)base;
    if (!pulse_broker_cname_valid(topic))
        return PULSE_TOPIC_NOT_FOUND;
    struct local_fetch *f = pulse_calloc(1, sizeof *f);
    if (f == NULL)
        return PULSE_NOMEM;
    f->base.ops = &pulse_local_ops;
    memcpy(f->topic, topic, strlen(topic) + 1);
    f->partition = partition;
    f->tail = &f->head;
    *out = &f->base;
    return PULSE_OK;
}

void pulse_local_fetch_destroy(struct pulse_fetch *fp)
{
    struct local_fetch *f = fetch_of(fp);
    struct chunk *c = f->head;

    while (c != NULL) {
        struct chunk *next = c->next;
        pulse_buf_fini(&c->buf);
        pulse_buf_fini(&c->plain);
        pulse_free(c);
        c = next;
    }
    pulse_free(f);
}

/*
 * Reads at offset into a new chunk whose buffer may hold max_bytes. When
 * the first batch is larger, its size comes from the index (a slice that
 * reads no bytes) and goes to *need, so the caller can allow that much and
 * read again.
 */
pulse_status_t pulse_local_fetch_read(struct pulse_broker *base, struct pulse_fetch *fp, int64_t offset,
                                      uint64_t max_bytes, struct pulse_fetch_pos *pos, uint64_t *need)
{
    struct pulse_local *b = pulse_local_of(base);
    struct local_fetch *f = fetch_of(fp);
    struct pulse_broker_topic *t = NULL;
    struct pulse_plog *plog = NULL;
    struct chunk *c = NULL;
    struct pulse_slice s;

    memset(pos, 0, sizeof *pos);
    memset(&s, 0, sizeof s);
    s.fd = -1;
    /* A test slows the reads after a fetch's first (an answer read in
     * several parts), so that retention can overtake the answer. */
    if (f->head != NULL)
        pulse_failpoint_delay("fetch_read_more");
    pulse_status_t st = find_log(b, f->topic, f->partition, &t, &plog);
    if (st != PULSE_OK)
        goto out;
    c = pulse_calloc(1, sizeof *c);
    if (c == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    pulse_buf_init(&c->buf, max_bytes < SIZE_MAX ? (size_t)max_bytes : SIZE_MAX);
    /* One batch's plain records always fit (the codec's own bound); the read
     * ends a chunk before a batch that would take plain past it, so a chunk
     * of highly compressed batches holds no more than one batch could. */
    pulse_buf_init(&c->plain, PULSE_BATCH_INFLATED_MAX);
    st = pulse_plog_read_plain(plog, offset, max_bytes, &c->buf, &c->plain, &s);
    if (st == PULSE_TOO_LARGE) {
        struct pulse_slice one;
        memset(&one, 0, sizeof one);
        one.fd = -1;
        pulse_status_t sst = pulse_plog_slice(plog, offset, 1, false, &one);
        if (sst != PULSE_OK) {
            st = sst;
            s = one;
        } else if (need != NULL) {
            /* (one.len <= max_bytes: the segment changed under the read;
             * asking for a byte more makes the caller try again.) */
            *need = one.len > max_bytes ? one.len : max_bytes + 1;
        }
    }
    pos_of(&s, pos);
    pos->bytes = 0;
    if (st != PULSE_OK || c->buf.len == 0)
        goto out;
    c->start = s.start_offset;
    pos->bytes = c->buf.len;
    pos->plain_bytes = c->plain.len;
    *f->tail = c;
    f->tail = &c->next;
    c = NULL;
out:
    if (c != NULL) {
        pulse_buf_fini(&c->buf);
        pulse_buf_fini(&c->plain);
        pulse_free(c);
    }
    pulse_broker_topic_release(b, t);
    return st;
}

/* Opens the next batch of chunk c (at *pos, its compressed records at
 * *ppos of c->plain) and moves both past it; false at the end of the
 * batches. (They were verified when read, and plain holds what they
 * inflated to, so a batch that does not open cannot happen; it would end
 * the walk.) */
static bool batch_at(const struct chunk *c, size_t *pos, size_t *ppos, struct pulse_batch_iter *it)
{
    const uint8_t *raw = c->buf.data;
    size_t len = c->buf.len;
    struct pulse_batch_header hdr;
    if (*pos >= len || pulse_batch_parse_header(raw + *pos, len - *pos, &hdr) != PULSE_OK)
        return false;
    size_t total = pulse_batch_total_size(&hdr);
    size_t plain = 0;
    if (pulse_batch_codec(&hdr) != PULSE_BATCH_CODEC_NONE)
        plain = pulse_get_be32(raw + *pos + PULSE_BATCH_HEADER_SIZE);
    if (total > len - *pos || plain > c->plain.len - *ppos ||
        pulse_batch_iter_open_plain(it, raw + *pos, total, c->plain.data != NULL ? c->plain.data + *ppos : NULL,
                                    plain) != PULSE_OK)
        return false;
    *pos += total;
    *ppos += plain;
    return true;
}

pulse_status_t pulse_local_fetch_next(struct pulse_fetch *fp, struct pulse_record *rec)
{
    struct local_fetch *f = fetch_of(fp);
    struct pulse_record_view rv;

    for (;;) {
        if (f->in_batch) {
            while (pulse_batch_iter_next(&f->it, &rv) == PULSE_OK) {
                if (rv.offset >= f->at->start) {
                    pulse_batch_record_plain(&rv, rec);
                    return PULSE_OK;
                }
            }
            f->in_batch = false;
        }
        if (f->at == NULL) {
            if (f->head == NULL)
                return PULSE_EOF;
            f->at = f->head;
            f->bpos = 0;
            f->ppos = 0;
        }
        if (batch_at(f->at, &f->bpos, &f->ppos, &f->it)) {
            f->in_batch = true;
            continue;
        }
        /* The end of this chunk: on to the next, or stay here until a read
         * appends one. */
        if (f->at->next == NULL)
            return PULSE_EOF;
        f->at = f->at->next;
        f->bpos = 0;
        f->ppos = 0;
    }
}

void pulse_local_fetch_rewind(struct pulse_fetch *fp)
{
    struct local_fetch *f = fetch_of(fp);

    f->at = NULL;
    f->bpos = 0;
    f->ppos = 0;
    f->in_batch = false;
}

/* ---- positions and raw slices ------------------------------------------- */

pulse_status_t pulse_local_fetch_probe(struct pulse_broker *base, const char *topic, uint32_t partition, int64_t offset,
                                       struct pulse_fetch_pos *pos)
{
    struct pulse_local *b = pulse_local_of(base);
    struct pulse_broker_topic *t = NULL;
    struct pulse_plog *plog = NULL;
    struct pulse_slice s;

    memset(&s, 0, sizeof s);
    s.fd = -1;
    pulse_status_t st = find_log(b, topic, partition, &t, &plog);
    if (st == PULSE_OK)
        st = pulse_plog_slice(plog, offset, 1, false, &s);
    pulse_broker_topic_release(b, t);
    pos_of(&s, pos);
    return st;
}

pulse_status_t pulse_local_offset_for_time(struct pulse_broker *base, const char *topic, uint32_t partition,
                                           int64_t ts_ms, int64_t *offset_out)
{
    struct pulse_local *b = pulse_local_of(base);
    struct pulse_broker_topic *t = NULL;
    struct pulse_plog *plog = NULL;

    pulse_status_t st = find_log(b, topic, partition, &t, &plog);
    if (st == PULSE_OK)
        st = pulse_plog_offset_for_time(plog, ts_ms, offset_out);
    pulse_broker_topic_release(b, t);
    return st;
}

pulse_status_t pulse_local_fetch_raw(struct pulse_broker *base, const char *topic, uint32_t partition, int64_t offset,
                                     uint64_t max_bytes, struct pulse_raw_slice *out)
{
    struct pulse_local *b = pulse_local_of(base);
    struct pulse_broker_topic *t = NULL;
    struct pulse_plog *plog = NULL;
    struct pulse_slice s;

    memset(&s, 0, sizeof s);
    s.fd = -1;
    pulse_status_t st = find_log(b, topic, partition, &t, &plog);
    if (st == PULSE_OK)
        st = pulse_plog_slice(plog, offset, max_bytes, true, &s);
    pulse_broker_topic_release(b, t);
    /* A descriptor only with bytes to send. */
    if ((st != PULSE_OK || s.len == 0) && s.fd >= 0) {
        close(s.fd);
        s.fd = -1;
    }
    if (st != PULSE_OK)
        s.len = 0;
    out->fd = s.fd;
    out->pos = s.pos;
    pos_of(&s, &out->at);
    return st;
}

void pulse_local_note_fetched(struct pulse_broker *base, const char *topic, uint64_t records, uint64_t bytes)
{
    struct pulse_local *b = pulse_local_of(base);
    struct pulse_broker_topic *t = pulse_broker_topic_acquire(b, topic);

    if (t == NULL)
        return;
    atomic_fetch_add(&t->fetched_records, records);
    atomic_fetch_add(&t->fetched_bytes, bytes);
    pulse_broker_topic_release(b, t);
}
