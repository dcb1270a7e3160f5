/* SPDX-License-Identifier: MIT */
/* check_compact.c - log compaction on real partition logs: which records
 * survive, sparse batches that read and verify, reads that skip removed
 * offsets, the untouched active segment, the gain gate, deleted segments,
 * no tombstone resurrection, no timestamp wrap, progress past the key cap,
 * passes over an unchanged log that read nothing, readers that keep the
 * old bytes, and a seeded random model test with reopens.
 *
 * One binary made of one file per concern, whose test cases this file
 * gathers: compact_survivors.c (which records survive), compact_segments.c
 * (what a pass does to segments), compact_readers.c (passes beside readers
 * and writers), compact_merge.c (small segments, budgets, failed commits),
 * compact_edits.c (the log's edits). Shared helpers: compacttest.h and
 * compactcases.h. */
#include <check.h>

#include "common/log.h"

#include "compactcases.h"

static Suite *compact_suite(void)
{
    Suite *s = suite_create("compact");

    suite_add_tcase(s, compact_survivors_tcase());
    suite_add_tcase(s, compact_segments_tcase());
    suite_add_tcase(s, compact_readers_tcase());
    suite_add_tcase(s, compact_merge_tcase());
    suite_add_tcase(s, compact_edits_tcase());
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(compact_suite());
    int failed;

    pulse_log_set_level(PULSE_LOG_ERROR);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
