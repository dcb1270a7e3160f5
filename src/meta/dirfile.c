/* SPDX-License-Identifier: MIT */
/*
 * dirfile.c - encoding of the data directory's own metadata files (see
 * dirfile.h and docs/Format.md section 4).
 *
 * Method: the writer builds the JSON object (the store's codec for a topic,
 * plus "format"), dumps it compactly with sorted keys, computes the CRC-32C
 * of that text, adds it as "crc32c" and dumps again. The reader parses,
 * takes "crc32c" out, dumps what is left the same way and compares. jansson
 * dumps a given object to the same bytes every time (sorted keys, integers
 * in decimal, no floating point), so the check does not depend on the
 * writer's whitespace, and a hand-edited file fails it unless rewritten by
 * the tool (pulsed --adopt-topic).
 */
#include "meta/dirfile.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/crc32c.h"
#include "meta/meta.h"
#include "meta/meta_int.h"

/* CRC-32C of the compact sorted text of doc. */
static pulse_status_t doc_crc(json_t *doc, uint32_t *crc_out)
{
    char text[PULSE_DIRFILE_MAX];
    size_t n = json_dumpb(doc, text, sizeof text, JSON_COMPACT | JSON_SORT_KEYS);

    if (n == 0 || n > sizeof text)
        return PULSE_TOO_LARGE;
    *crc_out = pulse_crc32c(0, text, n);
    return PULSE_OK;
}

/* Adds "format" and "crc32c" to doc and dumps it with a newline. Steals
 * doc (NULL: the caller ran out of memory). */
static pulse_status_t seal(json_t *doc, char *buf, size_t cap, size_t *len_out)
{
    pulse_status_t st;
    uint32_t crc = 0;
    char hex[9];
    size_t n;

    if (doc == NULL)
        return PULSE_NOMEM;
    if (json_object_set_new(doc, "format", json_integer(PULSE_DIRFILE_FORMAT)) != 0) {
        st = PULSE_NOMEM;
        goto out;
    }
    st = doc_crc(doc, &crc);
    if (st != PULSE_OK)
        goto out;
    snprintf(hex, sizeof hex, "%08" PRIx32, crc);
    if (json_object_set_new(doc, "crc32c", json_string(hex)) != 0) {
        st = PULSE_NOMEM;
        goto out;
    }
    n = json_dumpb(doc, buf, cap, JSON_COMPACT | JSON_SORT_KEYS);
    if (n == 0 || n + 1 > cap) {
        st = PULSE_TOO_LARGE;
        goto out;
    }
    buf[n] = '\n';
    *len_out = n + 1;
out:
    json_decref(doc);
    return st;
}

/* Parses and verifies; *doc_out (a new reference) has "crc32c" and
 * "format" removed. */
static pulse_status_t unseal(const char *buf, size_t len, json_t **doc_out, char *errbuf, size_t errlen)
{
    pulse_status_t st = PULSE_CORRUPT;
    json_error_t jerr;
    json_t *doc = NULL;
    json_t *jcrc;
    json_t *jformat;
    char want[9];
    uint32_t crc = 0;

    if (len == 0 || len > PULSE_DIRFILE_MAX) {
        pulse_errbuf_set(errbuf, errlen, "size %zu is not 1..%d bytes", len, PULSE_DIRFILE_MAX);
        goto out;
    }
    doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (doc == NULL || !json_is_object(doc)) {
        pulse_errbuf_set(errbuf, errlen, "not a JSON object (%s)", doc == NULL ? jerr.text : "another JSON value");
        goto out;
    }
    jcrc = json_object_get(doc, "crc32c");
    if (!json_is_string(jcrc) || json_string_length(jcrc) != 8) {
        pulse_errbuf_set(errbuf, errlen, "no crc32c member");
        goto out;
    }
    memcpy(want, json_string_value(jcrc), sizeof want);
    json_object_del(doc, "crc32c");
    st = doc_crc(doc, &crc);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "too large");
        st = st == PULSE_NOMEM ? st : PULSE_CORRUPT;
        goto out;
    }
    char got[9];
    snprintf(got, sizeof got, "%08" PRIx32, crc);
    if (strcmp(got, want) != 0) {
        pulse_errbuf_set(errbuf, errlen, "checksum mismatch (stored %s, computed %s)", want, got);
        st = PULSE_CORRUPT;
        goto out;
    }
    jformat = json_object_get(doc, "format");
    if (!json_is_integer(jformat) || json_integer_value(jformat) != PULSE_DIRFILE_FORMAT) {
        pulse_errbuf_set(errbuf, errlen, "format is not %d", PULSE_DIRFILE_FORMAT);
        st = PULSE_CORRUPT;
        goto out;
    }
    json_object_del(doc, "format");
    *doc_out = doc;
    doc = NULL;
    st = PULSE_OK;
out:
    json_decref(doc);
    return st;
}

pulse_status_t pulse_dirfile_topic_encode(const struct pulse_meta_topic *t, char *buf, size_t cap, size_t *len_out)
{
    if (t->partitions == 0 || t->name[0] == '\0' || strchr(t->name, '/') != NULL)
        return PULSE_INVALID;
    return seal(pulse_meta_topic_to_doc(t), buf, cap, len_out);
}

pulse_status_t pulse_dirfile_topic_decode(const char *buf, size_t len, struct pulse_meta_topic *out, char *errbuf,
                                          size_t errlen)
{
    struct pulse_meta_topic t;
    json_t *doc = NULL;
    pulse_status_t st = unseal(buf, len, &doc, errbuf, errlen);

    if (st != PULSE_OK)
        return st;
    st = pulse_meta_topic_from_doc(doc, &t);
    json_decref(doc);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "a field is missing or out of range");
        return PULSE_CORRUPT;
    }
    *out = t;
    return PULSE_OK;
}

pulse_status_t pulse_dirfile_identity_encode(const struct pulse_meta_identity *id, char *buf, size_t cap,
                                             size_t *len_out)
{
    if (!pulse_meta_id_valid(id->cluster_id, strnlen(id->cluster_id, sizeof id->cluster_id)) ||
        !pulse_meta_id_valid(id->broker_id, strnlen(id->broker_id, sizeof id->broker_id)))
        return PULSE_INVALID;
    return seal(json_pack("{s:s, s:s}", "cluster_id", id->cluster_id, "broker_id", id->broker_id), buf, cap, len_out);
}

pulse_status_t pulse_dirfile_identity_decode(const char *buf, size_t len, struct pulse_meta_identity *out, char *errbuf,
                                             size_t errlen)
{
    struct pulse_meta_identity id;
    const char *cluster = NULL;
    const char *broker = NULL;
    json_t *doc = NULL;
    pulse_status_t st = unseal(buf, len, &doc, errbuf, errlen);

    if (st != PULSE_OK)
        return st;
    st = PULSE_CORRUPT;
    if (json_unpack(doc, "{s:s, s:s}", "cluster_id", &cluster, "broker_id", &broker) != 0 ||
        !pulse_meta_id_valid(cluster, strlen(cluster)) || !pulse_meta_id_valid(broker, strlen(broker))) {
        pulse_errbuf_set(errbuf, errlen, "cluster_id or broker_id is missing or malformed");
        goto out;
    }
    memcpy(id.cluster_id, cluster, sizeof id.cluster_id);
    memcpy(id.broker_id, broker, sizeof id.broker_id);
    *out = id;
    st = PULSE_OK;
out:
    json_decref(doc);
    return st;
}
