/* SPDX-License-Identifier: MIT */
/*
 * segscan.c - forward iteration over the batches of a segment file, with
 * the resync that finds valid batches after damage (see segscan.h for the
 * rule; docs/Storage.md "Corruption" for why).
 *
 * Method. Bytes are read through one window buffer (at least 256 KiB, or
 * one whole batch), so a scan costs one pread per window rather than two
 * per batch, and the byte-by-byte resync search mostly looks at bytes
 * already in memory. check_at() is the single judge of "is there a valid
 * batch at q"; next() calls it at pos, and on failure resync() calls it at
 * each candidate position until one passes.
 *
 * Candidates are filtered by the two header bytes that never vary (magic
 * and version) before the header is parsed, and by the header's own checks
 * before the CRC is computed, so random damage costs little. The CRC work
 * spent on candidates is bounded per resync (PULSE_SEGSCAN_RESYNC_BUDGET):
 * record values are client bytes and may hold many plausible-looking
 * headers.
 *
 * A buffer scan (pulse_segscan_init_mem) is the same walk with the window
 * being the whole buffer: window() and header_at() point into it, so the
 * rule above is applied by the very same code to bytes in memory.
 */
#include "storage/segscan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/crc32c.h"
#include "common/endian.h"
#include "common/log.h"
#include "storage/damage.h"
#include "common/fsio.h"

#define WINDOW_MIN (256u * 1024u)

enum verdict {
    V_VALID, /* a valid batch */
    V_TORN,  /* it runs past the scanned size */
    V_BAD,   /* anything else */
    V_BUDGET /* not judged: the resync budget would be exceeded */
};

void pulse_segscan_init(struct pulse_segscan *sc, const struct pulse_io *io, int fd, const char *path, int64_t seg_base,
                        uint64_t size, uint64_t pos, int64_t expect, int64_t limit, unsigned mode)
{
    memset(sc, 0, sizeof *sc);
    sc->io = io;
    sc->fd = fd;
    sc->mode = mode;
    sc->path = path;
    sc->seg_base = seg_base;
    sc->size = size;
    sc->pos = pos;
    sc->expect = expect;
    sc->limit = limit;
    pulse_buf_init(&sc->inflated, PULSE_BATCH_INFLATED_MAX);
}

void pulse_segscan_init_at(struct pulse_segscan *sc, const struct pulse_io *io, int fd, const char *path,
                           int64_t seg_base, uint64_t size, const struct pulse_segscan_start *start, int64_t limit,
                           unsigned mode)
{
    pulse_segscan_init(sc, io, fd, path, seg_base, size, start->pos, start->base, limit, mode);
    sc->start = *start;
}

void pulse_segscan_init_mem(struct pulse_segscan *sc, const uint8_t *buf, size_t len, unsigned mode)
{
    /* Base offsets are never negative (the codec refuses them), so 0
     * expects nothing of the first batch. */
    pulse_segscan_init(sc, NULL, -1, "buffer", -1, len, 0, 0, INT64_MAX, mode);
    sc->mem = buf;
}

void pulse_segscan_seek(struct pulse_segscan *sc, uint64_t pos, int64_t expect)
{
    sc->pos = pos;
    sc->expect = expect;
}

void pulse_segscan_seek_at(struct pulse_segscan *sc, const struct pulse_segscan_start *start)
{
    pulse_segscan_seek(sc, start->pos, start->base);
    sc->start = *start;
}

void pulse_segscan_set_hints(struct pulse_segscan *sc, const struct pulse_damage *hints, size_t n)
{
    sc->hints = hints;
    sc->nhints = n;
}

void pulse_segscan_fini(struct pulse_segscan *sc)
{
    if (!sc->borrowed)
        pulse_free(sc->buf);
    sc->borrowed = false;
    sc->buf = NULL;
    sc->cap = 0;
    sc->buf_len = 0;
    pulse_buf_fini(&sc->inflated);
}

