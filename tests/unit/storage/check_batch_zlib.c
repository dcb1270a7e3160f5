/* SPDX-License-Identifier: MIT */
/*
 * check_batch_zlib.c - compressed batches (codec 1, docs/Format.md 1.8):
 * round trips through the encoder and the reader, the fallback to plain
 * storage when deflate does not pay, and every hostile compressed records
 * section the reader must refuse although its CRC matches: a truncated
 * stream, bytes after the stream, an inflate bomb (a stream that inflates
 * past the declared length, and a declared length past the cap), a stream
 * that inflates to less than declared, a stream that is not zlib, inflated
 * records with bad framing, and the wrong codec bits either way.
 *
 * The hostile batches are built by hand (header, declared length, stream)
 * with a correct CRC, so that what is refused is the compressed content and
 * not the checksum. Each is copied into a heap block of exactly its length
 * so that an overread lands in ASan's redzone.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/crc32c.h"
#include "common/endian.h"
#include "storage/batch.h"

#define BUF_MAX ((size_t)64 << 20)
#define NRECS 40

/* A realistic JSON event value for record i (compresses well). */
static size_t event_value(char *out, size_t cap, int i)
{
    return (size_t)snprintf(out, cap,
                            "{\"event\":\"page_view\",\"user_id\":%d,\"session\":\"s-%08d\",\"path\":\"/products/"
                            "%d\",\"referrer\":\"https://example.com/search?q=shoes\",\"ts\":%d}",
                            1000 + i % 7, 4242 + i / 3, i % 13, 1700000000 + i);
}

/* NRECS records: keyed, some with a null value, some with headers. */
struct recs {
    char values[NRECS][256];
    char keys[NRECS][16];
    struct pulse_header_in hdrs[NRECS];
    struct pulse_record_in in[NRECS];
};

static void make_recs(struct recs *r, bool sparse)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; i < NRECS; i++) {
        size_t vlen = event_value(r->values[i], sizeof r->values[i], i);
        snprintf(r->keys[i], sizeof r->keys[i], "user-%d", i % 7);
        r->hdrs[i] = (struct pulse_header_in){(const uint8_t *)"h", 1, (const uint8_t *)"x", 1};
        r->in[i].timestamp = 1700000000000 + i;
        r->in[i].offset_delta = sparse ? (uint32_t)(i * 3) : 0;
        r->in[i].key = (const uint8_t *)r->keys[i];
        r->in[i].key_len = (uint32_t)strlen(r->keys[i]);
        if (i % 10 == 9) {
            r->in[i].value = NULL;
            r->in[i].value_len = PULSE_BATCH_NULL;
        } else {
            r->in[i].value = (const uint8_t *)r->values[i];
            r->in[i].value_len = (uint32_t)vlen;
        }
        if (i % 4 == 0) {
            r->in[i].headers = &r->hdrs[i];
            r->in[i].header_count = 1;
        }
    }
}

/* Checks that the batch at b decodes to exactly r's records. */
static void assert_records(const uint8_t *b, size_t len, const struct recs *r, int64_t base, bool sparse)
{
    struct pulse_buf scratch;
    struct pulse_batch_iter it;
    struct pulse_record_view rv;
    int i = 0;

    pulse_buf_init(&scratch, PULSE_BATCH_INFLATED_MAX);
    ck_assert_int_eq(pulse_batch_iter_open(&it, b, len, &scratch), PULSE_OK);
    while (pulse_batch_iter_next(&it, &rv) == PULSE_OK) {
        ck_assert_int_lt(i, NRECS);
        ck_assert_int_eq(rv.offset, base + (sparse ? i * 3 : i));
        ck_assert_int_eq(rv.timestamp, r->in[i].timestamp);
        ck_assert_uint_eq(rv.key_len, r->in[i].key_len);
        ck_assert(memcmp(rv.key, r->in[i].key, rv.key_len) == 0);
        ck_assert_uint_eq(rv.value_len, r->in[i].value_len);
        if (r->in[i].value == NULL)
            ck_assert_ptr_null(rv.value);
        else
            ck_assert(memcmp(rv.value, r->in[i].value, rv.value_len) == 0);
        ck_assert_uint_eq(rv.header_count, r->in[i].header_count);
        i++;
    }
    ck_assert_int_eq(i, NRECS);
    pulse_buf_fini(&scratch);
}

