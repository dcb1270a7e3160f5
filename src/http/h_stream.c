/* SPDX-License-Identifier: MIT */
/*
 * h_stream.c - event streams (Server-Sent Events): a live tail of one
 * partition (GET /v1/topics/{t}/partitions/{p}/records with Accept:
 * text/event-stream) or of every partition of a topic (GET
 * /v1/topics/{t}/events). docs/API.md "Event streams" is the contract.
 *
 * Method: the answer is an MHD response of unknown length whose content
 * reader (stream_read) runs on the connection's worker whenever MHD can
 * send more. It hands out the events already rendered; when there are
 * none it reads what the broker has past the stream's positions
 * (pulse_broker_fetch_read, at most server.stream-buffer-bytes) and renders
 * one event per record; when the broker has nothing either it sends a
 * heartbeat if one is due, or else suspends the connection and parks ONE
 * broker waiter on all the stream's positions (pulse_broker_wait_any) with
 * the next heartbeat as its deadline, and returns 0. The waiter's callback
 * (the syncer) resumes the connection and MHD calls the reader again. So a
 * waiting stream holds no thread and no buffer, only this struct and its
 * parked waiter, and a stream reads no faster than its client takes the
 * events (MHD calls the reader only when the socket took the last ones).
 *
 * Offsets a read stepped over (damaged or missing data, or records
 * retention removed at the stream's position) are an event named
 * "skipped" before the records after them (render_skips).
 *
 * Each event's id is where to resume: "P:NEXT" for a partition stream, the
 * whole vector "P:NEXT,P:NEXT,..." for a topic-wide one (positions.h). A
 * client that reconnects with Last-Event-ID (or ?last_event_id=) starts
 * exactly after the last event it got: no gap, no duplicate.
 *
 * Ends: on shutdown (the drain completes the waiter with PULSE_SHUTDOWN, or
 * the reader sees the server stopping), on topic delete (the waiter gets
 * PULSE_TOPIC_NOT_FOUND, or a read does), and when a live client falls
 * behind: a stream that was caught up once, then finds more than its
 * buffer waiting for a whole heartbeat interval, and at that point still
 * has at least half a buffer its client has not taken in its socket
 * (SIOCOUTQ), is cut. Each sends a final "end" event
 * saying why, with the id to resume from, and ends the answer.
 *
 * Memory: a stream's rendered events and its reads are reserved from the
 * server's memory budget while it holds them (released once its client
 * took them); the socket's send buffer is set to the stream buffer too.
 * Thread: the reader and the free callback run on the connection's worker;
 * on_wake on a broker thread (it only stores a status and resumes).
 */
#include <linux/sockios.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "http/http_int.h"
#include "http/positions.h"
#include "http/skips.h"

/* retry: at the start of every stream (ms a client waits to reconnect). */
#define STREAM_RETRY_MS 2000
/* The block MHD hands the reader. */
#define STREAM_BLOCK (16u * 1024)
/* A single stored unit larger than this ends the stream (it could never
 * be rendered within any sane buffer). */
#define STREAM_UNIT_MAX (64ull * 1024 * 1024)
/* Heartbeat deadlines fall on a grid of at most this (beat_deadline). */
#define STREAM_BEAT_GRID_US 250000
/* When the memory budget refuses a read, the stream tries again after. */
#define STREAM_BUDGET_RETRY_US 50000

