/* SPDX-License-Identifier: MIT */
/*
 * text.h - the text encodings of Pulse, one copy each: strict UTF-8
 * validation, standard base64 (RFC 4648, padded), JSON string escaping as
 * jansson's compact dump writes it, decimal integers, and the shortest
 * digits of a JSON real.
 *
 * Why here: the HTTP layer (request bodies, fetch answers), the record
 * JSON writer (common/record.h) and pulse-log (segment dumps) all need
 * them, and none of those may include another's headers; common is the
 * lowest layer they share. Nothing here allocates except
 * pulse_text_b64_decode and pulse_text_json_append_string, and nothing
 * depends on jansson: the escaping is written to match its output byte for
 * byte, which tests/unit/common/check_text.c checks against jansson.
 *
 * Speed: the scanners (UTF-8, measure, escape, plain strings) skip text
 * that needs no work sixteen bytes a step and look only at the bytes that
 * do; tests/unit/common/check_textscan.c holds each to its byte-at-a-time
 * definition on hostile input.
 *
 * The streaming helpers (*_some) write whole units only (an escape, a
 * 4-character base64 group), so a writer that fills a bounded window can
 * stop anywhere and resume where it stopped.
 *
 * Thread: any; no state. Locks: none.
 */
#ifndef PULSE_COMMON_TEXT_H
#define PULSE_COMMON_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_buf;

/* The longest unit the *_some writers never split: a \u00XX escape. A
 * window of at least this many bytes always makes progress. */
#define PULSE_TEXT_UNIT_MAX 6

/* Strict UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF): exactly what jansson accepts in a string. NUL is valid. */
bool pulse_text_utf8_valid(const uint8_t *s, size_t n);

/*
 * One pass that does what pulse_text_utf8_valid and
 * pulse_text_json_escaped_len do together: true when s[0, n) is strict
 * UTF-8, and then *escaped_len is the length of its JSON string body
 * (untouched otherwise). ASCII that needs no escape is skipped sixteen
 * bytes a step.
 */
bool pulse_text_json_measure(const uint8_t *s, size_t n, size_t *escaped_len);

/*
 * The body of a JSON string that needs no decoding: true when s[0, n)
 * starts with strict UTF-8 free of backslashes and control bytes, up to a
 * '"' at s[*end]; false for anything else (no closing quote, an escape, a
 * control byte, bad UTF-8 before the quote).
 */
bool pulse_text_json_plain_body(const uint8_t *s, size_t n, size_t *end);

/* Room for the decimal text of any int64_t or uint64_t (no NUL). */
#define PULSE_TEXT_INT_MAX 20

/* The decimal text of v into out, without a NUL; returns its length.
 * printf's %lld / %llu, without printf. */
size_t pulse_text_i64(int64_t v, char out[PULSE_TEXT_INT_MAX]);
size_t pulse_text_u64(uint64_t v, char out[PULSE_TEXT_INT_MAX]);

/* Characters (without NUL) that the base64 of n bytes takes. */
size_t pulse_text_b64_len(size_t n);

/* Standard alphabet with '=' padding; writes pulse_text_b64_len(n)
 * characters and a NUL into out, which must hold that many plus one. */
void pulse_text_b64_encode(const uint8_t *in, size_t n, char *out);

/*
 * Base64 of p[*at, n) into out[0, room), whole 4-character groups only (the
 * padded last group once it fits); advances *at (in steps of 3, or to n)
 * and returns the characters written. *at must start at 0 or where an
 * earlier call left it.
 */
size_t pulse_text_b64_encode_some(const uint8_t *p, size_t n, size_t *at, uint8_t *out, size_t room);

/*
 * Decodes canonical standard base64 (padding required, no blanks, zero
 * leftover bits) into a new buffer (*out, pulse_free; non-NULL even for zero
 * bytes). PULSE_INVALID for a character outside the alphabet, bad padding,
 * a dangling final character or non-zero leftover bits; PULSE_NOMEM.
 */
pulse_status_t pulse_text_b64_decode(const char *in, size_t len, uint8_t **out, size_t *out_len);

/* Bytes the JSON string body of p[0, n) takes (without quotes). */
size_t pulse_text_json_escaped_len(const uint8_t *p, size_t n);

/*
 * Escapes p[*at, n) as a JSON string body into out[0, room), whole escapes
 * only; advances *at and returns the bytes written. The bytes must be valid
 * UTF-8 for the result to be JSON (they are copied, not checked). The
 * escapes are jansson's compact ones: \" \\ \b \f \n \r \t, \u00XX (upper
 * case hex) for the other bytes below 0x20; everything else as is.
 */
size_t pulse_text_json_escape_some(const uint8_t *p, size_t n, size_t *at, uint8_t *out, size_t room);

/* Appends p[0, n), which must be valid UTF-8, as a quoted JSON string.
 * PULSE_NOMEM / PULSE_TOO_LARGE from the buffer (which is then unchanged). */
pulse_status_t pulse_text_json_append_string(struct pulse_buf *out, const uint8_t *p, size_t n);

/*
 * The fewest significant digits, 1 to 17, with which printf's "%.*g" prints
 * d so that strtod reads back d exactly: the shortest text of a JSON real.
 * One or two printf/strtod round trips (subnormals: up to 17).
 */
int pulse_text_real_digits(double d);

#endif
