/* SPDX-License-Identifier: MIT */
/*
 * h_publish.c - POST /v1/topics/{topic}/records in its three body forms
 * (JSON {"records": [...]}, NDJSON, raw octets).
 *
 * The records borrow their bytes from the parsed body (r->doc) or from
 * buffers in the request pool, all alive until the request completes; the
 * records, their offsets and the broker's message live in the handler's
 * own state (struct publish_state, r->hstate), in the pool too.
 *
 * Durability: the answer is sent only from publish_resume, after the
 * broker reported the batches durable (its done callback), or at once when
 * the sync mode acknowledges on write. The call goes through async.c's
 * state machine: the callback may come on this thread before publish
 * returns (the local backend lets a lone publisher lead its partition's
 * fdatasync itself and completes it there), then the answer is written
 * at once with no suspension and no trip through MHD's resume; or later
 * from another thread (a syncer, another publisher that led the sync, a
 * Kafka delivery report), then the connection is suspended and that
 * thread resumes it. publish_resume runs exactly once either way.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/text.h"
#include "http/errmap.h"
#include "http/fastpub.h"
#include "http/http_int.h"
#include "http/json.h"

/* r->hstate of a publish. */
struct publish_state {
    struct pulse_publish_record *recs;
    size_t n_recs;
    struct pulse_offset_pair *offsets; /* filled by the broker */
    char errmsg[256];                  /* the broker's refusal, for the answer */
    bool has_idem;                     /* the request carried an Idempotency-Key */
    struct pulse_publish_idem idem;    /* its key (borrowed from MHD) and the duplicate flag */
};

static struct publish_state *pub(struct pulse_hreq *r)
{
    return r->hstate;
}

static const char *const record_fields[] = {"key",     "key_base64", "value",     "value_base64",
                                            "headers", "partition",  "timestamp", NULL};

/* Bytes of a JSON string field, or base64-decoded into the pool. */
static bool decode_b64(struct pulse_hreq *r, json_t *s, const char *field, size_t idx, const uint8_t **out, size_t *len)
{
    if (!json_is_string(s)) {
        pulse_server_reply_error(r, 400, "invalid_request", "records[%zu].%s must be a string", idx, field);
        return false;
    }
    uint8_t *bytes = NULL;
    size_t n = 0;
    /* The decoded copy is made outside the pool: charge it first. */
    if (!pulse_server_mem_charge(r, json_string_length(s) / 4 * 3 + 3)) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return false;
    }
    pulse_status_t st = pulse_text_b64_decode(json_string_value(s), json_string_length(s), &bytes, &n);
    if (st == PULSE_INVALID) {
        pulse_server_reply_error(r, 400, "invalid_request", "records[%zu].%s is not valid base64", idx, field);
        return false;
    }
    if (st != PULSE_OK) {
        pulse_server_reply_status(r, st, NULL);
        return false;
    }
    uint8_t *kept = pulse_server_palloc(r, n);
    if (kept == NULL) {
        pulse_free(bytes);
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return false;
    }
    memcpy(kept, bytes, n);
    pulse_free(bytes);
    *out = kept;
    *len = n;
    return true;
}

/* The precision that prints every real inside v exactly and shortest
 * (0.1 as 0.1, not 0.10000000000000001); 0 when v holds no reals. */
static int real_precision(json_t *v, int depth)
{
    int best = 0;
    if (depth > 64)
        return 17;
    if (json_is_real(v)) {
        best = pulse_text_real_digits(json_real_value(v));
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            int p = real_precision(json_array_get(v, i), depth + 1);
            best = p > best ? p : best;
        }
    } else if (json_is_object(v)) {
        const char *k;
        json_t *m;
        json_object_foreach(v, k, m)
        {
            int p = real_precision(m, depth + 1);
            best = p > best ? p : best;
        }
    }
    return best;
}

/*
 * parse_record reads one record object in four phases, one helper each, in
 * the order the checks have always run: key, value, headers, then the
 * partition and timestamp fields. Each helper fills its fields of rec (rec
 * was zeroed by the caller), may borrow strings from obj (which lives as
 * long as the request's JSON document) or allocate from the request pool,
 * and on bad input answers the request itself (400, or 500 for a refused
 * pool allocation) and returns false: the caller then stops and returns
 * false without answering again.
 */

