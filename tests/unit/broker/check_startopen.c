/* SPDX-License-Identifier: MIT */
/*
 * check_startopen.c - a start of many partitions opens them on the start
 * pool (opener.c) and behaves as one thread opening them in order did:
 * every partition of hundreds (small segments, several per partition)
 * serves every record after a clean stop and after a kill -9; a damaged
 * partition among them is recovered and reported while the others open
 * beside it; a partition that cannot be opened fails the start with the
 * error of the first such partition in (topic, partition) order, and the
 * start after it is repaired serves everything; the idempotency window
 * rebuilt on the pool answers retries across the restart. Run it under
 * TSan too (.ci/extra).
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/broker_int.h"
#include "broker/idem.h"
#include "broker/syncpool.h"
#include "brokertest.h"
#include "localtest.h"
#include "meta/meta.h"
#include "storage/batch.h"

/* Three topics, 320 partitions: the pool runs its 3 extra threads. */
#define NTOPICS 3
static const char *const topic_names[NTOPICS] = {"a", "b", "c"};
static const uint32_t topic_parts[NTOPICS] = {64, 128, 128};
#define ALL_PARTS 320u
/* Records per partition: a partition p with p % 4 == 0 gets MANY, which
 * with 1 KiB segments fills several segments. */
#define FEW 3
#define MANY 16

static void small_config(struct pulse_broker_config *cfg)
{
    test_config(cfg);
    cfg->segment_max_bytes = PULSE_PLOG_MIN_SEGMENT_BYTES;
    /* Thousands of small appends: not an fdatasync each (a kill -9 keeps
     * the page cache, which is what the crash test needs). */
    cfg->sync_mode = PULSE_SYNC_INTERVAL;
    cfg->sync_interval_ms = 1000;
}

static struct pulse_broker *open_small(struct pulse_broker_open_report *rep)
{
    struct pulse_broker_config cfg;

    small_config(&cfg);
    return open_cfg(&cfg, rep);
}

static int records_of(uint32_t p)
{
    return p % 4 == 0 ? MANY : FEW;
}

static void value_of(char *out, size_t len, int t, uint32_t p, int i)
{
    /* 30 bytes, so a few batches fill a 1 KiB segment. */
    char head[16];

    ck_assert_uint_ge(len, 31);
    snprintf(head, sizeof head, "%s/%03u/%02d/", topic_names[t % NTOPICS], p % 1000, i % 100);
    memset(out, '.', 30);
    memcpy(out, head, strlen(head));
    out[30] = '\0';
}

/* Publishes records_of(p) records to every partition, one batch each
 * round (every partition of a topic in one publish). */
static void fill_all(struct pulse_broker *b)
{
    static struct pulse_publish_record recs[256];
    static struct pulse_offset_pair offs[256];
    static char vals[256][32];
    char err[256];

    for (int t = 0; t < NTOPICS; t++) {
        create_topic(b, topic_names[t], (int32_t)topic_parts[t]);
        for (int i = 0; i < MANY; i++) {
            size_t n = 0;
            for (uint32_t p = 0; p < topic_parts[t]; p++) {
                if (i >= records_of(p))
                    continue;
                value_of(vals[n], sizeof vals[n], t, p, i);
                recs[n] = rec_kv(NULL, vals[n], (int32_t)p);
                n++;
            }
            ck_assert_msg(pulse_broker_publish_wait(b, topic_names[t], recs, n, offs, err, sizeof err) == PULSE_OK,
                          "publish: %s", err);
        }
    }
}

/* Every partition serves exactly its records (skip: one partition left
 * out, or NULL). */
static void check_all(struct pulse_broker *b, const char *skip_topic, uint32_t skip_p)
{
    char got[MANY + 1][32];
    char want[32];

    for (int t = 0; t < NTOPICS; t++) {
        for (uint32_t p = 0; p < topic_parts[t]; p++) {
            if (skip_topic != NULL && strcmp(skip_topic, topic_names[t]) == 0 && p == skip_p)
                continue;
            size_t n = read_values(b, topic_names[t], p, got, MANY + 1);
            ck_assert_msg(n == (size_t)records_of(p), "%s/%u: %zu records", topic_names[t], p, n);
            for (int i = 0; i < records_of(p); i++) {
                value_of(want, sizeof want, t, p, i);
                ck_assert_str_eq(got[i], want);
            }
        }
    }
}

