/* SPDX-License-Identifier: MIT */
/*
 * check_broker.c - the broker core through its seam (broker/broker.h), one
 * binary made of one file per concern, whose test cases this file gathers:
 *
 *   broker_topics.c   routing, the name rule, topic create/list/get/delete,
 *                     crash safety of create and delete, what a start refuses
 *   broker_publish.c  the publish path, asynchronous completion, concurrency,
 *                     shared fdatasyncs, the epoch rule, the checkpoint
 *   broker_fetch.c    fetch (records, probes, raw slices), long-poll waiters
 *   broker_cursors.c  cursor reads and commits, the committer
 *   broker_health.c   storage failures, fences, healing, metrics
 *   broker_synclead.c who syncs: the publisher itself, or the syncer and
 *                     its pool
 *
 * Shared helpers (a fresh data directory per test, opening a broker,
 * topics, records, completions) are in brokertest.h. Threaded: run it under
 * TSan too (.ci/extra does).
 */
#include <check.h>
#include <stdlib.h>

#include "brokertest.h"

static Suite *broker_suite(void)
{
    Suite *s = suite_create("broker");

    suite_add_tcase(s, broker_topics_tcase());
    suite_add_tcase(s, broker_publish_tcase());
    suite_add_tcase(s, broker_fetch_tcase());
    suite_add_tcase(s, broker_cursors_tcase());
    suite_add_tcase(s, broker_health_tcase());
    suite_add_tcase(s, broker_synclead_tcase());
    suite_add_tcase(s, broker_scale_tcase());
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(broker_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
