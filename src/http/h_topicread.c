/* SPDX-License-Identifier: MIT */
/*
 * h_topicread.c - GET /v1/topics/{topic}/records: one read over several
 * partitions of a topic, each from its own position, long-polling until
 * any of them has data (docs/API.md "Topic-wide reads").
 *
 * Positions come from ?positions=P:POS,... (only those partitions are
 * read), or from a consumer's committed cursors (?consumer=NAME: every
 * partition, from its cursor, or from offset=/timestamp= where it has none),
 * or else every partition from offset=/timestamp= (earliest by default).
 * The answer lists every partition asked for, in order, with its records
 * (the record objects of a fetch, written by common/record.h's writer), its
 * next offset and bounds, the damaged or missing offsets its read stepped
 * over ("skipped", skips.h), and "positions": the list to send next time.
 *
 * Fairness: max_records and max_bytes bound the whole answer; each
 * partition may take an equal share of both, so one busy partition cannot
 * crowd out the rest (a partition whose next record alone is larger than
 * its share still gets it when nothing else was read).
 *
 * Waits: when nothing is at any position and wait_ms > 0, the connection is
 * suspended and ONE broker waiter is parked on all the positions
 * (pulse_broker_wait_any); it fires on data at any of them, the deadline,
 * delete or shutdown, and the re-entered handler reads again and answers.
 * No thread is held while waiting.
 *
 * Memory: the answer is built whole, within max_bytes of JSON (plus one
 * record), and the reads and the text are reserved from the server's
 * memory budget first (503 when it cannot).
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "http/http_int.h"
#include "http/positions.h"
#include "http/skips.h"

#define TREAD_MAX_RECORDS 10000
#define TREAD_MAX_BYTES (64ll * 1024 * 1024)
#define TREAD_MAX_WAIT_MS 30000
/* The smallest share of max_bytes a partition's read may take. */
#define TREAD_MIN_SHARE (4u * 1024)

struct tread_state {
    uint32_t nparts;      /* of the topic */
    size_t n;             /* partitions read */
    uint32_t *parts;      /* ascending */
    int64_t *next;        /* the next offset of each */
    struct pulse_pos def; /* where partitions without a position start */
    int64_t max_records;
    int64_t max_bytes;
    int64_t wait_ms;
    bool waited;
    struct pulse_cursor *cursors; /* consumer= (broker's, pulse_free) */
    size_t n_cursors;
    struct pulse_wait_pos *wpos;
    struct pulse_buf body;
};

static void tread_dispose(void *arg)
{
    struct tread_state *q = arg;
    pulse_free(q->parts);
    pulse_free(q->next);
    pulse_free(q->cursors);
    pulse_free(q->wpos);
    pulse_buf_fini(&q->body);
}

static void reply_error(struct pulse_hreq *r, pulse_status_t st, const char *err)
{
    if (st == PULSE_TOPIC_NOT_FOUND)
        pulse_server_reply_error(r, 404, "topic_not_found", "topic \"%s\" does not exist", r->topic);
    else if (st == PULSE_PARTITION_NOT_FOUND)
        pulse_server_reply_error(r, 404, "partition_not_found", "%s", err);
    else if (st == PULSE_INVALID)
        pulse_server_reply_error(r, 400, "invalid_request", "%s", err);
    else
        pulse_server_reply_status(r, st, NULL);
}

/* ---- the answer ------------------------------------------------------------ */

/* Reads partition i (at most share bytes of stored units, share_records
 * records, and JSON while the body stays within json_cap) and appends its
 * object to the body. *records_out: how many records it added. */
