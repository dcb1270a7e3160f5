/* SPDX-License-Identifier: MIT */
/*
 * compact_readers.c - part of check_compact: passes beside readers and
 * writers: a pass over an unchanged log reads nothing, a reader holding a
 * slice keeps the old bytes, a seeded random model with passes and reopens,
 * passes beside concurrent appends and reads.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/log.h"
#include "storage/batch.h"
#include "storage/compact.h"
#include "common/fsio.h"
#include "storage/index.h"
#include "storage/plog.h"
#include "storage/plog_edit.h"
#include "storage/segment.h"

#include "compacttest.h"
#include "compactcases.h"

/* A posix io that counts the bytes pread through it. */
static _Atomic uint64_t bytes_read;
static struct pulse_io counting;

static ssize_t counting_pread(const struct pulse_io *io, int fd, void *buf, size_t n, off_t off)
{
    const struct pulse_io *posix = pulse_io_posix();
    ssize_t got = posix->pread(posix, fd, buf, n, off);
    (void)io;
    if (got > 0)
        atomic_fetch_add(&bytes_read, (uint64_t)got);
    return got;
}

static const struct pulse_io *counting_io(void)
{
    counting = *pulse_io_posix();
    counting.pread = counting_pread;
    return &counting;
}

START_TEST(test_pass_over_an_unchanged_log_reads_nothing)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open_io(dir, SEG, counting_io());
    struct ct_model m = {0};
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;

    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 6; k++)
            ct_append(plog, &m, k, false, CT_T0, 100);
    ct_append(plog, &m, -1, false, CT_T0, 600);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
    atomic_store(&bytes_read, 0);
    ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_gt(res.segments_rewritten + res.segments_deleted, 0);
    ck_assert_uint_gt(atomic_load(&bytes_read), 0);
    /* Nothing changed since: no rewrite, no byte read. */
    atomic_store(&bytes_read, 0);
    ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_eq(res.segments_rewritten + res.segments_deleted + res.segments_scanned, 0);
    ck_assert_uint_eq(atomic_load(&bytes_read), 0);
    /* New data is noticed. */
    ct_append(plog, &m, 0, false, CT_T0, 0);
    ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_gt(atomic_load(&bytes_read), 0);
    ct_check_model(plog, &m, 6);
    pulse_compact_destroy(comp);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_reader_holding_a_slice_keeps_the_old_bytes)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    struct pulse_compact_result res;
    struct pulse_slice sl;
    uint8_t *before, *after;

    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 3; k++)
            ct_append(plog, &m, k, false, CT_T0, 50);
    ct_append(plog, &m, -1, false, CT_T0, 700);
    ct_append(plog, &m, -1, false, CT_T0, 700);
    ck_assert_int_eq(pulse_plog_slice(plog, 0, 1 << 20, true, &sl), PULSE_OK);
    ck_assert_int_ge(sl.fd, 0);
    before = pulse_malloc(sl.len);
    after = pulse_malloc(sl.len);
    ck_assert_int_eq(pread(sl.fd, before, sl.len, (off_t)sl.pos), (ssize_t)sl.len);
    ct_cfg(&cfg);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0, &res), PULSE_OK);
    ck_assert_uint_eq(res.segments_rewritten, 1);
    ck_assert_int_eq(pread(sl.fd, after, sl.len, (off_t)sl.pos), (ssize_t)sl.len);
    ck_assert_int_eq(memcmp(before, after, sl.len), 0);
    close(sl.fd);
    pulse_free(before);
    pulse_free(after);
    ct_check_model(plog, &m, 3);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

