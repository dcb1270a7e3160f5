/* SPDX-License-Identifier: MIT */
/* check_fetch_json.c - the planned, streamed JSON fetch answer: its bytes
 * equal the whole text (the envelope, then each record as
 * pulse_record_json_append writes it, which check_text holds against
 * jansson), whatever the window MHD reads it with; max_bytes stops it
 * before the record that would pass it, never before the first;
 * max_records and the start offset hold; planning as reads add records
 * gives the same answer as planning once; the records source changes hands
 * only when nothing can fail any more; and the envelope stays within its
 * documented bound. The records come from a test source over codec-built
 * batches, walked as the local broker's fetch walks its reads. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/record.h"
#include "http/fetch_json.h"
#include "storage/batch.h"

/* ---- a records source --------------------------------------------------- */

/* Chunks of whole batches, each with the offset its read asked for (the
 * records below it in its first batch are not handed out); chunks never
 * move, so records stay valid until release. */
struct tsrc {
    struct pulse_buf chunk[8];
    int64_t start[8];
    size_t n;
    size_t at;   /* chunk walked */
    size_t bpos; /* next batch in it */
    struct pulse_batch_iter it;
    bool in_batch;
    int *released; /* counts releases (nullable) */
};

static struct tsrc *tsrc_create(int *released)
{
    struct tsrc *t = calloc(1, sizeof *t);
    ck_assert_ptr_nonnull(t);
    t->released = released;
    return t;
}

static void tsrc_add(struct tsrc *t, const uint8_t *p, size_t len, int64_t start)
{
    ck_assert_uint_lt(t->n, 8);
    pulse_buf_init(&t->chunk[t->n], SIZE_MAX);
    ck_assert_int_eq(pulse_buf_append(&t->chunk[t->n], p, len), PULSE_OK);
    t->start[t->n++] = start;
}

static pulse_status_t tsrc_next(void *arg, struct pulse_record *rec)
{
    struct tsrc *t = arg;
    struct pulse_record_view rv;
    for (;;) {
        if (t->in_batch) {
            while (pulse_batch_iter_next(&t->it, &rv) == PULSE_OK) {
                if (rv.offset >= t->start[t->at]) {
                    pulse_batch_record_plain(&rv, rec);
                    return PULSE_OK;
                }
            }
            t->in_batch = false;
        }
        if (t->at >= t->n)
            return PULSE_EOF;
        const struct pulse_buf *c = &t->chunk[t->at];
        struct pulse_batch_header hdr;
        if (t->bpos < c->len && pulse_batch_parse_header(c->data + t->bpos, c->len - t->bpos, &hdr) == PULSE_OK) {
            ck_assert_int_eq(pulse_batch_iter_init(&t->it, c->data + t->bpos, pulse_batch_total_size(&hdr)), PULSE_OK);
            t->bpos += pulse_batch_total_size(&hdr);
            t->in_batch = true;
            continue;
        }
        if (t->at + 1 >= t->n)
            return PULSE_EOF; /* stay: a later chunk goes on from here */
        t->at++;
        t->bpos = 0;
    }
}

static void tsrc_rewind(void *arg)
{
    struct tsrc *t = arg;
    t->at = 0;
    t->bpos = 0;
    t->in_batch = false;
}

static void tsrc_release(void *arg)
{
    struct tsrc *t = arg;
    if (t->released != NULL)
        (*t->released)++;
    for (size_t i = 0; i < t->n; i++)
        pulse_buf_fini(&t->chunk[i]);
    free(t);
}

static struct pulse_fetchjson_source tsrc_source(struct tsrc *t)
{
    return (struct pulse_fetchjson_source){tsrc_next, tsrc_rewind, tsrc_release, t};
}

/* ---- fixtures --------------------------------------------------------- */

/* Value bytes of record i: every kind JSON treats specially, and sizes
 * from 0 to a few KiB (escaped control bytes, non-UTF-8 for base64). */
