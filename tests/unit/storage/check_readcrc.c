/* SPDX-License-Identifier: MIT */
/*
 * check_readcrc.c - a large sequential read never returns a damaged batch.
 * A log of about 1 MiB (100 batches of 40 records) is closed, one byte of
 * a batch in the middle is damaged on disk (the snapshot open does not
 * read batch bodies, so the log does not know), and the log is read back
 * in large and in small steps: every read stops before the damaged batch,
 * the read after it steps over exactly that batch's offsets (reported as
 * a skipped damaged range), and every other record comes back intact.
 * The damage is a flipped bit (the CRC fails) at several places in the
 * batch, and a record length rewritten with a matching CRC (only the
 * record walk of the read's check can see that).
 */
#include "plogtest.h"

#include "common/crc32c.h"

#define NBATCH 100
#define PER_BATCH 40
#define VLEN 256
#define BAD 50 /* the damaged batch */

struct env {
    char *dir;
    char log_path[512];
    size_t batch_len; /* every batch has the same length */
    struct pulse_plog *plog;
};

static void env_build(struct env *e)
{
    struct pulse_plog_config cfg;
    struct pulse_buf b;
    int64_t base;

    memset(e, 0, sizeof *e);
    e->dir = pt_tmpdir();
    pt_cfg(&cfg, 1 << 24, 4096, NULL);
    cfg.sync_mode = PULSE_SYNC_INTERVAL;
    ck_assert_int_eq(pulse_plog_open(e->dir, &cfg, &e->plog, NULL), PULSE_OK);
    pulse_buf_init(&b, 1 << 20);
    for (int i = 0; i < NBATCH; i++) {
        e->batch_len = pt_batch(&b, (uint64_t)i * PER_BATCH, PER_BATCH, VLEN, 1000);
        ck_assert_int_eq(pulse_plog_append(e->plog, b.data, b.len, &base), PULSE_OK);
        ck_assert_int_eq(base, (int64_t)i * PER_BATCH);
    }
    pulse_buf_fini(&b);
    ck_assert_int_eq(pulse_plog_close(e->plog), PULSE_OK);
    e->plog = NULL;
    pt_path(e->log_path, sizeof e->log_path, e->dir, 0, "log");
    ck_assert_int_eq(pt_file_size(e->log_path), (long long)(NBATCH * e->batch_len));
}

static void env_open(struct env *e)
{
    struct pulse_plog_config cfg;
    struct pulse_plog_recovery rec;

    pt_cfg(&cfg, 1 << 24, 4096, NULL);
    ck_assert_int_eq(pulse_plog_open(e->dir, &cfg, &e->plog, &rec), PULSE_OK);
    /* The damage is unknown to the log: only a read can find it. */
    ck_assert(rec.used_snapshot);
    ck_assert_uint_eq(rec.damaged_ranges, 0);
}

static void env_free(struct env *e)
{
    (void)pulse_plog_close(e->plog);
    pt_cleanup(e->dir);
}

/* Flips one bit at byte at of the BAD batch. */
static void flip(struct env *e, size_t at)
{
    long long pos = (long long)(BAD * e->batch_len + at);
    uint8_t c;
    pt_read_file(e->log_path, pos, &c, 1);
    c ^= 0x10;
    pt_patch(e->log_path, pos, &c, 1);
}

/* Rewrites the length field of the BAD batch's record rec (one byte
 * shorter: the record then ends inside its own value) and puts a CRC over
 * the changed bytes, so that only the record walk sees the damage. */
static void bad_framing(struct env *e, unsigned rec)
{
    size_t len = e->batch_len;
    uint8_t *b = pulse_malloc(len);
    size_t pos = PULSE_BATCH_HEADER_SIZE;

    ck_assert_ptr_nonnull(b);
    pt_read_file(e->log_path, (long long)(BAD * len), b, len);
    for (unsigned i = 0; i < rec; i++)
        pos += 4 + pulse_get_be32(b + pos);
    pulse_put_be32(b + pos, pulse_get_be32(b + pos) - 1);
    pulse_put_be32(b + 4, pulse_crc32c(0, b + 8, len - 8));
    ck_assert_int_eq(pulse_batch_verify(b, len, NULL, NULL), PULSE_CORRUPT);
    pt_patch(e->log_path, (long long)(BAD * len), b, len);
    pulse_free(b);
}

/*
 * Reads the whole log in steps of max_bytes: no read may return a record
 * of the BAD batch, the read that reaches it must report exactly its
 * offsets as a skipped damaged range, and every other record must come
 * back once, intact, at its offset.
 */
