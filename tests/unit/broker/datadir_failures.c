/* SPDX-License-Identifier: MIT */
/*
 * datadir_failures.c - part of check_datadir: metadata writes and directory
 * steps of create and delete that fail (faultio, a failing store) leave no
 * half-made topic, keep a decided delete decided, and keep the store and
 * the directories agreed.
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

static void commit_one(struct pulse_broker *b, const char *topic, int64_t offset)
{
    struct pulse_cursor c;
    char err[256] = "";

    memset(&c, 0, sizeof c);
    snprintf(c.topic, sizeof c.topic, "%s", topic);
    c.offset = offset;
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "reader", &c, 1, err, sizeof err), PULSE_OK);
}

static size_t cursors_of_reader(struct pulse_broker *b)
{
    struct pulse_cursor *list = NULL;
    size_t n = 0;

    ck_assert_int_eq(pulse_broker_cursor_list(b, "reader", &list, &n), PULSE_OK);
    pulse_free(list);
    return n;
}

static pulse_status_t publish_one(struct pulse_broker *b, const char *topic)
{
    struct pulse_publish_record r;
    struct pulse_offset_pair off;
    char err[256];

    memset(&r, 0, sizeof r);
    r.value = (const uint8_t *)"v";
    r.value_len = 1;
    r.partition = 0;
    return pulse_broker_publish_wait(b, topic, &r, 1, &off, err, sizeof err);
}

/* The "deleting" marker is the decision: once it is written, a failed
 * metadata batch must not put the topic back into service (the next start
 * would delete what it then acknowledged). The delete is answered as done,
 * the topic is gone from the API, and the delete finishes at the next
 * start. */
START_TEST(test_delete_whose_metadata_write_fails_stays_decided)
{
    struct pulse_broker_open_report rep;
    struct pulse_topic_info *info = NULL;
    struct pulse_broker *b = open_ok(NULL);

    create(b, "alpha", 2, PULSE_CLEANUP_DELETE, -1);
    create(b, "beta", 1, PULSE_CLEANUP_DELETE, -1);
    fill(b, "alpha", 2);
    commit_one(b, "alpha", 4);
    pulse_meta_fail_writes(pulse_local_of(b)->meta, 1, PULSE_META_FAULT_LOST);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "alpha"), PULSE_OK);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", false, &info), PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(publish_one(b, "alpha"), PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(publish_one(b, "beta"), PULSE_OK);
    ck_assert(path_exists("topics/alpha/deleting"));
    pulse_broker_close(b);

    b = open_ok(&rep);
    ck_assert_uint_eq(rep.topics, 1);
    ck_assert_uint_eq(rep.deleted_leftovers, 1);
    ck_assert(!path_exists("topics/alpha"));
    ck_assert_uint_eq(cursors_of_reader(b), 0);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", false, &info), PULSE_TOPIC_NOT_FOUND);
    pulse_broker_close(b);
}
END_TEST

/* The marker's write fails after its rename (the directory fsync), and its
 * removal fails too: it may be durable, so the next start may delete the
 * topic, and the topic must not take publishes it would then lose. */
START_TEST(test_delete_whose_marker_can_neither_be_written_nor_removed_is_not_served)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker_open_report rep;
    struct pulse_topic_info *info = NULL;
    struct pulse_broker *b = NULL;
    char err[1024] = "";

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    ck_assert_int_eq(pulse_broker_open(&cfg, &b, NULL, err, sizeof err), PULSE_OK);
    create(b, "alpha", 1, PULSE_CLEANUP_DELETE, -1);
    fill(b, "alpha", 1);
    /* The first unlink is the replace's own cleanup of its temp file (gone
     * already); the second is the marker's removal. */
    faultio_fail_nth(fio, FAULTIO_FSYNC_DIR, 1, EIO);
    faultio_fail_nth(fio, FAULTIO_UNLINK, 2, EIO);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "alpha"), PULSE_IO);
    ck_assert(path_exists("topics/alpha/deleting"));
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", false, &info), PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(publish_one(b, "alpha"), PULSE_TOPIC_NOT_FOUND);
    pulse_broker_close(b);
    faultio_destroy(fio);

    /* The marker is there: the next start deletes the topic, which never
     * acknowledged anything after the failed delete. */
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.topics, 0);
    ck_assert(!path_exists("topics/alpha"));
    pulse_broker_close(b);
}
END_TEST