static void part_path(char *out, size_t len, const char *topic, uint32_t p, const char *file)
{
    snprintf(out, len, "%s/topics/%s/%u%s%s", tmpdir, topic, p, file != NULL ? "/" : "", file != NULL ? file : "");
}

static int count_segments(const char *topic, uint32_t p)
{
    char rel[64];
    int n = 0;

    snprintf(rel, sizeof rel, "topics/%s/%u", topic, p);
    n = count_entries(rel);
    return n;
}

START_TEST(test_the_start_pool_has_a_thread_per_share_up_to_the_bound)
{
    struct pulse_meta_topic defs[3];
    struct pulse_syncpool *pool;

    memset(defs, 0, sizeof defs);
    defs[0].partitions = PULSE_BROKER_OPEN_SHARE - 1;
    ck_assert_ptr_null(pulse_broker_start_pool(defs, 1)); /* the caller alone */
    defs[1].partitions = 1;
    pool = pulse_broker_start_pool(defs, 2);
    ck_assert_ptr_nonnull(pool);
    ck_assert_uint_eq(pulse_syncpool_size(pool), 2);
    pulse_syncpool_close(pool);
    defs[0].partitions = defs[1].partitions = defs[2].partitions = 256;
    pool = pulse_broker_start_pool(defs, 3);
    ck_assert_uint_eq(pulse_syncpool_size(pool), PULSE_BROKER_OPENERS + 1);
    pulse_syncpool_close(pool);
}
END_TEST

START_TEST(test_hundreds_of_partitions_serve_every_record_after_a_clean_stop)
{
    struct pulse_broker_open_report rep;
    struct pulse_broker *b = open_small(NULL);

    fill_all(b);
    pulse_broker_close(b);
    /* Several segments in the partitions that got MANY records. */
    ck_assert_int_gt(count_segments("b", 8), 4);
    for (int round = 0; round < 2; round++) { /* the second start is of logs an idle run closed */
        b = open_small(&rep);
        ck_assert_uint_eq(rep.topics, NTOPICS);
        ck_assert_uint_eq(rep.partitions, ALL_PARTS);
        ck_assert_uint_eq(rep.repaired_partitions, 0);
        check_all(b, NULL, 0);
        pulse_broker_close(b);
    }
}
END_TEST

/* The byte offset of batch k of a segment file (walking its headers). */
static long batch_pos(const char *path, int k)
{
    uint8_t buf[4096];
    int fd = open(path, O_RDONLY);
    ssize_t len;
    long pos = 0;

    ck_assert_int_ge(fd, 0);
    len = read(fd, buf, sizeof buf);
    close(fd);
    for (int i = 0; i < k; i++) {
        struct pulse_batch_header hdr;
        ck_assert_int_eq(pulse_batch_parse_header(buf + pos, (size_t)(len - pos), &hdr), PULSE_OK);
        pos += (long)pulse_batch_total_size(&hdr);
    }
    return pos;
}

static void flip_byte(const char *path, long pos)
{
    int fd = open(path, O_RDWR);
    uint8_t c;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, &c, 1, pos), 1);
    c ^= 0x5a;
    ck_assert_int_eq(pwrite(fd, &c, 1, pos), 1);
    close(fd);
}

START_TEST(test_a_damaged_partition_among_hundreds_is_reported_and_the_rest_serve)
{
    struct pulse_broker_open_report rep;
    struct pulse_broker *b = open_small(NULL);
    char path[512];
    char got[MANY + 1][32];
    char want[32];
    int64_t off = 0;

    fill_all(b);
    pulse_broker_close(b);
    /* b/77 (FEW records, one segment): a byte in the records of its
     * second batch, and no snapshot, so recovery's full scan meets it. */
    part_path(path, sizeof path, "b", 77, "00000000000000000000.log");
    flip_byte(path, batch_pos(path, 1) + PULSE_BATCH_HEADER_SIZE + 6);
    part_path(path, sizeof path, "b", 77, "snapshot");
    ck_assert_int_eq(unlink(path), 0);

    b = open_small(&rep);
    ck_assert_uint_eq(rep.partitions, ALL_PARTS);
    ck_assert_uint_eq(rep.repaired_partitions, 1);
    check_all(b, "b", 77);
    /* b/77 serves offsets 0 and 2 and skips 1. */
    struct pulse_fetch *f = NULL;
    size_t n = 0;
    ck_assert_int_eq(pulse_broker_fetch_create(b, "b", 77, &f), PULSE_OK);
    while (off < FEW) {
        struct pulse_fetch_pos pos;
        struct pulse_record rec;
        uint64_t need = 0;
        ck_assert_int_eq(pulse_broker_fetch_read(b, f, off, 1 << 20, &pos, &need), PULSE_OK);
        while (pulse_broker_fetch_next(f, &rec) == PULSE_OK) {
            ck_assert_int_ne(rec.offset, 1);
            value_of(want, sizeof want, 1, 77, (int)rec.offset);
            ck_assert_int_eq(rec.value_len, 30);
            memcpy(got[n], rec.value, 30);
            got[n][30] = '\0';
            ck_assert_str_eq(got[n], want);
            n++;
        }
        ck_assert_int_gt(pos.next_offset, off);
        off = pos.next_offset;
    }
    pulse_broker_fetch_destroy(f);
    ck_assert_uint_eq(n, FEW - 1);
    pulse_broker_close(b);
}
END_TEST