static void read_around(struct env *e, uint64_t max_bytes)
{
    struct pulse_buf buf;
    struct pt_log l = {0};
    int64_t off = 0;
    int skipped = 0;
    const int64_t bad_from = BAD * PER_BATCH, bad_to = (BAD + 1) * PER_BATCH;

    pulse_buf_init(&buf, (size_t)1 << 30);
    for (int guard = 0; guard < 10 * NBATCH * PER_BATCH; guard++) {
        struct pulse_slice info;
        pulse_buf_reset(&buf);
        ck_assert_int_eq(pulse_plog_read(e->plog, off, max_bytes, &buf, &info), PULSE_OK);
        if (info.skip_to > info.skip_from) {
            ck_assert_int_eq(info.skip_from, bad_from);
            ck_assert_int_eq(info.skip_to, bad_to);
            ck_assert(info.skip_damaged);
            skipped++;
        }
        if (info.len == 0 && info.next_offset == off)
            break;
        ck_assert_uint_eq(info.len, buf.len);
        pt_decode(buf.data, buf.len, info.start_offset, &l);
        ck_assert_int_gt(info.next_offset, off);
        off = info.next_offset;
    }
    ck_assert_int_eq(off, NBATCH * PER_BATCH);
    ck_assert_int_eq(skipped, 1);
    ck_assert_uint_eq(l.n, (NBATCH - 1) * PER_BATCH);
    for (size_t i = 0; i < l.n; i++) {
        int64_t want = (int64_t)i < bad_from ? (int64_t)i : (int64_t)i + PER_BATCH;
        ck_assert_int_eq(l.offs[i], want);
        ck_assert_uint_eq(l.ids[i], (uint64_t)want);
    }
    pt_log_free(&l);
    pulse_buf_fini(&buf);
}

/* A 2 MiB read covers the whole log: it must end before the BAD batch. */
static void first_read_stops_before(struct env *e)
{
    struct pulse_buf buf;
    struct pulse_slice info;

    pulse_buf_init(&buf, (size_t)1 << 30);
    ck_assert_int_eq(pulse_plog_read(e->plog, 0, 2u << 20, &buf, &info), PULSE_OK);
    ck_assert_int_eq(info.next_offset, BAD * PER_BATCH);
    ck_assert_uint_eq(buf.len, BAD * e->batch_len);
    pulse_buf_fini(&buf);
}

static void flip_case(size_t at_of_len_num, size_t at_of_len_den, int at_delta, uint64_t max_bytes, bool big_first)
{
    struct env e;
    env_build(&e);
    size_t at = e.batch_len * at_of_len_num / at_of_len_den;
    at = (size_t)((long long)at + at_delta);
    flip(&e, at);
    env_open(&e);
    if (big_first)
        first_read_stops_before(&e);
    read_around(&e, max_bytes);
    env_free(&e);
}

START_TEST(test_a_flipped_record_byte_mid_batch_is_never_returned_by_a_large_read)
{
    flip_case(1, 2, 0, 1u << 20, true);
}
END_TEST

START_TEST(test_a_flipped_last_byte_of_a_batch_is_never_returned_by_a_large_read)
{
    flip_case(1, 1, -1, 1u << 20, true);
}
END_TEST

START_TEST(test_a_flipped_crc_byte_is_never_returned_by_a_large_read)
{
    flip_case(0, 1, 5, 1u << 20, true);
}
END_TEST

START_TEST(test_a_flipped_first_record_byte_is_never_returned_by_a_large_read)
{
    flip_case(0, 1, PULSE_BATCH_HEADER_SIZE + 2, 1u << 20, true);
}
END_TEST

START_TEST(test_reads_smaller_than_a_batch_never_return_the_damaged_one)
{
    /* max_bytes below one batch: each read takes one whole batch. */
    flip_case(1, 3, 0, 1000, false);
}
END_TEST

START_TEST(test_reads_ending_inside_the_damaged_batch_never_return_it)
{
    /* Steps of 3.5 batches: the damaged one straddles a step's end. */
    struct env e;
    env_build(&e);
    flip(&e, e.batch_len / 4);
    env_open(&e);
    read_around(&e, e.batch_len * 7 / 2);
    env_free(&e);
}
END_TEST

START_TEST(test_a_crc_valid_batch_with_bad_record_framing_is_never_returned)
{
    struct env e;
    env_build(&e);
    bad_framing(&e, PER_BATCH / 2);
    env_open(&e);
    first_read_stops_before(&e);
    read_around(&e, 1u << 20);
    env_free(&e);
}
END_TEST

static Suite *readcrc_suite(void)
{
    Suite *s = suite_create("readcrc");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_a_flipped_record_byte_mid_batch_is_never_returned_by_a_large_read);
    tcase_add_test(tc, test_a_flipped_last_byte_of_a_batch_is_never_returned_by_a_large_read);
    tcase_add_test(tc, test_a_flipped_crc_byte_is_never_returned_by_a_large_read);
    tcase_add_test(tc, test_a_flipped_first_record_byte_is_never_returned_by_a_large_read);
    tcase_add_test(tc, test_reads_smaller_than_a_batch_never_return_the_damaged_one);
    tcase_add_test(tc, test_reads_ending_inside_the_damaged_batch_never_return_it);
    tcase_add_test(tc, test_a_crc_valid_batch_with_bad_record_framing_is_never_returned);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(readcrc_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
