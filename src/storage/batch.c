/* SPDX-License-Identifier: MIT */
/*
 * batch.c - encoding and validation of record batches (storage contract
 * section 3; byte layout in docs/Format.md).
 *
 * Method. The encoder first walks its input once to check every rule and to
 * size the result, then reserves the whole batch in the output buffer and
 * writes it in place, so a refusal (bad flags, a timestamp span that does not
 * fit an int32 delta, a length that would pass 32 bits) leaves the caller's
 * buffer untouched.
 *
 * The decoder is one bounds-checked record parser (parse_record) shared by
 * pulse_batch_verify and the iterator. Every read is preceded by a check of
 * the bytes that remain, in the form "need > avail" on size_t values that
 * cannot wrap, so no input, however crafted, makes it read outside the buffer
 * it was given. Rules it enforces beyond plain framing:
 *   - a record's length field must equal the sum of its fields exactly;
 *   - the records must fill batchLen exactly and number recordCount;
 *   - a contiguous batch (no SPARSE flag) must carry offsetDelta == index of
 *     the record; the contract only asks for offsetDelta < recordCount, but we
 *     write nothing else, and the stricter rule makes a corrupt batch unable
 *     to reorder or duplicate offsets even when its CRC happens to match;
 *   - a SPARSE batch (written by compaction) must carry strictly increasing
 *     offset deltas below 2^31;
 *   - header keys may not be null (only header values may);
 *   - offsets and timestamps are computed with overflow checks, so a hostile
 *     baseOffset near INT64_MAX is CORRUPT, never undefined behaviour.
 * Flags other than SPARSE and codecs 0 (none) and 1 (zlib) are refused.
 *
 * Compression. A zlib batch's records section is the plain section's
 * length and one raw deflate stream of it. The encoder builds the plain section
 * in a temporary buffer, deflates it into the output, and stores the batch
 * plain when that does not save a byte (small batches). The reader
 * inflates, after the CRC, into a buffer of exactly the declared length
 * (capped): everything else (bytes past the stream, a short or truncated
 * stream, one that inflates further) is a CRC-valid but invalid batch; the
 * record parser then runs on the inflated bytes unchanged. Reserved header
 * fields (producer id/epoch, base sequence) and record attributes are
 * carried as they are.
 *
 * Invariant: nothing here allocates except the encoder's output buffer and,
 * for compressed batches, zlib's state, the encoder's plain copy and the
 * reader's inflated copy (at most PULSE_BATCH_INFLATED_MAX); nothing keeps
 * state between calls. Thread: any; the functions touch only
 * their arguments.
 */
#include "storage/batch.h"

#include <string.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/crc32c.h"
#include "common/debug.h"
#include "common/endian.h"
#include "common/record.h"

#ifdef PULSE_HOOKS
#include <stdatomic.h>

/* Streams inflated (a test counts them: batch.h). */
static atomic_ulong inflates;

unsigned long pulse_batch_inflate_count(void)
{
    return atomic_load(&inflates);
}
#endif

/* Offsets of the header fields (contract section 3). */
#define OFF_MAGIC 0
#define OFF_VERSION 1
#define OFF_FLAGS 2
#define OFF_CRC 4
#define OFF_BASE_OFFSET 8
#define OFF_BATCH_LEN 16
#define OFF_FIRST_TS 20
#define OFF_LAST_TS 28
#define OFF_RECORD_COUNT 36
#define OFF_PRODUCER_ID 40
#define OFF_PRODUCER_EPOCH 44
#define OFF_BASE_SEQUENCE 48

/* The CRC starts at baseOffset. */
#define CRC_START OFF_BASE_OFFSET

/* Bytes of a record after its length field when key, value and headers are
 * all empty: attributes(1) tsDelta(4) offDelta(4) keyLen(4) valueLen(4)
 * headerCount(4). */
#define RECORD_FIXED_BODY (PULSE_RECORD_MIN_SIZE - 4u)

/* zlib level of compressed batches: 3, the best of zlib's fast levels; on
 * JSON events it deflates in half the time of the default (6) for about
 * 13% more bytes (docs/Performance.md "Stored compression"). */
#define ZLIB_LEVEL 3
/* The shortest deflate stream: an empty final fixed block (2 bytes). The
 * streams are raw deflate (RFC 1951), without zlib's header and Adler-32:
 * the batch CRC already covers the stored bytes and the record framing is
 * checked after inflating, and the Adler-32 took about a tenth of the CPU
 * of a JSON fetch (docs/Performance.md "Stored compression"). */
#define ZLIB_MIN_STREAM 2u

/* Sparse offset deltas must stay below this bound (contract section 3). */
#define SPARSE_DELTA_LIMIT ((uint32_t)1 << 31)

