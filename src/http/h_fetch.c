/* SPDX-License-Identifier: MIT */
/*
 * h_fetch.c - GET /v1/topics/{topic}/partitions/{partition}/records.
 *
 * Raw answers hand MHD a dup()'ed segment descriptor with an offset and a
 * length already clamped by the engine to whole, durable batches, so the
 * bytes go out by sendfile without a copy and no byte past the high
 * watermark can be served. JSON answers read CRC-verified batches into a
 * buffer, plan the answer over them and stream it (fetch_json.h); a batch
 * that failed its CRC is never returned by the engine, so never served.
 * Offsets the engine stepped over because the stored data is damaged or
 * missing are listed in "skipped" and in the Pulse-Skipped header (both
 * formats; docs/API.md "Damaged data").
 *
 * Memory: a JSON answer holds its batches (at most max_bytes of them, or
 * the one batch at the offset when it is larger) and the stream's block
 * plus one record's rendered headers, never the JSON text; all of it is
 * reserved from the server's memory budget before it is allocated, and a
 * fetch the budget cannot cover answers 503 with Retry-After.
 *
 * Long-poll: when the first read finds nothing at the offset and wait_ms >
 * 0, the connection is suspended and a broker waiter is parked; the waiter
 * fires (syncer thread) when data arrives, at the deadline, on delete or
 * at shutdown, and the re-entered handler reads again and answers, possibly
 * empty. No thread is held while waiting.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "http/fetch_json.h"
#include "http/http_int.h"

#define FETCH_MAX_RECORDS 10000
#define FETCH_MAX_BYTES (64ll * 1024 * 1024)
#define FETCH_MAX_WAIT_MS 30000
/* First read of a JSON fetch; later reads grow fourfold. */
#define FETCH_FIRST_CHUNK (64u * 1024)
/* The block MHD asks the JSON stream to fill (MHD allocates it per answer). */
#define FETCH_BLOCK (32u * 1024)
/* Tries of a read when its first batch keeps changing size under it
 * (compaction rewriting the segment). */
#define FETCH_READ_TRIES 3

static void add_position_headers(struct MHD_Response *resp, int64_t next, int64_t hw, int64_t log_start)
{
    char v[24];
    snprintf(v, sizeof v, "%lld", (long long)next);
    MHD_add_response_header(resp, "Pulse-Next-Offset", v);
    snprintf(v, sizeof v, "%lld", (long long)hw);
    MHD_add_response_header(resp, "Pulse-High-Watermark", v);
    snprintf(v, sizeof v, "%lld", (long long)log_start);
    MHD_add_response_header(resp, "Pulse-Log-Start-Offset", v);
}

/* ---- skipped offsets (docs/API.md "Damaged data") ---- */

/* Offsets an answer stepped over because the stored data there is damaged
 * or missing: the engine reports them per read (pulse_slice.skip_*), at
 * most one range before the read's first batch, and a read never steps
 * over damage after that batch, so every damaged range between records
 * costs the answer one more read. An answer lists at most FETCH_MAX_SKIPS
 * separate ranges: a read that would add one more is dropped unplanned and
 * the answer ends before it (next_offset points at that range), so the
 * next fetch reports it; nothing is ever stepped over unreported
 * (docs/API.md "Damaged data"). */
#define FETCH_MAX_SKIPS 8

struct skips {
    size_t n;
    struct {
        int64_t from, to;
        bool damaged;
    } r[FETCH_MAX_SKIPS];
};

/* Whether s's skipped range, if any, still fits in k (a new range needs a
 * free slot; one that continues the last range merges into it). */
static bool skips_fit(const struct skips *k, const struct pulse_slice *s)
{
    if (s->skip_to <= s->skip_from || k->n < FETCH_MAX_SKIPS)
        return true;
    return k->r[k->n - 1].to == s->skip_from;
}

static void skips_add(struct skips *k, const struct pulse_slice *s)
{
    if (s->skip_to <= s->skip_from)
        return;
    if (k->n > 0 && k->r[k->n - 1].to == s->skip_from) {
        k->r[k->n - 1].to = s->skip_to;
        k->r[k->n - 1].damaged = k->r[k->n - 1].damaged || s->skip_damaged;
        return;
    }
    if (k->n == FETCH_MAX_SKIPS)
        return; /* (never: callers check skips_fit first) */
    k->r[k->n].from = s->skip_from;
    k->r[k->n].to = s->skip_to;
    k->r[k->n].damaged = s->skip_damaged;
    k->n++;
}