struct stream {
    struct pulse_server *srv;
    struct MHD_Connection *conn;
    int fd; /* the connection's socket (MHD's), for SIOCOUTQ */
    char topic[PULSE_NAME_MAX + 1];
    bool topic_wide;
    size_t n;                    /* partitions streamed */
    uint32_t *parts;             /* their ids, ascending */
    int64_t *next;               /* the next offset of each */
    struct pulse_wait_pos *wpos; /* the waiter's positions (scratch) */
    char *id;                    /* the id text of the last event (scratch) */
    size_t id_cap;
    size_t rr;            /* the partition the next fill starts with */
    struct pulse_buf out; /* rendered events MHD has not taken yet */
    size_t out_at;
    uint64_t cap;            /* server.stream-buffer-bytes */
    uint64_t held;           /* taken from the memory budget */
    bool live;               /* caught up with the log at least once */
    int64_t behind_since_us; /* live and more than a buffer behind since (0: not) */
    bool ending;             /* the final event is in out: end after it */
    bool parked;             /* suspended with a waiter parked */
    int64_t beat_us;         /* server.stream-heartbeat */
    int64_t next_beat_us;
    int64_t retry_us; /* budget refused: try again at (0 = not waiting) */
    atomic_int wake;  /* the waiter's status, stored before resuming */
};

/* ---- rendering ------------------------------------------------------------ */

static void id_update(struct stream *s)
{
    pulse_pos_list_format(s->parts, s->next, s->n, s->id, s->id_cap);
}

static bool out_add(struct stream *s, const char *text, size_t len)
{
    return pulse_buf_append(&s->out, text, len) == PULSE_OK;
}

/* One record's event: id (after it), then data: the record object of a
 * fetch with the partition in front. */
static pulse_status_t render_record(struct stream *s, uint32_t part, const struct pulse_record *rec)
{
    char head[48];
    int hl = snprintf(head, sizeof head, "data: {\"partition\":%u,", part);
    size_t mark = s->out.len;
    id_update(s);
    if (!out_add(s, "id: ", 4) || !out_add(s, s->id, strlen(s->id)) || !out_add(s, "\n", 1) ||
        !out_add(s, head, (size_t)hl))
        goto nomem;
    size_t rec_at = s->out.len;
    if (pulse_record_json_append(&s->out, rec) != PULSE_OK)
        goto nomem;
    /* Drop the record object's own '{': the partition opened it. */
    memmove(s->out.data + rec_at, s->out.data + rec_at + 1, s->out.len - rec_at - 1);
    s->out.len--;
    if (!out_add(s, "\n\n", 2))
        goto nomem;
    return PULSE_OK;
nomem:
    s->out.len = mark;
    return PULSE_NOMEM;
}

/* A "skipped" event: partition i's offsets [from, to) were stepped over
 * (reason "corrupt" or "missing": damaged or lost data, docs/API.md
 * "Damaged data"; "retention": removed before the stream read them); its
 * id resumes after them. */
static pulse_status_t render_skip(struct stream *s, size_t i, int64_t from, int64_t to, const char *reason)
{
    char data[160];
    size_t mark = s->out.len;
    if (to > s->next[i])
        s->next[i] = to;
    id_update(s);
    int dl = snprintf(data, sizeof data,
                      "event: skipped\ndata: {\"partition\":%u,\"from\":%lld,\"to\":%lld,\"reason\":\"%s\"}\n\n",
                      s->parts[i], (long long)from, (long long)to, reason);
    if (!out_add(s, "id: ", 4) || !out_add(s, s->id, strlen(s->id)) || !out_add(s, "\n", 1) ||
        !out_add(s, data, (size_t)dl)) {
        s->out.len = mark;
        return PULSE_NOMEM;
    }
    return PULSE_OK;
}

/* The offsets a read of partition i stepped over before its first record:
 * below the log start (retention removed them after the stream's position
 * was set), then a damaged or missing range. One event each. */
static pulse_status_t render_skips(struct stream *s, size_t i, const struct pulse_fetch_pos *pos)
{
    pulse_status_t st = PULSE_OK;
    if (pos->start_offset > s->next[i])
        st = render_skip(s, i, s->next[i], pos->start_offset, "retention");
    struct pulse_skips k = {0};
    pulse_skips_add(&k, pos);
    pulse_skips_clip(&k, pos->next_offset);
    for (size_t j = 0; st == PULSE_OK && j < k.n; j++)
        st = render_skip(s, i, k.r[j].from, k.r[j].to, pulse_skips_reason(&k, j));
    return st;
}