static size_t value_of(size_t i, uint8_t *out, size_t cap)
{
    size_t n = (i * 977) % (cap < 3000 ? cap : 3000);
    for (size_t k = 0; k < n; k++) {
        switch ((i + k) % 9) {
        case 0:
            out[k] = 0x01;
            break;
        case 1:
            out[k] = '"';
            break;
        case 2:
            out[k] = '\n';
            break;
        default:
            out[k] = (uint8_t)('a' + (k % 26));
        }
    }
    if (i % 4 == 3 && n > 0)
        out[n / 2] = 0xff; /* not UTF-8: base64 */
    return n;
}

/* batches holding records base .. base+count-1, per_batch to a batch. */
static void build_batches(struct pulse_buf *out, int64_t base, size_t count, size_t per_batch)
{
    static uint8_t values[16][4096];
    static const uint8_t hk[] = "trace";
    static const uint8_t hv[] = "a\x01z";
    struct pulse_header_in hdr = {hk, 5, hv, 3};
    for (size_t first = 0; first < count; first += per_batch) {
        struct pulse_record_in recs[16];
        size_t n = count - first < per_batch ? count - first : per_batch;
        ck_assert_uint_le(n, 16);
        for (size_t j = 0; j < n; j++) {
            size_t i = (size_t)base + first + j;
            memset(&recs[j], 0, sizeof recs[j]);
            recs[j].timestamp = 1764400000000 + (int64_t)i;
            recs[j].key = i % 3 == 0 ? NULL : (const uint8_t *)"k\tey";
            recs[j].key_len = i % 3 == 0 ? PULSE_BATCH_NULL : 4;
            recs[j].value = values[j];
            recs[j].value_len = (uint32_t)value_of(i, values[j], sizeof values[j]);
            if (i % 5 == 1) {
                recs[j].headers = &hdr;
                recs[j].header_count = 1;
            }
        }
        ck_assert_int_eq(pulse_batch_encode(out, base + (int64_t)first, 0, recs, n), PULSE_OK);
    }
}

/* The text of every record at or after start in raw, one buf each. */
static size_t record_texts(const struct pulse_buf *raw, int64_t start, struct pulse_buf *texts, size_t cap)
{
    size_t n = 0;
    size_t pos = 0;
    while (pos < raw->len) {
        struct pulse_batch_header hdr;
        ck_assert_int_eq(pulse_batch_parse_header(raw->data + pos, raw->len - pos, &hdr), PULSE_OK);
        struct pulse_batch_iter it;
        ck_assert_int_eq(pulse_batch_iter_init(&it, raw->data + pos, pulse_batch_total_size(&hdr)), PULSE_OK);
        struct pulse_record_view rv;
        while (pulse_batch_iter_next(&it, &rv) == PULSE_OK) {
            if (rv.offset < start)
                continue;
            ck_assert_uint_lt(n, cap);
            pulse_buf_init(&texts[n], SIZE_MAX);
            struct pulse_record rec;
            pulse_batch_record_plain(&rv, &rec);
            ck_assert_int_eq(pulse_record_json_append(&texts[n], &rec), PULSE_OK);
            n++;
        }
        pos += pulse_batch_total_size(&hdr);
    }
    return n;
}

/* What the answer must be: the envelope and the first n texts. */
static void expected_body(struct pulse_buf *out, const struct pulse_fetchjson_envelope *env,
                          const struct pulse_buf *texts, size_t n)
{
    ck_assert_int_eq(pulse_buf_printf(out,
                                      "{\"topic\":\"%s\",\"partition\":%u,\"log_start_offset\":%lld,"
                                      "\"high_watermark\":%lld,\"next_offset\":%lld,\"records\":[",
                                      env->topic, (unsigned)env->partition, (long long)env->log_start,
                                      (long long)env->high_watermark, (long long)env->next_offset),
                     PULSE_OK);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            ck_assert_int_eq(pulse_buf_append_u8(out, ','), PULSE_OK);
        ck_assert_int_eq(pulse_buf_append(out, texts[i].data, texts[i].len), PULSE_OK);
    }
    ck_assert_int_eq(pulse_buf_append(out, "]}\n", 3), PULSE_OK); /* every JSON body ends with a newline */
}

/* Plans a copy of raw (one read at start) in one go; *src_out gets the
 * source, which read_body hands to the answer. */
