/* SPDX-License-Identifier: MIT */
/*
 * broker_topics.c - part of check_broker: Kafka-compatible routing, the name
 * rule, topic create/list/get/delete, persistence across reopen, crash
 * safety of create and delete (a child process really exits at a named
 * failpoint and the parent reopens the data directory), what a start
 * refuses, and delete/recreate under concurrent publishers.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/broker_int.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "meta/meta.h"
#include "storage/batch.h"
#include "common/fsio.h"
#include "storage/snapshot.h"
#include "faultio.h"
#include "localtest.h"
#include "brokertest.h"

/* ---- routing and names ------------------------------------------------ */

START_TEST(test_murmur2_matches_kafka_reference_values)
{
    /* Pinned from Apache Kafka's UtilsTest.testMurmur2 (clients module),
     * which checks Utils.murmur2 against these signed Java ints. */
    static const struct {
        const char *key;
        int32_t want;
    } cases[] = {
        {"21", -973932308},
        {"foobar", -790332482},
        {"a-little-bit-long-string", -985981536},
        {"a-little-bit-longer-string", -1486304829},
        {"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
        {"abc", 479470107},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t h = pulse_broker_murmur2((const uint8_t *)cases[i].key, strlen(cases[i].key));
        ck_assert_msg((int32_t)h == cases[i].want, "murmur2(%s) = %d, want %d", cases[i].key, (int32_t)h,
                      cases[i].want);
    }
}
END_TEST

START_TEST(test_keyed_records_go_to_kafka_default_partition)
{
    struct pulse_broker *b = open_default(NULL);
    const char *keys[] = {"21", "foobar", "abc", "a-little-bit-long-string", "", "user-42"};
    struct pulse_publish_record recs[6];
    struct pulse_offset_pair offs[6];
    char err[256];

    create_topic(b, "keyed", 7);
    for (int i = 0; i < 6; i++)
        recs[i] = rec_kv(keys[i], "v", -1);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "keyed", recs, 6, offs, err, sizeof err), PULSE_OK);
    /* (-973932308 & 0x7fffffff) % 7 = 1173551340 % 7 = 3, and so on. */
    ck_assert_uint_eq(offs[0].partition, (uint32_t)((-973932308 & 0x7fffffff) % 7));
    ck_assert_uint_eq(offs[1].partition, (uint32_t)((-790332482 & 0x7fffffff) % 7));
    ck_assert_uint_eq(offs[2].partition, (uint32_t)(479470107 % 7));
    ck_assert_uint_eq(offs[3].partition, (uint32_t)((-985981536 & 0x7fffffff) % 7));
    for (int i = 0; i < 6; i++)
        ck_assert_uint_eq(offs[i].partition, pulse_broker_key_partition((const uint8_t *)keys[i], strlen(keys[i]), 7));
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_name_rule)
{
    char longname[251];

    ck_assert(pulse_broker_name_valid("orders", 6));
    ck_assert(pulse_broker_name_valid("a.b-c_D9", 8));
    ck_assert(pulse_broker_name_valid("_x", 2));
    ck_assert(pulse_broker_name_valid("...", 3));
    ck_assert(!pulse_broker_name_valid("", 0));
    ck_assert(!pulse_broker_name_valid(".", 1));
    ck_assert(!pulse_broker_name_valid("..", 2));
    ck_assert(!pulse_broker_name_valid("__internal", 10));
    ck_assert(!pulse_broker_name_valid("a/b", 3));
    ck_assert(!pulse_broker_name_valid("a b", 3));
    ck_assert(!pulse_broker_name_valid("caf\xc3\xa9", 5));
    memset(longname, 'x', sizeof longname);
    ck_assert(pulse_broker_name_valid(longname, 249));
    ck_assert(!pulse_broker_name_valid(longname, 250));
}
END_TEST

/* ---- topics ----------------------------------------------------------- */