/* The plain records section of recs, encoded by the codec itself. */
static void plain_section(const struct recs *r, struct pulse_buf *sec)
{
    struct pulse_buf b;
    pulse_buf_init(&b, BUF_MAX);
    ck_assert_int_eq(pulse_batch_encode(&b, 0, 0, r->in, NRECS), PULSE_OK);
    ck_assert_int_eq(pulse_buf_append(sec, b.data + PULSE_BATCH_HEADER_SIZE, b.len - PULSE_BATCH_HEADER_SIZE),
                     PULSE_OK);
    pulse_buf_fini(&b);
}

/* A raw deflate stream of data (level 6) appended to out. */
static void zstream(const uint8_t *data, size_t len, struct pulse_buf *out)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    ck_assert_int_eq(deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&z, (uLong)len);
    ck_assert_int_eq(pulse_buf_reserve(out, cap), PULSE_OK);
    z.next_in = (Bytef *)(uintptr_t)data;
    z.avail_in = (uInt)len;
    z.next_out = out->data + out->len;
    z.avail_out = (uInt)cap;
    ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    out->len += z.total_out;
    deflateEnd(&z);
}

/* A heap copy, exactly len bytes, of a hand-made batch of count records
 * with flags, whose records section is declared (4 bytes) + stream, and a
 * correct CRC. */
static uint8_t *hand_batch(uint16_t flags, uint32_t count, uint32_t declared, const uint8_t *stream, size_t slen,
                           size_t *len_out)
{
    size_t len = PULSE_BATCH_HEADER_SIZE + 4 + slen;
    uint8_t *b = pulse_calloc(1, len);
    ck_assert_ptr_nonnull(b);
    b[0] = PULSE_BATCH_MAGIC;
    b[1] = PULSE_BATCH_VERSION;
    pulse_put_be16(b + 2, flags);
    pulse_put_be64(b + 8, 100);
    pulse_put_be32(b + 16, (uint32_t)(4 + slen));
    pulse_put_be64(b + 20, 1700000000000);
    pulse_put_be64(b + 28, 1700000000000 + count - 1);
    pulse_put_be32(b + 36, count);
    pulse_put_be32(b + PULSE_BATCH_HEADER_SIZE, declared);
    memcpy(b + PULSE_BATCH_HEADER_SIZE + 4, stream, slen);
    pulse_put_be32(b + 4, pulse_crc32c(0, b + 8, len - 8));
    *len_out = len;
    return b;
}

/* verify and open agree: CORRUPT; open names why (contains want). */
static void assert_refused(const uint8_t *b, size_t len, const char *want)
{
    struct pulse_buf scratch;
    struct pulse_batch_iter it;
    struct pulse_record_view rv;
    pulse_status_t st;

    ck_assert_int_eq(pulse_batch_verify(b, len, NULL, NULL), PULSE_CORRUPT);
    pulse_buf_init(&scratch, PULSE_BATCH_INFLATED_MAX);
    st = pulse_batch_iter_open(&it, b, len, &scratch);
    while (st == PULSE_OK)
        st = pulse_batch_iter_next(&it, &rv);
    ck_assert_int_eq(st, PULSE_CORRUPT);
    ck_assert_ptr_nonnull(it.problem);
    ck_assert_msg(strstr(it.problem, want) != NULL, "problem \"%s\" lacks \"%s\"", it.problem, want);
    /* Never more memory than the declared length (or none past the cap). */
    ck_assert_uint_le(scratch.cap, (size_t)PULSE_BATCH_INFLATED_MAX);
    pulse_buf_fini(&scratch);
}

