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

struct json_t;
struct pulse_buf;
struct pulse_record_view;

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

#endif
