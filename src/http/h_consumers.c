/* SPDX-License-Identifier: MIT */
/*
 * h_consumers.c - consumers and their cursors: list consumers, delete one,
 * list / commit (atomically, many) / get / put (one) cursors. A cursor is
 * the next offset to consume; commits are durable in the metadata store
 * before the broker reports them done, so the answer never precedes
 * durability. Commits and consumer deletes suspend the connection and run on
 * the broker's committer thread (concurrent commits share one metadata
 * write); the answer is written on resume, as for publishes. Reads of
 * cursors and consumers are asynchronous broker calls too (async.c): the
 * local backend answers them on this thread before the call returns, a
 * backend that answers later resumes the request. The topic lookups that
 * check a partition or fill a 416 answer do not wait (broker.h).
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "http/http_int.h"
#include "http/positions.h"

/* r->hstate of a cursor commit (many, or one by PUT). */
struct commit_state {
    struct pulse_cursor *cursors; /* in the pool */
    size_t n_cursors;
    char errmsg[256]; /* the broker's refusal, for the answer */
};

static json_t *cursor_object(const struct pulse_cursor *c, bool with_lag)
{
    if (with_lag)
        return json_pack("{s:s,s:I,s:I,s:I,s:I}", "topic", c->topic, "partition", (json_int_t)c->partition, "offset",
                         (json_int_t)c->offset, "high_watermark", (json_int_t)c->high_watermark, "lag",
                         (json_int_t)c->lag);
    return json_pack("{s:s,s:I,s:I}", "topic", c->topic, "partition", (json_int_t)c->partition, "offset",
                     (json_int_t)c->offset);
}

/* Answers 416 with the partition's bounds, or the plain errmap answer when
 * they cannot be read. */
static void reply_range_for(struct pulse_hreq *r, const char *prefix, const char *topic, uint32_t partition,
                            int64_t offset)
{
    struct pulse_topic_info *info = NULL;
    int64_t ls = 0;
    int64_t hw = 0;
    if (pulse_broker_topic_get(r->srv->broker, topic, true, &info) == PULSE_OK && info->stats != NULL &&
        partition < info->partitions) {
        ls = info->stats[partition].log_start_offset;
        hw = info->stats[partition].high_watermark;
    }
    pulse_topic_info_free(info);
    pulse_server_reply_range(r, prefix, offset, ls, hw);
}

/* Checks that topic exists and has the partition: 404s otherwise. */
static bool check_partition(struct pulse_hreq *r, const char *topic, uint32_t partition)
{
    struct pulse_topic_info *info = NULL;
    pulse_status_t st = pulse_broker_topic_get(r->srv->broker, topic, false, &info);
    if (st == PULSE_TOPIC_NOT_FOUND) {
        pulse_server_reply_error(r, 404, "topic_not_found", "topic \"%s\" does not exist", topic);
        return false;
    }
    if (st != PULSE_OK) {
        pulse_server_reply_status(r, st, NULL);
        return false;
    }
    uint32_t parts = info->partitions;
    pulse_topic_info_free(info);
    if (partition >= parts) {
        pulse_server_reply_no_partition(r, topic, partition);
        return false;
    }
    return true;
}

/* What a cursor or consumer read returned, in the request's pool until the
 * answer is written (or the request ends: dispose_read). */
struct read_state {
    char **names;
    size_t n;
    struct pulse_cursor *cursors;
    struct pulse_cursor cursor;
};

static void dispose_read(void *hstate)
{
    struct read_state *rs = hstate;
    pulse_broker_names_free(rs->names, rs->n);
    rs->names = NULL;
    pulse_free(rs->cursors);
    rs->cursors = NULL;
}

/* Starts a read whose out-parameters live in the returned state (r->hstate;
 * dispose_read frees what the read returned if the request ends before the
 * answer took it); NULL after answering 500. */
static struct read_state *start_read(struct pulse_hreq *r, pulse_hreq_resume_fn resume)
{
    struct read_state *rs = pulse_server_hstate(r, sizeof *rs, dispose_read);
    if (rs == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return NULL;
    }
    pulse_server_call_begin(r, resume);
    return rs;
}

static void consumers_list_resume(struct pulse_hreq *r)
{
    struct read_state *rs = r->hstate;
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st != PULSE_OK) {
        pulse_server_reply_status(r, st, NULL);
        return;
    }
    char **names = rs->names;
    size_t n = rs->n;
    rs->names = NULL;
    pulse_server_reply_names(r, "consumers", names, n);
}

