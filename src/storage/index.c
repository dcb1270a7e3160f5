/* SPDX-License-Identifier: MIT */
/*
 * index.c - the in-memory sparse index table and its on-disk encoding
 * (storage contract section 4).
 *
 * The table is a sorted array of (relativeOffset, relativePosition) pairs.
 * Both columns strictly increase, which decode enforces on hostile input by
 * keeping only the longest sorted prefix: an index is only a hint for where
 * to start decoding, and every position taken from it is checked against the
 * data before it is trusted (see recover.c).
 */
#include "storage/index.h"

#include <string.h>

#include "common/alloc.h"
#include "common/endian.h"

/* A segment is below 2 GiB and a batch is at least 52 bytes, so no index
 * can legitimately hold more entries than this. */
#define INDEX_MAX_ENTRIES ((size_t)1 << 26)

void pulse_index_init(struct pulse_index *idx)
{
    idx->entries = NULL;
    idx->n = 0;
    idx->cap = 0;
}

void pulse_index_fini(struct pulse_index *idx)
{
    pulse_free(idx->entries);
    pulse_index_init(idx);
}

static pulse_status_t grow(struct pulse_index *idx, size_t want)
{
    size_t cap = idx->cap == 0 ? 16 : idx->cap;
    struct pulse_index_entry *e;

    if (want <= idx->cap)
        return PULSE_OK;
    if (want > INDEX_MAX_ENTRIES)
        return PULSE_TOO_LARGE;
    while (cap < want)
        cap *= 2;
    if (cap > INDEX_MAX_ENTRIES)
        cap = INDEX_MAX_ENTRIES;
    e = pulse_realloc(idx->entries, cap * sizeof *e);
    if (e == NULL)
        return PULSE_NOMEM;
    idx->entries = e;
    idx->cap = cap;
    return PULSE_OK;
}

pulse_status_t pulse_index_append(struct pulse_index *idx, uint32_t rel_offset, uint32_t rel_pos)
{
    pulse_status_t st;

    if (idx->n > 0) {
        const struct pulse_index_entry *last = &idx->entries[idx->n - 1];
        if (rel_offset <= last->rel_offset || rel_pos <= last->rel_pos)
            return PULSE_INVALID;
    }
    st = grow(idx, idx->n + 1);
    if (st != PULSE_OK)
        return st;
    idx->entries[idx->n].rel_offset = rel_offset;
    idx->entries[idx->n].rel_pos = rel_pos;
    idx->n++;
    return PULSE_OK;
}

void pulse_index_truncate(struct pulse_index *idx, size_t n)
{
    if (n < idx->n)
        idx->n = n;
}

/* How many entries have their relative offset (by_pos false) or position
 * (by_pos true) at or below target: both grow along the table. */
static size_t rank_by(const struct pulse_index *idx, uint64_t target, bool by_pos)
{
    size_t lo = 0, hi = idx->n;

    /* Invariant: entries[0..lo) are <= target, entries[hi..n) are > target. */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t key = by_pos ? idx->entries[mid].rel_pos : idx->entries[mid].rel_offset;
        if (key <= target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t pulse_index_rank(const struct pulse_index *idx, uint32_t rel_target)
{
    return rank_by(idx, rel_target, false);
}

size_t pulse_index_rank_pos(const struct pulse_index *idx, uint64_t pos)
{
    return rank_by(idx, pos, true);
}

bool pulse_index_lookup(const struct pulse_index *idx, uint32_t rel_target, struct pulse_index_entry *out)
{
    size_t k = pulse_index_rank(idx, rel_target);

    if (k == 0)
        return false;
    *out = idx->entries[k - 1];
    return true;
}

void pulse_index_encode_entry(const struct pulse_index_entry *e, uint8_t out[PULSE_INDEX_ENTRY_SIZE])
{
    pulse_put_be32(out, e->rel_offset);
    pulse_put_be32(out + 4, e->rel_pos);
}

void pulse_index_decode_entry(const uint8_t in[PULSE_INDEX_ENTRY_SIZE], struct pulse_index_entry *e)
{
    e->rel_offset = pulse_get_be32(in);
    e->rel_pos = pulse_get_be32(in + 4);
}

uint8_t *pulse_index_encode(const struct pulse_index *idx, size_t *len_out)
{
    size_t len = idx->n * PULSE_INDEX_ENTRY_SIZE;
    uint8_t *raw = pulse_malloc(len > 0 ? len : 1);

    if (raw == NULL)
        return NULL;
    for (size_t i = 0; i < idx->n; i++)
        pulse_index_encode_entry(&idx->entries[i], raw + i * PULSE_INDEX_ENTRY_SIZE);
    *len_out = len;
    return raw;
}

pulse_status_t pulse_index_decode(struct pulse_index *idx, const uint8_t *buf, size_t len, bool *clean_out)
{
    size_t whole = len / PULSE_INDEX_ENTRY_SIZE;
    bool clean = (len % PULSE_INDEX_ENTRY_SIZE) == 0;
    pulse_status_t st = PULSE_OK;

    if (whole > INDEX_MAX_ENTRIES) {
        whole = INDEX_MAX_ENTRIES;
        clean = false;
    }
    st = grow(idx, whole);
    if (st != PULSE_OK)
        goto out;
    for (size_t i = 0; i < whole; i++) {
        struct pulse_index_entry e;
        pulse_index_decode_entry(buf + i * PULSE_INDEX_ENTRY_SIZE, &e);
        if (pulse_index_append(idx, e.rel_offset, e.rel_pos) != PULSE_OK) {
            clean = false;
            break;
        }
    }
out:
    if (st == PULSE_OK)
        *clean_out = clean;
    return st;
}

bool pulse_index_equal(const struct pulse_index *a, const struct pulse_index *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++) {
        if (a->entries[i].rel_offset != b->entries[i].rel_offset || a->entries[i].rel_pos != b->entries[i].rel_pos)
            return false;
    }
    return true;
}
