/* SPDX-License-Identifier: MIT */
/*
 * datadirtest.c - the helpers check_datadir's files share (datadirtest.h):
 * a fresh data directory per test, opening a broker on it that must
 * succeed or fail, topics with records, dumping partitions byte for byte,
 * and damaging files in place.
 */
#include "datadirtest.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/broker_int.h"
#include "common/buf.h"
#include "common/log.h"
#include "storage/batch.h"
#include "localtest.h"

char tmpdir[256];

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void rm_tree(const char *rel)
{
    char path[512];

    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

void setup(void)
{
    pulse_log_set_level(PULSE_LOG_OFF);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/check_datadir.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

void teardown(void)
{
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

void test_config(struct pulse_broker_config *cfg)
{
    pulse_broker_config_init(cfg);
    cfg->data_dir = tmpdir;
    cfg->segment_max_bytes = 64 * 1024;
    cfg->retention_interval_ms = 0;
    cfg->compaction_interval_ms = 0;
}

struct pulse_broker *open_ok(struct pulse_broker_open_report *rep)
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
pulse_status_t open_fails(char *err, size_t errlen)
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

void unlink_rel(const char *rel)
{
    char path[512];

    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    ck_assert_msg(unlink(path) == 0, "unlink %s: %s", path, strerror(errno));
}

bool path_exists(const char *rel)
{
    char path[512];
    struct stat st;

    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    return stat(path, &st) == 0;
}

void create(struct pulse_broker *b, const char *name, int32_t parts, int cleanup, int64_t retention_ms)
{
    struct pulse_topic_spec spec = {name, parts, cleanup, retention_ms, -1, 2048, -1};
    char err[256] = "";
    pulse_status_t st = pulse_broker_topic_create(b, &spec, NULL, err, sizeof err);

    ck_assert_msg(st == PULSE_OK, "create %s: %s (%s)", name, pulse_status_name(st), err);
}

/* 40 records spread over the partitions (several segments each). */
void fill(struct pulse_broker *b, const char *topic, uint32_t parts)
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
void dump_partition(struct pulse_broker *b, const char *topic, uint32_t p, struct pulse_buf *out)
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
void dump_all(struct pulse_broker *b, const char *const *topics, size_t n, struct pulse_buf *out)
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

const char *const three[3] = {"alpha", "beta", "gamma"};

/* Three topics with records, a retention change and a cursor; closed.
 * before gets their bytes, cluster the cluster id. */
void seed(struct pulse_buf *before, char *cluster, size_t clen)
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
void check_restored(struct pulse_broker *b, const struct pulse_buf *before, const char *cluster)
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

/* Flips one bit of a file in place. */
void flip(const char *rel, long pos)
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

void write_text(const char *rel, const char *text)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}
