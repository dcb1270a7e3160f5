/* SPDX-License-Identifier: MIT */
/*
 * check_batch.c - the batch codec (storage contract section 3): round trips
 * of every field, pinned golden bytes, CRC and truncation detection at every
 * byte, framing and offset rules on hand-damaged batches, the int32
 * timestamp-delta boundary, and a seeded random-mutation loop that must never
 * make the decoder read outside its buffer (run it under ASan).
 *
 * Damaged inputs are always copied into a heap block of exactly their length,
 * so an overread lands in ASan's redzone instead of in neighbouring bytes.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/crc32c.h"
#include "common/endian.h"
#include "storage/batch.h"

#define BUF_MAX ((size_t)64 << 20)

/* The golden batch: base offset 5, two records.
 *   #0 ts 1000 key "k" value "v", no headers
 *   #1 ts 1005 key "k" value null (tombstone), header "h" = "x"
 * Laid out by hand from the contract; the CRC was computed independently.
 * One line per field, so the layout is kept by hand: */
/* clang-format off */
static const uint8_t golden[] = {
    /* magic, version, flags */
    0x01, 0x01, 0x00, 0x00,
    /* crc32c over bytes [8, 115) */
    0x0a, 0x91, 0x99, 0x50,
    /* baseOffset = 5 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05,
    /* batchLen = 63 */
    0x00, 0x00, 0x00, 0x3f,
    /* firstTimestamp = 1000, lastTimestamp = 1005 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xed,
    /* recordCount = 2, producerID, producerEpoch, baseSequence */
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    /* record 0 @52: length 23, attributes, tsDelta 0, offsetDelta 0 */
    0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    /* key "k", value "v", headerCount 0 */
    0x00, 0x00, 0x00, 0x01, 0x6b, 0x00, 0x00, 0x00, 0x01, 0x76, 0x00, 0x00, 0x00, 0x00,
    /* record 1 @79: length 32, attributes, tsDelta 5, offsetDelta 1 */
    0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x01,
    /* key "k", value null, headerCount 1 */
    0x00, 0x00, 0x00, 0x01, 0x6b, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01,
    /* header "h" = "x" */
    0x00, 0x00, 0x00, 0x01, 0x68, 0x00, 0x00, 0x00, 0x01, 0x78,
};
/* clang-format on */

#define REC0_POS 52u
#define REC1_POS 79u

static const struct pulse_header_in golden_hdrs[] = {
    {(const uint8_t *)"h", 1, (const uint8_t *)"x", 1},
};

static const struct pulse_record_in golden_recs[] = {
    {1000, 0, (const uint8_t *)"k", 1, (const uint8_t *)"v", 1, NULL, 0},
    {1005, 0, (const uint8_t *)"k", 1, NULL, PULSE_BATCH_NULL, golden_hdrs, 1},
};

static uint8_t *dup_bytes(const uint8_t *p, size_t n)
{
    uint8_t *d = pulse_malloc(n);
    ck_assert_ptr_nonnull(d);
    if (n > 0)
        memcpy(d, p, n);
    return d;
}

/* Recomputes the CRC of a batch from its own batchLen (clamped to len), so
 * damage past the CRC check reaches the framing rules. */
static void refresh_crc(uint8_t *b, size_t len)
{
    size_t end = PULSE_BATCH_HEADER_SIZE + pulse_get_be32(b + 16);
    if (end > len)
        end = len;
    pulse_put_be32(b + 4, pulse_crc32c(0, b + 8, end - 8));
}

static void encode_ok(struct pulse_buf *out, int64_t base, uint16_t flags, const struct pulse_record_in *recs, size_t n)
{
    pulse_buf_init(out, BUF_MAX);
    ck_assert_int_eq(pulse_batch_encode(out, base, flags, recs, n), PULSE_OK);
}

static pulse_status_t verify_copy(const uint8_t *b, size_t len)
{
    uint8_t *d = dup_bytes(b, len);
    struct pulse_batch_header hdr;
    int64_t last;
    pulse_status_t st = pulse_batch_verify(d, len, &hdr, &last);
    pulse_free(d);
    return st;
}

START_TEST(test_golden_bytes_match_the_contract_layout)
{
    struct pulse_buf out;
    encode_ok(&out, 5, 0, golden_recs, 2);
    ck_assert_uint_eq(out.len, sizeof golden);
    ck_assert_int_eq(memcmp(out.data, golden, sizeof golden), 0);
    /* The CRC field is crc32c over [8, end) and nothing else. */
    ck_assert_uint_eq(pulse_get_be32(out.data + 4), pulse_crc32c(0, out.data + 8, out.len - 8));
    ck_assert_uint_eq(pulse_get_be32(out.data + 4), 0x0a919950u);
    ck_assert_uint_eq(pulse_batch_encoded_size(golden_recs, 2), sizeof golden);

    struct pulse_batch_header hdr;
    int64_t last = -1;
    ck_assert_int_eq(pulse_batch_verify(golden, sizeof golden, &hdr, &last), PULSE_OK);
    ck_assert_int_eq(hdr.base_offset, 5);
    ck_assert_uint_eq(hdr.batch_len, 63);
    ck_assert_uint_eq(pulse_batch_total_size(&hdr), sizeof golden);
    ck_assert_int_eq(hdr.first_timestamp, 1000);
    ck_assert_int_eq(hdr.last_timestamp, 1005);
    ck_assert_uint_eq(hdr.record_count, 2);
    ck_assert_int_eq(last, 6);
    pulse_buf_fini(&out);
}
END_TEST