START_TEST(test_zlib_batch_round_trips_and_is_smaller)
{
    struct recs r;
    struct pulse_buf plain, z;
    struct pulse_batch_header hdr;
    int64_t last = -1;

    for (int sparse = 0; sparse <= 1; sparse++) {
        uint16_t sflag = sparse ? PULSE_BATCH_FLAG_SPARSE : 0;
        make_recs(&r, sparse);
        pulse_buf_init(&plain, BUF_MAX);
        pulse_buf_init(&z, BUF_MAX);
        ck_assert_int_eq(pulse_batch_encode(&plain, 7, sflag, r.in, NRECS), PULSE_OK);
        ck_assert_int_eq(pulse_batch_encode(&z, 7, sflag | PULSE_BATCH_CODEC_ZLIB, r.in, NRECS), PULSE_OK);
        ck_assert_int_eq(pulse_batch_verify(z.data, z.len, &hdr, &last), PULSE_OK);
        ck_assert_uint_eq(pulse_batch_codec(&hdr), PULSE_BATCH_CODEC_ZLIB);
        ck_assert_uint_eq(hdr.flags & PULSE_BATCH_FLAG_SPARSE, sflag);
        ck_assert_uint_eq(hdr.record_count, NRECS);
        ck_assert_int_eq(last, sparse ? 7 + (NRECS - 1) * 3 : 7 + NRECS - 1);
        /* Realistic JSON: well under half the plain size. */
        ck_assert_uint_lt(z.len * 2, plain.len);
        /* The section holds the plain length, then a deflate stream of it. */
        ck_assert_uint_eq(pulse_get_be32(z.data + PULSE_BATCH_HEADER_SIZE), plain.len - PULSE_BATCH_HEADER_SIZE);
        assert_records(z.data, z.len, &r, 7, sparse);
        /* Offsets are assigned in the header as for a plain batch. */
        pulse_batch_set_base_offset(z.data, z.len, 1000);
        ck_assert_int_eq(pulse_batch_verify(z.data, z.len, &hdr, &last), PULSE_OK);
        assert_records(z.data, z.len, &r, 1000, sparse);
        pulse_buf_fini(&plain);
        pulse_buf_fini(&z);
    }
}
END_TEST

START_TEST(test_zlib_batch_crc_covers_the_stored_bytes)
{
    struct recs r;
    struct pulse_buf z;
    make_recs(&r, false);
    pulse_buf_init(&z, BUF_MAX);
    ck_assert_int_eq(pulse_batch_encode(&z, 0, PULSE_BATCH_CODEC_ZLIB, r.in, NRECS), PULSE_OK);
    /* The stored CRC is that of the compressed bytes. */
    ck_assert_uint_eq(pulse_get_be32(z.data + 4), pulse_crc32c(0, z.data + 8, z.len - 8));
    for (size_t i = 8; i < z.len; i += 7) {
        z.data[i] ^= 0x20;
        ck_assert_int_eq(pulse_batch_verify(z.data, z.len, NULL, NULL), PULSE_CORRUPT);
        z.data[i] ^= 0x20;
    }
    ck_assert_int_eq(pulse_batch_verify(z.data, z.len, NULL, NULL), PULSE_OK);
    /* A cut anywhere is an incomplete batch. */
    ck_assert_int_eq(pulse_batch_verify(z.data, z.len - 1, NULL, NULL), PULSE_EOF);
    pulse_buf_fini(&z);
}
END_TEST

START_TEST(test_batch_that_would_not_shrink_is_stored_plain)
{
    /* Random bytes do not deflate: the 4-byte length and the stream
     * would take more room than the plain records. */
    uint8_t noise[1000];
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < sizeof noise; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        noise[i] = (uint8_t)x;
    }
    struct pulse_record_in rec = {1, 0, NULL, PULSE_BATCH_NULL, noise, sizeof noise, NULL, 0};
    struct pulse_buf z, plain;
    struct pulse_batch_header hdr;
    pulse_buf_init(&z, BUF_MAX);
    pulse_buf_init(&plain, BUF_MAX);
    ck_assert_int_eq(pulse_batch_encode(&z, 0, PULSE_BATCH_CODEC_ZLIB, &rec, 1), PULSE_OK);
    ck_assert_int_eq(pulse_batch_encode(&plain, 0, 0, &rec, 1), PULSE_OK);
    ck_assert_int_eq(pulse_batch_verify(z.data, z.len, &hdr, NULL), PULSE_OK);
    ck_assert_uint_eq(pulse_batch_codec(&hdr), PULSE_BATCH_CODEC_NONE);
    ck_assert_uint_eq(z.len, plain.len);
    ck_assert(memcmp(z.data, plain.data, z.len) == 0);
    pulse_buf_fini(&z);
    pulse_buf_fini(&plain);
}
END_TEST

START_TEST(test_encoder_refuses_unknown_codecs_and_leaves_out_untouched)
{
    struct pulse_record_in rec = {1, 0, NULL, PULSE_BATCH_NULL, (const uint8_t *)"v", 1, NULL, 0};
    struct pulse_buf out;
    pulse_buf_init(&out, BUF_MAX);
    for (uint16_t codec = 2; codec <= 7; codec++) {
        ck_assert_int_eq(pulse_batch_encode(&out, 0, codec, &rec, 1), PULSE_INVALID);
        ck_assert_int_eq(pulse_batch_encode(&out, 0, codec | PULSE_BATCH_FLAG_SPARSE, &rec, 1), PULSE_INVALID);
    }
    ck_assert_uint_eq(out.len, 0);
    /* A cap too small for the batch: TOO_LARGE, buffer unchanged. */
    struct recs r;
    struct pulse_buf small;
    make_recs(&r, false);
    pulse_buf_init(&small, 100);
    ck_assert_int_eq(pulse_batch_encode(&small, 0, PULSE_BATCH_CODEC_ZLIB, r.in, NRECS), PULSE_TOO_LARGE);
    ck_assert_uint_eq(small.len, 0);
    pulse_buf_fini(&small);
    pulse_buf_fini(&out);
}
END_TEST