/* Key phase: "key" (a string or null) or "key_base64", never both. */
static bool parse_record_key(struct pulse_hreq *r, json_t *obj, size_t idx, struct pulse_publish_record *rec)
{
    json_t *key = json_object_get(obj, "key");
    json_t *key64 = json_object_get(obj, "key_base64");
    if (key != NULL && key64 != NULL) {
        pulse_server_reply_error(r, 400, "invalid_request", "records[%zu] has both key and key_base64", idx);
        return false;
    }
    if (key != NULL && !json_is_null(key)) {
        if (!json_is_string(key)) {
            pulse_server_reply_error(r, 400, "invalid_request", "records[%zu].key must be a string or null", idx);
            return false;
        }
        rec->key = (const uint8_t *)json_string_value(key);
        rec->key_len = json_string_length(key);
    } else if (key64 != NULL && !decode_b64(r, key64, "key_base64", idx, &rec->key, &rec->key_len)) {
        return false;
    }
    return true;
}

/* Value phase: exactly one of "value" (any JSON) and "value_base64". A value
 * that is neither a string nor null is kept as its compact JSON text, copied
 * into the request pool. */
static bool parse_record_value(struct pulse_hreq *r, json_t *obj, size_t idx, struct pulse_publish_record *rec)
{
    json_t *value = json_object_get(obj, "value");
    json_t *value64 = json_object_get(obj, "value_base64");
    if ((value == NULL) == (value64 == NULL)) {
        pulse_server_reply_error(r, 400, "invalid_request", "records[%zu] needs exactly one of value and value_base64",
                                 idx);
        return false;
    }
    if (value64 != NULL) {
        if (!decode_b64(r, value64, "value_base64", idx, &rec->value, &rec->value_len))
            return false;
    } else if (json_is_null(value)) {
        rec->value = NULL;
        rec->value_len = 0;
    } else if (json_is_string(value)) {
        rec->value = (const uint8_t *)json_string_value(value);
        rec->value_len = json_string_length(value);
    } else {
        /* Any other JSON is stored as its compact text, keys in the order
         * the client sent them, written straight into the pool. */
        int prec = real_precision(value, 0);
        size_t flags = JSON_PRESERVE_ORDER | (prec > 0 ? JSON_REAL_PRECISION(prec) : 0);
        size_t len = pulse_json_dump_size(value, flags);
        char *kept = len > 0 ? pulse_server_palloc(r, len) : NULL;
        if (kept == NULL || !pulse_json_dump_into(value, flags, kept, len)) {
            pulse_server_reply_status(r, len == 0 && !r->mem_refused ? PULSE_INVALID : PULSE_NOMEM, NULL);
            return false;
        }
        rec->value = (const uint8_t *)kept;
        rec->value_len = len;
    }
    return true;
}

/* Headers phase: "headers", absent, null or an object of string values. The
 * header array comes from the request pool; names and values are borrowed
 * from obj. */
static bool parse_record_headers(struct pulse_hreq *r, json_t *obj, size_t idx, struct pulse_publish_record *rec)
{
    json_t *headers = json_object_get(obj, "headers");
    if (headers == NULL || json_is_null(headers))
        return true;
    if (!json_is_object(headers)) {
        pulse_server_reply_error(r, 400, "invalid_request", "records[%zu].headers must be an object", idx);
        return false;
    }
    size_t nh = json_object_size(headers);
    struct pulse_header *hs = nh > 0 ? pulse_server_palloc(r, nh * sizeof *hs) : NULL;
    if (nh > 0 && hs == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return false;
    }
    size_t i = 0;
    const char *hk;
    json_t *hv;
    json_object_foreach(headers, hk, hv)
    {
        if (!json_is_string(hv)) {
            pulse_server_reply_error(r, 400, "invalid_request", "records[%zu].headers.%s must be a string", idx, hk);
            return false;
        }
        hs[i].key = (const uint8_t *)hk;
        hs[i].key_len = strlen(hk);
        hs[i].value = (const uint8_t *)json_string_value(hv);
        hs[i].value_len = json_string_length(hv);
        i++;
    }
    rec->headers = hs;
    rec->header_count = (uint32_t)i;
    return true;
}

