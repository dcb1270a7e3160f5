/* SPDX-License-Identifier: MIT */
/*
 * fastpub.h - a fast path for the common shape of a JSON publish body.
 *
 * Most publishes look like {"records":[{"key":"k","value":"text"},...]}.
 * Parsing that through jansson builds a hash table per record and copies
 * every string, and it dominated the cost of a 100-record publish. This
 * parser accepts only a strict subset of JSON and points the records
 * straight into the body buffer:
 *   - the body is one object whose only member is "records", an array of at
 *     least one record object;
 *   - a record's members are among "key" (string or null), "value" (string
 *     or null), "partition" and "timestamp" (plain non-negative integers)
 *     and "headers" (null or an object of string values whose names do not
 *     repeat), each at most once, and "value" is present;
 *   - the body holds at most PULSE_FASTPUB_MAX_HEADERS headers in all;
 *   - strings hold no backslash escape and no control character, and are
 *     valid UTF-8.
 * Anything else - an escape, a number value, a header value that is not a
 * string, base64 fields, a duplicate member or header name, a syntax
 * error - makes it answer PULSE_INVALID, which
 * means "not mine": the caller parses the body with jansson as before,
 * which accepts the rest of the language and produces the error answers.
 * So the fast path never decides an error, and whenever it accepts a body,
 * the jansson path would have accepted it with the same records (the
 * differential test in tests/unit/http checks exactly that).
 */
#ifndef PULSE_HTTP_FASTPUB_H
#define PULSE_HTTP_FASTPUB_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_header;
struct pulse_publish_record;

/* Most headers of one body the fast path takes (what it allocates for
 * them stays bounded; more go the slow way). */
#define PULSE_FASTPUB_MAX_HEADERS 4096

/*
 * Parses body[0, len). On PULSE_OK, *recs_out (allocated, pulse_free) holds
 * *n_out records (1 <= n <= max_records) whose key, value and header bytes
 * point into body, which must outlive them; their headers arrays point into
 * *hdrs_out (allocated, pulse_free; NULL when no record has a header), in
 * record order. PULSE_INVALID: not the fast subset (or more than
 * max_records records); PULSE_NOMEM. Thread: any (pure).
 */
pulse_status_t pulse_fastpub_parse(const uint8_t *body, size_t len, size_t max_records,
                                   struct pulse_publish_record **recs_out, size_t *n_out,
                                   struct pulse_header **hdrs_out);

#endif