START_TEST(test_topic_create_validates_every_field)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_topic_info *info = NULL;
    char err[256];
    struct pulse_topic_spec spec = {"t", 0, -1, -1, -1, -1, -1};

    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_INVALID);
    spec.partitions = 257;
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_INVALID);
    spec.partitions = 2;
    spec.segment_bytes = 1023;
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_INVALID);
    spec.segment_bytes = (int64_t)PULSE_PLOG_MAX_SEGMENT_BYTES + 1;
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_INVALID);
    spec.segment_bytes = 1024;
    spec.cleanup = 7;
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_INVALID);
    spec.cleanup = -1;
    spec.name = "__t";
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_INVALID_NAME);
    spec.name = "..";
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_INVALID_NAME);
    ck_assert_int_eq(count_entries("topics"), 0);

    spec.name = "t";
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, &info, err, sizeof err), PULSE_OK);
    ck_assert_str_eq(info->name, "t");
    ck_assert_uint_eq(info->partitions, 2);
    ck_assert_int_eq(info->cleanup, PULSE_CLEANUP_DELETE);
    ck_assert_int_eq(info->retention_ms, 7LL * 24 * 3600 * 1000);
    ck_assert_int_eq(info->retention_bytes, 0);
    ck_assert_int_eq(info->segment_bytes, 1024);
    ck_assert_ptr_nonnull(info->stats);
    ck_assert_int_eq(info->stats[1].high_watermark, 0);
    pulse_topic_info_free(info);
    ck_assert(path_exists("topics/t/0"));
    ck_assert(path_exists("topics/t/1"));

    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_EXISTS);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_topics_persist_across_reopen_and_list_sorted)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_topic_spec spec = {"zeta", 3, PULSE_CLEANUP_COMPACT, 1000, 2048, 4096, -1};
    struct pulse_topic_info **list = NULL;
    struct pulse_topic_info *info = NULL;
    struct pulse_broker_open_report rep;
    char err[256];
    size_t n = 0;
    char cluster[64];

    snprintf(cluster, sizeof cluster, "%s", pulse_broker_cluster_id(b));
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_OK);
    create_topic(b, "alpha", 1);
    create_topic(b, "alpha2", 2);
    ck_assert_int_eq(pulse_broker_topic_set_retention(b, "alpha", 5, -1, NULL), PULSE_OK);
    ck_assert_int_eq(pulse_broker_topic_set_retention(b, "nope", 5, -1, NULL), PULSE_TOPIC_NOT_FOUND);
    pulse_broker_close(b);

    b = open_default(&rep);
    ck_assert_uint_eq(rep.topics, 3);
    ck_assert_uint_eq(rep.partitions, 6);
    ck_assert_uint_eq(rep.deleted_leftovers, 0);
    ck_assert_int_ge(rep.recovery_us, 0);
    ck_assert_str_eq(pulse_broker_cluster_id(b), cluster);
    ck_assert_int_eq(pulse_broker_topic_list(b, false, &list, &n), PULSE_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(list[0]->name, "alpha");
    ck_assert_int_eq(list[0]->retention_ms, 5);
    ck_assert_str_eq(list[1]->name, "alpha2");
    ck_assert_str_eq(list[2]->name, "zeta");
    ck_assert_ptr_null(list[2]->stats);
    pulse_topic_info_list_free(list, n);

    ck_assert_int_eq(pulse_broker_topic_get(b, "zeta", true, &info), PULSE_OK);
    ck_assert_int_eq(info->cleanup, PULSE_CLEANUP_COMPACT);
    ck_assert_int_eq(info->retention_ms, 1000);
    ck_assert_int_eq(info->retention_bytes, 2048);
    ck_assert_int_eq(info->segment_bytes, 4096);
    ck_assert_uint_eq(info->partitions, 3);
    ck_assert_uint_eq(info->stats[2].partition, 2);
    pulse_topic_info_free(info);
    ck_assert_int_eq(pulse_broker_topic_get(b, "zet", false, &info), PULSE_TOPIC_NOT_FOUND);
    pulse_broker_close(b);
}
END_TEST

struct create_race {
    struct pulse_broker *b;
    pulse_status_t st;
};

static void *create_race_main(void *arg)
{
    struct create_race *cr = arg;
    struct pulse_topic_spec spec = {"race", 4, -1, -1, -1, -1, -1};
    char err[128];

    cr->st = pulse_broker_topic_create(cr->b, &spec, NULL, err, sizeof err);
    return NULL;
}

START_TEST(test_concurrent_creates_of_one_name_exactly_one_wins)
{
    struct pulse_broker *b = open_default(NULL);
    struct create_race cr[6];
    pthread_t th[6];
    int ok = 0, exists = 0;

    for (int i = 0; i < 6; i++) {
        cr[i].b = b;
        ck_assert_int_eq(pthread_create(&th[i], NULL, create_race_main, &cr[i]), 0);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(th[i], NULL);
        ok += cr[i].st == PULSE_OK;
        exists += cr[i].st == PULSE_EXISTS;
    }
    ck_assert_int_eq(ok, 1);
    ck_assert_int_eq(exists, 5);
    /* Four partition directories and topic.json; no marker left over. */
    ck_assert_int_eq(count_entries("topics/race"), 5);
    ck_assert(path_exists("topics/race/topic.json"));
    ck_assert(!path_exists("topics/race/creating"));
    pulse_broker_close(b);
}
END_TEST