START_TEST(test_round_trip_keeps_every_field)
{
    static const uint8_t bin[] = {0x00, 0xff, 0x80, 0x0a};
    struct pulse_header_in h2[] = {
        {(const uint8_t *)"trace", 5, (const uint8_t *)"abc", 3},
        {(const uint8_t *)"nullval", 7, NULL, PULSE_BATCH_NULL},
        {(const uint8_t *)"", 0, (const uint8_t *)"", 0},
    };
    struct pulse_record_in recs[] = {
        /* ordinary keyed record */
        {1764400000000, 0, (const uint8_t *)"user-42", 7, (const uint8_t *)"hello", 5, NULL, 0},
        /* tombstone: key, null value */
        {1764400000001, 0, (const uint8_t *)"user-42", 7, NULL, PULSE_BATCH_NULL, NULL, 0},
        /* empty but non-null value, null key, headers incl. a null value */
        {1764399999000, 0, NULL, PULSE_BATCH_NULL, (const uint8_t *)"", 0, h2, 3},
        /* binary key and value */
        {1764400000500, 0, bin, sizeof bin, bin, sizeof bin, NULL, 0},
    };
    size_t n = sizeof recs / sizeof recs[0];
    struct pulse_buf out;
    encode_ok(&out, 1000000, 0, recs, n);
    ck_assert_uint_eq(out.len, pulse_batch_encoded_size(recs, n));

    struct pulse_batch_header hdr;
    int64_t last;
    ck_assert_int_eq(pulse_batch_verify(out.data, out.len, &hdr, &last), PULSE_OK);
    ck_assert_uint_eq(hdr.magic, 1);
    ck_assert_uint_eq(hdr.version, 1);
    ck_assert_uint_eq(hdr.flags, 0);
    ck_assert_uint_eq(hdr.producer_id, 0);
    ck_assert_uint_eq(hdr.producer_epoch, 0);
    ck_assert_int_eq(hdr.base_sequence, 0);
    ck_assert_int_eq(hdr.first_timestamp, 1764400000000);
    ck_assert_int_eq(hdr.last_timestamp, 1764400000500);
    ck_assert_int_eq(last, 1000003);

    struct pulse_batch_iter it;
    struct pulse_record_view rec;
    ck_assert_int_eq(pulse_batch_iter_init(&it, out.data, out.len), PULSE_OK);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(pulse_batch_iter_next(&it, &rec), PULSE_OK);
        ck_assert_int_eq(rec.offset, 1000000 + (int64_t)i);
        ck_assert_int_eq(rec.timestamp, recs[i].timestamp);
        ck_assert_uint_eq(rec.attributes, 0);
        ck_assert_uint_eq(rec.key_len, recs[i].key_len);
        if (recs[i].key_len == PULSE_BATCH_NULL)
            ck_assert_ptr_null(rec.key);
        else
            ck_assert_int_eq(memcmp(rec.key, recs[i].key, rec.key_len), 0);
        ck_assert_uint_eq(rec.value_len, recs[i].value_len);
        if (recs[i].value_len == PULSE_BATCH_NULL) {
            ck_assert_ptr_null(rec.value);
        } else {
            /* A zero-length value is present, not null. */
            ck_assert_ptr_nonnull(rec.value);
            ck_assert_int_eq(memcmp(rec.value, recs[i].value, rec.value_len), 0);
        }
        ck_assert_uint_eq(rec.header_count, recs[i].header_count);
        size_t pos = 0;
        struct pulse_header_view hv;
        for (uint32_t h = 0; h < recs[i].header_count; h++) {
            ck_assert_int_eq(pulse_record_header_next(&rec, &pos, &hv), PULSE_OK);
            ck_assert_uint_eq(hv.key_len, recs[i].headers[h].key_len);
            ck_assert_int_eq(memcmp(hv.key, recs[i].headers[h].key, hv.key_len), 0);
            ck_assert_uint_eq(hv.value_len, recs[i].headers[h].value_len);
            if (hv.value_len == PULSE_BATCH_NULL)
                ck_assert_ptr_null(hv.value);
            else
                ck_assert_int_eq(memcmp(hv.value, recs[i].headers[h].value, hv.value_len), 0);
        }
        ck_assert_int_eq(pulse_record_header_next(&rec, &pos, &hv), PULSE_EOF);
    }
    ck_assert_int_eq(pulse_batch_iter_next(&it, &rec), PULSE_EOF);
    pulse_buf_fini(&out);
}
END_TEST

