/* SPDX-License-Identifier: MIT */
/*
 * compact.c - log compaction (storage contract section 8, "Compaction";
 * docs/Storage.md "Compaction"). See compact.h for the interface.
 *
 * Method, per pass.
 *   1. Capture the segment list: a reference on every segment, the byte end
 *      of each sealed one and the durable end of the active one. Bytes below
 *      those ends never change under us (segments are append-only and only
 *      this module rewrites sealed ones), so no lock is held while reading.
 *   2. If the captured layout equals what the previous pass left behind, that
 *      pass finished a whole cycle with nothing left to do, and no tombstone
 *      has come of age since, return without reading anything.
 *   3. Dedupe map: stream every captured batch, oldest first, and record for
 *      each key its newest offset, whether that occurrence is a tombstone,
 *      its timestamp, and whether an older occurrence exists. Keyless records
 *      are never mapped. When the keys do not fit max_keys, the key space is
 *      split into 2^k slices by a hash of the key and one pass maps (and so
 *      compacts) one slice only; records of other slices are kept untouched
 *      that pass, and the next cycle takes the next slice. That keeps the map
 *      bounded and guarantees progress however many keys the log holds.
 *   4. Rewrite up to max_segments_per_pass sealed segments, oldest first from
 *      the cursor. A record survives if it is keyless, outside the mapped
 *      slice, or the newest of its key; a newest tombstone survives too
 *      unless it has expired AND it is the only record of its key left in the
 *      whole log (no resurrection: see below). Survivors are streamed into
 *      sparse batches in a temp file, one source batch in memory at a time.
 *   5. Gain gate, then commit by copy and swap, or delete the segment when
 *      nothing survived.
 *
 * Tombstones and resurrection. Dropping a tombstone is only safe when no
 * older value of its key is left anywhere: otherwise that value would become
 * the newest again. Older values may survive a pass (the gain gate discarded
 * their segment's rewrite, or the bounded pass has not reached it yet), so
 * the rule is checked against the log itself: the map scan starts at the
 * first segment and notes whether any older occurrence of the key exists.
 * An expired tombstone with an older occurrence is kept; once the passes have
 * removed the older values, a later pass finds the tombstone alone and drops
 * it. If the map scan met a corrupt batch, no tombstone is dropped in that
 * pass (the unreadable bytes might hold an older value).
 *
 * Crash safety of the commit. Temps (.tmp-compact-<base>.log.tmp and
 * .index.tmp: never a ".log" suffix, so recovery never takes them for a
 * segment, and the ".tmp-" prefix makes recovery delete them) are written and
 * fdatasynced first. Then, under the writer lock: rename data over the
 * segment, rename index over its index, fsync the directory. A crash before
 * the first rename leaves the old files; after both, the new ones; in
 * between, new data with the old index, whose entries recovery checks one by
 * one against the batch headers and rebuilds when they do not match.
 * Readers holding the old segment keep its inode (and its bytes) until they
 * release it: the swap installs a new struct pulse_segment and drops the
 * list's reference on the old one.
 */
#include "storage/compact.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "storage/batch.h"
#include "storage/index.h"
#include "storage/io.h"
#include "storage/plog_int.h"
#include "storage/segment.h"

/* Key slices: at most 2^20, so a slice number fits the hash bits used. */
#define MAX_SLICE_SHIFT 20u
#define READ_CHUNK (256u * 1024u)

/* ---- dedupe map ------------------------------------------------------- */

/* Keys up to this many bytes are stored in the entry itself: the lookup
 * then touches one cache line instead of two. */
#define KEY_INLINE 24u

struct kentry {
    uint64_t hash;
    int64_t newest; /* offset of the newest occurrence */
    int64_t ts;     /* its timestamp */
    uint32_t key_len;
    bool used;  /* false marks a free slot */
    bool tomb;  /* the newest occurrence is a tombstone */
    bool older; /* an occurrence older than the newest exists */
    union {
        uint8_t *ptr; /* owned, when key_len > KEY_INLINE */
        uint8_t inl[KEY_INLINE];
    } key;
};

static const uint8_t *kentry_key(const struct kentry *e)
{
    return e->key_len > KEY_INLINE ? e->key.ptr : e->key.inl;
}

static void kentry_free(struct kentry *e)
{
    if (e->used && e->key_len > KEY_INLINE)
        pulse_free(e->key.ptr);
}

struct kmap {
    struct kentry *slots;
    size_t cap; /* power of two or 0 */
    size_t n;
};

