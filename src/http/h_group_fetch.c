/* SPDX-License-Identifier: MIT */
/*
 * h_group_fetch.c - GET /v1/groups/{group}/members/{member}/records: the
 * records of any of the member's partitions, in one answer.
 *
 * 1. The broker's group poll (pulse_broker_group_poll_async) renews the
 *    member's lease, completes its hand-over and says where to read each
 *    partition it owns: where the answer the member gives back in
 *    ?resume= left off (only for partitions it has owned since), else the
 *    group's committed cursor, else the log start (or end, pinned as the
 *    group's cursor). The broker keeps no read position: an answer lost on
 *    the wire is read again by the next fetch, never skipped.
 * 2. When nothing is at hand at any of them and max_wait_ms > 0, the
 *    connection is suspended on the member's group wait
 *    (pulse_broker_group_wait: ONE broker waiter over every position, that
 *    is pulse_broker_wait_any, plus an entry on the group), which ends when
 *    any of them gets data, when the group changes for the member (a
 *    rebalance: it learns its new partitions at once rather than at the end
 *    of its wait), or when the wait is over; then the answer is made as
 *    below. A member without partitions waits the same way.
 * 3. The answer reads the partitions in turn, starting at a different one
 *    each time so that a busy partition cannot starve the others, until
 *    max_records or max_bytes (of record text, after the first record).
 *    Each record carries its topic and partition. The broker checks that
 *    the member still owns what was read (pulse_broker_group_fetched_async); if
 *    it lost a partition or its generation changed meanwhile, the records
 *    are not handed out: the answer is the member's new view with no
 *    records. Offsets a read stepped over (damaged or missing data, or
 *    records retention removed at the position) are listed in "skipped";
 *    a trim that overtakes the answer between two reads of a partition
 *    ends that partition's part of the answer in front of it.
 *
 * Answer: the member's view (group, member_id, generation, lease_ms,
 * partitions, pending_partitions), "records" and "positions": per
 * partition read, the offset after the last record answered, which is what
 * the member commits once it has processed them (the commit body is
 * {"generation": G, "offsets": positions}), and "resume": where the answer
 * leaves off on every partition, as text to send back in ?resume= (the
 * generation, then topic:partition:offset for each partition:
 * "7,orders:0:120,orders:1:98").
 *
 * Memory: the records read (reserved from the memory budget before each
 * read, at most max_bytes together but the first unit) and the answer's
 * text (charged before it is handed to MHD).
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "http/http_int.h"
#include "http/json.h"
#include "http/skips.h"

#define GFETCH_MAX_RECORDS 10000
#define GFETCH_MAX_BYTES (64ll * 1024 * 1024)
#define GFETCH_MAX_WAIT_MS 30000
/* First read of a partition; later reads of it grow fourfold. */
#define GFETCH_FIRST_CHUNK (64u * 1024)
/* Most partitions a ?resume= may name (as many as one wait may watch). */
#define GFETCH_MAX_RESUME PULSE_WAIT_MAX_POSITIONS
/* Most skipped ranges one answer lists; a read that would add one more
 * ends the answer in front of it, and the next answer lists it. */
#define GFETCH_MAX_SKIPPED 64

/* r->hstate of a group fetch. */
struct gfetch_state {
    char member[PULSE_GROUP_MEMBER_ID_MAX + 1];
    int64_t max_records;
    int64_t max_bytes;
    int64_t wait_ms;
    struct pulse_group_view view; /* from the poll, with positions */
    struct pulse_buf recs;        /* the records' text */
    struct pulse_buf tmp;         /* one record's text */
    struct pulse_buf skipped;     /* the "skipped" entries' text */
    size_t nskipped;
    struct pulse_group_partition *next; /* per partition of the view: where the answer left off */
    uint64_t nrecords;
    int64_t read_bytes;             /* of stored records, for max_bytes */
    uint64_t reserved;              /* taken from the memory budget for reads */
    struct pulse_group_resume from; /* ?resume=, pos in the request's pool */
    bool has_from;
    char errbuf[256];
    struct pulse_group_view fresh;                /* the heartbeat of reply_fresh_view */
    const struct pulse_group_partition *fresh_at; /* its resume positions */
};