/* Metadata writes that fail yet take effect at the store's next reopen
 * (their record reached LevelDB's log; meta.h "Failed writes"): a failed
 * create must not leave metadata without a directory, a stalled delete
 * finishes before its name is used again, a failed retention change is
 * undone everywhere. */
START_TEST(test_failed_metadata_writes_that_take_effect_later_keep_store_and_directories_agreed)
{
    struct pulse_broker_open_report rep;
    struct pulse_topic_info *info = NULL;
    struct pulse_topic_spec spec = {"beta", 2, -1, -1, -1, 2048, -1};
    struct pulse_broker *b = open_ok(NULL);
    char err[1024] = "";

    create(b, "alpha", 2, PULSE_CLEANUP_DELETE, 1000);
    fill(b, "alpha", 2);
    /* A create. */
    pulse_meta_fail_writes(pulse_local_of(b)->meta, 1, PULSE_META_FAULT_APPLIED_LATER);
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_IO);
    ck_assert_int_eq(pulse_broker_topic_get(b, "beta", false, &info), PULSE_TOPIC_NOT_FOUND);
    ck_assert(!path_exists("topics/beta"));
    /* A retention change. */
    pulse_meta_fail_writes(pulse_local_of(b)->meta, 1, PULSE_META_FAULT_APPLIED_LATER);
    ck_assert_int_eq(pulse_broker_topic_set_retention(b, "alpha", 5, 5, NULL), PULSE_IO);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", false, &info), PULSE_OK);
    ck_assert_int_eq(info->retention_ms, 1000);
    pulse_topic_info_free(info);
    pulse_broker_close(b);
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.topics, 1);
    ck_assert_int_eq(pulse_broker_topic_get(b, "beta", false, &info), PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", false, &info), PULSE_OK);
    ck_assert_int_eq(info->retention_ms, 1000);
    pulse_topic_info_free(info);

    /* A delete: decided and stalled; the next create of the name finishes
     * it (the store took the failed batch at its reopen, and the retry's
     * own), and gets a new, empty topic. */
    commit_one(b, "alpha", 2);
    pulse_meta_fail_writes(pulse_local_of(b)->meta, 1, PULSE_META_FAULT_APPLIED_LATER);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "alpha"), PULSE_OK);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", false, &info), PULSE_TOPIC_NOT_FOUND);
    create(b, "alpha", 1, PULSE_CLEANUP_DELETE, -1);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", true, &info), PULSE_OK);
    ck_assert_uint_eq(info->partitions, 1);
    ck_assert_int_eq(info->stats[0].high_watermark, 0);
    pulse_topic_info_free(info);
    ck_assert_uint_eq(cursors_of_reader(b), 0);
    pulse_broker_close(b);
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.topics, 1);
    ck_assert_uint_eq(rep.deleted_leftovers, 0);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", true, &info), PULSE_OK);
    ck_assert_uint_eq(info->partitions, 1);
    pulse_topic_info_free(info);
    pulse_broker_close(b);
}
END_TEST

/* A create of a name whose delete is stalled, while the store still cannot
 * be written: answered at once with the store's error, never parked. */
START_TEST(test_create_of_a_stalled_delete_name_fails_at_once_while_the_store_fails)
{
    struct pulse_topic_spec spec = {"alpha", 1, -1, -1, -1, 2048, -1};
    struct pulse_broker *b = open_ok(NULL);
    char err[1024] = "";

    create(b, "alpha", 1, PULSE_CLEANUP_DELETE, -1);
    pulse_meta_fail_writes(pulse_local_of(b)->meta, 2, PULSE_META_FAULT_LOST);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "alpha"), PULSE_OK);
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_IO);
    ck_assert_msg(strstr(err, "still being deleted") != NULL, "message: %s", err);
    /* The store works again: the same create finishes the delete first. */
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_OK);
    ck_assert(!path_exists("topics/alpha/deleting"));
    pulse_broker_close(b);
}
END_TEST