/* The final event: why the stream ends and where to resume. */
static void end_event(struct stream *s, const char *reason, const char *message)
{
    char data[512];
    if (s->ending)
        return;
    id_update(s);
    int dl = snprintf(data, sizeof data, "event: end\ndata: {\"reason\":\"%s\",\"message\":\"%s\"}\n", reason, message);
    s->ending = true;
    if (!out_add(s, "id: ", 4) || !out_add(s, s->id, strlen(s->id)) || !out_add(s, "\n", 1) ||
        !out_add(s, data, (size_t)dl) || !out_add(s, "\n", 1))
        s->out.len = s->out_at; /* no memory even for that: just end */
}

static void end_for_status(struct stream *s, pulse_status_t st)
{
    if (st == PULSE_TOPIC_NOT_FOUND || st == PULSE_PARTITION_NOT_FOUND)
        end_event(s, "topic_deleted", "the topic was deleted");
    else if (st == PULSE_SHUTDOWN)
        end_event(s, "shutdown", "the server is shutting down; reconnect with the last event id");
    else if (st == PULSE_RANGE)
        end_event(s, "out_of_range", "the position is past the end of the partition (was the topic recreated?)");
    else
        end_event(s, "error", pulse_status_message(st));
}

/* ---- reading ------------------------------------------------------------- */

/* Reads partition i from its next offset (at most room bytes of stored
 * units) and renders its records. *behind: records remain after what was
 * read. */
static pulse_status_t read_partition(struct stream *s, size_t i, uint64_t room, bool *behind)
{
    struct pulse_broker *b = s->srv->broker;
    struct pulse_fetch *f = NULL;
    struct pulse_fetch_pos pos;
    struct pulse_record rec;
    uint64_t need = 0;
    memset(&pos, 0, sizeof pos);
    pulse_status_t st = pulse_broker_fetch_create(b, s->topic, s->parts[i], &f);
    if (st == PULSE_OK)
        st = pulse_broker_fetch_read(b, f, s->next[i], room, &pos, &need);
    if (st == PULSE_TOO_LARGE && need <= STREAM_UNIT_MAX)
        st = pulse_broker_fetch_read(b, f, s->next[i], need, &pos, &need);
    if (st == PULSE_OK)
        st = render_skips(s, i, &pos);
    if (st != PULSE_OK)
        goto out;
    uint64_t records = 0, bytes = 0;
    while (st == PULSE_OK && pulse_broker_fetch_next(f, &rec) == PULSE_OK) {
        if (rec.offset < s->next[i])
            continue;
        s->next[i] = rec.offset + 1;
        st = render_record(s, s->parts[i], &rec);
        records++;
        bytes += rec.value_len;
    }
    /* Offsets stepped over (damage, compaction) move the position too. */
    if (st == PULSE_OK && pos.next_offset > s->next[i])
        s->next[i] = pos.next_offset;
    *behind = s->next[i] < pos.high_watermark;
    if (records > 0)
        pulse_broker_note_fetched(b, s->topic, records, bytes);
out:
    pulse_broker_fetch_destroy(f);
    return st;
}

/* Whether the client has at least half a buffer of earlier events still
 * sitting unread in the socket (it reads slower than they come). */
static bool client_lags(const struct stream *s)
{
    int queued = 0;
    if (s->fd < 0 || ioctl(s->fd, SIOCOUTQ, &queued) != 0)
        return false;
    return (uint64_t)queued >= s->cap / 2;
}

/*
 * Renders what the broker has past the positions, up to the buffer,
 * starting with a different partition each time (so a busy one cannot
 * starve the others). Cuts a live stream whose client falls behind.
 */
