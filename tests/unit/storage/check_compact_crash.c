/* SPDX-License-Identifier: MIT */
/* check_compact_crash.c - a compaction killed at each of its crash points
 * (PULSE_FAILPOINT in a forked child that really exits mid-commit), then the
 * log reopened by real recovery and checked against the reference model:
 * newest value per key, keyless records kept, tombstones honoured, every
 * survivor at its original offset, no temp file left, and the next append
 * gets the next offset. Also: orphan temps from an older crash, and a
 * compacted data file paired with its pre-compaction index by file surgery. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "storage/compact.h"
#include "storage/plog.h"

#include "compacttest.h"

#define SEG 1024
#define NKEYS 12

/* Several sealed segments full of duplicates, an expired tombstone alone
 * in the log (key 11) and one with older values (key 3), keyless records
 * in between. */
static void build_log(const char *dir, struct ct_model *m)
{
    struct pulse_plog *plog = ct_open(dir, SEG);
    for (int r = 0; r < 4; r++) {
        for (int k = 0; k < 10; k++)
            ct_append(plog, m, k, false, CT_T0 + r, 40);
        ct_append(plog, m, -1, false, CT_T0 + r, 40);
    }
    ct_append(plog, m, 3, true, CT_T0, 0);
    ct_append(plog, m, 11, true, CT_T0, 0);
    for (int i = 0; i < 3; i++)
        ct_append(plog, m, -1, false, CT_T0, 600);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
}

static void cfg_for_crash(struct pulse_compact_config *cfg)
{
    ct_cfg(cfg);
    cfg->max_segments_per_pass = 100;
}

/* Forks a child that opens the log and runs one pass with the failpoint
 * armed; returns the child's exit status. */
static int run_child(const char *dir, const char *failpoint)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct pulse_plog *plog = NULL;
        struct pulse_plog_config pcfg;
        struct pulse_compact_config cfg;
        pulse_plog_config_init(&pcfg);
        pcfg.segment_max_bytes = SEG;
        pcfg.index_interval_bytes = 256;
        if (pulse_plog_open(dir, &pcfg, &plog, NULL) != PULSE_OK)
            _exit(2);
        setenv("PULSE_FAILPOINT", failpoint, 1);
        cfg_for_crash(&cfg);
        (void)pulse_compact_pass(plog, &cfg, CT_T0 + 10 * CT_DAY_MS, NULL);
        _exit(0); /* the failpoint was never reached */
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void check_after_crash(const char *dir, const struct ct_model *m)
{
    struct pulse_plog *plog;
    struct pulse_plog_recovery rec;
    struct pulse_plog_config pcfg;
    struct pulse_compact_config cfg;

    pulse_plog_config_init(&pcfg);
    pcfg.segment_max_bytes = SEG;
    pcfg.index_interval_bytes = 256;
    plog = NULL;
    ck_assert_int_eq(pulse_plog_open(dir, &pcfg, &plog, &rec), PULSE_OK);
    ck_assert_int_eq(ct_count_files(dir, ".tmp-"), 0);
    ct_check_model(plog, m, NKEYS);
    /* Offsets were not renumbered: the log end is where it was. */
    ck_assert_int_eq(pulse_plog_log_end(plog), m->recs[m->n - 1].offset + 1);
    ck_assert_int_eq(ct_append(plog, NULL, 0, false, CT_T0, 0), m->recs[m->n - 1].offset + 1);
    /* And a compaction after the crash finishes the job correctly. */
    cfg_for_crash(&cfg);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0 + 10 * CT_DAY_MS, NULL), PULSE_OK);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    plog = ct_open(dir, SEG);
    {
        /* The model plus the one append above. */
        struct ct_model m2 = {0};
        m2.n = m2.cap = m->n + 1;
        m2.recs = pulse_calloc(m2.n, sizeof *m2.recs);
        ck_assert_ptr_nonnull(m2.recs);
        memcpy(m2.recs, m->recs, m->n * sizeof *m->recs);
        m2.recs[m->n].offset = m->recs[m->n - 1].offset + 1;
        m2.recs[m->n].ts = CT_T0;
        m2.recs[m->n].key = 0;
        ct_check_model(plog, &m2, NKEYS);
        ct_model_free(&m2);
    }
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
}