/* Entries of topics/ whose name starts with prefix ("" = all). */
static int topics_entries(const char *prefix)
{
    char path[512];
    struct dirent *de;
    int n = 0;
    DIR *d;

    snprintf(path, sizeof path, "%s/topics", tmpdir);
    d = opendir(path);
    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
            strncmp(de->d_name, prefix, strlen(prefix)) == 0)
            n++;
    closedir(d);
    return n;
}

/* A create fails at the step named by (op, nth), after opening exactly
 * `opens` files (the marker's and topic.json's temp files: so it failed
 * there, before any log was opened); nothing of it stays. */
static void create_fails_cleanly(struct pulse_broker *b, struct faultio *fio, enum faultio_op op, unsigned long nth,
                                 unsigned long opens)
{
    struct pulse_topic_spec spec = {"alpha", 2, -1, -1, -1, 2048, -1};
    struct pulse_topic_info *info = NULL;
    unsigned long before = faultio_count(fio, FAULTIO_OPEN);
    char err[1024] = "";

    faultio_fail_nth(fio, op, nth, EIO);
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_IO);
    ck_assert_uint_eq(faultio_count(fio, FAULTIO_OPEN) - before, opens);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", false, &info), PULSE_TOPIC_NOT_FOUND);
    ck_assert(!path_exists("topics/alpha"));
    ck_assert_int_eq(topics_entries(""), 0);
}

/* Every directory step of a create goes through the broker's io: a failed
 * mkdir of the topic or of a partition directory, or a failed fsync of
 * topics/, fails the create, which sets aside and removes what it made.
 * When the removal fails too, the directory keeps its "creating" marker,
 * and the next create of the name (or the next start) removes it. */
START_TEST(test_failed_directory_steps_of_a_create_leave_no_half_made_topic)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker_open_report rep;
    struct pulse_topic_spec spec = {"alpha", 2, -1, -1, -1, 2048, -1};
    struct pulse_broker *b = NULL;
    char err[1024] = "";

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    ck_assert_int_eq(pulse_broker_open(&cfg, &b, NULL, err, sizeof err), PULSE_OK);
    create_fails_cleanly(b, fio, FAULTIO_MKDIR, 1, 0); /* topics/alpha */
    create_fails_cleanly(b, fio, FAULTIO_MKDIR, 3, 1); /* topics/alpha/1 */
    /* The marker's and topic.json's directory fsyncs, then topics/'s. */
    create_fails_cleanly(b, fio, FAULTIO_FSYNC_DIR, 3, 2);

    /* The partition mkdir fails, and so does the rename that sets the
     * directory aside (the first rename is the marker's). */
    faultio_fail_nth(fio, FAULTIO_MKDIR, 2, EIO);
    faultio_fail_nth(fio, FAULTIO_RENAME, 2, EIO);
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_IO);
    ck_assert(path_exists("topics/alpha/creating"));
    ck_assert(!path_exists("topics/alpha/topic.json"));
    /* The next create of the name finds the marked directory and clears
     * it first. */
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_OK);
    ck_assert(!path_exists("topics/alpha/creating"));
    ck_assert_int_eq(topics_entries(""), 1);
    fill(b, "alpha", 2);

    /* The same leftover, met by a start instead. */
    spec.name = "beta";
    faultio_fail_nth(fio, FAULTIO_MKDIR, 2, EIO);
    faultio_fail_nth(fio, FAULTIO_RENAME, 2, EIO);
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_IO);
    ck_assert(path_exists("topics/beta/creating"));
    pulse_broker_close(b);
    faultio_destroy(fio);

    b = open_ok(&rep);
    ck_assert_uint_eq(rep.topics, 1);
    ck_assert_uint_eq(rep.deleted_leftovers, 1);
    ck_assert(!path_exists("topics/beta"));
    ck_assert_int_eq(topics_entries(""), 1);
    pulse_broker_close(b);
}
END_TEST

/* Calls of op that deleting a topic of parts partitions filled by fill()
 * takes, measured on a probe topic of that shape. */