START_TEST(test_reserved_fields_are_carried_as_they_are)
{
    uint8_t *b = dup_bytes(golden, sizeof golden);
    pulse_put_be32(b + 40, 0xdeadbeefu);
    pulse_put_be32(b + 44, 7);
    pulse_put_be32(b + 48, (uint32_t)-3);
    b[REC0_POS + 4] = 0x5a; /* attributes */
    refresh_crc(b, sizeof golden);
    struct pulse_batch_header hdr;
    ck_assert_int_eq(pulse_batch_verify(b, sizeof golden, &hdr, NULL), PULSE_OK);
    ck_assert_uint_eq(hdr.producer_id, 0xdeadbeefu);
    ck_assert_uint_eq(hdr.producer_epoch, 7);
    ck_assert_int_eq(hdr.base_sequence, -3);
    struct pulse_batch_iter it;
    struct pulse_record_view rec;
    ck_assert_int_eq(pulse_batch_iter_init(&it, b, sizeof golden), PULSE_OK);
    ck_assert_int_eq(pulse_batch_iter_next(&it, &rec), PULSE_OK);
    ck_assert_uint_eq(rec.attributes, 0x5a);
    pulse_free(b);
}
END_TEST

START_TEST(test_flipped_byte_is_detected_at_every_position)
{
    for (size_t i = 0; i < sizeof golden; i++) {
        uint8_t *b = dup_bytes(golden, sizeof golden);
        b[i] ^= 0xff;
        pulse_status_t st = pulse_batch_verify(b, sizeof golden, NULL, NULL);
        /* A flipped batchLen may claim more bytes than we hold: that reads as
         * a torn batch (EOF); everything else is corruption. */
        if (i >= 16 && i < 20)
            ck_assert_msg(st == PULSE_CORRUPT || st == PULSE_EOF, "byte %zu: %s", i, pulse_status_name(st));
        else
            ck_assert_msg(st == PULSE_CORRUPT, "byte %zu: %s", i, pulse_status_name(st));
        pulse_free(b);
    }
}
END_TEST

START_TEST(test_single_bit_flips_in_the_crc_range_are_detected)
{
    for (size_t i = 8; i < sizeof golden; i++) {
        for (int bit = 0; bit < 8; bit++) {
            uint8_t *b = dup_bytes(golden, sizeof golden);
            b[i] ^= (uint8_t)(1u << bit);
            pulse_status_t st = pulse_batch_verify(b, sizeof golden, NULL, NULL);
            ck_assert_msg(st == PULSE_CORRUPT || st == PULSE_EOF, "byte %zu bit %d", i, bit);
            pulse_free(b);
        }
    }
}
END_TEST

START_TEST(test_truncation_at_every_length_is_eof)
{
    struct pulse_batch_header hdr;
    for (size_t len = 0; len < sizeof golden; len++) {
        uint8_t *b = dup_bytes(golden, len);
        ck_assert_msg(pulse_batch_verify(b, len, &hdr, NULL) == PULSE_EOF, "len %zu", len);
        ck_assert_int_eq(pulse_batch_parse_header(b, len, &hdr), PULSE_EOF);
        struct pulse_batch_iter it;
        ck_assert_int_eq(pulse_batch_iter_init(&it, b, len), PULSE_EOF);
        pulse_free(b);
    }
    /* Extra bytes after a batch are the next batch's business. */
    uint8_t twice[sizeof golden * 2];
    memcpy(twice, golden, sizeof golden);
    memcpy(twice + sizeof golden, golden, sizeof golden);
    ck_assert_int_eq(pulse_batch_verify(twice, sizeof twice, &hdr, NULL), PULSE_OK);
    ck_assert_uint_eq(pulse_batch_total_size(&hdr), sizeof golden);
}
END_TEST

/* Writes v at pos, re-CRCs, verifies an exact-size copy. */
static pulse_status_t verify_with_u32(size_t pos, uint32_t v)
{
    uint8_t *b = dup_bytes(golden, sizeof golden);
    pulse_put_be32(b + pos, v);
    refresh_crc(b, sizeof golden);
    pulse_status_t st = pulse_batch_verify(b, sizeof golden, NULL, NULL);
    pulse_free(b);
    return st;
}

START_TEST(test_bad_lengths_are_corrupt_even_with_a_matching_crc)
{
    /* record length one short, one long, huge, below the minimum */
    ck_assert_int_eq(verify_with_u32(REC0_POS, 22), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(REC0_POS, 24), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(REC0_POS, 0xfffffff0u), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(REC0_POS, 3), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(REC1_POS, 0), PULSE_CORRUPT);
    /* key length past the record, value length past the record */
    ck_assert_int_eq(verify_with_u32(REC0_POS + 13, 2), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(REC0_POS + 13, 0xfffffffeu), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(REC0_POS + 18, 0x7fffffffu), PULSE_CORRUPT);
    /* key shrunk to fit exactly is still short of the record length */
    ck_assert_int_eq(verify_with_u32(REC0_POS + 13, 0), PULSE_CORRUPT);
    /* header count past the bytes, header key null, header value too long */
    ck_assert_int_eq(verify_with_u32(REC1_POS + 22, 2), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(REC1_POS + 22, 0xffffffffu), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(REC1_POS + 22, 0), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(REC1_POS + 26, PULSE_BATCH_NULL), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(REC1_POS + 31, 2), PULSE_CORRUPT);
    /* a null header value leaves the old value byte unaccounted for */
    ck_assert_int_eq(verify_with_u32(REC1_POS + 31, PULSE_BATCH_NULL), PULSE_CORRUPT);
    /* recordCount not matching the records present */
    ck_assert_int_eq(verify_with_u32(36, 1), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(36, 3), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(36, 0), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(36, 0xffffffffu), PULSE_CORRUPT);
    /* batchLen cutting a record short; batchLen beyond what we hold is torn */
    ck_assert_int_eq(verify_with_u32(16, 62), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(16, 27), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(16, 64), PULSE_EOF);
    ck_assert_int_eq(verify_with_u32(16, 0xffffffffu), PULSE_EOF);
}
END_TEST