/* Makes [pos, pos + need) readable and points *p at it; need must not pass
 * the scanned size. Bytes from pos on that the window already holds are
 * moved to its start rather than read again, so a scan reads every byte of
 * the file once whatever its batch sizes. */
static pulse_status_t window(struct pulse_segscan *sc, uint64_t pos, size_t need, const uint8_t **p)
{
    size_t want = need > WINDOW_MIN ? need : WINDOW_MIN;
    size_t keep = 0;
    ssize_t got;

    if (sc->mem != NULL) {
        *p = sc->mem + pos; /* callers keep pos + need within the size */
        return PULSE_OK;
    }
    if (pos >= sc->buf_pos && pos - sc->buf_pos + need <= sc->buf_len) {
        *p = sc->buf + (pos - sc->buf_pos);
        return PULSE_OK;
    }
    if (want > sc->size - pos)
        want = (size_t)(sc->size - pos);
    if (sc->borrowed) {
        /* The caller's window does not hold it: read into our own. */
        sc->buf = NULL;
        sc->cap = 0;
        sc->buf_len = 0;
        sc->borrowed = false;
    }
    if (want > sc->cap) {
        uint8_t *nb = pulse_realloc(sc->buf, want);
        if (nb == NULL)
            return PULSE_NOMEM;
        sc->buf = nb;
        sc->cap = want;
    }
    if (pos >= sc->buf_pos && pos - sc->buf_pos < sc->buf_len) {
        keep = sc->buf_len - (size_t)(pos - sc->buf_pos);
        memmove(sc->buf, sc->buf + (pos - sc->buf_pos), keep);
    }
    sc->buf_pos = pos;
    sc->buf_len = keep;
    got = pulse_io_pread_all(sc->io, sc->fd, sc->buf + keep, want - keep, (off_t)(pos + keep));
    if (got < 0) {
        int err = errno;
        PULSE_ERROR("segscan: pread %s at %" PRIu64 " failed: %s", sc->path, pos + keep, strerror(err));
        return pulse_status_from_errno(err);
    }
    sc->buf_len = keep + (size_t)got;
    if (sc->buf_len < need) {
        PULSE_ERROR("segscan: %s shrank below %" PRIu64 " bytes while it was read", sc->path, sc->size);
        return PULSE_IO;
    }
    *p = sc->buf;
    return PULSE_OK;
}

pulse_status_t pulse_segscan_fill(struct pulse_segscan *sc, uint64_t pos, uint8_t *dst, size_t len)
{
    ssize_t got;

    if (sc->mem != NULL || pos > sc->size || len > sc->size - pos)
        return PULSE_INVALID;
    got = pulse_io_pread_all(sc->io, sc->fd, dst, len, (off_t)pos);
    if (got < 0) {
        int err = errno;
        PULSE_ERROR("segscan: pread %s at %" PRIu64 " failed: %s", sc->path, pos, strerror(err));
        return pulse_status_from_errno(err);
    }
    if ((size_t)got < len) {
        PULSE_ERROR("segscan: %s shrank below %" PRIu64 " bytes while it was read", sc->path, sc->size);
        return PULSE_IO;
    }
    if (!sc->borrowed)
        pulse_free(sc->buf);
    sc->buf = dst;
    sc->cap = len;
    sc->buf_pos = pos;
    sc->buf_len = len;
    sc->borrowed = true;
    return PULSE_OK;
}

/* The 52 header bytes at q: from the window when it holds them, else by
 * a pread of their own into hraw. Filling the window for a header would
 * read ahead, and a batch larger than the window would then be read twice
 * (the window is refilled from the batch's start to hold it whole). */
