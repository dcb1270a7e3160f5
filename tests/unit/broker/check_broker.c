/* SPDX-License-Identifier: MIT */
/*
 * check_broker.c - the broker core: Kafka-compatible routing, the name rule,
 * topic create/list/get/retention/delete, the publish path (one batch per
 * partition, validation before writing, durability before the answer),
 * cursors, long-poll waiters, drain, metrics, persistence across reopen,
 * crash safety of create and delete (a child process really exits at a
 * named failpoint and the parent reopens the data directory),
 * concurrency (many publisher and cursor threads; run it under TSan too),
 * and the committer: concurrent cursor commits share one metadata write, a
 * commit racing a topic delete never lands, drain completes queued admin
 * work.
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

static char tmpdir[256];

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void setup(void)
{
    pulse_log_set_level(PULSE_LOG_ERROR);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/check_broker.XXXXXX");
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
}

static struct pulse_broker *open_cfg(const struct pulse_broker_config *cfg, struct pulse_broker_open_report *rep)
{
    struct pulse_broker *b = NULL;
    char err[256] = "";
    pulse_status_t st = pulse_broker_open(cfg, &b, rep, err, sizeof err);

    ck_assert_msg(st == PULSE_OK, "open: %s (%s)", pulse_status_name(st), err);
    return b;
}

static struct pulse_broker *open_default(struct pulse_broker_open_report *rep)
{
    struct pulse_broker_config cfg;

    test_config(&cfg);
    return open_cfg(&cfg, rep);
}

static void create_topic(struct pulse_broker *b, const char *name, int32_t parts)
{
    struct pulse_topic_spec spec = {name, parts, -1, -1, -1, -1};
    char err[256] = "";
    pulse_status_t st = pulse_broker_topic_create(b, &spec, NULL, err, sizeof err);

    ck_assert_msg(st == PULSE_OK, "create %s: %s (%s)", name, pulse_status_name(st), err);
}

static struct pulse_publish_record rec_kv(const char *key, const char *value, int32_t partition)
{
    struct pulse_publish_record r;

    memset(&r, 0, sizeof r);
    r.key = (const uint8_t *)key;
    r.key_len = key != NULL ? strlen(key) : 0;
    r.value = (const uint8_t *)value;
    r.value_len = value != NULL ? strlen(value) : 0;
    r.partition = partition;
    return r;
}

static int64_t hw_of(struct pulse_broker *b, const char *topic, uint32_t p)
{
    struct pulse_topic_info *info = NULL;
    int64_t hw;

    ck_assert_int_eq(pulse_broker_topic_get(b, topic, true, &info), PULSE_OK);
    ck_assert_uint_lt(p, info->partitions);
    hw = info->stats[p].high_watermark;
    pulse_topic_info_free(info);
    return hw;
}

static bool path_exists(const char *rel)
{
    char path[512];
    struct stat st;

    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    return stat(path, &st) == 0;
}

static int count_entries(const char *rel)
{
    char path[512];
    DIR *d;
    struct dirent *de;
    int n = 0;

    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    d = opendir(path);
    if (d == NULL)
        return -1;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

/* Reads every record of a partition from offset 0 into values (up to max)
 * through the seam's fetch, checking offsets are consecutive. Returns the
 * count. */
static size_t read_values(struct pulse_broker *b, const char *topic, uint32_t p, char values[][32], size_t max)
{
    int64_t off = 0;
    size_t n = 0;
    struct pulse_fetch *f = NULL;

    ck_assert_int_eq(pulse_broker_fetch_create(b, topic, p, &f), PULSE_OK);
    for (;;) {
        struct pulse_fetch_pos pos;
        struct pulse_record rec;
        uint64_t need = 0;
        ck_assert_int_eq(pulse_broker_fetch_read(b, f, off, 1 << 20, &pos, &need), PULSE_OK);
        if (pos.bytes == 0)
            break;
        while (pulse_broker_fetch_next(f, &rec) == PULSE_OK) {
            ck_assert_int_eq(rec.offset, off);
            if (n < max) {
                size_t l = rec.value_len < 31 ? rec.value_len : 31;
                if (rec.value != NULL)
                    memcpy(values[n], rec.value, l);
                values[n][rec.value != NULL ? l : 0] = '\0';
            }
            n++;
            off++;
        }
        ck_assert_int_eq(pos.next_offset, off);
    }
    pulse_broker_fetch_destroy(f);
    return n;
}

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
    struct pulse_topic_spec spec = {"t", 0, -1, -1, -1, -1};

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
    struct pulse_topic_spec spec = {"zeta", 3, PULSE_CLEANUP_COMPACT, 1000, 2048, 4096};
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
    struct pulse_topic_spec spec = {"race", 4, -1, -1, -1, -1};
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

/* ---- publish ---------------------------------------------------------- */

START_TEST(test_publish_gives_contiguous_offsets_in_request_order)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_publish_record recs[5];
    struct pulse_offset_pair offs[5];
    char vals[8][32];
    char err[256];

    create_topic(b, "t", 2);
    recs[0] = rec_kv(NULL, "a0", 0);
    recs[1] = rec_kv(NULL, "b0", 1);
    recs[2] = rec_kv(NULL, "a1", 0);
    recs[3] = rec_kv("k", "a2", 0);
    recs[4] = rec_kv(NULL, "b1", 1);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", recs, 5, offs, err, sizeof err), PULSE_OK);
    ck_assert_uint_eq(offs[0].partition, 0);
    ck_assert_int_eq(offs[0].offset, 0);
    ck_assert_uint_eq(offs[1].partition, 1);
    ck_assert_int_eq(offs[1].offset, 0);
    ck_assert_int_eq(offs[2].offset, 1);
    ck_assert_int_eq(offs[3].offset, 2);
    ck_assert_int_eq(offs[4].offset, 1);
    /* Durable before the answer: the high watermark already covers them. */
    ck_assert_int_eq(hw_of(b, "t", 0), 3);
    ck_assert_int_eq(hw_of(b, "t", 1), 2);

    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", recs, 5, offs, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(offs[0].offset, 3);
    ck_assert_int_eq(offs[4].offset, 3);

    /* One batch per partition per publish. */
    struct pulse_slice sl;
    ck_assert_int_eq(log_slice(b, "t", 0, 0, 1, &sl), PULSE_OK);
    ck_assert_int_eq(sl.next_offset, 3);
    ck_assert_int_eq(sl.high_watermark, 6);

    ck_assert_uint_eq(read_values(b, "t", 0, vals, 8), 6);
    ck_assert_str_eq(vals[0], "a0");
    ck_assert_str_eq(vals[1], "a1");
    ck_assert_str_eq(vals[2], "a2");
    ck_assert_str_eq(vals[5], "a2");
    ck_assert_uint_eq(read_values(b, "t", 1, vals, 8), 4);
    ck_assert_str_eq(vals[1], "b1");
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_keyless_publish_goes_to_one_partition_round_robin)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_publish_record recs[4];
    struct pulse_offset_pair offs[4];
    uint32_t seen[3] = {0, 0, 0};
    char err[256];

    create_topic(b, "rr", 3);
    for (int i = 0; i < 4; i++)
        recs[i] = rec_kv(NULL, "v", -1);
    uint32_t prev = UINT32_MAX;
    for (int round = 0; round < 6; round++) {
        ck_assert_int_eq(pulse_broker_publish_wait(b, "rr", recs, 4, offs, err, sizeof err), PULSE_OK);
        for (int i = 1; i < 4; i++) {
            ck_assert_uint_eq(offs[i].partition, offs[0].partition);
            ck_assert_int_eq(offs[i].offset, offs[0].offset + i);
        }
        ck_assert_uint_ne(offs[0].partition, prev);
        prev = offs[0].partition;
        seen[offs[0].partition]++;
    }
    ck_assert_uint_eq(seen[0], 2);
    ck_assert_uint_eq(seen[1], 2);
    ck_assert_uint_eq(seen[2], 2);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_refused_publish_writes_nothing)
{
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_publish_record recs[3];
    struct pulse_offset_pair offs[3];
    struct pulse_header hdrs[3];
    char bigkey[101];
    char err[256];

    test_config(&cfg);
    cfg.max_records_per_publish = 3;
    cfg.max_key_bytes = 100;
    cfg.max_headers_per_record = 2;
    cfg.max_headers_bytes = 10;
    b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 2);
    recs[0] = rec_kv(NULL, "ok", 0);
    recs[1] = rec_kv(NULL, "ok", 1);
    recs[2] = rec_kv(NULL, "ok", 2);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", recs, 3, offs, err, sizeof err), PULSE_PARTITION_NOT_FOUND);
    recs[2] = rec_kv(NULL, "ok", -2);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", recs, 3, offs, err, sizeof err), PULSE_PARTITION_NOT_FOUND);

    memset(bigkey, 'k', 100);
    bigkey[100] = '\0';
    recs[2] = rec_kv(bigkey, "ok", 0);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", recs, 3, offs, err, sizeof err), PULSE_OK);
    bigkey[100] = 'k';
    recs[2].key_len = 101;
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", recs, 3, offs, err, sizeof err), PULSE_TOO_LARGE);
    ck_assert_ptr_nonnull(strstr(err, "record 2"));

    recs[2] = rec_kv(NULL, "ok", 0);
    memset(hdrs, 0, sizeof hdrs);
    for (int i = 0; i < 3; i++) {
        hdrs[i].key = (const uint8_t *)"h";
        hdrs[i].key_len = 1;
        hdrs[i].value = (const uint8_t *)"v";
        hdrs[i].value_len = 1;
    }
    recs[2].headers = hdrs;
    recs[2].header_count = 3;
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", recs, 3, offs, err, sizeof err), PULSE_TOO_LARGE);
    hdrs[0].value = (const uint8_t *)"0123456789";
    hdrs[0].value_len = 10;
    recs[2].header_count = 1;
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", recs, 3, offs, err, sizeof err), PULSE_TOO_LARGE);
    recs[2].header_count = 0;

    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", recs, 0, offs, err, sizeof err), PULSE_INVALID);
    struct pulse_publish_record four[4] = {recs[0], recs[1], recs[2], recs[0]};
    struct pulse_offset_pair offs4[4];
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", four, 4, offs4, err, sizeof err), PULSE_TOO_LARGE);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "nope", recs, 1, offs, err, sizeof err), PULSE_TOPIC_NOT_FOUND);

    /* Only the one accepted publish is stored: partition 0 has 2, 1 has 1. */
    ck_assert_int_eq(hw_of(b, "t", 0), 2);
    ck_assert_int_eq(hw_of(b, "t", 1), 1);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_timestamps_too_far_apart_for_one_batch_get_adjacent_batches)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_publish_record recs[4] = {rec_kv(NULL, "now", 0), rec_kv(NULL, "old", 0), rec_kv(NULL, "old2", 0),
                                           rec_kv(NULL, "now2", 0)};
    struct pulse_offset_pair offs[4];
    struct pulse_buf buf;
    struct pulse_record_view rv;
    char err[256];
    int64_t before = pulse_clock_wall_ms();
    int64_t seen[4];
    size_t pos = 0, nrec = 0, nbatch = 0;

    create_topic(b, "span", 1);
    /* The spec's own example mixes a 2025 timestamp with the broker's
     * clock; one batch stores int32 deltas, so this needs several. */
    recs[1].has_timestamp = true;
    recs[1].timestamp = 1764400000000 - (1LL << 32);
    recs[2].has_timestamp = true;
    recs[2].timestamp = 1764400000000 - (1LL << 32) + 7;
    ck_assert_int_eq(pulse_broker_publish_wait(b, "span", recs, 4, offs, err, sizeof err), PULSE_OK);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(offs[i].offset, i);

    pulse_buf_init(&buf, 1 << 20);
    ck_assert_int_eq(log_read(b, "span", 0, 0, 1 << 20, &buf, NULL), PULSE_OK);
    while (pos < buf.len) {
        struct pulse_batch_iter it;
        struct pulse_batch_header hdr;
        ck_assert_int_eq(pulse_batch_verify(buf.data + pos, buf.len - pos, &hdr, NULL), PULSE_OK);
        ck_assert_int_eq(pulse_batch_iter_init(&it, buf.data + pos, buf.len - pos), PULSE_OK);
        while (pulse_batch_iter_next(&it, &rv) == PULSE_OK) {
            ck_assert_int_eq(rv.offset, (int64_t)nrec);
            seen[nrec++] = rv.timestamp;
        }
        pos += pulse_batch_total_size(&hdr);
        nbatch++;
    }
    pulse_buf_fini(&buf);
    ck_assert_uint_eq(nrec, 4);
    ck_assert_uint_eq(nbatch, 3);
    ck_assert_int_ge(seen[0], before);
    ck_assert_int_eq(seen[1], 1764400000000 - (1LL << 32));
    ck_assert_int_eq(seen[2], 1764400000000 - (1LL << 32) + 7);
    ck_assert_int_ge(seen[3], before);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_published_records_survive_reopen_with_timestamps)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_publish_record recs[2];
    struct pulse_offset_pair offs[2];
    char vals[4][32];
    char err[256];
    int64_t before = pulse_clock_wall_ms();

    create_topic(b, "t", 1);
    recs[0] = rec_kv("k", "first", -1);
    recs[0].has_timestamp = true;
    recs[0].timestamp = before - 5000;
    recs[1] = rec_kv("k", NULL, -1); /* a tombstone */
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", recs, 2, offs, err, sizeof err), PULSE_OK);
    pulse_broker_close(b);

    b = open_default(NULL);
    ck_assert_int_eq(hw_of(b, "t", 0), 2);
    ck_assert_uint_eq(read_values(b, "t", 0, vals, 4), 2);
    ck_assert_str_eq(vals[0], "first");

    struct pulse_buf buf;
    struct pulse_batch_iter it;
    struct pulse_record_view rv;
    pulse_buf_init(&buf, 1 << 20);
    ck_assert_int_eq(log_read(b, "t", 0, 0, 1 << 20, &buf, NULL), PULSE_OK);
    ck_assert_int_eq(pulse_batch_iter_init(&it, buf.data, buf.len), PULSE_OK);
    ck_assert_int_eq(pulse_batch_iter_next(&it, &rv), PULSE_OK);
    ck_assert_int_eq(rv.timestamp, before - 5000);
    ck_assert_int_eq(pulse_batch_iter_next(&it, &rv), PULSE_OK);
    ck_assert_ptr_null(rv.value);
    ck_assert_int_ge(rv.timestamp, before); /* the broker's clock */
    pulse_buf_fini(&buf);

    ck_assert_int_eq(log_read(b, "t", 1, 0, 100, &buf, NULL), PULSE_PARTITION_NOT_FOUND);
    ck_assert_int_eq(log_read(b, "x", 0, 0, 100, &buf, NULL), PULSE_TOPIC_NOT_FOUND);
    struct pulse_slice sl;
    ck_assert_int_eq(log_slice(b, "t", 0, 3, 100, &sl), PULSE_RANGE);
    ck_assert_int_eq(sl.high_watermark, 2);
    pulse_buf_fini(&buf);
    pulse_broker_close(b);
}
END_TEST

