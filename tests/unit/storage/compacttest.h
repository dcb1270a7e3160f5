/* SPDX-License-Identifier: MIT */
/*
 * compacttest.h - helpers for the compaction tests: a temporary partition
 * directory, one-record appends whose value names the offset the record got
 * ("o<offset>"), reading a whole log back, and a reference model (the newest
 * record per key and every keyless record) to check a log against.
 *
 * Because each value carries its own offset, a record that moved, was
 * renumbered or came back from the dead is noticed by comparing the value
 * with the offset it is read at and with what the model appended there.
 */
#ifndef PULSE_TESTS_COMPACTTEST_H
#define PULSE_TESTS_COMPACTTEST_H

#include <check.h>
#include <dirent.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "storage/batch.h"
#include "storage/compact.h"
#include "storage/plog.h"

/* Temporary directories: pt_tmpdir / pt_cleanup. */
#include "plogtest.h"

#define CT_DAY_MS (24ll * 3600 * 1000)
#define CT_T0 1700000000000ll

static inline struct pulse_plog *ct_open_io(const char *dir, uint64_t seg_bytes, const struct pulse_io *io)
{
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pulse_plog_config_init(&cfg);
    cfg.segment_max_bytes = seg_bytes;
    cfg.index_interval_bytes = 256;
    cfg.io = io;
    ck_assert_int_eq(pulse_plog_open(dir, &cfg, &plog, NULL), PULSE_OK);
    return plog;
}

static inline struct pulse_plog *ct_open(const char *dir, uint64_t seg_bytes)
{
    return ct_open_io(dir, seg_bytes, NULL);
}

/* Extra 'z' bytes appended to every key ("key-7zzz..."), to exercise keys
 * longer than the map stores inline. */
static int ct_key_pad = 0;

/* One appended record as the model remembers it. */
struct ct_rec {
    int64_t offset;
    int64_t ts;
    int key; /* -1 = keyless */
    bool tomb;
};

struct ct_model {
    struct ct_rec *recs; /* every record ever appended, in offset order */
    size_t n, cap;
};

static inline void ct_model_free(struct ct_model *m)
{
    pulse_free(m->recs);
    memset(m, 0, sizeof *m);
}

/* Appends one record: key -1 = keyless; tomb = null value. The value is
 * "o<offset>" padded with pad filler bytes. Returns the offset. */
static inline int64_t ct_append(struct pulse_plog *plog, struct ct_model *m, int key, bool tomb, int64_t ts, size_t pad)
{
    char kbuf[24 + 64], vbuf[64 + 1024];
    ck_assert_int_le(ct_key_pad, 64);
    struct pulse_record_in rec;
    struct pulse_buf b;
    int64_t off = pulse_plog_log_end(plog);
    int64_t base = -1;
    int vl;

    ck_assert_uint_le(pad, 1024);
    memset(&rec, 0, sizeof rec);
    rec.timestamp = ts;
    if (key >= 0) {
        int kl = snprintf(kbuf, 24, "key-%d", key);
        memset(kbuf + kl, 'z', (size_t)ct_key_pad);
        kl += ct_key_pad;
        rec.key = (const uint8_t *)kbuf;
        rec.key_len = (uint32_t)kl;
    } else {
        rec.key_len = PULSE_BATCH_NULL;
    }
    vl = snprintf(vbuf, 64, "o%" PRId64, off);
    memset(vbuf + vl, 'x', pad);
    if (tomb) {
        rec.value_len = PULSE_BATCH_NULL;
    } else {
        rec.value = (const uint8_t *)vbuf;
        rec.value_len = (uint32_t)(vl + (int)pad);
    }
    pulse_buf_init(&b, 1 << 20);
    ck_assert_int_eq(pulse_batch_encode(&b, 0, 0, &rec, 1), PULSE_OK);
    ck_assert_int_eq(pulse_plog_append(plog, b.data, b.len, &base), PULSE_OK);
    pulse_buf_fini(&b);
    ck_assert_int_eq(base, off);
    if (m != NULL) {
        if (m->n == m->cap) {
            m->cap = m->cap ? m->cap * 2 : 256;
            m->recs = pulse_realloc(m->recs, m->cap * sizeof *m->recs);
            ck_assert_ptr_nonnull(m->recs);
        }
        m->recs[m->n].offset = off;
        m->recs[m->n].ts = ts;
        m->recs[m->n].key = key;
        m->recs[m->n].tomb = tomb;
        m->n++;
    }
    return off;
}

/* A record read back from the log. */
struct ct_read {
    int64_t offset;
    int64_t ts;
    int key;
    bool tomb;
};

struct ct_reads {
    struct ct_read *r;
    size_t n, cap;
    size_t batches, sparse_batches;
    int64_t max_ts_span; /* largest lastTimestamp - firstTimestamp seen */
};

static inline void ct_reads_free(struct ct_reads *rs)
{
    pulse_free(rs->r);
    memset(rs, 0, sizeof *rs);
}

/* Reads the log from offset from to HW with pulse_plog_read (which
 * CRC-verifies every batch), checking each value names its offset. */