START_TEST(test_records_must_fill_batch_len_exactly)
{
    /* A batch with trailing slack inside batchLen: grow batchLen by 4 and add
     * four zero bytes; the CRC matches, the framing does not. */
    uint8_t b[sizeof golden + 4];
    memcpy(b, golden, sizeof golden);
    memset(b + sizeof golden, 0, 4);
    pulse_put_be32(b + 16, 63 + 4);
    refresh_crc(b, sizeof b);
    ck_assert_int_eq(verify_copy(b, sizeof b), PULSE_CORRUPT);
}
END_TEST

START_TEST(test_bad_magic_version_and_flags_are_corrupt)
{
    uint8_t b[sizeof golden];
    struct pulse_batch_header hdr;
    memcpy(b, golden, sizeof b);
    b[0] = 0x02;
    ck_assert_int_eq(pulse_batch_parse_header(b, sizeof b, &hdr), PULSE_CORRUPT);
    memcpy(b, golden, sizeof b);
    b[1] = 0x02;
    ck_assert_int_eq(pulse_batch_parse_header(b, sizeof b, &hdr), PULSE_CORRUPT);
    /* every compression codec nobody writes (2-7); 1 (zlib) on plain
     * records parses but is no deflate stream */
    for (uint16_t codec = 2; codec <= 7; codec++) {
        memcpy(b, golden, sizeof b);
        pulse_put_be16(b + 2, codec);
        ck_assert_int_eq(pulse_batch_parse_header(b, sizeof b, &hdr), PULSE_CORRUPT);
    }
    memcpy(b, golden, sizeof b);
    pulse_put_be16(b + 2, 0x0001);
    ck_assert_int_eq(pulse_batch_verify(b, sizeof b, &hdr, NULL), PULSE_CORRUPT);
    memcpy(b, golden, sizeof b);
    pulse_put_be16(b + 2, 0x0100);
    ck_assert_int_eq(pulse_batch_parse_header(b, sizeof b, &hdr), PULSE_CORRUPT);
    /* a negative base offset */
    memcpy(b, golden, sizeof b);
    pulse_put_be64(b + 8, (uint64_t)-1);
    ck_assert_int_eq(pulse_batch_parse_header(b, sizeof b, &hdr), PULSE_CORRUPT);
    /* more records than batchLen could hold */
    memcpy(b, golden, sizeof b);
    pulse_put_be32(b + 36, 3);
    ck_assert_int_eq(pulse_batch_parse_header(b, sizeof b, &hdr), PULSE_CORRUPT);
}
END_TEST

START_TEST(test_contiguous_batch_refuses_offset_delta_not_equal_to_index)
{
    /* record 1 claims delta 2 (== recordCount) and then 0 (a duplicate) */
    ck_assert_int_eq(verify_with_u32(REC1_POS + 9, 2), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(REC1_POS + 9, 0), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(REC1_POS + 9, 0x7fffffffu), PULSE_CORRUPT);
    ck_assert_int_eq(verify_with_u32(REC0_POS + 9, 1), PULSE_CORRUPT);
    /* the untouched deltas pass */
    ck_assert_int_eq(verify_with_u32(REC1_POS + 9, 1), PULSE_OK);
}
END_TEST