/* Keeps what lies below next (what the answer really stepped over). */
static void skips_clip(struct skips *k, int64_t next)
{
    size_t keep = 0;
    while (keep < k->n && k->r[keep].from < next) {
        if (k->r[keep].to > next)
            k->r[keep].to = next;
        keep++;
    }
    k->n = keep;
}

/* ,"skipped":[{"from":F,"to":T,"reason":"corrupt"|"missing"},...] into v
 * (at most PULSE_FETCHJSON_AFTER_MAX bytes: 8 ranges take at most 640). */
static void skips_json(const struct skips *k, char *v, size_t cap)
{
    size_t used = 0;
    v[0] = '\0';
    for (size_t i = 0; i < k->n && used < cap; i++)
        used += (size_t)snprintf(v + used, cap - used, "%s{\"from\":%lld,\"to\":%lld,\"reason\":\"%s\"}%s",
                                 i == 0 ? ",\"skipped\":[" : ",", (long long)k->r[i].from, (long long)k->r[i].to,
                                 k->r[i].damaged ? "corrupt" : "missing", i + 1 == k->n ? "]" : "");
}

/* Pulse-Skipped: F-T;reason=corrupt, ... */
static void skips_header(struct MHD_Response *resp, const struct skips *k)
{
    char v[FETCH_MAX_SKIPS * 64];
    size_t used = 0;
    for (size_t i = 0; i < k->n && used < sizeof v; i++)
        used += (size_t)snprintf(v + used, sizeof v - used, "%s%lld-%lld;reason=%s", i > 0 ? ", " : "",
                                 (long long)k->r[i].from, (long long)k->r[i].to,
                                 k->r[i].damaged ? "corrupt" : "missing");
    if (k->n > 0)
        MHD_add_response_header(resp, "Pulse-Skipped", v);
}

static void reply_fetch_error(struct pulse_hreq *r, pulse_status_t st, const struct pulse_slice *s)
{
    if (st == PULSE_RANGE)
        pulse_server_reply_range(r, s->log_start, s->high_watermark, "offset is above the high watermark");
    else if (st == PULSE_TOPIC_NOT_FOUND)
        pulse_server_reply_error(r, 404, "topic_not_found", "topic \"%s\" does not exist", r->topic);
    else if (st == PULSE_PARTITION_NOT_FOUND)
        pulse_server_reply_error(r, 404, "partition_not_found", "topic \"%s\" has no partition %u", r->topic,
                                 r->partition);
    else
        pulse_server_reply_status(r, st, NULL);
}

static ssize_t read_json(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos; /* MHD reads the body in order */
    ssize_t n = pulse_fetchjson_read(cls, (uint8_t *)out, max);
    if (n == -1)
        return MHD_CONTENT_READER_END_OF_STREAM;
    return n < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : n;
}

/* Answers 200 with the planned records, streamed; takes fj, and the
 * batches in buf once the answer exists (buf is then left empty; on
 * failure the caller still frees buf). */