static pulse_status_t read_one(struct pulse_hreq *r, struct tread_state *q, size_t i, uint64_t share,
                               int64_t share_records, size_t json_cap, bool first_read, int64_t *records_out)
{
    struct pulse_broker *b = r->srv->broker;
    struct pulse_fetch *f = NULL;
    struct pulse_fetch_pos pos;
    struct pulse_record rec;
    uint64_t need = 0, bytes = 0;
    int64_t records = 0;
    char head[PULSE_SKIPS_JSON_MAX + 160];
    memset(&pos, 0, sizeof pos);
    pulse_status_t st = pulse_broker_fetch_create(b, r->topic, q->parts[i], &f);
    if (st == PULSE_OK)
        st = pulse_broker_fetch_read(b, f, q->next[i], share, &pos, &need);
    if (st == PULSE_TOO_LARGE && first_read && need <= (uint64_t)TREAD_MAX_BYTES) {
        if (!pulse_server_mem_take(r, need)) {
            r->over_budget = true;
            st = PULSE_BUSY;
        } else {
            st = pulse_broker_fetch_read(b, f, q->next[i], need, &pos, &need);
        }
    } else if (st == PULSE_TOO_LARGE) {
        /* Its next unit does not fit this answer's share: next time. */
        st = pulse_broker_fetch_probe(b, r->topic, q->parts[i], q->next[i], &pos);
        pos.next_offset = pos.start_offset;
        pulse_broker_fetch_destroy(f);
        f = NULL;
    }
    if (st != PULSE_OK)
        goto out;
    if (pos.start_offset > q->next[i])
        q->next[i] = pos.start_offset; /* below the log start: from there */
    int hl = snprintf(head, sizeof head,
                      "%s{\"partition\":%u,\"log_start_offset\":%lld,\"high_watermark\":%lld,"
                      "\"records\":[",
                      i == 0 ? "" : ",", q->parts[i], (long long)pos.log_start, (long long)pos.high_watermark);
    st = pulse_buf_append(&q->body, head, (size_t)hl);
    bool all = true;
    while (st == PULSE_OK && f != NULL && pulse_broker_fetch_next(f, &rec) == PULSE_OK) {
        if (rec.offset < q->next[i])
            continue;
        if (records >= share_records || (records > 0 && q->body.len >= json_cap)) {
            all = false;
            break;
        }
        if (records > 0)
            st = pulse_buf_append(&q->body, ",", 1);
        if (st == PULSE_OK)
            st = pulse_record_json_append(&q->body, &rec);
        q->next[i] = rec.offset + 1;
        records++;
        bytes += rec.value_len;
    }
    /* Offsets stepped over (damage, compaction) move the position too. */
    if (st == PULSE_OK && all && pos.next_offset > q->next[i])
        q->next[i] = pos.next_offset;
    /* Damaged or missing offsets the read stepped over, before its first
     * record: listed as in a fetch (docs/API.md "Damaged data"). */
    struct pulse_skips skipped = {0};
    char skiptext[PULSE_SKIPS_JSON_MAX];
    pulse_skips_add(&skipped, &pos);
    pulse_skips_clip(&skipped, q->next[i]);
    pulse_skips_json(&skipped, skiptext, sizeof skiptext);
    hl = snprintf(head, sizeof head, "]%s,\"next_offset\":%lld}", skiptext, (long long)q->next[i]);
    if (st == PULSE_OK)
        st = pulse_buf_append(&q->body, head, (size_t)hl);
    if (records > 0)
        pulse_broker_note_fetched(b, r->topic, (uint64_t)records, bytes);
    *records_out = records;
out:
    pulse_broker_fetch_destroy(f);
    return st;
}