static void dispose(void *hstate)
{
    struct gfetch_state *q = hstate;
    pulse_group_view_fini(&q->view);
    pulse_group_view_fini(&q->fresh);
    pulse_buf_fini(&q->recs);
    pulse_buf_fini(&q->tmp);
    pulse_buf_fini(&q->skipped);
    pulse_free(q->next);
    q->next = NULL;
}

/* ---- reading --------------------------------------------------------------- */

/* Appends {"topic":..,"partition":..,<the record's members>} to q->recs;
 * false when the text limit is reached (the record is left out). */
static bool add_record(struct gfetch_state *q, const char *topic, uint32_t partition, const struct pulse_record *rec)
{
    char head[PULSE_NAME_MAX + 64];
    pulse_buf_reset(&q->tmp);
    if (pulse_record_json_append(&q->tmp, rec) != PULSE_OK || q->tmp.len < 2)
        return false;
    int hn = snprintf(head, sizeof head, "%s{\"topic\":\"%s\",\"partition\":%u,", q->nrecords > 0 ? "," : "", topic,
                      partition);
    size_t need = (size_t)hn + q->tmp.len - 1;
    if (q->nrecords > 0 && q->recs.len + need > (uint64_t)q->max_bytes)
        return false;
    if (pulse_buf_append(&q->recs, head, (size_t)hn) != PULSE_OK ||
        pulse_buf_append(&q->recs, q->tmp.data + 1, q->tmp.len - 1) != PULSE_OK)
        return false;
    q->nrecords++;
    return true;
}

/* Lets the answer's reads hold n more bytes than they hold now, taking
 * from the memory budget what earlier reservations do not cover. */
static bool reserve(struct pulse_hreq *r, struct gfetch_state *q, uint64_t n)
{
    uint64_t total = (uint64_t)q->read_bytes + n;
    if (total <= q->reserved)
        return true;
    if (!pulse_server_mem_take(r, total - q->reserved))
        return false;
    q->reserved = total;
    return true;
}

/* One read of at most want bytes at offset into f (the first unit whole
 * when it is larger and the answer has no record yet: a reader always
 * makes progress). */
static pulse_status_t read_chunk(struct pulse_hreq *r, struct gfetch_state *q, struct pulse_fetch *f, int64_t offset,
                                 uint64_t want, struct pulse_fetch_pos *pos)
{
    uint64_t need = 0;
    if (!reserve(r, q, want))
        return PULSE_BUSY;
    pulse_status_t st = pulse_broker_fetch_read(r->srv->broker, f, offset, want, pos, &need);
    if (st == PULSE_TOO_LARGE && q->nrecords == 0 && reserve(r, q, need))
        st = pulse_broker_fetch_read(r->srv->broker, f, offset, need, pos, &need);
    if (st == PULSE_OK)
        q->read_bytes += (int64_t)pos->bytes;
    return st;
}

/* Lists the offsets of partition `at` a read stepped over before its first
 * record: below the log start when the position was (retention removed
 * them), then a damaged or missing range. false when the list is full or
 * out of memory: the read is then not used, and the answer ends in front
 * of it. */
static bool note_skips(struct gfetch_state *q, const struct pulse_group_partition *at,
                       const struct pulse_fetch_pos *pos)
{
    struct pulse_skips k = {0};
    pulse_skips_add(&k, pos);
    pulse_skips_clip(&k, pos->next_offset);
    bool trimmed = pos->start_offset > at->offset;
    size_t add = k.n + (trimmed ? 1 : 0);
    if (add == 0)
        return true;
    if (q->nskipped + add > GFETCH_MAX_SKIPPED)
        return false;
    size_t mark = q->skipped.len;
    pulse_status_t st = PULSE_OK;
    for (size_t j = 0; st == PULSE_OK && j < add; j++) {
        bool ret = trimmed && j == 0;
        size_t r = j - (trimmed ? 1 : 0);
        st = pulse_buf_printf(
            &q->skipped, "%s{\"topic\":\"%s\",\"partition\":%u,\"from\":%lld,\"to\":%lld,\"reason\":\"%s\"}",
            q->nskipped + j > 0 ? "," : "", at->topic, at->partition, (long long)(ret ? at->offset : k.r[r].from),
            (long long)(ret ? pos->start_offset : k.r[r].to), ret ? "retention" : pulse_skips_reason(&k, r));
    }
    if (st != PULSE_OK) {
        q->skipped.len = mark;
        return false;
    }
    q->nskipped += add;
    return true;
}

