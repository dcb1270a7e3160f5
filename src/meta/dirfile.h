/* SPDX-License-Identifier: MIT */
/*
 * dirfile.h - the metadata the data directory keeps beside the store, so
 * that losing or damaging the store (src/meta/meta.c) never loses the
 * knowledge of what the event data is (docs/Format.md section 4):
 *   <data-dir>/cluster.json            the cluster and broker ids
 *   <data-dir>/topics/<name>/topic.json the topic's definition
 * Both are one line of compact JSON with sorted keys, a "format" version and
 * a "crc32c" member: 8 lower-case hex digits of the CRC-32C of the same
 * object's compact, key-sorted text without the "crc32c" member. A flipped
 * bit therefore never passes for a different definition.
 *
 * This module only encodes and decodes bytes; the broker writes and reads
 * the files (durably, through its struct pulse_io). A topic definition uses
 * the same JSON fields as the store's topic/<name> record (one codec).
 * Bytes read back are hostile: anything that does not verify is
 * PULSE_CORRUPT with a reason, never a crash.
 *
 * Thread: any (pure functions). Locks: none.
 */
#ifndef PULSE_META_DIRFILE_H
#define PULSE_META_DIRFILE_H

#include <stddef.h>

#include "common/status.h"

struct pulse_meta_topic;
struct pulse_meta_identity;

/* The format version these functions write and the only one they read. */
#define PULSE_DIRFILE_FORMAT 1
/* Largest file either encoder writes and the decoders accept. */
#define PULSE_DIRFILE_MAX 4096

/* Encodes t into buf (cap bytes, PULSE_DIRFILE_MAX is always enough),
 * newline-terminated, not NUL-terminated. PULSE_INVALID for a definition
 * that is not storable (bad name, 0 partitions), PULSE_NOMEM. */
pulse_status_t pulse_dirfile_topic_encode(const struct pulse_meta_topic *t, char *buf, size_t cap, size_t *len_out);

/* Decodes and verifies a topic file. PULSE_CORRUPT (errbuf says why: not
 * JSON, checksum mismatch, unknown format, a field missing or out of range)
 * or PULSE_NOMEM; *out is written on success only. */
pulse_status_t pulse_dirfile_topic_decode(const char *buf, size_t len, struct pulse_meta_topic *out, char *errbuf,
                                          size_t errlen);

/* As above for the identity file. */
pulse_status_t pulse_dirfile_identity_encode(const struct pulse_meta_identity *id, char *buf, size_t cap,
                                             size_t *len_out);
pulse_status_t pulse_dirfile_identity_decode(const char *buf, size_t len, struct pulse_meta_identity *out, char *errbuf,
                                             size_t errlen);

#endif
