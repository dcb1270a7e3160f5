/* SPDX-License-Identifier: MIT */
/* check_compact_crash.c - a compaction killed at each of its crash points
 * (PULSE_FAILPOINT in a forked child that really exits mid-commit), then the
 * log reopened by real recovery and checked against the reference model:
 * newest value per key, keyless records kept, tombstones honoured, every
 * survivor at its original offset and read once, no temp or merge file
 * left, no sealed segment reported corrupt, and the next append gets the
 * next offset. The crash points cover the copy and swap of one segment and
 * every step of a merge of several (and a crash of the recovery that
 * finishes a merge). Also: orphan temps from an older crash, a compacted
 * data file paired with its pre-compaction index by file surgery, and a
 * damaged merge file, which recovery must leave alone. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
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
 * in between. What survives of the first segments fits one segment, so a
 * pass merges them (three or more into one: checked where it matters). */
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

/* Sealed segments that each keep a large unique record, so that no two of
 * them fit one segment: a pass rewrites them one by one (copy and swap),
 * never merges. Same keys and tombstones as build_log. */
static void build_log_single(const char *dir, struct ct_model *m)
{
    struct pulse_plog *plog = ct_open(dir, SEG);
    for (int s = 0; s < 6; s++) {
        ct_append(plog, m, -1, false, CT_T0 + s, 600);
        for (int j = 0; j < 3; j++)
            ct_append(plog, m, (s * 3 + j) % 10, false, CT_T0 + s, 0);
    }
    ct_append(plog, m, 3, true, CT_T0, 0);
    ct_append(plog, m, 11, true, CT_T0, 0);
    for (int i = 0; i < 3; i++)
        ct_append(plog, m, -1, false, CT_T0, 600);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
}

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

/* Files in dir whose name ends with suffix. */
static int count_suffix(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name), sl = strlen(suffix);
        if (len >= sl && strcmp(de->d_name + len - sl, suffix) == 0)
            n++;
    }
    closedir(d);
    return n;
}

static void cfg_for_crash(struct pulse_compact_config *cfg)
{
    ct_cfg(cfg);
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
    ct_check_model(plog, m, NKEYS);
    /* Two files holding the same offsets would show up here (the later
     * one's base cuts the earlier one short) and as offsets read twice. */
    ck_assert_uint_eq(rec.corrupt_segments, 0);
    ck_assert_int_eq(ct_count_files(dir, ".tmp-"), 0);
    ck_assert_int_eq(count_suffix(dir, ".merge"), 0);
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

    build_log_single(dir, &m);
    ck_assert_int_eq(run_child(dir, failpoint), PULSE_FAILPOINT_EXIT_CODE);
    ck_assert_int_eq(count_suffix(dir, ".merge"), 0); /* a single rewrite, not a merge */
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

/* The one merge file in dir, parsed; false when there is none. */
static bool find_merge(const char *dir, int64_t *first, int64_t *end)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    bool found = false;
    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len > 6 && strcmp(de->d_name + len - 6, ".merge") == 0) {
            ck_assert(!found);
            ck_assert_int_eq(sscanf(de->d_name, "%20" SCNd64 "-%20" SCNd64, first, end), 2);
            found = true;
        }
    }
    closedir(d);
    return found;
}

/* Segment data files in dir with a base in (first, end). */
static int logs_between(const char *dir, int64_t first, int64_t end)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)) != NULL) {
        int64_t base;
        char tail[8];
        if (strlen(de->d_name) == 24 && sscanf(de->d_name, "%20" SCNd64 "%7s", &base, tail) == 2 &&
            strcmp(tail, ".log") == 0 && base > first && base < end)
            n++;
    }
    closedir(d);
    return n;
}

/* A merge killed at failpoint; merge_left is how many of the segments it
 * replaces should still be on disk at that point (-1: at least one), or -2
 * when the merge file is already gone (renamed into place). */
static void merge_crash_at(const char *failpoint, int merge_left)
{
    char *dir = pt_tmpdir();
    struct ct_model m = {0};
    int64_t first = 0, end = 0;

    build_log(dir, &m);
    ck_assert_int_eq(run_child(dir, failpoint), PULSE_FAILPOINT_EXIT_CODE);
    if (merge_left == -2) {
        ck_assert(!find_merge(dir, &first, &end));
    } else {
        ck_assert(find_merge(dir, &first, &end));
        if (merge_left == -1)
            ck_assert_int_ge(logs_between(dir, first, end), 1);
        else
            ck_assert_int_eq(logs_between(dir, first, end), merge_left);
    }
    check_after_crash(dir, &m);
    ct_model_free(&m);
    pt_cleanup(dir);
}