START_TEST(test_sparse_batch_allows_gaps_below_2_31)
{
    struct pulse_record_in recs[3] = {
        {10, 0, (const uint8_t *)"a", 1, (const uint8_t *)"1", 1, NULL, 0},
        {11, 7, (const uint8_t *)"b", 1, (const uint8_t *)"2", 1, NULL, 0},
        {12, 0x7fffffffu, (const uint8_t *)"c", 1, (const uint8_t *)"3", 1, NULL, 0},
    };
    struct pulse_buf out;
    encode_ok(&out, 100, PULSE_BATCH_FLAG_SPARSE, recs, 3);
    struct pulse_batch_header hdr;
    int64_t last;
    ck_assert_int_eq(pulse_batch_verify(out.data, out.len, &hdr, &last), PULSE_OK);
    ck_assert_uint_eq(hdr.flags, PULSE_BATCH_FLAG_SPARSE);
    ck_assert_int_eq(last, 100 + 0x7fffffffLL);
    struct pulse_batch_iter it;
    struct pulse_record_view rec;
    ck_assert_int_eq(pulse_batch_iter_init(&it, out.data, out.len), PULSE_OK);
    ck_assert_int_eq(pulse_batch_iter_next(&it, &rec), PULSE_OK);
    ck_assert_int_eq(rec.offset, 100);
    ck_assert_int_eq(pulse_batch_iter_next(&it, &rec), PULSE_OK);
    ck_assert_int_eq(rec.offset, 107);
    ck_assert_int_eq(pulse_batch_iter_next(&it, &rec), PULSE_OK);
    ck_assert_int_eq(rec.offset, 100 + 0x7fffffffLL);
    ck_assert_int_eq(pulse_batch_iter_next(&it, &rec), PULSE_EOF);

    /* The same bytes without the sparse flag are refused: delta 7 >= count. */
    uint8_t *b = dup_bytes(out.data, out.len);
    pulse_put_be16(b + 2, 0);
    ck_assert_int_eq(pulse_batch_verify(b, out.len, NULL, NULL), PULSE_CORRUPT);
    pulse_free(b);
    pulse_buf_fini(&out);
}
END_TEST

START_TEST(test_sparse_batch_refuses_delta_2_31_and_non_increasing_deltas)
{
    struct pulse_record_in recs[2] = {
        {10, 5, (const uint8_t *)"a", 1, (const uint8_t *)"1", 1, NULL, 0},
        {11, 0x80000000u, (const uint8_t *)"b", 1, (const uint8_t *)"2", 1, NULL, 0},
    };
    struct pulse_buf out;
    pulse_buf_init(&out, BUF_MAX);
    ck_assert_int_eq(pulse_batch_encode(&out, 0, PULSE_BATCH_FLAG_SPARSE, recs, 2), PULSE_INVALID);
    recs[1].offset_delta = 5;
    ck_assert_int_eq(pulse_batch_encode(&out, 0, PULSE_BATCH_FLAG_SPARSE, recs, 2), PULSE_INVALID);
    recs[1].offset_delta = 4;
    ck_assert_int_eq(pulse_batch_encode(&out, 0, PULSE_BATCH_FLAG_SPARSE, recs, 2), PULSE_INVALID);
    ck_assert_uint_eq(out.len, 0);

    /* Decoder side: damage a valid sparse batch and re-CRC it. */
    recs[1].offset_delta = 6;
    ck_assert_int_eq(pulse_batch_encode(&out, 0, PULSE_BATCH_FLAG_SPARSE, recs, 2), PULSE_OK);
    size_t rec1 = PULSE_BATCH_HEADER_SIZE + 4 + 21 + 2;
    static const uint32_t bad[] = {0x80000000u, 0xffffffffu, 5, 4};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *b = dup_bytes(out.data, out.len);
        ck_assert_uint_eq(pulse_get_be32(b + rec1 + 9), 6);
        pulse_put_be32(b + rec1 + 9, bad[i]);
        refresh_crc(b, out.len);
        ck_assert_msg(pulse_batch_verify(b, out.len, NULL, NULL) == PULSE_CORRUPT, "delta %u", bad[i]);
        pulse_free(b);
    }
    pulse_buf_fini(&out);
}
END_TEST

START_TEST(test_timestamp_span_beyond_int32_is_range_and_appends_nothing)
{
    struct pulse_record_in recs[2] = {
        {1000, 0, NULL, PULSE_BATCH_NULL, (const uint8_t *)"x", 1, NULL, 0},
        {1000 + (int64_t)INT32_MAX + 1, 0, NULL, PULSE_BATCH_NULL, (const uint8_t *)"y", 1, NULL, 0},
    };
    struct pulse_buf out;
    pulse_buf_init(&out, BUF_MAX);
    ck_assert_int_eq(pulse_buf_append(&out, "keep", 4), PULSE_OK);
    ck_assert_int_eq(pulse_batch_encode(&out, 0, 0, recs, 2), PULSE_RANGE);
    recs[1].timestamp = 1000 + (int64_t)INT32_MIN - 1;
    ck_assert_int_eq(pulse_batch_encode(&out, 0, 0, recs, 2), PULSE_RANGE);
    /* A span that overflows int64 itself is refused the same way. */
    recs[0].timestamp = INT64_MIN;
    recs[1].timestamp = INT64_MAX;
    ck_assert_int_eq(pulse_batch_encode(&out, 0, 0, recs, 2), PULSE_RANGE);
    ck_assert_uint_eq(out.len, 4);
    ck_assert_int_eq(memcmp(out.data, "keep", 4), 0);
    pulse_buf_fini(&out);
}
END_TEST

