/* SPDX-License-Identifier: MIT */
/*
 * check_idem.c - the idempotent publish of the local backend (idem.h,
 * publish.c): replay of a key, 422 for other records under it, expiry and
 * the bound of the window, a concurrent twin queued behind the running
 * publish (run it under TSan too), deterministic routing of keyless
 * records, the key in the batches' producer fields, the window rebuilt
 * from them at open, and a publish cut between partitions completed by its
 * retry (in process after a full disk, and across a reopen).
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/broker_int.h"
#include "broker/idem.h"
#include "broker/syncpool.h"
#include "broker/idem.h"
#include "common/buf.h"
#include "common/log.h"
#include "brokertest.h"
#include "storage/batch.h"
#include "broker/maint.h"
#include "faultio.h"
#include "localtest.h"

/* Offsets compared field by field (the struct has padding). */
static void offsets_eq(const struct pulse_offset_pair *a, const struct pulse_offset_pair *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(a[i].partition, b[i].partition);
        ck_assert_int_eq(a[i].offset, b[i].offset);
    }
}

/* A publish's completion, waited for by the test thread. */
struct done {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool fired;
    pulse_status_t st;
};

static void done_init(struct done *d)
{
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    d->fired = false;
    d->st = PULSE_OK;
}

static void on_done(void *arg, pulse_status_t st)
{
    struct done *d = arg;
    pthread_mutex_lock(&d->mu);
    d->st = st;
    d->fired = true;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static pulse_status_t done_wait(struct done *d)
{
    pthread_mutex_lock(&d->mu);
    while (!d->fired)
        pthread_cond_wait(&d->cv, &d->mu);
    pulse_status_t st = d->st;
    pthread_mutex_unlock(&d->mu);
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    return st;
}

/* An idempotent publish waited for; *dup gets the duplicate flag. */
static pulse_status_t publish_key(struct pulse_broker *b, const char *topic, const char *key,
                                  const struct pulse_publish_record *recs, size_t n, struct pulse_offset_pair *off,
                                  bool *dup, char *err, size_t errlen)
{
    struct pulse_publish_idem idem = {key, strlen(key), false};
    struct done d;
    bool pending = false;

    done_init(&d);
    pulse_status_t st = pulse_broker_publish_idem(b, topic, recs, n, &idem, off, on_done, &d, &pending, err, errlen);
    if (st == PULSE_OK && pending) {
        st = done_wait(&d);
    } else {
        on_done(&d, st); /* no callback comes: release d */
        (void)done_wait(&d);
    }
    if (dup != NULL)
        *dup = idem.duplicate;
    return st;
}

START_TEST(test_replay_answers_the_first_offsets_and_stores_nothing)
{
    struct pulse_broker_config cfg;
    test_config(&cfg);
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 3);
    struct pulse_publish_record recs[3] = {rec_kv(NULL, "a", -1), rec_kv("k", "b", -1), rec_kv(NULL, "c", 2)};
    struct pulse_offset_pair first[3], again[3];
    char err[256] = "";
    bool dup = true;

    ck_assert_int_eq(publish_key(b, "t", "key-1", recs, 3, first, &dup, err, sizeof err), PULSE_OK);
    ck_assert(!dup);
    int64_t hws[3] = {hw_of(b, "t", 0), hw_of(b, "t", 1), hw_of(b, "t", 2)};
    ck_assert_int_eq(hws[0] + hws[1] + hws[2], 3);
    ck_assert_int_eq(publish_key(b, "t", "key-1", recs, 3, again, &dup, err, sizeof err), PULSE_OK);
    ck_assert(dup);
    offsets_eq(first, again, sizeof first / sizeof first[0]);
    for (uint32_t p = 0; p < 3; p++)
        ck_assert_int_eq(hw_of(b, "t", p), hws[p]);
    ck_assert_uint_eq(pulse_broker_idem_count(pulse_local_of(b)->idem_window), 1);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_other_records_under_a_key_are_refused_and_store_nothing)
{
    struct pulse_broker_config cfg;
    test_config(&cfg);
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 1);
    struct pulse_publish_record one = rec_kv(NULL, "one", -1), two = rec_kv(NULL, "two", -1);
    struct pulse_publish_record hdrd = rec_kv(NULL, "one", -1);
    struct pulse_header h = {(const uint8_t *)"h", 1, (const uint8_t *)"v", 1};
    struct pulse_offset_pair off[1];
    char err[256] = "";

    hdrd.headers = &h;
    hdrd.header_count = 1;
    ck_assert_int_eq(publish_key(b, "t", "k", &one, 1, off, NULL, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(publish_key(b, "t", "k", &two, 1, off, NULL, err, sizeof err), PULSE_KEY_REUSED);
    ck_assert_msg(strstr(err, "other records") != NULL, "message: %s", err);
    /* A header is part of the request too. */
    ck_assert_int_eq(publish_key(b, "t", "k", &hdrd, 1, off, NULL, err, sizeof err), PULSE_KEY_REUSED);
    ck_assert_int_eq(hw_of(b, "t", 0), 1);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_a_key_is_new_again_after_the_window)
{
    struct pulse_broker_config cfg;
    test_config(&cfg);
    cfg.idempotency_window_ms = 200;
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 1);
    struct pulse_publish_record r = rec_kv(NULL, "v", -1);
    struct pulse_offset_pair off[1];
    char err[256] = "";
    bool dup = false;

    ck_assert_int_eq(publish_key(b, "t", "k", &r, 1, off, &dup, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(publish_key(b, "t", "k", &r, 1, off, &dup, err, sizeof err), PULSE_OK);
    ck_assert(dup);
    usleep(300 * 1000);
    ck_assert_int_eq(publish_key(b, "t", "k", &r, 1, off, &dup, err, sizeof err), PULSE_OK);
    ck_assert(!dup);
    ck_assert_int_eq(off[0].offset, 1);
    ck_assert_int_eq(hw_of(b, "t", 0), 2);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_a_full_window_forgets_its_oldest_key)
{
    struct pulse_broker_config cfg;
    test_config(&cfg);
    cfg.idempotency_max_keys = 2;
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 1);
    struct pulse_publish_record r = rec_kv(NULL, "v", -1);
    struct pulse_offset_pair off[1];
    char err[256] = "";
    bool dup = false;
    struct pulse_broker_idem *w = pulse_local_of(b)->idem_window;

    ck_assert_int_eq(publish_key(b, "t", "a", &r, 1, off, &dup, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(publish_key(b, "t", "b", &r, 1, off, &dup, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(publish_key(b, "t", "c", &r, 1, off, &dup, err, sizeof err), PULSE_OK);
    ck_assert_uint_eq(pulse_broker_idem_count(w), 2);
    ck_assert_int_eq(publish_key(b, "t", "b", &r, 1, off, &dup, err, sizeof err), PULSE_OK);
    ck_assert(dup);
    ck_assert_int_eq(publish_key(b, "t", "a", &r, 1, off, &dup, err, sizeof err), PULSE_OK);
    ck_assert(!dup); /* forgotten, stored again */
    ck_assert_int_eq(hw_of(b, "t", 0), 4);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_a_concurrent_twin_waits_for_the_running_publish)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 2);
    /* Each sync takes 300 ms: the first publish is still running when its
     * twin comes. */
    faultio_set_sync_delay_us(fio, 300 * 1000);
    struct pulse_publish_record recs[2] = {rec_kv(NULL, "x", 0), rec_kv(NULL, "y", 1)};
    struct pulse_publish_record other = rec_kv(NULL, "z", 0);
    struct pulse_offset_pair o1[2], o2[2], o3[1];
    struct pulse_publish_idem i1 = {"k", 1, false}, i2 = {"k", 1, false}, i3 = {"k", 1, false};
    char e1[256] = "", e2[256] = "", e3[256] = "";
    struct done d1, d2;
    bool p1 = false, p2 = false, p3 = false;

    done_init(&d1);
    done_init(&d2);
    ck_assert_int_eq(pulse_broker_publish_idem(b, "t", recs, 2, &i1, o1, on_done, &d1, &p1, e1, sizeof e1), PULSE_OK);
    ck_assert(p1);
    ck_assert_int_eq(pulse_broker_publish_idem(b, "t", recs, 2, &i2, o2, on_done, &d2, &p2, e2, sizeof e2), PULSE_OK);
    ck_assert(p2); /* queued, not answered from a half-done publish */
    ck_assert_int_eq(pulse_broker_publish_idem(b, "t", &other, 1, &i3, o3, on_done, &d1, &p3, e3, sizeof e3),
                     PULSE_KEY_REUSED);
    ck_assert_int_eq(done_wait(&d1), PULSE_OK);
    ck_assert_int_eq(done_wait(&d2), PULSE_OK);
    ck_assert(!i1.duplicate);
    ck_assert(i2.duplicate);
    offsets_eq(o1, o2, sizeof o1 / sizeof o1[0]);
    faultio_set_sync_delay_us(fio, 0);
    ck_assert_int_eq(hw_of(b, "t", 0) + hw_of(b, "t", 1), 2);
    pulse_broker_close(b);
    faultio_destroy(fio);
}
END_TEST

START_TEST(test_keyless_records_are_routed_from_the_key)
{
    struct pulse_broker_config cfg;
    test_config(&cfg);
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 8);
    struct pulse_publish_record recs[3] = {rec_kv(NULL, "a", -1), rec_kv(NULL, "b", -1), rec_kv("rk", "c", -1)};
    struct pulse_offset_pair off[3];
    char err[256] = "";
    char key[32];

    for (int i = 0; i < 16; i++) {
        snprintf(key, sizeof key, "route-%d", i);
        uint32_t want = pulse_broker_key_partition((const uint8_t *)key, strlen(key), 8);
        ck_assert_int_eq(publish_key(b, "t", key, recs, 3, off, NULL, err, sizeof err), PULSE_OK);
        ck_assert_uint_eq(off[0].partition, want);
        ck_assert_uint_eq(off[1].partition, want);
        /* A keyed record still follows its own key. */
        ck_assert_uint_eq(off[2].partition, pulse_broker_key_partition((const uint8_t *)"rk", 2, 8));
    }
    pulse_broker_close(b);
}
END_TEST

/* The header of the first batch at offset in partition p. */
static struct pulse_batch_header first_header(struct pulse_broker *b, uint32_t p, int64_t offset)
{
    struct pulse_buf buf;
    struct pulse_batch_header hdr;

    pulse_buf_init(&buf, 1 << 20);
    ck_assert_int_eq(log_read(b, "t", p, offset, 4096, &buf, NULL), PULSE_OK);
    ck_assert_int_eq(pulse_batch_parse_header(buf.data, buf.len, &hdr), PULSE_OK);
    pulse_buf_fini(&buf);
    return hdr;
}

START_TEST(test_batches_carry_the_key_in_their_producer_fields)
{
    struct pulse_broker_config cfg;
    test_config(&cfg);
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 1);
    struct pulse_publish_record r = rec_kv(NULL, "v", -1);
    struct pulse_offset_pair off[1];
    char err[256] = "";

    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &r, 1, off, err, sizeof err), PULSE_OK);
    ck_assert_int_eq(publish_key(b, "t", "the-key", &r, 1, off, NULL, err, sizeof err), PULSE_OK);
    struct pulse_batch_header plain = first_header(b, 0, 0), idem = first_header(b, 0, 1);
    ck_assert_uint_eq(plain.producer_id, 0);
    ck_assert_uint_eq(plain.producer_epoch, 0);
    ck_assert_int_eq(plain.base_sequence, 0);
    uint64_t kh = pulse_broker_idem_key_hash("the-key", 7);
    ck_assert_uint_eq(idem.producer_id, (uint32_t)(kh >> 32));
    ck_assert_uint_eq(idem.producer_epoch, (uint32_t)kh);
    ck_assert_int_gt(idem.base_sequence, 0);
    pulse_broker_close(b);
}
END_TEST