START_TEST(test_reader_without_scratch_refuses_a_compressed_batch)
{
    struct recs r;
    struct pulse_buf z;
    struct pulse_batch_iter it;
    make_recs(&r, false);
    pulse_buf_init(&z, BUF_MAX);
    ck_assert_int_eq(pulse_batch_encode(&z, 0, PULSE_BATCH_CODEC_ZLIB, r.in, NRECS), PULSE_OK);
    ck_assert_int_eq(pulse_batch_iter_init(&it, z.data, z.len), PULSE_INVALID);
    pulse_buf_fini(&z);
}
END_TEST

START_TEST(test_truncated_deflate_stream_is_corrupt)
{
    struct recs r;
    struct pulse_buf sec, st;
    size_t len;
    make_recs(&r, false);
    pulse_buf_init(&sec, BUF_MAX);
    pulse_buf_init(&st, BUF_MAX);
    plain_section(&r, &sec);
    zstream(sec.data, sec.len, &st);
    /* Cut the stream short by every amount up to half of it. */
    for (size_t cut = 1; cut < st.len / 2; cut++) {
        uint8_t *b = hand_batch(PULSE_BATCH_CODEC_ZLIB, NRECS, (uint32_t)sec.len, st.data, st.len - cut, &len);
        assert_refused(b, len, "truncated");
        pulse_free(b);
    }
    /* The whole stream: accepted. */
    uint8_t *b = hand_batch(PULSE_BATCH_CODEC_ZLIB, NRECS, (uint32_t)sec.len, st.data, st.len, &len);
    ck_assert_int_eq(pulse_batch_verify(b, len, NULL, NULL), PULSE_OK);
    assert_records(b, len, &r, 100, false);
    pulse_free(b);
    pulse_buf_fini(&sec);
    pulse_buf_fini(&st);
}
END_TEST

START_TEST(test_bytes_after_the_deflate_stream_are_corrupt)
{
    struct recs r;
    struct pulse_buf sec, st;
    size_t len;
    make_recs(&r, false);
    pulse_buf_init(&sec, BUF_MAX);
    pulse_buf_init(&st, BUF_MAX);
    plain_section(&r, &sec);
    zstream(sec.data, sec.len, &st);
    ck_assert_int_eq(pulse_buf_append(&st, "\0\0\0", 3), PULSE_OK);
    uint8_t *b = hand_batch(PULSE_BATCH_CODEC_ZLIB, NRECS, (uint32_t)sec.len, st.data, st.len, &len);
    assert_refused(b, len, "bytes follow the end of the compressed stream");
    pulse_free(b);
    /* A second whole stream after the first is garbage too. */
    st.len -= 3;
    size_t one = st.len;
    ck_assert_int_eq(pulse_buf_reserve(&st, one), PULSE_OK);
    memcpy(st.data + one, st.data, one);
    st.len += one;
    b = hand_batch(PULSE_BATCH_CODEC_ZLIB, NRECS, (uint32_t)sec.len, st.data, st.len, &len);
    assert_refused(b, len, "bytes follow the end of the compressed stream");
    pulse_free(b);
    pulse_buf_fini(&sec);
    pulse_buf_fini(&st);
}
END_TEST