START_TEST(test_timestamp_span_of_exactly_int32_is_accepted)
{
    struct pulse_record_in recs[3] = {
        {5000000000, 0, NULL, PULSE_BATCH_NULL, (const uint8_t *)"x", 1, NULL, 0},
        {5000000000 + (int64_t)INT32_MAX, 0, NULL, PULSE_BATCH_NULL, (const uint8_t *)"y", 1, NULL, 0},
        {5000000000 + (int64_t)INT32_MIN, 0, NULL, PULSE_BATCH_NULL, (const uint8_t *)"z", 1, NULL, 0},
    };
    struct pulse_buf out;
    encode_ok(&out, 0, 0, recs, 3);
    struct pulse_batch_iter it;
    struct pulse_record_view rec;
    ck_assert_int_eq(pulse_batch_verify(out.data, out.len, NULL, NULL), PULSE_OK);
    ck_assert_int_eq(pulse_batch_iter_init(&it, out.data, out.len), PULSE_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(pulse_batch_iter_next(&it, &rec), PULSE_OK);
        ck_assert_int_eq(rec.timestamp, recs[i].timestamp);
    }
    pulse_buf_fini(&out);
}
END_TEST

START_TEST(test_encoder_refuses_bad_flags_and_arguments)
{
    struct pulse_header_in nullkey = {NULL, PULSE_BATCH_NULL, (const uint8_t *)"v", 1};
    struct pulse_record_in rec = {1, 0, NULL, PULSE_BATCH_NULL, (const uint8_t *)"v", 1, NULL, 0};
    struct pulse_buf out;
    pulse_buf_init(&out, BUF_MAX);
    ck_assert_int_eq(pulse_batch_encode(&out, 0, 0x0002, &rec, 1), PULSE_INVALID);
    ck_assert_int_eq(pulse_batch_encode(&out, 0, 0x000f, &rec, 1), PULSE_INVALID);
    ck_assert_int_eq(pulse_batch_encode(&out, 0, 0x8000, &rec, 1), PULSE_INVALID);
    ck_assert_int_eq(pulse_batch_encode(&out, 0, 0, &rec, 0), PULSE_INVALID);
    ck_assert_int_eq(pulse_batch_encode(&out, -1, 0, &rec, 1), PULSE_INVALID);
    rec.headers = &nullkey;
    rec.header_count = 1;
    ck_assert_int_eq(pulse_batch_encode(&out, 0, 0, &rec, 1), PULSE_INVALID);
    ck_assert_uint_eq(out.len, 0);
    /* A cap too small for the batch: TOO_LARGE, buffer unchanged. */
    struct pulse_buf small;
    pulse_buf_init(&small, 60);
    rec.headers = NULL;
    rec.header_count = 0;
    ck_assert_int_eq(pulse_batch_encode(&small, 0, 0, &rec, 1), PULSE_TOO_LARGE);
    ck_assert_uint_eq(small.len, 0);
    pulse_buf_fini(&small);
    pulse_buf_fini(&out);
}
END_TEST

START_TEST(test_set_base_offset_rewrites_offsets_and_keeps_crc_valid)
{
    struct pulse_buf out;
    encode_ok(&out, 0, 0, golden_recs, 2);
    pulse_batch_set_base_offset(out.data, out.len, 123456789012LL);
    struct pulse_batch_header hdr;
    int64_t last;
    ck_assert_int_eq(pulse_batch_verify(out.data, out.len, &hdr, &last), PULSE_OK);
    ck_assert_int_eq(hdr.base_offset, 123456789012LL);
    ck_assert_int_eq(last, 123456789013LL);
    pulse_batch_set_base_offset(out.data, out.len, 5);
    ck_assert_int_eq(memcmp(out.data, golden, sizeof golden), 0);
    pulse_buf_fini(&out);
}
END_TEST

/* n records of vlen-byte values, encoded at base 0. */
static void encode_big(struct pulse_buf *out, size_t n, size_t vlen)
{
    static uint8_t value[4096];
    struct pulse_record_in recs[200];
    ck_assert_uint_le(n, 200);
    ck_assert_uint_le(vlen, sizeof value);
    for (size_t i = 0; i < sizeof value; i++)
        value[i] = (uint8_t)(i * 131 + 7);
    for (size_t i = 0; i < n; i++)
        recs[i] = (struct pulse_record_in){(int64_t)(1000 + i), 0,    NULL, PULSE_BATCH_NULL, value + i,
                                           (uint32_t)vlen,      NULL, 0};
    encode_ok(out, 0, 0, recs, n);
}

/* The header rewrites patch the CRC rather than recompute it: on batches of
 * every size class of the CRC paths, the patched CRC is the recomputed one,
 * the batch verifies, and a byte flipped afterwards still fails. */
START_TEST(test_header_rewrites_keep_the_crc_of_large_batches_valid)
{
    static const size_t shapes[][2] = {{1, 0}, {1, 256}, {100, 256}, {200, 3000}, {3, 700}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        struct pulse_buf out;
        struct pulse_batch_header hdr;
        encode_big(&out, shapes[s][0], shapes[s][1]);
        pulse_batch_set_producer(out.data, out.len, 0xfeedf00du, 3, -9);
        pulse_batch_set_base_offset(out.data, out.len, 987654321LL + (int64_t)s);
        ck_assert_uint_eq(pulse_get_be32(out.data + 4), pulse_crc32c(0, out.data + 8, out.len - 8));
        ck_assert_int_eq(pulse_batch_verify(out.data, out.len, &hdr, NULL), PULSE_OK);
        ck_assert_int_eq(hdr.base_offset, 987654321LL + (int64_t)s);
        ck_assert_uint_eq(hdr.producer_id, 0xfeedf00du);
        ck_assert_int_eq(hdr.base_sequence, -9);
        out.data[out.len - 1] ^= 0x40;
        ck_assert_int_eq(pulse_batch_verify(out.data, out.len, NULL, NULL), PULSE_CORRUPT);
        pulse_buf_fini(&out);
    }
}
END_TEST