/* Placement phase: the optional "partition" and "timestamp" integers. */
static bool parse_record_place(struct pulse_hreq *r, json_t *obj, struct pulse_publish_record *rec)
{
    int64_t v = 0;
    bool present = false;
    if (!pulse_server_int_field(r, obj, "partition", 0, INT32_MAX, &v, &present))
        return false;
    if (present)
        rec->partition = (int32_t)v;
    if (!pulse_server_int_field(r, obj, "timestamp", 0, INT64_MAX, &v, &present))
        return false;
    if (present) {
        rec->has_timestamp = true;
        rec->timestamp = v;
    }
    return true;
}

/* Maps one record object to rec; answers 400 and returns false when bad. */
static bool parse_record(struct pulse_hreq *r, json_t *obj, size_t idx, struct pulse_publish_record *rec)
{
    if (!json_is_object(obj)) {
        pulse_server_reply_error(r, 400, "invalid_request", "records[%zu] must be an object", idx);
        return false;
    }
    if (!pulse_server_only_fields(r, obj, record_fields, "a record"))
        return false;
    memset(rec, 0, sizeof *rec);
    rec->partition = -1;
    return parse_record_key(r, obj, idx, rec) && parse_record_value(r, obj, idx, rec) &&
           parse_record_headers(r, obj, idx, rec) && parse_record_place(r, obj, rec);
}

static bool alloc_records(struct pulse_hreq *r, size_t n)
{
    if (n == 0) {
        pulse_server_reply_error(r, 400, "invalid_request", "no records to publish");
        return false;
    }
    if (n > (size_t)r->srv->cfg->server.max_records_per_request) {
        pulse_server_reply_error(r, 413, "payload_too_large", "more than %lld records in one request",
                                 (long long)r->srv->cfg->server.max_records_per_request);
        return false;
    }
    struct publish_state *ps = pub(r);
    ps->recs = pulse_server_palloc(r, n * sizeof *ps->recs);
    ps->offsets = pulse_server_palloc(r, n * sizeof *ps->offsets);
    if (ps->recs == NULL || ps->offsets == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return false;
    }
    ps->n_recs = n;
    /* "Not stored" until the broker says otherwise: a refused publish
     * leaves them so (see publish_failed). */
    for (size_t i = 0; i < n; i++) {
        ps->offsets[i].partition = 0;
        ps->offsets[i].offset = PULSE_OFFSET_NONE;
    }
    return true;
}

/* Copies the fast path's records into the request (the array
 * alloc_records made) and their headers into the pool, each record
 * pointing at its own; answers 500 and returns false when the pool is out. */
static bool keep_fast_records(struct pulse_hreq *r, const struct pulse_publish_record *fast, size_t n,
                              const struct pulse_header *hdrs)
{
    struct publish_state *ps = pub(r);
    size_t nh = 0;
    for (size_t i = 0; i < n; i++)
        nh += fast[i].header_count;
    struct pulse_header *kept = nh > 0 ? pulse_server_palloc(r, nh * sizeof *kept) : NULL;
    if (nh > 0 && kept == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return false;
    }
    if (nh > 0)
        memcpy(kept, hdrs, nh * sizeof *kept);
    memcpy(ps->recs, fast, n * sizeof *fast);
    for (size_t i = 0; i < n; i++)
        if (ps->recs[i].header_count > 0)
            ps->recs[i].headers = kept + (fast[i].headers - hdrs);
    return true;
}

