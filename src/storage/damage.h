/* SPDX-License-Identifier: MIT */
/*
 * damage.h - the damage record of a partition log: which bytes of which
 * segment files failed validation although valid data follows them, and
 * which offsets recovery proved were handed out but can no longer be served
 * (docs/Storage.md "Corruption"; byte layout in docs/Format.md "Damage
 * record").
 *
 * The file "damage" in a partition directory is written atomically
 * (pulse_io_replace_file) by recovery, after the forensic copies and before
 * it changes any segment or index file because of what it found, and by a
 * running log when a read finds damage recovery did not (plog.c). It makes
 * recovery repeatable:
 *   - a segment with damaged bytes is always scanned whole at open, never
 *     trusted from its index (the snapshot fast path skips nothing of it);
 *   - the offsets it lists count as handed out, so the log end never goes
 *     back below them even when the proof that first raised it is gone;
 *   - ranges it lists keep the time they were first found, are not
 *     reported as new again, and are copied for forensics only once.
 * It is only ever a record of what recovery found: losing it loses the
 * reason attached to offset gaps and the forced scan, never data.
 *
 * struct pulse_damage is also the in-memory form the log keeps (plog_int.h)
 * to steer readers around damage and to tell them what they skipped.
 *
 * Thread: any; the caller serializes writers of one directory.
 */
#ifndef PULSE_STORAGE_DAMAGE_H
#define PULSE_STORAGE_DAMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_buf;
struct pulse_io;

#define PULSE_DAMAGE_NAME "damage"
#define PULSE_DAMAGE_MAGIC 0x44u /* 'D' */
#define PULSE_DAMAGE_VERSION 0x01u
#define PULSE_DAMAGE_HEADER_SIZE 16u
#define PULSE_DAMAGE_ENTRY_SIZE 56u
/* flags: a forensic copy of the segment file was kept after this range was
 * found (recovery makes it for every range without the flag). */
#define PULSE_DAMAGE_COPIED 0x1u
/* A hostile file cannot make recovery allocate more than this many entries
 * (3.5 MiB); a real log that needs more is beyond saving by skipping. */
#define PULSE_DAMAGE_MAX_ENTRIES 65536u

struct pulse_damage {
    int64_t seg_base; /* the segment whose file holds the bytes (or held the offsets) */
    uint64_t pos;     /* damaged bytes [pos, end) of that file, kept in place; */
    uint64_t end;     /*   pos == end: no bytes, the offsets are simply missing */
    int64_t from;     /* offsets [from, to) that cannot be served (may be empty) */
    int64_t to;
    int64_t found_ms; /* wall-clock time (ms since the epoch) it was first found */
    uint32_t flags;   /* PULSE_DAMAGE_COPIED */
};

/* True when the range keeps damaged bytes in its segment file. */
static inline bool pulse_damage_has_bytes(const struct pulse_damage *d)
{
    return d->end > d->pos;
}

/* True when the n entries obey the ordering rule of pulse_damage_decode. */
bool pulse_damage_valid(const struct pulse_damage *d, size_t n);

/* Appends the file image of n entries (which must be in record order, see
 * pulse_damage_decode) to out. PULSE_NOMEM / PULSE_TOO_LARGE. */
pulse_status_t pulse_damage_encode(const struct pulse_damage *d, size_t n, struct pulse_buf *out);

/* Parses a file image (hostile bytes). PULSE_CORRUPT unless magic, version,
 * reserved bytes, count and CRC are right and the entries are coherent:
 * seg_base >= 0, pos <= end, seg_base <= from <= to, no unknown flag,
 * sorted by (seg_base, pos) without overlapping bytes, and by offsets
 * without overlap. On
 * PULSE_OK *out is allocated (pulse_free; NULL when n is 0). PULSE_NOMEM. */
pulse_status_t pulse_damage_decode(const uint8_t *buf, size_t len, struct pulse_damage **out, size_t *n_out);

/* Reads dir/damage. PULSE_NOT_FOUND when absent (nothing is known),
 * PULSE_CORRUPT when it does not decode, PULSE_IO on a read error. */
pulse_status_t pulse_damage_read(const struct pulse_io *io, const char *dir, struct pulse_damage **out, size_t *n_out);

/* Replaces dir/damage durably with these entries; with n == 0 the file is
 * removed (and the removal made durable). PULSE_IO / PULSE_NOSPACE /
 * PULSE_NOMEM, logged with the path. */
pulse_status_t pulse_damage_write(const struct pulse_io *io, const char *dir, const struct pulse_damage *d, size_t n);

#endif
