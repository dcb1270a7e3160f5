/* SPDX-License-Identifier: MIT */
/*
 * check_readcost.c - what a read and a raw slice cost the file system,
 * counted by the faulty io (faultio_read_counts), next to what they
 * return.
 *
 * A raw slice (pulse_plog_slice, what a raw fetch sends) finds its end by
 * the index rather than by reading the header of every batch it holds, so
 * a slice of a hundred batches costs a few header reads; it still ends
 * exactly where the walk over every header would end, and never past
 * damage the log knows. A read (pulse_plog_read) reads its slice and the
 * header of the batch after it, not half a batch past its end. Both are
 * checked on a log of batches larger than the index interval (an entry
 * per batch) and on one of batches much smaller than it (an entry every
 * dozen batches).
 */
#include "plogtest.h"

#include "faultio.h"

#define INTERVAL 4096

struct env {
    char *dir;
    struct faultio *fio;
    struct pulse_plog *plog;
    uint32_t nbatch;
    uint32_t per_batch;
    size_t batch_len; /* every batch has the same length */
};

/* A log of nbatch batches of per_batch records of vlen bytes, durable. */
static void env_build(struct env *e, uint32_t nbatch, uint32_t per_batch, size_t vlen)
{
    struct pulse_plog_config cfg;
    struct pulse_buf b;
    int64_t base;

    memset(e, 0, sizeof *e);
    e->dir = pt_tmpdir();
    e->fio = faultio_create();
    ck_assert_ptr_nonnull(e->fio);
    e->nbatch = nbatch;
    e->per_batch = per_batch;
    pt_cfg(&cfg, 1 << 28, INTERVAL, faultio_io(e->fio));
    cfg.sync_mode = PULSE_SYNC_INTERVAL;
    ck_assert_int_eq(pulse_plog_open(e->dir, &cfg, &e->plog, NULL), PULSE_OK);
    pulse_buf_init(&b, 1 << 20);
    for (uint32_t i = 0; i < nbatch; i++) {
        e->batch_len = pt_batch(&b, (uint64_t)i * per_batch, per_batch, vlen, 1000);
        ck_assert_int_eq(pulse_plog_append(e->plog, b.data, b.len, &base), PULSE_OK);
    }
    pulse_buf_fini(&b);
    ck_assert_int_eq(pulse_plog_sync(e->plog), PULSE_OK);
}

static void env_free(struct env *e)
{
    (void)pulse_plog_close(e->plog);
    faultio_destroy(e->fio);
    pt_cleanup(e->dir);
}

/* The slice the rule gives on this log: from the batch holding offset,
 * as many whole batches as max_bytes holds (at least one), never past
 * the batch before stop (the first batch not to serve). */
static void expected(const struct env *e, int64_t offset, uint64_t max_bytes, uint32_t stop, uint64_t *pos,
                     uint64_t *len, int64_t *next)
{
    uint32_t first = (uint32_t)(offset / e->per_batch);
    uint64_t n = max_bytes / e->batch_len;

    if (n == 0)
        n = 1;
    if (n > stop - first)
        n = stop - first;
    *pos = (uint64_t)first * e->batch_len;
    *len = n * e->batch_len;
    *next = (int64_t)(first + n) * e->per_batch;
}

/* A raw slice at offset: checks it against the rule and returns how many
 * preads it took. */
static unsigned long slice_case(struct env *e, int64_t offset, uint64_t max_bytes, uint32_t stop)
{
    struct pulse_slice s;
    uint64_t pos, len;
    int64_t next;
    unsigned long c0, c1;
    unsigned long long b0, b1;

    expected(e, offset, max_bytes, stop, &pos, &len, &next);
    faultio_read_counts(e->fio, &c0, &b0);
    ck_assert_int_eq(pulse_plog_slice(e->plog, offset, max_bytes, false, &s), PULSE_OK);
    faultio_read_counts(e->fio, &c1, &b1);
    ck_assert_uint_eq(s.pos, pos);
    ck_assert_uint_eq(s.len, len);
    ck_assert_int_eq(s.next_offset, next);
    ck_assert_int_eq(s.start_offset, offset);
    return c1 - c0;
}

/* A read at offset: checks what it returned (records and positions) and
 * returns how many bytes it read beyond them. */
static unsigned long long read_case(struct env *e, int64_t offset, uint64_t max_bytes)
{
    struct pulse_buf buf;
    struct pulse_slice info;
    struct pt_log l = {0};
    uint64_t pos, len;
    int64_t next;
    unsigned long c0, c1;
    unsigned long long b0, b1;

    expected(e, offset, max_bytes, e->nbatch, &pos, &len, &next);
    pulse_buf_init(&buf, (size_t)1 << 30);
    faultio_read_counts(e->fio, &c0, &b0);
    ck_assert_int_eq(pulse_plog_read(e->plog, offset, max_bytes, &buf, &info), PULSE_OK);
    faultio_read_counts(e->fio, &c1, &b1);
    ck_assert_uint_eq(info.len, len);
    ck_assert_uint_eq(buf.len, len);
    ck_assert_int_eq(info.next_offset, next);
    pt_decode(buf.data, buf.len, offset, &l);
    ck_assert_uint_eq(l.n, (size_t)(next - offset));
    for (size_t i = 0; i < l.n; i++) {
        ck_assert_int_eq(l.offs[i], offset + (int64_t)i);
        ck_assert_uint_eq(l.ids[i], (uint64_t)(offset + (int64_t)i));
    }
    pt_log_free(&l);
    pulse_buf_fini(&buf);
    ck_assert_uint_ge(b1 - b0, len);
    return b1 - b0 - len;
}

static const uint64_t max_cases[] = {1, 20000, 100000, 1u << 20, 64u << 20};