static pulse_status_t fill(struct stream *s)
{
    bool any_behind = false;
    for (size_t k = 0; k < s->n && s->out.len < s->cap; k++) {
        size_t i = (s->rr + k) % s->n;
        bool behind = false;
        pulse_status_t st = read_partition(s, i, s->cap - s->out.len, &behind);
        if (st != PULSE_OK)
            return st;
        any_behind = any_behind || behind;
    }
    s->rr = (s->rr + 1) % s->n;
    /* Behind: a read stopped at the buffer's room with records left. A
     * client that reads keeps up again within moments of a burst; one
     * still behind a heartbeat interval later, with half a buffer it has
     * not taken in its socket, does not read. */
    int64_t now = pulse_clock_mono_us();
    if (!any_behind) {
        s->live = true;
        s->behind_since_us = 0;
    } else if (s->live && s->behind_since_us == 0) {
        s->behind_since_us = now;
    } else if (s->live && now - s->behind_since_us >= s->beat_us && client_lags(s)) {
        end_event(s, "cut",
                  "the client fell more than server.stream-buffer-bytes behind the live log; reconnect with the "
                  "last event id to catch up");
    }
    return PULSE_OK;
}

/* Takes the budget for one fill (kept until the client took its events). */
static bool reserve(struct stream *s)
{
    uint64_t want = 2 * s->cap;
    if (s->held >= want)
        return true;
    if (!pulse_budget_reserve(&s->srv->budget, want - s->held))
        return false;
    s->held = want;
    return true;
}

static void unreserve(struct stream *s)
{
    pulse_budget_release(&s->srv->budget, s->held);
    s->held = 0;
}

/* After a fill the reads are gone: keep only what the rendered events
 * hold until the client takes them. */
static void keep_reserved(struct stream *s)
{
    if (s->held > s->out.cap) {
        pulse_budget_release(&s->srv->budget, s->held - s->out.cap);
        s->held = s->out.cap;
    }
}

/* ---- waiting ------------------------------------------------------------- */

static void on_wake(void *arg, pulse_status_t st)
{
    struct stream *s = arg;
    atomic_store(&s->wake, (int)st);
    /* After this the worker may run the reader (and end the stream). */
    MHD_resume_connection(s->conn);
}

/* Suspends the connection and parks a waiter on every position until the
 * next heartbeat; when the broker has data already (or refuses), resumes
 * at once. The reader returns 0 after this either way. */
static void park(struct stream *s, int64_t until_us)
{
    for (size_t i = 0; i < s->n; i++)
        s->wpos[i] = (struct pulse_wait_pos){s->topic, s->parts[i], s->next[i]};
    s->parked = true;
    atomic_store(&s->wake, PULSE_OK);
    atomic_fetch_add(&s->srv->suspended, 1);
    MHD_suspend_connection(s->conn);
    bool parked = false;
    pulse_status_t st = pulse_broker_wait_any(s->srv->broker, s->wpos, s->n, until_us, on_wake, s, &parked, NULL);
    if (st != PULSE_OK || !parked)
        on_wake(s, st);
}

/* Back from a park: counts the suspension out and takes the waiter's news. */
static void unpark(struct stream *s)
{
    s->parked = false;
    atomic_fetch_sub(&s->srv->suspended, 1);
    pulse_status_t st = (pulse_status_t)atomic_load(&s->wake);
    if (st != PULSE_OK)
        end_for_status(s, st);
}

/* Hands MHD up to max bytes of what is rendered. */
static size_t take(struct stream *s, char *buf, size_t max)
{
    size_t n = s->out.len - s->out_at;
    if (n > max)
        n = max;
    memcpy(buf, s->out.data + s->out_at, n);
    s->out_at += n;
    if (s->out_at == s->out.len) {
        /* All taken: an idle stream keeps no buffer and no budget. */
        pulse_buf_fini(&s->out);
        pulse_buf_init(&s->out, SIZE_MAX);
        s->out_at = 0;
        unreserve(s);
    }
    s->next_beat_us = pulse_clock_mono_us() + s->beat_us;
    return n;
}

/*
 * The next heartbeat rounded up to a grid of a quarter heartbeat (at most
 * STREAM_BEAT_GRID_US): idle streams opened at different moments then
 * share the syncer's wake-ups for their deadlines instead of each costing
 * one (measured: 5000 idle streams, bench/stream_bench.py).
 */