static uint64_t key_hash(const uint8_t *p, uint32_t len)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then a splitmix64 finish */
    for (uint32_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

/* The key slice a hash falls in, with 2^shift slices. */
static uint32_t slice_of(uint64_t h, uint32_t shift)
{
    if (shift == 0)
        return 0;
    return (uint32_t)(h >> (64 - MAX_SLICE_SHIFT)) & ((1u << shift) - 1);
}

static void kmap_fini(struct kmap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        kentry_free(&m->slots[i]);
    pulse_free(m->slots);
    memset(m, 0, sizeof *m);
}

static struct kentry *kmap_find(const struct kmap *m, uint64_t h, const uint8_t *key, uint32_t len)
{
    if (m->cap == 0)
        return NULL;
    for (size_t i = (size_t)h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        struct kentry *e = &m->slots[i];
        if (!e->used)
            return NULL;
        if (e->hash == h && e->key_len == len && memcmp(kentry_key(e), key, len) == 0)
            return e;
    }
}

/* Places an entry (whose key the map takes over) into a table with room. */
static void kmap_place(struct kentry *slots, size_t cap, const struct kentry *src)
{
    size_t i = (size_t)src->hash & (cap - 1);
    while (slots[i].used)
        i = (i + 1) & (cap - 1);
    slots[i] = *src;
}

/* Rebuilds the table with capacity ncap, keeping only entries of slice
 * `slice` under `shift` (all of them when keep_all). Keys of dropped
 * entries are freed. */
static pulse_status_t kmap_rebuild(struct kmap *m, size_t ncap, bool keep_all, uint32_t shift, uint32_t slice)
{
    struct kentry *ns = pulse_calloc(ncap, sizeof *ns);
    size_t n = 0;

    if (ns == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        struct kentry *e = &m->slots[i];
        if (!e->used)
            continue;
        if (keep_all || slice_of(e->hash, shift) == slice) {
            kmap_place(ns, ncap, e);
            n++;
        } else {
            kentry_free(e);
        }
    }
    pulse_free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    m->n = n;
    return PULSE_OK;
}

/* ---- state ------------------------------------------------------------ */

struct fp_entry {
    int64_t base;
    uint64_t size;
};

struct pulse_compact {
    int64_t cursor_base;  /* the next window starts at the first sealed base >= this */
    uint32_t slice_shift; /* 2^shift key slices */
    uint32_t slice;       /* the slice mapped next */

    /* What the last pass left behind, for the skip test of step 2. */
    struct fp_entry *fp;
    size_t fp_n;
    bool quiet;         /* a whole cycle found nothing left to do */
    bool cycle_clean;   /* the cycle in progress has found nothing pending */
    int64_t wake_ms;    /* a kept tombstone expires at this time */
};

void pulse_compact_config_init(struct pulse_compact_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->tombstone_retention_ms = PULSE_COMPACT_DEFAULT_TOMBSTONE_RETENTION_MS;
    cfg->min_gain_ratio = PULSE_COMPACT_DEFAULT_MIN_GAIN_RATIO;
    cfg->max_keys = PULSE_COMPACT_DEFAULT_MAX_KEYS;
    cfg->max_segments_per_pass = PULSE_COMPACT_DEFAULT_MAX_SEGMENTS;
    cfg->batch_max_records = PULSE_COMPACT_DEFAULT_BATCH_RECORDS;
    cfg->batch_max_bytes = PULSE_COMPACT_DEFAULT_BATCH_BYTES;
}

pulse_status_t pulse_compact_create(struct pulse_compact **out)
{
    struct pulse_compact *comp = pulse_calloc(1, sizeof *comp);
    if (comp == NULL)
        return PULSE_NOMEM;
    comp->wake_ms = INT64_MAX;
    *out = comp;
    return PULSE_OK;
}

void pulse_compact_destroy(struct pulse_compact *comp)
{
    if (comp == NULL)
        return;
    pulse_free(comp->fp);
    pulse_free(comp);
}

/* ---- streaming batch reader ------------------------------------------- */

/* Reads the whole, verified batches of [0, end) of one file, READ_CHUNK at
 * a time; a batch larger than that is read whole (it is bounded by the
 * segment size). */
struct reader {
    const struct pulse_io *io;
    struct pulse_segment *seg; /* its data file pinned from the first fill */
    int fd;                    /* -1 until then */
    const char *path;
    uint64_t pos; /* file position of the next batch */
    uint64_t end;
    uint8_t *buf;
    size_t cap;
    uint64_t buf_pos; /* file position of buf[0] */
    size_t buf_len;
};

static void reader_init(struct reader *r, struct pulse_segment *seg, uint64_t end)
{
    memset(r, 0, sizeof *r);
    r->io = seg->io;
    r->seg = seg;
    r->fd = -1;
    r->path = seg->log_path;
    r->end = end;
}

static void reader_fini(struct reader *r)
{
    if (r->fd >= 0)
        pulse_segment_unpin(r->seg);
    r->fd = -1;
    pulse_free(r->buf);
    r->buf = NULL;
}

/* Makes bytes [r->pos, r->pos + need) available in buf. need <= end - pos. */
static pulse_status_t reader_fill(struct reader *r, size_t need)
{
    size_t want;
    ssize_t got;

    if (r->pos >= r->buf_pos && r->pos + need <= r->buf_pos + r->buf_len)
        return PULSE_OK;
    if (r->fd < 0) {
        pulse_status_t st = pulse_segment_pin(r->seg, &r->fd);
        if (st != PULSE_OK) {
            r->fd = -1;
            return st;
        }
    }
    want = need > READ_CHUNK ? need : READ_CHUNK;
    if (want > r->end - r->pos)
        want = (size_t)(r->end - r->pos);
    if (want > r->cap) {
        uint8_t *nb = pulse_realloc(r->buf, want);
        if (nb == NULL)
            return PULSE_NOMEM;
        r->buf = nb;
        r->cap = want;
    }
    got = pulse_io_pread_all(r->io, r->fd, r->buf, want, (off_t)r->pos);
    if (got < 0) {
        int err = errno;
        PULSE_ERROR("compact: pread %s at %" PRIu64 " failed: %s", r->path, r->pos, strerror(err));
        return pulse_status_from_errno(err);
    }
    r->buf_pos = r->pos;
    r->buf_len = (size_t)got;
    if ((size_t)got < need)
        return PULSE_CORRUPT; /* the file is shorter than its published end */
    return PULSE_OK;
}

/* Next verified batch: PULSE_OK with *batch and *len (valid until the next
 * call), PULSE_EOF at the end, PULSE_CORRUPT for a batch that fails
 * verification (hostile bytes: never trusted, never crashed on). */
static pulse_status_t reader_next(struct reader *r, const uint8_t **batch, size_t *len,
                                  struct pulse_batch_header *hdr, uint64_t *bytes_read)
{
    size_t total;
    pulse_status_t st;

    if (r->pos >= r->end)
        return PULSE_EOF;
    if (r->end - r->pos < PULSE_BATCH_HEADER_SIZE)
        return PULSE_CORRUPT;
    st = reader_fill(r, PULSE_BATCH_HEADER_SIZE);
    if (st != PULSE_OK)
        return st;
    st = pulse_batch_parse_header(r->buf + (r->pos - r->buf_pos), (size_t)(r->end - r->pos), hdr);
    if (st != PULSE_OK)
        return PULSE_CORRUPT;
    total = pulse_batch_total_size(hdr);
    st = reader_fill(r, total);
    if (st != PULSE_OK)
        return st;
    *batch = r->buf + (r->pos - r->buf_pos);
    if (pulse_batch_verify(*batch, total, hdr, NULL) != PULSE_OK)
        return PULSE_CORRUPT;
    *len = total;
    r->pos += total;
    *bytes_read += total;
    return PULSE_OK;
}

/* ---- one pass --------------------------------------------------------- */

struct captured {
    struct pulse_segment *seg; /* a reference */
    uint64_t size;             /* bytes to consider */
};

struct pass {
    struct pulse_compact *comp;
    struct pulse_plog *plog;
    const struct pulse_compact_config *cfg;
    int64_t now_ms;
    struct kmap map;
    bool map_corrupt;
    uint64_t bytes_read;
    struct pulse_compact_result res;
};

static bool in_slice(const struct pass *p, uint64_t h)
{
    return slice_of(h, p->comp->slice_shift) == p->comp->slice;
}

static pulse_status_t map_record(struct pass *p, const struct pulse_record_view *rec)
{
    struct kentry *e;
    uint64_t h;
    pulse_status_t st;

    if (rec->key == NULL)
        return PULSE_OK; /* keyless records are never deduplicated */
    h = key_hash(rec->key, rec->key_len);
    for (;;) {
        if (!in_slice(p, h))
            return PULSE_OK;
        e = kmap_find(&p->map, h, rec->key, rec->key_len);
        if (e != NULL) {
            /* Records are mapped in offset order: this one is newer. */
            e->older = true;
            e->newest = rec->offset;
            e->ts = rec->timestamp;
            e->tomb = rec->value == NULL;
            return PULSE_OK;
        }
        if (p->map.n < p->cfg->max_keys)
            break;
        /* Full: halve the mapped slice of the key space and drop the keys
         * that fall outside it, then retry. */
        if (p->comp->slice_shift >= MAX_SLICE_SHIFT) {
            PULSE_ERROR("compact %s: more than %zu keys in 1/%u of the key space; raise the key cap",
                        p->plog->dir, p->cfg->max_keys, 1u << MAX_SLICE_SHIFT);
            return PULSE_TOO_LARGE;
        }
        p->comp->slice_shift++;
        st = kmap_rebuild(&p->map, p->map.cap, false, p->comp->slice_shift, p->comp->slice);
        if (st != PULSE_OK)
            return st;
        PULSE_INFO("compact %s: key cap %zu reached; mapping 1/%u of the key space per pass", p->plog->dir,
                   p->cfg->max_keys, 1u << p->comp->slice_shift);
    }
    if ((p->map.n + 1) * 2 > p->map.cap) {
        size_t ncap = p->map.cap == 0 ? 64 : p->map.cap * 2;
        st = kmap_rebuild(&p->map, ncap, true, 0, 0);
        if (st != PULSE_OK)
            return st;
    }
    {
        struct kentry ne;
        memset(&ne, 0, sizeof ne);
        ne.hash = h;
        ne.used = true;
        ne.key_len = rec->key_len;
        if (rec->key_len > KEY_INLINE) {
            ne.key.ptr = pulse_malloc(rec->key_len);
            if (ne.key.ptr == NULL)
                return PULSE_NOMEM;
            memcpy(ne.key.ptr, rec->key, rec->key_len);
        } else {
            memcpy(ne.key.inl, rec->key, rec->key_len);
        }
        ne.newest = rec->offset;
        ne.ts = rec->timestamp;
        ne.tomb = rec->value == NULL;
        ne.older = false;
        kmap_place(p->map.slots, p->map.cap, &ne);
        p->map.n++;
    }
    return PULSE_OK;
}

/* Step 3: maps every captured byte. A corrupt batch ends that segment's
 * contribution and is remembered (no tombstone may then be dropped). */
static pulse_status_t build_map(struct pass *p, const struct captured *caps, size_t n)
{
    pulse_status_t st = PULSE_OK;

    for (size_t i = 0; i < n; i++) {
        struct reader r;
        uint64_t fsize = 0;
        /* A sealed segment longer than its published end had a bad batch at
         * recovery: what lies past it is unknown, so it might hold an older
         * value of any key. */
        if (i + 1 < n && pulse_segment_file_size(caps[i].seg, &fsize) == PULSE_OK && fsize != caps[i].size)
            p->map_corrupt = true;
        reader_init(&r, caps[i].seg, caps[i].size);
        for (;;) {
            const uint8_t *batch;
            size_t len;
            struct pulse_batch_header hdr;
            struct pulse_batch_iter it;
            struct pulse_record_view rec;

            st = reader_next(&r, &batch, &len, &hdr, &p->bytes_read);
            if (st == PULSE_EOF) {
                st = PULSE_OK;
                break;
            }
            if (st == PULSE_CORRUPT) {
                PULSE_WARN("compact %s: %s has an invalid batch at byte %" PRIu64
                           "; keys past it are not mapped and no tombstone is dropped this pass",
                           p->plog->dir, caps[i].seg->log_path, r.pos);
                p->map_corrupt = true;
                st = PULSE_OK;
                break;
            }
            if (st != PULSE_OK)
                break;
            st = pulse_batch_iter_init(&it, batch, len);
            while (st == PULSE_OK && (st = pulse_batch_iter_next(&it, &rec)) == PULSE_OK)
                st = map_record(p, &rec);
            if (st == PULSE_EOF)
                st = PULSE_OK;
            if (st != PULSE_OK)
                break;
        }
        reader_fini(&r);
        if (st != PULSE_OK)
            break;
    }
    return st;
}

/* Survivors waiting to be encoded into one sparse batch. Their bytes are
 * copied into arena (the source batch buffer is reused by the reader);
 * pointers are fixed up at encode time because the arena may move. */
struct pending_rec {
    int64_t offset;
    int64_t timestamp;
    size_t key_off, value_off, hdr_off;
    uint32_t key_len, value_len, header_count;
    size_t hdr_len;
};

struct writer {
    const struct pulse_io *io;
    int fd;
    const char *path;
    const struct pulse_compact_config *cfg;
    uint32_t interval;
    int64_t seg_base;
    struct pending_rec *recs; /* cfg->batch_max_records slots */
    size_t n;
    size_t bytes; /* encoded size of the pending batch so far */
    struct pulse_buf arena;
    struct pulse_buf out;
    struct pulse_record_in *ins;
    struct pulse_header_in *hins;
    size_t hins_cap;
    struct pulse_index index;
    uint64_t size;        /* bytes written */
    uint64_t since_entry; /* bytes since the last index entry */
    uint64_t kept;        /* records written */
    int64_t max_ts;
};

static size_t record_size(const struct pulse_record_view *rec)
{
    return 4 + 1 + 4 + 4 + 4 + (rec->key != NULL ? rec->key_len : 0) + 4 +
           (rec->value != NULL ? rec->value_len : 0) + 4 + rec->headers_len;
}

static pulse_status_t writer_flush(struct writer *w)
{
    size_t nh = 0;
    pulse_status_t st = PULSE_OK;

    if (w->n == 0)
        return PULSE_OK;
    for (size_t i = 0; i < w->n; i++)
        nh += w->recs[i].header_count;
    if (nh > w->hins_cap) {
        struct pulse_header_in *nb = pulse_realloc(w->hins, nh * sizeof *nb);
        if (nb == NULL)
            return PULSE_NOMEM;
        w->hins = nb;
        w->hins_cap = nh;
    }
    nh = 0;
    for (size_t i = 0; i < w->n; i++) {
        const struct pending_rec *pr = &w->recs[i];
        struct pulse_record_in *in = &w->ins[i];
        struct pulse_record_view hv;
        size_t hpos = 0;

        memset(in, 0, sizeof *in);
        in->timestamp = pr->timestamp;
        in->offset_delta = (uint32_t)(pr->offset - w->recs[0].offset);
        in->key_len = pr->key_len;
        in->key = pr->key_len == PULSE_BATCH_NULL ? NULL : w->arena.data + pr->key_off;
        in->value_len = pr->value_len;
        in->value = pr->value_len == PULSE_BATCH_NULL ? NULL : w->arena.data + pr->value_off;
        in->headers = w->hins + nh;
        in->header_count = pr->header_count;
        /* Walk the copied raw header bytes with the codec's own walker. */
        memset(&hv, 0, sizeof hv);
        hv.header_count = pr->header_count;
        hv.headers = w->arena.data + pr->hdr_off;
        hv.headers_len = pr->hdr_len;
        for (uint32_t j = 0; j < pr->header_count; j++) {
            struct pulse_header_view h;
            if (pulse_record_header_next(&hv, &hpos, &h) != PULSE_OK)
                return PULSE_CORRUPT; /* cannot happen: the source batch verified */
            w->hins[nh].key = h.key;
            w->hins[nh].key_len = h.key_len;
            w->hins[nh].value = h.value;
            w->hins[nh].value_len = h.value == NULL ? PULSE_BATCH_NULL : h.value_len;
            nh++;
        }
    }
    pulse_buf_reset(&w->out);
    st = pulse_batch_encode(&w->out, w->recs[0].offset, PULSE_BATCH_FLAG_SPARSE, w->ins, w->n);
    if (st != PULSE_OK) {
        PULSE_ERROR("compact: re-encoding %zu records at offset %" PRId64 " failed: %s", w->n, w->recs[0].offset,
                    pulse_status_name(st));
        return st;
    }
    if (pulse_io_pwrite_all(w->io, w->fd, w->out.data, w->out.len, (off_t)w->size, NULL) < 0) {
        int err = errno;
        PULSE_ERROR("compact: pwrite %s failed: %s", w->path, strerror(err));
        return pulse_status_from_errno(err);
    }
    if (w->index.n == 0 || w->since_entry >= w->interval) {
        st = pulse_index_append(&w->index, (uint32_t)(w->recs[0].offset - w->seg_base), (uint32_t)w->size);
        if (st != PULSE_OK)
            return st;
        w->since_entry = 0;
    }
    w->since_entry += w->out.len;
    w->size += w->out.len;
    w->kept += w->n;
    for (size_t i = 0; i < w->n; i++)
        if (w->recs[i].timestamp > w->max_ts)
            w->max_ts = w->recs[i].timestamp;
    w->n = 0;
    w->bytes = PULSE_BATCH_HEADER_SIZE;
    pulse_buf_reset(&w->arena);
    return PULSE_OK;
}

static pulse_status_t writer_add(struct writer *w, const struct pulse_record_view *rec)
{
    size_t rsize = record_size(rec);
    struct pending_rec *pr;
    pulse_status_t st;

    if (w->n > 0) {
        const struct pending_rec *first = &w->recs[0];
        int64_t dts = rec->timestamp - first->timestamp;
        /* Split rather than let a delta pass its field: timestamps must stay
         * within an int32 of milliseconds of the batch's first, offsets
         * within the sparse bound (2^31) of its base. */
        if (w->n >= w->cfg->batch_max_records || w->bytes + rsize > w->cfg->batch_max_bytes ||
            dts > INT32_MAX || dts < INT32_MIN || rec->offset - first->offset >= ((int64_t)1 << 31)) {
            st = writer_flush(w);
            if (st != PULSE_OK)
                return st;
        }
    }
    pr = &w->recs[w->n];
    memset(pr, 0, sizeof *pr);
    pr->offset = rec->offset;
    pr->timestamp = rec->timestamp;
    pr->key_len = rec->key != NULL ? rec->key_len : PULSE_BATCH_NULL;
    pr->value_len = rec->value != NULL ? rec->value_len : PULSE_BATCH_NULL;
    pr->header_count = rec->header_count;
    pr->key_off = w->arena.len;
    if (rec->key != NULL && (st = pulse_buf_append(&w->arena, rec->key, rec->key_len)) != PULSE_OK)
        return st;
    pr->value_off = w->arena.len;
    if (rec->value != NULL && (st = pulse_buf_append(&w->arena, rec->value, rec->value_len)) != PULSE_OK)
        return st;
    pr->hdr_off = w->arena.len;
    pr->hdr_len = rec->headers_len;
    if (rec->headers_len > 0 && (st = pulse_buf_append(&w->arena, rec->headers, rec->headers_len)) != PULSE_OK)
        return st;
    w->n++;
    w->bytes += rsize;
    return PULSE_OK;
}

static void writer_fini(struct writer *w)
{
    pulse_free(w->recs);
    pulse_free(w->ins);
    pulse_free(w->hins);
    pulse_buf_fini(&w->arena);
    pulse_buf_fini(&w->out);
    pulse_index_fini(&w->index);
}

enum seg_outcome { OUT_NOCHANGE, OUT_GATED, OUT_REWRITTEN, OUT_DELETED, OUT_SKIPPED };

static char *temp_path(const char *dir, int64_t base, const char *ext)
{
    size_t need = strlen(dir) + 64;
    char *s = pulse_malloc(need);
    if (s != NULL)
        snprintf(s, need, "%s/.tmp-compact-%020" PRId64 ".%s.tmp", dir, base, ext);
    return s;
}

/* Finds seg in the list. Caller holds wlock (the list only changes under
 * it). Returns its index or SIZE_MAX. */
static size_t list_find(struct pulse_plog *plog, const struct pulse_segment *seg)
{
    for (size_t i = 0; i + 1 < plog->nsegs; i++)
        if (plog->segs[i] == seg)
            return i;
    return SIZE_MAX;
}

/* Removes a segment whose every record was dropped: the same as a trim of
 * that one segment. A middle segment may go too: sealed segments take their
 * end from the next segment's base, so the previous one's range simply
 * grows, and reads skip forward over the gap. The index goes first, so a
 * crash between the unlinks leaves a data file whose index is rebuilt, never
 * an orphan index. */
static pulse_status_t delete_segment(struct pass *p, struct pulse_segment *seg)
{
    struct pulse_plog *plog = p->plog;
    const struct pulse_io *io = plog->io;
    size_t at;
    pulse_status_t st = PULSE_OK;

    pthread_mutex_lock(&plog->wlock);
    if (atomic_load(&plog->fenced)) {
        st = PULSE_FENCED;
        goto out;
    }
    at = list_find(plog, seg);
    if (at == SIZE_MAX) {
        st = PULSE_BUSY; /* trimmed meanwhile: nothing to do */
        goto out;
    }
    /* Readers holding the segment keep its descriptor (fdcache.h). */
    st = pulse_segment_retire(seg);
    if (st != PULSE_OK)
        goto out;
    if (io->unlink(io, seg->index_path) < 0 && errno != ENOENT) {
        int err = errno;
        PULSE_ERROR("compact: unlink %s failed: %s", seg->index_path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    if (io->unlink(io, seg->log_path) < 0) {
        int err = errno;
        PULSE_ERROR("compact: unlink %s failed: %s", seg->log_path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    pthread_mutex_lock(&plog->list_lock);
    memmove(plog->segs + at, plog->segs + at + 1, (plog->nsegs - at - 1) * sizeof *plog->segs);
    plog->nsegs--;
    if (at == 0)
        atomic_store_explicit(&plog->log_start, plog->segs[0]->base, memory_order_release);
    pthread_mutex_unlock(&plog->list_lock);
    /* The list's reference; readers holding one keep the inode alive. */
    pulse_segment_release(seg);
    if (io->fsync_dir(io, plog->dir) < 0) {
        int err = errno;
        PULSE_ERROR("compact: fsync directory %s failed: %s", plog->dir, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    PULSE_INFO("compact %s: deleted segment %020" PRId64 " (no record survived)", plog->dir, seg->base);
out:
    pthread_mutex_unlock(&plog->wlock);
    return st;
}

/* Writes the index table to its temp file, then fdatasyncs both temps. */
static pulse_status_t sync_temps(struct writer *w, int ifd, const char *ipath)
{
    const struct pulse_io *io = w->io;
    size_t len = w->index.n * PULSE_INDEX_ENTRY_SIZE;
    uint8_t *raw = pulse_malloc(len > 0 ? len : 1);
    pulse_status_t st = PULSE_OK;

    if (raw == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < w->index.n; i++)
        pulse_index_encode_entry(&w->index.entries[i], raw + i * PULSE_INDEX_ENTRY_SIZE);
    if (pulse_io_pwrite_all(io, ifd, raw, len, 0, NULL) < 0) {
        int err = errno;
        PULSE_ERROR("compact: pwrite %s failed: %s", ipath, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    /* Both temps must be on disk before either name can point at them. */
    if (io->fdatasync(io, w->fd) < 0) {
        int err = errno;
        PULSE_ERROR("compact: fdatasync %s failed: %s", w->path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    if (io->fdatasync(io, ifd) < 0) {
        int err = errno;
        PULSE_ERROR("compact: fdatasync %s failed: %s", ipath, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
out:
    pulse_free(raw);
    return st;
}

/* Renames the synced temps over the segment's files and swaps the segment
 * struct in the list (see the file comment for the crash cases). */
static pulse_status_t swap_in(struct pass *p, struct pulse_segment *seg, struct writer *w, const char *dpath,
                              const char *ipath, bool *renamed_out)
{
    struct pulse_plog *plog = p->plog;
    const struct pulse_io *io = plog->io;
    struct pulse_segment *nseg = NULL;
    size_t at;
    pulse_status_t st = PULSE_OK;

    *renamed_out = false;
    pthread_mutex_lock(&plog->wlock);
    if (atomic_load(&plog->fenced)) {
        st = PULSE_FENCED;
        goto out;
    }
    at = list_find(plog, seg);
    if (at == SIZE_MAX) {
        st = PULSE_BUSY;
        goto out;
    }
    /* Readers holding the old segment keep its inode through its retired
     * descriptor; a reopen by path would find the new file. */
    st = pulse_segment_retire(seg);
    if (st != PULSE_OK)
        goto out;
    if (io->rename(io, dpath, seg->log_path) < 0) {
        int err = errno;
        PULSE_ERROR("compact: rename %s -> %s failed: %s", dpath, seg->log_path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    *renamed_out = true;
    pulse_failpoint("compact_between_renames");
    /* From here on the old struct keeps serving the old inode, whose bytes
     * are a superset of the new file's, so a failure below never makes a
     * read wrong; recovery sorts out the files. */
    if (io->rename(io, ipath, seg->index_path) < 0) {
        int err = errno;
        PULSE_ERROR("compact: rename %s -> %s failed: %s (the index is rebuilt at the next open)", ipath,
                    seg->index_path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    pulse_failpoint("compact_before_dir_fsync");
    if (io->fsync_dir(io, plog->dir) < 0) {
        int err = errno;
        PULSE_ERROR("compact: fsync directory %s failed: %s", plog->dir, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    st = pulse_segment_open(io, plog->fdcache, plog->dir, seg->base, false, &nseg);
    if (st != PULSE_OK)
        goto out;
    for (size_t i = 0; i < w->index.n; i++) {
        st = pulse_index_append(&nseg->index, w->index.entries[i].rel_offset, w->index.entries[i].rel_pos);
        if (st != PULSE_OK)
            goto out;
    }
    nseg->index_written = w->index.n;
    atomic_store_explicit(&nseg->index_synced, w->index.n, memory_order_relaxed);
    atomic_store_explicit(&nseg->size, w->size, memory_order_relaxed);
    atomic_store_explicit(&nseg->durable_size, w->size, memory_order_relaxed);
    atomic_store_explicit(&nseg->next_offset, atomic_load(&seg->next_offset), memory_order_relaxed);
    atomic_store_explicit(&nseg->max_ts, w->max_ts, memory_order_relaxed);
    nseg->since_entry = w->since_entry;
    pulse_segment_close_index(nseg); /* sealed: its table is complete */
    pthread_mutex_lock(&plog->list_lock);
    plog->segs[at] = nseg; /* the list's reference moves to nseg */
    pthread_mutex_unlock(&plog->list_lock);
    nseg = NULL;
    pulse_segment_release(seg); /* the list's old reference */
out:
    pthread_mutex_unlock(&plog->wlock);
    pulse_segment_release(nseg);
    return st;
}

/* Steps 4 and 5 for one sealed segment. */
static pulse_status_t compact_segment(struct pass *p, const struct captured *cap, enum seg_outcome *outcome)
{
    struct pulse_plog *plog = p->plog;
    const struct pulse_io *io = plog->io;
    struct pulse_segment *seg = cap->seg;
    const struct pulse_compact_config *cfg = p->cfg;
    struct reader r;
    struct writer w;
    char *dpath = NULL, *ipath = NULL;
    int ifd = -1;
    uint64_t dropped = 0, expired = 0;
    int64_t cutoff = p->now_ms - cfg->tombstone_retention_ms;
    bool renamed = false;
    bool corrupt = false;
    pulse_status_t st = PULSE_OK;

    *outcome = OUT_NOCHANGE;
    reader_init(&r, seg, cap->size);
    memset(&w, 0, sizeof w);
    w.io = io;
    w.fd = -1;
    w.cfg = cfg;
    w.interval = plog->cfg.index_interval_bytes;
    w.seg_base = seg->base;
    w.bytes = PULSE_BATCH_HEADER_SIZE;
    w.max_ts = INT64_MIN;
    pulse_buf_init(&w.arena, SIZE_MAX);
    pulse_buf_init(&w.out, SIZE_MAX);
    pulse_index_init(&w.index);
    w.recs = pulse_calloc(cfg->batch_max_records, sizeof *w.recs);
    w.ins = pulse_calloc(cfg->batch_max_records, sizeof *w.ins);
    dpath = temp_path(plog->dir, seg->base, "log");
    ipath = temp_path(plog->dir, seg->base, "index");
    if (w.recs == NULL || w.ins == NULL || dpath == NULL || ipath == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    {
        /* Recovery publishes only the valid prefix of a sealed segment with
         * a bad batch; its file is longer. Leave such a segment alone: a
         * rewrite would silently drop the evidence. */
        uint64_t fsize = 0;
        st = pulse_segment_file_size(seg, &fsize);
        if (st != PULSE_OK)
            goto out;
        if (fsize != cap->size) {
            PULSE_WARN("compact %s: %s holds %" PRIu64 " bytes but only %" PRIu64
                       " are valid; segment left as is",
                       plog->dir, seg->log_path, fsize, cap->size);
            *outcome = OUT_SKIPPED;
            goto out;
        }
    }
    w.path = dpath;
    w.fd = io->open(io, dpath, O_CREAT | O_TRUNC | O_RDWR, 0644);
    if (w.fd < 0) {
        int err = errno;
        PULSE_ERROR("compact: open %s failed: %s", dpath, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    for (;;) {
        const uint8_t *batch;
        size_t len;
        struct pulse_batch_header hdr;
        struct pulse_batch_iter it;
        struct pulse_record_view rec;

        st = reader_next(&r, &batch, &len, &hdr, &p->bytes_read);
        if (st == PULSE_EOF) {
            st = PULSE_OK;
            break;
        }
        if (st == PULSE_CORRUPT) {
            /* Never rewrite around damage: that would hide it. */
            PULSE_WARN("compact %s: %s has an invalid batch at byte %" PRIu64 "; segment left as is",
                       plog->dir, seg->log_path, r.pos);
            corrupt = true;
            st = PULSE_OK;
            break;
        }
        if (st != PULSE_OK)
            goto out;
        st = pulse_batch_iter_init(&it, batch, len);
        while (st == PULSE_OK && (st = pulse_batch_iter_next(&it, &rec)) == PULSE_OK) {
            bool keep = true;
            if (rec.key != NULL) {
                uint64_t h = key_hash(rec.key, rec.key_len);
                struct kentry *e = in_slice(p, h) ? kmap_find(&p->map, h, rec.key, rec.key_len) : NULL;
                if (e != NULL && rec.offset < e->newest) {
                    keep = false; /* superseded by a newer record of its key */
                    dropped++;
                } else if (e != NULL && rec.offset == e->newest && e->tomb && rec.timestamp < cutoff &&
                           !e->older && !p->map_corrupt) {
                    keep = false; /* an expired tombstone, alone in the log */
                    dropped++;
                    expired++;
                }
            }
            if (keep)
                st = writer_add(&w, &rec);
        }
        if (st == PULSE_EOF)
            st = PULSE_OK;
        if (st != PULSE_OK)
            goto out;
    }
    if (corrupt) {
        *outcome = OUT_SKIPPED;
        goto out;
    }
    if (dropped == 0)
        goto out;
    st = writer_flush(&w);
    if (st != PULSE_OK)
        goto out;
    if (w.kept == 0) {
        st = delete_segment(p, seg);
        if (st == PULSE_OK)
            *outcome = OUT_DELETED;
        else if (st == PULSE_BUSY)
            st = PULSE_OK;
        goto out;
    }
    /* Gain gate: a rewrite costs I/O; skip it unless it pays, or it removes
     * an expired tombstone (which only a rewrite can ever remove). */
    if (expired == 0 && (w.size >= cap->size || (double)(cap->size - w.size) < cfg->min_gain_ratio * (double)cap->size)) {
        *outcome = OUT_GATED;
        goto out;
    }
    ifd = io->open(io, ipath, O_CREAT | O_TRUNC | O_RDWR, 0644);
    if (ifd < 0) {
        int err = errno;
        PULSE_ERROR("compact: open %s failed: %s", ipath, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    st = sync_temps(&w, ifd, ipath);
    if (st != PULSE_OK)
        goto out;
    pulse_failpoint("compact_after_temps");
    st = swap_in(p, seg, &w, dpath, ipath, &renamed);
    if (st == PULSE_BUSY) {
        st = PULSE_OK;
        goto out;
    }
    if (st != PULSE_OK)
        goto out;
    *outcome = OUT_REWRITTEN;
    PULSE_INFO("compact %s: rewrote segment %020" PRId64 ": %" PRIu64 " -> %" PRIu64 " bytes, %" PRIu64
               " records dropped (%" PRIu64 " expired tombstones)",
               plog->dir, seg->base, cap->size, w.size, dropped, expired);
out:
    if (w.fd >= 0)
        io->close(io, w.fd);
    if (ifd >= 0)
        io->close(io, ifd);
    /* A temp that was not renamed is garbage (recovery would delete it). */
    if (dpath != NULL && !renamed)
        (void)io->unlink(io, dpath);
    if (ipath != NULL && *outcome != OUT_REWRITTEN)
        (void)io->unlink(io, ipath);
    if (st == PULSE_OK && *outcome == OUT_REWRITTEN) {
        p->res.bytes_after += w.size;
    } else if (st == PULSE_OK && *outcome == OUT_DELETED) {
        p->res.bytes_after += 0;
    } else {
        p->res.bytes_after += cap->size;
    }
    pulse_free(dpath);
    pulse_free(ipath);
    writer_fini(&w);
    reader_fini(&r);
    return st;
}

static bool fp_equal(const struct pulse_compact *comp, const struct captured *caps, size_t n)
{
    if (comp->fp == NULL || comp->fp_n != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (comp->fp[i].base != caps[i].seg->base || comp->fp[i].size != caps[i].size)
            return false;
    return true;
}

/* Looks at the finished map: when does the next kept tombstone expire, and
 * is an expired one waiting only for its older values to go. */
static void map_outlook(const struct pass *p, int64_t *wake_out, bool *pending_out)
{
    int64_t cutoff = p->now_ms - p->cfg->tombstone_retention_ms;
    int64_t wake = INT64_MAX;
    bool pending = false;

    for (size_t i = 0; i < p->map.cap; i++) {
        const struct kentry *e = &p->map.slots[i];
        if (!e->used || !e->tomb)
            continue;
        if (e->ts >= cutoff) {
            int64_t at = e->ts > INT64_MAX - p->cfg->tombstone_retention_ms - 1
                             ? INT64_MAX
                             : e->ts + p->cfg->tombstone_retention_ms + 1;
            if (at < wake)
                wake = at;
        } else if (e->older) {
            pending = true;
        }
    }
    *wake_out = wake;
    *pending_out = pending;
}

pulse_status_t pulse_compact_run(struct pulse_compact *comp, struct pulse_plog *plog,
                                 const struct pulse_compact_config *cfg, int64_t now_ms,
                                 struct pulse_compact_result *out)
{
    struct pass p;
    struct captured *caps = NULL;
    size_t n = 0, nsealed, first, last;
    int64_t t0 = pulse_clock_mono_us();
    int64_t wake = INT64_MAX;
    bool pending = false;
    bool same;
    pulse_status_t st = PULSE_OK;

    memset(&p, 0, sizeof p);
    p.comp = comp;
    p.plog = plog;
    p.cfg = cfg;
    p.now_ms = now_ms;
    if (comp == NULL || plog == NULL || cfg == NULL || cfg->max_keys == 0 || cfg->max_segments_per_pass == 0 ||
        cfg->batch_max_records == 0 || cfg->batch_max_bytes <= PULSE_BATCH_HEADER_SIZE ||
        cfg->tombstone_retention_ms < 0 || !(cfg->min_gain_ratio >= 0.0)) {
        st = PULSE_INVALID;
        goto out;
    }
    if (atomic_load(&plog->fenced)) {
        st = PULSE_FENCED;
        goto out;
    }

    /* Step 1. */
    pthread_mutex_lock(&plog->list_lock);
    caps = pulse_calloc(plog->nsegs, sizeof *caps);
    if (caps == NULL) {
        pthread_mutex_unlock(&plog->list_lock);
        st = PULSE_NOMEM;
        goto out;
    }
    for (n = 0; n < plog->nsegs; n++) {
        struct pulse_segment *seg = plog->segs[n];
        bool active = n + 1 == plog->nsegs;
        pulse_segment_acquire(seg);
        caps[n].seg = seg;
        /* The active segment contributes its durable prefix only: bytes past
         * it may still be cut by a failed sync. */
        caps[n].size = atomic_load_explicit(active ? &seg->durable_size : &seg->size, memory_order_acquire);
    }
    pthread_mutex_unlock(&plog->list_lock);
    nsealed = n - 1;
    if (nsealed == 0)
        goto out; /* a single-segment log never compacts until it rotates */

    /* Step 2. */
    same = fp_equal(comp, caps, n);
    if (!same || now_ms >= comp->wake_ms) {
        comp->quiet = false;
        comp->cycle_clean = false;
    }
    if (same && comp->quiet)
        goto out;

    /* Step 3. */
    st = build_map(&p, caps, n);
    if (st != PULSE_OK)
        goto out;
    map_outlook(&p, &wake, &pending);

    /* Step 4: the window. */
    for (first = 0; first < nsealed && caps[first].seg->base < comp->cursor_base; first++)
        ;
    if (first == nsealed)
        first = 0;
    if (first == 0)
        comp->cycle_clean = true; /* a fresh cycle over an unchanged map */
    last = first + cfg->max_segments_per_pass;
    if (last > nsealed)
        last = nsealed;
    for (size_t i = first; i < last; i++) {
        enum seg_outcome oc;
        p.res.segments_scanned++;
        p.res.bytes_before += caps[i].size;
        st = compact_segment(&p, &caps[i], &oc);
        if (st != PULSE_OK)
            goto out;
        switch (oc) {
        case OUT_REWRITTEN:
            p.res.segments_rewritten++;
            break;
        case OUT_DELETED:
            p.res.segments_deleted++;
            break;
        case OUT_GATED:
            p.res.skipped_by_gain_gate++;
            break;
        case OUT_NOCHANGE:
        case OUT_SKIPPED:
            break;
        }
    }
    comp->cursor_base = last < nsealed ? caps[last].seg->base : 0;

    /* What is left for later: other key slices, tombstones waiting for their
     * older values to go, or unreadable bytes make the cycle unclean. */
    if (comp->slice_shift > 0 || pending || p.map_corrupt)
        comp->cycle_clean = false;
    /* The next key slice starts with the next cycle, so that every sealed
     * segment meets every slice. */
    if (comp->slice_shift > 0 && last == nsealed)
        comp->slice = (comp->slice + 1) & ((1u << comp->slice_shift) - 1);
    if (last == nsealed && comp->cycle_clean)
        comp->quiet = true;
    comp->wake_ms = wake;

    /* Remember the layout as this pass left it (own rewrites included), so
     * that only a change by someone else forces the next map scan. */
    {
        struct fp_entry *fp = pulse_calloc(n, sizeof *fp); /* k <= n below */
        size_t k = 0;
        if (fp == NULL) {
            st = PULSE_NOMEM;
            goto out;
        }
        pthread_mutex_lock(&plog->list_lock);
        for (size_t i = 0; i < n; i++) {
            size_t j;
            for (j = 0; j < plog->nsegs; j++)
                if (plog->segs[j]->base == caps[i].seg->base)
                    break;
            if (j == plog->nsegs)
                continue; /* deleted by this pass */
            fp[k].base = caps[i].seg->base;
            /* Sealed: the size now (rewritten or not); active: what was
             * mapped, so any growth since forces a new scan. */
            fp[k].size = i + 1 == n ? caps[i].size : atomic_load(&plog->segs[j]->size);
            k++;
        }
        pthread_mutex_unlock(&plog->list_lock);
        pulse_free(comp->fp);
        comp->fp = fp;
        comp->fp_n = k;
    }
out:
    if (st != PULSE_OK && comp != NULL) {
        comp->quiet = false;
        comp->cycle_clean = false;
        pulse_free(comp->fp);
        comp->fp = NULL;
        comp->fp_n = 0;
    }
    if (st == PULSE_OK && p.res.segments_scanned > 0)
        PULSE_DEBUG_LOG("compact %s: pass read %" PRIu64 " bytes, mapped %zu keys (slice %" PRIu32 " of %u), "
                        "evaluated %" PRIu32 " segment(s): %" PRIu32 " rewritten, %" PRIu32 " deleted, %" PRIu32
                        " gated",
                        plog->dir, p.bytes_read, p.map.n, comp->slice, 1u << comp->slice_shift,
                        p.res.segments_scanned, p.res.segments_rewritten, p.res.segments_deleted,
                        p.res.skipped_by_gain_gate);
    kmap_fini(&p.map);
    for (size_t i = 0; i < n; i++)
        pulse_segment_release(caps[i].seg);
    pulse_free(caps);
    p.res.duration_us = pulse_clock_mono_us() - t0;
    if (out != NULL)
        *out = p.res;
    return st;
}

pulse_status_t pulse_compact_pass(struct pulse_plog *plog, const struct pulse_compact_config *cfg, int64_t now_ms,
                                  struct pulse_compact_result *out)
{
    struct pulse_compact *comp = NULL;
    pulse_status_t st;

    st = pulse_compact_create(&comp);
    if (st != PULSE_OK) {
        if (out != NULL)
            memset(out, 0, sizeof *out);
        return st;
    }
    st = pulse_compact_run(comp, plog, cfg, now_ms, out);
    pulse_compact_destroy(comp);
    return st;
}
