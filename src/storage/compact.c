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
 *   4. Walk the sealed segments oldest first from the cursor, until the pass
 *      has evaluated max_bytes_per_pass bytes of them or run max_pass_ms
 *      (always at least one segment; the next pass resumes at the cursor).
 *      Each segment is first read without writing anything: a record
 *      survives if it is keyless, outside the mapped slice, or the newest of
 *      its key; a newest tombstone survives too unless it has expired AND it
 *      is the only record of its key left in the whole log (no resurrection:
 *      see below). The survivors are counted and sized exactly, batch by
 *      batch, by the rule the writer uses (batch_full).
 *   5. Group and commit. A segment with no survivor is deleted at once. The
 *      others form groups, as Kafka's LogCleaner.groupSegmentsBySize does,
 *      but measured on what survives: the next segment joins the open group
 *      while the group's survivors still fit one segment (the log's
 *      segment_max_bytes) and the group's offsets span less than 2^31 (the
 *      index stores 32-bit relative offsets); a damaged segment never joins
 *      and is never rewritten. A group of one goes through the gain gate and
 *      is rewritten by copy and swap; a group of several is merged into one
 *      file named by its first segment's base, whatever the gain: removing
 *      files is the point, and the bytes a merge writes are bounded by the
 *      segment size. Survivors are streamed into sparse batches in a temp
 *      file, one source batch in memory at a time.
 *
 * Grouping is next-fit over whole segments in offset order, which gives the
 * fewest groups of adjacent whole segments; it still leaves two neighbours
 * apart when together they exceed a segment, so a converged log holds at
 * most 2 * ceil(sealed bytes / segment size) + 1 sealed segments, and its
 * sealed bytes are the live records. A merge writes at most one segment per
 * segment file it removes, and every segment file was once filled by
 * appends, so over a log's life merges write about as much as was appended,
 * at most.
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
 * Committing. A pass never changes the log's list or its segment files
 * itself: it writes the survivors of a group into temps
 * (.tmp-compact-<base>.log.tmp and .index.tmp) and fdatasyncs them
 * (failpoint compact_after_temps), then hands the log an edit
 * (plog_edit.h): REPLACE for a rewrite (one segment) or a merge (several),
 * REMOVE for a segment with no survivor. The log checks under its writer
 * lock that the segments are still listed, renames and unlinks in the
 * crash-safe order (plog_edit.c, "Crash safety of a rewrite" and "... of a
 * merge"; docs/Storage.md), and fences itself when a failure leaves its
 * files and its list apart; recovery finishes a merge a crash interrupted
 * (recover.c, finish_merges).
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
#include "common/fsio.h"
#include "storage/plog.h"
#include "storage/plog_edit.h"
#include "storage/segscan.h"

/* Key slices: at most 2^20, so a slice number fits the hash bits used. */
#define MAX_SLICE_SHIFT 20u

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
    bool quiet;       /* a whole cycle found nothing left to do */
    bool cycle_clean; /* the cycle in progress has found nothing pending */
    int64_t wake_ms;  /* a kept tombstone expires at this time */
};