START_TEST(test_the_window_is_rebuilt_from_the_log_at_open)
{
    struct pulse_broker_config cfg;
    test_config(&cfg);
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 3);
    struct pulse_publish_record recs[4] = {rec_kv(NULL, "a", 0), rec_kv(NULL, "b", 1), rec_kv(NULL, "c", 1),
                                           rec_kv("k", "d", -1)};
    struct pulse_publish_record other = rec_kv(NULL, "z", 0);
    struct pulse_offset_pair first[4], again[4];
    char err[256] = "";
    bool dup = false;

    ck_assert_int_eq(publish_key(b, "t", "survivor", recs, 4, first, NULL, err, sizeof err), PULSE_OK);
    pulse_broker_close(b);
    b = open_cfg(&cfg, NULL);
    ck_assert_uint_eq(pulse_broker_idem_count(pulse_local_of(b)->idem_window), 1);
    ck_assert_int_eq(publish_key(b, "t", "survivor", &other, 1, again, NULL, err, sizeof err), PULSE_KEY_REUSED);
    ck_assert_int_eq(publish_key(b, "t", "survivor", recs, 4, again, &dup, err, sizeof err), PULSE_OK);
    ck_assert(dup);
    offsets_eq(first, again, sizeof first / sizeof first[0]);
    ck_assert_int_eq(hw_of(b, "t", 0) + hw_of(b, "t", 1) + hw_of(b, "t", 2), 4);
    pulse_broker_close(b);
}
END_TEST