static int64_t beat_deadline(const struct stream *s)
{
    int64_t grid = s->beat_us / 4 < STREAM_BEAT_GRID_US ? s->beat_us / 4 : STREAM_BEAT_GRID_US;
    if (grid <= 0)
        return s->next_beat_us;
    return (s->next_beat_us + grid - 1) / grid * grid;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *s = cls;
    (void)pos;
    if (s->parked)
        unpark(s);
    for (;;) {
        if (s->out.len > s->out_at)
            return (ssize_t)take(s, buf, max);
        if (s->ending)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (atomic_load(&s->srv->stopping)) {
            end_for_status(s, PULSE_SHUTDOWN);
            continue;
        }
        int64_t now = pulse_clock_mono_us();
        if (s->retry_us == 0 || now >= s->retry_us) {
            s->retry_us = 0;
            if (reserve(s)) {
                pulse_status_t st = fill(s);
                if (st != PULSE_OK)
                    end_for_status(s, st);
                if (s->out.len > s->out_at) {
                    keep_reserved(s);
                    continue;
                }
                unreserve(s); /* nothing read: an idle stream holds no budget */
            } else {
                s->retry_us = now + STREAM_BUDGET_RETRY_US;
            }
        }
        if (now >= s->next_beat_us) {
            if (!out_add(s, ": heartbeat\n\n", 13))
                end_for_status(s, PULSE_NOMEM);
            continue;
        }
        park(s, s->retry_us != 0 && s->retry_us < s->next_beat_us ? s->retry_us : beat_deadline(s));
        return 0;
    }
}

static void stream_free(void *cls)
{
    struct stream *s = cls;
    if (s == NULL)
        return;
    unreserve(s);
    atomic_fetch_sub(&s->srv->streams, 1);
    pulse_buf_fini(&s->out);
    pulse_free(s->parts);
    pulse_free(s->next);
    pulse_free(s->wpos);
    pulse_free(s->id);
    pulse_free(s);
}

/* ---- starting a stream ------------------------------------------------------ */

static struct stream *stream_create(struct pulse_hreq *r, size_t n)
{
    struct stream *s = pulse_calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->srv = r->srv;
    s->conn = r->conn;
    s->fd = -1;
    s->n = n;
    s->cap = r->srv->cfg->server.stream_buffer_bytes;
    s->beat_us = r->srv->cfg->server.stream_heartbeat_ms * 1000;
    s->id_cap = PULSE_POS_LIST_TEXT_MAX(n);
    snprintf(s->topic, sizeof s->topic, "%s", r->topic);
    atomic_init(&s->wake, PULSE_OK);
    pulse_buf_init(&s->out, SIZE_MAX);
    s->parts = pulse_calloc(n, sizeof *s->parts);
    s->next = pulse_calloc(n, sizeof *s->next);
    s->wpos = pulse_calloc(n, sizeof *s->wpos);
    s->id = pulse_malloc(s->id_cap);
    if (s->parts == NULL || s->next == NULL || s->wpos == NULL || s->id == NULL) {
        pulse_free(s->parts);
        pulse_free(s->next);
        pulse_free(s->wpos);
        pulse_free(s->id);
        pulse_free(s);
        return NULL;
    }
    return s;
}

static void reply_position_error(struct pulse_hreq *r, pulse_status_t st, uint32_t part, const char *err)
{
    if (st == PULSE_TOPIC_NOT_FOUND)
        pulse_server_reply_error(r, 404, "topic_not_found", "topic \"%s\" does not exist", r->topic);
    else if (st == PULSE_PARTITION_NOT_FOUND)
        pulse_server_reply_error(r, 404, "partition_not_found", "%s", err != NULL ? err : "no such partition");
    else if (st == PULSE_INVALID)
        pulse_server_reply_error(r, 400, "invalid_request", "%s", err);
    else
        pulse_server_reply_status(r, st, NULL);
    (void)part;
}

