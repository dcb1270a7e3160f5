/* SPDX-License-Identifier: MIT */
/*
 * datadirtest.h - helpers shared by the files of check_datadir
 * (datadirtest.c), and the test cases each file contributes to the suite
 * (check_datadir.c).
 *
 * Every test runs with the fixture setup/teardown: setup makes a fresh
 * temporary data directory (tmpdir), teardown removes it. Paths named "rel"
 * are relative to tmpdir. The helpers fail the running test (ck_assert)
 * rather than return errors.
 */
#ifndef PULSE_TESTS_DATADIRTEST_H
#define PULSE_TESTS_DATADIRTEST_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/broker.h"
#include "broker/local.h"
#include "common/buf.h"

/* The running test's data directory. */
extern char tmpdir[256];
/* The topics seed() creates. */
extern const char *const three[3];

/* Removes the tree tmpdir/rel. */
void rm_tree(const char *rel);
void setup(void);
void teardown(void);
/* The defaults with data_dir = tmpdir, 64 KiB segments, no background
 * retention or compaction passes. */
void test_config(struct pulse_broker_config *cfg);
/* Opens a broker that must open; rep is nullable. */
struct pulse_broker *open_ok(struct pulse_broker_open_report *rep);
/* Opens expecting failure; returns the status, err gets the message. */
pulse_status_t open_fails(char *err, size_t errlen);
/* Removes the file tmpdir/rel, which must exist. */
void unlink_rel(const char *rel);
/* Whether tmpdir/rel exists. */
bool path_exists(const char *rel);
/* Creates a topic with these settings. */
void create(struct pulse_broker *b, const char *name, int32_t parts, int cleanup, int64_t retention_ms);
/* 40 records spread over the partitions (several segments each). */
void fill(struct pulse_broker *b, const char *topic, uint32_t parts);
/* Every verified batch byte of a partition, from its log start. */
void dump_partition(struct pulse_broker *b, const char *topic, uint32_t p, struct pulse_buf *out);
/* The bytes of every partition of the listed topics, concatenated with
 * separators: equal strings mean equal records at equal offsets (batches
 * carry their base offset and CRC). */
void dump_all(struct pulse_broker *b, const char *const *topics, size_t n, struct pulse_buf *out);
/* Three topics with records, a retention change and a cursor; closed.
 * before gets their bytes, cluster the cluster id. */
void seed(struct pulse_buf *before, char *cluster, size_t clen);
/* The three topics came back whole: definitions, bytes, identity. */
void check_restored(struct pulse_broker *b, const struct pulse_buf *before, const char *cluster);
/* Flips one bit of a file in place (pos < 0 counts from the end). */
void flip(const char *rel, long pos);
/* Replaces tmpdir/rel with text. */
void write_text(const char *rel, const char *text);

/* The test cases of each file, in check_datadir's order. */
TCase *datadir_store_tcase(void);
TCase *datadir_topics_tcase(void);
TCase *datadir_failures_tcase(void);

#endif