/* The rebuild holds the headers it reads within a budget: a partition
 * whose headers do not fit gives back all the room it took (the growth it
 * was refused included) and is read again in its turn; one that fits
 * holds its room until it is remembered. Topic "a" has 20 keyed batches
 * (its table would grow from 16 to 32 headers, past a budget of 16),
 * "b" 5 (8 headers): only "a" may be read twice, and nothing stays
 * counted at the end. On one thread, in order. */
START_TEST(test_the_rebuild_returns_the_room_of_a_partition_over_its_budget)
{
    struct pulse_broker_config cfg;
    test_config(&cfg);
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    struct pulse_syncpool *one = NULL;
    struct pulse_idem_rebuild_stats stats;
    char err[256] = "", key[32];
    struct pulse_offset_pair off[1];

    create_topic(b, "a", 1);
    create_topic(b, "b", 1);
    for (int i = 0; i < 25; i++) {
        struct pulse_publish_record r = rec_kv(NULL, "v", 0);
        snprintf(key, sizeof key, "k%d", i);
        ck_assert_int_eq(publish_key(b, i < 20 ? "a" : "b", key, &r, 1, off, NULL, err, sizeof err), PULSE_OK);
    }
    struct pulse_local *local = pulse_local_of(b);
    ck_assert_uint_eq(pulse_broker_idem_count(local->idem_window), 25);
    ck_assert_int_eq(pulse_syncpool_open(1, &one), PULSE_OK);
    ck_assert_int_eq(pulse_broker_idem_rebuild_within(local, one, 16, &stats), PULSE_OK);
    ck_assert_uint_eq(stats.read_again, 1);
    ck_assert_uint_eq(stats.held_after, 0);
    ck_assert_uint_eq(pulse_broker_idem_count(local->idem_window), 25);
    pulse_syncpool_close(one);
    pulse_broker_close(b);
}
END_TEST