/*
 * The default start of every partition: from= (earliest, latest, an
 * offset, <ms>ms), or offset= (earliest, latest, an offset), or
 * timestamp=<ms>; latest when none is given. Answers 400 and returns false.
 */
static bool start_default(struct pulse_hreq *r, struct pulse_pos *out)
{
    const char *from = pulse_server_query(r, "from");
    const char *off = pulse_server_query(r, "offset");
    const char *ts = pulse_server_query(r, "timestamp");
    int given = (from != NULL) + (off != NULL) + (ts != NULL);
    int64_t ms = 0;
    *out = (struct pulse_pos){PULSE_POS_LATEST, 0};
    if (given > 1) {
        pulse_server_reply_error(r, 400, "invalid_request", "give one of from, offset and timestamp");
        return false;
    }
    if (from != NULL && pulse_pos_parse(from, strlen(from), out) != PULSE_OK) {
        pulse_server_reply_error(r, 400, "invalid_request",
                                 "query parameter from must be earliest, latest, an offset or a time as <ms>ms");
        return false;
    }
    if (off != NULL && (pulse_pos_parse(off, strlen(off), out) != PULSE_OK || out->kind == PULSE_POS_TIME)) {
        pulse_server_reply_error(r, 400, "invalid_request",
                                 "query parameter offset must be an integer 0 or more, earliest or latest");
        return false;
    }
    if (ts != NULL) {
        if (pulse_request_parse_i64(ts, 0, INT64_MAX, &ms) != PULSE_OK) {
            pulse_server_reply_error(r, 400, "invalid_request",
                                     "query parameter timestamp must be milliseconds since the epoch (0 or more)");
            return false;
        }
        *out = (struct pulse_pos){PULSE_POS_TIME, ms};
    }
    return true;
}

/*
 * Where each partition of s starts: the Last-Event-ID header (or
 * ?last_event_id=) wins, then ?positions= (topic-wide streams), then the
 * default for the partitions neither names. Each resolved to an offset no
 * higher than the high watermark (416 otherwise). Answers and returns
 * false on a refusal.
 */
static bool start_positions(struct pulse_hreq *r, struct stream *s, uint32_t nparts)
{
    struct pulse_pos def;
    char err[256] = "";
    const char *last = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Last-Event-ID");
    if (last == NULL)
        last = pulse_server_query(r, "last_event_id");
    const char *list = last != NULL ? last : (s->topic_wide ? pulse_server_query(r, "positions") : NULL);
    if (!start_default(r, &def))
        return false;
    struct pulse_pos_entry *given = pulse_calloc(nparts, sizeof *given);
    size_t ng = 0;
    pulse_status_t st = given == NULL ? PULSE_NOMEM : PULSE_OK;
    if (st == PULSE_OK && list != NULL && list[0] != '\0')
        st = pulse_pos_list_parse(list, nparts, given, nparts, &ng, err, sizeof err);
    for (size_t i = 0, g = 0; st == PULSE_OK && i < s->n; i++) {
        struct pulse_pos at = def;
        while (g < ng && given[g].partition < s->parts[i])
            g++;
        if (g < ng && given[g].partition == s->parts[i])
            at = given[g].pos;
        struct pulse_fetch_pos p;
        memset(&p, 0, sizeof p);
        st = pulse_pos_resolve(r->srv->broker, r->topic, s->parts[i], &at, &s->next[i]);
        if (st == PULSE_OK)
            st = pulse_broker_fetch_probe(r->srv->broker, r->topic, s->parts[i], s->next[i], &p);
        if (st == PULSE_RANGE) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "partition %u: ", s->parts[i]);
            pulse_free(given);
            pulse_server_reply_range(r, prefix, s->next[i], p.log_start, p.high_watermark);
            return false;
        }
    }
    pulse_free(given);
    if (st != PULSE_OK) {
        reply_position_error(r, st, 0, err);
        return false;
    }
    return true;
}