static size_t add_size(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

/* Record body bytes (after the length field) for one input record, or
 * SIZE_MAX on overflow. */
static size_t record_body_size(const struct pulse_record_in *rec)
{
    size_t n = RECORD_FIXED_BODY;
    if (rec->key_len != PULSE_BATCH_NULL)
        n = add_size(n, rec->key_len);
    if (rec->value_len != PULSE_BATCH_NULL)
        n = add_size(n, rec->value_len);
    for (uint32_t h = 0; h < rec->header_count; h++) {
        const struct pulse_header_in *hd = &rec->headers[h];
        n = add_size(n, 8);
        if (hd->key_len != PULSE_BATCH_NULL)
            n = add_size(n, hd->key_len);
        if (hd->value_len != PULSE_BATCH_NULL)
            n = add_size(n, hd->value_len);
    }
    return n;
}

size_t pulse_batch_encoded_size(const struct pulse_record_in *recs, size_t n)
{
    size_t total = PULSE_BATCH_HEADER_SIZE;
    for (size_t i = 0; i < n; i++)
        total = add_size(total, add_size(4, record_body_size(&recs[i])));
    return total;
}

/* Checks one input record against the encoder's rules. */
static pulse_status_t check_record_in(const struct pulse_record_in *rec)
{
    if (rec->key_len != PULSE_BATCH_NULL && rec->key_len > 0 && rec->key == NULL)
        return PULSE_INVALID;
    if (rec->value_len != PULSE_BATCH_NULL && rec->value_len > 0 && rec->value == NULL)
        return PULSE_INVALID;
    if (rec->header_count > 0 && rec->headers == NULL)
        return PULSE_INVALID;
    for (uint32_t h = 0; h < rec->header_count; h++) {
        const struct pulse_header_in *hd = &rec->headers[h];
        /* A header always has a key; only its value may be null. */
        if (hd->key_len == PULSE_BATCH_NULL)
            return PULSE_INVALID;
        if (hd->key_len > 0 && hd->key == NULL)
            return PULSE_INVALID;
        if (hd->value_len != PULSE_BATCH_NULL && hd->value_len > 0 && hd->value == NULL)
            return PULSE_INVALID;
    }
    return PULSE_OK;
}

/* Writes a length-prefixed byte string (or the null marker) at p and returns
 * the position after it. */
static uint8_t *put_bytes(uint8_t *p, const uint8_t *data, uint32_t len)
{
    pulse_put_be32(p, len);
    p += 4;
    if (len != PULSE_BATCH_NULL && len > 0) {
        memcpy(p, data, len);
        p += len;
    }
    return p;
}

/*
 * Pass 1 of the encoder: validates every record and sizes the records
 * section (*len_out), before anything is written. PULSE_RANGE for a
 * timestamp more than an int32 of milliseconds from the first (a wider
 * span must be split by the caller, never wrapped into a wrong timestamp),
 * PULSE_INVALID / PULSE_TOO_LARGE as pulse_batch_encode says.
 */
static pulse_status_t size_records(int64_t base_offset, bool sparse, const struct pulse_record_in *recs, size_t n,
                                   size_t *len_out)
{
    size_t records_len = 0;
    int64_t last_offset;
    pulse_status_t st;

    for (size_t i = 0; i < n; i++) {
        const struct pulse_record_in *rec = &recs[i];
        int64_t delta;
        if (__builtin_sub_overflow(rec->timestamp, recs[0].timestamp, &delta) || delta < INT32_MIN || delta > INT32_MAX)
            return PULSE_RANGE;
        st = check_record_in(rec);
        if (st != PULSE_OK)
            return st;
        if (sparse &&
            (rec->offset_delta >= SPARSE_DELTA_LIMIT || (i > 0 && rec->offset_delta <= recs[i - 1].offset_delta)))
            return PULSE_INVALID;
        size_t body = record_body_size(rec);
        if (body > UINT32_MAX)
            return PULSE_TOO_LARGE;
        records_len = add_size(records_len, 4 + body);
    }
    if (records_len > UINT32_MAX)
        return PULSE_TOO_LARGE;
    /* The last offset must be representable, or the batch would name offsets
     * beyond int64. */
    uint32_t last_delta = sparse ? recs[n - 1].offset_delta : (uint32_t)(n - 1);
    if (__builtin_add_overflow(base_offset, (int64_t)last_delta, &last_offset))
        return PULSE_INVALID;
    *len_out = records_len;
    return PULSE_OK;
}

/* Writes the 52-byte header of a batch whose records section (records_len
 * bytes, as stored) follows it at b, and its CRC. */
static void write_header(uint8_t *b, int64_t base_offset, uint16_t flags, const struct pulse_record_in *recs, size_t n,
                         size_t records_len)
{
    size_t total = PULSE_BATCH_HEADER_SIZE + records_len;

    b[OFF_MAGIC] = PULSE_BATCH_MAGIC;
    b[OFF_VERSION] = PULSE_BATCH_VERSION;
    pulse_put_be16(b + OFF_FLAGS, flags);
    pulse_put_be64(b + OFF_BASE_OFFSET, (uint64_t)base_offset);
    pulse_put_be32(b + OFF_BATCH_LEN, (uint32_t)records_len);
    pulse_put_be64(b + OFF_FIRST_TS, (uint64_t)recs[0].timestamp);
    pulse_put_be64(b + OFF_LAST_TS, (uint64_t)recs[n - 1].timestamp);
    pulse_put_be32(b + OFF_RECORD_COUNT, (uint32_t)n);
    /* The producer fields: 0 here; an idempotent publish sets them with
     * pulse_batch_set_producer (docs/Format.md). */
    pulse_put_be32(b + OFF_PRODUCER_ID, 0);
    pulse_put_be32(b + OFF_PRODUCER_EPOCH, 0);
    pulse_put_be32(b + OFF_BASE_SEQUENCE, 0);
    pulse_put_be32(b + OFF_CRC, pulse_crc32c(0, b + CRC_START, total - CRC_START));
}

/* Pass 2 of the encoder: writes the plain records section of validated
 * records at p, which has room; nothing here can fail. */
static void write_records(uint8_t *p, bool sparse, const struct pulse_record_in *recs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct pulse_record_in *rec = &recs[i];
        uint32_t delta = sparse ? rec->offset_delta : (uint32_t)i;
        pulse_put_be32(p, (uint32_t)record_body_size(rec));
        p += 4;
        *p++ = 0; /* attributes: reserved */
        pulse_put_be32(p, (uint32_t)(int32_t)(rec->timestamp - recs[0].timestamp));
        p += 4;
        pulse_put_be32(p, delta);
        p += 4;
        p = put_bytes(p, rec->key, rec->key_len);
        p = put_bytes(p, rec->value, rec->value_len);
        pulse_put_be32(p, rec->header_count);
        p += 4;
        for (uint32_t h = 0; h < rec->header_count; h++) {
            p = put_bytes(p, rec->headers[h].key, rec->headers[h].key_len);
            p = put_bytes(p, rec->headers[h].value, rec->headers[h].value_len);
        }
    }
}