/* Publishes 6 records over 3 partitions with partition 1's append failing
 * for lack of space; returns the offsets it reported. */
static void publish_cut_at_partition_1(struct pulse_broker *b, struct faultio *fio, struct pulse_publish_record *recs,
                                       struct pulse_offset_pair *off)
{
    char err[256] = "";
    struct pulse_publish_record warm = rec_kv(NULL, "warm", 2);
    struct pulse_offset_pair w[1];

    /* Every partition written once (its first write opens files), then
     * how many pwrites one append takes. */
    for (int32_t p = 0; p < 3; p++) {
        struct pulse_publish_record r = rec_kv(NULL, "warm", p);
        ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &r, 1, w, err, sizeof err), PULSE_OK);
    }
    unsigned long per_append = ~0ul;
    for (int i = 0; i < 3; i++) {
        unsigned long before = faultio_count(fio, FAULTIO_PWRITE);
        ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &warm, 1, w, err, sizeof err), PULSE_OK);
        unsigned long took = faultio_count(fio, FAULTIO_PWRITE) - before;
        per_append = took < per_append ? took : per_append;
    }
    for (int i = 0; i < 6; i++)
        recs[i] = rec_kv(NULL, i < 3 ? "first" : "second", i % 3);
    faultio_fail_nth(fio, FAULTIO_PWRITE, per_append + 1, ENOSPC);
    ck_assert_int_eq(publish_key(b, "t", "cut", recs, 6, off, NULL, err, sizeof err), PULSE_NOSPACE);
    ck_assert_msg(strstr(err, "partitions 0 (offsets 1-2)") != NULL, "message: %s", err);
    ck_assert_int_eq(off[0].offset, 1);
    ck_assert_msg(off[1].offset == -1, "message: %s", err);
}

