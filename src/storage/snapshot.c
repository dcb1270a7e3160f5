/* SPDX-License-Identifier: MIT */
/*
 * snapshot.c - encode, decode, write and read the 40-byte recovery
 * checkpoint (storage contract section 8).
 *
 * The checkpoint is only ever a shortcut: recovery falls back to the full
 * scan whenever it is missing, fails its CRC or does not describe the files
 * on disk, so decode rejects anything even slightly off rather than guess.
 */
#include "storage/snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/crc32c.h"
#include "common/endian.h"
#include "common/log.h"
#include "common/fsio.h"

void pulse_snapshot_encode(const struct pulse_snapshot *snap, uint8_t out[PULSE_SNAPSHOT_SIZE])
{
    out[0] = PULSE_SNAPSHOT_MAGIC;
    out[1] = PULSE_SNAPSHOT_VERSION;
    out[2] = 0;
    out[3] = 0;
    pulse_put_be64(out + 8, (uint64_t)snap->leo);
    pulse_put_be64(out + 16, (uint64_t)snap->active_base);
    pulse_put_be64(out + 24, (uint64_t)snap->active_size);
    pulse_put_be64(out + 32, (uint64_t)snap->active_next);
    pulse_put_be32(out + 4, pulse_crc32c(0, out + 8, PULSE_SNAPSHOT_SIZE - 8));
}

pulse_status_t pulse_snapshot_decode(const uint8_t *buf, size_t len, struct pulse_snapshot *snap)
{
    struct pulse_snapshot s;

    if (len != PULSE_SNAPSHOT_SIZE)
        return PULSE_CORRUPT;
    if (buf[0] != PULSE_SNAPSHOT_MAGIC || buf[1] != PULSE_SNAPSHOT_VERSION || buf[2] != 0 || buf[3] != 0)
        return PULSE_CORRUPT;
    if (pulse_get_be32(buf + 4) != pulse_crc32c(0, buf + 8, PULSE_SNAPSHOT_SIZE - 8))
        return PULSE_CORRUPT;
    s.leo = (int64_t)pulse_get_be64(buf + 8);
    s.active_base = (int64_t)pulse_get_be64(buf + 16);
    s.active_size = (int64_t)pulse_get_be64(buf + 24);
    s.active_next = (int64_t)pulse_get_be64(buf + 32);
    if (s.active_base < 0 || s.active_size < 0 || s.active_next < s.active_base || s.leo != s.active_next)
        return PULSE_CORRUPT;
    *snap = s;
    return PULSE_OK;
}

pulse_status_t pulse_snapshot_write(const struct pulse_io *io, const char *dir, const struct pulse_snapshot *snap)
{
    uint8_t raw[PULSE_SNAPSHOT_SIZE];

    pulse_snapshot_encode(snap, raw);
    if (pulse_io_replace_file(io, dir, PULSE_SNAPSHOT_NAME, raw, sizeof raw) < 0) {
        int err = errno;
        PULSE_ERROR("snapshot: replace %s/%s failed: %s", dir, PULSE_SNAPSHOT_NAME, strerror(err));
        return pulse_status_from_errno(err);
    }
    return PULSE_OK;
}

pulse_status_t pulse_snapshot_read(const struct pulse_io *io, const char *dir, struct pulse_snapshot *snap)
{
    uint8_t *raw = NULL;
    size_t len = 0;
    pulse_status_t st;

    if (pulse_io_read_file(io, dir, PULSE_SNAPSHOT_NAME, PULSE_SNAPSHOT_SIZE, &raw, &len) < 0) {
        int err = errno;
        if (err == ENOENT)
            return PULSE_NOT_FOUND;
        if (err == EFBIG)
            return PULSE_CORRUPT; /* an oversized file is no snapshot */
        PULSE_ERROR("snapshot: read %s/%s failed: %s", dir, PULSE_SNAPSHOT_NAME, strerror(err));
        return err == ENAMETOOLONG ? PULSE_INVALID : pulse_status_from_errno(err);
    }
    st = pulse_snapshot_decode(raw, len, snap);
    pulse_free(raw);
    return st;
}
