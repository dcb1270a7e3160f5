/* SPDX-License-Identifier: MIT */
/*
 * broker_fetch.c - part of check_broker: fetch through the seam (records,
 * probes, raw slices), long-poll waiters, and what drain and delete answer
 * the waiters they find.
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

/* A compressed topic's batches are inflated once per fetch: the read's
 * verification keeps what it inflated, and the walks (the JSON answer's
 * plan and its stream after a rewind) read that instead of inflating each
 * batch again. The records are the same either way. */
START_TEST(test_a_fetch_of_a_compressed_topic_inflates_each_batch_once)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_topic_spec spec = {"z", 1, -1, -1, -1, -1, PULSE_COMPRESSION_ZLIB};
    char err[256] = "";
    char vals[9][300];
    struct pulse_fetch *f = NULL;
    struct pulse_fetch_pos pos;
    struct pulse_record rec;
    uint64_t need = 0;

    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_OK);
    for (int batch = 0; batch < 3; batch++) {
        struct pulse_publish_record recs[3];
        struct pulse_offset_pair offs[3];
        for (int i = 0; i < 3; i++) {
            int k = batch * 3 + i;
            memset(vals[k], 'a' + k, sizeof vals[k] - 1);
            vals[k][sizeof vals[k] - 1] = '\0';
            recs[i] = rec_kv(NULL, vals[k], 0);
        }
        ck_assert_int_eq(pulse_broker_publish_wait(b, "z", recs, 3, offs, err, sizeof err), PULSE_OK);
    }
    unsigned long before = pulse_batch_inflate_count();
    ck_assert_int_eq(pulse_broker_fetch_create(b, "z", 0, &f), PULSE_OK);
    ck_assert_int_eq(pulse_broker_fetch_read(b, f, 0, 1 << 20, &pos, &need), PULSE_OK);
    ck_assert_int_eq(pos.next_offset, 9);
    ck_assert_uint_lt(pos.bytes, 9 * 299); /* stored compressed */
    ck_assert_uint_gt(pos.plain_bytes, 9 * 299);
    for (int walk = 0; walk < 2; walk++) {
        for (int64_t o = 0; o < 9; o++) {
            ck_assert_int_eq(pulse_broker_fetch_next(f, &rec), PULSE_OK);
            ck_assert_int_eq(rec.offset, o);
            ck_assert(rec.value_len == 299 && memcmp(rec.value, vals[o], 299) == 0);
        }
        ck_assert_int_eq(pulse_broker_fetch_next(f, &rec), PULSE_EOF);
        pulse_broker_fetch_rewind(f);
    }
    /* Three batches, three inflates (the verification's), whatever the
     * number of walks. */
    ck_assert_uint_eq(pulse_batch_inflate_count() - before, 3);
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

TCase *broker_fetch_tcase(void)
{
    TCase *tc = tcase_create("fetch");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);

    tcase_add_test(tc, test_fetch_gives_records_from_the_offset_across_reads_and_again_after_rewind);
    tcase_add_test(tc, test_a_fetch_does_not_hold_its_topic);
    tcase_add_test(tc, test_a_fetch_of_a_compressed_topic_inflates_each_batch_once);
    tcase_add_test(tc, test_probe_and_raw_slice_give_positions_and_the_stored_batches);
    tcase_add_test(tc, test_a_backend_without_raw_slices_answers_not_supported);
    tcase_add_test(tc, test_long_poll_waiter_wakes_on_publish_and_on_deadline);
    tcase_add_test(tc, test_drain_answers_waiters_with_shutdown_and_refuses_new_work);
    tcase_add_test(tc, test_delete_answers_parked_waiters_with_topic_not_found);
    return tc;
}