START_TEST(test_a_publish_cut_between_partitions_is_completed_by_its_retry)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    cfg.checkpoint_interval_ms = 3600 * 1000; /* no snapshot writes among the counted ones */
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 3);
    struct pulse_publish_record recs[6];
    struct pulse_offset_pair cut[6], off[6];
    char err[256] = "";
    bool dup = true;

    publish_cut_at_partition_1(b, fio, recs, cut);
    /* Space is back: the retry appends partitions 1 and 2 only. */
    ck_assert_int_eq(publish_key(b, "t", "cut", recs, 6, off, &dup, err, sizeof err), PULSE_OK);
    ck_assert(!dup);
    for (int i = 0; i < 6; i++)
        ck_assert_uint_eq(off[i].partition, (uint32_t)(i % 3));
    ck_assert_int_eq(off[0].offset, cut[0].offset);
    ck_assert_int_eq(off[3].offset, cut[3].offset);
    ck_assert_int_eq(hw_of(b, "t", 0), 3); /* one warm-up record, then two */
    ck_assert_int_eq(hw_of(b, "t", 1), 3);
    ck_assert_int_eq(hw_of(b, "t", 2), 6); /* three warm-up records, then two */
    struct pulse_offset_pair again[6];
    ck_assert_int_eq(publish_key(b, "t", "cut", recs, 6, again, &dup, err, sizeof err), PULSE_OK);
    ck_assert(dup);
    offsets_eq(off, again, sizeof off / sizeof off[0]);
    pulse_broker_close(b);
    faultio_destroy(fio);
}
END_TEST

START_TEST(test_a_publish_cut_between_partitions_is_completed_after_a_reopen)
{
    struct faultio *fio = faultio_create();
    struct pulse_broker_config cfg;
    test_config(&cfg);
    cfg.io = faultio_io(fio);
    cfg.checkpoint_interval_ms = 3600 * 1000; /* no snapshot writes among the counted ones */
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    create_topic(b, "t", 3);
    struct pulse_publish_record recs[6];
    struct pulse_offset_pair cut[6], off[6];
    char err[256] = "";
    bool dup = true;

    publish_cut_at_partition_1(b, fio, recs, cut);
    pulse_broker_close(b);
    faultio_destroy(fio);
    cfg.io = NULL;
    b = open_cfg(&cfg, NULL);
    ck_assert_int_eq(publish_key(b, "t", "cut", recs, 6, off, &dup, err, sizeof err), PULSE_OK);
    ck_assert(!dup);
    ck_assert_int_eq(off[0].offset, cut[0].offset);
    ck_assert_int_eq(hw_of(b, "t", 0), 3);
    ck_assert_int_eq(hw_of(b, "t", 1), 3);
    /* Another share size under the key cannot be completed exactly. */
    struct pulse_publish_record fewer[3] = {recs[0], recs[1], recs[2]};
    pulse_broker_close(b);
    b = open_cfg(&cfg, NULL);
    ck_assert_int_eq(publish_key(b, "t", "cut", recs, 6, off, &dup, err, sizeof err), PULSE_OK);
    ck_assert(dup);
    ck_assert_int_eq(publish_key(b, "t", "cut", fewer, 3, off, &dup, err, sizeof err), PULSE_KEY_REUSED);
    pulse_broker_close(b);
}
END_TEST

/* Compaction rewrites sealed batches without the producer fields (a
 * compacted batch mixes many publishes): the running window is not
 * affected, and after a reopen a compacted publish's key is forgotten
 * while the active segment's keys are remembered (docs/Format.md 1.7). */