/* ---- delete ----------------------------------------------------------- */

START_TEST(test_delete_removes_data_and_cursors_but_not_a_prefixed_name)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_publish_record recs[2] = {rec_kv(NULL, "a", 0), rec_kv(NULL, "b", 0)};
    struct pulse_offset_pair offs[2];
    struct pulse_cursor cs[2];
    struct pulse_cursor got;
    char err[256];

    create_topic(b, "orders", 1);
    create_topic(b, "orders2", 1);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "orders", recs, 2, offs, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "orders2", recs, 2, offs, err, sizeof err), PULSE_OK);
    cs[0] = cur("orders", 0, 1);
    cs[1] = cur("orders2", 0, 2);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "c", cs, 2, err, sizeof err), PULSE_OK);

    ck_assert_int_eq(pulse_broker_topic_delete(b, "orders"), PULSE_OK);
    ck_assert(!path_exists("topics/orders"));
    ck_assert_int_eq(count_entries("topics"), 1);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c", "orders", 0, &got), PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c", "orders2", 0, &got), PULSE_OK);
    ck_assert_int_eq(hw_of(b, "orders2", 0), 2);

    /* The name is free again and starts empty, with no old cursor. */
    create_topic(b, "orders", 1);
    ck_assert_int_eq(hw_of(b, "orders", 0), 0);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c", "orders", 0, &got), PULSE_CURSOR_NOT_FOUND);
    pulse_broker_close(b);

    b = open_default(NULL);
    ck_assert_int_eq(hw_of(b, "orders", 0), 0);
    ck_assert_int_eq(hw_of(b, "orders2", 0), 2);
    pulse_broker_close(b);
}
END_TEST

/* ---- crash safety ----------------------------------------------------- */

/* Runs fn in a child process with PULSE_FAILPOINT=fp and expects it to die
 * there with status 99. */
static void run_to_failpoint(const char *fp, void (*fn)(void))
{
    int status = 0;
    pid_t pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("PULSE_FAILPOINT", fp, 1);
        fn();
        _exit(0); /* the failpoint was not reached */
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_msg(WEXITSTATUS(status) == 99, "child exited %d, failpoint %s not reached", WEXITSTATUS(status), fp);
}

static void child_create(void)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_topic_spec spec = {"crashy", 3, -1, -1, -1, -1, -1};
    char err[128];

    pulse_broker_topic_create(b, &spec, NULL, err, sizeof err);
    pulse_broker_close(b);
}

static void child_delete(void)
{
    struct pulse_broker *b = open_default(NULL);

    pulse_broker_topic_delete(b, "crashy");
    pulse_broker_close(b);
}

/* A topic "crashy" with data and a cursor, closed again. */
static void seed_crashy(void)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_publish_record recs[3] = {rec_kv(NULL, "a", 0), rec_kv(NULL, "b", 1), rec_kv(NULL, "c", 2)};
    struct pulse_offset_pair offs[3];
    struct pulse_cursor c = cur("crashy", 1, 1);
    char err[256];

    create_topic(b, "crashy", 3);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "crashy", recs, 3, offs, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "c", &c, 1, err, sizeof err), PULSE_OK);
    pulse_broker_close(b);
}