static struct pulse_fetchjson *plan_all(const struct pulse_buf *raw, int64_t start, uint64_t max_records,
                                        uint64_t max_bytes, struct tsrc **src_out)
{
    struct pulse_fetchjson *fj = NULL;
    struct tsrc *t = tsrc_create(NULL);
    tsrc_add(t, raw->data, raw->len, start);
    struct pulse_fetchjson_source src = tsrc_source(t);
    ck_assert_int_eq(pulse_fetchjson_create(start, max_records, max_bytes, &fj), PULSE_OK);
    ck_assert_int_eq(pulse_fetchjson_plan(fj, &src), PULSE_OK);
    *src_out = t;
    return fj;
}

/* Finishes the plan (the answer takes t) and reads the body in windows of
 * min_room .. min_room+spread bytes. */
static void read_body(struct pulse_fetchjson *fj, struct tsrc *t, int64_t next, struct pulse_buf *body, unsigned *seed,
                      size_t spread)
{
    struct pulse_fetchjson_source src = tsrc_source(t);
    struct pulse_fetchjson_envelope env = {"orders", 2, 5, 1000, next};
    uint64_t body_len = 0;
    ck_assert_int_eq(pulse_fetchjson_finish(fj, &src, &env, &body_len), PULSE_OK);
    uint8_t window[64 * 1024];
    for (;;) {
        size_t room = PULSE_RECORD_JSON_WRITE_MIN + (spread > 0 ? (size_t)rand_r(seed) % spread : 0);
        if (room > body_len - body->len && body->len < body_len)
            room = body_len - body->len; /* MHD never asks past the length */
        ssize_t n = pulse_fetchjson_read(fj, window, room);
        if (n == -1)
            break;
        ck_assert_int_gt(n, 0);
        ck_assert_uint_le((size_t)n, room);
        ck_assert_int_eq(pulse_buf_append(body, window, (size_t)n), PULSE_OK);
    }
    ck_assert_uint_eq(body->len, body_len);
}

static void free_texts(struct pulse_buf *texts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pulse_buf_fini(&texts[i]);
}

/* A grow function for rendered answers: lets the text grow within cap,
 * refusing from its refuse_at-th call on (0: never). */
struct tgrow {
    unsigned calls;
    unsigned refuse_at;
};

static pulse_status_t tgrow_fn(void *arg, struct pulse_buf *buf, size_t n, size_t cap)
{
    struct tgrow *g = arg;
    g->calls++;
    if (g->refuse_at != 0 && g->calls >= g->refuse_at)
        return PULSE_BUSY;
    if (n > cap || buf->len > cap - n)
        return PULSE_TOO_LARGE;
    if (buf->len + n > buf->max)
        pulse_buf_set_max(buf, buf->len + n);
    return PULSE_OK;
}

/* raw gets 40 records at offsets 100..139 in batches of 7, texts their
 * JSON texts (free_texts them). */
static void forty_records(struct pulse_buf *raw, struct pulse_buf texts[40])
{
    pulse_buf_init(raw, SIZE_MAX);
    build_batches(raw, 100, 40, 7);
    ck_assert_uint_eq(record_texts(raw, 100, texts, 40), 40);
}

/* Plans a copy of raw (one read at start, its releases counted in
 * *released; *src gets the source) rendering through g up to cap. */
static struct pulse_fetchjson *plan_rendered(const struct pulse_buf *raw, int64_t start, uint64_t max_records,
                                             uint64_t max_bytes, struct tgrow *g, size_t cap, size_t hint,
                                             int *released, struct pulse_fetchjson_source *src)
{
    struct pulse_fetchjson *fj = NULL;
    struct tsrc *t = tsrc_create(released);
    tsrc_add(t, raw->data, raw->len, start);
    *src = tsrc_source(t);
    ck_assert_int_eq(pulse_fetchjson_create(start, max_records, max_bytes, &fj), PULSE_OK);
    pulse_fetchjson_render(fj, tgrow_fn, g, cap, hint);
    ck_assert_int_eq(pulse_fetchjson_plan(fj, src), PULSE_OK);
    return fj;
}