static inline void ct_read_all(struct pulse_plog *plog, int64_t from, struct ct_reads *rs)
{
    struct pulse_buf b;
    int64_t off = from;
    int64_t hw = pulse_plog_high_watermark(plog);
    int64_t prev = -1;

    memset(rs, 0, sizeof *rs);
    pulse_buf_init(&b, 64u << 20);
    while (off < hw) {
        struct pulse_slice sl;
        size_t pos = 0;
        pulse_buf_reset(&b);
        ck_assert_int_eq(pulse_plog_read(plog, off, 1u << 16, &b, &sl), PULSE_OK);
        if (sl.len == 0)
            break;
        while (pos < b.len) {
            struct pulse_batch_header hdr;
            struct pulse_batch_iter it;
            struct pulse_record_view rec;
            ck_assert_int_eq(pulse_batch_verify(b.data + pos, b.len - pos, &hdr, NULL), PULSE_OK);
            rs->batches++;
            if (hdr.flags & PULSE_BATCH_FLAG_SPARSE)
                rs->sparse_batches++;
            if (hdr.last_timestamp - hdr.first_timestamp > rs->max_ts_span)
                rs->max_ts_span = hdr.last_timestamp - hdr.first_timestamp;
            ck_assert_int_eq(pulse_batch_iter_init(&it, b.data + pos, b.len - pos), PULSE_OK);
            while (pulse_batch_iter_next(&it, &rec) == PULSE_OK) {
                char want[32];
                if (rec.offset < off)
                    continue;
                ck_assert_int_gt(rec.offset, prev);
                prev = rec.offset;
                if (rs->n == rs->cap) {
                    rs->cap = rs->cap ? rs->cap * 2 : 256;
                    rs->r = pulse_realloc(rs->r, rs->cap * sizeof *rs->r);
                    ck_assert_ptr_nonnull(rs->r);
                }
                struct ct_read *r = &rs->r[rs->n++];
                r->offset = rec.offset;
                r->ts = rec.timestamp;
                r->tomb = rec.value == NULL;
                r->key = -1;
                if (rec.key != NULL) {
                    ck_assert_uint_gt(rec.key_len, 4);
                    ck_assert_uint_lt(rec.key_len, 24 + 64);
                    char kbuf[24 + 64];
                    memcpy(kbuf, rec.key, rec.key_len);
                    kbuf[rec.key_len] = '\0';
                    r->key = atoi(kbuf + 4);
                }
                if (rec.value != NULL) {
                    int wl = snprintf(want, sizeof want, "o%" PRId64, rec.offset);
                    ck_assert_uint_ge(rec.value_len, (uint32_t)wl);
                    ck_assert_int_eq(memcmp(rec.value, want, (size_t)wl), 0);
                }
            }
            pos += pulse_batch_total_size(&hdr);
        }
        ck_assert_int_gt(sl.next_offset, off);
        off = sl.next_offset;
    }
    pulse_buf_fini(&b);
}

static inline const struct ct_rec *ct_model_at(const struct ct_model *m, int64_t offset)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->recs[mid].offset < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m->n && m->recs[lo].offset == offset ? &m->recs[lo] : NULL;
}

/*
 * Checks a log against the model, from the log start:
 *   - every record read is one the model appended at that offset (same key,
 *     tombstone-ness and timestamp): nothing moved or was invented;
 *   - every keyless record at or after the log start is present;
 *   - for every key, the last record read equals the model's newest record,
 *     except that a key whose newest record is a tombstone may be absent
 *     altogether (the tombstone expired), but then no record of it may be
 *     read at all: nothing is resurrected.
 * nkeys bounds the key numbers used.
 */
static inline void ct_check_model(struct pulse_plog *plog, const struct ct_model *m, int nkeys)
{
    struct ct_reads rs;
    int64_t start = pulse_plog_log_start(plog);
    int64_t *last_read = pulse_calloc((size_t)nkeys, sizeof *last_read);
    int64_t *newest = pulse_calloc((size_t)nkeys, sizeof *newest);
    size_t keyless_model = 0, keyless_read = 0;

    ck_assert_ptr_nonnull(last_read);
    ck_assert_ptr_nonnull(newest);
    for (int k = 0; k < nkeys; k++)
        last_read[k] = newest[k] = -1;
    for (size_t i = 0; i < m->n; i++) {
        if (m->recs[i].key >= 0)
            newest[m->recs[i].key] = m->recs[i].offset;
        else if (m->recs[i].offset >= start)
            keyless_model++;
    }
    ct_read_all(plog, start, &rs);
    for (size_t i = 0; i < rs.n; i++) {
        const struct ct_read *r = &rs.r[i];
        const struct ct_rec *mr = ct_model_at(m, r->offset);
        ck_assert_msg(mr != NULL, "offset %" PRId64 " was never appended", r->offset);
        ck_assert_int_eq(mr->key, r->key);
        ck_assert_int_eq(mr->tomb, r->tomb);
        ck_assert_int_eq(mr->ts, r->ts);
        if (r->key >= 0)
            last_read[r->key] = r->offset;
        else
            keyless_read++;
    }
    ck_assert_uint_eq(keyless_read, keyless_model);
    for (int k = 0; k < nkeys; k++) {
        if (newest[k] < start)
            continue; /* never written, or only below the log start */
        if (last_read[k] == newest[k])
            continue;
        const struct ct_rec *mr = ct_model_at(m, newest[k]);
        ck_assert_msg(mr->tomb && last_read[k] == -1,
                      "key %d: newest is offset %" PRId64 " but the log's last is %" PRId64, k, newest[k],
                      last_read[k]);
    }
    ct_reads_free(&rs);
    pulse_free(last_read);
    pulse_free(newest);
}

/* Counts files in dir whose name starts with prefix. */
static inline int ct_count_files(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
            n++;
    closedir(d);
    return n;
}

static inline void ct_cfg(struct pulse_compact_config *cfg)
{
    pulse_compact_config_init(cfg);
    cfg->min_gain_ratio = 0.0;
    cfg->tombstone_retention_ms = CT_DAY_MS;
}

#endif