START_TEST(test_compaction_drops_the_producer_fields_of_what_it_rewrites)
{
    struct pulse_broker_config cfg;
    test_config(&cfg);
    cfg.compaction_tombstone_retention_ms = 0;
    cfg.compaction_min_gain_ratio = 0.0;
    struct pulse_broker *b = open_cfg(&cfg, NULL);
    struct pulse_topic_spec spec = {.name = "t",
                                    .partitions = 1,
                                    .cleanup = PULSE_CLEANUP_COMPACT,
                                    .retention_ms = 0,
                                    .retention_bytes = 0,
                                    .segment_bytes = 1024};
    char err[256] = "", key[16], rkey[16], val[300];
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_OK);
    struct pulse_offset_pair off[1];
    struct pulse_publish_record r;
    bool dup = false;

    memset(val, 'v', sizeof val - 1);
    val[sizeof val - 1] = '\0';
    for (int i = 0; i < 30; i++) {
        /* Every third record has a key of its own and survives; the
         * others share one key and only the newest survives. */
        snprintf(key, sizeof key, "p-%d", i);
        snprintf(rkey, sizeof rkey, "u-%d", i);
        r = rec_kv(i % 3 == 0 ? rkey : "same", val, -1);
        ck_assert_int_eq(publish_key(b, "t", key, &r, 1, off, NULL, err, sizeof err), PULSE_OK);
        ck_assert_int_eq(off[0].offset, i);
    }
    for (int pass = 0; pass < 20; pass++)
        pulse_broker_maint_compaction_pass(pulse_local_of(b)->maint);
    /* The records kept are intact; the rewritten batch lost its fields. */
    ck_assert_int_eq(hw_of(b, "t", 0), 30);
    struct pulse_batch_header first = first_header(b, 0, 0);
    ck_assert_int_eq(first.base_offset, 0);
    ck_assert_uint_ne(first.flags & PULSE_BATCH_FLAG_SPARSE, 0);
    ck_assert_uint_eq(first.producer_id, 0);
    ck_assert_uint_eq(first.producer_epoch, 0);
    ck_assert_int_eq(first.base_sequence, 0);
    /* Before a restart the window answers from memory. */
    r = rec_kv("u-0", val, -1);
    ck_assert_int_eq(publish_key(b, "t", "p-0", &r, 1, off, &dup, err, sizeof err), PULSE_OK);
    ck_assert(dup);
    ck_assert_int_eq(off[0].offset, 0);
    pulse_broker_close(b);
    b = open_cfg(&cfg, NULL);
    /* The active segment's batch still has its fields... */
    r = rec_kv("same", val, -1);
    ck_assert_int_eq(publish_key(b, "t", "p-29", &r, 1, off, &dup, err, sizeof err), PULSE_OK);
    ck_assert(dup);
    ck_assert_int_eq(off[0].offset, 29);
    /* ...a compacted one does not: its retry is a new publish (the
     * documented limit on compacted topics). */
    r = rec_kv("u-3", val, -1);
    ck_assert_int_eq(publish_key(b, "t", "p-3", &r, 1, off, &dup, err, sizeof err), PULSE_OK);
    ck_assert(!dup);
    ck_assert_int_eq(off[0].offset, 30);
    pulse_broker_close(b);
}
END_TEST

static Suite *idem_suite(void)
{
    Suite *s = suite_create("idem");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_replay_answers_the_first_offsets_and_stores_nothing);
    tcase_add_test(tc, test_other_records_under_a_key_are_refused_and_store_nothing);
    tcase_add_test(tc, test_a_key_is_new_again_after_the_window);
    tcase_add_test(tc, test_a_full_window_forgets_its_oldest_key);
    tcase_add_test(tc, test_a_concurrent_twin_waits_for_the_running_publish);
    tcase_add_test(tc, test_keyless_records_are_routed_from_the_key);
    tcase_add_test(tc, test_batches_carry_the_key_in_their_producer_fields);
    tcase_add_test(tc, test_the_window_is_rebuilt_from_the_log_at_open);
    tcase_add_test(tc, test_a_publish_cut_between_partitions_is_completed_by_its_retry);
    tcase_add_test(tc, test_a_publish_cut_between_partitions_is_completed_after_a_reopen);
    tcase_add_test(tc, test_the_rebuild_returns_the_room_of_a_partition_over_its_budget);
    tcase_add_test(tc, test_compaction_drops_the_producer_fields_of_what_it_rewrites);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(idem_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
