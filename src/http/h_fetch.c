/* SPDX-License-Identifier: MIT */
/*
 * h_fetch.c - GET /v1/topics/{topic}/partitions/{partition}/records.
 *
 * Everything comes from the broker seam (broker.h): records to write as
 * JSON, or a raw slice to send as it is. Raw answers hand MHD the slice's
 * descriptor with its range, which the broker clamped to whole, durable
 * stored units (local backend: a dup()'ed segment descriptor, CRC-checked
 * batches never past the high watermark), so the bytes go out by sendfile
 * without a copy; a backend without a stored form to hand out answers
 * PULSE_NOT_SUPPORTED (406). JSON answers read records into a broker fetch,
 * plan the answer over them and stream it (fetch_json.h); the broker never
 * hands out a record whose bytes failed their CRC. Offsets the broker
 * stepped over because the stored data is damaged or missing are listed in
 * "skipped" and in the Pulse-Skipped header (both formats; docs/API.md
 * "Damaged data").
 *
 * Memory: a JSON answer holds its records while it is planned (the
 * broker's copies: at most max_bytes of them in their stored form, or the
 * one unit at the offset when it is larger). Up to FETCH_RENDER_MAX of
 * JSON text is rendered as it is planned, in one buffer grown within the
 * budget, and the answer is that buffer (the records are freed before it
 * is sent); a larger answer keeps its records and streams through a
 * block, plus one record's rendered headers, never holding the JSON text.
 * All of it is reserved from the server's memory budget before it is
 * used (the inflated records of a compressed topic's batches as soon as
 * the read returns them), and a fetch the budget cannot cover answers 503
 * with Retry-After.
 *
 * Waits: with a consumer and no offset, the consumer's cursor is read first
 * through the broker's asynchronous cursor read (answered inline by the
 * local backend; a backend that answers later resumes the request). When
 * the first read finds nothing at the offset and wait_ms > 0, the
 * connection is suspended and a broker waiter is parked; the waiter fires
 * (a broker thread) when data arrives, at the deadline, on delete or at
 * shutdown, and the re-entered handler reads again and answers, possibly
 * empty. No thread is held while waiting.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/text.h"
#include "http/encode.h"
#include "http/fetch_json.h"
#include "http/http_int.h"
#include "http/positions.h"
#include "http/skips.h"

#define FETCH_MAX_RECORDS 10000
#define FETCH_MAX_BYTES (64ll * 1024 * 1024)
#define FETCH_MAX_WAIT_MS 30000
/* First read of a JSON fetch; later reads grow fourfold. */
#define FETCH_FIRST_CHUNK (64u * 1024)
/* The block MHD asks the JSON stream to fill (MHD allocates it per answer). */
#define FETCH_BLOCK (32u * 1024)
/* Most bytes of a JSON answer rendered whole (fetch_json.h); a larger
 * answer streams. Small: the budget taken for a text that outgrows it
 * stays taken until the request ends, and per-request costs matter only
 * for small answers. */
#define FETCH_RENDER_MAX (256u * 1024)
/* Tries of a read when its first unit keeps changing size under it
 * (compaction rewriting the segment). */
#define FETCH_READ_TRIES 3

/* The request's fetch parameters and state, in its pool (r->hstate). */
struct fetch_state {
    int64_t offset;      /* -1 = log start */
    struct pulse_pos at; /* offset= or timestamp= by name or time; resolved into offset */
    bool named;          /* at is to be resolved (earliest, latest, a time) */
    int64_t max_records;
    int64_t max_bytes;
    int64_t wait_ms;
    bool raw;
    struct pulse_cursor cursor; /* the consumer's, when it gives the offset */
    bool by_cursor;             /* a consumer and no offset: the cursor is the offset */
    char errmsg[160];           /* why the topic lookup failed */
};

static void add_i64_header(struct MHD_Response *resp, const char *name, int64_t v)
{
    char text[PULSE_TEXT_INT_MAX + 1];
    text[pulse_text_i64(v, text)] = '\0';
    MHD_add_response_header(resp, name, text);
}

static void add_position_headers(struct MHD_Response *resp, int64_t next, int64_t hw, int64_t log_start)
{
    add_i64_header(resp, "Pulse-Next-Offset", next);
    add_i64_header(resp, "Pulse-High-Watermark", hw);
    add_i64_header(resp, "Pulse-Log-Start-Offset", log_start);
}