/* Reads partition i of the view into the answer from its position, in
 * growing chunks (an answer usually stops at max_records long before
 * max_bytes of stored records, and every byte read is CRC-checked).
 * false once the answer is full (stop reading). */
static bool read_partition(struct pulse_hreq *r, struct gfetch_state *q, size_t i)
{
    struct pulse_group_partition *at = &q->next[i];
    struct pulse_fetch *f = NULL;
    uint64_t chunk = GFETCH_FIRST_CHUNK;
    uint64_t before = q->nrecords, bytes = 0;
    bool full = false;
    if (q->read_bytes >= q->max_bytes && q->nrecords > 0)
        return false;
    if (pulse_broker_fetch_create(r->srv->broker, at->topic, at->partition, &f) != PULSE_OK)
        return true;
    for (;;) {
        struct pulse_fetch_pos pos;
        struct pulse_record rec;
        uint64_t left = q->read_bytes < q->max_bytes ? (uint64_t)(q->max_bytes - q->read_bytes) : 0;
        if (left == 0 && q->nrecords > 0)
            break;
        memset(&pos, 0, sizeof pos);
        if (read_chunk(r, q, f, at->offset, left == 0 ? 1 : (chunk < left ? chunk : left), &pos) != PULSE_OK)
            break;
        /* Retention trimmed the log past this partition's position since
         * the answer's last read of it: the answer ends in front of the
         * trim (the next one lists it), rather than stepping over it. */
        if (pos.start_offset > at->offset && bytes > 0)
            break;
        if (!note_skips(q, at, &pos))
            break;
        bytes += pos.bytes;
        int64_t next = pos.start_offset;
        bool all = true;
        while (pulse_broker_fetch_next(f, &rec) == PULSE_OK) {
            if (q->nrecords >= (uint64_t)q->max_records || !add_record(q, at->topic, at->partition, &rec)) {
                all = false;
                break;
            }
            next = rec.offset + 1;
        }
        /* Everything read was answered: go on after it (compacted or
         * skipped offsets included). */
        at->offset = all ? pos.next_offset : next;
        full = !all || q->nrecords >= (uint64_t)q->max_records;
        if (full || pos.bytes == 0 || at->offset >= pos.high_watermark)
            break;
        chunk *= 4;
    }
    if (q->nrecords > before)
        pulse_broker_note_fetched(r->srv->broker, at->topic, q->nrecords - before, bytes);
    pulse_server_limit_charge(r, bytes);
    pulse_broker_fetch_destroy(f);
    return !full;
}

/* ,"positions":[...] of the partitions the answer moved, into out. */
static pulse_status_t positions_text(const struct gfetch_state *q, struct pulse_buf *out, size_t *nmoved)
{
    pulse_status_t st = pulse_buf_printf(out, ",\"positions\":[");
    size_t k = 0;
    for (size_t i = 0; st == PULSE_OK && i < q->view.nparts; i++) {
        if (q->next[i].offset == q->view.parts[i].offset)
            continue;
        st = pulse_buf_printf(out, "%s{\"topic\":\"%s\",\"partition\":%u,\"offset\":%lld}", k > 0 ? "," : "",
                              q->next[i].topic, q->next[i].partition, (long long)q->next[i].offset);
        k++;
    }
    if (st == PULSE_OK)
        st = pulse_buf_printf(out, "]");
    *nmoved = k;
    return st;
}

/* ,"resume":"G,topic:P:OFF,..."} for n partitions at pos (names are of
 * [A-Za-z0-9._-]: nothing to escape), closing the answer's object. */
static pulse_status_t resume_text(uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                  struct pulse_buf *out)
{
    pulse_status_t st = pulse_buf_printf(out, ",\"resume\":\"%llu", (unsigned long long)generation);
    for (size_t i = 0; st == PULSE_OK && i < n; i++)
        st = pulse_buf_printf(out, ",%s:%u:%lld", pos[i].topic, pos[i].partition, (long long)pos[i].offset);
    if (st == PULSE_OK)
        st = pulse_buf_printf(out, "\"}");
    return st;
}

/* The member's view (as JSON text without its closing brace) followed by
 * records and positions. */
