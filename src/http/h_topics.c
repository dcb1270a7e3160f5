/* SPDX-License-Identifier: MIT */
/*
 * h_topics.c - /v1/topics and /v1/topics/{topic}: create, list, get, change
 * retention, delete. Validation is strict and happens before the broker is
 * called, so a bad request never changes stored state; the broker checks
 * again (names, ranges) and its refusals map through the errmap. Create,
 * patch and delete suspend the connection while the broker's committer or
 * admin thread does the work (fsyncs, a delete waiting for its topic's last
 * user), and answer on resume.
 */
#include <string.h>

#include "common/alloc.h"
#include "http/http_int.h"
#include "http/json.h"

/* A create's or a retention change's state (r->hstate): filled by the
 * broker's admin or committer thread before it resumes the connection. */
struct change_state {
    struct pulse_topic_info *info; /* the changed topic; freed with the request */
    char errmsg[256];              /* a create's refusal, for the answer */
};

static void change_state_dispose(void *hstate)
{
    struct change_state *cs = hstate;
    pulse_topic_info_free(cs->info);
}

/* NULL after answering 503/500 when the pool has no room for it. */
static struct change_state *change_state_new(struct pulse_hreq *r)
{
    struct change_state *cs = pulse_server_hstate(r, sizeof *cs, change_state_dispose);
    if (cs == NULL)
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
    return cs;
}

static json_t *known(int64_t v)
{
    return v < 0 ? json_null() : json_integer((json_int_t)v);
}

/* One entry of partition_stats (also the answer of
 * GET /v1/topics/{topic}/partitions/{partition}, with "topic"). */
static json_t *partition_object(const struct pulse_partition_stats *ps)
{
    return json_pack("{s:I,s:I,s:I,s:I,s:I}", "partition", (json_int_t)ps->partition, "log_start_offset",
                     (json_int_t)ps->log_start_offset, "high_watermark", (json_int_t)ps->high_watermark, "size_bytes",
                     (json_int_t)ps->size_bytes, "segments", (json_int_t)ps->segments);
}

json_t *pulse_h_topics_object(const struct pulse_topic_info *info)
{
    char created[32];
    pulse_json_rfc3339_ms(info->created_at_ms, created);
    json_t *stats = json_array();
    if (stats == NULL)
        return NULL;
    for (uint32_t i = 0; info->stats != NULL && i < info->partitions; i++) {
        if (json_array_append_new(stats, partition_object(&info->stats[i])) != 0) {
            json_decref(stats);
            return NULL;
        }
    }
    /* A negative value is one the backend does not know (Kafka: topic
     * configs and creation time are not read): null (docs/API.md). */
    return json_pack("{s:s,s:I,s:s,s:o,s:o,s:o,s:o,s:o,s:s}", "name", info->name, "partitions",
                     (json_int_t)info->partitions, "cleanup",
                     info->cleanup == PULSE_CLEANUP_COMPACT ? "compact" : "delete", "retention_ms",
                     known(info->retention_ms), "retention_bytes", known(info->retention_bytes), "segment_bytes",
                     known(info->segment_bytes), "created_at",
                     info->created_at_ms < 0 ? json_null() : json_string(created), "partition_stats", stats,
                     "compression", info->compression == PULSE_COMPRESSION_ZLIB ? "zlib" : "none");
}

/* The optional "compression" member ("none" or "zlib") into *out (left
 * alone when absent); false after answering 400. */
static bool compression_field(struct pulse_hreq *r, json_t *body, int *out)
{
    json_t *v = json_object_get(body, "compression");
    if (v == NULL)
        return true;
    const char *c = json_string_value(v);
    if (c != NULL && strlen(c) == json_string_length(v) && strcmp(c, "none") == 0) {
        *out = PULSE_COMPRESSION_NONE;
    } else if (c != NULL && strlen(c) == json_string_length(v) && strcmp(c, "zlib") == 0) {
        *out = PULSE_COMPRESSION_ZLIB;
    } else {
        pulse_server_reply_error(r, 400, "invalid_request", "\"compression\" must be \"none\" or \"zlib\"");
        return false;
    }
    return true;
}