/* ---- fetch through the seam --------------------------------------------- */

/* Three batches of three records (offsets 0..8); record 4 has headers. */
static void publish_nine(struct pulse_broker *b, const char *topic)
{
    static const struct pulse_header hdrs[2] = {{(const uint8_t *)"trace", 5, (const uint8_t *)"t1", 2},
                                                {(const uint8_t *)"gone", 4, NULL, 0}};
    char vals[9][8];
    char err[256];
    for (int batch = 0; batch < 3; batch++) {
        struct pulse_publish_record recs[3];
        struct pulse_offset_pair offs[3];
        for (int i = 0; i < 3; i++) {
            int k = batch * 3 + i;
            snprintf(vals[k], sizeof vals[k], "v%d", k);
            recs[i] = rec_kv(k % 2 == 0 ? "key" : NULL, vals[k], 0);
            if (k == 4) {
                recs[i].headers = hdrs;
                recs[i].header_count = 2;
            }
        }
        ck_assert_int_eq(pulse_broker_publish_wait(b, topic, recs, 3, offs, err, sizeof err), PULSE_OK);
    }
}

static void expect_record(const struct pulse_record *rec, int64_t offset)
{
    char want[24];
    snprintf(want, sizeof want, "v%lld", (long long)offset);
    ck_assert_int_eq(rec->offset, offset);
    ck_assert_uint_eq(rec->value_len, strlen(want));
    ck_assert(memcmp(rec->value, want, rec->value_len) == 0);
    if (offset % 2 == 0)
        ck_assert(rec->key != NULL && rec->key_len == 3 && memcmp(rec->key, "key", 3) == 0);
    else
        ck_assert_ptr_null(rec->key);
    ck_assert_uint_eq(rec->header_count, offset == 4 ? 2 : 0);
    if (offset == 4) {
        size_t pos = 0;
        struct pulse_header h;
        ck_assert(rec->header_next(rec, &pos, &h));
        ck_assert(h.key_len == 5 && memcmp(h.key, "trace", 5) == 0 && h.value_len == 2 &&
                  memcmp(h.value, "t1", 2) == 0);
        ck_assert(rec->header_next(rec, &pos, &h));
        ck_assert(h.key_len == 4 && memcmp(h.key, "gone", 4) == 0 && h.value == NULL);
        ck_assert(!rec->header_next(rec, &pos, &h));
    }
}

START_TEST(test_fetch_gives_records_from_the_offset_across_reads_and_again_after_rewind)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_fetch *f = NULL;
    struct pulse_fetch_pos pos;
    struct pulse_record rec;
    uint64_t need = 0;

    create_topic(b, "t", 1);
    publish_nine(b, "t");
    ck_assert_int_eq(pulse_broker_fetch_create(b, "t", 0, &f), PULSE_OK);
    ck_assert_int_eq(pulse_broker_fetch_next(f, &rec), PULSE_EOF); /* nothing read yet */
    /* One batch (3..5): the records below the offset are not handed out. */
    ck_assert_int_eq(pulse_broker_fetch_read(b, f, 4, 1, &pos, &need), PULSE_TOO_LARGE);
    ck_assert_uint_gt(need, 1);
    ck_assert_int_eq(pulse_broker_fetch_next(f, &rec), PULSE_EOF); /* the refused read added nothing */
    ck_assert_int_eq(pulse_broker_fetch_read(b, f, 4, need, &pos, &need), PULSE_OK);
    ck_assert_int_eq(pos.start_offset, 4);
    ck_assert_int_eq(pos.next_offset, 6);
    ck_assert_int_eq(pos.high_watermark, 9);
    ck_assert_int_eq(pos.log_start, 0);
    ck_assert_int_eq(pos.skip_from, pos.skip_to);
    ck_assert_uint_gt(pos.bytes, 0);
    for (int64_t o = 4; o < 6; o++) {
        ck_assert_int_eq(pulse_broker_fetch_next(f, &rec), PULSE_OK);
        expect_record(&rec, o);
    }
    ck_assert_int_eq(pulse_broker_fetch_next(f, &rec), PULSE_EOF);
    /* The next read goes on where the walk stopped. */
    ck_assert_int_eq(pulse_broker_fetch_read(b, f, 6, 1 << 20, &pos, &need), PULSE_OK);
    ck_assert_int_eq(pos.next_offset, 9);
    for (int64_t o = 6; o < 9; o++) {
        ck_assert_int_eq(pulse_broker_fetch_next(f, &rec), PULSE_OK);
        expect_record(&rec, o);
    }
    ck_assert_int_eq(pulse_broker_fetch_next(f, &rec), PULSE_EOF);
    /* At the high watermark: nothing, and no error. */
    ck_assert_int_eq(pulse_broker_fetch_read(b, f, 9, 1 << 20, &pos, &need), PULSE_OK);
    ck_assert_uint_eq(pos.bytes, 0);
    ck_assert_int_eq(pos.next_offset, 9);
    /* A second walk sees the same records. */
    pulse_broker_fetch_rewind(f);
    for (int64_t o = 4; o < 9; o++) {
        ck_assert_int_eq(pulse_broker_fetch_next(f, &rec), PULSE_OK);
        expect_record(&rec, o);
    }
    ck_assert_int_eq(pulse_broker_fetch_next(f, &rec), PULSE_EOF);
    ck_assert_int_eq(pulse_broker_fetch_read(b, f, 10, 1 << 20, &pos, &need), PULSE_RANGE);
    ck_assert_int_eq(pos.high_watermark, 9);
    pulse_broker_fetch_destroy(f);

    ck_assert_int_eq(pulse_broker_fetch_create(b, "t", 1, &f), PULSE_OK);
    ck_assert_int_eq(pulse_broker_fetch_read(b, f, 0, 100, &pos, &need), PULSE_PARTITION_NOT_FOUND);
    pulse_broker_fetch_destroy(f);
    ck_assert_int_eq(pulse_broker_fetch_create(b, "nope", 0, &f), PULSE_OK);
    ck_assert_int_eq(pulse_broker_fetch_read(b, f, 0, 100, &pos, &need), PULSE_TOPIC_NOT_FOUND);
    pulse_broker_fetch_destroy(f);
    pulse_broker_close(b);
}
END_TEST

/* A fetch holds the records it read, not the topic: a delete does not wait
 * for it, and what was read stays readable. */