/* zlib allocates through pulse_malloc, so a failure is NOMEM and the
 * memory counts where ours does. zlib needs no zeroed memory. */
static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    if (size != 0 && items > SIZE_MAX / size)
        return NULL;
    return pulse_malloc((size_t)items * size);
}

static void z_free(voidpf opaque, voidpf p)
{
    (void)opaque;
    pulse_free(p);
}

/*
 * Deflates plain (len bytes, at most PULSE_BATCH_INFLATED_MAX) into dst,
 * which has room for cap bytes, as one raw deflate stream. *out_len gets the
 * stream's length; PULSE_TOO_LARGE when it does not fit cap (the caller
 * then stores the records plain), PULSE_NOMEM. The window is sized to the
 * input (a small batch needs neither a 32 KiB window nor the 256 KiB of
 * state a default stream allocates); a reader's 32 KiB window reads any.
 */
static pulse_status_t deflate_records(const uint8_t *plain, size_t len, uint8_t *dst, size_t cap, size_t *out_len)
{
    z_stream z;
    int wbits = 9;
    pulse_status_t st = PULSE_OK;

    while (wbits < 15 && ((size_t)1 << wbits) < len)
        wbits++;
    memset(&z, 0, sizeof z);
    z.zalloc = z_alloc;
    z.zfree = z_free;
    if (deflateInit2(&z, ZLIB_LEVEL, Z_DEFLATED, -wbits, wbits - 7, Z_DEFAULT_STRATEGY) != Z_OK)
        return PULSE_NOMEM;
    z.next_in = (Bytef *)(uintptr_t)plain;
    z.avail_in = (uInt)len;
    z.next_out = dst;
    z.avail_out = (uInt)cap;
    int zr = deflate(&z, Z_FINISH);
    if (zr == Z_STREAM_END)
        *out_len = (size_t)z.total_out;
    else
        st = zr == Z_MEM_ERROR ? PULSE_NOMEM : PULSE_TOO_LARGE;
    deflateEnd(&z);
    return st;
}

/*
 * Appends to out a compressed batch of validated records (plain records
 * section: records_len bytes, at most PULSE_BATCH_INFLATED_MAX), or the
 * plain batch when deflating does not make it smaller. Out's length
 * changes only on success.
 */