/* A batch damaged before its header is rewritten stays damaged: the rewrite
 * does not bless the damage with a fresh CRC. */
START_TEST(test_header_rewrite_of_a_damaged_batch_does_not_hide_the_damage)
{
    struct pulse_buf out;
    encode_big(&out, 100, 256);
    out.data[out.len / 2] ^= 0x01;
    pulse_batch_set_base_offset(out.data, out.len, 42);
    ck_assert_int_eq(pulse_batch_verify(out.data, out.len, NULL, NULL), PULSE_CORRUPT);
    pulse_batch_set_producer(out.data, out.len, 1, 2, 3);
    ck_assert_int_eq(pulse_batch_verify(out.data, out.len, NULL, NULL), PULSE_CORRUPT);
    out.data[out.len / 2] ^= 0x01;
    ck_assert_int_eq(pulse_batch_verify(out.data, out.len, NULL, NULL), PULSE_OK);
    pulse_buf_fini(&out);
}
END_TEST

START_TEST(test_offsets_near_int64_max_are_corrupt_not_overflow)
{
    uint8_t *b = dup_bytes(golden, sizeof golden);
    pulse_put_be64(b + 8, (uint64_t)INT64_MAX); /* record 1 would be INT64_MAX + 1 */
    refresh_crc(b, sizeof golden);
    ck_assert_int_eq(pulse_batch_verify(b, sizeof golden, NULL, NULL), PULSE_CORRUPT);
    pulse_put_be64(b + 8, 5);
    pulse_put_be64(b + 20, (uint64_t)INT64_MAX); /* record 1 ts would overflow */
    refresh_crc(b, sizeof golden);
    ck_assert_int_eq(pulse_batch_verify(b, sizeof golden, NULL, NULL), PULSE_CORRUPT);
    pulse_free(b);
}
END_TEST

START_TEST(test_encoded_size_matches_the_encoding)
{
    uint8_t big[300];
    memset(big, 'q', sizeof big);
    struct pulse_header_in hs[2] = {{big, 17, big, 250}, {big, 0, NULL, PULSE_BATCH_NULL}};
    struct pulse_record_in recs[5];
    for (size_t n = 1; n <= 5; n++) {
        for (size_t i = 0; i < n; i++) {
            recs[i] = (struct pulse_record_in){(int64_t)i,       0, big, (uint32_t)(i * 3), big, (uint32_t)(i * 61), hs,
                                               (uint32_t)(i % 3)};
            if (i == 2)
                recs[i].key_len = PULSE_BATCH_NULL;
        }
        struct pulse_buf out;
        encode_ok(&out, 0, 0, recs, n);
        ck_assert_uint_eq(out.len, pulse_batch_encoded_size(recs, n));
        ck_assert_int_eq(pulse_batch_verify(out.data, out.len, NULL, NULL), PULSE_OK);
        pulse_buf_fini(&out);
    }
}
END_TEST

/* Walks everything the decoder will hand out and touches every byte of every
 * returned slice, so ASan flags any pointer outside [b, b + len). */
static unsigned walk_all(const uint8_t *b, size_t len)
{
    unsigned sum = 0;
    struct pulse_batch_header hdr;
    (void)pulse_batch_parse_header(b, len, &hdr);
    (void)pulse_batch_verify(b, len, &hdr, NULL);
    struct pulse_batch_iter it;
    if (pulse_batch_iter_init(&it, b, len) != PULSE_OK)
        return 0;
    struct pulse_record_view rec;
    while (pulse_batch_iter_next(&it, &rec) == PULSE_OK) {
        if (rec.key != NULL)
            for (uint32_t i = 0; i < rec.key_len; i++)
                sum += rec.key[i];
        if (rec.value != NULL)
            for (uint32_t i = 0; i < rec.value_len; i++)
                sum += rec.value[i];
        size_t pos = 0;
        struct pulse_header_view hv;
        while (pulse_record_header_next(&rec, &pos, &hv) == PULSE_OK) {
            for (uint32_t i = 0; i < hv.key_len; i++)
                sum += hv.key[i];
            if (hv.value != NULL)
                for (uint32_t i = 0; i < hv.value_len; i++)
                    sum += hv.value[i];
        }
    }
    return sum;
}