START_TEST(test_a_fetch_does_not_hold_its_topic)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_fetch *f = NULL;
    struct pulse_fetch_pos pos;
    struct pulse_record rec;
    uint64_t need = 0;

    create_topic(b, "t", 1);
    publish_nine(b, "t");
    ck_assert_int_eq(pulse_broker_fetch_create(b, "t", 0, &f), PULSE_OK);
    ck_assert_int_eq(pulse_broker_fetch_read(b, f, 0, 1 << 20, &pos, &need), PULSE_OK);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "t"), PULSE_OK);
    for (int64_t o = 0; o < 9; o++) {
        ck_assert_int_eq(pulse_broker_fetch_next(f, &rec), PULSE_OK);
        expect_record(&rec, o);
    }
    ck_assert_int_eq(pulse_broker_fetch_read(b, f, 9, 1 << 20, &pos, &need), PULSE_TOPIC_NOT_FOUND);
    pulse_broker_fetch_destroy(f);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_probe_and_raw_slice_give_positions_and_the_stored_batches)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_fetch_pos pos;
    struct pulse_raw_slice raw;
    struct pulse_buf want;

    create_topic(b, "t", 1);
    publish_nine(b, "t");
    ck_assert_int_eq(pulse_broker_fetch_probe(b, "t", 0, 9, &pos), PULSE_OK);
    ck_assert_uint_eq(pos.bytes, 0);
    ck_assert_int_eq(pos.start_offset, 9);
    ck_assert_int_eq(pulse_broker_fetch_probe(b, "t", 0, 4, &pos), PULSE_OK);
    ck_assert_uint_gt(pos.bytes, 0);
    ck_assert_int_eq(pulse_broker_fetch_probe(b, "t", 0, 10, &pos), PULSE_RANGE);
    ck_assert_int_eq(pos.high_watermark, 9);

    /* The raw slice is exactly the batches a verified read returns. */
    pulse_buf_init(&want, 1 << 20);
    ck_assert_int_eq(log_read(b, "t", 0, 3, 1 << 20, &want, NULL), PULSE_OK);
    ck_assert_int_eq(pulse_broker_fetch_raw(b, "t", 0, 3, 1 << 20, &raw), PULSE_OK);
    ck_assert_int_ge(raw.fd, 0);
    ck_assert_uint_eq(raw.at.bytes, want.len);
    ck_assert_int_eq(raw.at.start_offset, 3);
    ck_assert_int_eq(raw.at.next_offset, 9);
    uint8_t *got = malloc(raw.at.bytes);
    ck_assert_int_eq(pread(raw.fd, got, raw.at.bytes, (off_t)raw.pos), (ssize_t)raw.at.bytes);
    ck_assert(memcmp(got, want.data, want.len) == 0);
    free(got);
    close(raw.fd);
    pulse_buf_fini(&want);
    /* Nothing to send: no descriptor. */
    ck_assert_int_eq(pulse_broker_fetch_raw(b, "t", 0, 9, 1 << 20, &raw), PULSE_OK);
    ck_assert_int_eq(raw.fd, -1);
    ck_assert_uint_eq(raw.at.bytes, 0);
    ck_assert_int_eq(pulse_broker_fetch_raw(b, "t", 0, 10, 1 << 20, &raw), PULSE_RANGE);
    ck_assert_int_eq(raw.fd, -1);
    ck_assert_int_eq(pulse_broker_fetch_raw(b, "nope", 0, 0, 1 << 20, &raw), PULSE_TOPIC_NOT_FOUND);
    pulse_broker_close(b);
}
END_TEST

/* The seam dispatches through the backend's table: a backend without raw
 * slices (fetch_raw NULL) answers PULSE_NOT_SUPPORTED, and its records
 * still come. */
START_TEST(test_a_backend_without_raw_slices_answers_not_supported)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_broker_ops no_raw = pulse_local_ops;
    struct pulse_raw_slice raw;
    char vals[9][32];

    no_raw.fetch_raw = NULL;
    create_topic(b, "t", 1);
    publish_nine(b, "t");
    pulse_local_of(b)->base.ops = &no_raw;
    ck_assert_int_eq(pulse_broker_fetch_raw(b, "t", 0, 0, 1 << 20, &raw), PULSE_NOT_SUPPORTED);
    ck_assert_uint_eq(read_values(b, "t", 0, vals, 9), 9);
    ck_assert_str_eq(vals[8], "v8");
    pulse_local_of(b)->base.ops = &pulse_local_ops;
    pulse_broker_close(b);
}
END_TEST

struct async_done {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    pulse_status_t st;
};

static void async_done_fn(void *arg, pulse_status_t st)
{
    struct async_done *d = arg;

    pthread_mutex_lock(&d->mu);
    d->calls++;
    d->st = st;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static void async_init(struct async_done *d)
{
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    d->calls = 0;
    d->st = PULSE_OK;
}

static void async_wait(struct async_done *d, int calls)
{
    pthread_mutex_lock(&d->mu);
    while (d->calls < calls)
        pthread_cond_wait(&d->cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

START_TEST(test_async_publish_completes_once_when_durable)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_publish_record rec = rec_kv(NULL, "x", 0);
    struct pulse_offset_pair off;
    struct async_done d;
    bool pending = false;
    char err[256];

    async_init(&d);
    create_topic(b, "t", 1);
    ck_assert_int_eq(pulse_broker_publish(b, "t", &rec, 1, &off, async_done_fn, &d, &pending, err, sizeof err),
                     PULSE_OK);
    ck_assert(pending);
    async_wait(&d, 1);
    ck_assert_int_eq(d.st, PULSE_OK);
    ck_assert_int_ge(hw_of(b, "t", 0), off.offset + 1);
    pulse_broker_close(b);
    ck_assert_int_eq(d.calls, 1);
}
END_TEST

START_TEST(test_interval_mode_answers_at_once_and_data_appears_after_sync)
{
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_publish_record rec = rec_kv(NULL, "x", 0);
    struct pulse_offset_pair off;
    struct async_done d;
    bool pending = true, parked = false;
    char err[256];

    test_config(&cfg);
    cfg.sync_mode = PULSE_SYNC_INTERVAL;
    cfg.sync_interval_ms = 20;
    b = open_cfg(&cfg, NULL);
    async_init(&d);
    create_topic(b, "t", 1);
    ck_assert_int_eq(pulse_broker_publish(b, "t", &rec, 1, &off, NULL, NULL, &pending, err, sizeof err), PULSE_OK);
    ck_assert(!pending);
    ck_assert_int_eq(off.offset, 0);
    /* The waiter is woken once the interval sync makes offset 0 durable
     * (the deadline is only a safety net). */
    ck_assert_int_eq(pulse_broker_wait_data(b, "t", 0, 0, pulse_clock_mono_us() + 60000000, async_done_fn, &d, &parked),
                     PULSE_OK);
    if (parked)
        async_wait(&d, 1);
    ck_assert_int_eq(hw_of(b, "t", 0), 1);
    pulse_broker_close(b);
}
END_TEST

/* ---- waiters, drain --------------------------------------------------- */

START_TEST(test_long_poll_waiter_wakes_on_publish_and_on_deadline)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_publish_record rec = rec_kv(NULL, "x", 0);
    struct pulse_offset_pair off;
    struct async_done d, d2;
    bool parked = false;
    char err[256];

    async_init(&d);
    async_init(&d2);
    create_topic(b, "t", 1);
    ck_assert_int_eq(pulse_broker_wait_data(b, "t", 0, 0, pulse_clock_mono_us() + 60000000, async_done_fn, &d, &parked),
                     PULSE_OK);
    ck_assert(parked);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec, 1, &off, err, sizeof err), PULSE_OK);
    async_wait(&d, 1);
    ck_assert_int_eq(d.st, PULSE_OK);

    /* Data already there: nothing parked. */
    int64_t later = pulse_clock_mono_us() + 60000000;
    ck_assert_int_eq(pulse_broker_wait_data(b, "t", 0, 0, later, async_done_fn, &d2, &parked), PULSE_OK);
    ck_assert(!parked);
    /* A deadline in the past fires with PULSE_OK and no data. */
    ck_assert_int_eq(pulse_broker_wait_data(b, "t", 0, 1, pulse_clock_mono_us() - 1, async_done_fn, &d2, &parked),
                     PULSE_OK);
    ck_assert(parked);
    async_wait(&d2, 1);
    ck_assert_int_eq(d2.st, PULSE_OK);
    ck_assert_int_eq(hw_of(b, "t", 0), 1);

    ck_assert_int_eq(pulse_broker_wait_data(b, "t", 1, 0, 0, async_done_fn, &d2, &parked), PULSE_PARTITION_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_wait_data(b, "u", 0, 0, 0, async_done_fn, &d2, &parked), PULSE_TOPIC_NOT_FOUND);
    pulse_broker_close(b);
    ck_assert_int_eq(d.calls, 1);
    ck_assert_int_eq(d2.calls, 1);
}
END_TEST

START_TEST(test_drain_answers_waiters_with_shutdown_and_refuses_new_work)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_publish_record rec = rec_kv(NULL, "x", 0);
    struct pulse_offset_pair off;
    struct async_done d;
    bool parked = false;
    char err[256];

    async_init(&d);
    create_topic(b, "t", 1);
    ck_assert_int_eq(pulse_broker_wait_data(b, "t", 0, 0, pulse_clock_mono_us() + 60000000, async_done_fn, &d, &parked),
                     PULSE_OK);
    ck_assert(parked);
    pulse_broker_drain(b);
    ck_assert_int_eq(d.calls, 1);
    ck_assert_int_eq(d.st, PULSE_SHUTDOWN);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec, 1, &off, err, sizeof err), PULSE_SHUTDOWN);
    ck_assert_int_eq(pulse_broker_wait_data(b, "t", 0, 0, pulse_clock_mono_us() + 1000000, async_done_fn, &d, &parked),
                     PULSE_SHUTDOWN);
    pulse_broker_drain(b); /* idempotent */
    pulse_broker_close(b);
    ck_assert_int_eq(d.calls, 1);
}
END_TEST

START_TEST(test_delete_answers_parked_waiters_with_topic_not_found)
{
    struct pulse_broker *b = open_default(NULL);
    struct async_done d;
    bool parked = false;

    async_init(&d);
    create_topic(b, "t", 2);
    ck_assert_int_eq(pulse_broker_wait_data(b, "t", 1, 0, pulse_clock_mono_us() + 60000000, async_done_fn, &d, &parked),
                     PULSE_OK);
    ck_assert(parked);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "t"), PULSE_OK);
    ck_assert_int_eq(d.calls, 1);
    ck_assert_int_eq(d.st, PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "t"), PULSE_TOPIC_NOT_FOUND);
    pulse_broker_close(b);
}
END_TEST

/* ---- cursors ---------------------------------------------------------- */

static struct pulse_cursor cur(const char *topic, uint32_t p, int64_t off)
{
    struct pulse_cursor c;

    memset(&c, 0, sizeof c);
    snprintf(c.topic, sizeof c.topic, "%s", topic);
    c.partition = p;
    c.offset = off;
    return c;
}

/* The asynchronous cursor reads complete exactly once: inline in this
 * backend (before the call returns, on the caller's thread), and - when a
 * test delays them as a remote backend would answer - later, from the
 * committer, with the same results. */