void pulse_h_consumers_list(struct pulse_hreq *r)
{
    struct read_state *rs = start_read(r, consumers_list_resume);
    if (rs == NULL)
        return;
    pulse_status_t st = pulse_broker_consumer_list_async(r->srv->broker, &rs->names, &rs->n, pulse_server_call_done, r);
    pulse_server_call_end(r, st, st == PULSE_OK);
}

static void consumer_delete_resume(struct pulse_hreq *r)
{
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st != PULSE_OK) {
        pulse_server_reply_status(r, st, NULL);
        return;
    }
    pulse_server_reply_empty(r, 204);
}

void pulse_h_consumers_delete(struct pulse_hreq *r)
{
    if (!pulse_server_path_consumer(r))
        return;
    /* Suspended first: the callback may come before the call returns. */
    pulse_server_suspend(r, consumer_delete_resume);
    pulse_status_t st = pulse_broker_consumer_delete_async(r->srv->broker, r->consumer, pulse_server_on_done, r);
    if (st != PULSE_OK)
        pulse_server_wake(r, st);
}

static void cursors_list_resume(struct pulse_hreq *r)
{
    struct read_state *rs = r->hstate;
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st != PULSE_OK) {
        pulse_server_reply_status(r, st, NULL);
        return;
    }
    struct pulse_cursor *cursors = rs->cursors;
    size_t n = rs->n;
    rs->cursors = NULL;
    json_t *arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        if (json_array_append_new(arr, cursor_object(&cursors[i], true)) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    pulse_free(cursors);
    if (arr == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_server_reply_json(r, 200, json_pack("{s:s,s:o}", "consumer", r->consumer, "cursors", arr));
}

void pulse_h_consumers_cursors_list(struct pulse_hreq *r)
{
    if (!pulse_server_path_consumer(r))
        return;
    struct read_state *rs = start_read(r, cursors_list_resume);
    if (rs == NULL)
        return;
    pulse_status_t st = pulse_broker_cursor_list_async(r->srv->broker, r->consumer, &rs->cursors, &rs->n,
                                                       pulse_server_call_done, r);
    pulse_server_call_end(r, st, st == PULSE_OK);
}

/* Answers a failed commit: 416 with the bounds of the first cursor out of
 * them for PULSE_RANGE, else through the errmap with the broker's reason. */
static void reply_commit_error(struct pulse_hreq *r, pulse_status_t st)
{
    const struct commit_state *cs = r->hstate;
    const struct pulse_cursor *cursors = cs->cursors;
    if (st == PULSE_RANGE) {
        for (size_t i = 0; i < cs->n_cursors; i++) {
            struct pulse_topic_info *info = NULL;
            if (pulse_broker_topic_get(r->srv->broker, cursors[i].topic, true, &info) != PULSE_OK)
                continue;
            bool out = info->stats != NULL && cursors[i].partition < info->partitions &&
                       (cursors[i].offset < 0 || cursors[i].offset > info->stats[cursors[i].partition].high_watermark);
            pulse_topic_info_free(info);
            if (out) {
                /* A single PUT names no item: the user sent no array. */
                char prefix[32] = "";
                if (r->match.route == PULSE_ROUTE_CURSORS)
                    snprintf(prefix, sizeof prefix, "cursors[%zu]: ", i);
                reply_range_for(r, prefix, cursors[i].topic, cursors[i].partition, cursors[i].offset);
                return;
            }
        }
    }
    /* A single PUT sent no array: its error names no item. */
    const char *msg = cs->errmsg;
    if (r->match.route == PULSE_ROUTE_CURSOR && strncmp(msg, "cursors[0]: ", 12) == 0)
        msg += 12;
    pulse_server_reply_status(r, st, msg);
}

/* Keeps n cursors (in the pool) as r's commit state; NULL after answering
 * when the pool has no room for it. */
static struct commit_state *commit_state_new(struct pulse_hreq *r, size_t n)
{
    struct commit_state *cs = pulse_server_hstate(r, sizeof *cs, NULL);
    struct pulse_cursor *cursors = cs != NULL ? pulse_server_palloc(r, n * sizeof *cursors) : NULL;
    if (cursors == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return NULL;
    }
    cs->cursors = cursors;
    cs->n_cursors = n;
    return cs;
}

/* Suspends r and hands its cursors (its commit state) to the committer;
 * resume answers. */
static void start_commit(struct pulse_hreq *r, pulse_hreq_resume_fn resume)
{
    struct commit_state *cs = r->hstate;
    pulse_server_suspend(r, resume);
    pulse_status_t st = pulse_broker_cursor_commit_async(r->srv->broker, r->consumer, cs->cursors, cs->n_cursors,
                                                         pulse_server_on_done, r, cs->errmsg, sizeof cs->errmsg);
    /* No callback will come: resume from here (exactly once). */
    if (st != PULSE_OK)
        pulse_server_wake(r, st);
}

static void commit_many_resume(struct pulse_hreq *r)
{
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st != PULSE_OK) {
        reply_commit_error(r, st);
        return;
    }
    const struct commit_state *cs = r->hstate;
    json_t *out = json_array();
    for (size_t i = 0; out != NULL && i < cs->n_cursors; i++) {
        if (json_array_append_new(out, cursor_object(&cs->cursors[i], false)) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    if (out == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_server_reply_json(r, 200, json_pack("{s:s,s:o}", "consumer", r->consumer, "cursors", out));
}

static void commit_one_resume(struct pulse_hreq *r)
{
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st != PULSE_OK) {
        reply_commit_error(r, st);
        return;
    }
    const struct commit_state *cs = r->hstate;
    pulse_server_reply_json(r, 200,
                            json_pack("{s:s,s:s,s:I,s:I}", "consumer", r->consumer, "topic", r->topic, "partition",
                                      (json_int_t)r->partition, "offset", (json_int_t)cs->cursors[0].offset));
}

/*
 * A cursor's position when it is named rather than given (docs/API.md
 * "Positions"): "offset": "earliest" or "latest", or "timestamp": ms (the
 * first record at or after it), resolved now against topic/partition.
 * *named is false (nothing done) for a plain integer offset. Answers and
 * returns false on a refusal.
 */
static bool cursor_named_offset(struct pulse_hreq *r, json_t *c, const char *topic, uint32_t partition, bool *named,
                                int64_t *out)
{
    json_t *o = json_object_get(c, "offset");
    json_t *ts = json_object_get(c, "timestamp");
    struct pulse_pos at;
    *named = false;
    if (ts != NULL && o != NULL) {
        pulse_server_reply_error(r, 400, "invalid_request", "give \"offset\" or \"timestamp\", not both");
        return false;
    }
    if (ts != NULL) {
        if (!json_is_integer(ts) || json_integer_value(ts) < 0) {
            pulse_server_reply_error(r, 400, "invalid_request",
                                     "\"timestamp\" must be milliseconds since the epoch (0 or more)");
            return false;
        }
        at = (struct pulse_pos){PULSE_POS_TIME, (int64_t)json_integer_value(ts)};
    } else if (json_is_string(o)) {
        if (pulse_pos_parse(json_string_value(o), json_string_length(o), &at) != PULSE_OK ||
            (at.kind != PULSE_POS_EARLIEST && at.kind != PULSE_POS_LATEST)) {
            pulse_server_reply_error(r, 400, "invalid_request",
                                     "\"offset\" must be an integer, \"earliest\" or \"latest\"");
            return false;
        }
    } else {
        return true;
    }
    pulse_status_t st = pulse_pos_resolve(r->srv->broker, topic, partition, &at, out);
    if (st == PULSE_PARTITION_NOT_FOUND)
        pulse_server_reply_no_partition(r, topic, partition);
    else if (st != PULSE_OK)
        pulse_server_reply_status(r, st, NULL);
    *named = st == PULSE_OK;
    return st == PULSE_OK;
}

void pulse_h_consumers_cursors_commit(struct pulse_hreq *r)
{
    static const char *const top_allowed[] = {"cursors", NULL};
    static const char *const allowed[] = {"topic", "partition", "offset", "timestamp", NULL};
    if (!pulse_server_path_consumer(r))
        return;
    json_t *body = pulse_server_body_object(r);
    if (body == NULL || !pulse_server_only_fields(r, body, top_allowed, "the cursor commit"))
        return;
    json_t *arr = json_object_get(body, "cursors");
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        pulse_server_reply_error(r, 400, "invalid_request", "\"cursors\" must be a non-empty array");
        return;
    }
    size_t n = json_array_size(arr);
    if (n > (size_t)r->srv->cfg->server.max_records_per_request) {
        pulse_server_reply_error(r, 413, "payload_too_large", "too many cursors in one commit");
        return;
    }
    struct commit_state *cs = commit_state_new(r, n);
    if (cs == NULL)
        return;
    struct pulse_cursor *cursors = cs->cursors;
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(arr, i);
        if (!json_is_object(c)) {
            pulse_server_reply_error(r, 400, "invalid_request", "cursors[%zu] must be an object", i);
            return;
        }
        if (!pulse_server_only_fields(r, c, allowed, "a cursor"))
            return;
        json_t *t = json_object_get(c, "topic");
        json_t *p = json_object_get(c, "partition");
        json_t *o = json_object_get(c, "offset");
        bool named = json_is_string(o) || json_object_get(c, "timestamp") != NULL;
        if (!json_is_string(t) || !json_is_integer(p) || (!named && !json_is_integer(o))) {
            pulse_server_reply_error(r, 400, "invalid_request",
                                     "cursors[%zu] needs \"topic\" (string), \"partition\" and \"offset\" (integers)",
                                     i);
            return;
        }
        const char *tn = json_string_value(t);
        size_t tlen = json_string_length(t);
        if (strlen(tn) != tlen || !pulse_broker_name_valid(tn, tlen)) {
            pulse_server_reply_error(r, 400, "invalid_name", "cursors[%zu]: bad topic name", i);
            return;
        }
        if (json_integer_value(p) < 0 || json_integer_value(p) > (json_int_t)UINT32_MAX) {
            pulse_server_reply_error(r, 400, "invalid_request", "cursors[%zu]: bad partition", i);
            return;
        }
        memcpy(cursors[i].topic, tn, tlen + 1);
        cursors[i].partition = (uint32_t)json_integer_value(p);
        if (!named)
            cursors[i].offset = (int64_t)json_integer_value(o);
        else if (!cursor_named_offset(r, c, cursors[i].topic, cursors[i].partition, &named, &cursors[i].offset))
            return;
    }
    for (size_t i = 0; i < n; i++) {
        if (cursors[i].offset < 0) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "cursors[%zu]: ", i);
            pulse_server_reply_negative_offset(r, prefix, cursors[i].offset);
            return;
        }
    }
    start_commit(r, commit_many_resume);
}