/* Reads every partition once and answers 200. */
static void answer(struct pulse_hreq *r)
{
    struct tread_state *q = r->hstate;
    uint64_t share = (uint64_t)q->max_bytes / q->n;
    int64_t share_records = q->max_records / (int64_t)q->n;
    int64_t total = 0;
    if (share < TREAD_MIN_SHARE)
        share = TREAD_MIN_SHARE;
    if (share_records < 1)
        share_records = 1;
    /* The reads, and the text (max_bytes and one record more). */
    if (!pulse_server_mem_take(r, share * q->n + 2 * (uint64_t)q->max_bytes)) {
        pulse_server_reply_over_budget(r);
        return;
    }
    pulse_buf_reset(&q->body);
    int hl = 0;
    char head[PULSE_NAME_MAX + 64];
    hl = snprintf(head, sizeof head, "{\"topic\":\"%s\",\"partitions\":[", r->topic);
    pulse_status_t st = pulse_buf_append(&q->body, head, (size_t)hl);
    for (size_t i = 0; st == PULSE_OK && i < q->n; i++) {
        int64_t got = 0;
        size_t json_cap = (size_t)q->max_bytes * (i + 1) / q->n;
        st = read_one(r, q, i, share, share_records, json_cap, total == 0, &got);
        total += got;
    }
    char *list = pulse_malloc(PULSE_POS_LIST_TEXT_MAX(q->n));
    if (st == PULSE_OK && list == NULL)
        st = PULSE_NOMEM;
    if (st == PULSE_OK) {
        pulse_pos_list_format(q->parts, q->next, q->n, list, PULSE_POS_LIST_TEXT_MAX(q->n));
        static const char mid[] = "],\"positions\":\"";
        if ((st = pulse_buf_append(&q->body, mid, sizeof mid - 1)) == PULSE_OK &&
            (st = pulse_buf_append(&q->body, list, strlen(list))) == PULSE_OK)
            st = pulse_buf_append(&q->body, "\"}\n", 3);
    }
    if (st != PULSE_OK) {
        pulse_free(list);
        if (st == PULSE_BUSY && r->over_budget) {
            pulse_server_reply_over_budget(r);
            return;
        }
        reply_error(r, st, "");
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(q->body.len, q->body.data, MHD_RESPMEM_MUST_COPY);
    if (resp != NULL)
        MHD_add_response_header(resp, "Pulse-Positions", list);
    pulse_free(list);
    pulse_server_reply(r, 200, resp, PULSE_MEDIA_JSON);
}

/* ---- waiting --------------------------------------------------------------- */

/* Whether any position has records at hand. */
static pulse_status_t any_ready(struct pulse_hreq *r, struct tread_state *q, bool *ready)
{
    *ready = false;
    for (size_t i = 0; i < q->n && !*ready; i++) {
        struct pulse_fetch_pos pos;
        memset(&pos, 0, sizeof pos);
        pulse_status_t st = pulse_broker_fetch_probe(r->srv->broker, r->topic, q->parts[i], q->next[i], &pos);
        if (st == PULSE_RANGE) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "partition %u: ", q->parts[i]);
            pulse_server_reply_range(r, prefix, q->next[i], pos.log_start, pos.high_watermark);
            return st;
        }
        if (st != PULSE_OK) {
            reply_error(r, st, "");
            return st;
        }
        *ready = pos.bytes > 0;
    }
    return PULSE_OK;
}

static void tread_resume(struct pulse_hreq *r)
{
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st == PULSE_TOPIC_NOT_FOUND) {
        reply_error(r, st, "");
        return;
    }
    answer(r); /* data, the deadline or shutdown: what is there */
}

static void on_wake(void *arg, pulse_status_t st)
{
    pulse_server_wake(arg, st);
}