START_TEST(test_cursor_reads_complete_once_inline_or_later)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_cursor c = {.partition = 1, .offset = 2};
    struct pulse_cursor got;
    struct pulse_cursor *list = NULL;
    char **names = NULL;
    size_t n = 0, nn = 0;
    struct async_done d;
    char err[256];
    struct pulse_publish_record r3[3] = {rec_kv(NULL, "a", 1), rec_kv(NULL, "b", 1), rec_kv(NULL, "c", 1)};
    struct pulse_offset_pair o3[3];

    create_topic(b, "t", 2);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", r3, 3, o3, err, sizeof err), PULSE_OK);
    memcpy(c.topic, "t", 2);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "reader", &c, 1, err, sizeof err), PULSE_OK);
    for (int round = 0; round < 2; round++) {
        async_init(&d);
        memset(&got, 0, sizeof got);
        ck_assert_int_eq(pulse_broker_cursor_get_async(b, "reader", "t", 1, &got, async_done_fn, &d), PULSE_OK);
        ck_assert_int_eq(pulse_broker_cursor_list_async(b, "reader", &list, &n, async_done_fn, &d), PULSE_OK);
        ck_assert_int_eq(pulse_broker_consumer_list_async(b, &names, &nn, async_done_fn, &d), PULSE_OK);
        if (round == 0) /* inline: all three came before their calls returned */
            ck_assert_int_eq(d.calls, 3);
        else /* delayed: none can have come yet */
            ck_assert_int_eq(d.calls, 0);
        async_wait(&d, 3);
        ck_assert_int_eq(d.st, PULSE_OK);
        ck_assert_int_eq(got.offset, 2);
        ck_assert_int_eq(got.high_watermark, 3);
        ck_assert_int_eq(got.lag, 1);
        ck_assert_uint_eq(n, 1);
        ck_assert_int_eq(list[0].offset, 2);
        ck_assert_uint_eq(nn, 1);
        ck_assert_str_eq(names[0], "reader");
        pulse_free(list);
        pulse_broker_names_free(names, nn);
        /* Refused at submission: no callback. */
        ck_assert_int_eq(pulse_broker_cursor_get_async(b, "bad/name", "t", 1, &got, async_done_fn, &d),
                         PULSE_INVALID_NAME);
        ck_assert_int_eq(pulse_broker_cursor_get(b, "reader", "t", 0, &got), PULSE_CURSOR_NOT_FOUND);
        ck_assert_int_eq(d.calls, 3);
        setenv("PULSE_FAILPOINT_DELAY", "cursor_read:300", 1);
    }
    unsetenv("PULSE_FAILPOINT_DELAY");
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_cursor_commit_checks_range_and_is_all_or_none)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_publish_record recs[3] = {rec_kv(NULL, "a", 0), rec_kv(NULL, "b", 0), rec_kv(NULL, "c", 1)};
    struct pulse_offset_pair offs[3];
    struct pulse_cursor cs[3];
    struct pulse_cursor got;
    struct pulse_cursor *list = NULL;
    char **names = NULL;
    size_t n = 0;
    char err[256];

    create_topic(b, "t", 2);
    create_topic(b, "a", 1);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", recs, 3, offs, err, sizeof err), PULSE_OK);

    cs[0] = cur("t", 0, 3); /* above HW 2 */
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "c", cs, 1, err, sizeof err), PULSE_RANGE);
    cs[0] = cur("t", 0, -1);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "c", cs, 1, err, sizeof err), PULSE_RANGE);
    cs[0] = cur("t", 2, 0);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "c", cs, 1, err, sizeof err), PULSE_PARTITION_NOT_FOUND);
    cs[0] = cur("x", 0, 0);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "c", cs, 1, err, sizeof err), PULSE_TOPIC_NOT_FOUND);
    cs[0] = cur("t", 0, 0);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "__c", cs, 1, err, sizeof err), PULSE_INVALID_NAME);

    /* One bad cursor: none lands. */
    cs[0] = cur("t", 0, 2);
    cs[1] = cur("t", 1, 1);
    cs[2] = cur("t", 1, 5);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "c", cs, 3, err, sizeof err), PULSE_RANGE);
    ck_assert_ptr_nonnull(strstr(err, "cursor 2"));
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c", "t", 0, &got), PULSE_CURSOR_NOT_FOUND);

    cs[2] = cur("a", 0, 0);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "c", cs, 3, err, sizeof err), PULSE_OK);
    pulse_broker_close(b);

    b = open_default(NULL);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c", "t", 0, &got), PULSE_OK);
    ck_assert_int_eq(got.offset, 2);
    ck_assert_int_eq(got.high_watermark, 2);
    ck_assert_int_eq(got.lag, 0);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c", "x", 0, &got), PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c", "t", 9, &got), PULSE_PARTITION_NOT_FOUND);

    cs[0] = cur("t", 0, 0);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "d", cs, 1, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(pulse_broker_cursor_list(b, "c", &list, &n), PULSE_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(list[0].topic, "a");
    ck_assert_str_eq(list[1].topic, "t");
    ck_assert_uint_eq(list[1].partition, 0);
    ck_assert_uint_eq(list[2].partition, 1);
    ck_assert_int_eq(list[2].offset, 1);
    ck_assert_int_eq(list[2].high_watermark, 1);
    pulse_free(list);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "d", "t", 0, &got), PULSE_OK);
    ck_assert_int_eq(got.lag, 2);

    ck_assert_int_eq(pulse_broker_consumer_list(b, &names, &n), PULSE_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(names[0], "c");
    ck_assert_str_eq(names[1], "d");
    pulse_broker_names_free(names, n);
    ck_assert_int_eq(pulse_broker_consumer_delete(b, "c"), PULSE_OK);
    ck_assert_int_eq(pulse_broker_consumer_delete(b, "c"), PULSE_OK);
    ck_assert_int_eq(pulse_broker_cursor_list(b, "c", &list, &n), PULSE_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(pulse_broker_consumer_list(b, &names, &n), PULSE_OK);
    ck_assert_uint_eq(n, 1);
    pulse_broker_names_free(names, n);
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
    struct pulse_topic_spec spec = {"crashy", 3, -1, -1, -1, -1};
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

/* ---- metrics ---------------------------------------------------------- */

START_TEST(test_metrics_expose_the_documented_families)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_publish_record recs[3] = {rec_kv(NULL, "a", 0), rec_kv(NULL, "b", 0), rec_kv(NULL, "c", 0)};
    struct pulse_offset_pair offs[3];
    struct pulse_cursor c = cur("m", 0, 1);
    struct pulse_buf out;
    char err[256];
    char *text;

    create_topic(b, "m", 1);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "m", recs, 3, offs, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "cons", &c, 1, err, sizeof err), PULSE_OK);
    pulse_broker_note_fetched(b, "m", 2, 100);
    pulse_buf_init(&out, 1 << 20);
    ck_assert_int_eq(pulse_broker_metrics(b, &out), PULSE_OK);
    ck_assert_int_eq(pulse_buf_append_u8(&out, 0), PULSE_OK);
    text = (char *)out.data;
    const char *want[] = {
        "# TYPE pulse_fsync_total counter\n",
        "# TYPE pulse_fsync_duration_seconds histogram\n",
        "pulse_fsync_duration_seconds_bucket{le=\"+Inf\"} ",
        "pulse_fsync_duration_seconds_count ",
        "pulse_partition_high_watermark{topic=\"m\",partition=\"0\"} 3\n",
        "pulse_partition_log_start_offset{topic=\"m\",partition=\"0\"} 0\n",
        "pulse_partition_size_bytes{topic=\"m\",partition=\"0\"} ",
        "pulse_published_records_total{topic=\"m\"} 3\n",
        "pulse_published_bytes_total{topic=\"m\"} ",
        "pulse_fetched_records_total{topic=\"m\"} 2\n",
        "pulse_fetched_bytes_total{topic=\"m\"} 100\n",
        "pulse_consumer_lag{consumer=\"cons\",topic=\"m\",partition=\"0\"} 2\n",
        "# TYPE pulse_recovery_truncated_bytes_total counter\n",
        "pulse_recovery_duration_seconds ",
        "pulse_retention_segments_deleted_total 0\n",
        "pulse_compaction_passes_total 0\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(text, want[i]) != NULL, "missing: %s", want[i]);
    ck_assert_ptr_null(strstr(text, "pulse_fsync_total 0\n"));
    pulse_buf_fini(&out);
    pulse_broker_close(b);
}
END_TEST

/* ---- concurrency ------------------------------------------------------ */

#define CONC_THREADS 4
#define CONC_ROUNDS 60

struct conc {
    struct pulse_broker *b;
    int id;
    int64_t offsets[2][CONC_ROUNDS * 3];
    int counts[2];
    pulse_status_t st;
};

static void *publisher_main(void *arg)
{
    struct conc *c = arg;
    char err[128];

    for (int r = 0; r < CONC_ROUNDS; r++) {
        struct pulse_publish_record recs[3] = {rec_kv("k", "v", 0), rec_kv(NULL, "w", 1), rec_kv(NULL, "x", 0)};
        struct pulse_offset_pair offs[3];
        pulse_status_t st = pulse_broker_publish_wait(c->b, "conc", recs, 3, offs, err, sizeof err);
        if (st != PULSE_OK) {
            c->st = st;
            return NULL;
        }
        for (int i = 0; i < 3; i++)
            c->offsets[offs[i].partition][c->counts[offs[i].partition]++] = offs[i].offset;
    }
    return NULL;
}

