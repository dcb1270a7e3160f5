/* SPDX-License-Identifier: MIT */
/*
 * datadir_store.c - part of check_datadir: the metadata store lost, missing
 * topics, damaged by LevelDB's own checks or cut short, or belonging to
 * another data directory; the identity file damaged; metadata naming a
 * directory that is gone. Each test damages a real data directory between a
 * close and an open and checks what the next open keeps, rebuilds or refuses.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/broker_int.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/log.h"
#include "meta/dirfile.h"
#include "meta/meta.h"
#include "storage/batch.h"
#include "faultio.h"
#include "localtest.h"
#include "datadirtest.h"

START_TEST(test_lost_store_is_rebuilt_from_the_data_directory)
{
    struct pulse_broker_open_report rep;
    struct pulse_buf before;
    struct pulse_cursor got;
    struct pulse_broker *b;
    struct pulse_publish_record r;
    struct pulse_offset_pair off;
    char cluster[64];
    char err[256];

    pulse_buf_init(&before, 64u << 20);
    seed(&before, cluster, sizeof cluster);
    rm_tree("meta");
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.adopted_topics, 3);
    ck_assert_uint_eq(rep.deleted_leftovers, 0);
    ck_assert(rep.identity_restored);
    check_restored(b, &before, cluster);
    /* The cursor was only in the store: reported lost, never made up. */
    ck_assert_int_eq(pulse_broker_cursor_get(b, "reader", "alpha", 1, &got), PULSE_CURSOR_NOT_FOUND);
    /* Offsets continue; nothing is handed out twice. */
    memset(&r, 0, sizeof r);
    r.value = (const uint8_t *)"next";
    r.value_len = 4;
    r.partition = 0;
    ck_assert_int_eq(pulse_broker_publish_wait(b, "gamma", &r, 1, &off, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(off.offset, 20);
    pulse_broker_close(b);

    /* The rebuilt store is an ordinary one now. */
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.adopted_topics, 0);
    ck_assert(!rep.identity_restored);
    ck_assert_uint_eq(rep.topics, 3);
    pulse_broker_close(b);
    pulse_buf_fini(&before);
}
END_TEST

START_TEST(test_store_missing_some_topics_gets_them_back)
{
    struct pulse_broker_open_report rep;
    struct pulse_buf before;
    struct pulse_broker *b;
    struct pulse_meta *meta = NULL;
    char cluster[64];
    char path[512];
    char err[256];

    pulse_buf_init(&before, 64u << 20);
    seed(&before, cluster, sizeof cluster);
    /* As after a dropped log record: the store opens, a topic is missing. */
    snprintf(path, sizeof path, "%s/meta", tmpdir);
    ck_assert_int_eq(pulse_meta_open(path, &meta, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(pulse_meta_topic_delete(meta, "beta", NULL), PULSE_OK);
    pulse_meta_close(meta);
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.adopted_topics, 1);
    ck_assert(!rep.identity_restored);
    check_restored(b, &before, cluster);
    pulse_broker_close(b);
    pulse_buf_fini(&before);
}
END_TEST

START_TEST(test_older_data_directory_gets_its_files_and_survives_a_lost_store)
{
    struct pulse_broker_open_report rep;
    struct pulse_buf before;
    struct pulse_broker *b;
    char cluster[64];

    pulse_buf_init(&before, 64u << 20);
    seed(&before, cluster, sizeof cluster);
    /* What pulsed 0.1 left: no identity file, no topic files. */
    unlink_rel("cluster.json");
    for (size_t i = 0; i < 3; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "topics/%s/topic.json", three[i]);
        unlink_rel(rel);
    }
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.migrated_topics, 3);
    ck_assert_uint_eq(rep.adopted_topics, 0);
    pulse_broker_close(b);
    ck_assert(path_exists("cluster.json"));
    ck_assert(path_exists("topics/gamma/topic.json"));

    rm_tree("meta");
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.adopted_topics, 3);
    check_restored(b, &before, cluster);
    pulse_broker_close(b);
    pulse_buf_fini(&before);
}
END_TEST

