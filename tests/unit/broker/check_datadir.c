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

static char tmpdir[256];

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rm_tree(const char *rel)
{
    char path[512];

    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup(void)
{
    pulse_log_set_level(PULSE_LOG_OFF);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/check_datadir.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_config(struct pulse_broker_config *cfg)
{
    pulse_broker_config_init(cfg);
    cfg->data_dir = tmpdir;
    cfg->segment_max_bytes = 64 * 1024;
    cfg->retention_interval_ms = 0;
    cfg->compaction_interval_ms = 0;
}

static struct pulse_broker *open_ok(struct pulse_broker_open_report *rep)
{
    struct pulse_broker_config cfg;
    struct pulse_broker *b = NULL;
    char err[1024] = "";
    pulse_status_t st;

    test_config(&cfg);
    st = pulse_broker_open(&cfg, &b, rep, err, sizeof err);
    ck_assert_msg(st == PULSE_OK, "open: %s (%s)", pulse_status_name(st), err);
    return b;
}

/* Opens expecting failure; returns the status, err gets the message. */
static pulse_status_t open_fails(char *err, size_t errlen)
{
    struct pulse_broker_config cfg;
    struct pulse_broker *b = NULL;
    pulse_status_t st;

    test_config(&cfg);
    st = pulse_broker_open(&cfg, &b, NULL, err, errlen);
    ck_assert_msg(st != PULSE_OK, "open succeeded");
    ck_assert_ptr_null(b);
    return st;
}

static void unlink_rel(const char *rel)
{
    char path[512];

    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    ck_assert_msg(unlink(path) == 0, "unlink %s: %s", path, strerror(errno));
}

static bool path_exists(const char *rel)
{
    char path[512];
    struct stat st;

    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    return stat(path, &st) == 0;
}

static void create(struct pulse_broker *b, const char *name, int32_t parts, int cleanup, int64_t retention_ms)
{
    struct pulse_topic_spec spec = {name, parts, cleanup, retention_ms, -1, 2048};
    char err[256] = "";
    pulse_status_t st = pulse_broker_topic_create(b, &spec, NULL, err, sizeof err);

    ck_assert_msg(st == PULSE_OK, "create %s: %s (%s)", name, pulse_status_name(st), err);
}

/* 40 records spread over the partitions (several segments each). */
static void fill(struct pulse_broker *b, const char *topic, uint32_t parts)
{
    for (int i = 0; i < 40; i++) {
        struct pulse_publish_record r;
        struct pulse_offset_pair off;
        char key[32], value[200];
        char err[256];

        memset(&r, 0, sizeof r);
        snprintf(key, sizeof key, "k%d", i % 7);
        memset(value, 'a' + i % 26, sizeof value);
        r.key = (const uint8_t *)key;
        r.key_len = strlen(key);
        r.value = (const uint8_t *)value;
        r.value_len = 50 + i * 3;
        r.partition = (int32_t)(i % parts);
        ck_assert_int_eq(pulse_broker_publish_wait(b, topic, &r, 1, &off, err, sizeof err), PULSE_OK);
    }
}

/* Every verified batch byte of a partition, from its log start. */
static void dump_partition(struct pulse_broker *b, const char *topic, uint32_t p, struct pulse_buf *out)
{
    int64_t offset = 0;

    for (;;) {
        struct pulse_slice info;
        size_t before = out->len;
        pulse_status_t st = log_read(b, topic, p, offset, 1 << 20, out, &info);
        if (st == PULSE_RANGE || (st == PULSE_OK && out->len == before))
            return;
        ck_assert_int_eq(st, PULSE_OK);
        ck_assert_int_gt(info.next_offset, offset);
        offset = info.next_offset;
        if (offset >= info.high_watermark)
            return;
    }
}

/* The bytes of every partition of the listed topics, concatenated with
 * separators: equal strings mean equal records at equal offsets (batches
 * carry their base offset and CRC). */
static void dump_all(struct pulse_broker *b, const char *const *topics, size_t n, struct pulse_buf *out)
{
    for (size_t i = 0; i < n; i++) {
        struct pulse_topic_info *info = NULL;
        ck_assert_int_eq(pulse_broker_topic_get(b, topics[i], false, &info), PULSE_OK);
        for (uint32_t p = 0; p < info->partitions; p++) {
            ck_assert_int_eq(pulse_buf_printf(out, "|%s/%u|", topics[i], p), PULSE_OK);
            dump_partition(b, topics[i], p, out);
        }
        pulse_topic_info_free(info);
    }
}

static const char *const three[] = {"alpha", "beta", "gamma"};

/* Three topics with records, a retention change and a cursor; closed.
 * before gets their bytes, cluster the cluster id. */
static void seed(struct pulse_buf *before, char *cluster, size_t clen)
{
    struct pulse_broker *b = open_ok(NULL);
    struct pulse_cursor c;
    char err[256];

    create(b, "alpha", 3, PULSE_CLEANUP_DELETE, -1);
    create(b, "beta", 1, PULSE_CLEANUP_COMPACT, 3600000);
    create(b, "gamma", 2, PULSE_CLEANUP_DELETE, 0);
    fill(b, "alpha", 3);
    fill(b, "beta", 1);
    fill(b, "gamma", 2);
    ck_assert_int_eq(pulse_broker_topic_set_retention(b, "alpha", 123456, 7777777, NULL), PULSE_OK);
    memset(&c, 0, sizeof c);
    snprintf(c.topic, sizeof c.topic, "alpha");
    c.partition = 1;
    c.offset = 5;
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "reader", &c, 1, err, sizeof err), PULSE_OK);
    dump_all(b, three, 3, before);
    snprintf(cluster, clen, "%s", pulse_broker_cluster_id(b));
    pulse_broker_close(b);
}