START_TEST(test_a_raw_slice_of_many_batches_reads_a_few_headers)
{
    /* 200 batches of about 10.4 KB: an index entry each. */
    struct env e;
    env_build(&e, 200, 10, 1000);
    ck_assert_uint_gt(e.batch_len, INTERVAL);
    const int64_t offsets[] = {0, 5, 500, 1234, 1990};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++)
        for (size_t m = 0; m < sizeof max_cases / sizeof max_cases[0]; m++) {
            unsigned long preads = slice_case(&e, offsets[i], max_cases[m], e.nbatch);
            /* The first batch's header, the header at the index entry
             * the walk goes on from, the one after it. */
            ck_assert_uint_le(preads, 3);
        }
    env_free(&e);
}
END_TEST

START_TEST(test_a_raw_slice_of_small_batches_reads_the_headers_of_three_index_intervals_at_most)
{
    /* 3000 batches of about 130 bytes: an index entry every 32 or so. */
    struct env e;
    env_build(&e, 3000, 1, 64);
    ck_assert_uint_lt(e.batch_len * 8, INTERVAL);
    unsigned long per_interval = INTERVAL / e.batch_len + 1;
    const int64_t offsets[] = {0, 7, 1500, 2990};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++)
        for (size_t m = 0; m < sizeof max_cases / sizeof max_cases[0]; m++) {
            unsigned long preads = slice_case(&e, offsets[i], max_cases[m], e.nbatch);
            /* From the index entry before offset to its batch, then
             * from the entry before the last one within max_bytes on. */
            ck_assert_uint_le(preads, 3 * per_interval + 3);
        }
    env_free(&e);
}
END_TEST

START_TEST(test_a_raw_slice_never_steps_over_known_damage)
{
    struct env e;
    struct pulse_buf buf;
    struct pulse_slice s;
    char path[512];
    uint8_t c;

    env_build(&e, 200, 10, 1000);
    /* Batch 120 rots on disk; a read learns it (the slice walk alone,
     * which reads no bodies, cannot). */
    pt_path(path, sizeof path, e.dir, 0, "log");
    pt_read_file(path, (long long)(120 * e.batch_len + e.batch_len / 2), &c, 1);
    c ^= 0x01;
    pt_patch(path, (long long)(120 * e.batch_len + e.batch_len / 2), &c, 1);
    pulse_buf_init(&buf, (size_t)1 << 30);
    ck_assert_int_eq(pulse_plog_read(e.plog, 1200, 1, &buf, &s), PULSE_OK);
    ck_assert_int_eq(s.skip_from, 1200);
    ck_assert_int_eq(s.skip_to, 1210);
    pulse_buf_fini(&buf);

    /* Every slice that reaches it ends right before it, at the cost of a
     * few header reads; the one that starts at it skips exactly it. */
    const int64_t offsets[] = {0, 5, 700, 1195};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++)
        for (size_t m = 0; m < sizeof max_cases / sizeof max_cases[0]; m++)
            ck_assert_uint_le(slice_case(&e, offsets[i], max_cases[m], 120), 3);
    ck_assert_int_eq(pulse_plog_slice(e.plog, 1200, 1u << 20, false, &s), PULSE_OK);
    ck_assert_int_eq(s.skip_from, 1200);
    ck_assert_int_eq(s.skip_to, 1210);
    ck_assert(s.skip_damaged);
    ck_assert_uint_eq(s.pos, 121 * e.batch_len);
    env_free(&e);
}
END_TEST

START_TEST(test_a_read_reads_its_slice_and_the_next_header_not_half_a_batch_more)
{
    struct env e;
    env_build(&e, 200, 10, 1000);
    const int64_t offsets[] = {0, 5, 500, 1234, 1990};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++)
        for (size_t m = 0; m < sizeof max_cases / sizeof max_cases[0]; m++) {
            unsigned long long extra = read_case(&e, offsets[i], max_cases[m]);
            /* The first batch's header (read before the slice is known)
             * and the header of the batch that does not fit. */
            ck_assert_uint_le(extra, 2 * PULSE_BATCH_HEADER_SIZE);
        }
    env_free(&e);

    /* Small batches: the batch at the last index entry within max_bytes
     * fits, and the read goes on past it; it reads at most the batch
     * that does not fit more, besides the headers from the index entry
     * before offset to its batch. */
    env_build(&e, 3000, 1, 64);
    unsigned long long to_start = (INTERVAL / e.batch_len + 1) * PULSE_BATCH_HEADER_SIZE;
    const int64_t small_offsets[] = {0, 7, 1500, 2990};
    for (size_t i = 0; i < sizeof small_offsets / sizeof small_offsets[0]; i++)
        for (size_t m = 0; m < sizeof max_cases / sizeof max_cases[0]; m++)
            ck_assert_uint_le(read_case(&e, small_offsets[i], max_cases[m]),
                              to_start + e.batch_len + 2 * PULSE_BATCH_HEADER_SIZE);
    struct pt_log l = {0};
    pt_read_all(e.plog, 0, 10000, &l);
    ck_assert_uint_eq(l.n, 3000);
    for (size_t i = 0; i < l.n; i++)
        ck_assert_uint_eq(l.ids[i], i);
    pt_log_free(&l);
    env_free(&e);
}
END_TEST

static Suite *readcost_suite(void)
{
    Suite *s = suite_create("readcost");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_a_raw_slice_of_many_batches_reads_a_few_headers);
    tcase_add_test(tc, test_a_raw_slice_of_small_batches_reads_the_headers_of_three_index_intervals_at_most);
    tcase_add_test(tc, test_a_raw_slice_never_steps_over_known_damage);
    tcase_add_test(tc, test_a_read_reads_its_slice_and_the_next_header_not_half_a_batch_more);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return pt_run(readcost_suite());
}
