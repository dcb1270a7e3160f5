/* SPDX-License-Identifier: MIT */
/*
 * json.h - JSON mapping helpers of the HTTP layer: base64 for bytes that are
 * not UTF-8, RFC 3339 timestamps, and the error body shape of the contract.
 *
 * Thread: any. Locks: none.
 */
#ifndef PULSE_HTTP_JSON_H
#define PULSE_HTTP_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "storage/batch.h"

struct json_t;
struct pulse_buf;

/* Strict UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF): exactly what jansson accepts in a string. */
bool pulse_json_utf8_valid(const uint8_t *s, size_t n);

/* Appends p[0, n), which must be valid UTF-8, as a JSON string with quotes,
 * escaped byte for byte as jansson's compact dump escapes it. */
pulse_status_t pulse_json_append_string(struct pulse_buf *out, const uint8_t *p, size_t n);

/*
 * Appends one fetched record as the API's JSON record object:
 * {"offset":..,"timestamp":..,"key"|"key_base64":..,"value"|"value_base64":..,"headers":{..}}.
 * Keys and values that are valid UTF-8 are strings, others base64, null
 * stays null; header values likewise, header names that are empty, hold a
 * NUL or are not UTF-8 are left out, and a repeated name keeps its first
 * place with its last value (jansson's object semantics, which the output
 * matches byte for byte). PULSE_NOMEM / PULSE_TOO_LARGE from the buffer.
 */
pulse_status_t pulse_json_append_record(struct pulse_buf *out, const struct pulse_record_view *rv);

/*
 * The same record text, written a bounded piece at a time (a streamed
 * fetch answer): pulse_json_record_begin, then pulse_json_record_write
 * until *done, then pulse_json_record_end. The bytes rv points to must stay
 * alive and unchanged until the end. The writer owns at most the record's
 * rendered headers (see pulse_json_record_size); everything else is
 * written straight from the record's bytes.
 */
struct pulse_json_record_writer {
    struct pulse_record_view rv;
    bool key_text;   /* key is UTF-8: a string; else base64 */
    bool value_text; /* likewise for the value */
    char open[80];   /* {"offset":N,"timestamp":T */
    size_t open_len;
    char *headers; /* rendered header object (pulse_free), NULL for {} */
    size_t headers_len;
    unsigned part; /* next piece to write */
    size_t at;     /* progress inside it (input bytes for escaped/base64) */
};

/* Room that always lets pulse_json_record_write make progress (the
 * longest unit it never splits: a \u00XX escape). */
#define PULSE_JSON_WRITE_MIN 6

/*
 * The exact length of the record's text (as pulse_json_append_record
 * writes it) and of its rendered headers (0 when it has none: "{}"),
 * computed without writing it. PULSE_NOMEM.
 */
pulse_status_t pulse_json_record_size(const struct pulse_record_view *rv, size_t *len, size_t *headers_len);

/* Prepares w for rv (renders its headers: PULSE_NOMEM). Call
 * pulse_json_record_end even on failure. */
pulse_status_t pulse_json_record_begin(struct pulse_json_record_writer *w, const struct pulse_record_view *rv);

/*
 * Writes the next bytes of the record into out[0, room) and returns how
 * many; never splits an escape or a base64 group, so it may stop short of
 * room, but writes at least one byte when room >= PULSE_JSON_WRITE_MIN and
 * the record is not done. *done once the whole text is written.
 */
size_t pulse_json_record_write(struct pulse_json_record_writer *w, uint8_t *out, size_t room, bool *done);

/* Frees what the writer holds. */
void pulse_json_record_end(struct pulse_json_record_writer *w);

/* Characters (without NUL) that the base64 of n bytes takes. */
size_t pulse_json_b64_encoded_len(size_t n);

/* Standard alphabet with '=' padding; writes encoded_len(n) chars and a NUL
 * into out, which must hold encoded_len(n) + 1 bytes. */
void pulse_json_b64_encode(const uint8_t *in, size_t n, char *out);

/*
 * Decodes standard base64 (padding required, no blanks) into a new buffer
 * (*out, pulse_free; non-NULL even for zero bytes). PULSE_INVALID for a
 * character outside the alphabet, bad padding or a dangling final
 * character; PULSE_NOMEM.
 */
pulse_status_t pulse_json_b64_decode(const char *in, size_t len, uint8_t **out, size_t *out_len);

/* "2026-11-29T20:00:00.123Z" for ms since the epoch; out holds 32 bytes. */
void pulse_json_rfc3339_ms(int64_t ms, char out[32]);

/*
 * A new {"error":{"code":code,"message":message}} object; NULL on NOMEM.
 * The caller owns the reference.
 */
struct json_t *pulse_json_error(const char *code, const char *message);

/*
 * Serialises v compactly (JSON_COMPACT, plus JSON_ENCODE_ANY for scalars)
 * into a new pulse_malloc buffer (*out, not NUL-terminated; the caller
 * pulse_frees). extra_flags are ORed in (e.g. JSON_PRESERVE_ORDER).
 * PULSE_NOMEM or PULSE_INVALID (jansson refused).
 */
pulse_status_t pulse_json_dump(const struct json_t *v, size_t extra_flags, char **out, size_t *out_len);

/* The same text in two steps, for callers that keep it in memory of their
 * own: its exact size (0 when jansson refuses v), then the text written
 * into out[0, n) where n is that size (false when jansson refuses). */
size_t pulse_json_dump_size(const struct json_t *v, size_t extra_flags);
bool pulse_json_dump_into(const struct json_t *v, size_t extra_flags, char *out, size_t n);

#endif