static bool parse_json_body(struct pulse_hreq *r)
{
    static const char *const allowed[] = {"records", NULL};

    /* The common shape first, without jansson (see fastpub.h); anything it
     * does not take - errors included - goes through jansson below. */
    struct pulse_publish_record *fast = NULL;
    size_t nfast = 0;
    /* Its record array, charged before it exists: a record takes at least
     * 12 bytes of body ({"value":""}), and the array grows by doubling
     * (old and new copies at once while it moves). */
    uint64_t most = r->body.len / 12 + 1;
    if (most > (uint64_t)r->srv->cfg->server.max_records_per_request)
        most = (uint64_t)r->srv->cfg->server.max_records_per_request;
    /* And its header array, bounded the same way: a header takes at least
     * 5 bytes of body ("":""), and the fast path takes a bounded number. */
    struct pulse_header *fast_hdrs = NULL;
    uint64_t most_hdrs = r->body.len / 5 + 1;
    if (most_hdrs > PULSE_FASTPUB_MAX_HEADERS)
        most_hdrs = PULSE_FASTPUB_MAX_HEADERS;
    if (!pulse_server_mem_charge(r, 3 * most * sizeof *fast + 64) ||
        !pulse_server_mem_charge(r, 3 * most_hdrs * sizeof *fast_hdrs)) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return false;
    }
    pulse_status_t fst = pulse_fastpub_parse(r->body.data, r->body.len,
                                             (size_t)r->srv->cfg->server.max_records_per_request, &fast, &nfast,
                                             &fast_hdrs);
    if (fst == PULSE_OK) {
        bool ok = alloc_records(r, nfast) && keep_fast_records(r, fast, nfast, fast_hdrs);
        pulse_free(fast);
        pulse_free(fast_hdrs);
        return ok;
    }
    if (fst == PULSE_NOMEM) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return false;
    }

    json_t *body = pulse_server_body_object(r);
    if (body == NULL || !pulse_server_only_fields(r, body, allowed, "the publish body"))
        return false;
    json_t *arr = json_object_get(body, "records");
    if (!json_is_array(arr)) {
        pulse_server_reply_error(r, 400, "invalid_request", "\"records\" is required and must be an array");
        return false;
    }
    if (!alloc_records(r, json_array_size(arr)))
        return false;
    for (size_t i = 0; i < pub(r)->n_recs; i++)
        if (!parse_record(r, json_array_get(arr, i), i, &pub(r)->recs[i]))
            return false;
    return true;
}

static bool parse_ndjson_body(struct pulse_hreq *r)
{
    json_t *lines = json_array();
    if (lines == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return false;
    }
    json_decref(r->doc);
    r->doc = lines; /* keeps every parsed line alive */
    const char *p = r->body.data != NULL ? (const char *)r->body.data : "";
    const char *end = p + r->body.len;
    size_t lineno = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl != NULL ? nl : end;
        lineno++;
        const char *q = p;
        while (q < le && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q < le) {
            if (json_array_size(lines) >= (size_t)r->srv->cfg->server.max_records_per_request) {
                pulse_server_reply_error(r, 413, "payload_too_large", "more than %lld records in one request",
                                         (long long)r->srv->cfg->server.max_records_per_request);
                return false;
            }
            json_error_t jerr;
            json_t *obj = json_loadb(q, (size_t)(le - q), JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
            if (obj == NULL && r->mem_refused) {
                pulse_server_reply_refused(r);
                return false;
            }
            if (obj == NULL) {
                pulse_server_reply_error(r, 400, "invalid_request", "line %zu: malformed JSON: %s", lineno, jerr.text);
                return false;
            }
            if (json_array_append_new(lines, obj) != 0) {
                pulse_server_reply_status(r, PULSE_NOMEM, NULL);
                return false;
            }
        }
        p = nl != NULL ? nl + 1 : end;
    }
    if (!alloc_records(r, json_array_size(lines)))
        return false;
    for (size_t i = 0; i < pub(r)->n_recs; i++)
        if (!parse_record(r, json_array_get(lines, i), i, &pub(r)->recs[i]))
            return false;
    return true;
}

static bool parse_octets_body(struct pulse_hreq *r)
{
    if (!alloc_records(r, 1))
        return false;
    struct pulse_publish_record *rec = &pub(r)->recs[0];
    memset(rec, 0, sizeof *rec);
    rec->partition = -1;
    rec->value = r->body.data != NULL ? r->body.data : (const uint8_t *)"";
    rec->value_len = r->body.len;
    const char *key = pulse_server_query(r, "key");
    if (key != NULL) {
        rec->key = (const uint8_t *)key;
        rec->key_len = strlen(key);
    }
    const char *part = pulse_server_query(r, "partition");
    if (part != NULL) {
        int64_t v = 0;
        if (pulse_request_parse_i64(part, 0, INT32_MAX, &v) != PULSE_OK) {
            pulse_server_reply_error(r, 400, "invalid_request", "partition must be a non-negative integer");
            return false;
        }
        rec->partition = (int32_t)v;
    }
    return true;
}

static void reply_no_topic(struct pulse_hreq *r)
{
    pulse_server_reply_error(r, 404, "topic_not_found",
                             "topic \"%s\" does not exist; create it first: POST /v1/topics with "
                             "{\"name\": \"%s\"}",
                             r->topic, r->topic);
}