static void cursor_get_resume(struct pulse_hreq *r)
{
    struct read_state *rs = r->hstate;
    const struct pulse_cursor c = rs->cursor;
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st == PULSE_CURSOR_NOT_FOUND) {
        pulse_server_reply_error(r, 404, "cursor_not_found", "consumer \"%s\" has no cursor on %s/%u", r->consumer,
                                 r->topic, r->partition);
        return;
    }
    if (st != PULSE_OK) {
        pulse_server_reply_status(r, st, NULL);
        return;
    }
    pulse_server_reply_json(r, 200,
                            json_pack("{s:s,s:s,s:I,s:I,s:I,s:I}", "consumer", r->consumer, "topic", r->topic,
                                      "partition", (json_int_t)r->partition, "offset", (json_int_t)c.offset,
                                      "high_watermark", (json_int_t)c.high_watermark, "lag", (json_int_t)c.lag));
}

void pulse_h_consumers_cursor_get(struct pulse_hreq *r)
{
    if (!pulse_server_path_consumer(r) || !pulse_server_path_topic(r) || !pulse_server_path_partition(r))
        return;
    if (!check_partition(r, r->topic, r->partition))
        return;
    struct read_state *rs = start_read(r, cursor_get_resume);
    if (rs == NULL)
        return;
    pulse_status_t st = pulse_broker_cursor_get_async(r->srv->broker, r->consumer, r->topic, r->partition, &rs->cursor,
                                                      pulse_server_call_done, r);
    pulse_server_call_end(r, st, st == PULSE_OK);
}

