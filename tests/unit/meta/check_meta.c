/* SPDX-License-Identifier: MIT */
/*
 * check_meta.c - the metadata store: key layout of storage contract section
 * 6, value encodings, persistence across reopen, the schema-version guard,
 * the LevelDB lock, exact prefix scans and all-or-none cursor batches.
 * Raw keys are inspected and damaged through LevelDB's own C API.
 */
#include <check.h>
#include <dirent.h>
#include <ftw.h>
#include <leveldb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/endian.h"
#include "meta/dirfile.h"
#include "meta/meta.h"

static char tmpdir[256];
static char metadir[300];

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/check_meta.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(metadir, sizeof metadir, "%s/meta", tmpdir);
}

static void teardown(void)
{
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static struct pulse_meta *open_ok(void)
{
    struct pulse_meta *meta = NULL;
    char err[256];

    ck_assert_int_eq(pulse_meta_open(metadir, &meta, err, sizeof err), PULSE_OK);
    ck_assert_ptr_nonnull(meta);
    return meta;
}

/* Raw access for inspection and damage (the store must be closed). */
static leveldb_t *raw_open(void)
{
    leveldb_options_t *o = leveldb_options_create();
    char *err = NULL;
    leveldb_t *db = leveldb_open(o, metadir, &err);
    leveldb_options_destroy(o);
    ck_assert_msg(err == NULL, "%s", err ? err : "");
    return db;
}

static char *raw_get(leveldb_t *db, const char *key, size_t *vlen)
{
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    char *err = NULL;
    char *v = leveldb_get(db, ro, key, strlen(key), vlen, &err);
    leveldb_readoptions_destroy(ro);
    ck_assert_ptr_null(err);
    return v;
}

static void raw_put(leveldb_t *db, const char *key, const void *val, size_t vlen)
{
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    char *err = NULL;
    leveldb_put(db, wo, key, strlen(key), val, vlen, &err);
    leveldb_writeoptions_destroy(wo);
    ck_assert_ptr_null(err);
}

static struct pulse_meta_topic topic_def(const char *name, uint32_t parts)
{
    struct pulse_meta_topic t;

    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.partitions = parts;
    t.cleanup = 0;
    t.retention_ms = 604800000;
    t.retention_bytes = 0;
    t.segment_bytes = 1048576;
    t.created_at_ms = 1764400000000;
    return t;
}

static void put_cursor(struct pulse_meta *meta, const char *consumer, const char *topic, uint32_t p, int64_t off)
{
    struct pulse_meta_cursor c;

    memset(&c, 0, sizeof c);
    snprintf(c.topic, sizeof c.topic, "%s", topic);
    c.partition = p;
    c.offset = off;
    ck_assert_int_eq(pulse_meta_cursor_put(meta, consumer, &c, 1), PULSE_OK);
}

START_TEST(test_identity_is_created_once_and_stable_across_reopen)
{
    struct pulse_meta *meta = open_ok();
    char cluster[32], broker[32];

    snprintf(cluster, sizeof cluster, "%s", pulse_meta_cluster_id(meta));
    snprintf(broker, sizeof broker, "%s", pulse_meta_broker_id(meta));
    ck_assert_uint_eq(strlen(cluster), PULSE_META_ID_LEN);
    ck_assert_uint_eq(strlen(broker), PULSE_META_ID_LEN);
    ck_assert_uint_eq(strspn(cluster, "0123456789abcdef"), PULSE_META_ID_LEN);
    ck_assert_str_ne(cluster, broker);
    pulse_meta_close(meta);

    meta = open_ok();
    ck_assert_str_eq(pulse_meta_cluster_id(meta), cluster);
    ck_assert_str_eq(pulse_meta_broker_id(meta), broker);
    pulse_meta_close(meta);
}
END_TEST

START_TEST(test_key_layout_matches_the_storage_contract)
{
    struct pulse_meta *meta = open_ok();
    struct pulse_meta_topic t = topic_def("orders", 3);
    char cluster[32], broker[32], key[128];
    size_t vlen = 0;
    char *v;

    snprintf(cluster, sizeof cluster, "%s", pulse_meta_cluster_id(meta));
    snprintf(broker, sizeof broker, "%s", pulse_meta_broker_id(meta));
    ck_assert_int_eq(pulse_meta_topic_create(meta, &t), PULSE_OK);
    put_cursor(meta, "billing", "orders", 2, 0x0102030405LL);
    pulse_meta_close(meta);

    leveldb_t *db = raw_open();
    v = raw_get(db, "meta/schema-version", &vlen);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(vlen, 8);
    ck_assert_uint_eq(pulse_get_be64((const uint8_t *)v), 1);
    leveldb_free(v);

    v = raw_get(db, "cluster/current", &vlen);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(vlen, 16);
    ck_assert_int_eq(memcmp(v, cluster, 16), 0);
    leveldb_free(v);
    snprintf(key, sizeof key, "cluster/%s", cluster);
    v = raw_get(db, key, &vlen);
    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_nonnull(memmem(v, vlen, "\"id\":", 5));
    leveldb_free(v);
    v = raw_get(db, "broker/current", &vlen);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(memcmp(v, broker, 16), 0);
    leveldb_free(v);
    snprintf(key, sizeof key, "broker/%s", broker);
    v = raw_get(db, key, &vlen);
    ck_assert_ptr_nonnull(v);
    leveldb_free(v);

    v = raw_get(db, "topic/orders", &vlen);
    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_nonnull(memmem(v, vlen, "\"name\":\"orders\"", 15));
    ck_assert_ptr_nonnull(memmem(v, vlen, "\"partitions\":3", 14));
    ck_assert_ptr_nonnull(memmem(v, vlen, "\"cleanup\":\"delete\"", 18));
    leveldb_free(v);
    for (int p = 0; p < 3; p++) {
        snprintf(key, sizeof key, "partition/orders/%d", p);
        v = raw_get(db, key, &vlen);
        ck_assert_msg(v != NULL, "missing %s", key);
        ck_assert_ptr_nonnull(memmem(v, vlen, "\"partition\":", 12));
        leveldb_free(v);
    }
    v = raw_get(db, "partition/orders/3", &vlen);
    ck_assert_ptr_null(v);

    v = raw_get(db, "cursor/billing/orders/2", &vlen);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(vlen, 8);
    static const uint8_t want[8] = {0, 0, 0, 1, 2, 3, 4, 5};
    ck_assert_int_eq(memcmp(v, want, 8), 0);
    leveldb_free(v);
    leveldb_close(db);
}
END_TEST

START_TEST(test_newer_schema_version_is_refused_with_a_clear_message)
{
    struct pulse_meta *meta = open_ok();
    struct pulse_meta *again = NULL;
    uint8_t be[8];
    char err[256] = "";

    pulse_meta_close(meta);
    leveldb_t *db = raw_open();
    pulse_put_be64(be, PULSE_META_SCHEMA_VERSION + 1);
    raw_put(db, "meta/schema-version", be, sizeof be);
    leveldb_close(db);

    ck_assert_int_eq(pulse_meta_open(metadir, &again, err, sizeof err), PULSE_INVALID);
    ck_assert_ptr_null(again);
    ck_assert_msg(strstr(err, "newer") != NULL, "message: %s", err);
}
END_TEST

START_TEST(test_malformed_schema_version_is_corrupt)
{
    struct pulse_meta *meta = open_ok();
    struct pulse_meta *again = NULL;
    char err[256] = "";

    pulse_meta_close(meta);
    leveldb_t *db = raw_open();
    raw_put(db, "meta/schema-version", "\x01", 1);
    leveldb_close(db);
    ck_assert_int_eq(pulse_meta_open(metadir, &again, err, sizeof err), PULSE_CORRUPT);
    ck_assert_ptr_null(again);
}
END_TEST

START_TEST(test_second_process_on_the_same_store_is_busy)
{
    struct pulse_meta *meta = open_ok();
    struct pulse_meta *again = NULL;
    char err[512] = "";
    int status = 0;

    /* Same process: LevelDB refuses the second lock too. */
    ck_assert_int_eq(pulse_meta_open(metadir, &again, err, sizeof err), PULSE_BUSY);
    ck_assert_ptr_null(again);
    ck_assert_msg(strstr(err, "in use") != NULL, "message: %s", err);

    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct pulse_meta *child = NULL;
        char cerr[512] = "";
        pulse_status_t st = pulse_meta_open(metadir, &child, cerr, sizeof cerr);
        _exit(st == PULSE_BUSY && strstr(cerr, "in use") != NULL ? 0 : 1);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    pulse_meta_close(meta);

    /* Released at close. */
    meta = open_ok();
    pulse_meta_close(meta);
}
END_TEST

START_TEST(test_topic_records_persist_across_reopen)
{
    struct pulse_meta *meta = open_ok();
    struct pulse_meta_topic t = topic_def("orders", 4);
    struct pulse_meta_topic got;
    uint32_t nparts = 0;

    t.cleanup = 1;
    t.retention_bytes = 12345;
    ck_assert_int_eq(pulse_meta_topic_create(meta, &t), PULSE_OK);
    pulse_meta_close(meta);

    meta = open_ok();
    ck_assert_int_eq(pulse_meta_topic_get(meta, "orders", &got), PULSE_OK);
    ck_assert_str_eq(got.name, "orders");
    ck_assert_uint_eq(got.partitions, 4);
    ck_assert_int_eq(got.cleanup, 1);
    ck_assert_int_eq(got.retention_ms, 604800000);
    ck_assert_int_eq(got.retention_bytes, 12345);
    ck_assert_int_eq(got.segment_bytes, 1048576);
    ck_assert_int_eq(got.created_at_ms, 1764400000000);
    ck_assert_int_eq(pulse_meta_partition_count(meta, "orders", &nparts), PULSE_OK);
    ck_assert_uint_eq(nparts, 4);

    got.retention_ms = 0;
    ck_assert_int_eq(pulse_meta_topic_put(meta, &got), PULSE_OK);
    pulse_meta_close(meta);
    meta = open_ok();
    ck_assert_int_eq(pulse_meta_topic_get(meta, "orders", &got), PULSE_OK);
    ck_assert_int_eq(got.retention_ms, 0);
    ck_assert_int_eq(pulse_meta_topic_get(meta, "nope", &got), PULSE_NOT_FOUND);
    pulse_meta_close(meta);
}
END_TEST

START_TEST(test_topic_list_is_sorted_by_name)
{
    struct pulse_meta *meta = open_ok();
    const char *names[] = {"zeta", "a.b", "a", "orders2", "orders"};
    struct pulse_meta_topic *list = NULL;
    size_t n = 0;

    ck_assert_int_eq(pulse_meta_topic_list(meta, &list, &n), PULSE_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(list);
    for (size_t i = 0; i < 5; i++) {
        struct pulse_meta_topic t = topic_def(names[i], 1);
        ck_assert_int_eq(pulse_meta_topic_create(meta, &t), PULSE_OK);
    }
    ck_assert_int_eq(pulse_meta_topic_list(meta, &list, &n), PULSE_OK);
    ck_assert_uint_eq(n, 5);
    ck_assert_str_eq(list[0].name, "a");
    ck_assert_str_eq(list[1].name, "a.b");
    ck_assert_str_eq(list[2].name, "orders");
    ck_assert_str_eq(list[3].name, "orders2");
    ck_assert_str_eq(list[4].name, "zeta");
    pulse_free(list);
    pulse_meta_close(meta);
}
END_TEST

START_TEST(test_topic_delete_does_not_touch_a_name_it_prefixes)
{
    struct pulse_meta *meta = open_ok();
    struct pulse_meta_topic a = topic_def("orders", 2);
    struct pulse_meta_topic b = topic_def("orders2", 3);
    struct pulse_meta_topic got;
    uint32_t nparts = 0;
    size_t gone = 0;
    int64_t off = 0;

    ck_assert_int_eq(pulse_meta_topic_create(meta, &a), PULSE_OK);
    ck_assert_int_eq(pulse_meta_topic_create(meta, &b), PULSE_OK);
    put_cursor(meta, "c1", "orders", 0, 5);
    put_cursor(meta, "c1", "orders2", 0, 6);
    put_cursor(meta, "orders", "orders2", 1, 7); /* a consumer named like the topic */
    put_cursor(meta, "c2", "orders", 1, 8);

    ck_assert_int_eq(pulse_meta_topic_delete(meta, "orders", &gone), PULSE_OK);
    ck_assert_uint_eq(gone, 2);
    pulse_meta_close(meta);

    meta = open_ok();
    ck_assert_int_eq(pulse_meta_topic_get(meta, "orders", &got), PULSE_NOT_FOUND);
    ck_assert_int_eq(pulse_meta_partition_count(meta, "orders", &nparts), PULSE_OK);
    ck_assert_uint_eq(nparts, 0);
    ck_assert_int_eq(pulse_meta_cursor_get(meta, "c1", "orders", 0, &off), PULSE_NOT_FOUND);
    ck_assert_int_eq(pulse_meta_cursor_get(meta, "c2", "orders", 1, &off), PULSE_NOT_FOUND);

    ck_assert_int_eq(pulse_meta_topic_get(meta, "orders2", &got), PULSE_OK);
    ck_assert_int_eq(pulse_meta_partition_count(meta, "orders2", &nparts), PULSE_OK);
    ck_assert_uint_eq(nparts, 3);
    ck_assert_int_eq(pulse_meta_cursor_get(meta, "c1", "orders2", 0, &off), PULSE_OK);
    ck_assert_int_eq(off, 6);
    ck_assert_int_eq(pulse_meta_cursor_get(meta, "orders", "orders2", 1, &off), PULSE_OK);
    ck_assert_int_eq(off, 7);
    pulse_meta_close(meta);
}
END_TEST

START_TEST(test_cursor_batch_is_all_or_none)
{
    struct pulse_meta *meta = open_ok();
    struct pulse_meta_cursor cs[3];
    int64_t off = 0;

    memset(cs, 0, sizeof cs);
    snprintf(cs[0].topic, sizeof cs[0].topic, "t");
    cs[0].offset = 1;
    snprintf(cs[1].topic, sizeof cs[1].topic, "t");
    cs[1].partition = 1;
    cs[1].offset = 2;
    snprintf(cs[2].topic, sizeof cs[2].topic, "t");
    cs[2].partition = 2;
    cs[2].offset = -1; /* refused: nothing of this batch may land */
    ck_assert_int_eq(pulse_meta_cursor_put(meta, "c", cs, 3), PULSE_INVALID);
    ck_assert_int_eq(pulse_meta_cursor_get(meta, "c", "t", 0, &off), PULSE_NOT_FOUND);
    ck_assert_int_eq(pulse_meta_cursor_get(meta, "c", "t", 1, &off), PULSE_NOT_FOUND);

    cs[2].offset = 3;
    ck_assert_int_eq(pulse_meta_cursor_put(meta, "c", cs, 3), PULSE_OK);
    pulse_meta_close(meta);
    meta = open_ok();
    for (uint32_t p = 0; p < 3; p++) {
        ck_assert_int_eq(pulse_meta_cursor_get(meta, "c", "t", p, &off), PULSE_OK);
        ck_assert_int_eq(off, (int64_t)p + 1);
    }
    pulse_meta_close(meta);
}
END_TEST

START_TEST(test_cursor_list_is_sorted_by_topic_then_partition)
{
    struct pulse_meta *meta = open_ok();
    struct pulse_meta_cursor *list = NULL;
    size_t n = 0;

    put_cursor(meta, "c", "b", 10, 1);
    put_cursor(meta, "c", "b", 2, 2);
    put_cursor(meta, "c", "a.x", 0, 3);
    put_cursor(meta, "c", "a", 0, 4);
    put_cursor(meta, "c.d", "a", 0, 5); /* another consumer: not listed */
    ck_assert_int_eq(pulse_meta_cursor_list(meta, "c", &list, &n), PULSE_OK);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(list[0].topic, "a");
    ck_assert_int_eq(list[0].offset, 4);
    ck_assert_str_eq(list[1].topic, "a.x");
    ck_assert_str_eq(list[2].topic, "b");
    ck_assert_uint_eq(list[2].partition, 2);
    ck_assert_uint_eq(list[3].partition, 10);
    ck_assert_int_eq(list[3].offset, 1);
    pulse_free(list);

    ck_assert_int_eq(pulse_meta_cursor_list(meta, "nobody", &list, &n), PULSE_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(list);
    pulse_meta_close(meta);
}
END_TEST

/* One scan gives each partition's highest cursor over every consumer:
 * what proves its high watermark at start-up (broker cursor.c). */
START_TEST(test_highest_cursor_of_each_partition_over_every_consumer)
{
    struct pulse_meta *meta = open_ok();
    struct pulse_meta_cursor *hi = NULL;
    size_t n = 0;

    ck_assert_int_eq(pulse_meta_cursor_highest(meta, &hi, &n), PULSE_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(hi);
    put_cursor(meta, "c", "t", 0, 7);
    put_cursor(meta, "c.d", "t", 0, 120);
    put_cursor(meta, "c2", "t", 0, 40);
    put_cursor(meta, "c2", "t", 10, 5);
    put_cursor(meta, "c", "t", 2, 9);
    put_cursor(meta, "c", "t.x", 0, 3);
    ck_assert_int_eq(pulse_meta_cursor_highest(meta, &hi, &n), PULSE_OK);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(hi[0].topic, "t");
    ck_assert_uint_eq(hi[0].partition, 0);
    ck_assert_int_eq(hi[0].offset, 120);
    ck_assert_uint_eq(hi[1].partition, 2);
    ck_assert_int_eq(hi[1].offset, 9);
    ck_assert_uint_eq(hi[2].partition, 10);
    ck_assert_int_eq(hi[2].offset, 5);
    ck_assert_str_eq(hi[3].topic, "t.x");
    ck_assert_int_eq(hi[3].offset, 3);
    pulse_free(hi);
    pulse_meta_close(meta);
}
END_TEST

START_TEST(test_consumer_list_is_sorted_and_delete_is_exact)
{
    struct pulse_meta *meta = open_ok();
    char **names = NULL;
    size_t n = 0;
    int64_t off;

    put_cursor(meta, "c", "t", 0, 1);
    put_cursor(meta, "c", "t", 1, 1);
    put_cursor(meta, "c.d", "t", 0, 1);
    put_cursor(meta, "c2", "t", 0, 1);
    ck_assert_int_eq(pulse_meta_consumer_list(meta, &names, &n), PULSE_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(names[0], "c");
    ck_assert_str_eq(names[1], "c.d");
    ck_assert_str_eq(names[2], "c2");
    pulse_meta_names_free(names, n);

    ck_assert_int_eq(pulse_meta_consumer_delete(meta, "c"), PULSE_OK);
    ck_assert_int_eq(pulse_meta_consumer_delete(meta, "unknown"), PULSE_OK);
    pulse_meta_close(meta);
    meta = open_ok();
    ck_assert_int_eq(pulse_meta_cursor_get(meta, "c", "t", 0, &off), PULSE_NOT_FOUND);
    ck_assert_int_eq(pulse_meta_cursor_get(meta, "c.d", "t", 0, &off), PULSE_OK);
    ck_assert_int_eq(pulse_meta_cursor_get(meta, "c2", "t", 0, &off), PULSE_OK);
    ck_assert_int_eq(pulse_meta_consumer_list(meta, &names, &n), PULSE_OK);
    ck_assert_uint_eq(n, 2);
    pulse_meta_names_free(names, n);
    pulse_meta_close(meta);
}
END_TEST

START_TEST(test_damaged_records_are_corrupt_not_crashes)
{
    struct pulse_meta *meta = open_ok();
    struct pulse_meta_topic t = topic_def("t", 1);
    struct pulse_meta_topic got;
    struct pulse_meta_cursor *list = NULL;
    size_t n = 0;
    int64_t off;

    ck_assert_int_eq(pulse_meta_topic_create(meta, &t), PULSE_OK);
    put_cursor(meta, "c", "t", 0, 1);
    pulse_meta_close(meta);

    leveldb_t *db = raw_open();
    raw_put(db, "cursor/c/t/0", "\x00\x01\x02", 3);
    raw_put(db, "topic/t", "{\"name\":\"t\",\"partitions\":\"x\"}", 29);
    raw_put(db, "topic/u", "\xff\xfe", 2);
    leveldb_close(db);

    meta = open_ok();
    ck_assert_int_eq(pulse_meta_cursor_get(meta, "c", "t", 0, &off), PULSE_CORRUPT);
    ck_assert_int_eq(pulse_meta_cursor_list(meta, "c", &list, &n), PULSE_CORRUPT);
    ck_assert_int_eq(pulse_meta_topic_get(meta, "t", &got), PULSE_CORRUPT);
    ck_assert_int_eq(pulse_meta_topic_get(meta, "u", &got), PULSE_CORRUPT);
    pulse_meta_close(meta);
}
END_TEST

/* ---- the data directory's files (dirfile.c) --------------------------- */

START_TEST(test_topic_file_round_trips_and_every_flipped_bit_is_caught)
{
    struct pulse_meta_topic t = topic_def("orders.eu-1", 12);
    struct pulse_meta_topic got;
    char buf[PULSE_DIRFILE_MAX];
    char why[160];
    size_t len = 0;

    t.cleanup = 1;
    t.retention_bytes = 1 << 30;
    ck_assert_int_eq(pulse_dirfile_topic_encode(&t, buf, sizeof buf, &len), PULSE_OK);
    ck_assert_int_eq(buf[len - 1], '\n');
    ck_assert_int_eq(pulse_dirfile_topic_decode(buf, len, &got, why, sizeof why), PULSE_OK);
    ck_assert_int_eq(memcmp(&got, &t, sizeof t), 0);
    ck_assert_ptr_nonnull(strstr(buf, "\"crc32c\":\""));
    ck_assert_ptr_nonnull(strstr(buf, "\"format\":1"));
    /* Not one flipped bit passes for a definition, anywhere in the file. */
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (char)(1 << bit);
            ck_assert_msg(pulse_dirfile_topic_decode(buf, len, &got, why, sizeof why) == PULSE_CORRUPT,
                          "byte %zu bit %d accepted", i, bit);
            buf[i] ^= (char)(1 << bit);
        }
    }
    /* Truncation and trailing garbage too. */
    ck_assert_int_eq(pulse_dirfile_topic_decode(buf, len / 2, &got, why, sizeof why), PULSE_CORRUPT);
    ck_assert_int_eq(pulse_dirfile_topic_decode("{}", 2, &got, why, sizeof why), PULSE_CORRUPT);
    ck_assert_int_eq(pulse_dirfile_topic_decode("", 0, &got, why, sizeof why), PULSE_CORRUPT);
}
END_TEST

START_TEST(test_identity_file_round_trips_and_rejects_damage)
{
    struct pulse_meta_identity id, got;
    char buf[PULSE_DIRFILE_MAX];
    char why[160];
    size_t len = 0;

    memset(&id, 0, sizeof id);
    snprintf(id.cluster_id, sizeof id.cluster_id, "0123456789abcdef");
    snprintf(id.broker_id, sizeof id.broker_id, "fedcba9876543210");
    ck_assert_int_eq(pulse_dirfile_identity_encode(&id, buf, sizeof buf, &len), PULSE_OK);
    ck_assert_int_eq(pulse_dirfile_identity_decode(buf, len, &got, why, sizeof why), PULSE_OK);
    ck_assert_str_eq(got.cluster_id, id.cluster_id);
    ck_assert_str_eq(got.broker_id, id.broker_id);
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= 0x01;
        ck_assert_msg(pulse_dirfile_identity_decode(buf, len, &got, why, sizeof why) == PULSE_CORRUPT,
                      "byte %zu accepted", i);
        buf[i] ^= 0x01;
    }
    snprintf(id.cluster_id, sizeof id.cluster_id, "NOT-HEX-AT-ALL!!");
    ck_assert_int_eq(pulse_dirfile_identity_encode(&id, buf, sizeof buf, &len), PULSE_INVALID);
}
END_TEST

/* ---- identity kept outside the store, damage, repair ------------------ */

static struct pulse_meta *open_with(const struct pulse_meta_open_opts *opts, struct pulse_meta_open_report *rep,
                                    pulse_status_t want, char *err, size_t errlen)
{
    struct pulse_meta *meta = NULL;
    pulse_status_t st = pulse_meta_open_ex(metadir, opts, &meta, rep, err, errlen);

    ck_assert_msg(st == want, "open: %s, wanted %s (%s)", pulse_status_name(st), pulse_status_name(want), err);
    return meta;
}

START_TEST(test_a_lost_store_takes_the_callers_identity_and_a_foreign_one_is_refused)
{
    struct pulse_meta_identity id;
    struct pulse_meta_open_opts opts = {&id, false};
    struct pulse_meta_open_report rep;
    struct pulse_meta *meta;
    char err[512] = "";

    memset(&id, 0, sizeof id);
    snprintf(id.cluster_id, sizeof id.cluster_id, "00000000000000aa");
    snprintf(id.broker_id, sizeof id.broker_id, "00000000000000bb");
    meta = open_with(&opts, &rep, PULSE_OK, err, sizeof err);
    ck_assert(rep.created);
    ck_assert_int_eq(rep.cluster_origin, PULSE_META_ID_ADOPTED);
    ck_assert_int_eq(rep.broker_origin, PULSE_META_ID_ADOPTED);
    ck_assert_str_eq(pulse_meta_cluster_id(meta), "00000000000000aa");
    ck_assert_str_eq(pulse_meta_broker_id(meta), "00000000000000bb");
    pulse_meta_close(meta);

    meta = open_with(&opts, &rep, PULSE_OK, err, sizeof err);
    ck_assert(!rep.created);
    ck_assert_int_eq(rep.cluster_origin, PULSE_META_ID_LOADED);
    pulse_meta_close(meta);

    snprintf(id.cluster_id, sizeof id.cluster_id, "00000000000000cc");
    meta = open_with(&opts, &rep, PULSE_INVALID, err, sizeof err);
    ck_assert_ptr_null(meta);
    ck_assert(rep.identity_mismatch);
    ck_assert_msg(strstr(err, "00000000000000aa") != NULL && strstr(err, "00000000000000cc") != NULL, "%s", err);
}
END_TEST

static void rm_meta(void)
{
    nftw(metadir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

START_TEST(test_required_identity_is_never_made_up)
{
    struct pulse_meta_open_opts opts = {NULL, true};
    struct pulse_meta_open_report rep;
    struct pulse_meta *meta;
    char err[512] = "";

    meta = open_with(&opts, &rep, PULSE_NOT_FOUND, err, sizeof err);
    ck_assert_ptr_null(meta);
    /* Nothing was written: a plain open still draws a fresh id. */
    meta = open_with(NULL, &rep, PULSE_OK, err, sizeof err);
    ck_assert_int_eq(rep.cluster_origin, PULSE_META_ID_CREATED);
    pulse_meta_close(meta);
}
END_TEST

/* Every file of the store whose name ends with suffix. */
static int store_files(const char *suffix, char names[][512], int max)
{
    DIR *d = opendir(metadir);
    struct dirent *de;
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)) != NULL && n < max) {
        size_t len = strlen(de->d_name);
        if (len > strlen(suffix) && strcmp(de->d_name + len - strlen(suffix), suffix) == 0)
            snprintf(names[n++], 512, "%s/%s", metadir, de->d_name);
    }
    closedir(d);
    return n;
}

static void fill_store(int topics)
{
    struct pulse_meta *meta = open_ok();

    for (int i = 0; i < topics; i++) {
        char name[32];
        snprintf(name, sizeof name, "topic-%03d", i);
        struct pulse_meta_topic t = topic_def(name, 2);
        ck_assert_int_eq(pulse_meta_topic_create(meta, &t), PULSE_OK);
        put_cursor(meta, "reader", name, 1, i);
    }
    pulse_meta_close(meta);
}

START_TEST(test_a_flipped_bit_in_the_log_is_reported_not_hidden)
{
    struct pulse_meta_open_report rep;
    struct pulse_meta *meta;
    char logs[4][512];
    char err[512] = "";
    struct stat sb;
    FILE *f;

    fill_store(40);
    ck_assert_int_eq(store_files(".log", logs, 4), 1);
    ck_assert_int_eq(stat(logs[0], &sb), 0);
    /* The middle of a record (not a header, not the torn-tail case). */
    f = fopen(logs[0], "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, sb.st_size / 2, SEEK_SET);
    int c = fgetc(f);
    fseek(f, sb.st_size / 2, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
    meta = open_with(NULL, &rep, PULSE_OK, err, sizeof err);
    ck_assert_uint_ge(rep.damage_lines, 1);
    ck_assert_msg(strstr(rep.damage, "Corruption") != NULL, "%s", rep.damage);
    ck_assert_uint_lt(rep.topics, 40); /* LevelDB dropped records: the caller must rebuild */
    pulse_meta_close(meta);
}
END_TEST

START_TEST(test_damaged_tables_are_corrupt_at_open_and_repair_sets_them_aside)
{
    struct pulse_meta_repair_report rrep;
    struct pulse_meta_open_report rep;
    struct pulse_meta *meta;
    char tables[8][512];
    char err[512] = "";
    int n;

    fill_store(40);
    meta = open_ok(); /* turns the log into a table */
    pulse_meta_close(meta);
    n = store_files(".ldb", tables, 8);
    ck_assert_int_ge(n, 1);
    for (int i = 0; i < n; i++) {
        struct stat sb;
        ck_assert_int_eq(stat(tables[i], &sb), 0);
        FILE *f = fopen(tables[i], "r+b");
        ck_assert_ptr_nonnull(f);
        for (off_t k = 0; k < sb.st_size; k++)
            fputc(0x5a, f);
        fclose(f);
    }
    meta = open_with(NULL, &rep, PULSE_CORRUPT, err, sizeof err);
    ck_assert_ptr_null(meta);
    ck_assert_msg(strstr(err, "damaged") != NULL, "%s", err);

    ck_assert_int_eq(pulse_meta_repair(metadir, &rrep, err, sizeof err), PULSE_OK);
    ck_assert(rrep.found);
    ck_assert_int_eq((int)rrep.tables_set_aside, n);
    ck_assert_uint_ge(rrep.damage_lines, 1);
    meta = open_with(NULL, &rep, PULSE_OK, err, sizeof err);
    ck_assert_uint_eq(rep.topics, 0);
    pulse_meta_close(meta);
}
END_TEST

START_TEST(test_missing_or_truncated_current_is_corrupt_and_repair_recovers_everything)
{
    struct pulse_meta_repair_report rrep;
    struct pulse_meta_open_report rep;
    struct pulse_meta *meta;
    char path[512];
    char err[512] = "";
    FILE *f;

    fill_store(40);
    snprintf(path, sizeof path, "%s/CURRENT", metadir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    meta = open_with(NULL, &rep, PULSE_CORRUPT, err, sizeof err);
    ck_assert_msg(strstr(err, "CURRENT") != NULL, "%s", err);
    /* Without CURRENT LevelDB would start an empty store over the tables
     * and delete them as obsolete; refused instead. */
    ck_assert_int_eq(unlink(path), 0);
    meta = open_with(NULL, &rep, PULSE_CORRUPT, err, sizeof err);
    ck_assert_msg(strstr(err, "no CURRENT file") != NULL, "%s", err);

    ck_assert_int_eq(pulse_meta_repair(metadir, &rrep, err, sizeof err), PULSE_OK);
    ck_assert_uint_eq(rrep.tables_set_aside, 0);
    meta = open_with(NULL, &rep, PULSE_OK, err, sizeof err);
    ck_assert_uint_eq(rep.topics, 40);
    ck_assert_uint_eq(rep.cursors, 40);
    pulse_meta_close(meta);

    /* Nothing to repair is not an error. */
    rm_meta();
    ck_assert_int_eq(pulse_meta_repair(metadir, &rrep, err, sizeof err), PULSE_OK);
    ck_assert(!rrep.found);
}
END_TEST

START_TEST(test_repair_refuses_a_store_in_use)
{
    struct pulse_meta_repair_report rrep;
    struct pulse_meta *meta = open_ok();
    char err[512] = "";
    int status = 0;
    pid_t pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        pulse_status_t st = pulse_meta_repair(metadir, &rrep, err, sizeof err);
        _exit(st == PULSE_BUSY && strstr(err, "in use") != NULL ? 0 : 1);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    pulse_meta_close(meta);
}
END_TEST

/* The fault hook the broker's tests rely on behaves as a failed LevelDB
 * sync write does (meta.h "Failed writes"): the failed batch is invisible
 * on the stale handle; applied later, it lands at the reopen before the
 * write that caused it (so that write wins) or at the next open; lost, it
 * never lands. */
START_TEST(test_failed_write_hook_applies_later_in_log_order_or_never)
{
    struct pulse_meta *meta = open_ok();
    struct pulse_meta_cursor c;
    int64_t off = -1;

    memset(&c, 0, sizeof c);
    snprintf(c.topic, sizeof c.topic, "t");
    c.offset = 5;
    pulse_meta_fail_writes(meta, 1, PULSE_META_FAULT_APPLIED_LATER);
    ck_assert_int_eq(pulse_meta_cursor_put(meta, "a", &c, 1), PULSE_IO);
    ck_assert_int_eq(pulse_meta_cursor_get(meta, "a", "t", 0, &off), PULSE_NOT_FOUND);
    put_cursor(meta, "b", "t", 0, 7);
    ck_assert_int_eq(pulse_meta_cursor_get(meta, "a", "t", 0, &off), PULSE_OK);
    ck_assert_int_eq(off, 5);
    /* The failed write comes before the one that reopened the store. */
    pulse_meta_fail_writes(meta, 1, PULSE_META_FAULT_APPLIED_LATER);
    c.offset = 6;
    ck_assert_int_eq(pulse_meta_cursor_put(meta, "a", &c, 1), PULSE_IO);
    put_cursor(meta, "a", "t", 0, 9);
    ck_assert_int_eq(pulse_meta_cursor_get(meta, "a", "t", 0, &off), PULSE_OK);
    ck_assert_int_eq(off, 9);
    /* Lost: never. */
    pulse_meta_fail_writes(meta, 1, PULSE_META_FAULT_LOST);
    c.offset = 1;
    ck_assert_int_eq(pulse_meta_cursor_put(meta, "c", &c, 1), PULSE_IO);
    put_cursor(meta, "b", "t", 0, 8);
    ck_assert_int_eq(pulse_meta_cursor_get(meta, "c", "t", 0, &off), PULSE_NOT_FOUND);
    /* Applied later, with no write after it: the next open has it. */
    pulse_meta_fail_writes(meta, 1, PULSE_META_FAULT_APPLIED_LATER);
    ck_assert_int_eq(pulse_meta_cursor_put(meta, "c", &c, 1), PULSE_IO);
    pulse_meta_close(meta);
    meta = open_ok();
    ck_assert_int_eq(pulse_meta_cursor_get(meta, "c", "t", 0, &off), PULSE_OK);
    ck_assert_int_eq(off, 1);
    pulse_meta_close(meta);
}
END_TEST

static Suite *meta_suite(void)
{
    Suite *s = suite_create("meta");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_identity_is_created_once_and_stable_across_reopen);
    tcase_add_test(tc, test_key_layout_matches_the_storage_contract);
    tcase_add_test(tc, test_newer_schema_version_is_refused_with_a_clear_message);
    tcase_add_test(tc, test_malformed_schema_version_is_corrupt);
    tcase_add_test(tc, test_second_process_on_the_same_store_is_busy);
    tcase_add_test(tc, test_topic_records_persist_across_reopen);
    tcase_add_test(tc, test_topic_list_is_sorted_by_name);
    tcase_add_test(tc, test_topic_delete_does_not_touch_a_name_it_prefixes);
    tcase_add_test(tc, test_cursor_batch_is_all_or_none);
    tcase_add_test(tc, test_cursor_list_is_sorted_by_topic_then_partition);
    tcase_add_test(tc, test_consumer_list_is_sorted_and_delete_is_exact);
    tcase_add_test(tc, test_highest_cursor_of_each_partition_over_every_consumer);
    tcase_add_test(tc, test_damaged_records_are_corrupt_not_crashes);
    tcase_add_test(tc, test_topic_file_round_trips_and_every_flipped_bit_is_caught);
    tcase_add_test(tc, test_identity_file_round_trips_and_rejects_damage);
    tcase_add_test(tc, test_a_lost_store_takes_the_callers_identity_and_a_foreign_one_is_refused);
    tcase_add_test(tc, test_required_identity_is_never_made_up);
    tcase_add_test(tc, test_a_flipped_bit_in_the_log_is_reported_not_hidden);
    tcase_add_test(tc, test_damaged_tables_are_corrupt_at_open_and_repair_sets_them_aside);
    tcase_add_test(tc, test_missing_or_truncated_current_is_corrupt_and_repair_recovers_everything);
    tcase_add_test(tc, test_repair_refuses_a_store_in_use);
    tcase_add_test(tc, test_failed_write_hook_applies_later_in_log_order_or_never);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(meta_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
