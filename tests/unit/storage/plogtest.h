/* SPDX-License-Identifier: MIT */
/*
 * plogtest.h - helpers shared by the partition log test binaries: temporary
 * directories, deterministic batches whose records can be recognized after
 * a round trip, and reading a whole log back into (offset, id) pairs.
 *
 * A record's value is its 8-byte big-endian id followed by filler bytes
 * derived from the id, so any byte that comes back wrong is noticed.
 */
#ifndef PULSE_TESTS_PLOGTEST_H
#define PULSE_TESTS_PLOGTEST_H

#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/endian.h"
#include "common/log.h"
#include "storage/batch.h"
#include "storage/plog.h"

#define PT_MAX_VALUE 4096

/* Creates a fresh temporary directory; returns "<tmp>/part" (not created:
 * the log creates it). Free with pt_cleanup. */
static inline char *pt_tmpdir(void)
{
    char tmpl[] = "/tmp/pulse-plog-XXXXXX";
    char *root = mkdtemp(tmpl);
    ck_assert_ptr_nonnull(root);
    size_t n = strlen(root) + 8;
    char *dir = pulse_malloc(n);
    ck_assert_ptr_nonnull(dir);
    snprintf(dir, n, "%s/part", root);
    return dir;
}

static inline int pt_rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes the whole temporary tree made by pt_tmpdir and frees dir. */
static inline void pt_cleanup(char *dir)
{
    char *slash = strrchr(dir, '/');
    *slash = '\0';
    nftw(dir, pt_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    pulse_free(dir);
}

static inline void pt_cfg(struct pulse_plog_config *cfg, uint64_t seg_bytes, uint32_t interval,
                          const struct pulse_io *io)
{
    pulse_plog_config_init(cfg);
    cfg->segment_max_bytes = seg_bytes;
    cfg->index_interval_bytes = interval;
    cfg->io = io;
}

/* Encodes n records with ids first_id.. and values of vlen bytes (>= 8)
 * into out (reset first). Returns the batch length. */
static inline size_t pt_batch(struct pulse_buf *out, uint64_t first_id, uint32_t n, size_t vlen, int64_t ts)
{
    struct pulse_record_in recs[64];
    uint8_t *vals;

    ck_assert_uint_le(n, 64);
    ck_assert_uint_ge(vlen, 8);
    ck_assert_uint_le(vlen, PT_MAX_VALUE);
    vals = pulse_malloc((size_t)n * vlen);
    ck_assert_ptr_nonnull(vals);
    memset(recs, 0, sizeof recs);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t id = first_id + i;
        uint8_t *v = vals + (size_t)i * vlen;
        pulse_put_be64(v, id);
        for (size_t j = 8; j < vlen; j++)
            v[j] = (uint8_t)(id * 31 + j);
        recs[i].timestamp = ts + i;
        recs[i].key = NULL;
        recs[i].key_len = PULSE_BATCH_NULL;
        recs[i].value = v;
        recs[i].value_len = (uint32_t)vlen;
    }
    pulse_buf_reset(out);
    ck_assert_int_eq(pulse_batch_encode(out, 0, 0, recs, n), PULSE_OK);
    pulse_free(vals);
    return out->len;
}

/* Checks one record value; returns its id. */
static inline uint64_t pt_value_id(const struct pulse_record_view *rec)
{
    ck_assert_uint_ge(rec->value_len, 8);
    uint64_t id = pulse_get_be64(rec->value);
    size_t bad = 0;
    /* One assertion per record: Check reports every assertion to its
     * parent process, which is slow in a per-byte loop. */
    for (size_t j = 8; j < rec->value_len; j++)
        bad += rec->value[j] != (uint8_t)(id * 31 + j);
    ck_assert_uint_eq(bad, 0);
    return id;
}

struct pt_log {
    int64_t *offs;
    uint64_t *ids;
    size_t n;
    size_t cap;
};