static void reply_topic(struct pulse_hreq *r, unsigned status, struct pulse_topic_info *info)
{
    json_t *obj = pulse_h_topics_object(info);
    pulse_topic_info_free(info);
    if (obj == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_server_reply_json(r, status, obj);
}

void pulse_h_topics_list(struct pulse_hreq *r)
{
    struct pulse_topic_info **list = NULL;
    size_t n = 0;
    /* partition_stats=false leaves each topic's partition_stats out: with
     * thousands of partitions they are most of the answer (docs/API.md). */
    const char *ps = pulse_server_query(r, "partition_stats");
    bool with_stats = ps == NULL || strcmp(ps, "true") == 0;
    if (ps != NULL && with_stats == false && strcmp(ps, "false") != 0) {
        pulse_server_reply_error(r, 400, "invalid_request", "partition_stats must be true or false, not \"%s\"", ps);
        return;
    }
    pulse_status_t st = pulse_broker_topic_list(r->srv->broker, with_stats, &list, &n);
    if (st != PULSE_OK) {
        pulse_server_reply_status(r, st, NULL);
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        /* With tokens, only the topics the token has a grant on. */
        const char *nm = list[i]->name;
        if (!pulse_server_may(r, PULSE_GRANT_READ, nm) && !pulse_server_may(r, PULSE_GRANT_WRITE, nm) &&
            !pulse_server_may(r, PULSE_GRANT_ADMIN, nm))
            continue;
        json_t *obj = pulse_h_topics_object(list[i]);
        if (obj != NULL && !with_stats)
            json_object_del(obj, "partition_stats");
        if (json_array_append_new(arr, obj) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    pulse_topic_info_list_free(list, n);
    if (arr == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_server_reply_json(r, 200, json_pack("{s:o}", "topics", arr));
}

/* Answers with the broker's info of the changed topic (taken) or, failing
 * that, a fresh look-up of r->topic. */
static void reply_changed_topic(struct pulse_hreq *r, unsigned status)
{
    struct change_state *cs = r->hstate;
    struct pulse_topic_info *info = cs->info;
    pulse_status_t st = PULSE_OK;
    cs->info = NULL;
    if (info == NULL || info->stats == NULL) {
        pulse_topic_info_free(info);
        info = NULL;
        st = pulse_broker_topic_get(r->srv->broker, r->topic, true, &info);
    }
    if (st != PULSE_OK) {
        if (st == PULSE_TOPIC_NOT_FOUND)
            pulse_server_reply_error(r, 404, "topic_not_found", "topic \"%s\" does not exist", r->topic);
        else
            pulse_server_reply_status(r, st, NULL);
        return;
    }
    reply_topic(r, status, info);
}

static void create_resume(struct pulse_hreq *r)
{
    const struct change_state *cs = r->hstate;
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st == PULSE_EXISTS) {
        pulse_server_reply_error(r, 409, "topic_exists", "topic \"%s\" already exists", r->topic);
        return;
    }
    if (st != PULSE_OK) {
        pulse_server_reply_status(r, st, cs->errmsg);
        return;
    }
    reply_changed_topic(r, 201);
}

void pulse_h_topics_create(struct pulse_hreq *r)
{
    static const char *const allowed[] = {"name",          "partitions",  "cleanup", "retention_ms", "retention_bytes",
                                          "segment_bytes", "compression", NULL};
    json_t *body = pulse_server_body_object(r);
    if (body == NULL)
        return;
    if (!pulse_server_only_fields(r, body, allowed, "the topic"))
        return;
    json_t *name = json_object_get(body, "name");
    if (name == NULL || !json_is_string(name)) {
        pulse_server_reply_error(r, 400, "invalid_request", "\"name\" is required and must be a string");
        return;
    }
    const char *nm = json_string_value(name);
    size_t nlen = json_string_length(name);
    if (strlen(nm) != nlen || !pulse_broker_name_valid(nm, nlen)) {
        pulse_server_reply_error(r, 400, "invalid_name",
                                 "topic name must be 1 to 249 characters of [A-Za-z0-9._-], not \".\" or \"..\", "
                                 "not starting with \"__\"");
        return;
    }
    /* The route's grant names the topic in the body: admin on it. */
    if (!pulse_server_authorize(r, PULSE_GRANT_ADMIN, nm))
        return;
    struct pulse_topic_spec spec = {nm, -1, -1, -1, -1, -1, -1};
    int64_t v = 0;
    bool present = false;
    if (!pulse_server_int_field(r, body, "partitions", 1, 256, &v, &present))
        return;
    if (present)
        spec.partitions = (int32_t)v;
    json_t *cleanup = json_object_get(body, "cleanup");
    if (cleanup != NULL) {
        const char *c = json_string_value(cleanup);
        if (c != NULL && strcmp(c, "delete") == 0 && json_string_length(cleanup) == 6) {
            spec.cleanup = PULSE_CLEANUP_DELETE;
        } else if (c != NULL && strcmp(c, "compact") == 0 && json_string_length(cleanup) == 7) {
            spec.cleanup = PULSE_CLEANUP_COMPACT;
        } else {
            pulse_server_reply_error(r, 400, "invalid_request", "\"cleanup\" must be \"delete\" or \"compact\"");
            return;
        }
    }
    if (!compression_field(r, body, &spec.compression))
        return;
    if (!pulse_server_int_field(r, body, "retention_ms", 0, INT64_MAX, &spec.retention_ms, NULL))
        return;
    if (!pulse_server_int_field(r, body, "retention_bytes", 0, INT64_MAX, &spec.retention_bytes, NULL))
        return;
    if (!pulse_server_int_field(r, body, "segment_bytes", 1024, 2147483647, &spec.segment_bytes, &present))
        return;
    if (!present && r->srv->cfg->broker.segment_bytes != 0)
        spec.segment_bytes = (int64_t)r->srv->cfg->broker.segment_bytes;

    struct change_state *cs = change_state_new(r);
    if (cs == NULL)
        return;
    memcpy(r->topic, nm, nlen + 1);
    pulse_server_suspend(r, create_resume);
    pulse_status_t st = pulse_broker_topic_create_async(r->srv->broker, &spec, &cs->info, pulse_server_on_done, r,
                                                        cs->errmsg, sizeof cs->errmsg);
    /* No callback will come: resume from here (exactly once). */
    if (st != PULSE_OK)
        pulse_server_wake(r, st);
}

static void reply_not_found(struct pulse_hreq *r, pulse_status_t st)
{
    if (st == PULSE_TOPIC_NOT_FOUND)
        pulse_server_reply_error(r, 404, "topic_not_found", "topic \"%s\" does not exist", r->topic);
    else
        pulse_server_reply_status(r, st, NULL);
}

void pulse_h_topics_get(struct pulse_hreq *r)
{
    if (!pulse_server_path_topic(r))
        return;
    struct pulse_topic_info *info = NULL;
    pulse_status_t st = pulse_broker_topic_get(r->srv->broker, r->topic, true, &info);
    if (st != PULSE_OK) {
        reply_not_found(r, st);
        return;
    }
    reply_topic(r, 200, info);
}

static void patch_resume(struct pulse_hreq *r)
{
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st != PULSE_OK) {
        reply_not_found(r, st);
        return;
    }
    reply_changed_topic(r, 200);
}

void pulse_h_topics_patch(struct pulse_hreq *r)
{
    static const char *const allowed[] = {"retention_ms", "retention_bytes", "compression", NULL};
    if (!pulse_server_path_topic(r))
        return;
    json_t *body = pulse_server_body_object(r);
    if (body == NULL)
        return;
    if (!pulse_server_only_fields(r, body, allowed,
                                  "a topic change (only retention_ms, retention_bytes and compression)"))
        return;
    if (json_object_size(body) == 0) {
        pulse_server_reply_error(r, 400, "invalid_request",
                                 "nothing to change: give retention_ms, retention_bytes or compression");
        return;
    }
    struct pulse_topic_change chg = {-1, -1, -1};
    if (!pulse_server_int_field(r, body, "retention_ms", 0, INT64_MAX, &chg.retention_ms, NULL))
        return;
    if (!pulse_server_int_field(r, body, "retention_bytes", 0, INT64_MAX, &chg.retention_bytes, NULL))
        return;
    if (!compression_field(r, body, &chg.compression))
        return;
    struct change_state *cs = change_state_new(r);
    if (cs == NULL)
        return;
    pulse_server_suspend(r, patch_resume);
    pulse_status_t st = pulse_broker_topic_change_async(r->srv->broker, r->topic, &chg, &cs->info, pulse_server_on_done,
                                                        r);
    if (st != PULSE_OK)
        pulse_server_wake(r, st);
}

static void delete_resume(struct pulse_hreq *r)
{
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st != PULSE_OK) {
        reply_not_found(r, st);
        return;
    }
    pulse_server_reply_empty(r, 204);
}

void pulse_h_topics_delete(struct pulse_hreq *r)
{
    if (!pulse_server_path_topic(r))
        return;
    /* Answered once the topic's files are gone, which may wait for a
     * maintenance step on one of its partitions: suspended meanwhile. */
    pulse_server_suspend(r, delete_resume);
    pulse_status_t st = pulse_broker_topic_delete_async(r->srv->broker, r->topic, pulse_server_on_done, r);
    if (st != PULSE_OK)
        pulse_server_wake(r, st);
}

/* GET /v1/topics/{topic}/partitions and .../partitions/{partition}: the
 * partitions' state, as partition_stats of the topic object shows it. */
void pulse_h_topics_partitions(struct pulse_hreq *r)
{
    bool one = r->match.route == PULSE_ROUTE_PARTITION;
    if (!pulse_server_path_topic(r) || (one && !pulse_server_path_partition(r)))
        return;
    struct pulse_topic_info *info = NULL;
    pulse_status_t st = pulse_broker_topic_get(r->srv->broker, r->topic, true, &info);
    if (st != PULSE_OK) {
        reply_not_found(r, st);
        return;
    }
    if (one && r->partition >= info->partitions) {
        pulse_topic_info_free(info);
        pulse_server_reply_no_partition(r, r->topic, r->partition);
        return;
    }
    json_t *body = NULL;
    if (one) {
        body = partition_object(&info->stats[r->partition]);
        if (body != NULL && json_object_set_new(body, "topic", json_string(info->name)) != 0) {
            json_decref(body);
            body = NULL;
        }
    } else {
        json_t *arr = json_array();
        for (uint32_t i = 0; arr != NULL && i < info->partitions; i++) {
            if (json_array_append_new(arr, partition_object(&info->stats[i])) != 0) {
                json_decref(arr);
                arr = NULL;
            }
        }
        body = arr != NULL ? json_pack("{s:s,s:o}", "topic", info->name, "partitions", arr) : NULL;
    }
    pulse_topic_info_free(info);
    if (body == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_server_reply_json(r, 200, body);
}