/* Answers 200 with the stream s (taken). */
static void stream_answer(struct pulse_hreq *r, struct stream *s)
{
    char hello[160];
    int hl = snprintf(hello, sizeof hello, "retry: %d\n: pulse event stream of topic %s\n\n", STREAM_RETRY_MS,
                      s->topic);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci != NULL) {
        /* The socket holds at most about one stream buffer (the kernel
         * doubles it), so a client that stops reading is noticed. */
        int sndbuf = s->cap > (uint64_t)(1 << 30) ? 1 << 30 : (int)s->cap;
        s->fd = ci->connect_fd;
        (void)setsockopt(s->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    }
    s->next_beat_us = pulse_clock_mono_us() + s->beat_us;
    if (!out_add(s, hello, (size_t)hl)) {
        stream_free(s);
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_read, s,
                                                                  stream_free);
    if (resp == NULL) {
        stream_free(s);
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    /* Proxies that buffer answers (nginx) pass this one through at once. */
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    pulse_server_reply(r, 200, resp, PULSE_MEDIA_EVENTS);
}

/* Counts a stream in, or answers 503 past server.stream-max. */
static bool stream_admit(struct pulse_hreq *r)
{
    long max = (long)r->srv->cfg->server.stream_max;
    if (atomic_fetch_add(&r->srv->streams, 1) >= max) {
        atomic_fetch_sub(&r->srv->streams, 1);
        r->retry_after = 1;
        pulse_server_reply_error(r, 503, "unavailable",
                                 "%ld event streams are open, the most server.stream-max allows; retry later", max);
        return false;
    }
    return true;
}

/* Starts a stream over parts[0..n) of r->topic (which has nparts). */
static void stream_start(struct pulse_hreq *r, const uint32_t *parts, size_t n, uint32_t nparts, bool topic_wide)
{
    if (!stream_admit(r))
        return;
    struct stream *s = stream_create(r, n);
    if (s == NULL) {
        atomic_fetch_sub(&r->srv->streams, 1);
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    s->topic_wide = topic_wide;
    memcpy(s->parts, parts, n * sizeof *parts);
    if (!start_positions(r, s, nparts)) {
        stream_free(s);
        return;
    }
    stream_answer(r, s);
}

bool pulse_h_stream_wanted(struct pulse_hreq *r)
{
    const char *accept = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    return accept != NULL && strstr(accept, PULSE_MEDIA_EVENTS) != NULL;
}

void pulse_h_stream_partition(struct pulse_hreq *r)
{
    struct pulse_topic_info *info = NULL;
    pulse_status_t st = pulse_broker_topic_get(r->srv->broker, r->topic, false, &info);
    if (st != PULSE_OK) {
        reply_position_error(r, st, 0, NULL);
        return;
    }
    uint32_t nparts = info->partitions;
    pulse_topic_info_free(info);
    if (r->partition >= nparts) {
        pulse_server_reply_no_partition(r, r->topic, r->partition);
        return;
    }
    stream_start(r, &r->partition, 1, nparts, false);
}

void pulse_h_stream_topic(struct pulse_hreq *r)
{
    struct pulse_topic_info *info = NULL;
    if (!pulse_server_path_topic(r))
        return;
    const char *accept = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    if (accept != NULL && strstr(accept, PULSE_MEDIA_EVENTS) == NULL && strstr(accept, "*/*") == NULL &&
        strstr(accept, "text/*") == NULL) {
        pulse_server_reply_error(r, 406, "not_acceptable", "this resource is only available as %s", PULSE_MEDIA_EVENTS);
        return;
    }
    pulse_status_t st = pulse_broker_topic_get(r->srv->broker, r->topic, false, &info);
    if (st != PULSE_OK) {
        reply_position_error(r, st, 0, NULL);
        return;
    }
    uint32_t nparts = info->partitions;
    pulse_topic_info_free(info);
    uint32_t *parts = pulse_calloc(nparts, sizeof *parts);
    if (parts == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    for (uint32_t p = 0; p < nparts; p++)
        parts[p] = p;
    stream_start(r, parts, nparts, nparts, true);
    pulse_free(parts);
}