/* Answers now, or parks one waiter on all the positions. */
static void tread_start(struct pulse_hreq *r)
{
    struct tread_state *q = r->hstate;
    bool ready = false;
    if (any_ready(r, q, &ready) != PULSE_OK)
        return;
    if (ready || q->wait_ms == 0 || atomic_load(&r->srv->stopping)) {
        answer(r);
        return;
    }
    q->wpos = pulse_calloc(q->n, sizeof *q->wpos);
    if (q->wpos == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    for (size_t i = 0; i < q->n; i++)
        q->wpos[i] = (struct pulse_wait_pos){r->topic, q->parts[i], q->next[i]};
    int64_t deadline = pulse_clock_mono_us() + q->wait_ms * 1000;
    /* Suspend first: the waiter may fire before wait_any returns. */
    pulse_server_suspend(r, tread_resume);
    bool parked = false;
    pulse_status_t st = pulse_broker_wait_any(r->srv->broker, q->wpos, q->n, deadline, on_wake, r, &parked, NULL);
    if (st != PULSE_OK || !parked)
        pulse_server_wake(r, st);
}

/* ---- the request ------------------------------------------------------------ */

/* Resolves every partition's start: its cursor (consumer=) or q->def. */
static bool resolve_starts(struct pulse_hreq *r, struct tread_state *q, const struct pulse_pos_entry *given, size_t ng)
{
    for (size_t i = 0; i < q->n; i++) {
        struct pulse_pos at = given != NULL ? given[i].pos : q->def;
        for (size_t c = 0; given == NULL && c < q->n_cursors; c++)
            if (strcmp(q->cursors[c].topic, r->topic) == 0 && q->cursors[c].partition == q->parts[i])
                at = (struct pulse_pos){PULSE_POS_OFFSET, q->cursors[c].offset};
        pulse_status_t st = pulse_pos_resolve(r->srv->broker, r->topic, q->parts[i], &at, &q->next[i]);
        if (st != PULSE_OK) {
            reply_error(r, st, "");
            return false;
        }
    }
    (void)ng;
    return true;
}

/* The partitions to read and their starts. */
static bool plan(struct pulse_hreq *r, struct tread_state *q)
{
    const char *list = pulse_server_query(r, "positions");
    struct pulse_pos_entry *given = NULL;
    size_t ng = q->nparts;
    char err[256] = "";
    if (list != NULL) {
        given = pulse_calloc(q->nparts, sizeof *given);
        pulse_status_t st = given == NULL
                                ? PULSE_NOMEM
                                : pulse_pos_list_parse(list, q->nparts, given, q->nparts, &ng, err, sizeof err);
        if (st != PULSE_OK) {
            pulse_free(given);
            reply_error(r, st, err);
            return false;
        }
    }
    q->n = ng;
    q->parts = pulse_calloc(ng, sizeof *q->parts);
    q->next = pulse_calloc(ng, sizeof *q->next);
    if (q->parts == NULL || q->next == NULL) {
        pulse_free(given);
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return false;
    }
    for (size_t i = 0; i < ng; i++)
        q->parts[i] = given != NULL ? given[i].partition : (uint32_t)i;
    bool ok = resolve_starts(r, q, given, ng);
    pulse_free(given);
    return ok;
}

static void cursors_resume(struct pulse_hreq *r)
{
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    struct tread_state *q = r->hstate;
    if (st != PULSE_OK) {
        pulse_server_reply_status(r, st, NULL);
        return;
    }
    if (plan(r, q))
        tread_start(r);
}

/* offset=earliest|latest|N or timestamp=<ms>: where partitions without a
 * position start (earliest by default). */
static bool parse_default(struct pulse_hreq *r, struct tread_state *q)
{
    const char *off = pulse_server_query(r, "offset");
    int64_t ms = -1;
    q->def = (struct pulse_pos){PULSE_POS_EARLIEST, 0};
    if (off != NULL && pulse_server_query(r, "timestamp") != NULL) {
        pulse_server_reply_error(r, 400, "invalid_request", "give offset or timestamp, not both");
        return false;
    }
    if (off != NULL && (pulse_pos_parse(off, strlen(off), &q->def) != PULSE_OK || q->def.kind == PULSE_POS_TIME)) {
        pulse_server_reply_error(r, 400, "invalid_request",
                                 "query parameter offset must be an integer 0 or more, earliest or latest");
        return false;
    }
    if (!pulse_server_query_int(r, "timestamp", 0, INT64_MAX, &ms))
        return false;
    if (ms >= 0)
        q->def = (struct pulse_pos){PULSE_POS_TIME, ms};
    return true;
}

void pulse_h_topic_read(struct pulse_hreq *r)
{
    struct pulse_topic_info *info = NULL;
    if (!pulse_server_path_topic(r))
        return;
    struct tread_state *q = pulse_server_hstate(r, sizeof *q, tread_dispose);
    if (q == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_buf_init(&q->body, SIZE_MAX);
    q->max_records = 500;
    q->max_bytes = 1024 * 1024;
    if (!pulse_server_query_int(r, "max_records", 1, TREAD_MAX_RECORDS, &q->max_records) ||
        !pulse_server_query_int(r, "max_bytes", 1, TREAD_MAX_BYTES, &q->max_bytes) ||
        !pulse_server_query_int(r, "wait_ms", 0, TREAD_MAX_WAIT_MS, &q->wait_ms) || !parse_default(r, q))
        return;
    pulse_status_t st = pulse_broker_topic_get(r->srv->broker, r->topic, false, &info);
    if (st != PULSE_OK) {
        reply_error(r, st, "");
        return;
    }
    q->nparts = info->partitions;
    pulse_topic_info_free(info);
    const char *consumer = pulse_server_query(r, "consumer");
    if (consumer != NULL && pulse_server_query(r, "positions") != NULL) {
        pulse_server_reply_error(r, 400, "invalid_request", "give positions or consumer, not both");
        return;
    }
    if (consumer == NULL) {
        if (plan(r, q))
            tread_start(r);
        return;
    }
    size_t clen = strlen(consumer);
    if (!pulse_broker_name_valid(consumer, clen)) {
        pulse_server_reply_error(r, 400, "invalid_name", "consumer name breaks the name rule");
        return;
    }
    /* The consumer's cursors are the consumer's: commit on it, as a fetch
     * with ?consumer= (h_fetch.c). */
    if (!pulse_server_authorize(r, PULSE_GRANT_COMMIT, consumer))
        return;
    memcpy(r->consumer, consumer, clen + 1);
    pulse_server_call_begin(r, cursors_resume);
    st = pulse_broker_cursor_list_async(r->srv->broker, r->consumer, &q->cursors, &q->n_cursors, pulse_server_call_done,
                                        r);
    pulse_server_call_end(r, st, st == PULSE_OK);
}