static void reply_fetch_error(struct pulse_hreq *r, pulse_status_t st, const struct pulse_fetch_pos *s)
{
    if (st == PULSE_RANGE)
        pulse_server_reply_range(r, NULL, ((const struct fetch_state *)r->hstate)->offset, s->log_start,
                                 s->high_watermark);
    else if (st == PULSE_TOPIC_NOT_FOUND)
        pulse_server_reply_error(r, 404, "topic_not_found", "topic \"%s\" does not exist", r->topic);
    else if (st == PULSE_PARTITION_NOT_FOUND)
        pulse_server_reply_no_partition(r, r->topic, r->partition);
    else if (st == PULSE_NOT_SUPPORTED)
        pulse_server_reply_error(r, 406, "not_acceptable",
                                 "this broker's backend has no raw record batches; ask for %s", PULSE_MEDIA_JSON);
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

/* ---- gzip'ed JSON answers (docs/API.md "Compression") ------------------ */

/* A compressed JSON answer: the gzip stream over the planned answer. Its
 * zlib state and input block were taken from the memory budget before it
 * was made (given back when the request completes). */
struct fetch_gz {
    struct pulse_gzip_stream *gz;
    struct pulse_fetchjson *fj;
};

static ssize_t gz_source(void *arg, uint8_t *out, size_t max)
{
    return pulse_fetchjson_read(arg, out, max);
}

static ssize_t read_gz(void *cls, uint64_t pos, char *out, size_t max)
{
    struct fetch_gz *fg = cls;
    (void)pos;
    ssize_t n = pulse_gzip_stream_read(fg->gz, (uint8_t *)out, max);
    if (n == -1)
        return MHD_CONTENT_READER_END_OF_STREAM;
    return n < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : n;
}

static void free_gz(void *cls)
{
    struct fetch_gz *fg = cls;
    pulse_gzip_stream_destroy(fg->gz);
    pulse_fetchjson_destroy(fg->fj);
    pulse_free(fg);
}

/* The response for a planned answer: gzip'ed as MHD pulls it (chunked,
 * its length unknown) when the client accepts gzip, the answer has at
 * least PULSE_ENCODE_GZIP_MIN bytes and the budget covers the compressor;
 * otherwise plain with its exact length. Takes fj, even on failure (NULL). */
static struct MHD_Response *json_response(struct pulse_hreq *r, struct pulse_fetchjson *fj, uint64_t body_len)
{
    const char *ae = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    struct MHD_Response *resp = NULL;
    bool big = body_len >= PULSE_ENCODE_GZIP_MIN;
    if (big && pulse_encode_accepts_gzip(ae) &&
        pulse_server_mem_take(r, PULSE_ENCODE_GZIP_STATE + sizeof(struct fetch_gz) + 8192)) {
        struct fetch_gz *fg = pulse_calloc(1, sizeof *fg);
        if (fg != NULL)
            fg->gz = pulse_gzip_stream_create(gz_source, fj);
        if (fg == NULL || fg->gz == NULL) {
            pulse_free(fg);
            pulse_fetchjson_destroy(fj);
            return NULL;
        }
        fg->fj = fj;
        r->bytes_out = -1; /* compressed as it is sent */
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, FETCH_BLOCK, read_gz, fg, free_gz);
        if (resp == NULL) {
            free_gz(fg);
            return NULL;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    } else if (pulse_fetchjson_body(fj) != NULL) {
        /* Rendered: MHD sends the buffer as it is and frees fj after. */
        r->bytes_out = (int64_t)body_len;
        resp = MHD_create_response_from_buffer_with_free_callback_cls((size_t)body_len,
                                                                      (void *)(uintptr_t)pulse_fetchjson_body(fj),
                                                                      pulse_fetchjson_destroy, fj);
        if (resp == NULL) {
            pulse_fetchjson_destroy(fj);
            return NULL;
        }
    } else {
        size_t block = body_len < FETCH_BLOCK ? (size_t)body_len : FETCH_BLOCK;
        r->bytes_out = (int64_t)body_len;
        resp = MHD_create_response_from_callback(body_len, block, read_json, fj, pulse_fetchjson_destroy);
        if (resp == NULL) {
            pulse_fetchjson_destroy(fj);
            return NULL;
        }
    }
    if (big)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
    return resp;
}

/* ---- the records of a JSON answer -------------------------------------- */

/* What one JSON answer read: the broker's fetch, the bytes it holds and
 * the budget taken for them. */
struct fetch_read {
    struct pulse_fetch *f;
    uint64_t held;     /* bytes of the reads (pulse_fetch_pos.bytes) */
    uint64_t reserved; /* taken from the memory budget for them */
};

static pulse_status_t source_next(void *arg, struct pulse_record *rec)
{
    return pulse_broker_fetch_next(arg, rec);
}

static void source_rewind(void *arg)
{
    pulse_broker_fetch_rewind(arg);
}

static void source_release(void *arg)
{
    pulse_broker_fetch_destroy(arg);
}

static struct pulse_fetchjson_source source_of(struct pulse_fetch *f)
{
    return (struct pulse_fetchjson_source){source_next, source_rewind, source_release, f};
}

/* Answers 200 with the planned records, streamed; takes fj, and fr->f once
 * the answer exists (fr->f is then NULL; on failure the caller still
 * destroys fr->f). */
static void stream_json(struct pulse_hreq *r, struct pulse_fetchjson *fj, struct fetch_read *fr,
                        const struct pulse_fetch_pos *info, int64_t next, const struct pulse_skips *skipped)
{
    struct pulse_fetchjson_envelope env = {r->topic, r->partition, info->log_start, info->high_watermark, next};
    struct pulse_fetchjson_source src = source_of(fr->f);
    char after[PULSE_FETCHJSON_AFTER_MAX];
    uint64_t body_len = 0;
    pulse_skips_json(skipped, after, sizeof after);
    if (pulse_fetchjson_after_records(fj, after) != PULSE_OK ||
        pulse_fetchjson_finish(fj, &src, &env, &body_len) != PULSE_OK) {
        pulse_fetchjson_destroy(fj);
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    fr->f = NULL; /* the answer's */
    struct MHD_Response *resp = json_response(r, fj, body_len);
    if (resp == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    add_position_headers(resp, next, info->high_watermark, info->log_start);
    pulse_skips_header(resp, skipped);
    pulse_server_reply(r, 200, resp, PULSE_MEDIA_JSON);
}

/* The rendered text of a JSON answer grows within the memory budget. */
static pulse_status_t render_grow(void *arg, struct pulse_buf *buf, size_t n, size_t cap)
{
    return pulse_server_mem_grow(arg, buf, n, cap);
}

/* Lets the fetch take n more bytes, reserving them from the budget first
 * (what earlier reads reserved and did not use counts). */
static bool reserve_read(struct pulse_hreq *r, struct fetch_read *fr, uint64_t n)
{
    if (n > SIZE_MAX - fr->held)
        return false;
    uint64_t want = fr->held + n;
    if (want > fr->reserved && !pulse_server_mem_take(r, want - fr->reserved)) {
        r->over_budget = true;
        return false;
    }
    if (want > fr->reserved)
        fr->reserved = want;
    return true;
}

/*
 * One read at offset: up to want bytes of whole units, or the first unit
 * alone when it is larger and at most limit bytes (the broker says how
 * large; that much is reserved before it is read). PULSE_TOO_LARGE when
 * that unit is larger than limit; PULSE_BUSY with r->over_budget when the
 * budget cannot cover the read.
 */
static pulse_status_t read_at(struct pulse_hreq *r, struct fetch_read *fr, int64_t offset, uint64_t want,
                              uint64_t limit, struct pulse_fetch_pos *info)
{
    pulse_status_t st = PULSE_TOO_LARGE;
    for (int i = 0; i < FETCH_READ_TRIES; i++) {
        if (!reserve_read(r, fr, want))
            return PULSE_BUSY;
        uint64_t need = 0;
        st = pulse_broker_fetch_read(r->srv->broker, fr->f, offset, want, info, &need);
        if (st != PULSE_TOO_LARGE) {
            if (st == PULSE_OK)
                fr->held += info->bytes;
            /* What the read keeps besides (inflated records) is known
             * only now: taken after the fact, refused like the read. */
            if (st == PULSE_OK && info->plain_bytes > 0 && !pulse_server_mem_take(r, info->plain_bytes)) {
                r->over_budget = true;
                return PULSE_BUSY;
            }
            return st;
        }
        want = need;
        if (want > limit)
            return PULSE_TOO_LARGE;
    }
    return st;
}

/*
 * Reads records into the fetch and plans the answer over them, in growing
 * chunks: a JSON answer usually stops at max_records or at max_bytes of
 * JSON long before max_bytes of stored records, and every byte read is
 * CRC-checked. The reads stay within max_bytes, except the first unit,
 * which is always read (a reader always makes progress). *read_end gets
 * the offset after the last record read.
 */
static pulse_status_t read_and_plan(struct pulse_hreq *r, struct pulse_fetchjson **fj_out, struct fetch_read *fr,
                                    struct pulse_fetch_pos *info, int64_t *read_end, struct pulse_skips *skipped)
{
    struct fetch_state *q = r->hstate;
    struct pulse_fetchjson_source src = source_of(fr->f);
    uint64_t budget = (uint64_t)q->max_bytes;
    uint64_t chunk = FETCH_FIRST_CHUNK;
    pulse_status_t st = read_at(r, fr, q->offset < 0 ? 0 : q->offset, budget < chunk ? budget : chunk, UINT64_MAX,
                                info);
    /* The answer starts at the offset asked for, raised to the log start. */
    if (st == PULSE_OK)
        st = pulse_fetchjson_create(info->start_offset, (uint64_t)q->max_records, (uint64_t)q->max_bytes, fj_out);
    if (st != PULSE_OK)
        return st;
    struct pulse_fetchjson *fj = *fj_out;
    /* The text is about as large as the records read (text values). */
    pulse_fetchjson_render(fj, render_grow, r, FETCH_RENDER_MAX, (size_t)fr->held);
    *read_end = info->next_offset;
    pulse_skips_add(skipped, info);
    budget = fr->held >= budget ? 0 : budget - fr->held;
    for (;;) {
        st = pulse_fetchjson_plan(fj, &src);
        if (st != PULSE_OK)
            return st;
        if (pulse_fetchjson_full(fj) || budget == 0 || *read_end >= info->high_watermark)
            return PULSE_OK;
        struct pulse_fetch_pos more;
        uint64_t before = fr->held;
        chunk *= 4;
        /* Anything short of OK (the next unit is larger than what is left
         * of max_bytes, the budget is spent, a read failed) ends the answer
         * with what is planned. */
        if (read_at(r, fr, *read_end, budget < chunk ? budget : chunk, budget, &more) != PULSE_OK || fr->held == before)
            return PULSE_OK;
        /* Retention trimmed the log past read_end since the first read (the
         * read started at the new log start): the answer ends at read_end,
         * unplanned, so that the next fetch learns the new log start. Run
         * on, it would step over the trimmed offsets as if they had never
         * been, under the old log start (found by the power-cut campaign,
         * where retention trims while a restart's checks read). */
        if (more.start_offset > *read_end)
            return PULSE_OK;
        /* Left unplanned (the stream writes only planned records): the
         * next fetch reads it again. */
        if (!pulse_skips_fit(skipped, &more))
            return PULSE_OK;
        budget -= fr->held - before;
        *read_end = more.next_offset;
        pulse_skips_add(skipped, &more);
    }
}

static void answer_json(struct pulse_hreq *r)
{
    struct fetch_read fr = {NULL, 0, 0};
    struct pulse_fetch_pos info;
    struct pulse_fetchjson *fj = NULL;
    memset(&info, 0, sizeof info);
    int64_t read_end = 0;
    struct pulse_skips skipped = {0};
    pulse_status_t st = pulse_broker_fetch_create(r->srv->broker, r->topic, r->partition, &fr.f);
    if (st == PULSE_OK)
        st = read_and_plan(r, &fj, &fr, &info, &read_end, &skipped);
    /* (A later read the budget refused just ends the answer early.) */
    if (st == PULSE_BUSY && r->over_budget) {
        pulse_server_reply_over_budget(r);
        goto out;
    }
    if (st != PULSE_OK) {
        reply_fetch_error(r, st, &info);
        goto out;
    }
    /* A streamed answer: its block and one record's rendered headers. */
    if (!pulse_fetchjson_rendered(fj) && !pulse_server_mem_take(r, FETCH_BLOCK + pulse_fetchjson_max_headers(fj))) {
        pulse_server_reply_over_budget(r);
        goto out;
    }
    int64_t next = pulse_fetchjson_next(fj);
    /* Nothing at or after the start in what was read (a compacted batch
     * ending below it, or skipped offsets only): go on after it. */
    if (pulse_fetchjson_records(fj) == 0 && read_end > next)
        next = read_end;
    pulse_skips_clip(&skipped, next);
    if (pulse_fetchjson_records(fj) > 0)
        pulse_broker_note_fetched(r->srv->broker, r->topic, pulse_fetchjson_records(fj),
                                  pulse_fetchjson_payload_bytes(fj));
    pulse_server_limit_charge(r, pulse_fetchjson_payload_bytes(fj));
    stream_json(r, fj, &fr, &info, next, &skipped);
    fj = NULL; /* the answer owns it */
out:
    pulse_fetchjson_destroy(fj);
    pulse_broker_fetch_destroy(fr.f);
}

/* ---- raw --------------------------------------------------------------- */

/* Over TLS libmicrohttpd cannot sendfile (the bytes must be encrypted in
 * user space); given a descriptor it preads 4 KiB at a time, each sent as
 * its own TLS record. A range read in TLS_RAW_BLOCK pieces fills whole
 * 16 KiB records and takes a quarter of the system calls. */
#define TLS_RAW_BLOCK (64u * 1024)

struct tls_raw {
    int fd;
    uint64_t pos; /* of the range's first byte in the file */
};

static ssize_t read_tls_raw(void *cls, uint64_t at, char *buf, size_t max)
{
    struct tls_raw *t = cls;
    ssize_t n;
    do {
        n = pread(t->fd, buf, max, (off_t)(t->pos + at));
    } while (n < 0 && errno == EINTR);
    /* The broker clamped the range to durable bytes of this file: 0 or an
     * error here means the file changed under us; end the answer (MHD
     * closes the connection short of Content-Length). */
    return n > 0 ? n : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void free_tls_raw(void *cls)
{
    struct tls_raw *t = cls;
    close(t->fd);
    pulse_free(t);
}

/* A response for len bytes of fd from pos, taking fd (closed on failure
 * too); NULL on NOMEM. */
static struct MHD_Response *raw_response(struct pulse_hreq *r, int fd, uint64_t pos, uint64_t len)
{
    if (r->srv->tls_pem.cert == NULL)
        return MHD_create_response_from_fd_at_offset64(len, fd, (int64_t)pos);
    /* The block lives in the response until it is sent: charged to the
     * memory budget like a JSON answer's (a refusal answers 503). */
    struct tls_raw *t = NULL;
    struct MHD_Response *resp = NULL;
    if (pulse_server_mem_charge(r, TLS_RAW_BLOCK + sizeof *t))
        t = pulse_malloc(sizeof *t);
    if (t != NULL) {
        t->fd = fd;
        t->pos = pos;
        resp = MHD_create_response_from_callback(len, TLS_RAW_BLOCK, read_tls_raw, t, free_tls_raw);
        if (resp != NULL)
            return resp;
        pulse_free(t);
    }
    close(fd);
    return NULL;
}

static void answer_raw(struct pulse_hreq *r)
{
    struct fetch_state *q = r->hstate;
    struct pulse_raw_slice s;
    memset(&s, 0, sizeof s);
    s.fd = -1;
    pulse_status_t st = pulse_broker_fetch_raw(r->srv->broker, r->topic, r->partition, q->offset < 0 ? 0 : q->offset,
                                               (uint64_t)q->max_bytes, &s);
    if (st != PULSE_OK) {
        reply_fetch_error(r, st, &s.at);
        return;
    }
    struct MHD_Response *resp = NULL;
    if (s.at.bytes == 0 || s.fd < 0) {
        resp = MHD_create_response_from_buffer(0, (void *)(uintptr_t) "", MHD_RESPMEM_PERSISTENT);
    } else {
        /* MHD owns the descriptor from here and closes it when done; the
         * broker clamped the range to durable bytes of this one file, so
         * sendfile (or, over TLS, pread) never runs past its end. */
        r->bytes_out = (int64_t)s.at.bytes;
        resp = raw_response(r, s.fd, s.pos, s.at.bytes);
        if (resp != NULL) {
            pulse_broker_note_fetched(r->srv->broker, r->topic, (uint64_t)(s.at.next_offset - s.at.start_offset),
                                      s.at.bytes);
            pulse_server_limit_charge(r, s.at.bytes);
        }
    }
    if (resp == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    add_position_headers(resp, s.at.next_offset, s.at.high_watermark, s.at.log_start);
    struct pulse_skips skipped = {0};
    pulse_skips_add(&skipped, &s.at);
    pulse_skips_header(resp, &skipped);
    pulse_server_reply(r, 200, resp, PULSE_MEDIA_BATCHES);
}

static void answer(struct pulse_hreq *r)
{
    struct fetch_state *q = r->hstate;
    if (q->raw)
        answer_raw(r);
    else
        answer_json(r);
}

/* ---- the request --------------------------------------------------------- */

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

/* offset=N|earliest|latest or timestamp=<ms> (not both) into q; answers
 * 400 and returns false. */
static bool parse_position(struct pulse_hreq *r, struct fetch_state *q)
{
    const char *off = pulse_server_query(r, "offset");
    const char *ts = pulse_server_query(r, "timestamp");
    int64_t ms = 0;
    if (off != NULL && ts != NULL) {
        pulse_server_reply_error(r, 400, "invalid_request", "give offset or timestamp, not both");
        return false;
    }
    if (ts != NULL) {
        if (pulse_request_parse_i64(ts, 0, INT64_MAX, &ms) != PULSE_OK) {
            pulse_server_reply_error(r, 400, "invalid_request",
                                     "query parameter timestamp must be milliseconds since the epoch (0 or more)");
            return false;
        }
        q->at = (struct pulse_pos){PULSE_POS_TIME, ms};
        q->named = true;
        return true;
    }
    if (off == NULL)
        return true;
    if (pulse_pos_parse(off, strlen(off), &q->at) != PULSE_OK || q->at.kind == PULSE_POS_TIME) {
        int64_t neg = 0;
        if (pulse_request_parse_i64(off, INT64_MIN, -1, &neg) == PULSE_OK)
            pulse_server_reply_negative_offset(r, NULL, neg);
        else
            pulse_server_reply_error(r, 400, "invalid_request",
                                     "query parameter offset must be an integer 0 or more, earliest or latest");
        return false;
    }
    if (q->at.kind == PULSE_POS_OFFSET)
        q->offset = q->at.value;
    else
        q->named = true;
    return true;
}

/* Reads the query into r->fetch; answers 400/406 and returns false. */
static bool parse_query(struct pulse_hreq *r)
{
    struct fetch_state *q = r->hstate;
    q->offset = -1;
    q->max_records = 500;
    q->max_bytes = 1024 * 1024;
    q->wait_ms = 0;
    if (!parse_position(r, q))
        return false;
    if (!pulse_server_query_int(r, "max_records", 1, FETCH_MAX_RECORDS, &q->max_records) ||
        !pulse_server_query_int(r, "max_bytes", 1, FETCH_MAX_BYTES, &q->max_bytes) ||
        !pulse_server_query_int(r, "wait_ms", 0, FETCH_MAX_WAIT_MS, &q->wait_ms))
        return false;
    const char *format = pulse_server_query(r, "format");
    if (format != NULL) {
        if (strcmp(format, "raw") == 0) {
            q->raw = true;
        } else if (strcmp(format, "json") != 0) {
            pulse_server_reply_error(r, 400, "invalid_request", "format must be json or raw");
            return false;
        }
        return true;
    }
    const char *accept = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    enum pulse_accept_pick pick = pulse_request_accept(accept, true);
    if (pick == PULSE_ACCEPT_NONE) {
        pulse_server_reply_error(r, 406, "not_acceptable", "records are available as %s or %s", PULSE_MEDIA_JSON,
                                 PULSE_MEDIA_BATCHES);
        return false;
    }
    q->raw = pick == PULSE_ACCEPT_RAW;
    return true;
}

/* Answers now, or parks a long-poll waiter when there is nothing at the
 * offset yet and the request may wait. */
static void fetch_start(struct pulse_hreq *r)
{
    struct fetch_state *q = r->hstate;
    if (q->named) {
        struct pulse_fetch_pos none;
        memset(&none, 0, sizeof none);
        pulse_status_t st = pulse_pos_resolve(r->srv->broker, r->topic, r->partition, &q->at, &q->offset);
        if (st == PULSE_NOT_SUPPORTED) {
            /* Not the raw form's 406: this backend cannot find a time. */
            pulse_server_reply_error(r, 406, "not_acceptable",
                                     "this broker's backend cannot find positions by time; give an offset");
            return;
        }
        if (st != PULSE_OK) {
            reply_fetch_error(r, st, &none);
            return;
        }
        q->named = false;
    }
    if (q->wait_ms > 0 && !atomic_load(&r->srv->stopping)) {
        /* Is there anything at the offset? Positions only, nothing read. */
        struct pulse_fetch_pos s;
        memset(&s, 0, sizeof s);
        pulse_status_t st = pulse_broker_fetch_probe(r->srv->broker, r->topic, r->partition,
                                                     q->offset < 0 ? 0 : q->offset, &s);
        if (st != PULSE_OK) {
            reply_fetch_error(r, st, &s);
            return;
        }
        if (s.bytes == 0) {
            int64_t deadline = pulse_clock_mono_us() + q->wait_ms * 1000;
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

/* The consumer's cursor came: it is the offset, unless it has none. */
static void cursor_resume(struct pulse_hreq *r)
{
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    struct fetch_state *q = r->hstate;
    if (st == PULSE_OK) {
        q->offset = q->cursor.offset;
    } else if (st != PULSE_CURSOR_NOT_FOUND) {
        struct pulse_fetch_pos none;
        memset(&none, 0, sizeof none);
        reply_fetch_error(r, st, &none);
        return;
    }
    fetch_start(r);
}

/* The topic is known (or the lookup failed): the consumer's cursor when
 * it gives the offset, then the fetch; or the answer why not. */
static void lookup_resume(struct pulse_hreq *r)
{
    struct fetch_state *q = r->hstate;
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st != PULSE_OK) {
        if (st == PULSE_TOPIC_NOT_FOUND)
            pulse_server_reply_error(r, 404, "topic_not_found", "topic \"%s\" does not exist", r->topic);
        else
            pulse_server_reply_status(r, st, q->errmsg[0] != '\0' ? q->errmsg : NULL);
        return;
    }
    if (q->by_cursor) {
        pulse_server_call_begin(r, cursor_resume);
        st = pulse_broker_cursor_get_async(r->srv->broker, r->consumer, r->topic, r->partition, &q->cursor,
                                           pulse_server_call_done, r);
        pulse_server_call_end(r, st, st == PULSE_OK);
        return;
    }
    fetch_start(r);
}

void pulse_h_fetch_get(struct pulse_hreq *r)
{
    if (!pulse_server_path_topic(r) || !pulse_server_path_partition(r))
        return;
    if (pulse_h_stream_wanted(r)) {
        pulse_h_stream_partition(r);
        return;
    }
    struct fetch_state *q = pulse_server_hstate(r, sizeof *q, NULL);
    if (q == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    if (!parse_query(r))
        return;
    const char *consumer = pulse_server_query(r, "consumer");
    if (consumer != NULL) {
        size_t clen = strlen(consumer);
        if (!pulse_broker_name_valid(consumer, clen)) {
            pulse_server_reply_error(r, 400, "invalid_name", "consumer name breaks the name rule");
            return;
        }
        /* The consumer's cursor is the consumer's: commit on it. */
        if (!pulse_server_authorize(r, PULSE_GRANT_COMMIT, consumer))
            return;
        memcpy(r->consumer, consumer, clen + 1);
        q->by_cursor = pulse_server_query(r, "offset") == NULL && pulse_server_query(r, "timestamp") == NULL;
    }
    /* The topic first, off this thread when the backend must ask (Kafka:
     * a topic its cache does not know); the fetch goes on in
     * lookup_resume, here or on re-entry. */
    pulse_server_call_begin(r, lookup_resume);
    bool pending = false;
    pulse_status_t st = pulse_broker_topic_lookup_async(r->srv->broker, r->topic, pulse_server_call_done, r, &pending,
                                                        q->errmsg, sizeof q->errmsg);
    pulse_server_call_end(r, st, st == PULSE_OK && pending);
}