START_TEST(test_merge_crash_after_the_merge_file_is_named_is_rolled_forward)
{
    merge_crash_at("compact_merge_after_marker", -1);
}
END_TEST

START_TEST(test_merge_crash_between_unlinks_is_rolled_forward)
{
    /* The first later segment is gone, at least one more is still there
     * (the merge covers three or more segments). */
    merge_crash_at("compact_merge_between_unlinks", -1);
}
END_TEST

START_TEST(test_merge_crash_after_the_unlinks_is_rolled_forward)
{
    merge_crash_at("compact_merge_before_renames", 0);
}
END_TEST

START_TEST(test_merge_crash_between_index_and_data_rename_is_rolled_forward)
{
    merge_crash_at("compact_merge_between_renames", 0);
}
END_TEST

START_TEST(test_merge_crash_before_the_last_directory_fsync_is_recovered)
{
    merge_crash_at("compact_merge_before_dir_fsync", -2);
}
END_TEST

/* Recovery itself dies while finishing a merge; the next open finishes it. */
START_TEST(test_crash_while_recovery_finishes_a_merge_is_finished_next_time)
{
    char *dir = pt_tmpdir();
    struct ct_model m = {0};
    int64_t first = 0, end = 0;
    pid_t pid;
    int status = 0;

    build_log(dir, &m);
    ck_assert_int_eq(run_child(dir, "compact_merge_between_unlinks"), PULSE_FAILPOINT_EXIT_CODE);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct pulse_plog *plog = NULL;
        struct pulse_plog_config pcfg;
        pulse_plog_config_init(&pcfg);
        pcfg.segment_max_bytes = SEG;
        pcfg.index_interval_bytes = 256;
        setenv("PULSE_FAILPOINT", "compact_finish_merge_before_rename", 1);
        (void)pulse_plog_open(dir, &pcfg, &plog, NULL);
        _exit(0);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), PULSE_FAILPOINT_EXIT_CODE);
    /* Every segment the merge replaces is gone; the merge file is not yet
     * in place. */
    ck_assert(find_merge(dir, &first, &end));
    ck_assert_int_eq(logs_between(dir, first, end), 0);
    check_after_crash(dir, &m);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

/* A merge file that does not verify is never trusted: nothing is removed
 * for it, it stays for inspection and is reported as corrupt. */
START_TEST(test_damaged_merge_file_is_left_alone_and_reported)
{
    char *dir = pt_tmpdir();
    struct ct_model m = {0};
    struct pulse_plog *plog = NULL;
    struct pulse_plog_config pcfg;
    struct pulse_plog_recovery rec;
    int64_t first = 0, end = 0;
    char path[512];
    size_t len = 0;
    uint8_t *raw;
    int before;

    build_log(dir, &m);
    ck_assert_int_eq(run_child(dir, "compact_merge_after_marker"), PULSE_FAILPOINT_EXIT_CODE);
    ck_assert(find_merge(dir, &first, &end));
    before = logs_between(dir, first, end);
    ck_assert_int_ge(before, 1);
    snprintf(path, sizeof path, "%s/%020" PRId64 "-%020" PRId64 ".merge", dir, first, end);
    raw = slurp(path, &len);
    ck_assert_uint_gt(len, 20);
    raw[len - 5] ^= 0x40; /* inside the last batch's records: its CRC fails */
    spit(path, raw, len);
    pulse_free(raw);
    pulse_plog_config_init(&pcfg);
    pcfg.segment_max_bytes = SEG;
    pcfg.index_interval_bytes = 256;
    ck_assert_int_eq(pulse_plog_open(dir, &pcfg, &plog, &rec), PULSE_OK);
    ck_assert_uint_eq(rec.corrupt_segments, 1);
    ck_assert(find_merge(dir, &first, &end));
    ck_assert_int_eq(logs_between(dir, first, end), before);
    /* The segments the merge would have replaced still serve everything. */
    ct_check_model(plog, &m, NKEYS);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
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
    tcase_add_test(tc, test_merge_crash_after_the_merge_file_is_named_is_rolled_forward);
    tcase_add_test(tc, test_merge_crash_between_unlinks_is_rolled_forward);
    tcase_add_test(tc, test_merge_crash_after_the_unlinks_is_rolled_forward);
    tcase_add_test(tc, test_merge_crash_between_index_and_data_rename_is_rolled_forward);
    tcase_add_test(tc, test_merge_crash_before_the_last_directory_fsync_is_recovered);
    tcase_add_test(tc, test_crash_while_recovery_finishes_a_merge_is_finished_next_time);
    tcase_add_test(tc, test_damaged_merge_file_is_left_alone_and_reported);
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