static pulse_status_t write_compressed(struct pulse_buf *out, int64_t base_offset, uint16_t flags,
                                       const struct pulse_record_in *recs, size_t n, size_t records_len)
{
    uint16_t plain_flags = flags & (uint16_t)~PULSE_BATCH_FLAG_CODEC_MASK;
    uint8_t *plain = pulse_malloc(records_len);
    size_t clen = 0;
    pulse_status_t st;

    if (plain == NULL)
        return PULSE_NOMEM;
    write_records(plain, (flags & PULSE_BATCH_FLAG_SPARSE) != 0, recs, n);
    /* Room for the plain batch: what the compressed one must beat. */
    st = pulse_buf_reserve(out, PULSE_BATCH_HEADER_SIZE + records_len);
    if (st != PULSE_OK)
        goto out;
    uint8_t *b = out->data + out->len;
    /* 4 bytes of length, and the stream must save at least one byte. */
    st = records_len > 5 ? deflate_records(plain, records_len, b + PULSE_BATCH_HEADER_SIZE + 4, records_len - 5, &clen)
                         : PULSE_TOO_LARGE;
    if (st == PULSE_OK) {
        pulse_put_be32(b + PULSE_BATCH_HEADER_SIZE, (uint32_t)records_len);
        write_header(b, base_offset, flags, recs, n, 4 + clen);
        out->len += PULSE_BATCH_HEADER_SIZE + 4 + clen;
    } else if (st == PULSE_TOO_LARGE) {
        /* Deflate did not pay: this batch is stored plain. */
        memcpy(b + PULSE_BATCH_HEADER_SIZE, plain, records_len);
        write_header(b, base_offset, plain_flags, recs, n, records_len);
        out->len += PULSE_BATCH_HEADER_SIZE + records_len;
        st = PULSE_OK;
    }
out:
    pulse_free(plain);
    return st;
}

pulse_status_t pulse_batch_encode(struct pulse_buf *out, int64_t base_offset, uint16_t flags,
                                  const struct pulse_record_in *recs, size_t n)
{
    size_t records_len = 0;
    pulse_status_t st;
    unsigned codec = flags & PULSE_BATCH_FLAG_CODEC_MASK;
    bool sparse = (flags & PULSE_BATCH_FLAG_SPARSE) != 0;

    if (out == NULL || recs == NULL || n == 0 || base_offset < 0)
        return PULSE_INVALID;
    if ((flags & (uint16_t) ~(PULSE_BATCH_FLAG_SPARSE | PULSE_BATCH_FLAG_CODEC_MASK)) != 0 ||
        (codec != PULSE_BATCH_CODEC_NONE && codec != PULSE_BATCH_CODEC_ZLIB))
        return PULSE_INVALID;
    if (n > UINT32_MAX)
        return PULSE_TOO_LARGE;
    /* Pass 1: validate everything and size the batch before touching out. */
    st = size_records(base_offset, sparse, recs, n, &records_len);
    if (st != PULSE_OK)
        return st;
    if (codec == PULSE_BATCH_CODEC_ZLIB && records_len <= PULSE_BATCH_INFLATED_MAX)
        return write_compressed(out, base_offset, flags, recs, n, records_len);
    flags &= (uint16_t)~PULSE_BATCH_FLAG_CODEC_MASK;
    st = pulse_buf_reserve(out, PULSE_BATCH_HEADER_SIZE + records_len);
    if (st != PULSE_OK)
        return st;
    /* Pass 2: write in place; nothing below can fail. */
    write_records(out->data + out->len + PULSE_BATCH_HEADER_SIZE, sparse, recs, n);
    write_header(out->data + out->len, base_offset, flags, recs, n, records_len);
    out->len += PULSE_BATCH_HEADER_SIZE + records_len;
    return PULSE_OK;
}