static pulse_status_t header_at(struct pulse_segscan *sc, uint64_t q, uint8_t hraw[PULSE_BATCH_HEADER_SIZE],
                                const uint8_t **p)
{
    ssize_t got;

    if (sc->mem != NULL) {
        *p = sc->mem + q;
        return PULSE_OK;
    }
    if (q >= sc->buf_pos && q - sc->buf_pos + PULSE_BATCH_HEADER_SIZE <= sc->buf_len) {
        *p = sc->buf + (q - sc->buf_pos);
        return PULSE_OK;
    }
    got = pulse_io_pread_all(sc->io, sc->fd, hraw, PULSE_BATCH_HEADER_SIZE, (off_t)q);
    if (got < 0) {
        int err = errno;
        PULSE_ERROR("segscan: pread %s at %" PRIu64 " failed: %s", sc->path, q, strerror(err));
        return pulse_status_from_errno(err);
    }
    if ((size_t)got < PULSE_BATCH_HEADER_SIZE) {
        PULSE_ERROR("segscan: %s shrank below %" PRIu64 " bytes while it was read", sc->path, sc->size);
        return PULSE_IO;
    }
    *p = hraw;
    return PULSE_OK;
}

/* Says why a batch whose header parsed fails pulse_batch_verify; returns
 * whether its CRC matched. */
static bool explain_verify(struct pulse_segscan *sc, const uint8_t *b, size_t total, char *problem)
{
    uint32_t crc = pulse_crc32c(0, b + 8, total - 8);
    struct pulse_batch_iter it;
    struct pulse_record_view rec;

    if (crc != pulse_get_be32(b + 4)) {
        snprintf(problem, PULSE_SEGSCAN_PROBLEM_MAX,
                 "CRC mismatch in batch with base offset %" PRId64 " (stored 0x%08" PRIx32 ", computed 0x%08" PRIx32
                 ")",
                 (int64_t)pulse_get_be64(b + 8), pulse_get_be32(b + 4), crc);
        return false;
    }
    pulse_status_t st = pulse_batch_iter_open(&it, b, total, &sc->inflated);
    if (st == PULSE_CORRUPT && it.problem != NULL) {
        /* Compressed records that do not inflate as declared. */
        snprintf(problem, PULSE_SEGSCAN_PROBLEM_MAX,
                 "invalid compressed batch with base offset %" PRId64 " (CRC ok): %s", it.hdr.base_offset, it.problem);
        return true;
    }
    if (st != PULSE_OK) {
        snprintf(problem, PULSE_SEGSCAN_PROBLEM_MAX, "bad batch header");
        return true;
    }
    while (pulse_batch_iter_next(&it, &rec) == PULSE_OK)
        ;
    if (it.index < it.hdr.record_count)
        snprintf(problem, PULSE_SEGSCAN_PROBLEM_MAX,
                 "record %" PRIu32 " of %" PRIu32 " (at byte +%zu of the %srecords) has bad framing or offset",
                 it.index, it.hdr.record_count, it.pos, pulse_batch_codec(&it.hdr) != 0 ? "inflated " : "");
    else
        snprintf(problem, PULSE_SEGSCAN_PROBLEM_MAX, "batch has %zu bytes after its last record", it.recs_len - it.pos);
    return true;
}

/* The offset rules (segscan.h) for the batch at [q, end); problem
 * (nullable) gets the reason. */
static bool offsets_ok(const struct pulse_segscan *sc, uint64_t q, uint64_t end, const struct pulse_batch_header *hdr,
                       int64_t last, char *problem)
{
    const struct pulse_segscan_start *s = &sc->start;
    const char *why = NULL;
    char msg[PULSE_SEGSCAN_PROBLEM_MAX];

    if (sc->mode & PULSE_SEGSCAN_ANY_ORDER)
        return true;
    if (s->named && q == s->pos && (hdr->base_offset != s->base || end > s->end || last >= s->limit)) {
        snprintf(msg, sizeof msg,
                 "batch holds offsets %" PRId64 "..%" PRId64 " up to byte %" PRIu64
                 ", not the batch its index entry names (offset %" PRId64 ", before the next entry)",
                 hdr->base_offset, last, end, s->base);
        why = msg;
    } else if (hdr->base_offset < sc->expect) {
        if (sc->seen_batch)
            snprintf(msg, sizeof msg, "batch base offset %" PRId64 " does not follow the previous last offset %" PRId64,
                     hdr->base_offset, sc->expect - 1);
        else
            snprintf(msg, sizeof msg, "batch base offset %" PRId64 " is below the segment base %" PRId64,
                     hdr->base_offset, sc->expect);
        why = msg;
    } else if (last >= sc->limit) {
        snprintf(msg, sizeof msg,
                 "batch holds offset %" PRId64 ", which belongs to the next segment (base %" PRId64 ")", last,
                 sc->limit);
        why = msg;
    } else if (sc->seg_base >= 0 && (hdr->base_offset - sc->seg_base > (int64_t)UINT32_MAX || q > UINT32_MAX)) {
        why = "batch offset or position does not fit the 32-bit index";
    }
    if (why != NULL && problem != NULL)
        snprintf(problem, PULSE_SEGSCAN_PROBLEM_MAX, "%s", why);
    return why == NULL;
}

