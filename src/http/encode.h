/* SPDX-License-Identifier: MIT */
/*
 * encode.h - gzip for answers (Content-Encoding: gzip), pure over strings
 * and buffers (no libmicrohttpd types) so it is unit-tested on its own.
 * The server (server_reply.c) compresses whole JSON answers of at least
 * PULSE_ENCODE_GZIP_MIN bytes; the JSON fetch (h_fetch.c) compresses its
 * stream as MHD pulls it (struct pulse_gzip_stream). Raw fetch answers go
 * out by sendfile and are never compressed.
 *
 * Memory: one compression (zlib level 6, a 16 KiB window, memLevel 6:
 * about 82 KiB of zlib state, PULSE_ENCODE_GZIP_STATE) lives for one call
 * of pulse_encode_gzip, or for a stream's answer; the caller charges it
 * to its memory budget when it outlives the call.
 *
 * Thread: any. Locks: none.
 */
#ifndef PULSE_HTTP_ENCODE_H
#define PULSE_HTTP_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/status.h"

/* Smallest JSON answer that is compressed (docs/API.md "Compression"):
 * below it gzip's 18-byte frame and the CPU cost buy nothing. */
#define PULSE_ENCODE_GZIP_MIN 1024
/* zlib's state for the parameters above, plus slack (zlib.h: deflate
 * needs (1 << (windowBits + 2)) + (1 << (memLevel + 9)) bytes). */
#define PULSE_ENCODE_GZIP_STATE (96u * 1024)

/*
 * True when an Accept-Encoding value lets the answer be gzip'ed: it lists
 * gzip (or x-gzip, or *) with a q-value above 0. NULL (no header) and
 * "identity" are false.
 */
bool pulse_encode_accepts_gzip(const char *accept_encoding);

/*
 * Compresses in[0, len) into one gzip member in a new pulse_malloc buffer
 * (*out, *out_len; the caller pulse_frees). PULSE_NOMEM.
 */
pulse_status_t pulse_encode_gzip(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len);

/* Fills out with up to max bytes of plain text; the number of bytes, or
 * -1 at the end of the text, or -2 on an error. */
typedef ssize_t (*pulse_encode_read_fn)(void *arg, uint8_t *out, size_t max);

struct pulse_gzip_stream;

/*
 * A gzip stream over a plain-text source read through read(arg). NULL on
 * NOMEM. The stream does not own arg.
 */
struct pulse_gzip_stream *pulse_gzip_stream_create(pulse_encode_read_fn read, void *arg);

/* Fills out with up to max bytes of the compressed stream: the number of
 * bytes (> 0), -1 at its end, -2 when the source failed or zlib did. */
ssize_t pulse_gzip_stream_read(struct pulse_gzip_stream *gz, uint8_t *out, size_t max);

/* NULL is a no-op. */
void pulse_gzip_stream_destroy(struct pulse_gzip_stream *gz);

#endif
