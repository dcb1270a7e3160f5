/* SPDX-License-Identifier: MIT */
/*
 * batch.h - the record batch codec of docs/Storage.md "Batch format"
 * (storage contract section 3).
 *
 * One batch = a 52-byte big-endian header followed by recordCount
 * self-delimiting records. The CRC32C covers bytes [8, 52 + batchLen), i.e.
 * from baseOffset to the end of the records, so rewriting the base offset
 * (pulse_batch_set_base_offset) changes it: the rewrite patches the stored
 * CRC for the changed bytes (pulse_crc32c_patch) rather than recomputing it.
 *
 * Decoding treats its input as hostile: every length is checked against the
 * bytes that remain, the CRC is verified before any record is looked at, and
 * offsetDelta must be < recordCount (or < 2^31 in a batch flagged
 * PULSE_BATCH_FLAG_SPARSE, which compaction writes). The decoder is stricter
 * than that bound, matching what the encoder writes: in a contiguous batch
 * record i must carry offsetDelta == i, and in a sparse batch the deltas must
 * strictly increase. No input makes the decoder read outside the buffer it
 * was given.
 *
 * Compression (docs/Format.md 1.8): flags bits 0-2 name the codec of the
 * records section. 0 is none; 1 (PULSE_BATCH_CODEC_ZLIB) stores the
 * records as a 4-byte big-endian length of the plain records section
 * followed by one raw deflate stream (RFC 1951, zlib's deflate without
 * its header and Adler-32) of exactly those bytes. The CRC
 * covers the stored (compressed) bytes. Reading such a batch inflates its
 * records into a buffer the caller owns (pulse_batch_iter_open), never
 * past the declared length, itself capped by PULSE_BATCH_INFLATED_MAX: a
 * stream that inflates to more, to less, that is truncated, or that is
 * followed by other bytes is a CRC-valid but invalid batch (CORRUPT).
 * Codecs 2-7 are refused like any unknown flag.
 *
 * Thread: any; no function keeps state between calls. Locks: none.
 *
 * Lengths of 0xFFFFFFFF (PULSE_BATCH_NULL) mean "null" for keys and values;
 * a keyed record with a null value is a tombstone; a zero-length value is an
 * ordinary empty value.
 */
#ifndef PULSE_STORAGE_BATCH_H
#define PULSE_STORAGE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/debug.h"
#include "common/status.h"

struct pulse_buf;
struct pulse_record;

#define PULSE_BATCH_HEADER_SIZE 52u
#define PULSE_BATCH_MAGIC 0x01u
#define PULSE_BATCH_VERSION 0x01u
#define PULSE_BATCH_FLAG_SPARSE 0x0008u
#define PULSE_BATCH_FLAG_CODEC_MASK 0x0007u
/* Codec values of flags bits 0-2. */
#define PULSE_BATCH_CODEC_NONE 0u
#define PULSE_BATCH_CODEC_ZLIB 1u
/* The largest plain records section a compressed batch may declare (and
 * the most a reader ever inflates for one batch): the broker's largest
 * publish. A larger batch is written uncompressed. */
#define PULSE_BATCH_INFLATED_MAX (64u * 1024 * 1024)
#define PULSE_BATCH_NULL 0xFFFFFFFFu
/* Smallest possible record: length(4) attributes(1) tsDelta(4) offDelta(4)
 * keyLen(4) valueLen(4) headerCount(4). */
#define PULSE_RECORD_MIN_SIZE 25u

/* A header of a record to encode. */
struct pulse_header_in {
    const uint8_t *key;
    uint32_t key_len;
    const uint8_t *value;
    uint32_t value_len; /* may be PULSE_BATCH_NULL */
};

/* A record to encode. */
struct pulse_record_in {
    int64_t timestamp;     /* ms since the epoch */
    uint32_t offset_delta; /* used only with PULSE_BATCH_FLAG_SPARSE; else the index */
    const uint8_t *key;
    uint32_t key_len; /* PULSE_BATCH_NULL = null key */
    const uint8_t *value;
    uint32_t value_len; /* PULSE_BATCH_NULL = null value (tombstone if keyed) */
    const struct pulse_header_in *headers;
    uint32_t header_count;
};

/* The decoded batch header (all fields, reserved ones included). */
struct pulse_batch_header {
    uint8_t magic;
    uint8_t version;
    uint16_t flags;
    uint32_t crc;
    int64_t base_offset;
    uint32_t batch_len; /* bytes of the records section */
    int64_t first_timestamp;
    int64_t last_timestamp;
    uint32_t record_count;
    uint32_t producer_id;
    uint32_t producer_epoch;
    int32_t base_sequence;
};