START_TEST(test_crash_after_create_dirs_leaves_no_topic)
{
    struct pulse_broker_open_report rep;
    struct pulse_broker *b;
    struct pulse_topic_info *info = NULL;

    run_to_failpoint("topic_create_after_dirs", child_create);
    ck_assert(path_exists("topics/crashy/0"));
    /* A valid definition is there, but so is the marker: never adopted. */
    ck_assert(path_exists("topics/crashy/topic.json"));
    ck_assert(path_exists("topics/crashy/creating"));
    b = open_default(&rep);
    ck_assert_uint_eq(rep.deleted_leftovers, 1);
    ck_assert_uint_eq(rep.topics, 0);
    ck_assert(!path_exists("topics/crashy"));
    ck_assert_int_eq(pulse_broker_topic_get(b, "crashy", false, &info), PULSE_TOPIC_NOT_FOUND);
    create_topic(b, "crashy", 1);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_crash_after_create_commit_leaves_a_whole_topic)
{
    struct pulse_broker_open_report rep;
    struct pulse_broker *b;
    struct pulse_publish_record rec = rec_kv(NULL, "x", 2);
    struct pulse_offset_pair off;
    char err[256];

    run_to_failpoint("topic_create_after_meta", child_create);
    ck_assert(path_exists("topics/crashy/creating"));
    b = open_default(&rep);
    ck_assert_uint_eq(rep.deleted_leftovers, 0);
    ck_assert_uint_eq(rep.adopted_topics, 0);
    ck_assert_uint_eq(rep.topics, 1);
    ck_assert_uint_eq(rep.partitions, 3);
    /* Committed: the marker goes, the topic stays. */
    ck_assert(!path_exists("topics/crashy/creating"));
    ck_assert(path_exists("topics/crashy/topic.json"));
    ck_assert_int_eq(pulse_broker_publish_wait(b, "crashy", &rec, 1, &off, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(off.offset, 0);
    pulse_broker_close(b);
}
END_TEST

static void check_deleted_for_good(unsigned leftovers)
{
    struct pulse_broker_open_report rep;
    struct pulse_broker *b;
    struct pulse_topic_info *info = NULL;
    struct pulse_cursor got;
    char **names = NULL;
    size_t n = 0;

    b = open_default(&rep);
    ck_assert_uint_eq(rep.deleted_leftovers, leftovers);
    ck_assert_uint_eq(rep.topics, 0);
    ck_assert_int_eq(count_entries("topics"), 0);
    ck_assert_int_eq(pulse_broker_topic_get(b, "crashy", false, &info), PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_consumer_list(b, &names, &n), PULSE_OK);
    ck_assert_uint_eq(n, 0);
    /* Recreated under the same name: empty, no old cursor. */
    create_topic(b, "crashy", 3);
    ck_assert_int_eq(hw_of(b, "crashy", 0), 0);
    ck_assert_int_eq(hw_of(b, "crashy", 1), 0);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c", "crashy", 1, &got), PULSE_CURSOR_NOT_FOUND);
    pulse_broker_close(b);

    b = open_default(&rep);
    ck_assert_int_eq(hw_of(b, "crashy", 2), 0);
    pulse_broker_close(b);
}

START_TEST(test_crash_after_delete_mark_completes_the_delete)
{
    seed_crashy();
    run_to_failpoint("topic_delete_after_mark", child_delete);
    /* The metadata is still there, but the marker is the decision. */
    ck_assert(path_exists("topics/crashy/deleting"));
    check_deleted_for_good(1);
}
END_TEST

START_TEST(test_crash_after_delete_commit_never_resurrects_the_topic)
{
    seed_crashy();
    run_to_failpoint("topic_delete_after_meta", child_delete);
    /* No metadata, a valid topic.json and the data: without the marker this
     * directory would be adopted. */
    ck_assert(path_exists("topics/crashy/0"));
    ck_assert(path_exists("topics/crashy/topic.json"));
    ck_assert(path_exists("topics/crashy/deleting"));
    check_deleted_for_good(1);
}
END_TEST

START_TEST(test_crash_after_delete_rename_removes_the_leftover)
{
    seed_crashy();
    run_to_failpoint("topic_delete_after_rename", child_delete);
    ck_assert(!path_exists("topics/crashy"));
    ck_assert_int_eq(count_entries("topics"), 1);
    check_deleted_for_good(1);
}
END_TEST

START_TEST(test_directory_without_metadata_or_definition_refuses_to_start)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_broker *b2 = NULL;
    struct pulse_broker_config cfg;
    char path[512];
    char err[1024] = "";
    FILE *f;

    create_topic(b, "keep", 1);
    pulse_broker_close(b);
    snprintf(path, sizeof path, "%s/topics/ghost", tmpdir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/topics/ghost/0", tmpdir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/topics/ghost/0/00000000000000000000.log", tmpdir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("old bytes", f);
    fclose(f);

    /* It may be data (an older version's topic whose store was lost):
     * refused, named with the command that resolves it, nothing changed. */
    test_config(&cfg);
    ck_assert_int_eq(pulse_broker_open(&cfg, &b2, NULL, err, sizeof err), PULSE_INVALID);
    ck_assert_ptr_null(b2);
    ck_assert_msg(strstr(err, "topics/ghost") != NULL, "message: %s", err);
    ck_assert_msg(strstr(err, "--adopt-topic ghost") != NULL, "message: %s", err);
    ck_assert(path_exists("topics/ghost/0/00000000000000000000.log"));
    ck_assert(path_exists("topics/keep/0"));
}
END_TEST

START_TEST(test_empty_directory_without_metadata_is_removed_at_start)
{
    struct pulse_broker_open_report rep;
    struct pulse_broker *b;
    char path[512];

    snprintf(path, sizeof path, "%s/topics", tmpdir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/topics/hollow", tmpdir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/topics/hollow/0", tmpdir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    b = open_default(&rep);
    ck_assert_uint_eq(rep.deleted_leftovers, 1);
    ck_assert(!path_exists("topics/hollow"));
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_second_broker_on_one_data_dir_is_refused)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_broker *b2 = NULL;
    struct pulse_broker_config cfg;
    char err[256] = "";
    int status = 0;

    test_config(&cfg);
    ck_assert_int_eq(pulse_broker_open(&cfg, &b2, NULL, err, sizeof err), PULSE_BUSY);
    ck_assert_ptr_null(b2);
    ck_assert_msg(strstr(err, "in use") != NULL, "%s", err);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char cerr[256] = "";
        struct pulse_broker *c = NULL;
        pulse_status_t st = pulse_broker_open(&cfg, &c, NULL, cerr, sizeof cerr);
        _exit(st == PULSE_BUSY && strstr(cerr, "in use") != NULL ? 0 : 1);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    pulse_broker_close(b);
}
END_TEST

struct churn {
    struct pulse_broker *b;
    int ok;
    int gone;
    pulse_status_t bad;
};

static void *churn_publisher(void *arg)
{
    struct churn *c = arg;
    char err[128];

    for (int i = 0; i < 200; i++) {
        struct pulse_publish_record rec = rec_kv(NULL, "v", -1);
        struct pulse_offset_pair off;
        struct pulse_slice sl;
        pulse_status_t st = pulse_broker_publish_wait(c->b, "churn", &rec, 1, &off, err, sizeof err);
        if (st == PULSE_OK)
            c->ok++;
        else if (st == PULSE_TOPIC_NOT_FOUND)
            c->gone++;
        else
            c->bad = st;
        st = log_slice(c->b, "churn", 0, 0, 4096, &sl);
        if (st != PULSE_OK && st != PULSE_TOPIC_NOT_FOUND)
            c->bad = st;
    }
    return NULL;
}

START_TEST(test_delete_and_recreate_under_concurrent_publishers_is_safe)
{
    struct pulse_broker *b = open_default(NULL);
    struct churn cs[3];
    pthread_t th[3];

    create_topic(b, "churn", 2);
    memset(cs, 0, sizeof cs);
    for (int i = 0; i < 3; i++) {
        cs[i].b = b;
        ck_assert_int_eq(pthread_create(&th[i], NULL, churn_publisher, &cs[i]), 0);
    }
    for (int round = 0; round < 5; round++) {
        ck_assert_int_eq(pulse_broker_topic_delete(b, "churn"), PULSE_OK);
        create_topic(b, "churn", 2);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(cs[i].bad, PULSE_OK);
        ck_assert_int_eq(cs[i].ok + cs[i].gone, 200);
    }
    ck_assert_int_eq(count_entries("topics"), 1);
    pulse_broker_close(b);
}
END_TEST

TCase *broker_topics_tcase(void)
{
    TCase *tc = tcase_create("topics");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, test_murmur2_matches_kafka_reference_values);
    tcase_add_test(tc, test_keyed_records_go_to_kafka_default_partition);
    tcase_add_test(tc, test_name_rule);
    tcase_add_test(tc, test_topic_create_validates_every_field);
    tcase_add_test(tc, test_topics_persist_across_reopen_and_list_sorted);
    tcase_add_test(tc, test_concurrent_creates_of_one_name_exactly_one_wins);
    tcase_add_test(tc, test_delete_removes_data_and_cursors_but_not_a_prefixed_name);
    tcase_add_test(tc, test_crash_after_create_dirs_leaves_no_topic);
    tcase_add_test(tc, test_crash_after_create_commit_leaves_a_whole_topic);
    tcase_add_test(tc, test_crash_after_delete_mark_completes_the_delete);
    tcase_add_test(tc, test_crash_after_delete_commit_never_resurrects_the_topic);
    tcase_add_test(tc, test_crash_after_delete_rename_removes_the_leftover);
    tcase_add_test(tc, test_directory_without_metadata_or_definition_refuses_to_start);
    tcase_add_test(tc, test_empty_directory_without_metadata_is_removed_at_start);
    tcase_add_test(tc, test_second_broker_on_one_data_dir_is_refused);
    tcase_add_test(tc, test_delete_and_recreate_under_concurrent_publishers_is_safe);
    return tc;
}