/* The last offset of a batch whose header (only) was read: a contiguous
 * batch's records are numbered from its base. False on overflow (the
 * codec refuses such a batch too). */
static bool header_last(const struct pulse_batch_header *hdr, int64_t *last)
{
    return !__builtin_add_overflow(hdr->base_offset, (int64_t)hdr->record_count - 1, last);
}

/*
 * Judges the bytes at q. On V_VALID, it->batch/hdr/last_offset/end describe
 * the batch. problem (nullable: a resync candidate) gets the reason of any
 * other verdict, and then it->parsed, it->crc_ok and it->hdr say how far
 * the batch at q held together. trust: judge by the header alone (TRUST
 * mode, at the scan position only). budget (nullable) is charged the batch
 * size before its CRC is computed.
 */
static pulse_status_t check_at(struct pulse_segscan *sc, uint64_t q, char *problem, bool trust, uint64_t *budget,
                               struct pulse_segscan_item *it, enum verdict *v)
{
    uint8_t hraw[PULSE_BATCH_HEADER_SIZE];
    const uint8_t *p = NULL;
    struct pulse_batch_header hdr;
    uint64_t avail = sc->size - q;
    uint64_t total;
    int64_t last = 0;
    pulse_status_t st;

    *v = V_BAD;
    if (avail < PULSE_BATCH_HEADER_SIZE) {
        if (problem != NULL)
            snprintf(problem, PULSE_SEGSCAN_PROBLEM_MAX,
                     "torn batch: %" PRIu64 " bytes left, less than a %u-byte batch header", avail,
                     PULSE_BATCH_HEADER_SIZE);
        *v = V_TORN;
        return PULSE_OK;
    }
    st = header_at(sc, q, hraw, &p);
    if (st != PULSE_OK)
        return st;
    /* On 52 bytes parse_header says CORRUPT only for a bad header itself
     * (and EOF, having filled hdr, for any good one). */
    if (pulse_batch_parse_header(p, PULSE_BATCH_HEADER_SIZE, &hdr) == PULSE_CORRUPT) {
        if (problem != NULL)
            snprintf(problem, PULSE_SEGSCAN_PROBLEM_MAX,
                     "bad batch header (magic 0x%02x, version 0x%02x, flags 0x%04x, %" PRIu32 " records in %" PRIu32
                     " bytes)",
                     p[0], p[1], pulse_get_be16(p + 2), pulse_get_be32(p + 36), pulse_get_be32(p + 16));
        return PULSE_OK;
    }
    total = (uint64_t)PULSE_BATCH_HEADER_SIZE + hdr.batch_len;
    if (total > avail) {
        if (problem != NULL)
            snprintf(problem, PULSE_SEGSCAN_PROBLEM_MAX,
                     "torn batch: it claims %" PRIu64 " bytes but only %" PRIu64 " are left in the file", total, avail);
        *v = V_TORN;
        return PULSE_OK;
    }
    it->hdr = hdr;
    it->parsed = problem != NULL;
    trust = trust && (hdr.flags & PULSE_BATCH_FLAG_SPARSE) == 0;
    if (trust) {
        /* The header alone: the body is not read (a buffer has it anyway). */
        p = sc->mem != NULL ? sc->mem + q : NULL;
        if (!header_last(&hdr, &last)) {
            if (problem != NULL)
                snprintf(problem, PULSE_SEGSCAN_PROBLEM_MAX, "batch base offset %" PRId64 " overflows",
                         hdr.base_offset);
            return PULSE_OK;
        }
    } else {
        if (budget != NULL) {
            if (*budget < total) {
                *v = V_BUDGET;
                return PULSE_OK;
            }
            *budget -= total;
        }
        st = window(sc, q, (size_t)total, &p);
        if (st != PULSE_OK)
            return st;
        st = pulse_batch_verify_in(p, (size_t)total, &sc->inflated, &hdr, &last);
        /* Memory to inflate into is no verdict on the batch. */
        if (st == PULSE_NOMEM)
            return st;
        if (st != PULSE_OK) {
            if (problem != NULL)
                it->crc_ok = explain_verify(sc, p, (size_t)total, problem);
            return PULSE_OK;
        }
    }
    it->crc_ok = problem != NULL && !trust;
    if (!offsets_ok(sc, q, q + total, &hdr, last, problem))
        return PULSE_OK;
    it->batch = p;
    it->hdr = hdr;
    it->last_offset = last;
    it->end = q + total;
    *v = V_VALID;
    return PULSE_OK;
}

