/* SPDX-License-Identifier: MIT */
/*
 * broker_publish.c - part of check_broker: the publish path (one batch per
 * partition, validation before writing, durability before the answer),
 * asynchronous completion, interval sync mode, many publisher and cursor
 * threads at once (run it under TSan too), shared fdatasyncs, the epoch rule
 * across a fence and a reopen, and the syncer's durable-end checkpoint.
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
#include "brokertest.h"

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
    cfg.sync_inline = false; /* the stage is the syncer's pass over both partitions */
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

TCase *broker_publish_tcase(void)
{
    TCase *tc = tcase_create("publish");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, test_publish_gives_contiguous_offsets_in_request_order);
    tcase_add_test(tc, test_keyless_publish_goes_to_one_partition_round_robin);
    tcase_add_test(tc, test_refused_publish_writes_nothing);
    tcase_add_test(tc, test_timestamps_too_far_apart_for_one_batch_get_adjacent_batches);
    tcase_add_test(tc, test_published_records_survive_reopen_with_timestamps);
    tcase_add_test(tc, test_async_publish_completes_once_when_durable);
    tcase_add_test(tc, test_interval_mode_answers_at_once_and_data_appears_after_sync);
    tcase_add_test(tc, test_concurrent_publishers_and_cursor_writers_lose_nothing);
    tcase_add_test(tc, test_concurrent_publishes_share_fdatasyncs);
    tcase_add_test(tc, test_drain_lets_written_publishes_reach_durability);
    tcase_add_test(tc, test_publish_durable_before_a_reopen_succeeds_and_one_it_discarded_fails);
    tcase_add_test(tc, test_syncer_checkpoint_keeps_the_offsets_of_a_damaged_acknowledged_tail);
    return tc;
}