pulse_status_t pulse_batch_parse_header(const uint8_t *buf, size_t len, struct pulse_batch_header *hdr)
{
    pulse_status_t st = PULSE_OK;
    struct pulse_batch_header h;

    if (buf == NULL || len < PULSE_BATCH_HEADER_SIZE) {
        st = PULSE_EOF;
        goto out;
    }
    h.magic = buf[OFF_MAGIC];
    h.version = buf[OFF_VERSION];
    h.flags = pulse_get_be16(buf + OFF_FLAGS);
    h.crc = pulse_get_be32(buf + OFF_CRC);
    h.base_offset = (int64_t)pulse_get_be64(buf + OFF_BASE_OFFSET);
    h.batch_len = pulse_get_be32(buf + OFF_BATCH_LEN);
    h.first_timestamp = (int64_t)pulse_get_be64(buf + OFF_FIRST_TS);
    h.last_timestamp = (int64_t)pulse_get_be64(buf + OFF_LAST_TS);
    h.record_count = pulse_get_be32(buf + OFF_RECORD_COUNT);
    h.producer_id = pulse_get_be32(buf + OFF_PRODUCER_ID);
    h.producer_epoch = pulse_get_be32(buf + OFF_PRODUCER_EPOCH);
    h.base_sequence = (int32_t)pulse_get_be32(buf + OFF_BASE_SEQUENCE);

    /* The header is judged before its length is compared with what we hold,
     * so a garbage header reads as corruption rather than a torn tail. */
    if (h.magic != PULSE_BATCH_MAGIC || h.version != PULSE_BATCH_VERSION) {
        st = PULSE_CORRUPT;
        goto out;
    }
    /* Flags sit outside the CRC: refuse every bit we do not understand,
     * and every codec but none and zlib. */
    if ((h.flags & (uint16_t) ~(PULSE_BATCH_FLAG_SPARSE | PULSE_BATCH_FLAG_CODEC_MASK)) != 0 ||
        (h.flags & PULSE_BATCH_FLAG_CODEC_MASK) > PULSE_BATCH_CODEC_ZLIB) {
        st = PULSE_CORRUPT;
        goto out;
    }
    /* An empty batch names no offsets; we never write one. */
    if (h.record_count == 0 || h.base_offset < 0) {
        st = PULSE_CORRUPT;
        goto out;
    }
    /* The records must fit what is stored, or (compressed) what may be
     * inflated; a compressed section holds its length and a stream. */
    if ((h.flags & PULSE_BATCH_FLAG_CODEC_MASK) == PULSE_BATCH_CODEC_ZLIB
            ? (uint64_t)h.record_count * PULSE_RECORD_MIN_SIZE > PULSE_BATCH_INFLATED_MAX ||
                  h.batch_len < 4 + ZLIB_MIN_STREAM
            : (uint64_t)h.record_count * PULSE_RECORD_MIN_SIZE > h.batch_len) {
        st = PULSE_CORRUPT;
        goto out;
    }
    /* A sane header whose batch runs past len: the header is still
     * reported (a torn tail's header says how much was being written). */
    *hdr = h;
    if (len - PULSE_BATCH_HEADER_SIZE < h.batch_len)
        st = PULSE_EOF;

out:
    return st;
}

/* A cursor over [p, end) that refuses to move past end. */
struct rd {
    const uint8_t *p;
    size_t left;
};

static bool rd_u32(struct rd *r, uint32_t *v)
{
    if (r->left < 4)
        return false;
    *v = pulse_get_be32(r->p);
    r->p += 4;
    r->left -= 4;
    return true;
}

/* A length-prefixed string; null allowed when nullable. */
static bool rd_bytes(struct rd *r, bool nullable, const uint8_t **data, uint32_t *len)
{
    uint32_t n;
    if (!rd_u32(r, &n))
        return false;
    if (n == PULSE_BATCH_NULL) {
        if (!nullable)
            return false;
        *data = NULL;
        *len = n;
        return true;
    }
    if (r->left < n)
        return false;
    *data = r->p;
    *len = n;
    r->p += n;
    r->left -= n;
    return true;
}

/* Checks the framing of a header section of count headers in r. */
static bool rd_headers(struct rd *r, uint32_t count)
{
    for (uint32_t h = 0; h < count; h++) {
        const uint8_t *d;
        uint32_t n;
        if (!rd_bytes(r, false, &d, &n) || !rd_bytes(r, true, &d, &n))
            return false;
    }
    return true;
}

/*
 * Parses the record at it->pos against the iterator's batch and applies the
 * offset rules. Returns PULSE_OK and advances it, or PULSE_CORRUPT.
 * Every read runs this once per record (the check of every batch a read
 * returns walks them all), so it is kept lean: the cursor is a local
 * pointer checked against the record's end; the fixed fields (attributes,
 * deltas, the key's length) lie within the RECORD_FIXED_BODY bytes the
 * length field must cover and are read without a check each, and each
 * length is checked once against what is left (a cursor in memory moved by
 * calls took 168 instructions a record, more than the CRC of its 256-byte
 * value). It is inlined into pulse_batch_iter_next and into the CRC
 * check's walk, which keeps only the offset of the view. The fields are
 * stored into *rec one by one: a view built on the stack and copied whole
 * was read back in 16-byte pieces right after its 1- to 8-byte stores,
 * which the CPU cannot forward.
 */
static inline __attribute__((always_inline)) pulse_status_t parse_record(struct pulse_batch_iter *it,
                                                                         struct pulse_record_view *rec)
{
    const uint8_t *p = it->recs + it->pos;
    size_t left = it->recs_len - it->pos;
    uint32_t rec_len, off_delta, ts_raw, key_len, value_len, header_count;
    const uint8_t *key = NULL, *value = NULL, *headers, *end;
    int64_t offset, timestamp;
    uint8_t attributes;

