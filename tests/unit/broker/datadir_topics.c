/* SPDX-License-Identifier: MIT */
/*
 * datadir_topics.c - part of check_datadir: topic.json against the store,
 * partition directories missing, empty or disagreeing, the offline
 * --adopt-topic entry point, symlinked topic directories, create markers,
 * the topics directory itself, and the errors of a data directory that
 * cannot be used.
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

static pulse_status_t read_topic_file(const char *topic, struct pulse_meta_topic *out)
{
    char path[512];
    char buf[PULSE_DIRFILE_MAX];
    char why[128];
    size_t n;
    FILE *f;

    snprintf(path, sizeof path, "%s/topics/%s/topic.json", tmpdir, topic);
    f = fopen(path, "rb");
    if (f == NULL)
        return PULSE_NOT_FOUND;
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return pulse_dirfile_topic_decode(buf, n, out, why, sizeof why);
}

START_TEST(test_retention_change_reaches_the_topic_file_before_the_store)
{
    struct pulse_broker *b = open_ok(NULL);
    struct pulse_meta_topic def;

    create(b, "alpha", 2, PULSE_CLEANUP_DELETE, -1);
    ck_assert_int_eq(pulse_broker_topic_set_retention(b, "alpha", 42, 4242, NULL), PULSE_OK);
    ck_assert_int_eq(read_topic_file("alpha", &def), PULSE_OK);
    ck_assert_str_eq(def.name, "alpha");
    ck_assert_uint_eq(def.partitions, 2);
    ck_assert_int_eq(def.retention_ms, 42);
    ck_assert_int_eq(def.retention_bytes, 4242);
    ck_assert_int_eq(def.segment_bytes, 2048);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_newer_retention_in_the_topic_file_wins_and_damage_is_rewritten)
{
    struct pulse_broker_open_report rep;
    struct pulse_broker *b = open_ok(NULL);
    struct pulse_meta_topic def;
    struct pulse_topic_info *info = NULL;
    char buf[PULSE_DIRFILE_MAX];
    size_t len = 0;
    char path[512];
    FILE *f;

    create(b, "alpha", 2, PULSE_CLEANUP_DELETE, 1000);
    pulse_broker_close(b);
    /* A retention change whose file write landed but whose store record
     * did not (a crash between them, or a record the store dropped): the
     * file is written first, so it is the newer copy, and it wins. */
    ck_assert_int_eq(read_topic_file("alpha", &def), PULSE_OK);
    def.retention_ms = 999;
    ck_assert_int_eq(pulse_dirfile_topic_encode(&def, buf, sizeof buf, &len), PULSE_OK);
    snprintf(path, sizeof path, "%s/topics/alpha/topic.json", tmpdir);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
    b = open_ok(&rep);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", false, &info), PULSE_OK);
    ck_assert_int_eq(info->retention_ms, 999);
    pulse_topic_info_free(info);
    pulse_broker_close(b);
    /* ... and the store has it now: the file alone is not what says so. */
    unlink_rel("topics/alpha/topic.json");
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.migrated_topics, 1);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", false, &info), PULSE_OK);
    ck_assert_int_eq(info->retention_ms, 999);
    pulse_topic_info_free(info);
    pulse_broker_close(b);

    /* A damaged file is rewritten from the store. */
    flip("topics/alpha/topic.json", 20);
    ck_assert_int_eq(read_topic_file("alpha", &def), PULSE_CORRUPT);
    b = open_ok(&rep);
    pulse_broker_close(b);
    ck_assert_int_eq(read_topic_file("alpha", &def), PULSE_OK);
    ck_assert_int_eq(def.retention_ms, 999);
    /* A setting that never changes is taken from the store. */
    def.partitions = 7;
    ck_assert_int_eq(pulse_dirfile_topic_encode(&def, buf, sizeof buf, &len), PULSE_OK);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.partitions, 2);
    pulse_broker_close(b);
    ck_assert_int_eq(read_topic_file("alpha", &def), PULSE_OK);
    ck_assert_uint_eq(def.partitions, 2);
}
END_TEST