static void *cursor_main(void *arg)
{
    struct conc *c = arg;
    char err[128];
    char name[16];

    snprintf(name, sizeof name, "g%d", c->id);
    for (int r = 0; r < CONC_ROUNDS; r++) {
        struct pulse_cursor cs[2];
        struct pulse_cursor got;
        int64_t hw0 = 0;
        struct pulse_slice sl;
        if (log_slice(c->b, "conc", 0, 0, 1, &sl) == PULSE_OK)
            hw0 = sl.high_watermark;
        cs[0] = cur("conc", 0, hw0);
        cs[1] = cur("conc", 1, 0);
        pulse_status_t st = pulse_broker_cursor_commit(c->b, name, cs, 2, err, sizeof err);
        if (st == PULSE_OK)
            st = pulse_broker_cursor_get(c->b, name, "conc", 0, &got);
        if (st != PULSE_OK) {
            c->st = st;
            return NULL;
        }
    }
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

START_TEST(test_concurrent_publishers_and_cursor_writers_lose_nothing)
{
    struct pulse_broker *b = open_default(NULL);
    struct conc *cs = pulse_calloc(CONC_THREADS + 2, sizeof *cs);
    pthread_t th[CONC_THREADS + 2];
    int64_t *all = pulse_calloc(CONC_THREADS * CONC_ROUNDS * 3, sizeof *all);
    struct pulse_buf mbuf;

    create_topic(b, "conc", 2);
    for (int i = 0; i < CONC_THREADS + 2; i++) {
        cs[i].b = b;
        cs[i].id = i;
        ck_assert_int_eq(pthread_create(&th[i], NULL, i < CONC_THREADS ? publisher_main : cursor_main, &cs[i]), 0);
    }
    /* Metrics and listing run concurrently with the writers too. */
    pulse_buf_init(&mbuf, 1 << 22);
    for (int i = 0; i < 5; i++) {
        pulse_buf_reset(&mbuf);
        ck_assert_int_eq(pulse_broker_metrics(b, &mbuf), PULSE_OK);
    }
    pulse_buf_fini(&mbuf);
    for (int i = 0; i < CONC_THREADS + 2; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(cs[i].st, PULSE_OK);
    }
    for (int p = 0; p < 2; p++) {
        size_t n = 0;
        for (int i = 0; i < CONC_THREADS; i++)
            for (int k = 0; k < cs[i].counts[p]; k++)
                all[n++] = cs[i].offsets[p][k];
        qsort(all, n, sizeof *all, cmp_i64);
        /* Every offset handed out exactly once, no gaps. */
        for (size_t k = 0; k < n; k++)
            ck_assert_int_eq(all[k], (int64_t)k);
        ck_assert_int_eq(hw_of(b, "conc", (uint32_t)p), (int64_t)n);
    }
    ck_assert_int_eq(hw_of(b, "conc", 0), CONC_THREADS * CONC_ROUNDS * 2);
    pulse_free(all);
    pulse_free(cs);
    pulse_broker_close(b);
}
END_TEST

/* ---- the epoch rule across a fence and a reopen ------------------------- */

/* Stages, from inside the syncer's fdatasyncs (faultio's sync hook), a fence
 * and an in-process reopen of partition 0 after the sync that made publish
 * A durable and before the syncer's completion pass looks at A; publish B is
 * appended just before the fence and discarded by the reopen. */
struct stage {
    struct faultio *fio;
    struct pulse_broker *b;
    struct pulse_plog *p0, *p1;
    atomic_int step;
    pulse_status_t sync_st, reopen_st, pub_b_st;
    struct pulse_offset_pair off_b;
    char err_b[256];
};

struct done_rec {
    atomic_bool done;
    atomic_int st;
};

static void done_cb(void *arg, pulse_status_t st)
{
    struct done_rec *d = arg;
    atomic_store(&d->st, (int)st);
    atomic_store(&d->done, true);
}

static struct done_rec done_b;

static void stage_hook(void *arg)
{
    struct stage *s = arg;
    int step = atomic_load(&s->step);

    if (step == 0 && pulse_plog_log_end(s->p0) >= 1 && pulse_plog_high_watermark(s->p0) == 0) {
        /* The syncer is about to sync A's bytes. Give partition 1 unsynced
         * bytes too, so that the same pass syncs it afterwards. */
        struct pulse_buf buf;
        struct pulse_record_in r = {
            .timestamp = 1, .key_len = PULSE_BATCH_NULL, .value = (const uint8_t *)"z", .value_len = 1};
        int64_t base;
        atomic_store(&s->step, 1);
        pulse_buf_init(&buf, 1 << 16);
        ck_assert_int_eq(pulse_batch_encode(&buf, 0, 0, &r, 1), PULSE_OK);
        ck_assert_int_eq(pulse_plog_append_async(s->p1, buf.data, buf.len, &base, NULL, NULL), PULSE_OK);
        pulse_buf_fini(&buf);
    } else if (step == 1 && pulse_plog_high_watermark(s->p0) >= 1) {
        /* A is durable; the syncer has not completed it yet. B goes to
         * the page cache, a sync fails (fence), the log is reopened. */
        struct pulse_publish_record rec = rec_kv(NULL, "B", 0);
        bool pending = false;
        atomic_store(&s->step, 2);
        s->pub_b_st = pulse_broker_publish(s->b, "t", &rec, 1, &s->off_b, done_cb, &done_b, &pending, s->err_b,
                                           sizeof s->err_b);
        faultio_fail_nth(s->fio, FAULTIO_FDATASYNC, 1, EIO);
        s->sync_st = pulse_plog_sync(s->p0);
        s->reopen_st = pulse_plog_reopen(s->p0, NULL);
        atomic_store(&s->step, 3);
    }
}

/* A publish whose bytes were durable before a fence and a reopen is
 * answered OK even when the syncer looks at it only after the reopen (its
 * record is in the log, at its offset); one whose bytes the reopen
 * discarded fails, even though HW passes its end again with a record
 * appended after the reopen. */
START_TEST(test_publish_durable_before_a_reopen_succeeds_and_one_it_discarded_fails)
{
    static struct stage st;
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_offset_pair off_a, off_c;
    struct done_rec done_a;
    char err[256] = "", err_a[256] = "";
    bool pending = false;

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    cfg.fence_retry_initial_ms = 60000; /* the heal thread stays out of it */
    cfg.fence_retry_max_ms = 60000;
    b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 2);
    struct pulse_broker_topic *t = pulse_broker_topic_acquire(pulse_local_of(b), "t");
    memset(&st, 0, sizeof st);
    st.fio = fio;
    st.b = b;
    st.p0 = t->plogs[0];
    st.p1 = t->plogs[1];
    atomic_init(&st.step, 0);
    atomic_init(&done_a.done, false);
    atomic_init(&done_b.done, false);
    faultio_set_sync_hook(fio, stage_hook, &st);
    struct pulse_publish_record rec_a = rec_kv(NULL, "A", 0);
    ck_assert_int_eq(pulse_broker_publish(b, "t", &rec_a, 1, &off_a, done_cb, &done_a, &pending, err_a, sizeof err_a),
                     PULSE_OK);
    ck_assert(pending);
    int64_t t0 = pulse_clock_mono_us();
    while (!atomic_load(&done_a.done) || !atomic_load(&done_b.done)) {
        ck_assert_int_lt(pulse_clock_mono_us() - t0, 10 * 1000 * 1000);
        usleep(1000);
    }
    faultio_set_sync_hook(fio, NULL, NULL);
    ck_assert_int_eq(atomic_load(&st.step), 3);
    ck_assert_int_eq(st.pub_b_st, PULSE_OK);
    ck_assert_int_eq(st.sync_st, PULSE_IO);
    ck_assert_int_eq(st.reopen_st, PULSE_OK);
    ck_assert_int_eq(off_a.offset, 0);
    ck_assert_int_eq(st.off_b.offset, 1);
    ck_assert_msg(atomic_load(&done_a.st) == PULSE_OK, "A: %s (%s)", pulse_status_name(atomic_load(&done_a.st)), err_a);
    ck_assert_int_eq(atomic_load(&done_b.st), PULSE_FENCED);
    ck_assert_msg(strstr(st.err_b, "partition 0") != NULL, "%s", st.err_b);
    /* C gets B's offset (B was never durable nor visible) and succeeds. */
    struct pulse_publish_record rec_c = rec_kv(NULL, "C", 0);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec_c, 1, &off_c, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(off_c.offset, 1);
    char values[4][32];
    ck_assert_uint_eq(read_values(b, "t", 0, values, 4), 2);
    ck_assert_str_eq(values[0], "A");
    ck_assert_str_eq(values[1], "C");
    pulse_broker_topic_release(pulse_local_of(b), t);
    pulse_broker_close(b);
    faultio_destroy(fio);
}
END_TEST

/* ---- the durable-end checkpoint --------------------------------------- */

static char crash_log[512];

/* Publishes 5 records (5 batches), waits until the syncer's checkpoint
 * covers them, then dies without closing anything. */
static void child_publish_then_crash(void)
{
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_snapshot snap;
    struct pulse_offset_pair off;
    char err[256], dir[600];

    test_config(&cfg);
    cfg.checkpoint_interval_ms = 50;
    b = open_cfg(&cfg, NULL);
    create_topic(b, "ck", 1);
    for (int i = 0; i < 5; i++) {
        char v[16];
        snprintf(v, sizeof v, "v%d", i);
        struct pulse_publish_record rec = rec_kv(NULL, v, 0);
        if (pulse_broker_publish_wait(b, "ck", &rec, 1, &off, err, sizeof err) != PULSE_OK)
            _exit(2);
    }
    /* Ten checkpoint intervals at most; then a crash: no close, so no
     * close-time snapshot either. */
    snprintf(dir, sizeof dir, "%s/topics/ck/0", tmpdir);
    for (int i = 0; i < 50; i++) {
        if (pulse_snapshot_read(pulse_io_posix(), dir, &snap) == PULSE_OK && snap.leo == 5)
            break;
        usleep(10 * 1000);
    }
    _exit(0);
}

/* Acknowledged records at the very end of a partition whose last batch is
 * damaged by the crash: the checkpoint the syncer wrote while the broker
 * ran proves them durable, so the damage is kept as corruption and their
 * offsets are never handed out again (without it, the batch was cut as a
 * torn tail and offset 4 given to the next record). */
START_TEST(test_syncer_checkpoint_keeps_the_offsets_of_a_damaged_acknowledged_tail)
{
    struct pulse_offset_pair off;
    char err[256];
    int status = 0;
    pid_t pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        child_publish_then_crash();
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    snprintf(crash_log, sizeof crash_log, "%s/topics/ck/0/%020d.log", tmpdir, 0);
    struct stat sb;
    ck_assert_int_eq(stat(crash_log, &sb), 0);
    FILE *f = fopen(crash_log, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, (long)sb.st_size - 2, SEEK_SET), 0);
    int c = fgetc(f);
    ck_assert_int_eq(fseek(f, (long)sb.st_size - 2, SEEK_SET), 0);
    fputc(c ^ 0x5a, f);
    fclose(f);

    struct pulse_broker *b = open_default(NULL);
    struct pulse_publish_record rec = rec_kv(NULL, "after", 0);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "ck", &rec, 1, &off, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(off.offset, 5);
    ck_assert_int_eq(stat(crash_log, &sb), 0);
    struct pulse_buf buf;
    struct pulse_slice info;
    pulse_buf_init(&buf, 1 << 20);
    ck_assert_int_eq(log_read(b, "ck", 0, 4, 1 << 20, &buf, &info), PULSE_OK);
    ck_assert_int_eq(info.skip_from, 4);
    ck_assert_int_eq(info.skip_to, 5);
    ck_assert(info.skip_damaged);
    pulse_buf_fini(&buf);
    pulse_broker_close(b);
}
END_TEST

/* ---- storage failures and group commit -------------------------------- */

START_TEST(test_failed_sync_fails_the_publish_and_fences_only_that_partition)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_publish_record rec0 = rec_kv(NULL, "x", 0);
    struct pulse_publish_record rec1 = rec_kv(NULL, "y", 1);
    struct pulse_offset_pair off;
    char err[256];

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 2);
    faultio_fail_nth(fio, FAULTIO_FDATASYNC, 1, EIO);
    /* Never acknowledged: the only sync of these bytes failed. */
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec0, 1, &off, err, sizeof err), PULSE_FENCED);
    ck_assert_int_eq(hw_of(b, "t", 0), 0);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec0, 1, &off, err, sizeof err), PULSE_FENCED);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec1, 1, &off, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(hw_of(b, "t", 1), 1);
    pulse_broker_close(b);
    faultio_destroy(fio);

    /* Restart recovers: the partition takes writes again. */
    b = open_default(NULL);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec0, 1, &off, err, sizeof err), PULSE_OK);
    pulse_broker_close(b);
}
END_TEST

/* A publisher that keeps going through a fence: every acknowledged
 * (offset, value) pair is recorded. */
#define HEAL_MAX_ACKS 4096

struct heal_pub {
    struct pulse_broker *b;
    int id;
    atomic_bool *stop;
    int64_t offsets[HEAL_MAX_ACKS];
    char values[HEAL_MAX_ACKS][32];
    size_t acked;
    size_t fenced;
    size_t other; /* any failure but FENCED */
};

static void *heal_publisher(void *arg)
{
    struct heal_pub *h = arg;
    char err[256];

    for (int i = 0; !atomic_load(h->stop) && h->acked < HEAL_MAX_ACKS; i++) {
        char value[32];
        struct pulse_offset_pair off;
        snprintf(value, sizeof value, "p%d-%d", h->id, i);
        struct pulse_publish_record rec = rec_kv(NULL, value, 0);
        pulse_status_t st = pulse_broker_publish_wait(h->b, "t", &rec, 1, &off, err, sizeof err);
        if (st == PULSE_OK) {
            h->offsets[h->acked] = off.offset;
            memcpy(h->values[h->acked], value, sizeof value);
            h->acked++;
        } else if (st == PULSE_FENCED) {
            h->fenced++;
            usleep(2000);
        } else {
            h->other++;
        }
    }
    return NULL;
}

static bool metrics_have(struct pulse_broker *b, const char *line)
{
    struct pulse_buf m;
    pulse_buf_init(&m, 1 << 24);
    ck_assert_int_eq(pulse_broker_metrics(b, &m), PULSE_OK);
    ck_assert_int_eq(pulse_buf_append(&m, "", 1), PULSE_OK);
    bool found = strstr((const char *)m.data, line) != NULL;
    pulse_buf_fini(&m);
    return found;
}