/* ---- tests ------------------------------------------------------------ */

START_TEST(test_streamed_answer_is_the_whole_text_in_any_window)
{
    struct pulse_buf raw, body, want;
    struct pulse_buf texts[40];
    unsigned seed = 11;
    size_t n = 40;
    forty_records(&raw, texts);
    size_t spreads[] = {0, 1, 30, 5000, 60000};
    for (size_t s = 0; s < sizeof spreads / sizeof spreads[0]; s++) {
        struct tsrc *src = NULL;
        struct pulse_fetchjson *fj = plan_all(&raw, 100, 10000, UINT64_MAX, &src);
        ck_assert_uint_eq(pulse_fetchjson_records(fj), 40);
        ck_assert_int_eq(pulse_fetchjson_next(fj), 140);
        pulse_buf_init(&body, SIZE_MAX);
        pulse_buf_init(&want, SIZE_MAX);
        read_body(fj, src, 140, &body, &seed, spreads[s]);
        struct pulse_fetchjson_envelope env = {"orders", 2, 5, 1000, 140};
        expected_body(&want, &env, texts, n);
        ck_assert_uint_eq(body.len, want.len);
        ck_assert(memcmp(body.data, want.data, body.len) == 0);
        pulse_fetchjson_destroy(fj);
        pulse_buf_fini(&body);
        pulse_buf_fini(&want);
    }
    free_texts(texts, n);
    pulse_buf_fini(&raw);
}
END_TEST

/* A rendered answer is byte for byte the streamed one, in any window;
 * the plan keeps rendering only while the text may grow (cap, refusals),
 * and otherwise the answer streams as before. A rendered answer gives the
 * source back at finish (its body is whole) and offers that body. */
START_TEST(test_rendered_answer_is_the_streamed_text)
{
    struct pulse_buf raw, texts[40];
    forty_records(&raw, texts);
    size_t n = 40;
    struct pulse_buf want, body;
    unsigned seed = 3;
    struct pulse_fetchjson_envelope env = {"orders", 2, 5, 1000, 140};
    pulse_buf_init(&want, SIZE_MAX);
    expected_body(&want, &env, texts, n);
    struct {
        size_t cap;
        unsigned refuse_at;
        size_t hint;
        bool rendered;
    } cases[] = {
        {SIZE_MAX, 0, 0, true},        /* grows in steps from the gap */
        {SIZE_MAX, 0, 1 << 20, true},  /* all the room at once */
        {want.len + 2048, 0, 0, true}, /* just fits (with the tail's room) */
        {want.len / 2, 0, 0, false},   /* the cap ends it halfway */
        {100, 0, 0, false},            /* not even the envelope's gap */
        {SIZE_MAX, 1, 0, false},       /* refused at once */
        {SIZE_MAX, 3, 0, false},       /* refused after two records */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int released = 0;
        struct pulse_fetchjson_source src;
        struct tgrow g = {0, cases[c].refuse_at};
        struct pulse_fetchjson *fj = plan_rendered(&raw, 100, 10000, UINT64_MAX, &g, cases[c].cap, cases[c].hint,
                                                   &released, &src);
        ck_assert_msg(pulse_fetchjson_rendered(fj) == cases[c].rendered, "case %zu", c);
        ck_assert_uint_eq(pulse_fetchjson_records(fj), 40);
        ck_assert_int_eq(pulse_fetchjson_next(fj), 140);
        uint64_t body_len = 0;
        ck_assert_int_eq(pulse_fetchjson_finish(fj, &src, &env, &body_len), PULSE_OK);
        ck_assert_uint_eq(body_len, want.len);
        ck_assert_int_eq(released, cases[c].rendered ? 1 : 0);
        ck_assert(pulse_fetchjson_body(fj) == NULL || cases[c].rendered);
        if (cases[c].rendered)
            ck_assert(memcmp(pulse_fetchjson_body(fj), want.data, want.len) == 0);
        /* Read through the stream too (what a gzip'ed answer does). */
        pulse_buf_init(&body, SIZE_MAX);
        uint8_t window[4096];
        for (;;) {
            size_t room = PULSE_RECORD_JSON_WRITE_MIN + (size_t)rand_r(&seed) % 3000;
            ssize_t k = pulse_fetchjson_read(fj, window, room);
            if (k == -1)
                break;
            ck_assert_int_gt(k, 0);
            ck_assert_int_eq(pulse_buf_append(&body, window, (size_t)k), PULSE_OK);
        }
        ck_assert(body.len == want.len && memcmp(body.data, want.data, body.len) == 0);
        pulse_fetchjson_destroy(fj);
        ck_assert_int_eq(released, 1);
        pulse_buf_fini(&body);
    }
    free_texts(texts, n);
    pulse_buf_fini(&want);
    pulse_buf_fini(&raw);
}
END_TEST

