/* SPDX-License-Identifier: MIT */
/*
 * server_input.c - reading a request for its handler: the JSON body (parsed
 * with every allocation charged to the request's memory budget), query
 * arguments, the {topic}/{consumer}/{partition} path parameters, and the
 * validators of JSON fields. Each helper that finds the input bad answers
 * 400 itself and tells the handler to stop, so a bad request never reaches
 * the broker.
 */
#include <string.h>

#include "http/http_int.h"
#include "http/server_int.h"

json_t *pulse_server_body_object(struct pulse_hreq *r)
{
    json_error_t jerr;
    const char *data = r->body.data != NULL ? (const char *)r->body.data : "";
    struct pulse_hreq *prev = pulse_server_json_begin(r);
    json_t *doc = json_loadb(data, r->body.len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    pulse_server_json_end(prev);
    if (doc == NULL && r->mem_refused) {
        pulse_server_reply_refused(r);
        return NULL;
    }
    if (doc == NULL) {
        pulse_server_reply_error(r, 400, "invalid_request", "malformed JSON body: %s", jerr.text);
        return NULL;
    }
    if (!json_is_object(doc)) {
        json_decref(doc);
        pulse_server_reply_error(r, 400, "invalid_request", "the request body must be a JSON object");
        return NULL;
    }
    json_decref(r->doc);
    r->doc = doc;
    return doc;
}

const char *pulse_server_query(struct pulse_hreq *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

bool pulse_server_query_int(struct pulse_hreq *r, const char *name, int64_t min, int64_t max, int64_t *out)
{
    const char *v = pulse_server_query(r, name);
    if (v == NULL)
        return true;
    if (pulse_request_parse_i64(v, min, max, out) != PULSE_OK) {
        pulse_server_reply_error(r, 400, "invalid_request", "query parameter %s must be an integer in %lld..%lld", name,
                                 (long long)min, (long long)max);
        return false;
    }
    return true;
}

static bool path_name(struct pulse_hreq *r, const struct pulse_route_param *prm, char *dst, const char *what)
{
    if (prm->p == NULL || !pulse_broker_name_valid(prm->p, prm->len) || prm->len > PULSE_NAME_MAX) {
        pulse_server_reply_error(r, 400, "invalid_name",
                                 "%s name must be 1 to 249 characters of [A-Za-z0-9._-], not \".\" or \"..\", "
                                 "not starting with \"__\"",
                                 what);
        return false;
    }
    memcpy(dst, prm->p, prm->len);
    dst[prm->len] = '\0';
    return true;
}

bool pulse_server_path_topic(struct pulse_hreq *r)
{
    return path_name(r, &r->match.topic, r->topic, "topic");
}

bool pulse_server_path_consumer(struct pulse_hreq *r)
{
    return path_name(r, &r->match.consumer, r->consumer, "consumer");
}

bool pulse_server_path_partition(struct pulse_hreq *r)
{
    char text[24];
    int64_t v = 0;
    const struct pulse_route_param *prm = &r->match.partition;
    if (prm->p == NULL || prm->len == 0 || prm->len >= sizeof text)
        goto bad;
    memcpy(text, prm->p, prm->len);
    text[prm->len] = '\0';
    if (text[0] == '-' || pulse_request_parse_i64(text, 0, UINT32_MAX, &v) != PULSE_OK)
        goto bad;
    r->partition = (uint32_t)v;
    return true;
bad:
    pulse_server_reply_error(r, 400, "invalid_request", "partition must be a non-negative integer");
    return false;
}

bool pulse_server_only_fields(struct pulse_hreq *r, json_t *obj, const char *const *allowed, const char *what)
{
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i] != NULL; i++)
            if (strcmp(key, allowed[i]) == 0)
                ok = true;
        if (!ok) {
            pulse_server_reply_error(r, 400, "invalid_request", "unknown field \"%s\" in %s", key, what);
            return false;
        }
    }
    return true;
}

bool pulse_server_int_field(struct pulse_hreq *r, json_t *obj, const char *name, int64_t min, int64_t max, int64_t *out,
                            bool *present)
{
    json_t *v = json_object_get(obj, name);
    if (present != NULL)
        *present = v != NULL;
    if (v == NULL)
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        pulse_server_reply_error(r, 400, "invalid_request", "\"%s\" must be an integer in %lld..%lld", name,
                                 (long long)min, (long long)max);
        return false;
    }
    *out = (int64_t)json_integer_value(v);
    return true;
}