START_TEST(test_fenced_partition_is_reopened_in_process_with_backoff_and_loses_nothing)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_offset_pair off;
    struct pulse_fenced_partition *fl = NULL;
    size_t nfl = 0;
    char err[256] = "";
    atomic_bool stop;
    static struct heal_pub pubs[2];
    pthread_t th[2];

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    cfg.fence_retry_initial_ms = 100;
    cfg.fence_retry_max_ms = 400;
    /* One checkpoint (right after the first sync), then none: the injected
     * failures below are meant for the publishes' syncs and the reopen. */
    cfg.checkpoint_interval_ms = 3600 * 1000;
    b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 2);
    atomic_init(&stop, false);
    for (int i = 0; i < 2; i++) {
        memset(&pubs[i], 0, sizeof pubs[i]);
        pubs[i].b = b;
        pubs[i].id = i;
        pubs[i].stop = &stop;
        ck_assert_int_eq(pthread_create(&th[i], NULL, heal_publisher, &pubs[i]), 0);
    }
    usleep(100 * 1000);
    /* The next fdatasync fails, and so does the first reopen's cut of the
     * bytes it never made durable: the second attempt, after a doubled
     * wait, succeeds. */
    faultio_fail_nth(fio, FAULTIO_FTRUNCATE, 1, EIO);
    faultio_fail_nth(fio, FAULTIO_FDATASYNC, 1, EIO);
    int64_t t0 = pulse_clock_mono_us();
    struct pulse_broker_topic *t = pulse_broker_topic_acquire(pulse_local_of(b), "t");
    while (!pulse_plog_fenced(t->plogs[0])) {
        ck_assert_int_lt(pulse_clock_mono_us() - t0, 5 * 1000 * 1000);
        usleep(1000);
    }
    pulse_broker_topic_release(pulse_local_of(b), t);
    struct pulse_publish_record rec = rec_kv(NULL, "probe", 0);
    /* Fenced for at least 300 ms: 100 ms to the first attempt, which
     * fails, then 200 ms to the second. */
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec, 1, &off, err, sizeof err), PULSE_FENCED);
    ck_assert_msg(strstr(err, "partition 0") != NULL && strstr(err, "fenced") != NULL, "%s", err);
    ck_assert_int_eq(pulse_broker_fenced_list(b, &fl, &nfl), PULSE_OK);
    ck_assert_uint_eq(nfl, 1);
    ck_assert_str_eq(fl[0].topic, "t");
    ck_assert_uint_eq(fl[0].partition, 0);
    pulse_free(fl);
    ck_assert(metrics_have(b, "pulse_partition_fenced{topic=\"t\",partition=\"0\"} 1\n"));
    ck_assert(metrics_have(b, "pulse_partition_fenced{topic=\"t\",partition=\"1\"} 0\n"));
    /* The other partition never stopped. */
    struct pulse_publish_record rec1 = rec_kv(NULL, "other", 1);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec1, 1, &off, err, sizeof err), PULSE_OK);
    /* Back without a restart: one failed attempt, then a reopen. */
    while (!metrics_have(b, "pulse_partition_reopens_total 1\n")) {
        ck_assert_int_lt(pulse_clock_mono_us() - t0, 10 * 1000 * 1000);
        usleep(10 * 1000);
    }
    ck_assert_int_ge(pulse_clock_mono_us() - t0, 300 * 1000); /* 100 ms, then 200 ms */
    ck_assert(metrics_have(b, "pulse_partition_reopen_failures_total 1\n"));
    ck_assert(metrics_have(b, "pulse_partition_fenced{topic=\"t\",partition=\"0\"} 0\n"));
    ck_assert_int_eq(pulse_broker_fenced_list(b, &fl, &nfl), PULSE_OK);
    ck_assert_uint_eq(nfl, 0);
    usleep(200 * 1000);
    atomic_store(&stop, true);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        ck_assert_uint_eq(pubs[i].other, 0);
        ck_assert_uint_gt(pubs[i].acked, 0);
    }
    ck_assert_uint_gt(pubs[0].fenced + pubs[1].fenced, 0);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &rec, 1, &off, err, sizeof err), PULSE_OK);

    /* Every acknowledged record is at its offset, and no offset was
     * handed out twice. */
    static char values[2 * HEAL_MAX_ACKS + 16][32];
    size_t n = read_values(b, "t", 0, values, 2 * HEAL_MAX_ACKS + 16);
    ck_assert_int_eq((int64_t)n, hw_of(b, "t", 0));
    static bool seen[2 * HEAL_MAX_ACKS + 16];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 2; i++) {
        for (size_t k = 0; k < pubs[i].acked; k++) {
            int64_t o = pubs[i].offsets[k];
            ck_assert_int_lt(o, (int64_t)n);
            ck_assert_msg(!seen[o], "offset %lld acknowledged twice", (long long)o);
            seen[o] = true;
            ck_assert_str_eq(values[o], pubs[i].values[k]);
        }
    }
    pulse_broker_close(b);
    faultio_destroy(fio);

    /* A restart agrees. */
    b = open_default(NULL);
    ck_assert_uint_eq(read_values(b, "t", 0, values, 2 * HEAL_MAX_ACKS + 16), n);
    pulse_broker_close(b);
}
END_TEST

#define GC_THREADS 6
#define GC_ROUNDS 5

static void *gc_publisher(void *arg)
{
    struct conc *c = arg;
    char err[128];

    for (int r = 0; r < GC_ROUNDS; r++) {
        struct pulse_publish_record rec = rec_kv(NULL, "v", 0);
        struct pulse_offset_pair off;
        pulse_status_t st = pulse_broker_publish_wait(c->b, "gc", &rec, 1, &off, err, sizeof err);
        if (st != PULSE_OK) {
            c->st = st;
            return NULL;
        }
    }
    return NULL;
}

START_TEST(test_concurrent_publishes_share_fdatasyncs)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct conc cs[GC_THREADS];
    pthread_t th[GC_THREADS];
    unsigned long before;

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    b = open_cfg(&cfg, NULL);
    create_topic(b, "gc", 1);
    /* A slow disk, so that publishers really arrive during a sync. */
    faultio_set_sync_delay_us(fio, 20000);
    before = faultio_count(fio, FAULTIO_FDATASYNC);
    memset(cs, 0, sizeof cs);
    for (int i = 0; i < GC_THREADS; i++) {
        cs[i].b = b;
        ck_assert_int_eq(pthread_create(&th[i], NULL, gc_publisher, &cs[i]), 0);
    }
    for (int i = 0; i < GC_THREADS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(cs[i].st, PULSE_OK);
    }
    ck_assert_int_eq(hw_of(b, "gc", 0), GC_THREADS * GC_ROUNDS);
    ck_assert_uint_lt(faultio_count(fio, FAULTIO_FDATASYNC) - before, GC_THREADS * GC_ROUNDS);
    pulse_broker_close(b);
    faultio_destroy(fio);
}
END_TEST

START_TEST(test_drain_lets_written_publishes_reach_durability)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_publish_record recs[2] = {rec_kv(NULL, "x", 0), rec_kv(NULL, "y", 1)};
    struct pulse_offset_pair offs[2];
    struct async_done d;
    bool pending = false;
    char err[256];

    async_init(&d);
    create_topic(b, "t", 2);
    ck_assert_int_eq(pulse_broker_publish(b, "t", recs, 2, offs, async_done_fn, &d, &pending, err, sizeof err),
                     PULSE_OK);
    ck_assert(pending);
    pulse_broker_drain(b);
    /* Completed, and successfully, before drain returned. */
    ck_assert_int_eq(d.calls, 1);
    ck_assert_int_eq(d.st, PULSE_OK);
    ck_assert_int_eq(hw_of(b, "t", 0), 1);
    ck_assert_int_eq(hw_of(b, "t", 1), 1);
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

/* ---- the committer ---------------------------------------------------- */

#define GROUP_THREADS 12

struct group_commit {
    struct pulse_broker *b;
    pthread_barrier_t *start;
    int id;
    pulse_status_t st;
    char err[256];
};

static void *group_committer(void *arg)
{
    struct group_commit *g = arg;
    char consumer[32];
    /* Thread 0 asks for an offset past the high watermark (1): refused. */
    struct pulse_cursor c = cur("gc", 0, g->id == 0 ? 5 : 1);

    snprintf(consumer, sizeof consumer, "c%d", g->id);
    pthread_barrier_wait(g->start);
    g->st = pulse_broker_cursor_commit(g->b, consumer, &c, 1, g->err, sizeof g->err);
    return NULL;
}

START_TEST(test_concurrent_cursor_commits_share_one_synced_metadata_write)
{
    struct pulse_broker *b;
    struct pulse_publish_record rec = rec_kv(NULL, "v", 0);
    struct pulse_offset_pair off;
    struct group_commit g[GROUP_THREADS];
    pthread_t th[GROUP_THREADS];
    pthread_barrier_t start;
    struct pulse_cursor got;
    char err[256];
    uint64_t before;

    /* A slow metadata disk: each group write takes 50 ms, so every commit
     * that arrives meanwhile queues for the next one. */
    setenv("PULSE_FAILPOINT_DELAY", "cursor_commit_write:50", 1);
    b = open_default(NULL);
    create_topic(b, "gc", 1);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "gc", &rec, 1, &off, err, sizeof err), PULSE_OK);
    before = pulse_meta_sync_writes(pulse_local_of(b)->meta);
    pthread_barrier_init(&start, NULL, GROUP_THREADS);
    for (int i = 0; i < GROUP_THREADS; i++) {
        g[i] = (struct group_commit){.b = b, .start = &start, .id = i, .st = PULSE_OK};
        ck_assert_int_eq(pthread_create(&th[i], NULL, group_committer, &g[i]), 0);
    }
    for (int i = 0; i < GROUP_THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    uint64_t writes = pulse_meta_sync_writes(pulse_local_of(b)->meta) - before;

    /* The refused commit failed alone, with its own reason... */
    ck_assert_int_eq(g[0].st, PULSE_RANGE);
    ck_assert_ptr_nonnull(strstr(g[0].err, "offset 5"));
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c0", "gc", 0, &got), PULSE_CURSOR_NOT_FOUND);
    /* ...and every other one is stored, */
    for (int i = 1; i < GROUP_THREADS; i++) {
        char consumer[32];
        snprintf(consumer, sizeof consumer, "c%d", i);
        ck_assert_msg(g[i].st == PULSE_OK, "commit %d: %s (%s)", i, pulse_status_name(g[i].st), g[i].err);
        ck_assert_int_eq(pulse_broker_cursor_get(b, consumer, "gc", 0, &got), PULSE_OK);
        ck_assert_int_eq(got.offset, 1);
    }
    /* with far fewer synced writes than commits (one each would be 11). */
    ck_assert_msg(writes >= 1 && writes <= GROUP_THREADS / 3, "%llu sync writes for %d commits",
                  (unsigned long long)writes, GROUP_THREADS - 1);
    pulse_broker_close(b);
    unsetenv("PULSE_FAILPOINT_DELAY");
}
END_TEST

#define RACE_THREADS 4

struct delete_race {
    struct pulse_broker *b;
    int id;
    atomic_bool *stop;
    _Atomic int64_t *deleted_at; /* mono us when the delete returned; 0 before */
    int ok;
    int gone;
    int late_ok; /* started after the delete returned, yet stored */
    pulse_status_t bad;
};

static void *race_committer(void *arg)
{
    struct delete_race *d = arg;
    char consumer[32];
    char err[256];
    struct pulse_cursor c = cur("doomed", 0, 0);

    snprintf(consumer, sizeof consumer, "r%d", d->id);
    while (!atomic_load(d->stop)) {
        int64_t deleted_before = atomic_load(d->deleted_at);
        pulse_status_t st = pulse_broker_cursor_commit(d->b, consumer, &c, 1, err, sizeof err);
        if (st == PULSE_OK) {
            d->ok++;
            if (deleted_before != 0)
                d->late_ok++;
        } else if (st == PULSE_TOPIC_NOT_FOUND) {
            d->gone++;
        } else {
            d->bad = st;
        }
    }
    return NULL;
}

/* Cursors the metadata store holds for topic under consumer (read from the
 * store itself, not through the broker's filter of live topics). */