START_TEST(test_inflate_bomb_is_corrupt_and_bounded)
{
    /* 32 MiB of zeros deflate to about 32 KiB: a batch that declares 100
     * bytes must not inflate (or allocate) past them. */
    size_t big = (size_t)32 << 20;
    uint8_t *zeros = pulse_calloc(1, big);
    struct pulse_buf st;
    struct pulse_buf scratch;
    struct pulse_batch_iter it;
    size_t len;
    ck_assert_ptr_nonnull(zeros);
    pulse_buf_init(&st, BUF_MAX);
    zstream(zeros, big, &st);
    pulse_free(zeros);
    ck_assert_uint_lt(st.len, 64 * 1024);
    uint8_t *b = hand_batch(PULSE_BATCH_CODEC_ZLIB, 4, 100, st.data, st.len, &len);
    assert_refused(b, len, "inflate past their declared length");
    pulse_buf_init(&scratch, PULSE_BATCH_INFLATED_MAX);
    ck_assert_int_eq(pulse_batch_iter_open(&it, b, len, &scratch), PULSE_CORRUPT);
    ck_assert_uint_lt(scratch.cap, 4096); /* about the declared 100 bytes, not 32 MiB */
    pulse_buf_fini(&scratch);
    pulse_free(b);
    /* Declaring the bomb's true size passes the 64 MiB cap: refused
     * before anything is allocated. */
    b = hand_batch(PULSE_BATCH_CODEC_ZLIB, 4, PULSE_BATCH_INFLATED_MAX + 1, st.data, st.len, &len);
    assert_refused(b, len, "more than the 64 MiB");
    pulse_buf_init(&scratch, PULSE_BATCH_INFLATED_MAX);
    ck_assert_int_eq(pulse_batch_iter_open(&it, b, len, &scratch), PULSE_CORRUPT);
    ck_assert_ptr_null(scratch.data);
    pulse_buf_fini(&scratch);
    pulse_free(b);
    /* A record count whose smallest records pass the cap: a bad header. */
    b = hand_batch(PULSE_BATCH_CODEC_ZLIB, PULSE_BATCH_INFLATED_MAX / PULSE_RECORD_MIN_SIZE + 1, 100, st.data, st.len,
                   &len);
    struct pulse_batch_header hdr;
    ck_assert_int_eq(pulse_batch_parse_header(b, len, &hdr), PULSE_CORRUPT);
    ck_assert_int_eq(pulse_batch_verify(b, len, NULL, NULL), PULSE_CORRUPT);
    pulse_free(b);
    pulse_buf_fini(&st);
}
END_TEST

START_TEST(test_stream_shorter_than_declared_is_corrupt)
{
    struct recs r;
    struct pulse_buf sec, st;
    size_t len;
    make_recs(&r, false);
    pulse_buf_init(&sec, BUF_MAX);
    pulse_buf_init(&st, BUF_MAX);
    plain_section(&r, &sec);
    zstream(sec.data, sec.len, &st);
    uint8_t *b = hand_batch(PULSE_BATCH_CODEC_ZLIB, NRECS, (uint32_t)sec.len + 1, st.data, st.len, &len);
    assert_refused(b, len, "fewer bytes than declared");
    pulse_free(b);
    /* Declared too small for the record count: refused before inflating. */
    b = hand_batch(PULSE_BATCH_CODEC_ZLIB, NRECS, NRECS * PULSE_RECORD_MIN_SIZE - 1, st.data, st.len, &len);
    assert_refused(b, len, "too few bytes for the batch's record count");
    pulse_free(b);
    pulse_buf_fini(&sec);
    pulse_buf_fini(&st);
}
END_TEST

START_TEST(test_garbage_and_bad_inflated_framing_are_corrupt)
{
    struct recs r;
    struct pulse_buf sec, st;
    uint8_t junk[200];
    size_t len;
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    uint8_t *b = hand_batch(PULSE_BATCH_CODEC_ZLIB, 2, 100, junk, sizeof junk, &len);
    assert_refused(b, len, "not a valid deflate stream");
    pulse_free(b);
    /* A valid stream of records whose framing is wrong (a length field
     * one too big): inflates fine, then the record parser refuses it. */
    make_recs(&r, false);
    pulse_buf_init(&sec, BUF_MAX);
    pulse_buf_init(&st, BUF_MAX);
    plain_section(&r, &sec);
    pulse_put_be32(sec.data, pulse_get_be32(sec.data) + 1);
    zstream(sec.data, sec.len, &st);
    b = hand_batch(PULSE_BATCH_CODEC_ZLIB, NRECS, (uint32_t)sec.len, st.data, st.len, &len);
    assert_refused(b, len, "bad framing");
    pulse_free(b);
    /* One record fewer than the header says. */
    pulse_put_be32(sec.data, pulse_get_be32(sec.data) - 1);
    st.len = 0;
    zstream(sec.data, sec.len, &st);
    b = hand_batch(PULSE_BATCH_CODEC_ZLIB, NRECS + 1, (uint32_t)sec.len, st.data, st.len, &len);
    assert_refused(b, len, "");
    pulse_free(b);
    pulse_buf_fini(&sec);
    pulse_buf_fini(&st);
}
END_TEST

