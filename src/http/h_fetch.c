/* SPDX-License-Identifier: MIT */
/*
 * h_fetch.c - GET /v1/topics/{topic}/partitions/{partition}/records.
 *
 * Raw answers hand MHD a dup()'ed segment descriptor with an offset and a
 * length already clamped by the engine to whole, durable batches, so the
 * bytes go out by sendfile without a copy and no byte past the high
 * watermark can be served. JSON answers read CRC-verified batches into a
 * buffer and decode them; a batch that failed its CRC is never returned by
 * the engine, so never served.
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
#include "http/http_int.h"
#include "http/json.h"

#define FETCH_MAX_RECORDS 10000
#define FETCH_MAX_BYTES (64ll * 1024 * 1024)
#define FETCH_MAX_WAIT_MS 30000
/* First read of a JSON fetch; later reads grow fourfold. */
#define FETCH_FIRST_CHUNK (64u * 1024)
/* Upper bound of one JSON read: max_bytes, plus one batch, which can be as
 * large as a segment (< 2 GiB). */
#define FETCH_BUF_SLACK (2ull * 1024 * 1024 * 1024)

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

static void answer_json(struct pulse_hreq *r)
{
    struct pulse_buf buf;
    struct pulse_slice info;
    memset(&info, 0, sizeof info);
    pulse_buf_init(&buf, (size_t)r->f_max_bytes + (size_t)FETCH_BUF_SLACK);
    struct pulse_buf records;
    pulse_buf_init(&records, SIZE_MAX);
    /* Read in growing chunks rather than max_bytes at once: a JSON answer
     * usually stops at max_records long before max_bytes (default 1 MiB),
     * and every byte read is CRC-checked. Later reads never pass the
     * max_bytes budget; only the first may, by one batch, so a reader always
     * makes progress. */
    uint64_t budget = (uint64_t)r->f_max_bytes;
    uint64_t chunk = FETCH_FIRST_CHUNK;
    pulse_status_t st = pulse_broker_fetch(r->srv->broker, r->topic, r->partition, r->f_offset < 0 ? 0 : r->f_offset,
                                           budget < chunk ? budget : chunk, &buf, &info);
    if (st != PULSE_OK) {
        reply_fetch_error(r, st, &info);
        goto out;
    }
    int64_t start = info.start_offset;
    int64_t next = start;
    int64_t read_end = info.next_offset;
    uint64_t n_out = 0;
    uint64_t bytes_out = 0;
    size_t pos = 0;
    bool full = false;
    budget = buf.len >= budget ? 0 : budget - buf.len;
    for (;;) {
        while (!full && pos < buf.len) {
            struct pulse_batch_header hdr;
            if (pulse_batch_parse_header(buf.data + pos, buf.len - pos, &hdr) != PULSE_OK)
                break;
            size_t total = pulse_batch_total_size(&hdr);
            struct pulse_batch_iter it;
            if (pulse_batch_iter_init(&it, buf.data + pos, total) != PULSE_OK)
                break;
            struct pulse_record_view rv;
            while (pulse_batch_iter_next(&it, &rv) == PULSE_OK) {
                if (rv.offset < start)
                    continue;
                if ((int64_t)n_out >= r->f_max_records) {
                    full = true;
                    break;
                }
                /* Written directly, not through jansson objects: building and
                 * dumping them was most of a JSON fetch's cost. */
                if ((n_out > 0 && pulse_buf_append_u8(&records, ',') != PULSE_OK) ||
                    pulse_json_append_record(&records, &rv) != PULSE_OK) {
                    pulse_server_reply_status(r, PULSE_NOMEM, NULL);
                    goto out;
                }
                n_out++;
                bytes_out += (rv.key != NULL ? rv.key_len : 0) + (rv.value != NULL ? rv.value_len : 0);
                next = rv.offset + 1;
            }
            pos += total;
        }
        if (full || budget == 0 || pos < buf.len || read_end >= info.high_watermark)
            break;
        struct pulse_slice more;
        size_t before = buf.len;
        chunk *= 4;
        if (pulse_broker_fetch(r->srv->broker, r->topic, r->partition, read_end, budget < chunk ? budget : chunk, &buf,
                               &more) != PULSE_OK ||
            buf.len == before)
            break;
        if (buf.len - before > budget) {
            /* Only the first read may pass max_bytes. */
            buf.len = before;
            break;
        }
        budget -= buf.len - before;
        read_end = more.next_offset;
    }
    info.next_offset = read_end;
    /* Nothing at or after the start in what was read (a compacted batch
     * that ends below it): continue after the slice so readers progress. */
    if (n_out == 0 && buf.len > 0 && info.next_offset > next)
        next = info.next_offset;
    if (n_out > 0)
        pulse_broker_note_fetched(r->srv->broker, r->topic, n_out, bytes_out);

    struct pulse_buf body;
    pulse_buf_init(&body, SIZE_MAX);
    pulse_status_t bst = pulse_buf_printf(&body,
                                          "{\"topic\":\"%s\",\"partition\":%u,\"log_start_offset\":%lld,"
                                          "\"high_watermark\":%lld,\"next_offset\":%lld,\"records\":[",
                                          r->topic, (unsigned)r->partition, (long long)info.log_start,
                                          (long long)info.high_watermark, (long long)next);
    if (bst == PULSE_OK)
        bst = pulse_buf_append(&body, records.data, records.len);
    if (bst == PULSE_OK)
        bst = pulse_buf_append(&body, "]}", 2);
    if (bst != PULSE_OK) {
        pulse_buf_fini(&body);
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        goto out;
    }
    size_t len = 0;
    uint8_t *text = pulse_buf_steal(&body, &len);
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, text, pulse_free);
    if (resp == NULL) {
        pulse_free(text);
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        goto out;
    }
    add_position_headers(resp, next, info.high_watermark, info.log_start);
    pulse_server_reply(r, 200, resp, PULSE_MEDIA_JSON);
out:
    pulse_buf_fini(&records);
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