static size_t stored_cursors_of(struct pulse_broker *b, const char *consumer, const char *topic)
{
    struct pulse_meta_cursor *mc = NULL;
    size_t n = 0, k = 0;

    ck_assert_int_eq(pulse_meta_cursor_list(pulse_local_of(b)->meta, consumer, &mc, &n), PULSE_OK);
    for (size_t i = 0; i < n; i++)
        k += strcmp(mc[i].topic, topic) == 0;
    pulse_free(mc);
    return k;
}

START_TEST(test_cursor_commit_racing_a_delete_is_refused_and_never_stored)
{
    struct pulse_broker *b;
    struct delete_race d[RACE_THREADS];
    pthread_t th[RACE_THREADS];
    atomic_bool stop = false;
    _Atomic int64_t deleted_at = 0;
    struct pulse_cursor c = cur("doomed", 0, 0);
    struct pulse_cursor got;
    char err[256];

    /* Slow group writes widen the window between a commit's validation
     * and its write, where a commit could slip past a delete. */
    setenv("PULSE_FAILPOINT_DELAY", "cursor_commit_write:5", 1);
    b = open_default(NULL);
    create_topic(b, "doomed", 1);
    create_topic(b, "kept", 1);
    for (int i = 0; i < RACE_THREADS; i++) {
        d[i] = (struct delete_race){.b = b, .id = i, .stop = &stop, .deleted_at = &deleted_at};
        ck_assert_int_eq(pthread_create(&th[i], NULL, race_committer, &d[i]), 0);
    }
    /* Let commits land, then delete while they keep coming. */
    while (stored_cursors_of(b, "r0", "doomed") == 0)
        usleep(1000);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "doomed"), PULSE_OK);
    atomic_store(&deleted_at, pulse_clock_mono_us());
    usleep(100 * 1000);
    atomic_store(&stop, true);
    int ok = 0, gone = 0;
    for (int i = 0; i < RACE_THREADS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(d[i].bad, PULSE_OK);
        ck_assert_int_eq(d[i].late_ok, 0);
        ok += d[i].ok;
        gone += d[i].gone;
    }
    ck_assert_int_gt(ok, 0);
    ck_assert_int_gt(gone, 0);
    /* Nothing of the deleted topic is in the store, for any consumer. */
    for (int i = 0; i < RACE_THREADS; i++) {
        char consumer[32];
        snprintf(consumer, sizeof consumer, "r%d", i);
        ck_assert_uint_eq(stored_cursors_of(b, consumer, "doomed"), 0);
    }
    /* A commit now is refused; a recreated topic of the name has no cursor. */
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "late", &c, 1, err, sizeof err), PULSE_TOPIC_NOT_FOUND);
    ck_assert_uint_eq(stored_cursors_of(b, "late", "doomed"), 0);
    create_topic(b, "doomed", 1);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "r0", "doomed", 0, &got), PULSE_CURSOR_NOT_FOUND);
    pulse_broker_close(b);
    unsetenv("PULSE_FAILPOINT_DELAY");

    b = open_default(NULL);
    for (int i = 0; i < RACE_THREADS; i++) {
        char consumer[32];
        snprintf(consumer, sizeof consumer, "r%d", i);
        ck_assert_uint_eq(stored_cursors_of(b, consumer, "doomed"), 0);
    }
    pulse_broker_close(b);
}
END_TEST

struct admin_done {
    atomic_int calls;
    _Atomic int st;
};

static void admin_done_fn(void *arg, pulse_status_t st)
{
    struct admin_done *d = arg;
    atomic_store(&d->st, (int)st);
    atomic_fetch_add(&d->calls, 1);
}

START_TEST(test_drain_completes_queued_admin_work_then_refuses_more)
{
    struct pulse_broker *b;
    struct pulse_cursor c = cur("t", 0, 0);
    struct pulse_topic_spec spec = {"fresh", 2, -1, -1, -1, -1};
    struct pulse_topic_info *info = NULL;
    struct admin_done commit[4], create, del, late;
    char err[4][256];
    char cerr[256];
    int calls;

    memset(commit, 0, sizeof commit);
    memset(&create, 0, sizeof create);
    memset(&del, 0, sizeof del);
    memset(&late, 0, sizeof late);
    /* Each group write takes 300 ms: the work is still queued when the
     * drain starts. */
    setenv("PULSE_FAILPOINT_DELAY", "cursor_commit_write:300", 1);
    b = open_default(NULL);
    create_topic(b, "t", 1);
    create_topic(b, "gone", 1);
    for (int i = 0; i < 4; i++) {
        char consumer[16];
        snprintf(consumer, sizeof consumer, "d%d", i);
        ck_assert_int_eq(pulse_broker_cursor_commit_async(b, consumer, &c, 1, admin_done_fn, &commit[i], err[i],
                                                          sizeof err[i]),
                         PULSE_OK);
    }
    ck_assert_int_eq(pulse_broker_topic_create_async(b, &spec, &info, admin_done_fn, &create, cerr, sizeof cerr),
                     PULSE_OK);
    ck_assert_int_eq(pulse_broker_topic_delete_async(b, "gone", admin_done_fn, &del), PULSE_OK);
    calls = atomic_load(&commit[3].calls);
    ck_assert_int_eq(calls, 0);

    pulse_broker_drain(b);
    /* Everything queued before the drain completed, once and successfully. */
    for (int i = 0; i < 4; i++) {
        int n = atomic_load(&commit[i].calls), st = atomic_load(&commit[i].st);
        ck_assert_msg(n == 1 && st == PULSE_OK, "commit %d: completed %d times, %s", i, n,
                      pulse_status_name((pulse_status_t)st));
    }
    calls = atomic_load(&create.calls);
    int cst = atomic_load(&create.st);
    ck_assert_msg(calls == 1 && cst == PULSE_OK, "create: completed %d times, %s", calls,
                  pulse_status_name((pulse_status_t)cst));
    ck_assert_ptr_nonnull(info);
    ck_assert_str_eq(info->name, "fresh");
    ck_assert_uint_eq(info->partitions, 2);
    pulse_topic_info_free(info);
    calls = atomic_load(&del.calls);
    cst = atomic_load(&del.st);
    ck_assert_msg(calls == 1 && cst == PULSE_OK, "delete: completed %d times, %s", calls,
                  pulse_status_name((pulse_status_t)cst));
    ck_assert(!path_exists("topics/gone"));
    /* New admin work is refused at once, and its callback never comes. */
    ck_assert_int_eq(pulse_broker_cursor_commit_async(b, "d9", &c, 1, admin_done_fn, &late, NULL, 0), PULSE_SHUTDOWN);
    ck_assert_int_eq(pulse_broker_topic_delete_async(b, "t", admin_done_fn, &late), PULSE_SHUTDOWN);
    spec.name = "later";
    ck_assert_int_eq(pulse_broker_topic_create_async(b, &spec, NULL, admin_done_fn, &late, NULL, 0), PULSE_SHUTDOWN);
    ck_assert_int_eq(pulse_broker_topic_set_retention_async(b, "t", 5, -1, NULL, admin_done_fn, &late), PULSE_SHUTDOWN);
    ck_assert_int_eq(pulse_broker_consumer_delete_async(b, "d0", admin_done_fn, &late), PULSE_SHUTDOWN);
    pulse_broker_close(b);
    calls = atomic_load(&late.calls);
    ck_assert_int_eq(calls, 0);
    unsetenv("PULSE_FAILPOINT_DELAY");

    b = open_default(NULL);
    ck_assert_int_eq(hw_of(b, "fresh", 1), 0);
    ck_assert_int_eq(pulse_broker_topic_get(b, "gone", false, &info), PULSE_TOPIC_NOT_FOUND);
    pulse_broker_close(b);
}
END_TEST

/* Waits until partition p of topic has written its first durable-end
 * checkpoint (its snapshot file), so that a test counting or failing I/O
 * afterwards meets no checkpoint write of the syncer in between. */
static void wait_checkpointed(const char *topic, int32_t p)
{
    char rel[200];
    int64_t t0 = pulse_clock_mono_us();

    snprintf(rel, sizeof rel, "topics/%.64s/%d/snapshot", topic, (int)p);
    while (!path_exists(rel)) {
        ck_assert_msg(pulse_clock_mono_us() - t0 < 5 * 1000 * 1000, "no checkpoint for %s", rel);
        usleep(1000);
    }
}

/* Fences partition p of topic with a failed fdatasync (the publish that
 * meets it answers PULSE_FENCED). */
static void fence_partition(struct pulse_broker *b, struct faultio *fio, const char *topic, int32_t p)
{
    struct pulse_publish_record rec = rec_kv(NULL, "fence", p);
    struct pulse_offset_pair off;
    char err[256];

    faultio_fail_nth(fio, FAULTIO_FDATASYNC, 1, EIO);
    ck_assert_int_eq(pulse_broker_publish_wait(b, topic, &rec, 1, &off, err, sizeof err), PULSE_FENCED);
}

/* A heal pass holds a reference on the topic it is looking at and no
 * other, so a delete of another topic never waits for a reopen attempt
 * (here made slow on purpose) of this one. */
START_TEST(test_heal_pass_holds_one_topic_at_a_time)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_broker_topic *t;

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    cfg.fence_retry_initial_ms = 10;
    cfg.fence_retry_max_ms = 10000;
    b = open_cfg(&cfg, NULL);
    create_topic(b, "a", 1);
    create_topic(b, "z", 1);
    setenv("PULSE_FAILPOINT_DELAY", "heal_attempt:2500", 1);
    fence_partition(b, fio, "a", 0);
    int64_t t0 = pulse_clock_mono_us();
    /* The first attempt on a/0 is due after 10 ms and then sleeps. */
    usleep(300 * 1000);
    t = pulse_broker_topic_acquire(pulse_local_of(b), "a");
    ck_assert(pulse_plog_fenced(t->plogs[0]));
    pulse_broker_topic_release(pulse_local_of(b), t);
    int64_t t1 = pulse_clock_mono_us();
    ck_assert_int_eq(pulse_broker_topic_delete(b, "z"), PULSE_OK);
    int64_t waited = pulse_clock_mono_us() - t1;
    ck_assert_msg(waited < 1200 * 1000, "the delete of z waited %lld ms for a reopen attempt on a",
                  (long long)(waited / 1000));
    /* Still inside the attempt on a, or the comparison proves nothing. */
    ck_assert_int_lt(pulse_clock_mono_us() - t0, 2500 * 1000);
    pulse_broker_close(b);
    unsetenv("PULSE_FAILPOINT_DELAY");
    faultio_destroy(fio);
}
END_TEST

/* What the heal thread keeps about a fenced partition (since when, failed
 * attempts, backoff) belongs to that topic object: a topic created again
 * whose log happens to get the old log's address starts afresh. The test
 * puts a new topic object over the fenced log's very address, which an
 * allocator may do for a recreated topic. */
