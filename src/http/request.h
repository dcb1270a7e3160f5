/* SPDX-License-Identifier: MIT */
/*
 * request.h - pure helpers for reading an HTTP request: media types, Accept
 * negotiation, request ids, strict integers and gzip bodies. They take plain
 * strings and buffers (no libmicrohttpd types), so they are unit-tested on
 * their own and reused by every handler.
 *
 * Thread: any. Locks: none (pulse_request_id_generate uses an atomic).
 */
#ifndef PULSE_HTTP_REQUEST_H
#define PULSE_HTTP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_buf;

#define PULSE_REQUEST_ID_MAX 128
#define PULSE_MEDIA_JSON "application/json"
#define PULSE_MEDIA_BATCHES "application/vnd.pulse.batches"
#define PULSE_MEDIA_NDJSON "application/x-ndjson"
#define PULSE_MEDIA_OCTETS "application/octet-stream"
#define PULSE_MEDIA_EVENTS "text/event-stream"

/*
 * True when the Content-Type value ct names type (case-insensitive),
 * ignoring parameters such as "; charset=utf-8" and surrounding blanks.
 * ct NULL is false.
 */
bool pulse_request_media_is(const char *ct, const char *type);

enum pulse_accept_pick {
    PULSE_ACCEPT_JSON = 0,
    PULSE_ACCEPT_RAW = 1, /* application/vnd.pulse.batches */
    PULSE_ACCEPT_NONE = 2 /* nothing offered is acceptable: 406 */
};

/*
 * Negotiates the answer type from an Accept header (NULL = anything goes,
 * i.e. JSON). JSON is chosen by application/json, "application/ *" and "* / *";
 * raw only when raw_offered and application/vnd.pulse.batches is listed.
 * The first listed range that matches an offered type wins; ranges with
 * q=0 are skipped.
 */
enum pulse_accept_pick pulse_request_accept(const char *accept, bool raw_offered);

/* True for 1..128 printable ASCII characters (0x20..0x7e). */
bool pulse_request_id_valid(const char *id);

/* Writes a fresh 16-hex-character id and a NUL into out[17]. */
void pulse_request_id_generate(char out[17]);

/*
 * Strict decimal integer: optional '-', digits only, no blanks, no '+', in
 * [min, max]. PULSE_INVALID otherwise (overflow included).
 */
pulse_status_t pulse_request_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);

/*
 * Called before out would pass its cap by n more bytes: may raise the cap
 * (pulse_buf_set_max) after reserving the memory, and returns PULSE_OK, or
 * the status that ends the decoding (PULSE_TOO_LARGE, PULSE_BUSY, ...).
 */
typedef pulse_status_t (*pulse_request_grow_fn)(void *arg, struct pulse_buf *out, size_t n);

/*
 * Inflates a gzip member from in[0..len) and appends it to out, whose cap
 * bounds the decoded size; grow (nullable, with arg) is asked before the cap
 * is passed. PULSE_TOO_LARGE when the output would pass the cap (and grow
 * did not raise it), grow's status when it refused, PULSE_INVALID for a
 * corrupt or truncated stream or trailing bytes, PULSE_NOMEM. out keeps
 * whatever was appended on failure; callers discard it.
 */
pulse_status_t pulse_request_gunzip(const uint8_t *in, size_t len, struct pulse_buf *out, pulse_request_grow_fn grow,
                                    void *arg);

#endif