START_TEST(test_damaged_topic_file_without_metadata_refuses_to_start)
{
    struct pulse_buf before;
    struct pulse_broker *b;
    char cluster[64];
    char err[1024] = "";

    pulse_buf_init(&before, 64u << 20);
    seed(&before, cluster, sizeof cluster);
    flip("topics/beta/topic.json", 30);
    rm_tree("meta");
    ck_assert_int_eq(open_fails(err, sizeof err), PULSE_INVALID);
    ck_assert_msg(strstr(err, "topics/beta") != NULL && strstr(err, "damaged") != NULL &&
                      strstr(err, "--adopt-topic beta") != NULL,
                  "message: %s", err);
    /* Nothing changed: the store was not even rebuilt half-way. */
    ck_assert(path_exists("topics/beta/0"));

    /* The named command resolves it, and everything comes back. */
    struct pulse_broker_config cfg;
    struct pulse_topic_spec spec = {"beta", 1, PULSE_CLEANUP_COMPACT, 3600000, -1, 2048, -1};
    struct pulse_topic_info info;
    test_config(&cfg);
    ck_assert_int_eq(pulse_broker_adopt_topic(&cfg, &spec, &info, err, sizeof err), PULSE_OK);
    ck_assert_uint_eq(info.partitions, 1);
    b = open_ok(NULL);
    check_restored(b, &before, cluster);
    pulse_broker_close(b);
    pulse_buf_fini(&before);
}
END_TEST