/* Replaces the active segment of topic/p by a directory: its open fails
 * (EISDIR) and so does the partition's recovery. */
static void break_partition(const char *topic, uint32_t p, const char *aside)
{
    char path[512];

    part_path(path, sizeof path, topic, p, "00000000000000000000.log");
    ck_assert_int_eq(rename(path, aside), 0);
    ck_assert_int_eq(mkdir(path, 0755), 0);
}

static void repair_partition(const char *topic, uint32_t p, const char *aside)
{
    char path[512];

    part_path(path, sizeof path, topic, p, "00000000000000000000.log");
    ck_assert_int_eq(rmdir(path), 0);
    ck_assert_int_eq(rename(aside, path), 0);
}

/* The start of cfg fails with PULSE_IO and exactly the error want. */
static void start_fails(const struct pulse_broker_config *cfg, const char *want)
{
    struct pulse_broker *nb = NULL;
    char err[256] = "";

    ck_assert_int_eq(pulse_broker_open(cfg, &nb, NULL, err, sizeof err), PULSE_IO);
    ck_assert_ptr_null(nb);
    ck_assert_str_eq(err, want);
}

START_TEST(test_a_partition_that_cannot_open_fails_the_start_naming_the_first_in_order)
{
    struct pulse_broker_config cfg;
    struct pulse_broker_open_report rep;
    struct pulse_broker *b = open_small(NULL);
    char aside[512];

    fill_all(b);
    pulse_broker_close(b);
    /* The last partition of b and every partition of c: the threads meet
     * many failures after b's, and the answer must still be b's, as when
     * one thread opened them in order and stopped at the first. */
    snprintf(aside, sizeof aside, "%s/aside-b", tmpdir);
    break_partition("b", 127, aside);
    for (uint32_t p = 0; p < 128; p++) {
        snprintf(aside, sizeof aside, "%s/aside-c%u", tmpdir, p);
        break_partition("c", p, aside);
    }
    small_config(&cfg);
    for (int round = 0; round < 5; round++)
        start_fails(&cfg, "cannot open the logs of topic b: input/output error");
    snprintf(aside, sizeof aside, "%s/aside-b", tmpdir);
    repair_partition("b", 127, aside);
    start_fails(&cfg, "cannot open the logs of topic c: input/output error");
    for (uint32_t p = 0; p < 128; p++) {
        snprintf(aside, sizeof aside, "%s/aside-c%u", tmpdir, p);
        repair_partition("c", p, aside);
    }
    b = open_small(&rep);
    ck_assert_uint_eq(rep.partitions, ALL_PARTS);
    check_all(b, NULL, 0);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_hundreds_of_partitions_serve_every_record_after_a_kill_9)
{
    struct pulse_broker_open_report rep;
    int status = 0;
    pid_t pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* The child writes every partition (each publish acknowledged,
         * durable) and dies without closing anything. */
        struct pulse_broker *b = open_small(NULL);
        fill_all(b);
        raise(SIGKILL);
        _exit(3);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    struct pulse_broker *b = open_small(&rep);
    ck_assert_uint_eq(rep.topics, NTOPICS);
    ck_assert_uint_eq(rep.partitions, ALL_PARTS);
    check_all(b, NULL, 0);
    pulse_broker_close(b);
    /* And a clean start after that recovery. */
    b = open_small(&rep);
    ck_assert_uint_eq(rep.repaired_partitions, 0);
    check_all(b, NULL, 0);
    pulse_broker_close(b);
}
END_TEST

