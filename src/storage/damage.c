/* SPDX-License-Identifier: MIT */
/*
 * damage.c - encode, decode, read and write the damage record of a
 * partition (docs/Format.md "Damage record").
 *
 * Layout: a 16-byte header (magic 0x44, version 0x01, two zero bytes, a
 * big-endian CRC32C over every byte from 8 to the end, the entry count as a
 * uint32, four zero bytes), then count entries of 56 bytes: segment base,
 * byte position, byte end, first offset, end offset, time found (ms), each a
 * big-endian 64-bit integer, then flags (uint32) and four zero bytes.
 *
 * The file is hostile input like any other: decode refuses anything that is
 * not exactly what encode writes, and recovery then falls back to scanning
 * every segment whole, which finds the damaged bytes again.
 */
#include "storage/damage.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/crc32c.h"
#include "common/endian.h"
#include "common/log.h"
#include "common/fsio.h"

pulse_status_t pulse_damage_encode(const struct pulse_damage *d, size_t n, struct pulse_buf *out)
{
    size_t start = out->len;
    size_t need;
    uint8_t *p;
    pulse_status_t st;

    if (n > PULSE_DAMAGE_MAX_ENTRIES)
        return PULSE_TOO_LARGE;
    need = PULSE_DAMAGE_HEADER_SIZE + n * PULSE_DAMAGE_ENTRY_SIZE;
    st = pulse_buf_reserve(out, need);
    if (st != PULSE_OK)
        return st;
    p = out->data + start;
    memset(p, 0, PULSE_DAMAGE_HEADER_SIZE);
    p[0] = PULSE_DAMAGE_MAGIC;
    p[1] = PULSE_DAMAGE_VERSION;
    pulse_put_be32(p + 8, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        uint8_t *e = p + PULSE_DAMAGE_HEADER_SIZE + i * PULSE_DAMAGE_ENTRY_SIZE;
        pulse_put_be64(e, (uint64_t)d[i].seg_base);
        pulse_put_be64(e + 8, d[i].pos);
        pulse_put_be64(e + 16, d[i].end);
        pulse_put_be64(e + 24, (uint64_t)d[i].from);
        pulse_put_be64(e + 32, (uint64_t)d[i].to);
        pulse_put_be64(e + 40, (uint64_t)d[i].found_ms);
        pulse_put_be32(e + 48, d[i].flags);
        pulse_put_be32(e + 52, 0);
    }
    pulse_put_be32(p + 4, pulse_crc32c(0, p + 8, need - 8));
    out->len = start + need;
    return PULSE_OK;
}

/* The ordering rule of decode, for one entry after its predecessor. */
static bool entry_ok(const struct pulse_damage *e, const struct pulse_damage *prev)
{
    if (e->seg_base < 0 || e->pos > e->end || e->from < e->seg_base || e->to < e->from ||
        (e->flags & ~PULSE_DAMAGE_COPIED) != 0)
        return false;
    if (prev == NULL)
        return true;
    if (e->seg_base < prev->seg_base || e->from < prev->to)
        return false;
    return e->seg_base != prev->seg_base || e->pos >= prev->end;
}

bool pulse_damage_valid(const struct pulse_damage *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!entry_ok(&d[i], i > 0 ? &d[i - 1] : NULL))
            return false;
    return true;
}