static unsigned long delete_calls(struct pulse_broker *b, struct faultio *fio, enum faultio_op op, uint32_t parts)
{
    unsigned long before;

    create(b, "probe", (int32_t)parts, PULSE_CLEANUP_DELETE, -1);
    fill(b, "probe", parts);
    before = faultio_count(fio, op);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "probe"), PULSE_OK);
    ck_assert(!path_exists("topics/probe"));
    return faultio_count(fio, op) - before;
}

/* Every directory step of a delete after its "deleting" marker goes through
 * the broker's io, and a failure there follows the delete's rules
 * (topic.c): the delete is decided, so it is answered as done and the
 * topic is never served again; what could not be removed now is removed
 * at the next start. */
START_TEST(test_failed_directory_steps_of_a_delete_keep_it_decided)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker_open_report rep;
    struct pulse_topic_info *info = NULL;
    struct pulse_broker *b = NULL;
    unsigned long n;
    char err[1024] = "";

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    ck_assert_int_eq(pulse_broker_open(&cfg, &b, NULL, err, sizeof err), PULSE_OK);
    create(b, "alpha", 2, PULSE_CLEANUP_DELETE, -1);
    create(b, "beta", 2, PULSE_CLEANUP_DELETE, -1);
    create(b, "gamma", 2, PULSE_CLEANUP_DELETE, -1);
    fill(b, "alpha", 2);
    fill(b, "beta", 2);
    fill(b, "gamma", 2);

    /* The last rename of a delete sets the directory aside. When it
     * fails, the directory stays under its name, with the marker. (Matched
     * by its target: counting renames would race with the checkpoints
     * the syncer writes, by temp file and rename, of the filled topics.) */
    faultio_fail_path(fio, FAULTIO_RENAME, "*/topics/__deleted-*", EIO);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "alpha"), PULSE_OK);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", false, &info), PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(publish_one(b, "alpha"), PULSE_TOPIC_NOT_FOUND);
    ck_assert(path_exists("topics/alpha/deleting"));
    ck_assert(path_exists("topics/alpha/0"));

    /* The tree's removal fails at its last file: the directory is aside
     * already, so the name is free, and the rest waits for the start. */
    n = delete_calls(b, fio, FAULTIO_UNLINK, 2);
    ck_assert_uint_ge(n, 4); /* topic.json, the marker, segment files */
    faultio_fail_nth(fio, FAULTIO_UNLINK, n, EIO);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "beta"), PULSE_OK);
    ck_assert_int_eq(pulse_broker_topic_get(b, "beta", false, &info), PULSE_TOPIC_NOT_FOUND);
    ck_assert(!path_exists("topics/beta"));
    ck_assert_int_eq(topics_entries("__deleted-"), 1);

    /* The fsync of topics/ right after the rename aside (the first of
     * topics/ itself; the last is after the removal) fails: the delete is
     * done all the same. (By path, as above: the checkpoints fsync their
     * partitions' directories.) */
    faultio_fail_path(fio, FAULTIO_FSYNC_DIR, "*/topics", EIO);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "gamma"), PULSE_OK);
    ck_assert_int_eq(pulse_broker_topic_get(b, "gamma", false, &info), PULSE_TOPIC_NOT_FOUND);
    ck_assert(!path_exists("topics/gamma"));
    ck_assert_int_eq(topics_entries("__deleted-"), 2);
    pulse_broker_close(b);
    faultio_destroy(fio);

    /* The next start finishes all three. */
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.topics, 0);
    ck_assert_uint_eq(rep.deleted_leftovers, 3);
    ck_assert_int_eq(topics_entries(""), 0);
    pulse_broker_close(b);
}
END_TEST

TCase *datadir_failures_tcase(void)
{
    TCase *tc = tcase_create("failures");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, test_failed_directory_steps_of_a_create_leave_no_half_made_topic);
    tcase_add_test(tc, test_failed_directory_steps_of_a_delete_keep_it_decided);
    tcase_add_test(tc, test_delete_whose_metadata_write_fails_stays_decided);
    tcase_add_test(tc, test_delete_whose_marker_can_neither_be_written_nor_removed_is_not_served);
    tcase_add_test(tc, test_failed_metadata_writes_that_take_effect_later_keep_store_and_directories_agreed);
    tcase_add_test(tc, test_create_of_a_stalled_delete_name_fails_at_once_while_the_store_fails);
    return tc;
}