START_TEST(test_store_of_another_data_directory_refuses_to_start)
{
    struct pulse_broker *b = open_ok(NULL);
    char cluster[64];
    char other[300];
    char cmd[1024];
    char err[1024] = "";

    create(b, "alpha", 1, PULSE_CLEANUP_DELETE, -1);
    snprintf(cluster, sizeof cluster, "%s", pulse_broker_cluster_id(b));
    pulse_broker_close(b);
    /* Another data directory's store, copied in. */
    snprintf(other, sizeof other, "%s/other", tmpdir);
    {
        struct pulse_broker_config cfg;
        struct pulse_broker *o = NULL;
        test_config(&cfg);
        cfg.data_dir = other;
        ck_assert_int_eq(pulse_broker_open(&cfg, &o, NULL, err, sizeof err), PULSE_OK);
        pulse_broker_close(o);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s/meta' && cp -r '%s/meta' '%s/meta'", tmpdir, other, tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(open_fails(err, sizeof err), PULSE_INVALID);
    ck_assert_msg(strstr(err, cluster) != NULL && strstr(err, "cluster.json") != NULL &&
                      strstr(err, "another data directory") != NULL,
                  "message: %s", err);
    ck_assert(path_exists("topics/alpha/0"));
}
END_TEST

START_TEST(test_identity_file_damage)
{
    struct pulse_broker_open_report rep;
    struct pulse_broker *b = open_ok(NULL);
    char cluster[64];
    char err[1024] = "";

    snprintf(cluster, sizeof cluster, "%s", pulse_broker_cluster_id(b));
    pulse_broker_close(b);
    /* Store intact: the file is rewritten from it. */
    flip("cluster.json", 15);
    b = open_ok(&rep);
    ck_assert_str_eq(pulse_broker_cluster_id(b), cluster);
    pulse_broker_close(b);
    /* Store lost and file damaged: the id cannot be known; refused, and no
     * new id was written anywhere. */
    flip("cluster.json", 15);
    rm_tree("meta");
    ck_assert_int_eq(open_fails(err, sizeof err), PULSE_NOT_FOUND);
    ck_assert_msg(strstr(err, "cluster.json is damaged") != NULL, "message: %s", err);
    flip("cluster.json", 15);
    b = open_ok(&rep);
    ck_assert(rep.identity_restored);
    ck_assert_str_eq(pulse_broker_cluster_id(b), cluster);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_metadata_without_a_directory_refuses_to_start_until_forgotten)
{
    struct pulse_broker_config cfg;
    struct pulse_broker_open_report rep;
    struct pulse_broker *b = open_ok(NULL);
    struct pulse_topic_info *info = NULL;
    struct pulse_cursor c;
    size_t cursors = 99;
    char err[1024] = "";

    create(b, "alpha", 1, PULSE_CLEANUP_DELETE, -1);
    create(b, "beta", 1, PULSE_CLEANUP_DELETE, -1);
    fill(b, "alpha", 1);
    memset(&c, 0, sizeof c);
    snprintf(c.topic, sizeof c.topic, "alpha");
    c.offset = 3;
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "reader", &c, 1, err, sizeof err), PULSE_OK);
    pulse_broker_close(b);
    /* The directory is not there (moved, a volume not mounted, or gone):
     * pulsed cannot tell which, so it refuses and changes nothing. */
    rm_tree("topics/alpha");
    ck_assert_int_eq(open_fails(err, sizeof err), PULSE_INVALID);
    ck_assert_msg(strstr(err, "alpha") != NULL && strstr(err, "--forget-topic alpha") != NULL &&
                      strstr(err, "Nothing was changed") != NULL,
                  "message: %s", err);
    ck_assert_int_eq(open_fails(err, sizeof err), PULSE_INVALID);

    /* The named command, for a topic that is gone for good. */
    test_config(&cfg);
    ck_assert_int_eq(pulse_broker_forget_topic(&cfg, "beta", NULL, err, sizeof err), PULSE_EXISTS);
    ck_assert_int_eq(pulse_broker_forget_topic(&cfg, "nosuch", NULL, err, sizeof err), PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_forget_topic(&cfg, "alpha", &cursors, err, sizeof err), PULSE_OK);
    ck_assert_uint_eq(cursors, 1);
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.topics, 1);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", false, &info), PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_topic_get(b, "beta", false, &info), PULSE_OK);
    pulse_topic_info_free(info);
    pulse_broker_close(b);
}
END_TEST