/* A publish that failed. When some of its records were stored all the
 * same (a publish is not atomic across partitions; a Kafka cluster may
 * refuse some records of a batch), the error carries the per-record
 * results: "offsets" in request order, each {"partition", "offset"} for a
 * stored record ("offset": null when the backend did not say which) or
 * {"partition", "offset": null, "error": CODE} for one that was not
 * (docs/API.md "Per-record results"). */
static void publish_failed(struct pulse_hreq *r, pulse_status_t st)
{
    const struct publish_state *ps = pub(r);
    size_t stored = 0;
    for (size_t i = 0; i < ps->n_recs; i++)
        stored += ps->offsets[i].offset != PULSE_OFFSET_NONE;
    if (st == PULSE_TOPIC_NOT_FOUND && stored == 0) {
        reply_no_topic(r);
        return;
    }
    if (stored == 0) {
        pulse_server_reply_status(r, st, ps->errmsg);
        return;
    }
    const char *code = pulse_errmap_lookup(st)->code;
    json_t *arr = json_array();
    for (size_t i = 0; arr != NULL && i < ps->n_recs; i++) {
        const struct pulse_offset_pair *o = &ps->offsets[i];
        json_t *item = o->offset >= 0 ? json_pack("{s:I,s:I}", "partition", (json_int_t)o->partition, "offset",
                                                  (json_int_t)o->offset)
                       : o->offset == PULSE_OFFSET_UNKNOWN
                           ? json_pack("{s:I,s:n}", "partition", (json_int_t)o->partition, "offset")
                           : json_pack("{s:I,s:n,s:s}", "partition", (json_int_t)o->partition, "offset", "error", code);
        if (item == NULL || json_array_append_new(arr, item) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    json_t *extra = arr != NULL ? json_pack("{s:o}", "offsets", arr) : NULL;
    if (extra == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_server_reply_status_extra(r, st, ps->errmsg, extra);
}

/* One {"partition":P,"offset":O} of the answer, after a comma when
 * comma; PULSE_OFFSET_UNKNOWN (acknowledged, offset not reported: Kafka)
 * is null. */
static pulse_status_t append_offset(struct pulse_buf *out, bool comma, const struct pulse_offset_pair *o)
{
    static const char part[] = "{\"partition\":";
    static const char off[] = ",\"offset\":";
    char item[2 * PULSE_TEXT_INT_MAX + 32];
    size_t len = 0;
    if (comma)
        item[len++] = ',';
    memcpy(item + len, part, sizeof part - 1);
    len += sizeof part - 1;
    len += pulse_text_u64(o->partition, item + len);
    memcpy(item + len, off, sizeof off - 1);
    len += sizeof off - 1;
    if (o->offset == PULSE_OFFSET_UNKNOWN) {
        memcpy(item + len, "null", 4);
        len += 4;
    } else {
        len += pulse_text_i64(o->offset, item + len);
    }
    item[len++] = '}';
    return pulse_buf_append(out, item, len);
}

static void publish_resume(struct pulse_hreq *r)
{
    const struct publish_state *ps = pub(r);
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st != PULSE_OK) {
        publish_failed(r, st);
        return;
    }
    /* The answer is written directly rather than through jansson: it is
     * two integers per record, and building n little JSON objects to dump
     * them was a visible share of a large publish's cost. */
    struct pulse_buf out;
    pulse_buf_init(&out, SIZE_MAX);
    pulse_status_t bst = pulse_buf_reserve(&out, 16 + ps->n_recs * 48);
    if (bst == PULSE_OK)
        bst = pulse_buf_append(&out, "{\"offsets\":[", 12);
    for (size_t i = 0; bst == PULSE_OK && i < ps->n_recs; i++) {
        bst = append_offset(&out, i > 0, &ps->offsets[i]);
    }
    if (bst == PULSE_OK && ps->has_idem)
        bst = ps->idem.duplicate ? pulse_buf_append(&out, "],\"duplicate\":true}\n", 20)
                                 : pulse_buf_append(&out, "],\"duplicate\":false}\n", 21);
    else if (bst == PULSE_OK)
        bst = pulse_buf_append(&out, "]}\n", 3);
    if (bst != PULSE_OK) {
        pulse_buf_fini(&out);
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    size_t len = 0;
    uint8_t *text = pulse_buf_steal(&out, &len);
    struct MHD_Response *resp = pulse_server_json_response(r, (char *)text, len);
    if (resp == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    pulse_server_reply(r, 200, resp, PULSE_MEDIA_JSON);
}

/* The Idempotency-Key header, if any, into ps; false (answered 400) when
 * it is not 1..PULSE_IDEM_KEY_MAX visible ASCII characters. */
static bool read_idem_key(struct pulse_hreq *r, struct publish_state *ps)
{
    const char *key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Idempotency-Key");
    if (key == NULL)
        return true;
    size_t len = strlen(key);
    bool ok = len >= 1 && len <= PULSE_IDEM_KEY_MAX;
    for (size_t i = 0; ok && i < len; i++)
        ok = key[i] > 0x20 && key[i] < 0x7f;
    if (!ok) {
        pulse_server_reply_error(r, 400, "invalid_request", "Idempotency-Key must be 1 to %d visible ASCII characters",
                                 PULSE_IDEM_KEY_MAX);
        return false;
    }
    ps->has_idem = true;
    ps->idem.key = key;
    ps->idem.key_len = len;
    return true;
}

static void lookup_resume(struct pulse_hreq *r);

void pulse_h_publish_post(struct pulse_hreq *r)
{
    if (!pulse_server_path_topic(r))
        return;
    /* key and partition describe the one record of a raw body; on a JSON
     * or NDJSON body they would be ignored in silence. */
    if (r->body_kind != PULSE_BODY_OCTETS &&
        (pulse_server_query(r, "key") != NULL || pulse_server_query(r, "partition") != NULL)) {
        pulse_server_reply_error(r, 400, "invalid_request",
                                 "query parameters key and partition apply to %s bodies only; put them in the records",
                                 PULSE_MEDIA_OCTETS);
        return;
    }
    struct publish_state *ps = pulse_server_hstate(r, sizeof *ps, NULL);
    if (ps == NULL) {
        pulse_server_reply_status(r, PULSE_NOMEM, NULL);
        return;
    }
    /* Every allocation of the parse is charged to the memory budget: the
     * parsed form of a JSON body can take 80 times its text. */
    struct pulse_hreq *prev = pulse_server_json_begin(r);
    bool ok = false;
    switch (r->body_kind) {
    case PULSE_BODY_JSON:
        ok = parse_json_body(r);
        break;
    case PULSE_BODY_NDJSON:
        ok = parse_ndjson_body(r);
        break;
    case PULSE_BODY_OCTETS:
        ok = parse_octets_body(r);
        break;
    }
    pulse_server_json_end(prev);
    if (!ok || !read_idem_key(r, ps))
        return;
    /* The topic first, off this thread when the backend must ask (Kafka:
     * a topic its cache does not know); the publish follows in
     * lookup_resume, here or on re-entry. */
    pulse_server_call_begin(r, lookup_resume);
    bool pending = false;
    pulse_status_t st = pulse_broker_topic_lookup_async(r->srv->broker, r->topic, pulse_server_call_done, r, &pending,
                                                        ps->errmsg, sizeof ps->errmsg);
    pulse_server_call_end(r, st, st == PULSE_OK && pending);
}

/* The topic is known (or the lookup failed): publish, or answer why not. */
static void lookup_resume(struct pulse_hreq *r)
{
    struct publish_state *ps = pub(r);
    pulse_status_t st = (pulse_status_t)atomic_load(&r->async_status);
    if (st == PULSE_TOPIC_NOT_FOUND) {
        reply_no_topic(r);
        return;
    }
    if (st != PULSE_OK) {
        pulse_server_reply_status(r, st, ps->errmsg[0] != '\0' ? ps->errmsg : NULL);
        return;
    }
    pulse_server_call_begin(r, publish_resume);
    bool pending = false;
    st = ps->has_idem
             ? pulse_broker_publish_idem(r->srv->broker, r->topic, ps->recs, ps->n_recs, &ps->idem, ps->offsets,
                                         pulse_server_call_done, r, &pending, ps->errmsg, sizeof ps->errmsg)
             : pulse_broker_publish(r->srv->broker, r->topic, ps->recs, ps->n_recs, ps->offsets, pulse_server_call_done,
                                    r, &pending, ps->errmsg, sizeof ps->errmsg);
    /* No callback comes when it failed or did not wait (interval mode):
     * publish_resume answers st from here. */
    pulse_server_call_end(r, st, st == PULSE_OK && pending);
}