/* Rendering stops at max_bytes and max_records exactly where the plan
 * alone stops. */
START_TEST(test_rendered_answer_keeps_the_limits)
{
    struct pulse_buf raw, want;
    struct pulse_buf texts[16];
    pulse_buf_init(&raw, SIZE_MAX);
    build_batches(&raw, 0, 6, 3);
    size_t n = record_texts(&raw, 0, texts, 16);
    uint64_t two = texts[0].len + 1 + texts[1].len;
    struct {
        uint64_t max_records, max_bytes, records;
    } cases[] = {{10000, 1, 1}, {10000, two - 1, 1}, {10000, two, 2}, {10000, UINT64_MAX, 6}, {4, UINT64_MAX, 4}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int released = 0;
        struct pulse_fetchjson_source src;
        struct tgrow g = {0, 0};
        struct pulse_fetchjson *fj = plan_rendered(&raw, 0, cases[c].max_records, cases[c].max_bytes, &g, SIZE_MAX, 0,
                                                   &released, &src);
        ck_assert(pulse_fetchjson_rendered(fj));
        ck_assert_uint_eq(pulse_fetchjson_records(fj), cases[c].records);
        struct pulse_fetchjson_envelope env = {"orders", 2, 5, 1000, (int64_t)cases[c].records};
        uint64_t body_len = 0;
        ck_assert_int_eq(pulse_fetchjson_finish(fj, &src, &env, &body_len), PULSE_OK);
        pulse_buf_init(&want, SIZE_MAX);
        expected_body(&want, &env, texts, (size_t)cases[c].records);
        ck_assert(body_len == want.len && memcmp(pulse_fetchjson_body(fj), want.data, want.len) == 0);
        pulse_fetchjson_destroy(fj);
        pulse_buf_fini(&want);
    }
    free_texts(texts, n);
    pulse_buf_fini(&raw);
}
END_TEST

START_TEST(test_max_bytes_stops_before_the_record_that_would_pass_it)
{
    struct pulse_buf raw, body, want;
    struct pulse_buf texts[16];
    unsigned seed = 5;
    pulse_buf_init(&raw, SIZE_MAX);
    build_batches(&raw, 0, 6, 3);
    size_t n = record_texts(&raw, 0, texts, 16);
    uint64_t two = texts[0].len + 1 + texts[1].len;
    struct {
        uint64_t max_bytes;
        uint64_t records;
    } cases[] = {{1, 1},
                 {texts[0].len, 1},
                 {two - 1, 1},
                 {two, 2},
                 {two + 1 + texts[2].len - 1, 2},
                 {two + 1 + texts[2].len, 3},
                 {UINT64_MAX, 6}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct tsrc *src = NULL;
        struct pulse_fetchjson *fj = plan_all(&raw, 0, 10000, cases[c].max_bytes, &src);
        ck_assert_msg(pulse_fetchjson_records(fj) == cases[c].records, "max_bytes %llu: %llu records, want %llu",
                      (unsigned long long)cases[c].max_bytes, (unsigned long long)pulse_fetchjson_records(fj),
                      (unsigned long long)cases[c].records);
        ck_assert_int_eq(pulse_fetchjson_next(fj), (int64_t)cases[c].records);
        ck_assert(pulse_fetchjson_full(fj) == (cases[c].records < 6));
        pulse_buf_init(&body, SIZE_MAX);
        pulse_buf_init(&want, SIZE_MAX);
        read_body(fj, src, (int64_t)cases[c].records, &body, &seed, 100);
        struct pulse_fetchjson_envelope env = {"orders", 2, 5, 1000, (int64_t)cases[c].records};
        expected_body(&want, &env, texts, (size_t)cases[c].records);
        ck_assert(body.len == want.len && memcmp(body.data, want.data, body.len) == 0);
        /* The body never passes max_bytes + the envelope, except for a
         * first record that alone is larger. */
        if (cases[c].records > 1 && cases[c].max_bytes < UINT64_MAX / 2)
            ck_assert_uint_le(body.len, cases[c].max_bytes + PULSE_FETCHJSON_ENVELOPE_MAX);
        pulse_fetchjson_destroy(fj);
        pulse_buf_fini(&body);
        pulse_buf_fini(&want);
    }
    free_texts(texts, n);
    pulse_buf_fini(&raw);
}
END_TEST