START_TEST(test_partition_directories_that_disagree_with_the_topic_file_refuse_to_start)
{
    struct pulse_broker *b = open_ok(NULL);
    char path[512];
    char err[1024] = "";

    create(b, "alpha", 2, PULSE_CLEANUP_DELETE, -1);
    pulse_broker_close(b);
    rm_tree("meta");
    snprintf(path, sizeof path, "%s/topics/alpha/2", tmpdir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    ck_assert_int_eq(open_fails(err, sizeof err), PULSE_INVALID);
    ck_assert_msg(strstr(err, "2 partitions but 3 partition directories") != NULL, "message: %s", err);
}
END_TEST

/* Publishes one record to topic/p; its offset. */
static int64_t publish_to(struct pulse_broker *b, const char *topic, uint32_t p)
{
    struct pulse_publish_record r;
    struct pulse_offset_pair off;
    char err[256] = "";

    memset(&r, 0, sizeof r);
    r.value = (const uint8_t *)"after";
    r.value_len = 5;
    r.partition = (int32_t)p;
    ck_assert_int_eq(pulse_broker_publish_wait(b, topic, &r, 1, &off, err, sizeof err), PULSE_OK);
    return off.offset;
}

/* Log start and high watermark of topic/p. */
static void bounds_of(struct pulse_broker *b, const char *topic, uint32_t p, int64_t *start, int64_t *hw)
{
    struct pulse_buf out;
    struct pulse_slice info;

    pulse_buf_init(&out, 1u << 20);
    ck_assert_int_eq(log_read(b, topic, p, 0, 4096, &out, &info), PULSE_OK);
    *start = info.log_start;
    *hw = info.high_watermark;
    pulse_buf_fini(&out);
}

static void commit_at(struct pulse_broker *b, const char *consumer, const char *topic, uint32_t p, int64_t offset)
{
    struct pulse_cursor c;
    char err[256] = "";

    memset(&c, 0, sizeof c);
    snprintf(c.topic, sizeof c.topic, "%s", topic);
    c.partition = p;
    c.offset = offset;
    ck_assert_int_eq(pulse_broker_cursor_commit(b, consumer, &c, 1, err, sizeof err), PULSE_OK);
}

/* A partition directory that is gone (removed, a volume not mounted) or
 * empty, beside an intact store and topic: it used to be made again empty
 * without a word, so its offsets were handed out a second time and a
 * consumer whose cursor was past them skipped the new records. The start
 * refuses, changing nothing; --recreate-partition accepts the loss and the
 * partition goes on after its consumers' cursors (or a given offset). */
START_TEST(test_missing_or_empty_partition_directory_refuses_until_recreated)
{
    struct pulse_broker_recreate_report rr;
    struct pulse_broker_config cfg;
    struct pulse_buf before, after;
    struct pulse_cursor got;
    struct pulse_broker *b = open_ok(NULL);
    int64_t start = 0, hw = 0;
    char path[512];
    char err[1024] = "";

    create(b, "alpha", 3, PULSE_CLEANUP_DELETE, -1);
    fill(b, "alpha", 3);
    commit_at(b, "reader", "alpha", 1, 12);
    commit_at(b, "other", "alpha", 1, 5);
    pulse_buf_init(&before, 64u << 20);
    dump_partition(b, "alpha", 0, &before);
    pulse_broker_close(b);

    rm_tree("topics/alpha/1");
    ck_assert_int_eq(open_fails(err, sizeof err), PULSE_INVALID);
    ck_assert_msg(strstr(err, "topics/alpha/1 is missing") != NULL && strstr(err, "Nothing was changed") != NULL &&
                      strstr(err, "--recreate-partition alpha/1") != NULL,
                  "message: %s", err);
    ck_assert(!path_exists("topics/alpha/1"));
    /* An empty directory is no better: a committed partition always holds
     * a segment file. */
    snprintf(path, sizeof path, "%s/topics/alpha/1", tmpdir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    ck_assert_int_eq(open_fails(err, sizeof err), PULSE_INVALID);
    ck_assert_msg(strstr(err, "topics/alpha/1 is empty") != NULL, "message: %s", err);

    /* What the command refuses. */
    test_config(&cfg);
    ck_assert_int_eq(pulse_broker_recreate_partition(&cfg, "nosuch", 1, 0, NULL, err, sizeof err),
                     PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_recreate_partition(&cfg, "alpha", 3, 0, NULL, err, sizeof err),
                     PULSE_PARTITION_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_recreate_partition(&cfg, "alpha", 0, 0, NULL, err, sizeof err), PULSE_EXISTS);
    ck_assert_msg(strstr(err, "holds files") != NULL, "message: %s", err);
    ck_assert_int_eq(pulse_broker_recreate_partition(&cfg, "alpha", 1, -1, NULL, err, sizeof err), PULSE_INVALID);

    /* Accepted: the new log starts at the highest cursor (12 > 0). */
    ck_assert_int_eq(pulse_broker_recreate_partition(&cfg, "alpha", 1, 0, &rr, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(rr.start_offset, 12);
    ck_assert_int_eq(rr.highest_cursor, 12);
    ck_assert_uint_eq(rr.cursors, 2);
    /* A missing one with a higher offset given (no cursor on it). */
    rm_tree("topics/alpha/2");
    ck_assert_int_eq(pulse_broker_recreate_partition(&cfg, "alpha", 2, 100, &rr, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(rr.start_offset, 100);
    ck_assert_int_eq(rr.highest_cursor, -1);

    b = open_ok(NULL);
    bounds_of(b, "alpha", 1, &start, &hw);
    ck_assert_int_eq(start, 12);
    ck_assert_int_eq(hw, 12);
    ck_assert_int_eq(publish_to(b, "alpha", 1), 12);
    ck_assert_int_eq(publish_to(b, "alpha", 2), 100);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "reader", "alpha", 1, &got), PULSE_OK);
    ck_assert_int_eq(got.offset, 12);
    /* The partition that was there is untouched. */
    pulse_buf_init(&after, 64u << 20);
    dump_partition(b, "alpha", 0, &after);
    ck_assert_uint_gt(before.len, 0);
    ck_assert_uint_eq(after.len, before.len);
    ck_assert(memcmp(after.data, before.data, before.len) == 0);
    pulse_broker_close(b);
    /* And a restart agrees. */
    b = open_ok(NULL);
    bounds_of(b, "alpha", 1, &start, &hw);
    ck_assert_int_eq(hw, 13);
    pulse_broker_close(b);
    pulse_buf_fini(&before);
    pulse_buf_fini(&after);
}
END_TEST

START_TEST(test_adopt_topic_takes_partitions_from_directories_and_refuses_what_it_must)
{
    struct pulse_broker_config cfg;
    struct pulse_broker_open_report rep;
    struct pulse_topic_info info;
    struct pulse_broker *b = open_ok(NULL);
    struct pulse_buf before, after;
    struct pulse_topic_spec spec = {"alpha", -1, -1, -1, -1, -1, -1};
    struct pulse_topic_spec wrong = {"alpha", 2, -1, -1, -1, -1, -1};
    char err[1024] = "";
    const char *one[] = {"alpha"};

    create(b, "alpha", 3, PULSE_CLEANUP_DELETE, -1);
    create(b, "live", 1, PULSE_CLEANUP_DELETE, -1);
    fill(b, "alpha", 3);
    pulse_buf_init(&before, 64u << 20);
    dump_all(b, one, 1, &before);
    pulse_broker_close(b);
    /* An older version's topic whose store entry was lost. */
    unlink_rel("topics/alpha/topic.json");
    {
        struct pulse_meta *meta = NULL;
        char path[512];
        snprintf(path, sizeof path, "%s/meta", tmpdir);
        ck_assert_int_eq(pulse_meta_open(path, &meta, err, sizeof err), PULSE_OK);
        ck_assert_int_eq(pulse_meta_topic_delete(meta, "alpha", NULL), PULSE_OK);
        pulse_meta_close(meta);
    }
    test_config(&cfg);
    ck_assert_int_eq(pulse_broker_adopt_topic(&cfg, &wrong, &info, err, sizeof err), PULSE_INVALID);
    ck_assert_msg(strstr(err, "does not match the 3 partition directories") != NULL, "message: %s", err);
    spec.name = "live";
    ck_assert_int_eq(pulse_broker_adopt_topic(&cfg, &spec, &info, err, sizeof err), PULSE_EXISTS);
    spec.name = "nosuch";
    ck_assert_int_eq(pulse_broker_adopt_topic(&cfg, &spec, &info, err, sizeof err), PULSE_TOPIC_NOT_FOUND);
    spec.name = "alpha";
    ck_assert_int_eq(pulse_broker_adopt_topic(&cfg, &spec, &info, err, sizeof err), PULSE_OK);
    ck_assert_uint_eq(info.partitions, 3);
    ck_assert_int_eq(info.segment_bytes, 64 * 1024); /* the configured default */
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.adopted_topics, 1);
    pulse_buf_init(&after, 64u << 20);
    dump_all(b, one, 1, &after);
    ck_assert_uint_eq(after.len, before.len);
    ck_assert(memcmp(after.data, before.data, before.len) == 0);
    pulse_broker_close(b);
    pulse_buf_fini(&before);
    pulse_buf_fini(&after);
}
END_TEST

START_TEST(test_adopt_topic_refuses_an_unfinished_create)
{
    struct pulse_broker_config cfg;
    struct pulse_topic_spec spec = {"alpha", -1, -1, -1, -1, -1, -1};
    struct pulse_broker *b = open_ok(NULL);
    char err[1024] = "";

    create(b, "alpha", 1, PULSE_CLEANUP_DELETE, -1);
    pulse_broker_close(b);
    rm_tree("meta");
    write_text("topics/alpha/creating", "x");
    test_config(&cfg);
    ck_assert_int_eq(pulse_broker_adopt_topic(&cfg, &spec, NULL, err, sizeof err), PULSE_INVALID);
    ck_assert_msg(strstr(err, "unfinished topic create") != NULL, "message: %s", err);
}
END_TEST

/* Overwrites every table file of the store with garbage. */

START_TEST(test_unusable_data_directory_names_the_cause)
{
    struct pulse_broker_config cfg;
    struct pulse_broker *b = NULL;
    char path[512];
    char err[512] = "";

    snprintf(path, sizeof path, "%s/plainfile", tmpdir);
    write_text("plainfile", "not a directory");
    test_config(&cfg);
    cfg.data_dir = path;
    ck_assert_int_ne(pulse_broker_open(&cfg, &b, NULL, err, sizeof err), PULSE_OK);
    ck_assert_msg(strstr(err, "not a directory") != NULL, "message: %s", err);
    ck_assert_msg(strstr(err, "input/output") == NULL, "message: %s", err);
    /* A path through a file. */
    snprintf(path, sizeof path, "%s/plainfile/data", tmpdir);
    ck_assert_int_ne(pulse_broker_open(&cfg, &b, NULL, err, sizeof err), PULSE_OK);
    ck_assert_msg(strstr(err, "not a directory") != NULL, "message: %s", err);
}
END_TEST

START_TEST(test_symlinked_topic_directory_works_and_a_dangling_one_is_not_a_delete)
{
    struct pulse_broker_open_report rep;
    struct pulse_broker *b = open_ok(NULL);
    struct pulse_topic_info *info = NULL;
    char dir[512], away[512], link[512];
    char err[1024] = "";

    create(b, "alpha", 2, PULSE_CLEANUP_DELETE, -1);
    fill(b, "alpha", 2);
    pulse_broker_close(b);
    /* The topic's data on another volume, reached through a link. */
    snprintf(dir, sizeof dir, "%s/topics/alpha", tmpdir);
    snprintf(away, sizeof away, "%s/elsewhere", tmpdir);
    ck_assert_int_eq(rename(dir, away), 0);
    ck_assert_int_eq(symlink(away, dir), 0);
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.topics, 1);
    pulse_broker_close(b);
    /* The volume gone: not a deleted topic; refused, metadata kept. */
    snprintf(link, sizeof link, "%s/gone", tmpdir);
    ck_assert_int_eq(rename(away, link), 0);
    ck_assert_int_eq(open_fails(err, sizeof err), PULSE_INVALID);
    ck_assert_msg(strstr(err, "symbolic link") != NULL, "message: %s", err);
    ck_assert_int_eq(rename(link, away), 0);
    b = open_ok(&rep);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", true, &info), PULSE_OK);
    ck_assert_int_eq(info->stats[0].high_watermark, 20);
    pulse_topic_info_free(info);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_failed_marker_and_file_writes_leave_nothing_half_done)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker *b = NULL;
    struct pulse_broker_open_report rep;
    struct pulse_topic_spec spec = {"alpha", 2, -1, -1, -1, 2048, -1};
    struct pulse_topic_info *info = NULL;
    char err[1024] = "";

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    ck_assert_int_eq(pulse_broker_open(&cfg, &b, NULL, err, sizeof err), PULSE_OK);
    /* The "creating" marker cannot be renamed into place: no topic, and
     * no directory left under its name. */
    faultio_fail_nth(fio, FAULTIO_RENAME, 1, EIO);
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_IO);
    ck_assert(!path_exists("topics/alpha"));
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_OK);
    fill(b, "alpha", 2);
    /* topic.json cannot be replaced: the retention change fails whole. */
    faultio_fail_nth(fio, FAULTIO_FDATASYNC, 1, EIO);
    ck_assert_int_ne(pulse_broker_topic_set_retention(b, "alpha", 5, 5, NULL), PULSE_OK);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", false, &info), PULSE_OK);
    ck_assert_int_eq(info->retention_ms, 7LL * 24 * 3600 * 1000);
    pulse_topic_info_free(info);
    /* The "deleting" marker cannot be written: the topic stays, unmarked. */
    faultio_fail_nth(fio, FAULTIO_RENAME, 1, EIO);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "alpha"), PULSE_IO);
    ck_assert(!path_exists("topics/alpha/deleting"));
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", false, &info), PULSE_OK);
    pulse_topic_info_free(info);
    pulse_broker_close(b);
    faultio_destroy(fio);

    b = open_ok(&rep);
    ck_assert_uint_eq(rep.topics, 1);
    ck_assert_uint_eq(rep.deleted_leftovers, 0);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", true, &info), PULSE_OK);
    ck_assert_int_eq(info->retention_ms, 7LL * 24 * 3600 * 1000);
    ck_assert_int_eq(info->stats[0].high_watermark, 20);
    pulse_topic_info_free(info);
    pulse_broker_close(b);
}
END_TEST