/*
 * Step 1 of the resync: a known range that starts at pos ends where it
 * ended before, even when what follows it is not valid (it is then judged
 * on its own); *next_base gets the first offset after the range.
 */
static pulse_status_t resync_hint(struct pulse_segscan *sc, uint64_t pos, uint64_t *budget,
                                  struct pulse_segscan_item *cand, uint64_t *found, int64_t *next_base)
{
    enum verdict v;
    pulse_status_t st;

    for (size_t i = 0; i < sc->nhints; i++) {
        const struct pulse_damage *h = &sc->hints[i];
        if (h->pos != pos || h->end <= pos || h->end > sc->size)
            continue;
        *found = h->end;
        *next_base = h->to > sc->expect ? h->to : sc->expect;
        if (h->end == sc->size)
            return PULSE_OK;
        st = check_at(sc, h->end, NULL, false, budget, cand, &v);
        if (st == PULSE_OK && v == V_VALID)
            *next_base = cand->hdr.base_offset;
        return st;
    }
    return PULSE_OK;
}

/* Step 2's candidate: the position the length field of the header at pos
 * names, when that header still parses and a valid batch starts there
 * (*lq and *lbase: its position and base offset; *lq stays UINT64_MAX
 * otherwise). */
static pulse_status_t length_candidate(struct pulse_segscan *sc, uint64_t pos, uint64_t *budget,
                                       struct pulse_segscan_item *cand, uint64_t *lq, int64_t *lbase)
{
    const uint8_t *p;
    struct pulse_batch_header hdr;
    enum verdict v;
    pulse_status_t st;

    if (sc->size - pos < PULSE_BATCH_HEADER_SIZE)
        return PULSE_OK;
    st = window(sc, pos, PULSE_BATCH_HEADER_SIZE, &p);
    if (st != PULSE_OK)
        return st;
    if (pulse_batch_parse_header(p, PULSE_BATCH_HEADER_SIZE, &hdr) == PULSE_CORRUPT)
        return PULSE_OK;
    uint64_t q = pos + PULSE_BATCH_HEADER_SIZE + pulse_get_be32(p + 16);
    if (q >= sc->size)
        return PULSE_OK;
    st = check_at(sc, q, NULL, false, budget, cand, &v);
    if (st == PULSE_OK && v == V_VALID) {
        *lq = q;
        *lbase = cand->hdr.base_offset;
    }
    return st;
}

/* Step 3: the first position in [from, to) where a valid batch starts
 * (*found, its base offset in *base), or *found = UINT64_MAX; *unresolved
 * when the budget ran out first. */
static pulse_status_t search(struct pulse_segscan *sc, uint64_t from, uint64_t to, uint64_t *budget,
                             struct pulse_segscan_item *cand, uint64_t *found, int64_t *base, bool *unresolved)
{
    uint64_t q = from;
    pulse_status_t st;