START_TEST(test_start_offset_and_max_records_hold)
{
    struct pulse_buf raw, body, want;
    struct pulse_buf texts[32];
    unsigned seed = 9;
    pulse_buf_init(&raw, SIZE_MAX);
    build_batches(&raw, 10, 20, 8); /* batches 10..17, 18..25, 26..29 */
    size_t n = record_texts(&raw, 13, texts, 32);
    ck_assert_uint_eq(n, 17);
    struct tsrc *src = NULL;
    struct pulse_fetchjson *fj = plan_all(&raw, 13, 5, UINT64_MAX, &src);
    ck_assert_uint_eq(pulse_fetchjson_records(fj), 5);
    ck_assert_int_eq(pulse_fetchjson_next(fj), 18);
    ck_assert(pulse_fetchjson_full(fj));
    pulse_buf_init(&body, SIZE_MAX);
    pulse_buf_init(&want, SIZE_MAX);
    read_body(fj, src, 18, &body, &seed, 50);
    struct pulse_fetchjson_envelope env = {"orders", 2, 5, 1000, 18};
    expected_body(&want, &env, texts, 5);
    ck_assert(body.len == want.len && memcmp(body.data, want.data, body.len) == 0);
    pulse_fetchjson_destroy(fj);
    pulse_buf_fini(&body);
    pulse_buf_fini(&want);
    /* Nothing at or after start: an empty answer whose next is start. */
    fj = plan_all(&raw, 30, 5, UINT64_MAX, &src);
    ck_assert_uint_eq(pulse_fetchjson_records(fj), 0);
    ck_assert_int_eq(pulse_fetchjson_next(fj), 30);
    pulse_buf_init(&body, SIZE_MAX);
    read_body(fj, src, 30, &body, &seed, 0);
    const char *empty = "{\"topic\":\"orders\",\"partition\":2,\"log_start_offset\":5,\"high_watermark\":1000,"
                        "\"next_offset\":30,\"records\":[]}\n";
    ck_assert(body.len == strlen(empty) && memcmp(body.data, empty, body.len) == 0);
    pulse_fetchjson_destroy(fj);
    pulse_buf_fini(&body);
    free_texts(texts, n);
    pulse_buf_fini(&raw);
}
END_TEST

