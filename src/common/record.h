/* SPDX-License-Identifier: MIT */
/*
 * record.h - a record as a plain value, and its JSON text.
 *
 * struct pulse_record is how a record travels above the storage engine:
 * the broker hands fetched records to the HTTP layer as these (broker.h),
 * and pulse-log prints the records of a segment file as these. The bytes
 * are borrowed from whoever produced the record (a buffer of batches, a
 * message of another system) and live as long as the producer says. The
 * headers stay in the producer's own form and are walked through the
 * record's header_next function, so no producer has to copy or allocate to
 * hand a record out.
 *
 * The JSON text is the API's record object (docs/API.md "Records"):
 *   {"offset":N,"timestamp":T,"key"|"key_base64":..,"value"|"value_base64":..,"headers":{..}}
 * Keys and values that are valid UTF-8 are strings, others base64, null
 * stays null; header values likewise; header names that are empty, hold a
 * NUL or are not UTF-8 are left out; a repeated name keeps its first place
 * with its last value. That is byte for byte what jansson's compact dump of
 * the same object built with json_object_setn_new gives (the API used to be
 * written that way), which tests/unit/common/check_text.c checks against
 * jansson on random records. jansson itself is not used: the header object
 * is rendered here.
 *
 * Thread: any; the writer state belongs to its caller. Locks: none.
 */
#ifndef PULSE_COMMON_RECORD_H
#define PULSE_COMMON_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "common/text.h"

struct pulse_buf;

/* One header. As a publish input the array entry is the caller's; as a
 * fetch output it is borrowed like the record. */
struct pulse_header {
    const uint8_t *key; /* never NULL; may be empty */
    size_t key_len;
    const uint8_t *value; /* NULL: a null value */
    size_t value_len;
};

struct pulse_record;

/* Walks rec's headers: *pos starts at 0; fills *out and returns true for
 * each header in stored order, false after the last. */
typedef bool (*pulse_header_next_fn)(const struct pulse_record *rec, size_t *pos, struct pulse_header *out);

struct pulse_record {
    int64_t offset;
    int64_t timestamp;  /* ms since the epoch */
    const uint8_t *key; /* NULL: a null key */
    size_t key_len;
    const uint8_t *value; /* NULL: a null value (a tombstone when keyed) */
    size_t value_len;
    uint32_t header_count;
    pulse_header_next_fn header_next; /* NULL when header_count == 0 */
    const void *headers;              /* the producer's form, for header_next */
    size_t headers_len;
};

/* Room that always lets pulse_record_json_write make progress. */
#define PULSE_RECORD_JSON_WRITE_MIN PULSE_TEXT_UNIT_MAX

/*
 * A record's text written a bounded piece at a time (a streamed answer):
 * pulse_record_json_begin, then pulse_record_json_write until *done, then
 * pulse_record_json_end. The record's bytes must stay alive and unchanged
 * until the end. The writer owns at most the record's rendered headers (see
 * pulse_record_json_size); everything else is written straight from the
 * record's bytes. Caller's storage (not to be copied while in use: headers
 * may point into it); fields are private.
 */
/* Rendered headers up to this many bytes stay inside the writer (no
 * allocation for the few short headers most records carry). */
#define PULSE_RECORD_JSON_INLINE_HEADERS 160

struct pulse_record_json {
    struct pulse_record rec;
    bool key_text;         /* key is UTF-8: a string; else base64 */
    bool value_text;       /* likewise for the value */
    size_t key_text_len;   /* the key's escaped or base64 text (0: null) */
    size_t value_text_len; /* likewise for the value */
    char open[80];         /* {"offset":N,"timestamp":T */
    size_t open_len;
    char *headers; /* rendered header object (inline_headers or pulse_free'd), NULL for {} */
    size_t headers_len;
    unsigned part; /* next piece to write */
    size_t at;     /* progress inside it (input bytes for escaped/base64) */
    char inline_headers[PULSE_RECORD_JSON_INLINE_HEADERS];
};

/*
 * The exact length of the record's text and of its rendered headers (0
 * when it has none: "{}"), computed without writing either. PULSE_NOMEM.
 */
pulse_status_t pulse_record_json_size(const struct pulse_record *rec, size_t *len, size_t *headers_len);

/* Prepares w for rec (renders its headers: PULSE_NOMEM). Call
 * pulse_record_json_end even on failure. */
pulse_status_t pulse_record_json_begin(struct pulse_record_json *w, const struct pulse_record *rec);

/* The exact length of the text of the record w was begun for, and
 * (nullable) of its rendered headers (0 for "{}"): what
 * pulse_record_json_size says, without measuring again. */
size_t pulse_record_json_len(const struct pulse_record_json *w, size_t *headers_len);

/*
 * Writes the next bytes of the text into out[0, room) and returns how many;
 * never splits an escape or a base64 group, so it may stop short of room,
 * but writes at least one byte when room >= PULSE_RECORD_JSON_WRITE_MIN and
 * the record is not done. *done once the whole text is written.
 */
size_t pulse_record_json_write(struct pulse_record_json *w, uint8_t *out, size_t room, bool *done);

/* Frees what the writer holds. */
void pulse_record_json_end(struct pulse_record_json *w);

/* Appends the whole text to out. PULSE_NOMEM / PULSE_TOO_LARGE. */
pulse_status_t pulse_record_json_append(struct pulse_buf *out, const struct pulse_record *rec);

#endif
