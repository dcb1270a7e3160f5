/* SPDX-License-Identifier: MIT */
/*
 * snapshot.c - encode, decode, write and read the recovery checkpoint
 * (storage contract section 8; both versions in docs/Format.md section 3).
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

/* Bytes 0..40 but the CRC, which the caller fills in last. */
static void encode_head(const struct pulse_snapshot *snap, uint8_t version, uint8_t *out)
{
    out[0] = PULSE_SNAPSHOT_MAGIC;
    out[1] = version;
    out[2] = 0;
    out[3] = 0;
    pulse_put_be64(out + 8, (uint64_t)snap->leo);
    pulse_put_be64(out + 16, (uint64_t)snap->active_base);
    pulse_put_be64(out + 24, (uint64_t)snap->active_size);
    pulse_put_be64(out + 32, (uint64_t)snap->active_next);
}

void pulse_snapshot_encode(const struct pulse_snapshot *snap, uint8_t out[PULSE_SNAPSHOT_SIZE])
{
    encode_head(snap, PULSE_SNAPSHOT_VERSION, out);
    pulse_put_be32(out + 4, pulse_crc32c(0, out + 8, PULSE_SNAPSHOT_SIZE - 8));
}

uint8_t *pulse_snapshot_encode_v2(const struct pulse_snapshot *snap, const struct pulse_snapshot_ext *ext,
                                  size_t *len_out)
{
    const struct pulse_snapshot_seal *seals = ext->seals;
    size_t n = ext->nseals;
    size_t len = PULSE_SNAPSHOT_V2_HEAD + n * PULSE_SNAPSHOT_SEAL_SIZE;
    uint8_t *out = pulse_calloc(1, len);

    if (out == NULL)
        return NULL;
    encode_head(snap, PULSE_SNAPSHOT_VERSION_2, out);
    pulse_put_be64(out + 40, ext->active_ino);
    pulse_put_be32(out + 48, ext->active_index_n);
    pulse_put_be32(out + 52, ext->active_index_crc);
    pulse_put_be32(out + 56, (uint32_t)n);
    /* 60..64 reserved, zero */
    pulse_put_be64(out + 64, (uint64_t)ext->active_max_ts);
    for (size_t i = 0; i < n; i++) {
        uint8_t *r = out + PULSE_SNAPSHOT_V2_HEAD + i * PULSE_SNAPSHOT_SEAL_SIZE;
        pulse_put_be64(r, (uint64_t)seals[i].base);
        pulse_put_be64(r + 8, (uint64_t)seals[i].next);
        pulse_put_be64(r + 16, seals[i].log_size);
        pulse_put_be64(r + 24, seals[i].log_ino);
        pulse_put_be64(r + 32, (uint64_t)seals[i].log_mtime_ns);
        pulse_put_be64(r + 40, (uint64_t)seals[i].max_ts);
        pulse_put_be32(r + 48, seals[i].index_size);
        pulse_put_be32(r + 52, seals[i].index_crc);
    }
    pulse_put_be32(out + 4, pulse_crc32c(0, out + 8, len - 8));
    *len_out = len;
    return out;
}

/* The version 1 fields and their coherence, shared by both versions. */
static pulse_status_t decode_head(const uint8_t *buf, struct pulse_snapshot *s)
{
    s->leo = (int64_t)pulse_get_be64(buf + 8);
    s->active_base = (int64_t)pulse_get_be64(buf + 16);
    s->active_size = (int64_t)pulse_get_be64(buf + 24);
    s->active_next = (int64_t)pulse_get_be64(buf + 32);
    if (s->active_base < 0 || s->active_size < 0 || s->active_next < s->active_base || s->leo != s->active_next)
        return PULSE_CORRUPT;
    return PULSE_OK;
}

/* The seal records of a version 2 file whose length and CRC are checked. */
static pulse_status_t decode_records(const uint8_t *buf, size_t n, const struct pulse_snapshot *s,
                                     struct pulse_snapshot_seal **seals_out)
{
    struct pulse_snapshot_seal *v = pulse_calloc(n > 0 ? n : 1, sizeof *v);

    if (v == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *r = buf + PULSE_SNAPSHOT_V2_HEAD + i * PULSE_SNAPSHOT_SEAL_SIZE;
        v[i].base = (int64_t)pulse_get_be64(r);
        v[i].next = (int64_t)pulse_get_be64(r + 8);
        v[i].log_size = pulse_get_be64(r + 16);
        v[i].log_ino = pulse_get_be64(r + 24);
        v[i].log_mtime_ns = (int64_t)pulse_get_be64(r + 32);
        v[i].max_ts = (int64_t)pulse_get_be64(r + 40);
        v[i].index_size = pulse_get_be32(r + 48);
        v[i].index_crc = pulse_get_be32(r + 52);
        if (v[i].base < 0 || v[i].base >= s->active_base || (i > 0 && v[i].base < v[i - 1].next) ||
            v[i].next <= v[i].base || v[i].next > s->active_base || v[i].index_size % 8 != 0 ||
            v[i].log_size > (uint64_t)INT64_MAX) {
            pulse_free(v);
            return PULSE_CORRUPT;
        }
    }
    *seals_out = v;
    return PULSE_OK;
}