    if (left < 4)
        return PULSE_CORRUPT;
    rec_len = pulse_get_be32(p);
    if (rec_len < RECORD_FIXED_BODY || rec_len > left - 4)
        return PULSE_CORRUPT;
    p += 4;
    end = p + rec_len;
    attributes = p[0];
    ts_raw = pulse_get_be32(p + 1);
    off_delta = pulse_get_be32(p + 5);
    key_len = pulse_get_be32(p + 9);
    p += 13;
    /* Left now: at least the value's length and the header count (8). */
    if (key_len != PULSE_BATCH_NULL) {
        if (key_len > (size_t)(end - p) - 8)
            return PULSE_CORRUPT;
        key = p;
        p += key_len;
    }
    value_len = pulse_get_be32(p);
    p += 4;
    if (value_len != PULSE_BATCH_NULL) {
        if (value_len > (size_t)(end - p) - 4)
            return PULSE_CORRUPT;
        value = p;
        p += value_len;
    }
    header_count = pulse_get_be32(p);
    p += 4;
    headers = p;
    if (header_count > 0) {
        struct rd body = {p, (size_t)(end - p)};
        if (!rd_headers(&body, header_count))
            return PULSE_CORRUPT;
        p = body.p;
    }
    /* The length field must account for every byte, no more, no less. */
    if (p != end)
        return PULSE_CORRUPT;

    if (it->hdr.flags & PULSE_BATCH_FLAG_SPARSE) {
        if (off_delta >= SPARSE_DELTA_LIMIT || (int64_t)off_delta <= it->last_delta)
            return PULSE_CORRUPT;
    } else if (off_delta != it->index) {
        return PULSE_CORRUPT;
    }
    if (__builtin_add_overflow(it->hdr.base_offset, (int64_t)off_delta, &offset))
        return PULSE_CORRUPT;
    if (__builtin_add_overflow(it->hdr.first_timestamp, (int64_t)(int32_t)ts_raw, &timestamp))
        return PULSE_CORRUPT;

    it->pos += 4 + (size_t)rec_len;
    it->index++;
    it->last_delta = off_delta;
    rec->offset = offset;
    rec->timestamp = timestamp;
    rec->attributes = attributes;
    rec->key = key;
    rec->key_len = key_len;
    rec->value = value;
    rec->value_len = value_len;
    rec->header_count = header_count;
    rec->headers = headers;
    rec->headers_len = (size_t)(end - headers);
    return PULSE_OK;
}

/*
 * Inflates the records section of the compressed batch it holds into
 * scratch and points it->recs there. The section is the plain length
 * (4 bytes) and one raw deflate stream; the stream must end exactly at the end of
 * the section and give exactly the declared bytes. The output buffer is
 * exactly the declared size, so no stream, however crafted (an inflate
 * bomb), makes this write or allocate more than PULSE_BATCH_INFLATED_MAX.
 */
static pulse_status_t inflate_records(struct pulse_batch_iter *it, struct pulse_buf *scratch)
{
    const uint8_t *sec = it->buf + PULSE_BATCH_HEADER_SIZE;
    uint32_t plain_len = pulse_get_be32(sec);
    z_stream z;
    pulse_status_t st;

    if (plain_len > PULSE_BATCH_INFLATED_MAX) {
        it->problem = "compressed records declare more than the 64 MiB a batch may inflate to";
        return PULSE_CORRUPT;
    }
    if ((uint64_t)it->hdr.record_count * PULSE_RECORD_MIN_SIZE > plain_len) {
        it->problem = "compressed records declare too few bytes for the batch's record count";
        return PULSE_CORRUPT;
    }
#ifdef PULSE_HOOKS
    atomic_fetch_add(&inflates, 1);
#endif
    pulse_buf_reset(scratch);
    st = pulse_buf_reserve(scratch, plain_len);
    if (st != PULSE_OK)
        return st;
    memset(&z, 0, sizeof z);
    z.zalloc = z_alloc;
    z.zfree = z_free;
    if (inflateInit2(&z, -15) != Z_OK)
        return PULSE_NOMEM;
    z.next_in = (Bytef *)(uintptr_t)(sec + 4);
    z.avail_in = it->hdr.batch_len - 4;
    z.next_out = scratch->data;
    z.avail_out = plain_len;
    int zr = inflate(&z, Z_FINISH);
    bool past = false;
    if ((zr == Z_OK || zr == Z_BUF_ERROR) && z.avail_out == 0) {
        /* The declared bytes are out but the stream has not ended: one byte
         * more tells a stream that would inflate further (a bomb, or a
         * lie) from one cut short or with only its check left to read. */
        uint8_t extra;
        z.next_out = &extra;
        z.avail_out = 1;
        zr = inflate(&z, Z_FINISH);
        past = z.avail_out == 0;
        z.avail_out = 0;
    }
    if (past)
        it->problem = "compressed records inflate past their declared length";
    else if (zr == Z_STREAM_END && z.avail_in != 0)
        it->problem = "bytes follow the end of the compressed stream";
    else if (zr == Z_STREAM_END && z.avail_out != 0)
        it->problem = "compressed records inflate to fewer bytes than declared";
    else if (zr == Z_DATA_ERROR || zr == Z_NEED_DICT)
        it->problem = "compressed records are not a valid deflate stream";
    else if (zr == Z_MEM_ERROR)
        st = PULSE_NOMEM;
    else if (zr != Z_STREAM_END)
        it->problem = "compressed stream is truncated";
    inflateEnd(&z);
    if (st == PULSE_OK && it->problem != NULL)
        st = PULSE_CORRUPT;
    if (st != PULSE_OK)
        return st;
    scratch->len = plain_len;
    it->recs = scratch->data;
    it->recs_len = plain_len;
    return PULSE_OK;
}

