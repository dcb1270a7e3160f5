/* SPDX-License-Identifier: MIT */
/*
 * brokertest.c - the helpers check_broker's files share (brokertest.h): a
 * fresh data directory per test, opening a broker on it, topics, records,
 * reading a partition back, completion waiters and cursors.
 */
#include "brokertest.h"

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
char tmpdir[256];

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void setup(void)
{
    pulse_log_set_level(PULSE_LOG_ERROR);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/check_broker.XXXXXX");
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
}

struct pulse_broker *open_cfg(const struct pulse_broker_config *cfg, struct pulse_broker_open_report *rep)
{
    struct pulse_broker *b = NULL;
    char err[256] = "";
    pulse_status_t st = pulse_broker_open(cfg, &b, rep, err, sizeof err);

    ck_assert_msg(st == PULSE_OK, "open: %s (%s)", pulse_status_name(st), err);
    return b;
}

struct pulse_broker *open_default(struct pulse_broker_open_report *rep)
{
    struct pulse_broker_config cfg;

    test_config(&cfg);
    return open_cfg(&cfg, rep);
}

void create_topic(struct pulse_broker *b, const char *name, int32_t parts)
{
    struct pulse_topic_spec spec = {name, parts, -1, -1, -1, -1, -1};
    char err[256] = "";
    pulse_status_t st = pulse_broker_topic_create(b, &spec, NULL, err, sizeof err);

    ck_assert_msg(st == PULSE_OK, "create %s: %s (%s)", name, pulse_status_name(st), err);
}

struct pulse_publish_record rec_kv(const char *key, const char *value, int32_t partition)
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

int64_t hw_of(struct pulse_broker *b, const char *topic, uint32_t p)
{
    struct pulse_topic_info *info = NULL;
    int64_t hw;

    ck_assert_int_eq(pulse_broker_topic_get(b, topic, true, &info), PULSE_OK);
    ck_assert_uint_lt(p, info->partitions);
    hw = info->stats[p].high_watermark;
    pulse_topic_info_free(info);
    return hw;
}

bool path_exists(const char *rel)
{
    char path[512];
    struct stat st;

    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    return stat(path, &st) == 0;
}

int count_entries(const char *rel)
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
size_t read_values(struct pulse_broker *b, const char *topic, uint32_t p, char values[][32], size_t max)
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

void async_done_fn(void *arg, pulse_status_t st)
{
    struct async_done *d = arg;

    pthread_mutex_lock(&d->mu);
    d->calls++;
    d->st = st;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

void async_init(struct async_done *d)
{
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    d->calls = 0;
    d->st = PULSE_OK;
}

void async_wait(struct async_done *d, int calls)
{
    pthread_mutex_lock(&d->mu);
    while (d->calls < calls)
        pthread_cond_wait(&d->cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

struct pulse_cursor cur(const char *topic, uint32_t p, int64_t off)
{
    struct pulse_cursor c;

    memset(&c, 0, sizeof c);
    snprintf(c.topic, sizeof c.topic, "%s", topic);
    c.partition = p;
    c.offset = off;
    return c;
}
