/* SPDX-License-Identifier: MIT */
/*
 * buf.h - a growable byte buffer with a hard cap.
 *
 * Every growable buffer in Pulse has a cap (curl's dynbuf "toobig" rule): an
 * append that would pass it fails with PULSE_TOO_LARGE and leaves the buffer
 * as it was. The struct is public on purpose: it is a plain value type that
 * callers embed; only these functions change it.
 */
#ifndef PULSE_COMMON_BUF_H
#define PULSE_COMMON_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_buf {
    uint8_t *data; /* owned; NULL until the first append */
    size_t len;
    size_t cap;
    size_t max; /* hard cap on len */
};

/* Initialises an empty buffer that may grow to max bytes. */
void pulse_buf_init(struct pulse_buf *buf, size_t max);

/* Frees the storage; the buffer is empty (and reusable) afterwards. */
void pulse_buf_fini(struct pulse_buf *buf);

/* Sets len to 0, keeping the storage. */
void pulse_buf_reset(struct pulse_buf *buf);

/* Changes the hard cap to max (never below the current len), so a caller
 * that accounts for memory can let a buffer grow in steps it reserved:
 * the storage never grows past the cap. */
void pulse_buf_set_max(struct pulse_buf *buf, size_t max);

/* Makes room for n more bytes. NOMEM or TOO_LARGE on failure. */
pulse_status_t pulse_buf_reserve(struct pulse_buf *buf, size_t n);

pulse_status_t pulse_buf_append(struct pulse_buf *buf, const void *p, size_t n);
pulse_status_t pulse_buf_append_u8(struct pulse_buf *buf, uint8_t v);
pulse_status_t pulse_buf_append_be16(struct pulse_buf *buf, uint16_t v);
pulse_status_t pulse_buf_append_be32(struct pulse_buf *buf, uint32_t v);
pulse_status_t pulse_buf_append_be64(struct pulse_buf *buf, uint64_t v);
pulse_status_t pulse_buf_printf(struct pulse_buf *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Hands the storage to the caller (free with pulse_free); the buffer is left
 * empty. *len_out gets the length. May return NULL for an empty buffer. */
uint8_t *pulse_buf_steal(struct pulse_buf *buf, size_t *len_out);

#endif