/* Starts it on the batch at buf, its records where they are stored. */
static pulse_status_t iter_start(struct pulse_batch_iter *it, const uint8_t *buf, size_t len)
{
    pulse_status_t st = pulse_batch_parse_header(buf, len, &it->hdr);
    if (st != PULSE_OK)
        return st;
    it->buf = buf;
    it->len = pulse_batch_total_size(&it->hdr);
    it->recs = buf + PULSE_BATCH_HEADER_SIZE;
    it->recs_len = it->hdr.batch_len;
    it->pos = 0;
    it->index = 0;
    it->last_delta = -1;
    it->problem = NULL;
    return PULSE_OK;
}

pulse_status_t pulse_batch_iter_open(struct pulse_batch_iter *it, const uint8_t *buf, size_t len,
                                     struct pulse_buf *scratch)
{
    pulse_status_t st = iter_start(it, buf, len);
    if (st != PULSE_OK || pulse_batch_codec(&it->hdr) == PULSE_BATCH_CODEC_NONE)
        return st;
    if (scratch == NULL)
        return PULSE_INVALID;
    return inflate_records(it, scratch);
}

pulse_status_t pulse_batch_iter_open_plain(struct pulse_batch_iter *it, const uint8_t *buf, size_t len,
                                           const uint8_t *plain, size_t plain_len)
{
    pulse_status_t st = iter_start(it, buf, len);
    if (st != PULSE_OK || pulse_batch_codec(&it->hdr) == PULSE_BATCH_CODEC_NONE)
        return st;
    /* The section holds its plain length first (parse_header made sure
     * the section has those 4 bytes). */
    if (plain == NULL || plain_len != pulse_get_be32(buf + PULSE_BATCH_HEADER_SIZE))
        return PULSE_INVALID;
    it->recs = plain;
    it->recs_len = plain_len;
    return PULSE_OK;
}

pulse_status_t pulse_batch_iter_init(struct pulse_batch_iter *it, const uint8_t *buf, size_t len)
{
    return pulse_batch_iter_open(it, buf, len, NULL);
}

/* The next record of it (pulse_batch_iter_next without the problem text):
 * inlined into the CRC check's walk, which uses no field of the view but
 * the offset, so the compiler drops the rest. */
static inline __attribute__((always_inline)) pulse_status_t iter_step(struct pulse_batch_iter *it,
                                                                      struct pulse_record_view *rec)
{
    if (it->index >= it->hdr.record_count)
        return it->pos == it->recs_len ? PULSE_EOF : PULSE_CORRUPT;
    if (it->pos >= it->recs_len)
        return PULSE_CORRUPT;
    return parse_record(it, rec);
}

pulse_status_t pulse_batch_iter_next(struct pulse_batch_iter *it, struct pulse_record_view *rec)
{
    pulse_status_t st = iter_step(it, rec);

    if (st == PULSE_CORRUPT && it->problem == NULL)
        it->problem = "a record has bad framing or offset, or the records do not fill the batch";
    return st;
}

pulse_status_t pulse_record_header_next(const struct pulse_record_view *rec, size_t *pos, struct pulse_header_view *hv)
{
    if (*pos >= rec->headers_len)
        return *pos == rec->headers_len ? PULSE_EOF : PULSE_CORRUPT;
    struct rd r = {rec->headers + *pos, rec->headers_len - *pos};
    struct pulse_header_view v;
    if (!rd_bytes(&r, false, &v.key, &v.key_len) || !rd_bytes(&r, true, &v.value, &v.value_len))
        return PULSE_CORRUPT;
    *pos = (size_t)(r.p - rec->headers);
    *hv = v;
    return PULSE_OK;
}

pulse_status_t pulse_batch_verify_in(const uint8_t *buf, size_t len, struct pulse_buf *scratch,
                                     struct pulse_batch_header *hdr, int64_t *last_offset_out)
{
    pulse_status_t st = PULSE_OK;
    struct pulse_batch_header h;
    struct pulse_batch_iter it;
    struct pulse_record_view rec;
    int64_t last = -1;