    *found = UINT64_MAX;
    while (q < to && sc->size - q >= PULSE_BATCH_HEADER_SIZE) {
        const uint8_t *p;
        const uint8_t *hit;
        size_t span = to - q > WINDOW_MIN ? WINDOW_MIN : (size_t)(to - q);
        enum verdict v;

        if (span > sc->size - q)
            span = (size_t)(sc->size - q);
        st = window(sc, q, span, &p);
        if (st != PULSE_OK)
            return st;
        /* Only positions holding magic and version can start a batch. */
        hit = memchr(p, PULSE_BATCH_MAGIC, span);
        if (hit == NULL) {
            q += span;
            continue;
        }
        q += (uint64_t)(hit - p);
        if (sc->size - q < PULSE_BATCH_HEADER_SIZE)
            break;
        if ((size_t)(hit - p) + 1 < span && hit[1] != PULSE_BATCH_VERSION) {
            q++;
            continue;
        }
        st = check_at(sc, q, NULL, false, budget, cand, &v);
        if (st != PULSE_OK)
            return st;
        if (v == V_VALID) {
            *found = q;
            *base = cand->hdr.base_offset;
            return PULSE_OK;
        }
        if (v == V_BUDGET) {
            *unresolved = true;
            break;
        }
        q++;
    }
    return PULSE_OK;
}

/* True when valid batches follow each other from q, with offsets going
 * up, and land exactly on stop, the last one ending below stop_base. */
static pulse_status_t chain_reaches(struct pulse_segscan *sc, uint64_t q, uint64_t stop, int64_t stop_base,
                                    uint64_t *budget, struct pulse_segscan_item *cand, bool *out)
{
    int64_t saved = sc->expect;
    pulse_status_t st = PULSE_OK;

    *out = false;
    while (q < stop) {
        enum verdict v;
        st = check_at(sc, q, NULL, false, budget, cand, &v);
        if (st != PULSE_OK || v != V_VALID)
            break;
        q = cand->end;
        sc->expect = cand->last_offset + 1;
    }
    *out = st == PULSE_OK && q == stop && sc->expect <= stop_base;
    sc->expect = saved;
    return st;
}

/*
 * Finds the end of the damage at pos: the first valid batch after it (or a
 * recorded end). *found gets its position and *next_base the first offset
 * after the damage, or *found is the scanned size when nothing valid
 * follows; *unresolved is set when the budget ran out first.
 *
 * The length field's candidate (step 2) is cross-checked: a bit flipped in
 * that field can name a batch further on, and the intact batches between
 * would then be swallowed by the range. So the bytes before the candidate
 * are searched too (step 3, bounded by it); a valid batch found there wins
 * when valid batches run from it exactly onto the candidate, which is how
 * intact batches behind a damaged length look. A batch image inside a
 * record value of the damaged batch would have to end exactly where that
 * batch ends, offsets in order, to be taken instead.
 */
static pulse_status_t resync(struct pulse_segscan *sc, uint64_t pos, struct pulse_segscan_item *cand, uint64_t *found,
                             int64_t *next_base, bool *unresolved)
{
    uint64_t budget = PULSE_SEGSCAN_RESYNC_BUDGET;
    uint64_t lq = UINT64_MAX, q = UINT64_MAX;
    int64_t lbase = 0, base = 0;
    bool chained = false;
    pulse_status_t st;

    *found = UINT64_MAX;
    *next_base = sc->expect;
    *unresolved = false;
    st = resync_hint(sc, pos, &budget, cand, found, next_base);
    if (st != PULSE_OK || *found != UINT64_MAX)
        return st;
    st = length_candidate(sc, pos, &budget, cand, &lq, &lbase);
    if (st == PULSE_OK)
        st = search(sc, pos + 1, lq != UINT64_MAX ? lq : sc->size, &budget, cand, &q, &base, unresolved);
    if (st == PULSE_OK && q != UINT64_MAX && lq != UINT64_MAX)
        st = chain_reaches(sc, q, lq, lbase, &budget, cand, &chained);
    if (st != PULSE_OK)
        return st;
    if (q != UINT64_MAX && (lq == UINT64_MAX || chained)) {
        *found = q;
        *next_base = base;
    } else if (lq != UINT64_MAX) {
        *found = lq;
        *next_base = lbase;
        *unresolved = false;
    } else {
        *found = sc->size;
    }
    return PULSE_OK;
}

