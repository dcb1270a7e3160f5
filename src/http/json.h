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
