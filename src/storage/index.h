/* SPDX-License-Identifier: MIT */
/*
 * index.h - the sparse offset index of one segment (storage contract
 * section 4; byte layout in docs/Format.md).
 *
 * An entry maps a batch's offset relative to the segment base to its byte
 * position in the segment file: relativeOffset u32 | relativePosition u32,
 * big-endian, 8 bytes. Entries are strictly increasing in both fields. The
 * table grows on demand (doubling, capped) and is never preallocated: a log
 * with many small segments must not pay for a full index per segment.
 *
 * struct pulse_index is a value type embedded by its owner (_init/_fini).
 * Thread: not thread-safe; the segment guards its index with its own mutex.
 */
#ifndef PULSE_STORAGE_INDEX_H
#define PULSE_STORAGE_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

#define PULSE_INDEX_ENTRY_SIZE 8u

struct pulse_index_entry {
    uint32_t rel_offset;
    uint32_t rel_pos;
};

struct pulse_index {
    struct pulse_index_entry *entries; /* owned */
    size_t n;
    size_t cap;
};

void pulse_index_init(struct pulse_index *idx);
/* Frees the table; idx is empty and reusable afterwards. */
void pulse_index_fini(struct pulse_index *idx);

/* Appends an entry. PULSE_INVALID unless both fields are greater than the
 * last entry's; PULSE_NOMEM. On failure idx is unchanged. */
pulse_status_t pulse_index_append(struct pulse_index *idx, uint32_t rel_offset, uint32_t rel_pos);

/* Drops every entry from n on (n >= count is a no-op). */
void pulse_index_truncate(struct pulse_index *idx, size_t n);

/* How many entries have rel_offset <= rel_target (binary search). */
size_t pulse_index_rank(const struct pulse_index *idx, uint32_t rel_target);

/* How many entries have rel_pos <= pos (binary search). */
size_t pulse_index_rank_pos(const struct pulse_index *idx, uint64_t pos);

/* Finds the greatest entry with rel_offset <= rel_target (binary search).
 * Returns false when there is none (empty index or target before entry 0). */
bool pulse_index_lookup(const struct pulse_index *idx, uint32_t rel_target, struct pulse_index_entry *out);

/* Serializes entry i (big-endian) into out[8]. */
void pulse_index_encode_entry(const struct pulse_index_entry *e, uint8_t out[PULSE_INDEX_ENTRY_SIZE]);
/* Parses one entry from in[8] (any bytes: the caller judges the values). */
void pulse_index_decode_entry(const uint8_t in[PULSE_INDEX_ENTRY_SIZE], struct pulse_index_entry *e);

/* The image of an index file holding the whole table: n entries of 8
 * bytes, in order. Returns it (pulse_free; at least one byte is allocated
 * for an empty table) with its length in *len_out, or NULL when out of
 * memory. The one writer of index tables: recovery's rewrite of an index
 * file (segment.c) and compaction's new index (compact.c) both use it. */
uint8_t *pulse_index_encode(const struct pulse_index *idx, size_t *len_out);

/* Parses an index file image (hostile bytes). Loads the longest prefix of
 * whole entries that is strictly increasing in both fields into idx (which
 * must be empty). *clean_out is true when every byte was consumed that way
 * (no partial entry, no out-of-order entry). PULSE_NOMEM only. */
pulse_status_t pulse_index_decode(struct pulse_index *idx, const uint8_t *buf, size_t len, bool *clean_out);

/* True when both tables hold the same entries. */
bool pulse_index_equal(const struct pulse_index *a, const struct pulse_index *b);

#endif