/* A create whose "creating" marker could not be removed after its commit
 * (logged, the create answered) and records published since: when the
 * store is lost later, the records prove the create committed (nothing is
 * appended before the commit), so the topic is adopted, never removed. */
START_TEST(test_create_marker_beside_published_records_is_not_an_unfinished_create)
{
    struct pulse_broker_open_report rep;
    struct pulse_buf before;
    struct pulse_broker *b;
    char cluster[64];

    pulse_buf_init(&before, 64u << 20);
    seed(&before, cluster, sizeof cluster);
    write_text("topics/alpha/creating", "pulsed topic marker; see docs/Storage.md\n");
    rm_tree("meta");
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.adopted_topics, 3);
    ck_assert_uint_eq(rep.deleted_leftovers, 0);
    check_restored(b, &before, cluster);
    pulse_broker_close(b);
    ck_assert(!path_exists("topics/alpha/creating"));
    /* The same marker beside logs that never took a record is still an
     * unfinished create. */
    b = open_ok(NULL);
    create(b, "fresh", 2, PULSE_CLEANUP_DELETE, -1);
    pulse_broker_close(b);
    write_text("topics/fresh/creating", "x");
    rm_tree("meta");
    b = open_ok(&rep);
    ck_assert_uint_eq(rep.adopted_topics, 3);
    ck_assert_uint_eq(rep.deleted_leftovers, 1);
    ck_assert(!path_exists("topics/fresh"));
    check_restored(b, &before, cluster);
    pulse_broker_close(b);
    pulse_buf_fini(&before);
}
END_TEST

