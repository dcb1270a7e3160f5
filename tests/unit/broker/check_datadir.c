/* SPDX-License-Identifier: MIT */
/*
 * check_datadir.c - the data directory's own metadata (src/broker/datadir.c):
 * a lost or damaged metadata store never costs event data. Each test damages
 * a real data directory between a close and an open (the store removed,
 * its files overwritten, topic.json or cluster.json flipped or removed) and
 * checks what the next open keeps, adopts, rewrites or refuses, with the
 * records compared byte for byte at their offsets. Also: the offline
 * --adopt-topic and --repair-metadata entry points, and the errors of a
 * data directory that cannot be used.
 *
 * One binary made of one file per concern, whose test cases this file
 * gathers: datadir_store.c (the metadata store lost or damaged),
 * datadir_topics.c (topic files, partition directories, adoption),
 * datadir_failures.c (failed metadata writes and directory steps). Shared
 * helpers are in datadirtest.h.
 */
#include <check.h>
#include <stdlib.h>

#include "datadirtest.h"

static Suite *datadir_suite(void)
{
    Suite *s = suite_create("datadir");

    suite_add_tcase(s, datadir_store_tcase());
    suite_add_tcase(s, datadir_topics_tcase());
    suite_add_tcase(s, datadir_failures_tcase());
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(datadir_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