void pulse_h_consumers_cursor_put(struct pulse_hreq *r)
{
    static const char *const allowed[] = {"offset", "timestamp", NULL};
    if (!pulse_server_path_consumer(r) || !pulse_server_path_topic(r) || !pulse_server_path_partition(r))
        return;
    json_t *body = pulse_server_body_object(r);
    if (body == NULL || !pulse_server_only_fields(r, body, allowed, "the cursor"))
        return;
    json_t *o = json_object_get(body, "offset");
    bool named = json_is_string(o) || json_object_get(body, "timestamp") != NULL;
    int64_t named_offset = 0;
    if (named && (!check_partition(r, r->topic, r->partition) ||
                  !cursor_named_offset(r, body, r->topic, r->partition, &named, &named_offset)))
        return;
    if (!named && !json_is_integer(o)) {
        pulse_server_reply_error(r, 400, "invalid_request", "\"offset\" is required and must be an integer");
        return;
    }
    if (!check_partition(r, r->topic, r->partition))
        return;
    struct commit_state *cs = commit_state_new(r, 1);
    if (cs == NULL)
        return;
    struct pulse_cursor *c = cs->cursors;
    memcpy(c->topic, r->topic, sizeof c->topic);
    c->partition = r->partition;
    c->offset = named ? named_offset : (int64_t)json_integer_value(o);
    if (c->offset < 0) {
        pulse_server_reply_negative_offset(r, NULL, c->offset);
        return;
    }
    start_commit(r, commit_one_resume);
}