pulse_status_t pulse_snapshot_decode_ext(const uint8_t *buf, size_t len, struct pulse_snapshot *snap,
                                         struct pulse_snapshot_ext *ext)
{
    struct pulse_snapshot s;
    struct pulse_snapshot_ext x = {.version = 0};
    struct pulse_snapshot_seal *v = NULL;
    size_t n = 0;
    pulse_status_t st;

    if (len < PULSE_SNAPSHOT_SIZE || buf[0] != PULSE_SNAPSHOT_MAGIC || buf[2] != 0 || buf[3] != 0)
        return PULSE_CORRUPT;
    if (buf[1] == PULSE_SNAPSHOT_VERSION) {
        if (len != PULSE_SNAPSHOT_SIZE)
            return PULSE_CORRUPT;
    } else if (buf[1] == PULSE_SNAPSHOT_VERSION_2) {
        if (len < PULSE_SNAPSHOT_V2_HEAD || pulse_get_be32(buf + 60) != 0)
            return PULSE_CORRUPT;
        n = pulse_get_be32(buf + 56);
        if (n > PULSE_SNAPSHOT_MAX_SEALS || len != PULSE_SNAPSHOT_V2_HEAD + n * PULSE_SNAPSHOT_SEAL_SIZE)
            return PULSE_CORRUPT;
    } else {
        return PULSE_CORRUPT;
    }
    if (pulse_get_be32(buf + 4) != pulse_crc32c(0, buf + 8, len - 8))
        return PULSE_CORRUPT;
    st = decode_head(buf, &s);
    if (st != PULSE_OK)
        return st;
    x.version = buf[1];
    if (x.version == PULSE_SNAPSHOT_VERSION_2) {
        x.active_ino = pulse_get_be64(buf + 40);
        x.active_index_n = pulse_get_be32(buf + 48);
        x.active_index_crc = pulse_get_be32(buf + 52);
        x.active_max_ts = (int64_t)pulse_get_be64(buf + 64);
        /* Validated even when the caller wants only the head. */
        st = decode_records(buf, n, &s, &v);
        if (st != PULSE_OK)
            return st;
        x.seals = v;
        x.nseals = n;
    }
    *snap = s;
    if (ext != NULL)
        *ext = x;
    else
        pulse_free(v);
    return PULSE_OK;
}

pulse_status_t pulse_snapshot_decode(const uint8_t *buf, size_t len, struct pulse_snapshot *snap)
{
    return pulse_snapshot_decode_ext(buf, len, snap, NULL);
}

static pulse_status_t put_file(const struct pulse_io *io, const char *dir, const uint8_t *raw, size_t len)
{
    if (pulse_io_replace_file(io, dir, PULSE_SNAPSHOT_NAME, raw, len) < 0) {
        int err = errno;
        PULSE_ERROR("snapshot: replace %s/%s failed: %s", dir, PULSE_SNAPSHOT_NAME, strerror(err));
        return pulse_status_from_errno(err);
    }
    return PULSE_OK;
}

pulse_status_t pulse_snapshot_write(const struct pulse_io *io, const char *dir, const struct pulse_snapshot *snap)
{
    uint8_t raw[PULSE_SNAPSHOT_SIZE];

    pulse_snapshot_encode(snap, raw);
    return put_file(io, dir, raw, sizeof raw);
}

pulse_status_t pulse_snapshot_write_ext(const struct pulse_io *io, const char *dir, const struct pulse_snapshot *snap,
                                        const struct pulse_snapshot_ext *ext)
{
    size_t len = 0;
    uint8_t *raw;
    pulse_status_t st;

    if (ext->nseals > PULSE_SNAPSHOT_MAX_SEALS)
        return PULSE_INVALID;
    raw = pulse_snapshot_encode_v2(snap, ext, &len);
    if (raw == NULL)
        return PULSE_NOMEM;
    st = put_file(io, dir, raw, len);
    pulse_free(raw);
    return st;
}

pulse_status_t pulse_snapshot_read_ext(const struct pulse_io *io, const char *dir, struct pulse_snapshot *snap,
                                       struct pulse_snapshot_ext *ext)
{
    uint8_t *raw = NULL;
    size_t len = 0;
    pulse_status_t st;

    if (pulse_io_read_file(io, dir, PULSE_SNAPSHOT_NAME, PULSE_SNAPSHOT_MAX_FILE, &raw, &len) < 0) {
        int err = errno;
        if (err == ENOENT)
            return PULSE_NOT_FOUND;
        if (err == EFBIG)
            return PULSE_CORRUPT; /* an oversized file is no snapshot */
        PULSE_ERROR("snapshot: read %s/%s failed: %s", dir, PULSE_SNAPSHOT_NAME, strerror(err));
        return err == ENAMETOOLONG ? PULSE_INVALID : pulse_status_from_errno(err);
    }
    st = pulse_snapshot_decode_ext(raw, len, snap, ext);
    pulse_free(raw);
    return st;
}

pulse_status_t pulse_snapshot_read(const struct pulse_io *io, const char *dir, struct pulse_snapshot *snap)
{
    return pulse_snapshot_read_ext(io, dir, snap, NULL);
}

const struct pulse_snapshot_seal *pulse_snapshot_find_seal(const struct pulse_snapshot_seal *seals, size_t n,
                                                           int64_t base)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (seals[mid].base == base)
            return &seals[mid];
        if (seals[mid].base < base)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}
