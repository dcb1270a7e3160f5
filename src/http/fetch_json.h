/* SPDX-License-Identifier: MIT */
/*
 * fetch_json.h - the JSON answer of a fetch, planned first and then
 * streamed a bounded chunk at a time.
 *
 * Why two phases: the answer's headers (Pulse-Next-Offset, Content-Length)
 * go out before its body, and where the answer stops depends on how large
 * each record's JSON is (an escaped control byte takes six characters, a
 * non-UTF-8 byte four thirds). So the plan walks the records and adds up
 * each record's exact JSON length without writing it, stopping before the
 * record that would take the records past max_bytes (the first record is
 * always taken) or past max_records; then the stream walks the same
 * records again and writes exactly the planned bytes, straight from the
 * records' bytes, as the socket drains. Memory: the records themselves
 * (the broker's, kept alive by the source until the answer is freed) plus
 * one record's rendered headers; never the whole JSON text.
 *
 * Rendered answers (pulse_fetchjson_render): most answers are small, and
 * for them walking and measuring every record twice cost more than the
 * text itself (docs/Performance.md "Fetch CPU per answer, round 3"). So
 * the plan may also write each record's text as it takes it, into one
 * buffer that grows through the caller's grow function (the server's
 * memory budget) up to a cap. When every planned record was written,
 * finish puts the envelope in front of them and the tail after them and
 * releases the source at once: the answer is that one buffer
 * (pulse_fetchjson_body), handed to the socket without another copy, and
 * the records' stored bytes are not kept while it drains. When the buffer
 * may not grow (cap or budget), the plan drops it and goes on measuring
 * only, and the answer streams as above.
 *
 * The records come from a source (struct pulse_fetchjson_source): the
 * broker's fetch for a real answer (h_fetch.c), anything that walks plain
 * records in a test. This module knows neither the broker nor how records
 * are stored.
 *
 * Body layout (byte for byte what the API has always answered, plus the
 * members after "records" that only some answers have):
 *
 *   {"topic":..,"partition":..,"log_start_offset":..,"high_watermark":..,
 *    "next_offset":..,"records":[ REC,REC,... ] AFTER}
 *
 * Everything but the records is the envelope, written from
 * struct pulse_fetchjson_envelope by one function (envelope_text in the
 * .c): a new member is one new field there and one printf argument. Its
 * bound, PULSE_FETCHJSON_ENVELOPE_MAX, is what docs/API.md promises.
 *
 * Thread: one request's worker at a time (MHD calls the reader on the
 * connection's thread). Locks: none.
 */
#ifndef PULSE_HTTP_FETCH_JSON_H
#define PULSE_HTTP_FETCH_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/status.h"

/* Most bytes the envelope takes (with a topic name of 249 characters and
 * every number at its widest it takes 411, its closing newline included). */
#define PULSE_FETCHJSON_ENVELOPE_MAX 512
/* Most bytes of members after "records" (pulse_fetchjson_after_records),
 * on top of the envelope. */
#define PULSE_FETCHJSON_AFTER_MAX 1024

struct pulse_buf;
struct pulse_fetchjson;
struct pulse_record;

/*
 * Where the records come from. next gives the records in offset order,
 * PULSE_OK with *rec filled (its bytes alive until release) or PULSE_EOF
 * after the last one available now (more may follow later: the walk goes
 * on from where it stopped); rewind starts the walk again from the first;
 * release frees arg. The plan walks the records once, the stream once more
 * after a rewind, so both see the same records in the same order.
 */
struct pulse_fetchjson_source {
    pulse_status_t (*next)(void *arg, struct pulse_record *rec);
    void (*rewind)(void *arg);
    void (*release)(void *arg);
    void *arg;
};

/* The members around the records. */
struct pulse_fetchjson_envelope {
    const char *topic; /* a valid topic name: needs no escaping */
    uint32_t partition;
    int64_t log_start;
    int64_t high_watermark;
    int64_t next_offset;
};

