/* SPDX-License-Identifier: MIT */
/*
 * json.h - JSON mapping helpers of the HTTP layer: RFC 3339 timestamps, the
 * error body shape of the contract, and jansson serialisation. UTF-8,
 * base64 and JSON string escaping are common/text.h; a record's JSON text
 * is common/record.h.
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
