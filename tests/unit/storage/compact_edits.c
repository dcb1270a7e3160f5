/* SPDX-License-Identifier: MIT */
/*
 * compact_edits.c - part of check_compact: the log's edits (plog_edit.h)
 * applied directly: an edit of segments the list no longer holds changes
 * nothing, a remove edit of a middle segment takes its files only.
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

/* ---- the log's edits (plog_edit.h) ---------------------------------------- */

static bool file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* An edit is checked against the list under the writer lock: segments
 * the list no longer holds (trimmed since the capture), segments not in a
 * row, and the active segment are refused with PULSE_BUSY, and nothing
 * changes, the job's temps included; a malformed edit is PULSE_INVALID. */
START_TEST(test_an_edit_of_segments_the_list_no_longer_holds_changes_nothing)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct ct_model m = {0};
    struct pulse_plog_segref *refs = NULL;
    struct pulse_index idx;
    struct pulse_plog_edit_result res;
    size_t n = 0, removed = 0;

    for (int i = 0; i < 40; i++)
        ct_append(plog, &m, i % 5, false, CT_T0, 40);
    ck_assert_int_eq(pulse_plog_capture(plog, &refs, &n), PULSE_OK);
    ck_assert_uint_ge(n, 4);
    ck_assert_int_eq(pulse_plog_trim(plog, refs[1].base, &removed), PULSE_OK);
    ck_assert_uint_eq(removed, 1);

    /* Temps a job would have written: they must survive a refused edit. */
    char *dtemp = pulse_plog_temp_path(plog, "test", refs[1].base, "log");
    char *itemp = pulse_plog_temp_path(plog, "test", refs[1].base, "index");
    FILE *f = fopen(dtemp, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    f = fopen(itemp, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    pulse_index_init(&idx);
    struct pulse_plog_newseg add = {dtemp, itemp, &idx, 0, INT64_MIN, 0};
    const struct pulse_plog_segref *gone[1] = {&refs[0]};
    const struct pulse_plog_segref *apart[2] = {&refs[1], &refs[3]};
    const struct pulse_plog_segref *active[1] = {&refs[n - 1]};
    struct pulse_plog_edit edit = {.kind = PULSE_PLOG_EDIT_REMOVE, .who = "test", .segs = gone, .n = 1};

    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_BUSY);
    ck_assert_uint_eq(res.removed, 0);
    edit.kind = PULSE_PLOG_EDIT_REPLACE;
    edit.add = &add;
    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_BUSY);
    edit.segs = apart;
    edit.n = 2;
    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_BUSY);
    ck_assert(!res.temp_taken);
    edit.segs = active;
    edit.n = 1;
    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_BUSY);
    edit.kind = PULSE_PLOG_EDIT_REMOVE;
    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_BUSY);
    edit.n = 0;
    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_INVALID);
    edit.kind = PULSE_PLOG_EDIT_REPLACE;
    edit.n = 1;
    edit.add = NULL;
    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_INVALID);

    ck_assert(file_exists(dtemp));
    ck_assert(file_exists(itemp));
    ck_assert(!pulse_plog_fenced(plog));
    ck_assert_uint_eq(nsegments(plog), n - 1);
    ct_check_model(plog, &m, 5);
    pulse_plog_capture_free(refs, n);
    pulse_index_fini(&idx);
    pulse_free(dtemp);
    pulse_free(itemp);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    ct_model_free(&m);
    pt_cleanup(dir);
}
END_TEST

/* A REMOVE edit of a middle segment: its files go, the log start stays,
 * and what the model says survives reads back (the removed records were
 * the model's garbage: superseded by newer ones of their keys). */
START_TEST(test_a_remove_edit_of_a_middle_segment_takes_its_files_only)
{
    char *dir = pt_tmpdir();
    struct pulse_plog *plog = ct_open(dir, SEG);
    struct pulse_plog_segref *refs = NULL;
    size_t n = 0;

    for (int i = 0; i < 40; i++)
        (void)ct_append(plog, NULL, 0, false, CT_T0, 40);
    ck_assert_int_eq(pulse_plog_capture(plog, &refs, &n), PULSE_OK);
    ck_assert_uint_ge(n, 4);
    int64_t start = pulse_plog_log_start(plog);
    char *log1 = pulse_strdup(refs[1].path);
    const struct pulse_plog_segref *mid[1] = {&refs[1]};
    struct pulse_plog_edit edit = {.kind = PULSE_PLOG_EDIT_REMOVE, .who = "test", .segs = mid, .n = 1};
    struct pulse_plog_edit_result res;

    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_OK);
    ck_assert_uint_eq(res.removed, 1);
    ck_assert_int_eq(pulse_plog_sync_dir(plog, "test"), PULSE_OK);
    ck_assert(!file_exists(log1));
    ck_assert_int_eq(pulse_plog_log_start(plog), start);
    ck_assert_uint_eq(nsegments(plog), n - 1);
    /* Removing it again: no longer listed. */
    ck_assert_int_eq(pulse_plog_apply(plog, &edit, &res), PULSE_BUSY);
    pulse_plog_capture_free(refs, n);
    pulse_free(log1);
    ck_assert_int_eq(pulse_plog_close(plog), PULSE_OK);
    pt_cleanup(dir);
}
END_TEST

TCase *compact_edits_tcase(void)
{
    TCase *tc = tcase_create("edits");

    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, test_an_edit_of_segments_the_list_no_longer_holds_changes_nothing);
    tcase_add_test(tc, test_a_remove_edit_of_a_middle_segment_takes_its_files_only);
    return tc;
}