void pulse_compact_config_init(struct pulse_compact_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->tombstone_retention_ms = PULSE_COMPACT_DEFAULT_TOMBSTONE_RETENTION_MS;
    cfg->min_gain_ratio = PULSE_COMPACT_DEFAULT_MIN_GAIN_RATIO;
    cfg->max_keys = PULSE_COMPACT_DEFAULT_MAX_KEYS;
    cfg->max_bytes_per_pass = PULSE_COMPACT_DEFAULT_MAX_BYTES_PER_PASS;
    cfg->max_pass_ms = PULSE_COMPACT_DEFAULT_MAX_PASS_MS;
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

/* ---- one pass --------------------------------------------------------- */

struct pass {
    struct pulse_compact *comp;
    struct pulse_plog *plog;
    const struct pulse_compact_config *cfg;
    int64_t now_ms;
    struct kmap map;
    bool map_corrupt;
    uint64_t bytes_read;
    uint64_t evaluated;      /* sealed bytes evaluated for a rewrite, against max_bytes_per_pass */
    bool unsynced_deletions; /* drop_dead removed a segment since the last directory fsync */
    int64_t t0_us;           /* when the pass started, against max_pass_ms */
    struct pulse_compact_result res;
    struct pulse_buf inflated; /* the records of the compressed batch being walked */
    bool batch_compressed;     /* the batch being walked was stored compressed */
};

static bool in_slice(const struct pass *p, uint64_t h)
{
    return slice_of(h, p->comp->slice_shift) == p->comp->slice;
}

/* Called for each record of a walk; a status other than PULSE_OK ends it. */
typedef pulse_status_t (*record_fn)(struct pass *p, const struct pulse_record_view *rec, void *arg);

/*
 * The one loop over the records of a captured segment (the map, the dry
 * evaluation and the write all use it): walks the batches of ref's bytes
 * with the engine's iterator (segscan.h), each one verified, one source
 * batch in memory at a time, and calls fn on every record in offset order.
 * The first batch that fails verification (hostile bytes: never trusted,
 * never crashed on) ends the walk: *bad_pos gets its position (UINT64_MAX
 * when every batch verified), and the status stays PULSE_OK.
 */
static pulse_status_t walk_records(struct pass *p, const struct pulse_plog_segref *ref, record_fn fn, void *arg,
                                   uint64_t *bad_pos)
{
    struct pulse_segscan sc;
    struct pulse_segscan_item it;
    pulse_status_t st = pulse_plog_segref_scan(ref, PULSE_SEGSCAN_STOP, &sc);

    *bad_pos = UINT64_MAX;
    if (st != PULSE_OK)
        return st;
    while ((st = pulse_segscan_next(&sc, &it)) == PULSE_OK && it.kind == PULSE_SEGSCAN_BATCH) {
        struct pulse_batch_iter bi;
        struct pulse_record_view rec;

        p->bytes_read += it.end - it.pos;
        p->batch_compressed = pulse_batch_codec(&it.hdr) != PULSE_BATCH_CODEC_NONE;
        st = pulse_batch_iter_open(&bi, it.batch, (size_t)(it.end - it.pos), &p->inflated);
        while (st == PULSE_OK && (st = pulse_batch_iter_next(&bi, &rec)) == PULSE_OK)
            st = fn(p, &rec, arg);
        if (st == PULSE_EOF)
            st = PULSE_OK;
        if (st != PULSE_OK)
            break;
    }
    if (st == PULSE_OK && it.kind == PULSE_SEGSCAN_DAMAGE)
        *bad_pos = it.pos;
    pulse_plog_segref_unscan(ref, &sc);
    return st;
}

static pulse_status_t map_record(struct pass *p, const struct pulse_record_view *rec, void *arg)
{
    struct kentry *e;
    uint64_t h;
    pulse_status_t st;

    (void)arg;
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
                        pulse_plog_dir(p->plog), p->cfg->max_keys, 1u << MAX_SLICE_SHIFT);
            return PULSE_TOO_LARGE;
        }
        p->comp->slice_shift++;
        st = kmap_rebuild(&p->map, p->map.cap, false, p->comp->slice_shift, p->comp->slice);
        if (st != PULSE_OK)
            return st;
        PULSE_INFO("compact %s: key cap %zu reached; mapping 1/%u of the key space per pass", pulse_plog_dir(p->plog),
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
static pulse_status_t build_map(struct pass *p, const struct pulse_plog_segref *caps, size_t n)
{
    pulse_status_t st = PULSE_OK;

    for (size_t i = 0; i < n && st == PULSE_OK; i++) {
        uint64_t fsize = 0, bad = UINT64_MAX;
        /* A sealed segment longer than its published end had a bad batch at
         * recovery: what lies past it is unknown, so it might hold an older
         * value of any key. */
        if (i + 1 < n && pulse_plog_segref_file_size(&caps[i], &fsize) == PULSE_OK && fsize != caps[i].size)
            p->map_corrupt = true;
        st = walk_records(p, &caps[i], map_record, NULL, &bad);
        if (st == PULSE_OK && bad != UINT64_MAX) {
            PULSE_WARN("compact %s: %s has an invalid batch at byte %" PRIu64
                       "; keys past it are not mapped and no tombstone is dropped this pass",
                       pulse_plog_dir(p->plog), caps[i].path, bad);
            p->map_corrupt = true;
        }
    }
    return st;
}

/* Survivors waiting to be encoded into one sparse batch. Their bytes are
 * copied into arena (the source batch buffer is reused by the iterator);
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
    return 4 + 1 + 4 + 4 + 4 + (rec->key != NULL ? rec->key_len : 0) + 4 + (rec->value != NULL ? rec->value_len : 0) +
           4 + rec->headers_len;
}

/*
 * The one rule for where a rewritten batch ends, shared by the writer and
 * the sizer (so that a group's size is known before anything is written):
 * rec (of encoded size rsize) starts a new batch when the open one (n
 * records, bytes long, header included, first record at first_off and
 * first_ts) is full, or when rec's timestamp would sit more than an int32
 * of milliseconds from the first's, or its offset 2^31 or more past it.
 * Timestamps are never wrapped and sparse offset deltas stay in range.
 */
static bool batch_full(const struct pulse_compact_config *cfg, size_t n, size_t bytes, int64_t first_off,
                       int64_t first_ts, const struct pulse_record_view *rec, size_t rsize)
{
    int64_t dts;

    if (n == 0)
        return false;
    if (n >= cfg->batch_max_records || bytes + rsize > cfg->batch_max_bytes)
        return true;
    if (__builtin_sub_overflow(rec->timestamp, first_ts, &dts) || dts > INT32_MAX || dts < INT32_MIN)
        return true;
    return rec->offset - first_off >= ((int64_t)1 << 31);
}

/* Predicts the bytes the writer will produce for a sequence of survivors,
 * batch by batch, without encoding anything. */
struct sizer {
    uint64_t closed; /* bytes of the batches already ended */
    size_t n;        /* records in the open batch */
    size_t bytes;    /* its size so far, header included */
    int64_t first_off;
    int64_t first_ts;
};

static void sizer_add(struct sizer *s, const struct pulse_compact_config *cfg, const struct pulse_record_view *rec)
{
    size_t rsize = record_size(rec);

    if (batch_full(cfg, s->n, s->bytes, s->first_off, s->first_ts, rec, rsize)) {
        s->closed += s->bytes;
        s->n = 0;
    }
    if (s->n == 0) {
        s->bytes = PULSE_BATCH_HEADER_SIZE;
        s->first_off = rec->offset;
        s->first_ts = rec->timestamp;
    }
    s->n++;
    s->bytes += rsize;
}

static uint64_t sizer_total(const struct sizer *s)
{
    return s->closed + (s->n > 0 ? s->bytes : 0);
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
    st = pulse_batch_encode(&w->out, w->recs[0].offset, (uint16_t)(PULSE_BATCH_FLAG_SPARSE | w->cfg->codec), w->ins,
                            w->n);
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

    if (w->n > 0 && batch_full(w->cfg, w->n, w->bytes, w->recs[0].offset, w->recs[0].timestamp, rec, rsize)) {
        st = writer_flush(w);
        if (st != PULSE_OK)
            return st;
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

/* Makes the pass's deletions durable (see drop_dead): one directory
 * fsync for all of them, as a trim does for its segments. A failure
 * fences the log (pulse_plog_sync_dir). */
static pulse_status_t sync_deletions(struct pass *p)
{
    if (!p->unsynced_deletions)
        return PULSE_OK;
    p->unsynced_deletions = false;
    return pulse_plog_sync_dir(p->plog, "compact");
}

/* Writes the index table to its temp file, then fdatasyncs both temps. */
static pulse_status_t sync_temps(struct writer *w, int ifd, const char *ipath)
{
    const struct pulse_io *io = w->io;
    size_t len = 0;
    uint8_t *raw = pulse_index_encode(&w->index, &len);
    pulse_status_t st = PULSE_OK;

    if (raw == NULL)
        return PULSE_NOMEM;
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

/* ---- evaluating and grouping sealed segments (steps 4 and 5) ---------- */

/* The survival rule of step 4. Returns false when rec goes; *expired_out
 * tells whether it goes as an expired tombstone. */
static bool keep_record(const struct pass *p, const struct pulse_record_view *rec, bool *expired_out)
{
    int64_t cutoff = p->now_ms - p->cfg->tombstone_retention_ms;
    struct kentry *e;
    uint64_t h;

    *expired_out = false;
    if (rec->key == NULL)
        return true; /* keyless records are never deduplicated */
    h = key_hash(rec->key, rec->key_len);
    e = in_slice(p, h) ? kmap_find(&p->map, h, rec->key, rec->key_len) : NULL;
    if (e == NULL)
        return true; /* outside the mapped key slice */
    if (rec->offset < e->newest)
        return false; /* superseded by a newer record of its key */
    if (rec->offset == e->newest && e->tomb && rec->timestamp < cutoff && !e->older && !p->map_corrupt) {
        *expired_out = true; /* an expired tombstone, alone in the log */
        return false;
    }
    return true;
}

/* What reading one sealed segment without writing anything found. */
struct seg_eval {
    uint64_t dropped, expired, kept;
    bool unusable;       /* a bad batch, or bytes past its valid end: leave it alone */
    bool compressed;     /* it holds compressed batches */
    struct sizer all;    /* every record's size, plain, as if all survived */
    struct sizer alone;  /* the survivors' size as a group of their own */
    struct sizer joined; /* the open group's size with this segment added */
};

/* Sealed segments, adjacent in the list once the dead ones between them
 * are deleted, whose survivors go into one output file named by the first
 * one's base. mem has room for every sealed segment of the capture. */
struct group {
    const struct pulse_plog_segref **mem;
    size_t n;
    struct sizer size;
    struct sizer all; /* a group of one: the plain size of all its records */
    uint64_t dropped, expired, kept;
    bool unusable;
    bool compressed;
};

/* The record step of evaluate: the survival rule, counted and sized. */
struct eval_walk {
    struct seg_eval *ev;
    bool joining; /* ev->joined sizes the open group with this segment */
};

static pulse_status_t eval_record(struct pass *p, const struct pulse_record_view *rec, void *arg)
{
    struct eval_walk *ew = arg;
    bool expired;

    sizer_add(&ew->ev->all, p->cfg, rec);
    ew->ev->compressed = ew->ev->compressed || p->batch_compressed;
    if (!keep_record(p, rec, &expired)) {
        ew->ev->dropped++;
        ew->ev->expired += expired;
        return PULSE_OK;
    }
    ew->ev->kept++;
    sizer_add(&ew->ev->alone, p->cfg, rec);
    if (ew->joining)
        sizer_add(&ew->ev->joined, p->cfg, rec);
    return PULSE_OK;
}

/*
 * Step 4, dry: decodes cap's batches and applies the survival rule, counting
 * what would go and sizing what would stay, alone and (when open is not
 * NULL) appended to the group whose size is *open. The map is fixed for the
 * pass and sealed bytes never change, so the later write makes exactly the
 * same decisions. A segment with damage is marked unusable, never an error.
 */
static pulse_status_t evaluate(struct pass *p, const struct pulse_plog_segref *cap, const struct sizer *open,
                               struct seg_eval *ev)
{
    struct eval_walk ew = {ev, open != NULL};
    uint64_t fsize = 0, bad = UINT64_MAX;
    pulse_status_t st = PULSE_OK;

    memset(ev, 0, sizeof *ev);
    if (open != NULL)
        ev->joined = *open;
    /* Recovery publishes only the valid prefix of a sealed segment with a
     * bad batch; its file is longer. Leave such a segment alone: a rewrite
     * would silently drop the evidence. */
    st = pulse_plog_segref_file_size(cap, &fsize);
    if (st != PULSE_OK)
        return st;
    if (fsize != cap->size) {
        PULSE_WARN("compact %s: %s holds %" PRIu64 " bytes but only %" PRIu64 " are valid; segment left as is",
                   pulse_plog_dir(p->plog), cap->path, fsize, cap->size);
        ev->unusable = true;
        return PULSE_OK;
    }
    st = walk_records(p, cap, eval_record, &ew, &bad);
    if (st == PULSE_OK && bad != UINT64_MAX) {
        /* Never rewrite around damage: that would hide it. */
        PULSE_WARN("compact %s: %s has an invalid batch at byte %" PRIu64 "; segment left as is",
                   pulse_plog_dir(p->plog), cap->path, bad);
        ev->unusable = true;
    }
    return st;
}

/*
 * Whether caps[i], evaluated as ev, may join group g (Kafka's
 * LogCleaner.groupSegmentsBySize, applied to what survives rather than to
 * the input): it must be readable, the merged output must stay within the
 * log's segment size, and the group's offsets must stay within the 32-bit
 * relative offsets of the index (Kafka's bound, 2^31 - 1). caps[i + 1]
 * exists: the last captured segment is the active one, never grouped.
 */
static bool can_join(const struct pass *p, const struct pulse_plog_segref *caps, const struct group *g, size_t i,
                     const struct seg_eval *ev)
{
    if (ev->unusable || g->unusable)
        return false;
    if (caps[i + 1].base - g->mem[0]->base > INT32_MAX)
        return false;
    return sizer_total(&ev->joined) <= pulse_plog_get_config(p->plog)->segment_max_bytes;
}

/* Whether the pass has used its budget; at least one segment is always
 * evaluated, so every pass makes progress. */
static bool budget_spent(const struct pass *p, uint64_t next_size)
{
    if (p->evaluated == 0)
        return false;
    if (p->evaluated + next_size > p->cfg->max_bytes_per_pass)
        return true;
    return p->cfg->max_pass_ms > 0 && pulse_clock_mono_us() - p->t0_us >= p->cfg->max_pass_ms * 1000;
}

/* Sets up w to write survivors into the temp data file at dpath, for a
 * segment based at base. Caller runs writer_fini whatever happens. */
static pulse_status_t writer_open(struct writer *w, const struct pass *p, int64_t base, const char *dpath)
{
    const struct pulse_plog_config *pcfg = pulse_plog_get_config(p->plog);
    const struct pulse_io *io = pcfg->io;

    memset(w, 0, sizeof *w);
    w->io = io;
    w->fd = -1;
    w->cfg = p->cfg;
    w->interval = pcfg->index_interval_bytes;
    w->seg_base = base;
    w->bytes = PULSE_BATCH_HEADER_SIZE;
    w->max_ts = INT64_MIN;
    pulse_buf_init(&w->arena, SIZE_MAX);
    pulse_buf_init(&w->out, SIZE_MAX);
    pulse_index_init(&w->index);
    w->recs = pulse_calloc(p->cfg->batch_max_records, sizeof *w->recs);
    w->ins = pulse_calloc(p->cfg->batch_max_records, sizeof *w->ins);
    if (w->recs == NULL || w->ins == NULL)
        return PULSE_NOMEM;
    w->path = dpath;
    w->fd = io->open(io, dpath, O_CREAT | O_TRUNC | O_RDWR, 0644);
    if (w->fd < 0) {
        int err = errno;
        PULSE_ERROR("compact: open %s failed: %s", dpath, strerror(err));
        return pulse_status_from_errno(err);
    }
    return PULSE_OK;
}

/* The record step of write_group: survivors go to the writer. */
static pulse_status_t write_record(struct pass *p, const struct pulse_record_view *rec, void *arg)
{
    bool expired;

    return keep_record(p, rec, &expired) ? writer_add(arg, rec) : PULSE_OK;
}

/* Streams the survivors of the group's segments into w, in offset order,
 * one source batch in memory at a time, and flushes the last batch. */
static pulse_status_t write_group(struct pass *p, const struct group *g, struct writer *w)
{
    pulse_status_t st = PULSE_OK;

    for (size_t i = 0; i < g->n && st == PULSE_OK; i++) {
        uint64_t bad = UINT64_MAX;
        st = walk_records(p, g->mem[i], write_record, w, &bad);
        if (st == PULSE_OK && bad != UINT64_MAX) {
            /* It verified a moment ago: the disk changed under us. */
            PULSE_ERROR("compact %s: %s: batch at byte %" PRIu64 " no longer verifies; rewrite abandoned",
                        pulse_plog_dir(p->plog), g->mem[i]->path, bad);
            st = PULSE_CORRUPT;
        }
    }
    if (st == PULSE_OK)
        st = writer_flush(w);
    return st;
}

/* Writes the survivors of group g into the temps dpath and ipath, synced:
 * the REPLACE edit's new segment, described in *add. */
static pulse_status_t write_temps(struct pass *p, const struct group *g, struct writer *w, const char *dpath,
                                  const char *ipath, struct pulse_plog_newseg *add)
{
    const struct pulse_io *io = pulse_plog_get_config(p->plog)->io;
    int ifd = -1;
    pulse_status_t st = writer_open(w, p, g->mem[0]->base, dpath);

    if (st == PULSE_OK)
        st = write_group(p, g, w);
    if (st != PULSE_OK)
        return st;
    ifd = io->open(io, ipath, O_CREAT | O_TRUNC | O_RDWR, 0644);
    if (ifd < 0) {
        int err = errno;
        PULSE_ERROR("compact: open %s failed: %s", ipath, strerror(err));
        return pulse_status_from_errno(err);
    }
    st = sync_temps(w, ifd, ipath);
    io->close(io, ifd);
    *add = (struct pulse_plog_newseg){dpath, ipath, &w->index, w->size, w->max_ts, w->since_entry};
    return st;
}

/*
 * Writes the survivors of group g to synced temps and has the log commit
 * them (a REPLACE edit): over the one segment, or as a merge of several.
 * *committed_out tells whether the new files are in place, *size_out then
 * gets their data size.
 */
static pulse_status_t rewrite_group(struct pass *p, const struct group *g, uint64_t *size_out, bool *committed_out)
{
    const struct pulse_io *io = pulse_plog_get_config(p->plog)->io;
    int64_t base = g->mem[0]->base;
    struct writer w;
    struct pulse_plog_newseg add;
    struct pulse_plog_edit edit = {
        .kind = PULSE_PLOG_EDIT_REPLACE, .who = "compact", .segs = g->mem, .n = g->n, .add = &add};
    struct pulse_plog_edit_result res = {0, false};
    char *dpath = pulse_plog_temp_path(p->plog, "compact", base, "log");
    char *ipath = pulse_plog_temp_path(p->plog, "compact", base, "index");
    pulse_status_t st;

    *committed_out = false;
    memset(&w, 0, sizeof w);
    w.fd = -1;
    st = dpath == NULL || ipath == NULL ? PULSE_NOMEM : write_temps(p, g, &w, dpath, ipath, &add);
    if (st != PULSE_OK)
        goto out;
    pulse_failpoint("compact_after_temps");
    st = pulse_plog_apply(p->plog, &edit, &res);
    if (st == PULSE_BUSY) {
        st = PULSE_OK; /* the list changed meanwhile: nothing committed */
        goto out;
    }
    if (st == PULSE_OK) {
        *committed_out = true;
        *size_out = w.size;
    }
out:
    if (w.fd >= 0)
        io->close(io, w.fd);
    /* A temp that was not renamed is garbage (recovery would delete it). */
    if (dpath != NULL && !res.temp_taken)
        (void)io->unlink(io, dpath);
    if (ipath != NULL && !*committed_out)
        (void)io->unlink(io, ipath);
    pulse_free(dpath);
    pulse_free(ipath);
    writer_fini(&w);
    return st;
}

/*
 * Removes a segment none of whose records survive (a REMOVE edit: the
 * same as a trim of that one segment, which may be a middle one), and
 * accounts for it. The directory is fsynced once for all the deletions of
 * a pass, at its end (sync_deletions), as a trim does for all its
 * segments: a deletion that a crash undoes only brings back records that
 * are superseded or expired tombstones with nothing older left, which the
 * next pass drops again. A tombstone is only ever dropped in a pass after
 * the one that removed its older values (the map notes them), so that
 * pass's fsync orders the two.
 */
static pulse_status_t drop_dead(struct pass *p, const struct pulse_plog_segref *cap)
{
    struct pulse_plog_edit edit = {.kind = PULSE_PLOG_EDIT_REMOVE, .who = "compact", .segs = &cap, .n = 1};
    pulse_status_t st = pulse_plog_apply(p->plog, &edit, NULL);

    if (st == PULSE_OK) {
        p->unsynced_deletions = true;
        PULSE_DEBUG_LOG("compact %s: deleted segment %020" PRId64 " (no record survived)", pulse_plog_dir(p->plog),
                        cap->base);
        p->res.segments_deleted++;
        return PULSE_OK;
    }
    p->res.bytes_after += cap->size;
    return st == PULSE_BUSY ? PULSE_OK : st; /* trimmed meanwhile: nothing to do */
}

/* Step 5 for a group of one segment: leave it, or rewrite it. */
static pulse_status_t finish_single(struct pass *p, const struct group *g)
{
    const struct pulse_plog_segref *cap = g->mem[0];
    uint64_t predicted = sizer_total(&g->size), size = cap->size;
    uint64_t after = size;
    /* What the prediction (plain) is compared with: the segment's size, or,
     * when compression is on either side, its plain size. */
    uint64_t base = p->cfg->codec != PULSE_BATCH_CODEC_NONE || g->compressed ? sizer_total(&g->all) : size;
    bool committed = false;
    pulse_status_t st = PULSE_OK;

    if (g->unusable || g->dropped == 0)
        goto out;
    /* Gain gate: a rewrite costs I/O; skip it unless it pays, or it removes
     * an expired tombstone (which only a rewrite can ever remove). The
     * size is known before anything is written. */
    if (g->expired == 0 && (predicted >= base || (double)(base - predicted) < p->cfg->min_gain_ratio * (double)base)) {
        p->res.skipped_by_gain_gate++;
        goto out;
    }
    st = rewrite_group(p, g, &after, &committed);
    if (st != PULSE_OK || !committed) {
        after = size;
        goto out;
    }
    p->res.segments_rewritten++;
    PULSE_DEBUG_LOG("compact %s: rewrote segment %020" PRId64 ": %" PRIu64 " -> %" PRIu64 " bytes, %" PRIu64
                    " records dropped (%" PRIu64 " expired tombstones)",
                    pulse_plog_dir(p->plog), cap->base, size, after, g->dropped, g->expired);
out:
    p->res.bytes_after += after;
    return st;
}

/* Step 5 for a group of several segments: merge them into one. No gain
 * gate: a merge always removes segment files, which is its point, and its
 * writes are bounded (see "Merging" in the file comment). */
static pulse_status_t finish_merge(struct pass *p, const struct group *g)
{
    uint64_t size = 0, after = 0;
    bool committed = false;
    pulse_status_t st;

    for (size_t i = 0; i < g->n; i++)
        size += g->mem[i]->size;
    st = rewrite_group(p, g, &after, &committed);
    if (st != PULSE_OK || !committed) {
        p->res.bytes_after += size;
        return st;
    }
    p->res.segments_rewritten++;
    p->res.segments_merged += (uint32_t)(g->n - 1);
    p->res.bytes_after += after;
    PULSE_DEBUG_LOG("compact %s: merged %zu segments %020" PRId64 "..%020" PRId64 " into one: %" PRIu64 " -> %" PRIu64
                    " bytes, %" PRIu64 " records dropped (%" PRIu64 " expired tombstones)",
                    pulse_plog_dir(p->plog), g->n, g->mem[0]->base, g->mem[g->n - 1]->base, size, after, g->dropped,
                    g->expired);
    return PULSE_OK;
}

static pulse_status_t finish_group(struct pass *p, struct group *g)
{
    pulse_status_t st = g->n == 1 ? finish_single(p, g) : finish_merge(p, g);
    g->n = 0;
    return st;
}

/* Opens group g with caps[i], evaluated as ev. */
static void group_start(struct group *g, const struct pulse_plog_segref *cap, const struct seg_eval *ev)
{
    g->mem[0] = cap;
    g->n = 1;
    g->size = ev->alone;
    g->all = ev->all;
    g->compressed = ev->compressed;
    g->dropped = ev->dropped;
    g->expired = ev->expired;
    g->kept = ev->kept;
    g->unusable = ev->unusable;
}

/*
 * Steps 4 and 5 over the sealed segments caps[first, nsealed): evaluates
 * them one by one. A segment with no survivor is deleted at once (the open
 * group then continues past it: the neighbours become adjacent). Otherwise
 * it joins the open group when it may (can_join), or ends it: that group is
 * finished and the segment opens the next. Stops before a segment once the
 * budget is spent. *stop_out gets the index of the first segment not
 * evaluated.
 */
static pulse_status_t run_window(struct pass *p, const struct pulse_plog_segref *caps, size_t first, size_t nsealed,
                                 size_t *stop_out)
{
    struct group g;
    size_t i = first;
    pulse_status_t st = PULSE_OK;

    memset(&g, 0, sizeof g);
    g.mem = pulse_calloc(nsealed, sizeof *g.mem);
    if (g.mem == NULL)
        return PULSE_NOMEM;
    for (; i < nsealed && st == PULSE_OK; i++) {
        struct seg_eval ev;
        if (budget_spent(p, caps[i].size)) {
            p->res.budget_reached = true;
            break;
        }
        st = evaluate(p, &caps[i], g.n > 0 ? &g.size : NULL, &ev);
        if (st != PULSE_OK)
            break;
        p->evaluated += caps[i].size;
        p->res.segments_scanned++;
        p->res.bytes_before += caps[i].size;
        if (!ev.unusable && ev.kept == 0) {
            st = drop_dead(p, &caps[i]);
        } else if (g.n > 0 && can_join(p, caps, &g, i, &ev)) {
            g.mem[g.n++] = &caps[i];
            g.size = ev.joined;
            g.dropped += ev.dropped;
            g.expired += ev.expired;
            g.kept += ev.kept;
        } else {
            if (g.n > 0)
                st = finish_group(p, &g);
            group_start(&g, &caps[i], &ev);
        }
    }
    if (st == PULSE_OK && g.n > 0)
        st = finish_group(p, &g);
    pulse_free(g.mem);
    *stop_out = i;
    return st;
}

static bool fp_equal(const struct pulse_compact *comp, const struct pulse_plog_segref *caps, size_t n)
{
    if (comp->fp == NULL || comp->fp_n != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (comp->fp[i].base != caps[i].base || comp->fp[i].size != caps[i].size)
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

/* Records in comp the layout the pass leaves: every captured segment still
 * listed, with its size now (sealed: rewritten or not) or, for the active
 * one, what was mapped, so that any growth since forces a new scan. */
static pulse_status_t remember_layout(struct pulse_compact *comp, struct pulse_plog *plog,
                                      const struct pulse_plog_segref *caps, size_t n)
{
    struct pulse_segment_info *now = NULL;
    struct fp_entry *fp = NULL;
    size_t nnow = 0, k = 0;
    pulse_status_t st = pulse_plog_list_segments(plog, &now, &nnow);

    if (st == PULSE_OK) {
        fp = pulse_calloc(n, sizeof *fp); /* k <= n below */
        st = fp == NULL ? PULSE_NOMEM : PULSE_OK;
    }
    for (size_t i = 0; st == PULSE_OK && i < n; i++) {
        size_t j;
        for (j = 0; j < nnow && now[j].base_offset != caps[i].base; j++)
            ;
        if (j == nnow)
            continue; /* deleted or merged away by this pass */
        fp[k].base = caps[i].base;
        fp[k].size = i + 1 == n ? caps[i].size : now[j].size_bytes;
        k++;
    }
    pulse_free(now);
    if (st != PULSE_OK) {
        pulse_free(fp);
        return st;
    }
    pulse_free(comp->fp);
    comp->fp = fp;
    comp->fp_n = k;
    return PULSE_OK;
}

/* Step 2: whether the pass can stop before reading anything: the layout
 * is what the last pass left, and that pass finished a clean cycle with no
 * tombstone come of age since. */
static bool pass_is_moot(struct pulse_compact *comp, const struct pulse_plog_segref *caps, size_t n, int64_t now_ms)
{
    bool same = fp_equal(comp, caps, n);

    if (!same || now_ms >= comp->wake_ms) {
        comp->quiet = false;
        comp->cycle_clean = false;
    }
    return same && comp->quiet;
}

/* Steps 4 and 5: the window from the cursor to the budget, then the
 * deletions made durable; moves the cursor on. *last_out gets the index of
 * the first sealed segment not evaluated. */
static pulse_status_t compact_window(struct pass *p, const struct pulse_plog_segref *caps, size_t nsealed,
                                     size_t *last_out)
{
    struct pulse_compact *comp = p->comp;
    size_t first, last = 0;
    pulse_status_t st, sst;

    for (first = 0; first < nsealed && caps[first].base < comp->cursor_base; first++)
        ;
    if (first == nsealed)
        first = 0;
    if (first == 0)
        comp->cycle_clean = true; /* a fresh cycle over an unchanged map */
    st = run_window(p, caps, first, nsealed, &last);
    sst = sync_deletions(p);
    if (st == PULSE_OK)
        st = sst;
    if (st == PULSE_OK)
        comp->cursor_base = last < nsealed ? caps[last].base : 0;
    *last_out = last;
    return st;
}

/* What is left for later, after a window that stopped before last: other
 * key slices, tombstones waiting for their older values to go (pending),
 * or unreadable bytes make the cycle unclean; a cycle that reached the end
 * moves to the next key slice, so that every sealed segment meets every
 * slice. */
static void end_cycle(struct pass *p, size_t last, size_t nsealed, bool pending, int64_t wake)
{
    struct pulse_compact *comp = p->comp;

    if (comp->slice_shift > 0 || pending || p->map_corrupt)
        comp->cycle_clean = false;
    if (comp->slice_shift > 0 && last == nsealed)
        comp->slice = (comp->slice + 1) & ((1u << comp->slice_shift) - 1);
    if (last == nsealed && comp->cycle_clean)
        comp->quiet = true;
    comp->wake_ms = wake;
}

static bool config_valid(const struct pulse_compact_config *cfg)
{
    return cfg->max_keys > 0 && cfg->max_bytes_per_pass > 0 && cfg->max_pass_ms >= 0 && cfg->batch_max_records > 0 &&
           cfg->batch_max_bytes > PULSE_BATCH_HEADER_SIZE && cfg->tombstone_retention_ms >= 0 &&
           cfg->min_gain_ratio >= 0.0 && (cfg->codec == PULSE_BATCH_CODEC_NONE || cfg->codec == PULSE_BATCH_CODEC_ZLIB);
}

/* Steps 2 to 5 over a captured list caps[0..n), the last one active. */
static pulse_status_t compact_captured(struct pass *p, const struct pulse_plog_segref *caps, size_t n)
{
    size_t nsealed = n - 1, last = 0;
    int64_t wake = INT64_MAX;
    bool pending = false;
    pulse_status_t st;

    if (nsealed == 0)
        return PULSE_OK; /* a single-segment log never compacts until it rotates */
    if (pass_is_moot(p->comp, caps, n, p->now_ms))
        return PULSE_OK;
    /* Step 3. */
    st = build_map(p, caps, n);
    if (st != PULSE_OK)
        return st;
    map_outlook(p, &wake, &pending);
    st = compact_window(p, caps, nsealed, &last);
    if (st != PULSE_OK)
        return st;
    end_cycle(p, last, nsealed, pending, wake);
    /* Remember the layout as this pass left it (own rewrites included), so
     * that only a change by someone else forces the next map scan. */
    return remember_layout(p->comp, p->plog, caps, n);
}

pulse_status_t pulse_compact_run(struct pulse_compact *comp, struct pulse_plog *plog,
                                 const struct pulse_compact_config *cfg, int64_t now_ms,
                                 struct pulse_compact_result *out)
{
    struct pass p;
    struct pulse_plog_segref *caps = NULL;
    size_t n = 0;
    pulse_status_t st = PULSE_OK;

    memset(&p, 0, sizeof p);
    p.comp = comp;
    p.plog = plog;
    p.cfg = cfg;
    p.now_ms = now_ms;
    p.t0_us = pulse_clock_mono_us();
    pulse_buf_init(&p.inflated, PULSE_BATCH_INFLATED_MAX);
    if (comp == NULL || plog == NULL || cfg == NULL || !config_valid(cfg))
        st = PULSE_INVALID;
    else if (pulse_plog_fenced(plog))
        st = PULSE_FENCED;
    else
        st = pulse_plog_capture(plog, &caps, &n); /* step 1 */
    if (st == PULSE_OK)
        st = compact_captured(&p, caps, n);
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
                        pulse_plog_dir(plog), p.bytes_read, p.map.n, comp->slice, 1u << comp->slice_shift,
                        p.res.segments_scanned, p.res.segments_rewritten, p.res.segments_deleted,
                        p.res.skipped_by_gain_gate);
    kmap_fini(&p.map);
    pulse_buf_fini(&p.inflated);
    pulse_plog_capture_free(caps, n);
    p.res.duration_us = pulse_clock_mono_us() - p.t0_us;
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