START_TEST(test_random_mutations_never_crash_or_overread)
{
    unsigned seed = 0x5eed1234u;
    const char *env = getenv("PULSE_TEST_SEED");
    if (env != NULL)
        seed = (unsigned)strtoul(env, NULL, 0);
    fprintf(stderr, "check_batch: mutation seed 0x%x (set PULSE_TEST_SEED to replay)\n", seed);

    /* Valid starting points: the golden batch and a larger mixed one. */
    struct pulse_header_in hs[] = {
        {(const uint8_t *)"a", 1, (const uint8_t *)"b", 1},
        {(const uint8_t *)"n", 1, NULL, PULSE_BATCH_NULL},
    };
    struct pulse_record_in recs[6];
    for (int i = 0; i < 6; i++)
        recs[i] = (struct pulse_record_in){100 + i,
                                           (uint32_t)(i * 3),
                                           (const uint8_t *)"key",
                                           (uint32_t)(i % 4),
                                           (const uint8_t *)"value-bytes",
                                           (uint32_t)(i * 2),
                                           hs,
                                           (uint32_t)(i % 3)};
    recs[3].value_len = PULSE_BATCH_NULL;
    recs[4].key_len = PULSE_BATCH_NULL;
    struct pulse_buf mixed, sparse;
    encode_ok(&mixed, 42, 0, recs, 6);
    encode_ok(&sparse, 42, PULSE_BATCH_FLAG_SPARSE, recs, 6);
    const uint8_t *seeds[3] = {golden, mixed.data, sparse.data};
    size_t seed_lens[3] = {sizeof golden, mixed.len, sparse.len};
    unsigned ok = 0;

    for (int iter = 0; iter < 20000; iter++) {
        int which = rand_r(&seed) % 3;
        size_t len = seed_lens[which];
        uint8_t *b = dup_bytes(seeds[which], len);
        int nmut = 1 + rand_r(&seed) % 4;
        for (int m = 0; m < nmut; m++) {
            size_t pos = (size_t)rand_r(&seed) % len;
            switch (rand_r(&seed) % 4) {
            case 0:
                b[pos] ^= (uint8_t)(1u << (rand_r(&seed) % 8));
                break;
            case 1:
                b[pos] = (uint8_t)rand_r(&seed);
                break;
            case 2: {
                /* An interesting 32-bit value over a length-like field. */
                static const uint32_t vals[] = {0, 1, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu, 21, 25};
                if (pos + 4 <= len)
                    pulse_put_be32(b + pos, vals[rand_r(&seed) % 8]);
                break;
            }
            default:
                len = pos; /* truncate */
                break;
            }
            if (len == 0)
                break;
        }
        /* Half the time, make the CRC match so the framing rules are hit. */
        if (len >= PULSE_BATCH_HEADER_SIZE && rand_r(&seed) % 2)
            refresh_crc(b, len);
        uint8_t *exact = dup_bytes(b, len);
        pulse_free(b);
        (void)walk_all(exact, len);
        if (pulse_batch_verify(exact, len, NULL, NULL) == PULSE_OK)
            ok++;
        pulse_free(exact);
    }
    /* Some mutations (a flip inside a value, re-CRC'd) leave a valid batch;
     * if none did, the loop was not exercising the decoder's accept path. */
    ck_assert_uint_gt(ok, 0);
    pulse_buf_fini(&mixed);
    pulse_buf_fini(&sparse);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("batch");
    TCase *tc = tcase_create("codec");
    tcase_add_test(tc, test_golden_bytes_match_the_contract_layout);
    tcase_add_test(tc, test_round_trip_keeps_every_field);
    tcase_add_test(tc, test_reserved_fields_are_carried_as_they_are);
    tcase_add_test(tc, test_flipped_byte_is_detected_at_every_position);
    tcase_add_test(tc, test_single_bit_flips_in_the_crc_range_are_detected);
    tcase_add_test(tc, test_truncation_at_every_length_is_eof);
    tcase_add_test(tc, test_bad_lengths_are_corrupt_even_with_a_matching_crc);
    tcase_add_test(tc, test_records_must_fill_batch_len_exactly);
    tcase_add_test(tc, test_bad_magic_version_and_flags_are_corrupt);
    tcase_add_test(tc, test_contiguous_batch_refuses_offset_delta_not_equal_to_index);
    tcase_add_test(tc, test_sparse_batch_allows_gaps_below_2_31);
    tcase_add_test(tc, test_sparse_batch_refuses_delta_2_31_and_non_increasing_deltas);
    tcase_add_test(tc, test_timestamp_span_beyond_int32_is_range_and_appends_nothing);
    tcase_add_test(tc, test_timestamp_span_of_exactly_int32_is_accepted);
    tcase_add_test(tc, test_encoder_refuses_bad_flags_and_arguments);
    tcase_add_test(tc, test_set_base_offset_rewrites_offsets_and_keeps_crc_valid);
    tcase_add_test(tc, test_header_rewrites_keep_the_crc_of_large_batches_valid);
    tcase_add_test(tc, test_header_rewrite_of_a_damaged_batch_does_not_hide_the_damage);
    tcase_add_test(tc, test_offsets_near_int64_max_are_corrupt_not_overflow);
    tcase_add_test(tc, test_encoded_size_matches_the_encoding);
    tcase_add_test(tc, test_random_mutations_never_crash_or_overread);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