/*
 * A plan of at most max_records records and, after the first, at most
 * max_bytes of record text (the records and the commas between them);
 * start is the answer's next offset while it has no record. PULSE_NOMEM.
 */
pulse_status_t pulse_fetchjson_create(int64_t start, uint64_t max_records, uint64_t max_bytes,
                                      struct pulse_fetchjson **out);

/* Frees everything (the source handed over included). NULL is a no-op;
 * the signature suits MHD's free callback. */
void pulse_fetchjson_destroy(void *fj);

/*
 * Plans the records src gives from where the walk stands to its end (the
 * records read since the last call). Stops for good at the limits.
 * PULSE_NOMEM (sizing a record's headers).
 */
pulse_status_t pulse_fetchjson_plan(struct pulse_fetchjson *fj, const struct pulse_fetchjson_source *src);

/* True once the limits are reached: reading more records is useless. */
bool pulse_fetchjson_full(const struct pulse_fetchjson *fj);

/* The planned records, the offset after the last of them (start when
 * none), the largest rendered headers among them (stream memory) and their
 * key and value bytes (metrics). */
uint64_t pulse_fetchjson_records(const struct pulse_fetchjson *fj);
int64_t pulse_fetchjson_next(const struct pulse_fetchjson *fj);
size_t pulse_fetchjson_max_headers(const struct pulse_fetchjson *fj);
uint64_t pulse_fetchjson_payload_bytes(const struct pulse_fetchjson *fj);

/* Lets buf (the rendered text) hold n more bytes within cap: PULSE_OK, or
 * anything else to refuse (the answer then streams). The function may
 * raise buf's max; it must not touch its bytes. */
typedef pulse_status_t (*pulse_fetchjson_grow_fn)(void *arg, struct pulse_buf *buf, size_t n, size_t cap);

/*
 * Makes the plan render the records' text as it takes them, in a buffer
 * grow lets grow up to cap bytes (arg is grow's), with room for hint bytes
 * of records taken at once (the size the text will likely have). Call
 * before the first pulse_fetchjson_plan (later calls do nothing). Nothing
 * fails: a refused growth only means the answer streams.
 */
void pulse_fetchjson_render(struct pulse_fetchjson *fj, pulse_fetchjson_grow_fn grow, void *arg, size_t cap,
                            size_t hint);

/* True while every planned record is rendered (then the stream needs no
 * block and no headers room). */
bool pulse_fetchjson_rendered(const struct pulse_fetchjson *fj);

/*
 * Members to write after "records" (the fetch's "skipped"): JSON text that
 * starts with a comma, or "" for none; copied. Call before finish.
 * PULSE_TOO_LARGE past PULSE_FETCHJSON_AFTER_MAX bytes, PULSE_NOMEM.
 */
pulse_status_t pulse_fetchjson_after_records(struct pulse_fetchjson *fj, const char *json);

/*
 * Ends the plan: writes the envelope, then takes src (the one the plan
 * walked: destroy releases it), rewinds it for the stream and gives the
 * body's exact length. A rendered answer releases src at once instead
 * (its body is complete). The source changes hands only once nothing can
 * fail any more: on PULSE_NOMEM it is still the caller's to release.
 */
pulse_status_t pulse_fetchjson_finish(struct pulse_fetchjson *fj, const struct pulse_fetchjson_source *src,
                                      const struct pulse_fetchjson_envelope *env, uint64_t *body_len);

/* After finish, the whole body (body_len bytes, owned by fj until it is
 * destroyed) when the answer was rendered, else NULL. */
const uint8_t *pulse_fetchjson_body(const struct pulse_fetchjson *fj);

/*
 * Writes the next bytes of the body into out[0, room): returns how many
 * (at least one while bytes remain, given room >= PULSE_RECORD_JSON_WRITE_MIN),
 * -1 once everything was written, -2 on failure (out of memory rendering
 * a record's headers, which the caller reserved room for; or a plan the
 * records do not match, a bug).
 */
ssize_t pulse_fetchjson_read(struct pulse_fetchjson *fj, uint8_t *out, size_t room);

#endif