/* The three topics came back whole: definitions, bytes, identity. */
static void check_restored(struct pulse_broker *b, const struct pulse_buf *before, const char *cluster)
{
    struct pulse_buf after;
    struct pulse_topic_info *info = NULL;

    pulse_buf_init(&after, 64u << 20);
    dump_all(b, three, 3, &after);
    /* 120 records of 50..167 bytes: the comparison is of real data. */
    ck_assert_uint_gt(before->len, 120 * 50);
    ck_assert_uint_eq(after.len, before->len);
    ck_assert(memcmp(after.data, before->data, before->len) == 0);
    pulse_buf_fini(&after);
    ck_assert_str_eq(pulse_broker_cluster_id(b), cluster);
    ck_assert_int_eq(pulse_broker_topic_get(b, "alpha", false, &info), PULSE_OK);
    ck_assert_uint_eq(info->partitions, 3);
    ck_assert_int_eq(info->retention_ms, 123456); /* the acknowledged change */
    ck_assert_int_eq(info->retention_bytes, 7777777);
    ck_assert_int_eq(info->segment_bytes, 2048);
    pulse_topic_info_free(info);
    ck_assert_int_eq(pulse_broker_topic_get(b, "beta", false, &info), PULSE_OK);
    ck_assert_int_eq(info->cleanup, PULSE_CLEANUP_COMPACT);
    ck_assert_int_eq(info->retention_ms, 3600000);
    pulse_topic_info_free(info);
}

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

/* Flips one bit of a file in place. */
static void flip(const char *rel, long pos)
{
    char path[512];
    FILE *f;
    int c;

    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, pos, pos < 0 ? SEEK_END : SEEK_SET), 0);
    c = fgetc(f);
    ck_assert_int_ne(c, EOF);
    ck_assert_int_eq(fseek(f, -1, SEEK_CUR), 0);
    fputc(c ^ 0x04, f);
    fclose(f);
}