/* A decoded record. Pointers borrow from the batch buffer and live as long as
 * it does. */
struct pulse_record_view {
    int64_t offset;
    int64_t timestamp;
    uint8_t attributes;
    const uint8_t *key; /* NULL when key_len == PULSE_BATCH_NULL */
    uint32_t key_len;
    const uint8_t *value; /* NULL when value_len == PULSE_BATCH_NULL */
    uint32_t value_len;
    uint32_t header_count;
    const uint8_t *headers; /* raw header bytes, walk with pulse_record_header_next */
    size_t headers_len;
};

/* A decoded header, borrowed like pulse_record_view. */
struct pulse_header_view {
    const uint8_t *key;
    uint32_t key_len;
    const uint8_t *value; /* NULL when null */
    uint32_t value_len;
};

/* Iterates the records of one verified batch. */
struct pulse_batch_iter {
    const uint8_t *buf; /* the whole batch, as stored */
    size_t len;
    struct pulse_batch_header hdr;
    const uint8_t *recs; /* the plain records section: in buf, or inflated into the caller's scratch */
    size_t recs_len;
    size_t pos;          /* next record position within recs */
    uint32_t index;      /* records returned so far */
    int64_t last_delta;  /* offsetDelta of the previous record, -1 at start */
    const char *problem; /* static text: why open or next said CORRUPT, else NULL */
};

/*
 * Encodes one batch and appends it to out. base_offset goes into the header
 * (the log overwrites it at append time). flags: 0 or PULSE_BATCH_FLAG_SPARSE,
 * optionally with a codec in bits 0-2 (PULSE_BATCH_CODEC_ZLIB: the records
 * are deflated; when that would not make the batch smaller, or the records
 * pass PULSE_BATCH_INFLATED_MAX, the batch is written uncompressed instead,
 * so a reader must look at each batch's own flags);
 * without SPARSE, record i gets offsetDelta i and recs[i].offset_delta is
 * ignored; with SPARSE, offset deltas must be strictly increasing and < 2^31.
 * firstTimestamp is recs[0].timestamp and lastTimestamp recs[n-1].timestamp.
 * Returns PULSE_RANGE (and appends nothing) if any timestamp is more than an
 * int32 of milliseconds away from the first: the caller must split the batch
 * rather than let a delta wrap. PULSE_INVALID for n == 0 or bad deltas;
 * PULSE_TOO_LARGE if the buffer cap or the 32-bit lengths would be passed;
 * PULSE_NOMEM. On failure out is as it was.
 */
pulse_status_t pulse_batch_encode(struct pulse_buf *out, int64_t base_offset, uint16_t flags,
                                  const struct pulse_record_in *recs, size_t n);

/* Bytes the encoding of these records would take, header included; used to
 * split by size before encoding. */
size_t pulse_batch_encoded_size(const struct pulse_record_in *recs, size_t n);

/*
 * Parses and sanity-checks the 52-byte header at buf (len bytes available,
 * which may be more or less than one batch). Checks magic, version, flags
 * (codec 0 or 1), and that recordCount records could fit batchLen (for a
 * compressed batch: PULSE_BATCH_INFLATED_MAX). Does not verify the CRC.
 * PULSE_EOF if len < 52 or len < 52 + batchLen (torn / incomplete; in the
 * second case the header itself is sane and *hdr is filled all the same),
 * PULSE_CORRUPT for a bad header (*hdr untouched).
 */
pulse_status_t pulse_batch_parse_header(const uint8_t *buf, size_t len, struct pulse_batch_header *hdr);

/* Total size of the batch whose header is hdr (52 + batchLen). */
static inline size_t pulse_batch_total_size(const struct pulse_batch_header *hdr)
{
    return (size_t)PULSE_BATCH_HEADER_SIZE + hdr->batch_len;
}

/*
 * Full validation of the batch at the start of buf: header, CRC, then (for
 * a compressed batch) the inflation of its records, then every record's
 * framing and offset bound. On success *hdr is filled and *last_offset_out
 * (nullable) gets the offset of its last record. PULSE_EOF when the buffer
 * holds less than a whole batch, PULSE_CORRUPT for anything that fails
 * validation, PULSE_NOMEM when a compressed batch cannot be inflated for
 * want of memory (not a verdict on the batch). A compressed batch is
 * inflated into a buffer allocated and freed inside the call;
 * pulse_batch_verify_in uses the caller's scratch (pulse_buf_init'ed with a
 * max of at least PULSE_BATCH_INFLATED_MAX; its contents are replaced)
 * instead, so that a loop reuses one allocation.
 */