pulse_status_t pulse_damage_decode(const uint8_t *buf, size_t len, struct pulse_damage **out, size_t *n_out)
{
    struct pulse_damage *d = NULL;
    uint32_t n;
    pulse_status_t st = PULSE_OK;

    if (len < PULSE_DAMAGE_HEADER_SIZE || buf[0] != PULSE_DAMAGE_MAGIC || buf[1] != PULSE_DAMAGE_VERSION ||
        buf[2] != 0 || buf[3] != 0 || pulse_get_be32(buf + 12) != 0) {
        st = PULSE_CORRUPT;
        goto out;
    }
    n = pulse_get_be32(buf + 8);
    if (n > PULSE_DAMAGE_MAX_ENTRIES || len != PULSE_DAMAGE_HEADER_SIZE + (size_t)n * PULSE_DAMAGE_ENTRY_SIZE ||
        pulse_get_be32(buf + 4) != pulse_crc32c(0, buf + 8, len - 8)) {
        st = PULSE_CORRUPT;
        goto out;
    }
    if (n > 0) {
        d = pulse_calloc(n, sizeof *d);
        if (d == NULL) {
            st = PULSE_NOMEM;
            goto out;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = buf + PULSE_DAMAGE_HEADER_SIZE + (size_t)i * PULSE_DAMAGE_ENTRY_SIZE;
        d[i].seg_base = (int64_t)pulse_get_be64(e);
        d[i].pos = pulse_get_be64(e + 8);
        d[i].end = pulse_get_be64(e + 16);
        d[i].from = (int64_t)pulse_get_be64(e + 24);
        d[i].to = (int64_t)pulse_get_be64(e + 32);
        d[i].found_ms = (int64_t)pulse_get_be64(e + 40);
        d[i].flags = pulse_get_be32(e + 48);
        if (pulse_get_be32(e + 52) != 0 || !entry_ok(&d[i], i > 0 ? &d[i - 1] : NULL)) {
            st = PULSE_CORRUPT;
            goto out;
        }
    }
    *out = d;
    d = NULL;
    *n_out = n;
out:
    pulse_free(d);
    return st;
}

pulse_status_t pulse_damage_read(const struct pulse_io *io, const char *dir, struct pulse_damage **out, size_t *n_out)
{
    const size_t max = PULSE_DAMAGE_HEADER_SIZE + (size_t)PULSE_DAMAGE_MAX_ENTRIES * PULSE_DAMAGE_ENTRY_SIZE;
    uint8_t *raw = NULL;
    size_t len = 0;
    pulse_status_t st;

    if (pulse_io_read_file(io, dir, PULSE_DAMAGE_NAME, max, &raw, &len) < 0) {
        int err = errno;
        if (err == ENOENT)
            return PULSE_NOT_FOUND;
        if (err == EFBIG)
            return PULSE_CORRUPT; /* larger than any record we write */
        PULSE_ERROR("damage: read %s/%s failed: %s", dir, PULSE_DAMAGE_NAME, strerror(err));
        return err == ENAMETOOLONG ? PULSE_INVALID : pulse_status_from_errno(err);
    }
    st = pulse_damage_decode(raw, len, out, n_out);
    pulse_free(raw);
    return st;
}

pulse_status_t pulse_damage_write(const struct pulse_io *io, const char *dir, const struct pulse_damage *d, size_t n)
{
    char path[4096];
    struct pulse_buf img;
    pulse_status_t st = PULSE_OK;

    pulse_buf_init(&img, PULSE_DAMAGE_HEADER_SIZE + (size_t)PULSE_DAMAGE_MAX_ENTRIES * PULSE_DAMAGE_ENTRY_SIZE);
    if (snprintf(path, sizeof path, "%s/%s", dir, PULSE_DAMAGE_NAME) >= (int)sizeof path) {
        st = PULSE_INVALID;
        goto out;
    }
    if (n == 0) {
        /* A record already gone may be gone only in the page cache (an
         * earlier removal whose directory fsync never ran): the directory
         * is synced all the same, or a power cut brings the record back. */
        if (pulse_io_remove_file(io, dir, PULSE_DAMAGE_NAME) < 0) {
            int err = errno;
            PULSE_ERROR("damage: removing %s durably failed: %s", path, strerror(err));
            st = pulse_status_from_errno(err);
        }
        goto out;
    }
    if (!pulse_damage_valid(d, n)) {
        PULSE_ERROR("damage: refusing to write %s: the ranges are not in order", path);
        st = PULSE_INVALID;
        goto out;
    }
    st = pulse_damage_encode(d, n, &img);
    if (st != PULSE_OK)
        goto out;
    if (pulse_io_replace_file(io, dir, PULSE_DAMAGE_NAME, img.data, img.len) < 0) {
        int err = errno;
        PULSE_ERROR("damage: replace %s failed: %s", path, strerror(err));
        st = pulse_status_from_errno(err);
    }
out:
    pulse_buf_fini(&img);
    return st;
}