static inline void pt_log_push(struct pt_log *l, int64_t off, uint64_t id)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->offs = pulse_realloc(l->offs, l->cap * sizeof *l->offs);
        l->ids = pulse_realloc(l->ids, l->cap * sizeof *l->ids);
        ck_assert_ptr_nonnull(l->offs);
        ck_assert_ptr_nonnull(l->ids);
    }
    l->offs[l->n] = off;
    l->ids[l->n] = id;
    l->n++;
}

static inline void pt_log_free(struct pt_log *l)
{
    pulse_free(l->offs);
    pulse_free(l->ids);
    memset(l, 0, sizeof *l);
}

/* Decodes concatenated batches, appending records with offset >= from. */
static inline void pt_decode(const uint8_t *p, size_t len, int64_t from, struct pt_log *l)
{
    size_t pos = 0;
    while (pos < len) {
        struct pulse_batch_header hdr;
        struct pulse_batch_iter it;
        struct pulse_record_view rec;
        ck_assert_int_eq(pulse_batch_verify(p + pos, len - pos, &hdr, NULL), PULSE_OK);
        size_t total = pulse_batch_total_size(&hdr);
        ck_assert_int_eq(pulse_batch_iter_init(&it, p + pos, total), PULSE_OK);
        while (pulse_batch_iter_next(&it, &rec) == PULSE_OK) {
            if (rec.offset >= from)
                pt_log_push(l, rec.offset, pt_value_id(&rec));
        }
        pos += total;
    }
}

/* Reads [from, HW) with pulse_plog_read in max_bytes steps. */
static inline void pt_read_all(struct pulse_plog *plog, int64_t from, uint64_t max_bytes, struct pt_log *l)
{
    struct pulse_buf buf;
    int64_t off = from;
    pulse_buf_init(&buf, (size_t)1 << 30);
    for (;;) {
        struct pulse_slice info;
        pulse_buf_reset(&buf);
        pulse_status_t st = pulse_plog_read(plog, off, max_bytes, &buf, &info);
        ck_assert_int_eq(st, PULSE_OK);
        if (info.len == 0)
            break;
        ck_assert_uint_eq(info.len, buf.len);
        pt_decode(buf.data, buf.len, info.start_offset, l);
        ck_assert_int_gt(info.next_offset, off);
        off = info.next_offset;
    }
    pulse_buf_fini(&buf);
}

/* Total size of a file, or -1. */
static inline long long pt_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static inline void pt_path(char *out, size_t n, const char *dir, int64_t base, const char *ext)
{
    snprintf(out, n, "%s/%020lld.%s", dir, (long long)base, ext);
}

static inline void pt_truncate(const char *path, long long len)
{
    ck_assert_int_eq(truncate(path, (off_t)len), 0);
}

static inline void pt_patch(const char *path, long long pos, const void *bytes, size_t n)
{
    int fd = open(path, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, bytes, n, (off_t)pos), (ssize_t)n);
    close(fd);
}

static inline void pt_read_file(const char *path, long long pos, void *bytes, size_t n)
{
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, bytes, n, (off_t)pos), (ssize_t)n);
    close(fd);
}

/* Trims the oldest count sealed segments (all of them when there are
 * fewer): pulse_plog_trim up to the base of the segment after them. */
static inline pulse_status_t pt_trim_oldest(struct pulse_plog *plog, size_t count, size_t *removed)
{
    struct pulse_segment_info *segs = NULL;
    size_t n = 0;
    pulse_status_t st = pulse_plog_list_segments(plog, &segs, &n);

    if (st == PULSE_OK)
        st = pulse_plog_trim(plog, segs[count < n - 1 ? count : n - 1].base_offset, removed);
    pulse_free(segs);
    return st;
}

/* Runs the suite with the engine's log off, or at debug level when the
 * environment has PT_LOG set (for chasing a failure with CK_FORK=no). */
static inline int pt_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    pulse_log_set_level(getenv("PT_LOG") != NULL ? PULSE_LOG_DEBUG : PULSE_LOG_OFF);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