static void reply_records(struct pulse_hreq *r, struct gfetch_state *q, const struct pulse_buf *positions)
{
    json_t *doc = pulse_h_groups_view(r->consumer, &q->view);
    char *head = NULL;
    size_t hlen = 0;
    struct pulse_buf body;
    pulse_buf_init(&body, SIZE_MAX);
    if (doc == NULL || pulse_json_dump(doc, 0, &head, &hlen) != PULSE_OK || hlen < 2) {
        json_decref(doc);
        pulse_free(head);
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    json_decref(doc);
    pulse_status_t st = pulse_buf_append(&body, head, hlen - 1); /* without its '}' */
    pulse_free(head);
    if (st == PULSE_OK)
        st = pulse_buf_printf(&body, ",\"records\":[");
    if (st == PULSE_OK && q->recs.len > 0)
        st = pulse_buf_append(&body, q->recs.data, q->recs.len);
    if (st == PULSE_OK)
        st = pulse_buf_append(&body, "]", 1);
    if (st == PULSE_OK && q->nskipped > 0 && (st = pulse_buf_printf(&body, ",\"skipped\":[")) == PULSE_OK &&
        (st = pulse_buf_append(&body, q->skipped.data, q->skipped.len)) == PULSE_OK)
        st = pulse_buf_append(&body, "]", 1);
    if (st == PULSE_OK)
        st = pulse_buf_append(&body, positions->data, positions->len);
    if (st == PULSE_OK)
        st = pulse_buf_append(&body, "\n", 1); /* as every JSON answer */
    if (st != PULSE_OK || !pulse_server_mem_take(r, body.len)) {
        pulse_buf_fini(&body);
        pulse_server_reply_over_budget(r);
        return;
    }
    size_t len = 0;
    uint8_t *text = pulse_buf_steal(&body, &len);
    r->bytes_out = (int64_t)len;
    /* gzip'ed when accepted and large enough, as every JSON answer; it
     * takes text, even on failure. */
    struct MHD_Response *resp = pulse_server_json_response(r, (char *)text, len);
    if (resp == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_server_reply(r, 200, resp, PULSE_MEDIA_JSON);
}

/* No records to hand out (none read, or the member's generation changed or
 * it lost a partition while the answer was read): its new view instead,
 * with resume at `at` (where the answer started, when what was read is not
 * handed out; else where the reads left off). */
static void fresh_resume(struct pulse_hreq *r)
{
    struct gfetch_state *q = r->hstate;
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st != PULSE_OK) {
        pulse_h_groups_reply_error(r, st, NULL);
        return;
    }
    struct pulse_buf none;
    pulse_buf_init(&none, SIZE_MAX);
    st = pulse_buf_printf(&none, ",\"positions\":[]");
    if (st == PULSE_OK)
        st = resume_text(q->view.generation, q->fresh_at, q->view.nparts, &none);
    pulse_group_view_fini(&q->view);
    q->view = q->fresh;
    memset(&q->fresh, 0, sizeof q->fresh);
    pulse_buf_reset(&q->recs);
    if (st != PULSE_OK) {
        pulse_buf_fini(&none);
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    reply_records(r, q, &none);
    pulse_buf_fini(&none);
}

static void reply_fresh_view(struct pulse_hreq *r, struct gfetch_state *q, const struct pulse_group_partition *at)
{
    q->fresh_at = at;
    pulse_server_call_begin(r, fresh_resume);
    pulse_status_t st = pulse_broker_group_heartbeat_async(r->srv->broker, r->consumer, q->member, &q->fresh,
                                                           pulse_server_call_done, r);
    pulse_server_call_end(r, st, st == PULSE_OK);
}

static void fetched_resume(struct pulse_hreq *r)
{
    struct gfetch_state *q = r->hstate;
    size_t n = q->view.nparts;
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    /* No records (a wait that ended at its deadline or because the group
     * changed): the view of a fresh call, so that the member learns a
     * rebalance now rather than at its next call. */
    if (st == PULSE_GROUP_FENCED || (st == PULSE_OK && q->nrecords == 0)) {
        if (st != PULSE_OK) { /* nothing read is handed out: nothing was stepped over */
            pulse_buf_reset(&q->skipped);
            q->nskipped = 0;
        }
        reply_fresh_view(r, q, st == PULSE_OK ? q->next : q->view.parts);
        return;
    }
    if (st != PULSE_OK) {
        pulse_h_groups_reply_error(r, st, NULL);
        return;
    }
    struct pulse_buf positions;
    pulse_buf_init(&positions, SIZE_MAX);
    size_t nmoved = 0;
    if (positions_text(q, &positions, &nmoved) != PULSE_OK ||
        resume_text(q->view.generation, q->next, n, &positions) != PULSE_OK)
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
    else
        reply_records(r, q, &positions);
    pulse_buf_fini(&positions);
}

static void answer(struct pulse_hreq *r)
{
    static atomic_uint rotor;
    struct gfetch_state *q = r->hstate;
    size_t n = q->view.nparts;
    size_t first = n > 0 ? atomic_fetch_add(&rotor, 1) % n : 0;
    for (size_t k = 0; k < n; k++)
        if (!read_partition(r, q, (first + k) % n))
            break;
    /* The broker checks the member still owns what was read. Not for
     * HEAD: it hands out no record (the call still renews the lease and
     * checks the generation). */
    bool head = r->method == PULSE_METHOD_HEAD;
    pulse_server_call_begin(r, fetched_resume);
    pulse_status_t st = pulse_broker_group_fetched_async(r->srv->broker, r->consumer, q->member, q->view.generation,
                                                         q->next, head ? 0 : n, pulse_server_call_done, r);
    pulse_server_call_end(r, st, st == PULSE_OK);
}

/* ---- waiting ---------------------------------------------------------------- */

static void wait_resume(struct pulse_hreq *r)
{
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st == PULSE_REJOIN) {
        pulse_h_groups_reply_error(r, st, NULL);
        return;
    }
    /* OK (data, a change of the group, the deadline), SHUTDOWN (draining),
     * TOPIC_NOT_FOUND (one of the topics was deleted): answer with what is
     * there; a change shows as a new view with no records. */
    answer(r);
}

static void on_wake(void *arg, pulse_status_t st)
{
    pulse_server_wake(arg, st);
}

/* Positions to wait on (where each partition's next read starts); false
 * when some partition has records now. */
static bool probe_all(struct pulse_hreq *r, struct gfetch_state *q, struct pulse_group_partition *wp, size_t *n_out)
{
    size_t n = 0;
    for (size_t i = 0; i < q->view.nparts; i++) {
        struct pulse_fetch_pos s;
        memset(&s, 0, sizeof s);
        pulse_status_t st = pulse_broker_fetch_probe(r->srv->broker, q->next[i].topic, q->next[i].partition,
                                                     q->next[i].offset, &s);
        if (st != PULSE_OK)
            continue; /* a deleted topic, a position above the end: nothing to wait for there */
        if (s.bytes > 0)
            return false;
        wp[n] = q->next[i];
        wp[n].offset = s.start_offset;
        n++;
    }
    *n_out = n;
    return true;
}

/* Answers now, or parks the member's wait (broker.h pulse_broker_group_wait:
 * one waiter over every position, woken early by a change of the group)
 * when nothing is at hand and the request may wait. */
static void start(struct pulse_hreq *r)
{
    struct gfetch_state *q = r->hstate;
    size_t n = q->view.nparts;
    q->next = pulse_calloc(n > 0 ? n : 1, sizeof *q->next);
    if (q->next == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    memcpy(q->next, q->view.parts, n * sizeof *q->next);
    if (q->wait_ms == 0 || atomic_load(&r->srv->stopping)) {
        answer(r);
        return;
    }
    struct pulse_group_partition *wp = pulse_server_palloc(r, (n > 0 ? n : 1) * sizeof *wp);
    size_t nw = 0;
    if (wp == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    if (!probe_all(r, q, wp, &nw)) {
        answer(r);
        return;
    }
    int64_t deadline = pulse_clock_mono_us() + q->wait_ms * 1000;
    /* Suspend first: the wait may end before group_wait returns. */
    pulse_server_suspend(r, wait_resume);
    bool parked = false;
    pulse_status_t st = pulse_broker_group_wait(r->srv->broker, r->consumer, q->member, q->view.generation, wp, nw,
                                                deadline, on_wake, r, &parked);
    if (st != PULSE_OK || !parked)
        pulse_server_wake(r, st);
}

/* ---- the request ------------------------------------------------------------- */

static void poll_resume(struct pulse_hreq *r)
{
    struct gfetch_state *q = r->hstate;
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st != PULSE_OK) {
        pulse_h_groups_reply_error(r, st, q->errbuf);
        return;
    }
    start(r);
}

static int resume_cmp(const void *a, const void *b)
{
    const struct pulse_group_partition *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    return c != 0 ? c : x->partition < y->partition ? -1 : x->partition > y->partition ? 1 : 0;
}

/* Reads a decimal number of s up to a byte in stops (or the end) into
 * *out, moving *s past it; false for anything else or above max. */
static bool read_number(const char **s, const char *stops, uint64_t max, uint64_t *out)
{
    const char *p = *s;
    uint64_t v = 0;
    if (*p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (max - (uint64_t)(*p - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (*p != '\0' && strchr(stops, *p) == NULL)
        return false;
    *out = v;
    *s = p;
    return true;
}

/* One "topic:P:OFF" of a resume at *s into e, moving *s past it. */
static bool read_resume_entry(const char **s, struct pulse_group_partition *e)
{
    const char *colon = strchr(*s, ':');
    uint64_t part = 0, off = 0;
    if (colon == NULL || colon == *s || (size_t)(colon - *s) > PULSE_NAME_MAX || memchr(*s, ',', colon - *s))
        return false;
    memcpy(e->topic, *s, (size_t)(colon - *s));
    e->topic[colon - *s] = '\0';
    const char *p = colon + 1;
    if (!read_number(&p, ":", UINT32_MAX, &part) || *p != ':')
        return false;
    p++;
    if (!read_number(&p, ",", INT64_MAX, &off))
        return false;
    e->partition = (uint32_t)part;
    e->offset = (int64_t)off;
    *s = p;
    return true;
}

/* ?resume= (the "resume" of an earlier answer) into q->from; answers 400
 * and returns false when it is not that. */
static bool parse_resume(struct pulse_hreq *r, struct gfetch_state *q)
{
    const char *s = pulse_server_query(r, "resume");
    uint64_t gen = 0;
    size_t n = 0;
    if (s == NULL)
        return true;
    for (const char *c = s; *c != '\0' && n <= GFETCH_MAX_RESUME; c++)
        n += *c == ',';
    bool ok = n <= GFETCH_MAX_RESUME;
    struct pulse_group_partition *pos = ok ? pulse_server_palloc(r, (n > 0 ? n : 1) * sizeof *pos) : NULL;
    if (ok && pos == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return false;
    }
    ok = ok && read_number(&s, ",", UINT64_MAX, &gen);
    for (size_t i = 0; ok && i < n; i++) {
        s++; /* the comma */
        ok = read_resume_entry(&s, &pos[i]);
    }
    if (ok) {
        qsort(pos, n, sizeof *pos, resume_cmp);
        for (size_t i = 1; ok && i < n; i++)
            ok = resume_cmp(&pos[i - 1], &pos[i]) != 0;
    }
    if (!ok) {
        pulse_server_reply_error(r, 400, "invalid_request",
                                 "resume must be the \"resume\" of an earlier answer: GENERATION followed by at most "
                                 "%d entries ,TOPIC:PARTITION:OFFSET, each partition once",
                                 GFETCH_MAX_RESUME);
        return false;
    }
    q->from = (struct pulse_group_resume){.generation = gen, .pos = pos, .n = n};
    q->has_from = true;
    return true;
}

void pulse_h_group_fetch(struct pulse_hreq *r)
{
    struct gfetch_state *q = pulse_server_hstate(r, sizeof *q, dispose);
    if (q == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_buf_init(&q->recs, SIZE_MAX);
    pulse_buf_init(&q->tmp, SIZE_MAX);
    pulse_buf_init(&q->skipped, SIZE_MAX);
    if (!pulse_h_groups_path(r, q->member))
        return;
    q->max_records = 500;
    q->max_bytes = 1024 * 1024;
    if (!pulse_server_query_int(r, "max_records", 1, GFETCH_MAX_RECORDS, &q->max_records) ||
        !pulse_server_query_int(r, "max_bytes", 1, GFETCH_MAX_BYTES, &q->max_bytes) ||
        !pulse_server_query_int(r, "max_wait_ms", 0, GFETCH_MAX_WAIT_MS, &q->wait_ms) || !parse_resume(r, q))
        return;
    pulse_server_call_begin(r, poll_resume);
    pulse_status_t st = pulse_broker_group_poll_async(r->srv->broker, r->consumer, q->member,
                                                      q->has_from ? &q->from : NULL, &q->view, pulse_server_call_done,
                                                      r, q->errbuf, sizeof q->errbuf);
    pulse_server_call_end(r, st, st == PULSE_OK);
}