START_TEST(test_wrong_codec_bits_are_corrupt)
{
    struct recs r;
    struct pulse_buf z, plain;
    make_recs(&r, false);
    pulse_buf_init(&z, BUF_MAX);
    pulse_buf_init(&plain, BUF_MAX);
    ck_assert_int_eq(pulse_batch_encode(&z, 0, PULSE_BATCH_CODEC_ZLIB, r.in, NRECS), PULSE_OK);
    ck_assert_int_eq(pulse_batch_encode(&plain, 0, 0, r.in, NRECS), PULSE_OK);
    /* The flags are outside the CRC: a compressed batch read as plain, and
     * a plain one read as zlib, both fail. */
    pulse_put_be16(z.data + 2, 0);
    ck_assert_int_eq(pulse_batch_verify(z.data, z.len, NULL, NULL), PULSE_CORRUPT);
    pulse_put_be16(plain.data + 2, PULSE_BATCH_CODEC_ZLIB);
    ck_assert_int_eq(pulse_batch_verify(plain.data, plain.len, NULL, NULL), PULSE_CORRUPT);
    /* Codecs 2-7 are unknown: the header itself is refused. */
    for (uint16_t codec = 2; codec <= 7; codec++) {
        struct pulse_batch_header hdr;
        pulse_put_be16(z.data + 2, codec);
        ck_assert_int_eq(pulse_batch_parse_header(z.data, z.len, &hdr), PULSE_CORRUPT);
        ck_assert_int_eq(pulse_batch_verify(z.data, z.len, NULL, NULL), PULSE_CORRUPT);
    }
    pulse_put_be16(z.data + 2, PULSE_BATCH_CODEC_ZLIB);
    ck_assert_int_eq(pulse_batch_verify(z.data, z.len, NULL, NULL), PULSE_OK);
    pulse_buf_fini(&z);
    pulse_buf_fini(&plain);
}
END_TEST

START_TEST(test_random_mutations_of_a_compressed_batch_never_crash)
{
    struct recs r;
    struct pulse_buf z;
    unsigned seed = 1234;
    make_recs(&r, true);
    pulse_buf_init(&z, BUF_MAX);
    ck_assert_int_eq(pulse_batch_encode(&z, 0, PULSE_BATCH_CODEC_ZLIB | PULSE_BATCH_FLAG_SPARSE, r.in, NRECS),
                     PULSE_OK);
    printf("random mutations: seed %u\n", seed);
    for (int round = 0; round < 2000; round++) {
        uint8_t *b = pulse_malloc(z.len);
        ck_assert_ptr_nonnull(b);
        memcpy(b, z.data, z.len);
        int flips = 1 + rand_r(&seed) % 4;
        for (int f = 0; f < flips; f++)
            b[PULSE_BATCH_HEADER_SIZE + (size_t)rand_r(&seed) % (z.len - PULSE_BATCH_HEADER_SIZE)] ^=
                (uint8_t)(1 + rand_r(&seed) % 255);
        /* CRC made valid again, so the inflater sees the damage. */
        pulse_put_be32(b + 4, pulse_crc32c(0, b + 8, z.len - 8));
        pulse_status_t st = pulse_batch_verify(b, z.len, NULL, NULL);
        ck_assert(st == PULSE_OK || st == PULSE_CORRUPT);
        pulse_free(b);
    }
    pulse_buf_fini(&z);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("batch_zlib");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_zlib_batch_round_trips_and_is_smaller);
    tcase_add_test(tc, test_zlib_batch_crc_covers_the_stored_bytes);
    tcase_add_test(tc, test_batch_that_would_not_shrink_is_stored_plain);
    tcase_add_test(tc, test_encoder_refuses_unknown_codecs_and_leaves_out_untouched);
    tcase_add_test(tc, test_reader_without_scratch_refuses_a_compressed_batch);
    tcase_add_test(tc, test_truncated_deflate_stream_is_corrupt);
    tcase_add_test(tc, test_bytes_after_the_deflate_stream_are_corrupt);
    tcase_add_test(tc, test_inflate_bomb_is_corrupt_and_bounded);
    tcase_add_test(tc, test_stream_shorter_than_declared_is_corrupt);
    tcase_add_test(tc, test_garbage_and_bad_inflated_framing_are_corrupt);
    tcase_add_test(tc, test_wrong_codec_bits_are_corrupt);
    tcase_add_test(tc, test_random_mutations_of_a_compressed_batch_never_crash);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