static void crash_at(const char *failpoint)
{
    char *dir = pt_tmpdir();
    struct ct_model m = {0};

    build_log(dir, &m);
    ck_assert_int_eq(run_child(dir, failpoint), PULSE_FAILPOINT_EXIT_CODE);
    check_after_crash(dir, &m);
    ct_model_free(&m);
    pt_cleanup(dir);
}

START_TEST(test_crash_after_temps_are_synced_keeps_the_old_segment)
{
    crash_at("compact_after_temps");
}
END_TEST

START_TEST(test_crash_between_data_and_index_rename_is_recovered)
{
    crash_at("compact_between_renames");
}
END_TEST

START_TEST(test_crash_before_directory_fsync_is_recovered)
{
    crash_at("compact_before_dir_fsync");
}
END_TEST

START_TEST(test_orphan_compaction_temps_are_removed_at_open)
{
    char *dir = pt_tmpdir();
    struct ct_model m = {0};
    char path[512];
    struct pulse_plog *plog;

    build_log(dir, &m);
    snprintf(path, sizeof path, "%s/.tmp-compact-%020d.log.tmp", dir, 0);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs("half a rewrite", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/.tmp-compact-%020d.index.tmp", dir, 0);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    plog = ct_open(dir, SEG);
    ck_assert_int_eq(ct_count_files(dir, ".tmp-"), 0);
    ct_check_model(plog, &m, NKEYS);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = pulse_malloc(sz > 0 ? (size_t)sz : 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(fread(p, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *len = (size_t)sz;
    return p;
}

static void spit(const char *path, const uint8_t *p, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, len, f), len);
    fclose(f);
}

START_TEST(test_compacted_data_with_its_old_index_is_recovered)
{
    char *dir = pt_tmpdir();
    struct ct_model m = {0};
    struct pulse_compact_config cfg;
    struct pulse_plog *plog;
    struct pulse_segment_info *segs = NULL;
    size_t n = 0, ilen = 0, nold = 0;
    char ipath[512];
    uint8_t **old = NULL;
    size_t *olen = NULL;
    int64_t *bases = NULL;

    build_log(dir, &m);
    plog = ct_open(dir, SEG);
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &n), PULSE_OK);
    old = pulse_calloc(n, sizeof *old);
    olen = pulse_calloc(n, sizeof *olen);
    bases = pulse_calloc(n, sizeof *bases);
    for (size_t i = 0; i + 1 < n; i++) {
        snprintf(ipath, sizeof ipath, "%s/%020" PRId64 ".index", dir, segs[i].base_offset);
        old[i] = slurp(ipath, &olen[i]);
        bases[i] = segs[i].base_offset;
        nold++;
    }
    pulse_free(segs);
    cfg_for_crash(&cfg);
    ck_assert_int_eq(pulse_compact_pass(plog, &cfg, CT_T0 + 10 * CT_DAY_MS, NULL), PULSE_OK);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    /* Put every pre-compaction index back beside its compacted data, as a
     * crash between the two renames would leave it. */
    for (size_t i = 0; i < nold; i++) {
        snprintf(ipath, sizeof ipath, "%s/%020" PRId64 ".log", dir, bases[i]);
        if (access(ipath, F_OK) != 0)
            continue; /* deleted by the pass */
        snprintf(ipath, sizeof ipath, "%s/%020" PRId64 ".index", dir, bases[i]);
        spit(ipath, old[i], olen[i]);
        ilen++;
    }
    ck_assert_uint_gt(ilen, 0);
    plog = ct_open(dir, SEG);
    ct_check_model(plog, &m, NKEYS);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    for (size_t i = 0; i < nold; i++)
        pulse_free(old[i]);
    pulse_free(old);
    pulse_free(olen);
    pulse_free(bases);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

static Suite *crash_suite(void)
{
    Suite *s = suite_create("compact_crash");
    TCase *tc = tcase_create("crash");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_crash_after_temps_are_synced_keeps_the_old_segment);
    tcase_add_test(tc, test_crash_between_data_and_index_rename_is_recovered);
    tcase_add_test(tc, test_crash_before_directory_fsync_is_recovered);
    tcase_add_test(tc, test_orphan_compaction_temps_are_removed_at_open);
    tcase_add_test(tc, test_compacted_data_with_its_old_index_is_recovered);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(crash_suite());
    int failed;

    pulse_log_set_level(PULSE_LOG_ERROR);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