START_TEST(test_heal_record_is_not_inherited_by_a_new_topic_at_the_old_log_address)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_broker_topic *t, *t2;
    struct pulse_fenced_partition *fl = NULL;
    size_t nfl = 0, i;
    bool found = false;

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    cfg.fence_retry_initial_ms = 60000;
    cfg.fence_retry_max_ms = 60000;
    b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 1);
    fence_partition(b, fio, "t", 0);
    usleep(1500 * 1000);
    ck_assert_int_eq(pulse_broker_fenced_list(b, &fl, &nfl), PULSE_OK);
    ck_assert_uint_eq(nfl, 1);
    ck_assert_int_ge(fl[0].fenced_ms, 1000); /* the old topic's record ages */
    pulse_free(fl);

    t = pulse_broker_topic_acquire(pulse_local_of(b), "t");
    t2 = pulse_calloc(1, sizeof *t2);
    ck_assert_ptr_nonnull(t2);
    memcpy(t2->name, t->name, sizeof t2->name);
    t2->uid = atomic_fetch_add(&pulse_local_of(b)->topic_uids, 1) + 1;
    t2->nparts = 1;
    t2->plogs = pulse_calloc(1, sizeof *t2->plogs);
    ck_assert_ptr_nonnull(t2->plogs);
    t2->plogs[0] = t->plogs[0];
    atomic_init(&t2->refs, 1);
    pthread_rwlock_wrlock(&pulse_local_of(b)->map_lock);
    for (i = 0; i < pulse_local_of(b)->ntopics && !found; i++) {
        if (pulse_local_of(b)->topics[i] == t) {
            pulse_local_of(b)->topics[i] = t2;
            found = true;
        }
    }
    pthread_rwlock_unlock(&pulse_local_of(b)->map_lock);
    ck_assert(found);
    i--;
    for (int round = 0; round < 2; round++) {
        ck_assert_int_eq(pulse_broker_fenced_list(b, &fl, &nfl), PULSE_OK);
        ck_assert_uint_eq(nfl, 1);
        ck_assert_msg(fl[0].fenced_ms < 1400, "the new topic inherited a record fenced %lld ms ago",
                      (long long)fl[0].fenced_ms);
        ck_assert_uint_eq(fl[0].failed_attempts, 0);
        pulse_free(fl);
        usleep(1200 * 1000); /* a heal pass notes the new topic's partition */
    }
    pthread_rwlock_wrlock(&pulse_local_of(b)->map_lock);
    pulse_local_of(b)->topics[i] = t;
    pthread_rwlock_unlock(&pulse_local_of(b)->map_lock);
    while (atomic_load(&t2->refs) > 1)
        usleep(1000);
    t2->plogs[0] = NULL;
    pulse_broker_topic_destroy(t2);
    pulse_broker_topic_release(pulse_local_of(b), t);
    pulse_broker_close(b);
    faultio_destroy(fio);
}
END_TEST

/* A publish spanning partitions whose append fails on one of them (a full
 * disk) keeps what the partitions before it took, and says so: the error
 * names them with their offsets, and every stored record has its offset. */
START_TEST(test_publish_failing_on_one_partition_says_what_it_stored)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_offset_pair off[6];
    struct pulse_publish_record recs[6];
    static const char *const vals[6] = {"a0", "b0", "c0", "a1", "b1", "c1"};
    char values[8][32];
    char err[256] = "";

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    cfg.fence_retry_initial_ms = 60000;
    /* No checkpoint writes between the counted ones below. */
    cfg.checkpoint_interval_ms = 3600 * 1000;
    b = open_cfg(&cfg, NULL);
    create_topic(b, "m", 3);
    for (int32_t p = 0; p < 3; p++) {
        struct pulse_publish_record r = rec_kv(NULL, "warm", p);
        ck_assert_int_eq(pulse_broker_publish_wait(b, "m", &r, 1, off, err, sizeof err), PULSE_OK);
    }
    for (int32_t p = 0; p < 3; p++)
        wait_checkpointed("m", p);
    /* How many pwrites one partition's append takes. */
    unsigned long before = faultio_count(fio, FAULTIO_PWRITE);
    struct pulse_publish_record one = rec_kv(NULL, "warm2", 2);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "m", &one, 1, off, err, sizeof err), PULSE_OK);
    unsigned long per_append = faultio_count(fio, FAULTIO_PWRITE) - before;
    ck_assert_uint_ge(per_append, 1);

    for (int i = 0; i < 6; i++)
        recs[i] = rec_kv(NULL, vals[i], i % 3);
    /* Partition 0's append goes through, partition 1's first write finds
     * the device full. */
    faultio_fail_nth(fio, FAULTIO_PWRITE, per_append + 1, ENOSPC);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "m", recs, 6, off, err, sizeof err), PULSE_NOSPACE);
    ck_assert_msg(strstr(err, "partition 1 ") != NULL && strstr(err, "partitions 0 (offsets 1-2);") != NULL &&
                      strstr(err, "kept") != NULL,
                  "message: %s", err);
    ck_assert_uint_eq(off[0].partition, 0);
    ck_assert_int_eq(off[0].offset, 1);
    ck_assert_int_eq(off[3].offset, 2);
    for (int i = 1; i < 6; i++) {
        if (i == 3)
            continue;
        ck_assert_uint_eq(off[i].partition, (uint32_t)(i % 3));
        ck_assert_int_eq(off[i].offset, -1);
    }
    /* What was stored becomes durable and readable at those offsets. */
    int64_t t0 = pulse_clock_mono_us();
    while (hw_of(b, "m", 0) < 3) {
        ck_assert_int_lt(pulse_clock_mono_us() - t0, 5 * 1000 * 1000);
        usleep(1000);
    }
    ck_assert_uint_eq(read_values(b, "m", 0, values, 8), 3);
    ck_assert_str_eq(values[1], "a0");
    ck_assert_str_eq(values[2], "a1");
    ck_assert_int_eq(hw_of(b, "m", 1), 1);
    ck_assert_int_eq(hw_of(b, "m", 2), 2);
    /* The full disk fenced nothing: the same publish goes through now. */
    ck_assert_int_eq(pulse_broker_publish_wait(b, "m", recs, 6, off, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(off[1].offset, 1);
    pulse_broker_close(b);
    faultio_destroy(fio);
}
END_TEST

/* A partition fenced before a publish starts refuses the whole publish:
 * nothing is appended to its other partitions. */
START_TEST(test_publish_to_a_fenced_partition_stores_nothing_on_the_others)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    struct pulse_broker *b;
    struct pulse_broker_topic *t;
    struct pulse_offset_pair off[2];
    struct pulse_publish_record recs[2];
    char err[256] = "";

    ck_assert_ptr_nonnull(fio);
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    cfg.fence_retry_initial_ms = 60000;
    /* The fdatasync failed below must be the publish's, not a checkpoint's. */
    cfg.checkpoint_interval_ms = 3600 * 1000;
    b = open_cfg(&cfg, NULL);
    create_topic(b, "f", 2);
    recs[0] = rec_kv(NULL, "x", 0);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "f", recs, 1, off, err, sizeof err), PULSE_OK);
    wait_checkpointed("f", 0);
    fence_partition(b, fio, "f", 1);
    t = pulse_broker_topic_acquire(pulse_local_of(b), "f");
    int64_t end0 = pulse_plog_log_end(t->plogs[0]);
    recs[1] = rec_kv(NULL, "y", 1);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "f", recs, 2, off, err, sizeof err), PULSE_FENCED);
    ck_assert_msg(strstr(err, "partition 1") != NULL && strstr(err, "nothing of this publish was stored") != NULL,
                  "message: %s", err);
    ck_assert_int_eq(pulse_plog_log_end(t->plogs[0]), end0);
    pulse_broker_topic_release(pulse_local_of(b), t);
    ck_assert_int_eq(hw_of(b, "f", 0), 1);
    pulse_broker_close(b);
    faultio_destroy(fio);
}
END_TEST

static Suite *broker_suite(void)
{
    Suite *s = suite_create("broker");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_murmur2_matches_kafka_reference_values);
    tcase_add_test(tc, test_keyed_records_go_to_kafka_default_partition);
    tcase_add_test(tc, test_name_rule);
    tcase_add_test(tc, test_topic_create_validates_every_field);
    tcase_add_test(tc, test_topics_persist_across_reopen_and_list_sorted);
    tcase_add_test(tc, test_concurrent_creates_of_one_name_exactly_one_wins);
    tcase_add_test(tc, test_publish_gives_contiguous_offsets_in_request_order);
    tcase_add_test(tc, test_keyless_publish_goes_to_one_partition_round_robin);
    tcase_add_test(tc, test_refused_publish_writes_nothing);
    tcase_add_test(tc, test_timestamps_too_far_apart_for_one_batch_get_adjacent_batches);
    tcase_add_test(tc, test_published_records_survive_reopen_with_timestamps);
    tcase_add_test(tc, test_fetch_gives_records_from_the_offset_across_reads_and_again_after_rewind);
    tcase_add_test(tc, test_a_fetch_does_not_hold_its_topic);
    tcase_add_test(tc, test_probe_and_raw_slice_give_positions_and_the_stored_batches);
    tcase_add_test(tc, test_a_backend_without_raw_slices_answers_not_supported);
    tcase_add_test(tc, test_async_publish_completes_once_when_durable);
    tcase_add_test(tc, test_interval_mode_answers_at_once_and_data_appears_after_sync);
    tcase_add_test(tc, test_long_poll_waiter_wakes_on_publish_and_on_deadline);
    tcase_add_test(tc, test_drain_answers_waiters_with_shutdown_and_refuses_new_work);
    tcase_add_test(tc, test_delete_answers_parked_waiters_with_topic_not_found);
    tcase_add_test(tc, test_cursor_commit_checks_range_and_is_all_or_none);
    tcase_add_test(tc, test_cursor_reads_complete_once_inline_or_later);
    tcase_add_test(tc, test_delete_removes_data_and_cursors_but_not_a_prefixed_name);
    tcase_add_test(tc, test_crash_after_create_dirs_leaves_no_topic);
    tcase_add_test(tc, test_crash_after_create_commit_leaves_a_whole_topic);
    tcase_add_test(tc, test_crash_after_delete_mark_completes_the_delete);
    tcase_add_test(tc, test_crash_after_delete_commit_never_resurrects_the_topic);
    tcase_add_test(tc, test_crash_after_delete_rename_removes_the_leftover);
    tcase_add_test(tc, test_directory_without_metadata_or_definition_refuses_to_start);
    tcase_add_test(tc, test_empty_directory_without_metadata_is_removed_at_start);
    tcase_add_test(tc, test_second_broker_on_one_data_dir_is_refused);
    tcase_add_test(tc, test_metrics_expose_the_documented_families);
    tcase_add_test(tc, test_concurrent_publishers_and_cursor_writers_lose_nothing);
    tcase_add_test(tc, test_failed_sync_fails_the_publish_and_fences_only_that_partition);
    tcase_add_test(tc, test_fenced_partition_is_reopened_in_process_with_backoff_and_loses_nothing);
    tcase_add_test(tc, test_concurrent_publishes_share_fdatasyncs);
    tcase_add_test(tc, test_drain_lets_written_publishes_reach_durability);
    tcase_add_test(tc, test_delete_and_recreate_under_concurrent_publishers_is_safe);
    tcase_add_test(tc, test_concurrent_cursor_commits_share_one_synced_metadata_write);
    tcase_add_test(tc, test_cursor_commit_racing_a_delete_is_refused_and_never_stored);
    tcase_add_test(tc, test_drain_completes_queued_admin_work_then_refuses_more);
    tcase_add_test(tc, test_heal_pass_holds_one_topic_at_a_time);
    tcase_add_test(tc, test_heal_record_is_not_inherited_by_a_new_topic_at_the_old_log_address);
    tcase_add_test(tc, test_publish_failing_on_one_partition_says_what_it_stored);
    tcase_add_test(tc, test_publish_to_a_fenced_partition_stores_nothing_on_the_others);
    tcase_add_test(tc, test_publish_durable_before_a_reopen_succeeds_and_one_it_discarded_fails);
    tcase_add_test(tc, test_syncer_checkpoint_keeps_the_offsets_of_a_damaged_acknowledged_tail);
    suite_add_tcase(s, tc);
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