static void stream_json(struct pulse_hreq *r, struct pulse_fetchjson *fj, struct pulse_buf *buf,
                        const struct pulse_slice *info, int64_t next, const struct skips *skipped)
{
    struct pulse_fetchjson_envelope env = {r->topic, r->partition, info->log_start, info->high_watermark, next};
    char after[PULSE_FETCHJSON_AFTER_MAX];
    uint64_t body_len = 0;
    skips_json(skipped, after, sizeof after);
    if (pulse_fetchjson_after_records(fj, after) != PULSE_OK ||
        pulse_fetchjson_finish(fj, buf, &env, &body_len) != PULSE_OK) {
        pulse_fetchjson_destroy(fj);
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    size_t block = body_len < FETCH_BLOCK ? (size_t)body_len : FETCH_BLOCK;
    struct MHD_Response *resp = MHD_create_response_from_callback(body_len, block, read_json, fj,
                                                                  pulse_fetchjson_destroy);
    if (resp == NULL) {
        pulse_fetchjson_destroy(fj);
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    add_position_headers(resp, next, info->high_watermark, info->log_start);
    skips_header(resp, skipped);
    pulse_server_reply(r, 200, resp, PULSE_MEDIA_JSON);
}

/* Lets buf take n more bytes, reserving them from the budget first. */
static bool reserve_read(struct pulse_hreq *r, struct pulse_buf *buf, uint64_t n)
{
    if (n > SIZE_MAX - buf->len)
        return false;
    size_t want = buf->len + (size_t)n;
    if (want > buf->max && !pulse_server_mem_take(r, want - buf->max)) {
        r->over_budget = true;
        return false;
    }
    if (want > buf->max)
        pulse_buf_set_max(buf, want);
    return true;
}

/*
 * One read at offset: up to want bytes of whole batches, or the first batch
 * alone when it is larger and at most limit bytes (its size is learnt from
 * the index and reserved before it is read). PULSE_TOO_LARGE when that
 * batch is larger than limit; PULSE_BUSY with r->over_budget when the
 * budget cannot cover the read.
 */
static pulse_status_t read_at(struct pulse_hreq *r, int64_t offset, uint64_t want, uint64_t limit,
                              struct pulse_buf *buf, struct pulse_slice *info)
{
    pulse_status_t st = PULSE_TOO_LARGE;
    for (int i = 0; i < FETCH_READ_TRIES; i++) {
        if (!reserve_read(r, buf, want))
            return PULSE_BUSY;
        st = pulse_broker_fetch(r->srv->broker, r->topic, r->partition, offset, want, buf, info);
        if (st != PULSE_TOO_LARGE)
            return st;
        struct pulse_slice one;
        memset(&one, 0, sizeof one);
        one.fd = -1;
        st = pulse_broker_fetch_slice(r->srv->broker, r->topic, r->partition, offset, 1, false, &one);
        if (st != PULSE_OK) {
            *info = one;
            return st;
        }
        /* (one.len <= want: the segment changed under the read; again.) */
        want = one.len > want ? one.len : want + 1;
        if (want > limit)
            return PULSE_TOO_LARGE;
    }
    return st;
}

/*
 * Reads verified batches into buf and plans the answer over them, in
 * growing chunks: a JSON answer usually stops at max_records or at
 * max_bytes of JSON long before max_bytes of batches, and every byte read
 * is CRC-checked. The batches read stay within max_bytes, except the first
 * one, which is always read (a reader always makes progress). *read_end
 * gets the offset after the last batch read.
 */
static pulse_status_t read_and_plan(struct pulse_hreq *r, struct pulse_fetchjson **fj_out, struct pulse_buf *buf,
                                    struct pulse_slice *info, int64_t *read_end, struct skips *skipped)
{
    uint64_t budget = (uint64_t)r->f_max_bytes;
    uint64_t chunk = FETCH_FIRST_CHUNK;
    pulse_status_t st = read_at(r, r->f_offset < 0 ? 0 : r->f_offset, budget < chunk ? budget : chunk, UINT64_MAX,
                                buf, info);
    /* The answer starts at the offset asked for, raised to the log start. */
    if (st == PULSE_OK)
        st = pulse_fetchjson_create(info->start_offset, (uint64_t)r->f_max_records, (uint64_t)r->f_max_bytes, fj_out);
    if (st != PULSE_OK)
        return st;
    struct pulse_fetchjson *fj = *fj_out;
    *read_end = info->next_offset;
    skips_add(skipped, info);
    budget = buf->len >= budget ? 0 : budget - buf->len;
    for (;;) {
        st = pulse_fetchjson_plan(fj, buf->data, buf->len);
        if (st != PULSE_OK)
            return st;
        if (pulse_fetchjson_full(fj) || budget == 0 || *read_end >= info->high_watermark)
            return PULSE_OK;
        struct pulse_slice more;
        size_t before = buf->len;
        chunk *= 4;
        /* Anything short of OK (the next batch is larger than what is left
         * of max_bytes, the budget is spent, a read failed) ends the answer
         * with what is planned. */
        if (read_at(r, *read_end, budget < chunk ? budget : chunk, budget, buf, &more) != PULSE_OK ||
            buf->len == before)
            return PULSE_OK;
        if (!skips_fit(skipped, &more)) {
            buf->len = before; /* unplanned: the next fetch reads it again */
            return PULSE_OK;
        }
        budget -= buf->len - before;
        *read_end = more.next_offset;
        skips_add(skipped, &more);
    }
}

static void answer_json(struct pulse_hreq *r)
{
    struct pulse_buf buf;
    struct pulse_slice info;
    struct pulse_fetchjson *fj = NULL;
    memset(&info, 0, sizeof info);
    pulse_buf_init(&buf, 0); /* grows only within reserve_read */
    int64_t read_end = 0;
    struct skips skipped = {0};
    pulse_status_t st = read_and_plan(r, &fj, &buf, &info, &read_end, &skipped);
    /* (A later read the budget refused just ends the answer early.) */
    if (st == PULSE_BUSY && r->over_budget) {
        pulse_server_reply_over_budget(r);
        goto out;
    }
    if (st != PULSE_OK) {
        reply_fetch_error(r, st, &info);
        goto out;
    }
    /* The stream's block and one record's rendered headers. */
    if (!pulse_server_mem_take(r, FETCH_BLOCK + pulse_fetchjson_max_headers(fj))) {
        pulse_server_reply_over_budget(r);
        goto out;
    }
    int64_t next = pulse_fetchjson_next(fj);
    /* Nothing at or after the start in what was read (a compacted batch
     * ending below it, or skipped offsets only): go on after it. */
    if (pulse_fetchjson_records(fj) == 0 && read_end > next)
        next = read_end;
    skips_clip(&skipped, next);
    if (pulse_fetchjson_records(fj) > 0)
        pulse_broker_note_fetched(r->srv->broker, r->topic, pulse_fetchjson_records(fj),
                                  pulse_fetchjson_payload_bytes(fj));
    stream_json(r, fj, &buf, &info, next, &skipped);
    fj = NULL; /* the answer owns it */
out:
    pulse_fetchjson_destroy(fj);
    pulse_buf_fini(&buf);
}

static void answer_raw(struct pulse_hreq *r)
{
    struct pulse_slice s;
    memset(&s, 0, sizeof s);
    s.fd = -1;
    pulse_status_t st = pulse_broker_fetch_slice(r->srv->broker, r->topic, r->partition,
                                                 r->f_offset < 0 ? 0 : r->f_offset, (uint64_t)r->f_max_bytes, true, &s);
    if (st != PULSE_OK) {
        if (s.fd >= 0)
            close(s.fd);
        reply_fetch_error(r, st, &s);
        return;
    }
    struct MHD_Response *resp = NULL;
    if (s.len == 0 || s.fd < 0) {
        if (s.fd >= 0)
            close(s.fd);
        resp = MHD_create_response_from_buffer(0, (void *)(uintptr_t) "", MHD_RESPMEM_PERSISTENT);
    } else {
        /* MHD owns the descriptor from here and closes it when done; the
         * engine clamped len to durable bytes of this one segment, so
         * sendfile never runs past the end of the file. */
        resp = MHD_create_response_from_fd_at_offset64(s.len, s.fd, s.pos);
        if (resp == NULL)
            close(s.fd);
        else
            pulse_broker_note_fetched(r->srv->broker, r->topic, (uint64_t)(s.next_offset - s.start_offset), s.len);
    }
    if (resp == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    add_position_headers(resp, s.next_offset, s.high_watermark, s.log_start);
    struct skips skipped = {0};
    skips_add(&skipped, &s);
    skips_header(resp, &skipped);
    pulse_server_reply(r, 200, resp, PULSE_MEDIA_BATCHES);
}

static void answer(struct pulse_hreq *r)
{
    if (r->f_raw)
        answer_raw(r);
    else
        answer_json(r);
}

static void fetch_resume(struct pulse_hreq *r)
{
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st == PULSE_TOPIC_NOT_FOUND) {
        pulse_server_reply_error(r, 404, "topic_not_found", "topic \"%s\" does not exist", r->topic);
        return;
    }
    /* OK (data or deadline) or SHUTDOWN (draining): answer what is there. */
    answer(r);
}

static void on_wake(void *arg, pulse_status_t st)
{
    pulse_server_wake(arg, st);
}

static bool query_int(struct pulse_hreq *r, const char *name, int64_t min, int64_t max, int64_t *out)
{
    const char *v = pulse_server_query(r, name);
    if (v == NULL)
        return true;
    if (pulse_request_parse_i64(v, min, max, out) != PULSE_OK) {
        pulse_server_reply_error(r, 400, "invalid_request", "query parameter %s must be an integer in %lld..%lld",
                                 name, (long long)min, (long long)max);
        return false;
    }
    return true;
}

/* Is there anything at the offset? A cheap slice without a descriptor. */
static pulse_status_t probe(struct pulse_hreq *r, struct pulse_slice *s)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    return pulse_broker_fetch_slice(r->srv->broker, r->topic, r->partition, r->f_offset < 0 ? 0 : r->f_offset, 1,
                                    false, s);
}

void pulse_h_fetch_get(struct pulse_hreq *r)
{
    if (!pulse_server_path_topic(r) || !pulse_server_path_partition(r))
        return;
    r->f_max_records = 500;
    r->f_max_bytes = 1024 * 1024;
    r->f_wait_ms = 0;
    if (!query_int(r, "offset", 0, INT64_MAX, &r->f_offset) ||
        !query_int(r, "max_records", 1, FETCH_MAX_RECORDS, &r->f_max_records) ||
        !query_int(r, "max_bytes", 1, FETCH_MAX_BYTES, &r->f_max_bytes) ||
        !query_int(r, "wait_ms", 0, FETCH_MAX_WAIT_MS, &r->f_wait_ms))
        return;
    const char *format = pulse_server_query(r, "format");
    if (format != NULL) {
        if (strcmp(format, "raw") == 0) {
            r->f_raw = true;
        } else if (strcmp(format, "json") != 0) {
            pulse_server_reply_error(r, 400, "invalid_request", "format must be json or raw");
            return;
        }
    } else {
        const char *accept = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
        enum pulse_accept_pick pick = pulse_request_accept(accept, true);
        if (pick == PULSE_ACCEPT_NONE) {
            pulse_server_reply_error(r, 406, "not_acceptable", "records are available as %s or %s",
                                     PULSE_MEDIA_JSON, PULSE_MEDIA_BATCHES);
            return;
        }
        r->f_raw = pick == PULSE_ACCEPT_RAW;
    }
    const char *consumer = pulse_server_query(r, "consumer");
    if (consumer != NULL) {
        size_t clen = strlen(consumer);
        if (!pulse_broker_name_valid(consumer, clen)) {
            pulse_server_reply_error(r, 400, "invalid_name", "consumer name breaks the name rule");
            return;
        }
        memcpy(r->consumer, consumer, clen + 1);
        if (pulse_server_query(r, "offset") == NULL) {
            struct pulse_cursor c;
            pulse_status_t st = pulse_broker_cursor_get(r->srv->broker, r->consumer, r->topic, r->partition, &c);
            if (st == PULSE_OK)
                r->f_offset = c.offset;
            else if (st != PULSE_CURSOR_NOT_FOUND) {
                struct pulse_slice none;
                memset(&none, 0, sizeof none);
                reply_fetch_error(r, st, &none);
                return;
            }
        }
    }

    if (r->f_wait_ms > 0 && !atomic_load(&r->srv->stopping)) {
        struct pulse_slice s;
        pulse_status_t st = probe(r, &s);
        if (st != PULSE_OK) {
            reply_fetch_error(r, st, &s);
            return;
        }
        if (s.len == 0) {
            int64_t deadline = pulse_clock_mono_us() + r->f_wait_ms * 1000;
            /* Suspend first: the waiter may fire before wait_data returns. */
            pulse_server_suspend(r, fetch_resume);
            bool parked = false;
            st = pulse_broker_wait_data(r->srv->broker, r->topic, r->partition, s.start_offset, deadline, on_wake, r,
                                        &parked);
            if (st != PULSE_OK || !parked)
                pulse_server_wake(r, st);
            return;
        }
    }
    answer(r);
}