pulse_status_t pulse_segscan_next(struct pulse_segscan *sc, struct pulse_segscan_item *it)
{
    struct pulse_segscan_item cand;
    enum verdict v;
    uint64_t found;
    int64_t next_base;
    bool unresolved;
    pulse_status_t st;

    /* Not a memset of the whole item: this runs once per batch of every
     * scan, and the problem text alone is larger than a small batch. */
    it->pos = sc->pos;
    it->problem[0] = '\0';
    it->tail = it->torn = it->unresolved = it->parsed = it->crc_ok = false;
    it->from = it->next_base = 0;
    it->batch = NULL;
    if (sc->pos >= sc->size) {
        it->kind = PULSE_SEGSCAN_END;
        it->end = sc->pos;
        return PULSE_OK;
    }
    st = check_at(sc, sc->pos, it->problem, (sc->mode & PULSE_SEGSCAN_TRUST) != 0, NULL, it, &v);
    if (st != PULSE_OK)
        return st;
    if (v == V_VALID) {
        it->kind = PULSE_SEGSCAN_BATCH;
        sc->pos = it->end;
        sc->expect = it->last_offset + 1;
        sc->seen_batch = true;
        return PULSE_OK;
    }
    it->kind = PULSE_SEGSCAN_DAMAGE;
    it->from = sc->expect;
    it->torn = v == V_TORN;
    if (sc->mode & PULSE_SEGSCAN_STOP) {
        /* Nothing past the damage is looked at: the walk ends here. */
        it->end = sc->size;
        it->tail = it->unresolved = true;
        it->next_base = sc->expect;
        sc->pos = sc->size;
        return PULSE_OK;
    }
    memset(&cand, 0, sizeof cand);
    st = resync(sc, sc->pos, &cand, &found, &next_base, &unresolved);
    if (st != PULSE_OK)
        return st;
    it->end = found;
    it->tail = found == sc->size;
    it->unresolved = unresolved;
    it->next_base = next_base;
    sc->pos = found;
    /* The offsets up to the next valid batch belong to the damage. */
    if (!it->tail)
        sc->expect = next_base;
    return PULSE_OK;
}

bool pulse_segscan_plain(const struct pulse_segscan *sc, const struct pulse_segscan_item *it, const uint8_t **p,
                         size_t *n)
{
    if (it->kind != PULSE_SEGSCAN_BATCH || it->batch == NULL || pulse_batch_codec(&it->hdr) != PULSE_BATCH_CODEC_ZLIB ||
        (sc->mode & PULSE_SEGSCAN_TRUST) != 0)
        return false;
    /* verify_in left this batch's records in inflated, exactly the
     * declared length (anything else failed the batch). */
    if (sc->inflated.len != pulse_get_be32(it->batch + PULSE_BATCH_HEADER_SIZE))
        return false;
    *p = sc->inflated.data;
    *n = sc->inflated.len;
    return true;
}

pulse_status_t pulse_segscan_verify(struct pulse_segscan *sc, const struct pulse_segscan_item *it, bool *ok_out)
{
    const uint8_t *p;
    pulse_status_t st = window(sc, it->pos, (size_t)(it->end - it->pos), &p);

    if (st != PULSE_OK) {
        *ok_out = false;
        return st;
    }
    st = pulse_batch_verify_in(p, (size_t)(it->end - it->pos), &sc->inflated, NULL, NULL);
    *ok_out = st == PULSE_OK;
    return st == PULSE_NOMEM ? st : PULSE_OK;
}