START_TEST(test_random_model_with_passes_and_reopens)
{
    unsigned seed = (unsigned)time(NULL);
    const char *env = getenv("PULSE_TEST_SEED");
    if (env != NULL)
        seed = (unsigned)strtoul(env, NULL, 10);
    fprintf(stderr, "test_random_model_with_passes_and_reopens: seed %u (PULSE_TEST_SEED)\n", seed);
    srand(seed);

    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    const int nkeys = 40;
    int64_t now = CT_T0;

    ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
    for (int step = 0; step < 60; step++) {
        int appends = rand() % 40;
        for (int i = 0; i < appends; i++) {
            int r = rand() % 10;
            int key = r == 0 ? -1 : rand() % nkeys;
            bool tomb = key >= 0 && r == 1;
            now += rand() % (3 * 3600 * 1000);
            ct_append(plog, &m, key, tomb, now, (size_t)(rand() % 120));
        }
        ct_cfg(&cfg);
        cfg.tombstone_retention_ms = (int64_t)(rand() % 4) * 3600 * 1000;
        cfg.min_gain_ratio = (rand() % 4) * 0.1;
        cfg.max_keys = rand() % 3 == 0 ? 4 : 1024;
        cfg.max_bytes_per_pass = (uint64_t)(1 + rand() % 4) * SEG / 2;
        cfg.batch_max_records = 1 + (uint32_t)(rand() % 8);
        ck_assert_int_eq(pulse_compact_run(comp, plog, &cfg, now, NULL), PULSE_OK);
        ct_check_model(plog, &m, nkeys);
        if (rand() % 6 == 0) {
            ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
            plog = ct_open(dir, SEG);
            ct_check_model(plog, &m, nkeys);
            if (rand() % 2 == 0) {
                pulse_compact_destroy(comp);
                ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
            }
        }
    }
    ck_assert_int_eq(ct_count_files(dir, ".tmp-"), 0);
    pulse_compact_destroy(comp);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

struct appender {
    struct pulse_plog *plog;
    struct ct_model *m;
    atomic_bool done;
};

static void *append_thread(void *arg)
{
    struct appender *a = arg;
    for (int i = 0; i < 400; i++)
        ct_append(a->plog, a->m, i % 7 == 0 ? -1 : i % 13, i % 29 == 0, CT_T0 + i, (size_t)(i % 5) * 60);
    atomic_store(&a->done, true);
    return NULL;
}

START_TEST(test_passes_run_safely_beside_appends_and_reads)
{
    char *dir = pt_tmpdir();
    struct ct_model m = {0};
    struct appender a;
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    pthread_t th;
    int passes = 0;

    a.plog = ct_open(dir, SEG);
    a.m = &m;
    atomic_init(&a.done, false);
    ct_cfg(&cfg);
    cfg.tombstone_retention_ms = 0;
    ck_assert_int_eq(pulse_compact_create(&comp), PULSE_OK);
    ck_assert_int_eq(pthread_create(&th, NULL, append_thread, &a), 0);
    while (!atomic_load(&a.done) || passes < 3) {
        struct pulse_buf b;
        struct pulse_slice sl;
        ck_assert_int_eq(pulse_compact_run(comp, a.plog, &cfg, CT_T0 + 1000, NULL), PULSE_OK);
        /* A reader racing the swaps always gets whole, valid batches. */
        pulse_buf_init(&b, 1 << 20);
        pulse_status_t st = pulse_plog_read(a.plog, 0, 1 << 16, &b, &sl);
        ck_assert(st == PULSE_OK);
        pulse_buf_fini(&b);
        passes++;
    }
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    converge(comp, a.plog, &cfg, CT_T0 + 1000, 20);
    ct_check_model(a.plog, &m, 13);
    pulse_compact_destroy(comp);
    ck_assert_int_eq(pulse_plog_close(a.plog), PULSE_OK);
    a.plog = ct_open(dir, SEG);
    ct_check_model(a.plog, &m, 13);
    ck_assert_int_eq(pulse_plog_close(a.plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

TCase *compact_readers_tcase(void)
{
    TCase *tc = tcase_create("readers");

    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, test_pass_over_an_unchanged_log_reads_nothing);
    tcase_add_test(tc, test_reader_holding_a_slice_keeps_the_old_bytes);
    tcase_add_test(tc, test_random_model_with_passes_and_reopens);
    tcase_add_test(tc, test_passes_run_safely_beside_appends_and_reads);
    return tc;
}