    st = pulse_batch_parse_header(buf, len, &h);
    if (st != PULSE_OK)
        goto out;
    /* The CRC is checked before any record is parsed or inflated: a record
     * is never trusted, even for its framing, until the frame is known
     * intact. */
    if (pulse_crc32c(0, buf + CRC_START, pulse_batch_total_size(&h) - CRC_START) != h.crc) {
        st = PULSE_CORRUPT;
        goto out;
    }
    st = pulse_batch_iter_open(&it, buf, len, scratch);
    while (st == PULSE_OK && (st = iter_step(&it, &rec)) == PULSE_OK)
        last = rec.offset;
    if (st == PULSE_EOF)
        st = PULSE_OK;

out:
    if (st == PULSE_OK) {
        if (hdr != NULL)
            *hdr = h;
        if (last_offset_out != NULL)
            *last_offset_out = last;
    }
    return st;
}

pulse_status_t pulse_batch_verify(const uint8_t *buf, size_t len, struct pulse_batch_header *hdr,
                                  int64_t *last_offset_out)
{
    struct pulse_buf scratch;

    pulse_buf_init(&scratch, PULSE_BATCH_INFLATED_MAX);
    pulse_status_t st = pulse_batch_verify_in(buf, len, &scratch, hdr, last_offset_out);
    pulse_buf_fini(&scratch);
    return st;
}

/*
 * Replaces the n header bytes at off of the whole batch at batch (total
 * bytes) with repl, and patches the stored CRC for the change instead of
 * recomputing it (crc32c.h): O(log total), and a CRC that was wrong before
 * stays wrong.
 */
static void rewrite_header(uint8_t *batch, size_t total, size_t off, const uint8_t *repl, size_t n)
{
    uint8_t old[12];
    if (n > sizeof old)
        return;
    memcpy(old, batch + off, n);
    memcpy(batch + off, repl, n);
    uint32_t crc = pulse_crc32c_patch(pulse_get_be32(batch + OFF_CRC), old, repl, n, total - off - n);
    pulse_put_be32(batch + OFF_CRC, crc);
}

/* The size of the whole batch at the start of batch, or 0 when len does not
 * hold one (a caller bug: the guard keeps it from an out-of-bounds write). */
static size_t whole_size(const uint8_t *batch, size_t len)
{
    if (batch == NULL || len < PULSE_BATCH_HEADER_SIZE)
        return 0;
    size_t total = PULSE_BATCH_HEADER_SIZE + (size_t)pulse_get_be32(batch + OFF_BATCH_LEN);
    return total > len ? 0 : total;
}

void pulse_batch_set_base_offset(uint8_t *batch, size_t len, int64_t base_offset)
{
    size_t total = whole_size(batch, len);
    uint8_t be[8];
    if (total == 0)
        return;
    pulse_put_be64(be, (uint64_t)base_offset);
    rewrite_header(batch, total, OFF_BASE_OFFSET, be, sizeof be);
}

void pulse_batch_set_producer(uint8_t *batch, size_t len, uint32_t producer_id, uint32_t producer_epoch,
                              int32_t base_sequence)
{
    size_t total = whole_size(batch, len);
    uint8_t be[12];
    if (total == 0)
        return;
    _Static_assert(OFF_PRODUCER_EPOCH == OFF_PRODUCER_ID + 4 && OFF_BASE_SEQUENCE == OFF_PRODUCER_ID + 8,
                   "the producer fields are adjacent");
    pulse_put_be32(be, producer_id);
    pulse_put_be32(be + 4, producer_epoch);
    pulse_put_be32(be + 8, (uint32_t)base_sequence);
    rewrite_header(batch, total, OFF_PRODUCER_ID, be, sizeof be);
}

static bool plain_header_next(const struct pulse_record *rec, size_t *pos, struct pulse_header *out)
{
    struct pulse_record_view rv;
    struct pulse_header_view hv;
    memset(&rv, 0, sizeof rv);
    rv.header_count = rec->header_count;
    rv.headers = rec->headers;
    rv.headers_len = rec->headers_len;
    if (pulse_record_header_next(&rv, pos, &hv) != PULSE_OK)
        return false;
    out->key = hv.key != NULL ? hv.key : (const uint8_t *)"";
    out->key_len = hv.key_len;
    out->value = hv.value;
    out->value_len = hv.value == NULL ? 0 : hv.value_len;
    return true;
}

void pulse_batch_record_plain(const struct pulse_record_view *rv, struct pulse_record *out)
{
    memset(out, 0, sizeof *out);
    out->offset = rv->offset;
    out->timestamp = rv->timestamp;
    out->key = rv->key;
    out->key_len = rv->key == NULL ? 0 : rv->key_len;
    out->value = rv->value;
    out->value_len = rv->value == NULL ? 0 : rv->value_len;
    out->header_count = rv->header_count;
    out->header_next = rv->header_count > 0 ? plain_header_next : NULL;
    out->headers = rv->headers;
    out->headers_len = rv->headers_len;
}