START_TEST(test_planning_as_reads_arrive_gives_the_same_answer)
{
    struct pulse_buf all;
    pulse_buf_init(&all, SIZE_MAX);
    build_batches(&all, 0, 30, 4);
    struct tsrc *whole = NULL;
    struct pulse_fetchjson *once = plan_all(&all, 0, 10000, 20000, &whole);
    /* The same batches arriving over three reads, planned after each. */
    struct pulse_fetchjson *steps = NULL;
    ck_assert_int_eq(pulse_fetchjson_create(0, 10000, 20000, &steps), PULSE_OK);
    struct tsrc *t = tsrc_create(NULL);
    struct pulse_fetchjson_source src = tsrc_source(t);
    size_t cuts[] = {0, 0, all.len};
    size_t pos = 0;
    for (int i = 0; i < 2; i++) { /* whole batches: two, then five */
        struct pulse_batch_header hdr;
        for (int b = 0; b < (i == 0 ? 2 : 5) && pos < all.len; b++) {
            ck_assert_int_eq(pulse_batch_parse_header(all.data + pos, all.len - pos, &hdr), PULSE_OK);
            pos += pulse_batch_total_size(&hdr);
        }
        cuts[i] = pos;
    }
    size_t from = 0;
    for (int i = 0; i < 3 && !pulse_fetchjson_full(steps); i++) {
        struct pulse_batch_header hdr;
        ck_assert_int_eq(pulse_batch_parse_header(all.data + from, all.len - from, &hdr), PULSE_OK);
        tsrc_add(t, all.data + from, cuts[i] - from, hdr.base_offset);
        from = cuts[i];
        ck_assert_int_eq(pulse_fetchjson_plan(steps, &src), PULSE_OK);
    }
    ck_assert_uint_eq(pulse_fetchjson_records(steps), pulse_fetchjson_records(once));
    ck_assert_int_eq(pulse_fetchjson_next(steps), pulse_fetchjson_next(once));
    ck_assert_uint_eq(pulse_fetchjson_max_headers(steps), pulse_fetchjson_max_headers(once));
    ck_assert_uint_gt(pulse_fetchjson_records(once), 1);
    ck_assert_uint_lt(pulse_fetchjson_records(once), 30);
    pulse_fetchjson_destroy(once);
    pulse_fetchjson_destroy(steps);
    tsrc_release(whole); /* neither plan was finished: the sources are ours */
    tsrc_release(t);
    pulse_buf_fini(&all);
}
END_TEST

START_TEST(test_envelope_stays_within_its_documented_bound)
{
    char topic[250];
    memset(topic, 'x', 249);
    topic[249] = '\0';
    struct pulse_fetchjson *fj = NULL;
    ck_assert_int_eq(pulse_fetchjson_create(0, 1, 1, &fj), PULSE_OK);
    struct pulse_fetchjson_envelope env = {topic, UINT32_MAX, INT64_MIN, INT64_MIN, INT64_MIN};
    uint64_t body_len = 0;
    struct pulse_fetchjson_source none = tsrc_source(tsrc_create(NULL));
    ck_assert_int_eq(pulse_fetchjson_finish(fj, &none, &env, &body_len), PULSE_OK);
    ck_assert_uint_eq(body_len, 411); /* the widest envelope (fetch_json.h), its newline included */
    ck_assert_uint_le(body_len, PULSE_FETCHJSON_ENVELOPE_MAX);
    pulse_fetchjson_destroy(fj);
}
END_TEST