pulse_status_t pulse_batch_verify(const uint8_t *buf, size_t len, struct pulse_batch_header *hdr,
                                  int64_t *last_offset_out);
pulse_status_t pulse_batch_verify_in(const uint8_t *buf, size_t len, struct pulse_buf *scratch,
                                     struct pulse_batch_header *hdr, int64_t *last_offset_out);

/*
 * Starts iterating a batch (pulse_batch_verify accepted it, or the caller
 * wants to know why not: it->problem). An uncompressed batch is read where
 * it is; a compressed one is inflated into scratch (the caller's,
 * pulse_buf_init'ed with a max of at least PULSE_BATCH_INFLATED_MAX; its
 * contents are replaced, and the records borrow from it until it changes).
 * PULSE_EOF / PULSE_CORRUPT as pulse_batch_parse_header, PULSE_CORRUPT for
 * compressed records that do not inflate to exactly the declared length
 * (it->problem says how), PULSE_NOMEM. pulse_batch_iter_init is
 * pulse_batch_iter_open without scratch: it refuses a compressed batch
 * (PULSE_INVALID), so only code that knows its batches are plain uses it.
 */
pulse_status_t pulse_batch_iter_open(struct pulse_batch_iter *it, const uint8_t *buf, size_t len,
                                     struct pulse_buf *scratch);
pulse_status_t pulse_batch_iter_init(struct pulse_batch_iter *it, const uint8_t *buf, size_t len);

/*
 * pulse_batch_iter_open for a batch whose records were inflated already,
 * when it was verified (pulse_segscan_plain): a compressed batch's records
 * are read from plain (plain_len bytes, borrowed, exactly the length the
 * batch declares: else PULSE_INVALID) instead of being inflated again; a
 * plain batch ignores plain. The caller vouches that plain is what the
 * batch's stream inflates to.
 */
pulse_status_t pulse_batch_iter_open_plain(struct pulse_batch_iter *it, const uint8_t *buf, size_t len,
                                           const uint8_t *plain, size_t plain_len);

/* The codec of a parsed header (flags bits 0-2). */
static inline unsigned pulse_batch_codec(const struct pulse_batch_header *hdr)
{
    return hdr->flags & PULSE_BATCH_FLAG_CODEC_MASK;
}

/* Next record: PULSE_OK with *rec filled, PULSE_EOF after the last one,
 * PULSE_CORRUPT on bad framing (possible only if the batch was not verified). */
pulse_status_t pulse_batch_iter_next(struct pulse_batch_iter *it, struct pulse_record_view *rec);

/* Walks rec->headers: *pos starts at 0. PULSE_OK, PULSE_EOF at the end. */
pulse_status_t pulse_record_header_next(const struct pulse_record_view *rec, size_t *pos, struct pulse_header_view *hv);

/*
 * Rewrites baseOffset in the batch at the start of batch (len bytes) and
 * patches its CRC for the change, in O(log len) instead of a pass over the
 * batch. The caller must know the stored CRC is right: it encoded the batch
 * or verified it (pulse_batch_verify) since the bytes last changed. The
 * patched CRC is right exactly when the old one was, so a batch damaged in
 * memory stays detectably damaged instead of being blessed with a fresh CRC.
 * Does nothing when batch does not hold a whole batch.
 */
void pulse_batch_set_base_offset(uint8_t *batch, size_t len, int64_t base_offset);

/*
 * Writes the producer fields of the batch at the start of batch (len bytes)
 * and patches its CRC, as pulse_batch_set_base_offset (and under the same
 * rule: the stored CRC must be known right). The engine gives the fields no
 * meaning and carries them as they are; the broker's idempotent publish
 * stores the identity of its request in them (docs/Format.md "Producer
 * fields"). Does nothing when batch does not hold a whole batch.
 */
void pulse_batch_set_producer(uint8_t *batch, size_t len, uint32_t producer_id, uint32_t producer_epoch,
                              int32_t base_sequence);

/*
 * rv as a plain record (common/record.h), for the layers above storage:
 * the same bytes, borrowed from the batch like rv, and a header_next that
 * walks the headers with pulse_record_header_next (stopping at damage,
 * which a verified batch never has).
 */
void pulse_batch_record_plain(const struct pulse_record_view *rv, struct pulse_record *out);

#ifdef PULSE_HOOKS
/* Test hook: how many compressed records sections were inflated since the
 * process started (every reader's). Debug and test builds only. */
unsigned long pulse_batch_inflate_count(void);
#endif

#endif