/* topics/ found empty at start (a volume mounted there that is not mounted
 * yet, an operator's mv) or missing: the start cannot tell "every topic was
 * deleted" from "the directory is not there", so it refuses, changing
 * nothing: the metadata and the committed cursors stay. */
START_TEST(test_empty_or_missing_topics_directory_keeps_metadata_and_cursors)
{
    struct pulse_buf before;
    struct pulse_cursor got;
    struct pulse_broker *b;
    char cluster[64];
    char from[512], to[512];
    char err[1024] = "";

    pulse_buf_init(&before, 64u << 20);
    seed(&before, cluster, sizeof cluster);
    /* The topics volume is not mounted: topics/ is an empty mount point. */
    snprintf(from, sizeof from, "%s/topics", tmpdir);
    snprintf(to, sizeof to, "%s/topics.offline", tmpdir);
    ck_assert_int_eq(rename(from, to), 0);
    ck_assert_int_eq(mkdir(from, 0755), 0);
    ck_assert_int_eq(open_fails(err, sizeof err), PULSE_INVALID);
    ck_assert_msg(strstr(err, "3 topic(s)") != NULL && strstr(err, "alpha, beta, gamma") != NULL &&
                      strstr(err, "--forget-topic alpha") != NULL,
                  "message: %s", err);
    /* No mount point at all: refused too, and topics/ is not made. */
    ck_assert_int_eq(rmdir(from), 0);
    ck_assert_int_eq(open_fails(err, sizeof err), PULSE_INVALID);
    ck_assert_msg(strstr(err, "does not exist") != NULL && strstr(err, "alpha") != NULL, "message: %s", err);
    ck_assert(!path_exists("topics"));
    /* The volume comes back: everything is there. */
    ck_assert_int_eq(rename(to, from), 0);
    b = open_ok(NULL);
    check_restored(b, &before, cluster);
    /* The acknowledged cursor commit of seed(). */
    ck_assert_int_eq(pulse_broker_cursor_get(b, "reader", "alpha", 1, &got), PULSE_OK);
    ck_assert_int_eq(got.offset, 5);
    pulse_broker_close(b);
    pulse_buf_fini(&before);
}
END_TEST