/* An idempotent publish, waited for. */
struct done {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool fired;
    pulse_status_t st;
};

static void on_done(void *arg, pulse_status_t st)
{
    struct done *d = arg;

    pthread_mutex_lock(&d->mu);
    d->st = st;
    d->fired = true;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static pulse_status_t publish_key(struct pulse_broker *b, const char *topic, const char *key,
                                  const struct pulse_publish_record *recs, size_t n, struct pulse_offset_pair *off,
                                  bool *dup)
{
    struct pulse_publish_idem idem = {key, strlen(key), false};
    struct done d = {.fired = false, .st = PULSE_OK};
    bool pending = false;
    char err[256] = "";
    pulse_status_t st;

    pthread_mutex_init(&d.mu, NULL);
    pthread_cond_init(&d.cv, NULL);
    st = pulse_broker_publish_idem(b, topic, recs, n, &idem, off, on_done, &d, &pending, err, sizeof err);
    if (st == PULSE_OK && pending) {
        pthread_mutex_lock(&d.mu);
        while (!d.fired)
            pthread_cond_wait(&d.cv, &d.mu);
        st = d.st;
        pthread_mutex_unlock(&d.mu);
    }
    ck_assert_msg(st == PULSE_OK, "publish with key %s: %s (%s)", key, pulse_status_name(st), err);
    pthread_cond_destroy(&d.cv);
    pthread_mutex_destroy(&d.mu);
    *dup = idem.duplicate;
    return st;
}

START_TEST(test_idempotency_keys_of_hundreds_of_partitions_answer_retries_after_a_restart)
{
    struct pulse_broker *b = open_small(NULL);
    struct pulse_publish_record recs[8];
    struct pulse_offset_pair first[NTOPICS][8], again[8];
    char vals[8][32];
    char key[32];
    size_t keys = 0;
    bool dup = false;

    fill_all(b);
    /* 16 keyed publishes to each topic, each over several partitions. */
    for (int t = 0; t < NTOPICS; t++) {
        for (int k = 0; k < 16; k++) {
            for (int i = 0; i < 8; i++) {
                snprintf(vals[i], sizeof vals[i], "key-%d-%d-%d", t, k, i);
                recs[i] = rec_kv(NULL, vals[i], (int32_t)((uint32_t)(k * 8 + i) % topic_parts[t]));
            }
            snprintf(key, sizeof key, "k-%d-%d", t, k);
            publish_key(b, topic_names[t], key, recs, 8, first[t], &dup);
            ck_assert(!dup);
            keys++;
        }
    }
    pulse_broker_close(b);
    b = open_small(NULL);
    ck_assert_uint_eq(pulse_broker_idem_count(pulse_local_of(b)->idem_window), keys);
    /* A retry of the last key of each topic answers the stored offsets. */
    for (int t = 0; t < NTOPICS; t++) {
        int k = 15;
        for (int i = 0; i < 8; i++) {
            snprintf(vals[i], sizeof vals[i], "key-%d-%d-%d", t, k, i);
            recs[i] = rec_kv(NULL, vals[i], (int32_t)((uint32_t)(k * 8 + i) % topic_parts[t]));
        }
        snprintf(key, sizeof key, "k-%d-%d", t, k);
        publish_key(b, topic_names[t], key, recs, 8, again, &dup);
        ck_assert(dup);
        for (int i = 0; i < 8; i++) {
            ck_assert_uint_eq(again[i].partition, first[t][i].partition);
            ck_assert_int_eq(again[i].offset, first[t][i].offset);
        }
    }
    pulse_broker_close(b);
}
END_TEST

static Suite *startopen_suite(void)
{
    Suite *s = suite_create("startopen");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_the_start_pool_has_a_thread_per_share_up_to_the_bound);
    tcase_add_test(tc, test_hundreds_of_partitions_serve_every_record_after_a_clean_stop);
    tcase_add_test(tc, test_a_damaged_partition_among_hundreds_is_reported_and_the_rest_serve);
    tcase_add_test(tc, test_a_partition_that_cannot_open_fails_the_start_naming_the_first_in_order);
    tcase_add_test(tc, test_hundreds_of_partitions_serve_every_record_after_a_kill_9);
    tcase_add_test(tc, test_idempotency_keys_of_hundreds_of_partitions_answer_retries_after_a_restart);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(startopen_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
