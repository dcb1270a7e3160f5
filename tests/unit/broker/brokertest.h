/* SPDX-License-Identifier: MIT */
/*
 * brokertest.h - helpers shared by the files of check_broker (brokertest.c),
 * and the test cases each file contributes to the suite (check_broker.c).
 *
 * Every test runs with the fixture setup/teardown: setup makes a fresh
 * temporary data directory (tmpdir), teardown removes it. Check forks each
 * test, so the helpers' state never crosses tests. The helpers fail the
 * running test (ck_assert) rather than return errors.
 */
#ifndef PULSE_TESTS_BROKERTEST_H
#define PULSE_TESTS_BROKERTEST_H

#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/broker.h"
#include "broker/local.h"

/* The running test's data directory ("/tmp/check_broker.XXXXXX"). */
extern char tmpdir[256];

void setup(void);
void teardown(void);

/* The defaults with data_dir = tmpdir and 64 KiB segments. */
void test_config(struct pulse_broker_config *cfg);
/* pulse_broker_open that must succeed; rep is nullable. */
struct pulse_broker *open_cfg(const struct pulse_broker_config *cfg, struct pulse_broker_open_report *rep);
struct pulse_broker *open_default(struct pulse_broker_open_report *rep);
/* Creates topic name with parts partitions and default settings. */
void create_topic(struct pulse_broker *b, const char *name, int32_t parts);
/* A record borrowing key and value (either NULL); partition -1 routes it. */
struct pulse_publish_record rec_kv(const char *key, const char *value, int32_t partition);
/* The high watermark of partition p of topic. */
int64_t hw_of(struct pulse_broker *b, const char *topic, uint32_t p);
/* Whether tmpdir/rel exists; how many entries directory tmpdir/rel holds
 * (-1 if it cannot be opened). */
bool path_exists(const char *rel);
int count_entries(const char *rel);
/* Reads every record of a partition from offset 0 into values (up to max)
 * through the seam's fetch, checking offsets are consecutive. Returns the
 * count. */
size_t read_values(struct pulse_broker *b, const char *topic, uint32_t p, char values[][32], size_t max);

/* A completion (pulse_broker_*_async callbacks) a test waits for. */
struct async_done {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    pulse_status_t st;
};
void async_init(struct async_done *d);
/* The callback: counts the call and keeps its status. */
void async_done_fn(void *arg, pulse_status_t st);
/* Waits until the callback has been called calls times in all. */
void async_wait(struct async_done *d, int calls);

/* A cursor of partition p of topic at off. */
struct pulse_cursor cur(const char *topic, uint32_t p, int64_t off);

/* The test cases of each file, in check_broker's order. */
TCase *broker_topics_tcase(void);
TCase *broker_publish_tcase(void);
TCase *broker_fetch_tcase(void);
TCase *broker_cursors_tcase(void);
TCase *broker_health_tcase(void);
TCase *broker_synclead_tcase(void);
TCase *broker_scale_tcase(void);

#endif