/* A first start makes topics/ (the store names no topic). */
START_TEST(test_first_start_makes_the_topics_directory)
{
    struct pulse_broker *b = open_ok(NULL);

    ck_assert(path_exists("topics"));
    pulse_broker_close(b);
    rm_tree("topics");
    b = open_ok(NULL);
    ck_assert(path_exists("topics"));
    pulse_broker_close(b);
}
END_TEST

TCase *datadir_topics_tcase(void)
{
    TCase *tc = tcase_create("topics");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, test_retention_change_reaches_the_topic_file_before_the_store);
    tcase_add_test(tc, test_newer_retention_in_the_topic_file_wins_and_damage_is_rewritten);
    tcase_add_test(tc, test_damaged_topic_file_without_metadata_refuses_to_start);
    tcase_add_test(tc, test_partition_directories_that_disagree_with_the_topic_file_refuse_to_start);
    tcase_add_test(tc, test_missing_or_empty_partition_directory_refuses_until_recreated);
    tcase_add_test(tc, test_adopt_topic_takes_partitions_from_directories_and_refuses_what_it_must);
    tcase_add_test(tc, test_adopt_topic_refuses_an_unfinished_create);
    tcase_add_test(tc, test_unusable_data_directory_names_the_cause);
    tcase_add_test(tc, test_symlinked_topic_directory_works_and_a_dangling_one_is_not_a_delete);
    tcase_add_test(tc, test_failed_marker_and_file_writes_leave_nothing_half_done);
    tcase_add_test(tc, test_create_marker_beside_published_records_is_not_an_unfinished_create);
    tcase_add_test(tc, test_empty_or_missing_topics_directory_keeps_metadata_and_cursors);
    tcase_add_test(tc, test_first_start_makes_the_topics_directory);
    return tc;
}