START_TEST(test_members_after_records_are_streamed_before_the_closing_brace)
{
    struct pulse_buf raw, body, want;
    struct pulse_buf texts[8];
    unsigned seed = 3;
    static const char after[] = ",\"skipped\":[{\"from\":10,\"to\":12,\"reason\":\"corrupt\"}]";
    pulse_buf_init(&raw, SIZE_MAX);
    build_batches(&raw, 100, 5, 2);
    size_t n = record_texts(&raw, 100, texts, 8);
    struct tsrc *src = NULL;
    struct pulse_fetchjson *fj = plan_all(&raw, 100, 10000, UINT64_MAX, &src);
    ck_assert_int_eq(pulse_fetchjson_after_records(fj, after), PULSE_OK);
    pulse_buf_init(&body, SIZE_MAX);
    read_body(fj, src, 105, &body, &seed, 7);
    struct pulse_fetchjson_envelope env = {"orders", 2, 5, 1000, 105};
    pulse_buf_init(&want, SIZE_MAX);
    expected_body(&want, &env, texts, n);
    want.len -= 2; /* the closing brace and newline come after the members */
    ck_assert_int_eq(pulse_buf_append(&want, after, strlen(after)), PULSE_OK);
    ck_assert_int_eq(pulse_buf_append(&want, "}\n", 2), PULSE_OK);
    ck_assert_uint_eq(body.len, want.len);
    ck_assert_int_eq(memcmp(body.data, want.data, want.len), 0);
    pulse_fetchjson_destroy(fj);
    /* More than the documented bound is refused. */
    ck_assert_int_eq(pulse_fetchjson_create(0, 1, 1, &fj), PULSE_OK);
    char big[PULSE_FETCHJSON_AFTER_MAX + 2];
    memset(big, ' ', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ck_assert_int_eq(pulse_fetchjson_after_records(fj, big), PULSE_TOO_LARGE);
    pulse_fetchjson_destroy(fj);
    free_texts(texts, n);
    pulse_buf_fini(&raw);
    pulse_buf_fini(&body);
    pulse_buf_fini(&want);
}
END_TEST

/* The JSON fetch handler's sequence (plan, the members after the records,
 * finish) under every allocation failure in turn: a failure leaves the
 * source with the caller, who releases it; a success hands it to the
 * answer, which releases it once. Either way nothing leaks (LeakSanitizer
 * in make check). Loop 0 streams, loop 1 renders (a failure to grow the
 * text only makes it stream). */
START_TEST(test_no_allocation_failure_loses_the_records)
{
    static const char after[] = ",\"skipped\":[{\"from\":10,\"to\":12,\"reason\":\"corrupt\"}]";
    struct pulse_fetchjson_envelope env = {"orders", 2, 5, 1000, 105};
    bool done = false;
    unsigned failures = 0;
    for (unsigned long n = 1; !done && n < 1000; n++) {
        struct pulse_buf raw;
        pulse_buf_init(&raw, SIZE_MAX);
        build_batches(&raw, 100, 5, 2);
        int released = 0;
        struct tsrc *t = tsrc_create(&released);
        tsrc_add(t, raw.data, raw.len, 100);
        struct pulse_fetchjson_source src = tsrc_source(t);
        struct pulse_fetchjson *fj = NULL;
        uint64_t body_len = 0;
        pulse_alloc_fail_after(n);
        struct tgrow g = {0, 0};
        pulse_status_t st = pulse_fetchjson_create(100, 10000, UINT64_MAX, &fj);
        if (st == PULSE_OK && _i == 1)
            pulse_fetchjson_render(fj, tgrow_fn, &g, SIZE_MAX, 0);
        if (st == PULSE_OK)
            st = pulse_fetchjson_plan(fj, &src);
        if (st == PULSE_OK)
            st = pulse_fetchjson_after_records(fj, after);
        bool finishing = st == PULSE_OK;
        if (st == PULSE_OK)
            st = pulse_fetchjson_finish(fj, &src, &env, &body_len);
        pulse_alloc_fail_after(0);
        if (st == PULSE_OK) {
            ck_assert_uint_gt(body_len, 0);
            pulse_fetchjson_destroy(fj);
            ck_assert_int_eq(released, 1); /* the answer released it */
            fj = NULL;
            done = true;
        } else {
            ck_assert_int_eq(st, PULSE_NOMEM);
            pulse_fetchjson_destroy(fj);
            ck_assert_int_eq(released, 0); /* still the caller's */
            tsrc_release(t);
            fj = NULL;
            failures += finishing;
        }
        pulse_fetchjson_destroy(fj);
        pulse_buf_fini(&raw);
    }
    ck_assert(done);
    ck_assert_uint_gt(failures, 0); /* finish itself failed at least once */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fetch_json");
    TCase *tc = tcase_create("fetch_json");
    tcase_add_test(tc, test_streamed_answer_is_the_whole_text_in_any_window);
    tcase_add_test(tc, test_max_bytes_stops_before_the_record_that_would_pass_it);
    tcase_add_test(tc, test_start_offset_and_max_records_hold);
    tcase_add_test(tc, test_planning_as_reads_arrive_gives_the_same_answer);
    tcase_add_test(tc, test_envelope_stays_within_its_documented_bound);
    tcase_add_test(tc, test_members_after_records_are_streamed_before_the_closing_brace);
    tcase_add_loop_test(tc, test_no_allocation_failure_loses_the_records, 0, 2);
    tcase_add_test(tc, test_rendered_answer_is_the_streamed_text);
    tcase_add_test(tc, test_rendered_answer_keeps_the_limits);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