static void write_text(const char *rel, const char *text)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

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
    struct pulse_topic_spec spec = {"beta", 1, PULSE_CLEANUP_COMPACT, 3600000, -1, 2048};
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
    struct pulse_topic_spec spec = {"alpha", -1, -1, -1, -1, -1};
    struct pulse_topic_spec wrong = {"alpha", 2, -1, -1, -1, -1};
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
    struct pulse_topic_spec spec = {"alpha", -1, -1, -1, -1, -1};
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
    struct pulse_topic_spec spec = {"alpha", 2, -1, -1, -1, 2048};
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
    struct pulse_topic_spec spec = {"beta", 2, -1, -1, -1, 2048};
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
    struct pulse_topic_spec spec = {"alpha", 1, -1, -1, -1, 2048};
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
    struct pulse_topic_spec spec = {"alpha", 2, -1, -1, -1, 2048};
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
    struct pulse_topic_spec spec = {"alpha", 2, -1, -1, -1, 2048};
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
     * fails, the directory stays under its name, with the marker. */
    n = delete_calls(b, fio, FAULTIO_RENAME, 2);
    ck_assert_uint_ge(n, 2); /* the marker's and the aside */
    faultio_fail_nth(fio, FAULTIO_RENAME, n, EIO);
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

    /* The fsync of topics/ right after the rename aside (the last one is
     * after the removal) fails: the delete is done all the same. */
    n = delete_calls(b, fio, FAULTIO_FSYNC_DIR, 2);
    ck_assert_uint_ge(n, 3); /* the marker's, the aside's, the removal's */
    faultio_fail_nth(fio, FAULTIO_FSYNC_DIR, n - 1, EIO);
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

static Suite *datadir_suite(void)
{
    Suite *s = suite_create("datadir");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_lost_store_is_rebuilt_from_the_data_directory);
    tcase_add_test(tc, test_store_missing_some_topics_gets_them_back);
    tcase_add_test(tc, test_retention_change_reaches_the_topic_file_before_the_store);
    tcase_add_test(tc, test_newer_retention_in_the_topic_file_wins_and_damage_is_rewritten);
    tcase_add_test(tc, test_damaged_topic_file_without_metadata_refuses_to_start);
    tcase_add_test(tc, test_partition_directories_that_disagree_with_the_topic_file_refuse_to_start);
    tcase_add_test(tc, test_older_data_directory_gets_its_files_and_survives_a_lost_store);
    tcase_add_test(tc, test_store_of_another_data_directory_refuses_to_start);
    tcase_add_test(tc, test_identity_file_damage);
    tcase_add_test(tc, test_metadata_without_a_directory_refuses_to_start_until_forgotten);
    tcase_add_test(tc, test_missing_or_empty_partition_directory_refuses_until_recreated);
    tcase_add_test(tc, test_adopt_topic_takes_partitions_from_directories_and_refuses_what_it_must);
    tcase_add_test(tc, test_adopt_topic_refuses_an_unfinished_create);
    tcase_add_test(tc, test_store_leveldb_finds_damaged_is_refused_then_repaired);
    tcase_add_test(tc, test_truncated_current_is_refused_then_repaired_with_cursors);
    tcase_add_test(tc, test_unusable_data_directory_names_the_cause);
    tcase_add_test(tc, test_symlinked_topic_directory_works_and_a_dangling_one_is_not_a_delete);
    tcase_add_test(tc, test_failed_marker_and_file_writes_leave_nothing_half_done);
    tcase_add_test(tc, test_failed_directory_steps_of_a_create_leave_no_half_made_topic);
    tcase_add_test(tc, test_failed_directory_steps_of_a_delete_keep_it_decided);
    tcase_add_test(tc, test_create_marker_beside_published_records_is_not_an_unfinished_create);
    tcase_add_test(tc, test_empty_or_missing_topics_directory_keeps_metadata_and_cursors);
    tcase_add_test(tc, test_first_start_makes_the_topics_directory);
    tcase_add_test(tc, test_delete_whose_metadata_write_fails_stays_decided);
    tcase_add_test(tc, test_delete_whose_marker_can_neither_be_written_nor_removed_is_not_served);
    tcase_add_test(tc, test_failed_metadata_writes_that_take_effect_later_keep_store_and_directories_agreed);
    tcase_add_test(tc, test_create_of_a_stalled_delete_name_fails_at_once_while_the_store_fails);
    suite_add_tcase(s, tc);
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