static unsigned garble_tables(void)
{
    char path[512];
    DIR *d;
    struct dirent *de;
    unsigned n = 0;

    snprintf(path, sizeof path, "%s/meta", tmpdir);
    d = opendir(path);
    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        char file[800];
        if (len < 4 || strcmp(de->d_name + len - 4, ".ldb") != 0)
            continue;
        snprintf(file, sizeof file, "%s/%s", path, de->d_name);
        struct stat sb;
        ck_assert_int_eq(stat(file, &sb), 0);
        FILE *f = fopen(file, "r+b");
        ck_assert_ptr_nonnull(f);
        for (off_t i = 0; i < sb.st_size; i++)
            fputc(0xab, f);
        fclose(f);
        n++;
    }
    closedir(d);
    return n;
}

START_TEST(test_store_leveldb_finds_damaged_is_refused_then_repaired)
{
    struct pulse_broker_config cfg;
    struct pulse_broker_repair_report rep;
    struct pulse_buf before;
    struct pulse_broker *b;
    char cluster[64];
    char err[1024] = "";

    pulse_buf_init(&before, 64u << 20);
    seed(&before, cluster, sizeof cluster);
    /* One more open and close turns LevelDB's log into a table. */
    b = open_ok(NULL);
    pulse_broker_close(b);
    ck_assert_uint_ge(garble_tables(), 1);
    ck_assert_int_eq(open_fails(err, sizeof err), PULSE_CORRUPT);
    ck_assert_msg(strstr(err, "--repair-metadata") != NULL, "message: %s", err);

    test_config(&cfg);
    ck_assert_int_eq(pulse_broker_repair_metadata(&cfg, &rep, err, sizeof err), PULSE_OK);
    ck_assert(rep.store_found);
    ck_assert_uint_ge(rep.tables_set_aside, 1);
    ck_assert_uint_eq(rep.open.adopted_topics, 3);
    ck_assert(rep.open.identity_restored);
    b = open_ok(NULL);
    check_restored(b, &before, cluster);
    pulse_broker_close(b);
    pulse_buf_fini(&before);
}
END_TEST

START_TEST(test_truncated_current_is_refused_then_repaired_with_cursors)
{
    struct pulse_broker_config cfg;
    struct pulse_broker_repair_report rep;
    struct pulse_buf before;
    struct pulse_cursor got;
    struct pulse_broker *b;
    char cluster[64];
    char err[1024] = "";

    pulse_buf_init(&before, 64u << 20);
    seed(&before, cluster, sizeof cluster);
    write_text("meta/CURRENT", "");
    ck_assert_int_eq(open_fails(err, sizeof err), PULSE_CORRUPT);
    ck_assert_msg(strstr(err, "--repair-metadata") != NULL, "message: %s", err);
    rm_tree("meta/CURRENT");
    ck_assert_int_eq(open_fails(err, sizeof err), PULSE_CORRUPT);
    ck_assert_msg(strstr(err, "no CURRENT file") != NULL, "message: %s", err);

    test_config(&cfg);
    ck_assert_int_eq(pulse_broker_repair_metadata(&cfg, &rep, err, sizeof err), PULSE_OK);
    ck_assert_uint_eq(rep.tables_set_aside, 0);
    ck_assert_uint_eq(rep.open.adopted_topics, 0);
    ck_assert_uint_eq(rep.cursors, 1);
    b = open_ok(NULL);
    check_restored(b, &before, cluster);
    /* Nothing was lost, so the cursor is still there. */
    ck_assert_int_eq(pulse_broker_cursor_get(b, "reader", "alpha", 1, &got), PULSE_OK);
    ck_assert_int_eq(got.offset, 5);
    pulse_broker_close(b);
    pulse_buf_fini(&before);
}
END_TEST

TCase *datadir_store_tcase(void)
{
    TCase *tc = tcase_create("store");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, test_lost_store_is_rebuilt_from_the_data_directory);
    tcase_add_test(tc, test_store_missing_some_topics_gets_them_back);
    tcase_add_test(tc, test_older_data_directory_gets_its_files_and_survives_a_lost_store);
    tcase_add_test(tc, test_store_of_another_data_directory_refuses_to_start);
    tcase_add_test(tc, test_identity_file_damage);
    tcase_add_test(tc, test_metadata_without_a_directory_refuses_to_start_until_forgotten);
    tcase_add_test(tc, test_store_leveldb_finds_damaged_is_refused_then_repaired);
    tcase_add_test(tc, test_truncated_current_is_refused_then_repaired_with_cursors);
    return tc;
}
