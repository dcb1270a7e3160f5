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
 * Crash safety of a rewrite (one segment). Temps (.tmp-compact-<base>.log.tmp
 * and .index.tmp: never a ".log" suffix, so recovery never takes them for a
 * segment, and the ".tmp-" prefix makes recovery delete them) are written and
 * fdatasynced first. Then, under the writer lock: rename data over the
 * segment, rename index over its index, fsync the directory. A crash before
 * the first rename leaves the old files; after both, the new ones; in
 * between, new data with the old index, whose entries recovery checks one by
 * one against the batch headers and rebuilds when they do not match.
 * Readers holding the old segment keep its inode (and its bytes) until they
 * release it: the swap installs a new struct pulse_segment and drops the
 * list's reference on the old one. A failure after the first rename (the
 * second rename, the directory fsync, which is never retried, or the list
 * update) fences the log: the list then no longer describes the files, and
 * the reopen's recovery reads them as they are. A failure before it leaves
 * everything as it was, the old segment's retirement taken back.
 *
 * Crash safety of a merge (segments F < S2 < ... < Sn, next segment base E).
 * Renaming the merged file over F while S2..Sn still exist would leave two
 * files holding the same offsets; removing S2..Sn first would lose their
 * records if the rename never happened. So the merged data takes an
 * intermediate name that recovery recognises and rolls forward:
 *   1. write and fdatasync both temps (failpoint compact_after_temps);
 *   2. under the writer lock, check the n segments are still listed in a
 *      row; rename the data temp to "<F>-<E>.merge" and fsync the directory
 *      (compact_merge_after_marker). From here the merge is decided: the
 *      file is complete and durable before any segment it replaces is
 *      touched, and its name says which offsets it covers;
 *   3. unlink S2..Sn, each index before its data
 *      (compact_merge_between_unlinks after the first), fsync the directory
 *      (compact_merge_before_renames): the removals must be durable before
 *      F's name changes meaning, or a crash could keep the new F beside an
 *      old S2;
 *   4. rename the index temp over F.index (compact_merge_between_renames),
 *      rename "<F>-<E>.merge" over F.log (compact_merge_before_dir_fsync),
 *      fsync the directory;
 *   5. install one segment struct spanning [F, E) in place of the n. A
 *      reader holding one of the old segments keeps its inode; when it
 *      finds nothing more there it continues at its offset in whichever
 *      segment holds that offset now (plog.c, next_segment), so it never
 *      skips what moved into F.
 * Recovery (pulse_compact_finish_merges, called by pulse_recover_run before
 * it lists the segments): a "<F>-<E>.merge" file that verifies whole, with
 * F.log present, is rolled forward: every segment with a base in (F, E) is
 * removed, the directory fsynced, F.index removed (the scan rebuilds it) and
 * the merge file renamed over F.log. A crash before step 2's rename leaves
 * the old files and a temp recovery deletes; from step 2 to before the
 * rename in step 4 recovery finishes the merge; after it, the directory
 * already is the merged state. No crash point loses a record or leaves an
 * offset in two files. A merge file that does not verify (damaged on disk
 * after its fdatasync) is left alone and reported: nothing is removed on the
 * strength of bytes that do not check out.
 * A failure after step 2 (a rename, unlink or fsync error) fences the log:
 * the directory then describes a merge in progress while the segment list
 * describes the old files; reopening the log lets recovery finish the merge.
 */
#include "storage/compact.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "storage/batch.h"
#include "storage/index.h"
#include "common/fsio.h"
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

/* A reader of a raw descriptor the caller owns (a .merge file at recovery). */
static void reader_init_fd(struct reader *r, const struct pulse_io *io, int fd, const char *path, uint64_t end)
{
    memset(r, 0, sizeof *r);
    r->io = io;
    r->seg = NULL;
    r->fd = fd;
    r->path = path;
    r->end = end;
}

/* A reader of a segment's data file, pinned from the first fill until
 * reader_fini. */
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
    if (r->seg != NULL && r->fd >= 0)
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
 * call) and *last_out (nullable) its last offset, PULSE_EOF at the end,
 * PULSE_CORRUPT for a batch that fails verification (hostile bytes: never
 * trusted, never crashed on). */
static pulse_status_t reader_next(struct reader *r, const uint8_t **batch, size_t *len,
                                  struct pulse_batch_header *hdr, int64_t *last_out, uint64_t *bytes_read)
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
    if (pulse_batch_verify(*batch, total, hdr, last_out) != PULSE_OK)
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
    uint64_t evaluated; /* sealed bytes evaluated for a rewrite, against max_bytes_per_pass */
    bool unsynced_deletions; /* delete_segment ran since the last directory fsync */
    int64_t t0_us;      /* when the pass started, against max_pass_ms */
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

            st = reader_next(&r, &batch, &len, &hdr, NULL, &p->bytes_read);
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
 * an orphan index.
 * The directory is fsynced once for all the deletions of a pass, at its end
 * (sync_deletions), as a trim does for all its segments: a deletion that a
 * crash undoes only brings back records that are superseded or expired
 * tombstones with nothing older left, which the next pass drops again. A
 * tombstone is only ever dropped in a pass after the one that removed its
 * older values (the map notes them), so that pass's fsync orders the two. */
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
        pulse_segment_unretire(seg); /* still listed, its path unchanged */
        goto out;
    }
    if (io->unlink(io, seg->log_path) < 0) {
        int err = errno;
        PULSE_ERROR("compact: unlink %s failed: %s", seg->log_path, strerror(err));
        st = pulse_status_from_errno(err);
        pulse_segment_unretire(seg); /* as above: the data file is still there */
        goto out;
    }
    pthread_mutex_lock(&plog->list_lock);
    memmove(plog->segs + at, plog->segs + at + 1, (plog->nsegs - at - 1) * sizeof *plog->segs);
    plog->nsegs--;
    if (at == 0)
        atomic_store_explicit(&plog->log_start, plog->segs[0]->base, memory_order_release);
    pthread_mutex_unlock(&plog->list_lock);
    p->unsynced_deletions = true;
    PULSE_DEBUG_LOG("compact %s: deleted segment %020" PRId64 " (no record survived)", plog->dir, seg->base);
    /* The list's reference; readers holding one keep the inode alive, and
     * the pass still holds its own. */
    pulse_segment_release(seg);
out:
    pthread_mutex_unlock(&plog->wlock);
    return st;
}

/* Makes the pass's deletions durable (see delete_segment). A failed
 * directory fsync fences the log, as any failed sync of it does: it is
 * never retried (after a failure the directory's state on disk is
 * unknown, and a second fsync may report success over the lost entries);
 * the reopen's recovery reads the directory as it really is. */
static pulse_status_t sync_deletions(struct pass *p)
{
    const struct pulse_io *io = p->plog->io;

    if (!p->unsynced_deletions)
        return PULSE_OK;
    p->unsynced_deletions = false;
    if (io->fsync_dir(io, p->plog->dir) < 0) {
        int err = errno;
        PULSE_ERROR("compact: fsync directory %s failed: %s", p->plog->dir, strerror(err));
        pulse_plog_fence(p->plog, "compact", "directory fsync");
        return pulse_status_from_errno(err);
    }
    return PULSE_OK;
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
    const char *what = "rename of a rewritten index";
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
        pulse_segment_unretire(seg); /* nothing was swapped */
        goto out;
    }
    *renamed_out = true;
    pulse_failpoint("compact_between_renames");
    /* From here on the old struct keeps serving the old inode, whose bytes
     * are a superset of the new file's, so a failure below never makes a
     * read wrong; but the list no longer describes the directory (the path
     * names the new file, the struct the old one), so any failure fences
     * the log and its reopen's recovery sorts out the files, as after a
     * failed merge. */
    if (io->rename(io, ipath, seg->index_path) < 0) {
        int err = errno;
        PULSE_ERROR("compact: rename %s -> %s failed: %s (the index is rebuilt when the log is reopened)", ipath,
                    seg->index_path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    pulse_failpoint("compact_before_dir_fsync");
    what = "directory fsync";
    if (io->fsync_dir(io, plog->dir) < 0) {
        int err = errno;
        /* Never retried (see sync_deletions): which name survives a crash
         * is unknown now. */
        PULSE_ERROR("compact: fsync directory %s failed: %s", plog->dir, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    what = "segment list update after a rewrite";
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
    if (st != PULSE_OK && *renamed_out)
        pulse_plog_fence(plog, "compact", what);
    pthread_mutex_unlock(&plog->wlock);
    pulse_segment_release(nseg);
    return st;
}

/* ---- merging several segments into one (commit) ----------------------- */

/* "<dir>/<first>-<end>.merge": see "Merging" in the file comment. */
#define MERGE_SUFFIX ".merge"
#define MERGE_NAME_LEN (20 + 1 + 20 + sizeof MERGE_SUFFIX - 1)

static char *merge_path(const char *dir, int64_t first, int64_t end)
{
    size_t need = strlen(dir) + MERGE_NAME_LEN + 2;
    char *s = pulse_malloc(need);
    if (s != NULL)
        snprintf(s, need, "%s/%020" PRId64 "-%020" PRId64 "%s", dir, first, end, MERGE_SUFFIX);
    return s;
}

/*
 * Fences the log after a merge failed part way through its file steps: the
 * directory then holds a state only recovery resolves (it completes the
 * merge), while the segment list still describes the old files. As after a
 * failed write, nothing may change the log until it is reopened; readers
 * keep their segments, whose inodes still hold the old bytes.
 */
static void fence_after_merge(struct pulse_plog *plog, const char *what)
{
    PULSE_ERROR("compact %s: a merge failed at its %s; recovery completes it when the log is reopened", plog->dir,
                what);
    pulse_plog_fence(plog, "compact", what);
}

/* Takes the retirement of the first n segments back (see merge_files). */
static void unretire(const struct captured *const *mem, size_t n)
{
    for (size_t k = 0; k < n; k++)
        pulse_segment_unretire(mem[k]->seg);
}

static int io_fail(const char *op, const char *path, int err)
{
    PULSE_ERROR("compact: %s %s failed: %s", op, path, strerror(err));
    return err;
}

/*
 * The file steps of a merge of the n captured segments mem (the first one
 * keeps its name), in the crash-safe order of the file comment; the temps
 * dpath and ipath are synced. *named_out is set once the data temp is named
 * mpath: from then on a failure leaves work that only recovery finishes
 * (the caller fences). *what_out names the step that failed.
 */
static pulse_status_t merge_files(const struct pulse_io *io, const char *dir, const struct captured *const *mem,
                                  size_t n, const char *dpath, const char *ipath, const char *mpath,
                                  bool *named_out, const char **what_out)
{
    int err = 0;

    /* Readers holding the segments keep their descriptors (fdcache.h); a
     * reopen by path would find the merged file or nothing. Before the
     * first rename, so a failure here leaves nothing done. */
    *what_out = "retire";
    for (size_t k = 0; k < n; k++) {
        pulse_status_t st = pulse_segment_retire(mem[k]->seg);
        if (st != PULSE_OK) {
            unretire(mem, k); /* nothing changed: they stay listed */
            return st;
        }
    }
    if (io->rename(io, dpath, mpath) < 0) {
        err = io_fail("rename", mpath, errno);
        *what_out = "rename";
        unretire(mem, n);
        goto out;
    }
    *named_out = true;
    *what_out = "directory fsync";
    if (io->fsync_dir(io, dir) < 0) {
        err = io_fail("fsync directory", dir, errno);
        goto out;
    }
    pulse_failpoint("compact_merge_after_marker");
    *what_out = "unlink";
    for (size_t k = 1; k < n; k++) {
        if (io->unlink(io, mem[k]->seg->index_path) < 0 && errno != ENOENT) {
            err = io_fail("unlink", mem[k]->seg->index_path, errno);
            goto out;
        }
        if (io->unlink(io, mem[k]->seg->log_path) < 0 && errno != ENOENT) {
            err = io_fail("unlink", mem[k]->seg->log_path, errno);
            goto out;
        }
        if (k == 1)
            pulse_failpoint("compact_merge_between_unlinks");
    }
    /* The removals must be durable before the merged file takes the first
     * name: otherwise a crash could keep the new name and lose removals,
     * leaving two files that hold the same offsets. */
    *what_out = "directory fsync";
    if (io->fsync_dir(io, dir) < 0) {
        err = io_fail("fsync directory", dir, errno);
        goto out;
    }
    pulse_failpoint("compact_merge_before_renames");
    *what_out = "rename";
    if (io->rename(io, ipath, mem[0]->seg->index_path) < 0) {
        err = io_fail("rename", mem[0]->seg->index_path, errno);
        goto out;
    }
    pulse_failpoint("compact_merge_between_renames");
    if (io->rename(io, mpath, mem[0]->seg->log_path) < 0) {
        err = io_fail("rename", mem[0]->seg->log_path, errno);
        goto out;
    }
    pulse_failpoint("compact_merge_before_dir_fsync");
    *what_out = "directory fsync";
    if (io->fsync_dir(io, dir) < 0)
        err = io_fail("fsync directory", dir, errno);
out:
    return err == 0 ? PULSE_OK : pulse_status_from_errno(err);
}

/*
 * The list edit of a merge: opens the merged files as one segment spanning
 * [first base, end) with the writer's index and bounds, puts it at position
 * at in place of the n old ones (mem, which the caller found listed there)
 * and drops the list's references on those. Caller holds wlock; readers
 * holding an old segment keep its inode.
 */
static pulse_status_t merge_list(struct pulse_plog *plog, const struct captured *const *mem, size_t at, size_t n,
                                 const struct writer *w, int64_t end)
{
    struct pulse_segment *nseg = NULL;
    pulse_status_t st;

    st = pulse_segment_open(plog->io, plog->fdcache, plog->dir, plog->segs[at]->base, false, &nseg);
    for (size_t i = 0; st == PULSE_OK && i < w->index.n; i++)
        st = pulse_index_append(&nseg->index, w->index.entries[i].rel_offset, w->index.entries[i].rel_pos);
    if (st != PULSE_OK) {
        pulse_segment_release(nseg);
        return st;
    }
    nseg->index_written = w->index.n;
    atomic_store_explicit(&nseg->index_synced, w->index.n, memory_order_relaxed);
    atomic_store_explicit(&nseg->size, w->size, memory_order_relaxed);
    atomic_store_explicit(&nseg->durable_size, w->size, memory_order_relaxed);
    atomic_store_explicit(&nseg->next_offset, end, memory_order_relaxed);
    atomic_store_explicit(&nseg->max_ts, w->max_ts, memory_order_relaxed);
    nseg->since_entry = w->since_entry;
    pulse_segment_close_index(nseg); /* sealed: its table is complete */
    pthread_mutex_lock(&plog->list_lock);
    plog->segs[at] = nseg; /* the list's reference moves to nseg */
    memmove(plog->segs + at + 1, plog->segs + at + n, (plog->nsegs - at - n) * sizeof *plog->segs);
    plog->nsegs -= n - 1;
    pthread_mutex_unlock(&plog->list_lock);
    for (size_t k = 0; k < n; k++)
        pulse_segment_release(mem[k]->seg); /* the list's old references */
    return PULSE_OK;
}

/*
 * Commits the merge of the n captured segments mem, adjacent in the list,
 * into the synced temps dpath/ipath held by w. PULSE_BUSY (nothing done)
 * when the list no longer holds exactly those segments in a row. *renamed_out is set
 * once the data temp has been renamed. A failure after that point fences
 * the log (fence_after_merge).
 */
static pulse_status_t merge_in(struct pass *p, const struct captured *const *mem, size_t n, const struct writer *w,
                               const char *dpath, const char *ipath, bool *renamed_out)
{
    struct pulse_plog *plog = p->plog;
    char *mpath = NULL;
    const char *what = "rename";
    size_t at;
    int64_t end;
    pulse_status_t st = PULSE_OK;

    *renamed_out = false;
    pthread_mutex_lock(&plog->wlock);
    if (atomic_load(&plog->fenced)) {
        st = PULSE_FENCED;
        goto out;
    }
    at = list_find(plog, mem[0]->seg);
    if (at == SIZE_MAX || at + n >= plog->nsegs) {
        st = PULSE_BUSY;
        goto out;
    }
    for (size_t k = 1; k < n; k++) {
        if (plog->segs[at + k] != mem[k]->seg) {
            st = PULSE_BUSY;
            goto out;
        }
    }
    end = plog->segs[at + n]->base;
    mpath = merge_path(plog->dir, mem[0]->seg->base, end);
    if (mpath == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    st = merge_files(plog->io, plog->dir, mem, n, dpath, ipath, mpath, renamed_out, &what);
    if (st == PULSE_OK) {
        what = "segment open";
        st = merge_list(plog, mem, at, n, w, end);
    }
    if (st != PULSE_OK && *renamed_out)
        fence_after_merge(plog, what);
out:
    pthread_mutex_unlock(&plog->wlock);
    pulse_free(mpath);
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
    struct sizer alone;  /* the survivors' size as a group of their own */
    struct sizer joined; /* the open group's size with this segment added */
};

/* Sealed segments, adjacent in the list once the dead ones between them
 * are deleted, whose survivors go into one output file named by the first
 * one's base. mem has room for every sealed segment of the capture. */
struct group {
    const struct captured **mem;
    size_t n;
    struct sizer size;
    uint64_t dropped, expired, kept;
    bool unusable;
};

/*
 * Step 4, dry: decodes cap's batches and applies the survival rule, counting
 * what would go and sizing what would stay, alone and (when open is not
 * NULL) appended to the group whose size is *open. The map is fixed for the
 * pass and sealed bytes never change, so the later write makes exactly the
 * same decisions. A segment with damage is marked unusable, never an error.
 */
static pulse_status_t evaluate(struct pass *p, const struct captured *cap, const struct sizer *open,
                               struct seg_eval *ev)
{
    struct pulse_segment *seg = cap->seg;
    struct reader r;
    uint64_t fsize = 0;
    pulse_status_t st = PULSE_OK;

    memset(ev, 0, sizeof *ev);
    if (open != NULL)
        ev->joined = *open;
    /* Recovery publishes only the valid prefix of a sealed segment with a
     * bad batch; its file is longer. Leave such a segment alone: a rewrite
     * would silently drop the evidence. */
    st = pulse_segment_file_size(seg, &fsize);
    if (st != PULSE_OK)
        return st;
    if (fsize != cap->size) {
        PULSE_WARN("compact %s: %s holds %" PRIu64 " bytes but only %" PRIu64 " are valid; segment left as is",
                   p->plog->dir, seg->log_path, fsize, cap->size);
        ev->unusable = true;
        return PULSE_OK;
    }
    reader_init(&r, seg, cap->size);
    for (;;) {
        const uint8_t *batch;
        size_t len;
        struct pulse_batch_header hdr;
        struct pulse_batch_iter it;
        struct pulse_record_view rec;

        st = reader_next(&r, &batch, &len, &hdr, NULL, &p->bytes_read);
        if (st == PULSE_EOF) {
            st = PULSE_OK;
            break;
        }
        if (st == PULSE_CORRUPT) {
            /* Never rewrite around damage: that would hide it. */
            PULSE_WARN("compact %s: %s has an invalid batch at byte %" PRIu64 "; segment left as is",
                       p->plog->dir, seg->log_path, r.pos);
            ev->unusable = true;
            st = PULSE_OK;
            break;
        }
        if (st != PULSE_OK)
            break;
        st = pulse_batch_iter_init(&it, batch, len);
        while (st == PULSE_OK && (st = pulse_batch_iter_next(&it, &rec)) == PULSE_OK) {
            bool expired;
            if (!keep_record(p, &rec, &expired)) {
                ev->dropped++;
                ev->expired += expired;
                continue;
            }
            ev->kept++;
            sizer_add(&ev->alone, p->cfg, &rec);
            if (open != NULL)
                sizer_add(&ev->joined, p->cfg, &rec);
        }
        if (st == PULSE_EOF)
            st = PULSE_OK;
        if (st != PULSE_OK)
            break;
    }
    reader_fini(&r);
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
static bool can_join(const struct pass *p, const struct captured *caps, const struct group *g, size_t i,
                     const struct seg_eval *ev)
{
    if (ev->unusable || g->unusable)
        return false;
    if (caps[i + 1].seg->base - g->mem[0]->seg->base > INT32_MAX)
        return false;
    return sizer_total(&ev->joined) <= p->plog->cfg.segment_max_bytes;
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
    const struct pulse_io *io = p->plog->io;

    memset(w, 0, sizeof *w);
    w->io = io;
    w->fd = -1;
    w->cfg = p->cfg;
    w->interval = p->plog->cfg.index_interval_bytes;
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

/* Streams the survivors of the group's segments into w, in offset order,
 * one source batch in memory at a time, and flushes the last batch. */
static pulse_status_t write_group(struct pass *p, const struct group *g, struct writer *w)
{
    pulse_status_t st = PULSE_OK;

    for (size_t i = 0; i < g->n && st == PULSE_OK; i++) {
        const struct captured *cap = g->mem[i];
        struct reader r;
        reader_init(&r, cap->seg, cap->size);
        for (;;) {
            const uint8_t *batch;
            size_t len;
            struct pulse_batch_header hdr;
            struct pulse_batch_iter it;
            struct pulse_record_view rec;

            st = reader_next(&r, &batch, &len, &hdr, NULL, &p->bytes_read);
            if (st == PULSE_EOF) {
                st = PULSE_OK;
                break;
            }
            if (st == PULSE_CORRUPT) /* it verified a moment ago: the disk changed under us */
                PULSE_ERROR("compact %s: %s: batch at byte %" PRIu64 " no longer verifies; rewrite abandoned",
                            p->plog->dir, cap->seg->log_path, r.pos);
            if (st != PULSE_OK)
                break;
            st = pulse_batch_iter_init(&it, batch, len);
            while (st == PULSE_OK && (st = pulse_batch_iter_next(&it, &rec)) == PULSE_OK) {
                bool expired;
                if (keep_record(p, &rec, &expired))
                    st = writer_add(w, &rec);
            }
            if (st == PULSE_EOF)
                st = PULSE_OK;
            if (st != PULSE_OK)
                break;
        }
        reader_fini(&r);
    }
    if (st == PULSE_OK)
        st = writer_flush(w);
    return st;
}

/*
 * Writes the survivors of group g to synced temps and commits them: over
 * the one segment (swap_in), or as a merge of several (merge_in).
 * *committed_out tells whether the new files are in place, *size_out then
 * gets their data size.
 */
static pulse_status_t rewrite_group(struct pass *p, const struct group *g, uint64_t *size_out, bool *committed_out)
{
    struct pulse_plog *plog = p->plog;
    const struct pulse_io *io = plog->io;
    struct pulse_segment *seg = g->mem[0]->seg;
    struct writer w;
    char *dpath = temp_path(plog->dir, seg->base, "log");
    char *ipath = temp_path(plog->dir, seg->base, "index");
    int ifd = -1;
    bool renamed = false;
    pulse_status_t st;

    *committed_out = false;
    memset(&w, 0, sizeof w);
    w.fd = -1;
    st = dpath == NULL || ipath == NULL ? PULSE_NOMEM : writer_open(&w, p, seg->base, dpath);
    if (st == PULSE_OK)
        st = write_group(p, g, &w);
    if (st != PULSE_OK)
        goto out;
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
    if (g->n == 1)
        st = swap_in(p, seg, &w, dpath, ipath, &renamed);
    else
        st = merge_in(p, g->mem, g->n, &w, dpath, ipath, &renamed);
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
    if (ifd >= 0)
        io->close(io, ifd);
    /* A temp that was not renamed is garbage (recovery would delete it). */
    if (dpath != NULL && !renamed)
        (void)io->unlink(io, dpath);
    if (ipath != NULL && !*committed_out)
        (void)io->unlink(io, ipath);
    pulse_free(dpath);
    pulse_free(ipath);
    writer_fini(&w);
    return st;
}

/* Deletes a segment none of whose records survive (delete_segment), and
 * accounts for it. */
static pulse_status_t drop_dead(struct pass *p, const struct captured *cap)
{
    pulse_status_t st = delete_segment(p, cap->seg);
    if (st == PULSE_OK) {
        p->res.segments_deleted++;
        return PULSE_OK;
    }
    p->res.bytes_after += cap->size;
    return st == PULSE_BUSY ? PULSE_OK : st;
}

/* Step 5 for a group of one segment: leave it, or rewrite it. */
static pulse_status_t finish_single(struct pass *p, const struct group *g)
{
    const struct captured *cap = g->mem[0];
    uint64_t predicted = sizer_total(&g->size), size = cap->size;
    uint64_t after = size;
    bool committed = false;
    pulse_status_t st = PULSE_OK;

    if (g->unusable || g->dropped == 0)
        goto out;
    /* Gain gate: a rewrite costs I/O; skip it unless it pays, or it removes
     * an expired tombstone (which only a rewrite can ever remove). The
     * size is known before anything is written. */
    if (g->expired == 0 && (predicted >= size || (double)(size - predicted) < p->cfg->min_gain_ratio * (double)size)) {
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
               p->plog->dir, cap->seg->base, size, after, g->dropped, g->expired);
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
               p->plog->dir, g->n, g->mem[0]->seg->base, g->mem[g->n - 1]->seg->base, size, after, g->dropped,
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
static void group_start(struct group *g, const struct captured *cap, const struct seg_eval *ev)
{
    g->mem[0] = cap;
    g->n = 1;
    g->size = ev->alone;
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
static pulse_status_t run_window(struct pass *p, const struct captured *caps, size_t first, size_t nsealed,
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

/* Step 1: a reference on every segment of the list and the byte end that
 * the pass considers. *caps_out (pulse_free) holds *n_out >= 1 entries. */
static pulse_status_t capture(struct pulse_plog *plog, struct captured **caps_out, size_t *n_out)
{
    struct captured *caps;
    size_t n;

    pthread_mutex_lock(&plog->list_lock);
    caps = pulse_calloc(plog->nsegs, sizeof *caps);
    if (caps == NULL) {
        pthread_mutex_unlock(&plog->list_lock);
        return PULSE_NOMEM;
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
    *caps_out = caps;
    *n_out = n;
    return PULSE_OK;
}

/* Records in comp the layout the pass leaves: every captured segment still
 * listed, with its size now (sealed: rewritten or not) or, for the active
 * one, what was mapped, so that any growth since forces a new scan. */
static pulse_status_t remember_layout(struct pulse_compact *comp, struct pulse_plog *plog,
                                      const struct captured *caps, size_t n)
{
    struct fp_entry *fp = pulse_calloc(n, sizeof *fp); /* k <= n below */
    size_t k = 0;

    if (fp == NULL)
        return PULSE_NOMEM;
    pthread_mutex_lock(&plog->list_lock);
    for (size_t i = 0; i < n; i++) {
        size_t j;
        for (j = 0; j < plog->nsegs; j++)
            if (plog->segs[j]->base == caps[i].seg->base)
                break;
        if (j == plog->nsegs)
            continue; /* deleted or merged away by this pass */
        fp[k].base = caps[i].seg->base;
        fp[k].size = i + 1 == n ? caps[i].size : atomic_load(&plog->segs[j]->size);
        k++;
    }
    pthread_mutex_unlock(&plog->list_lock);
    pulse_free(comp->fp);
    comp->fp = fp;
    comp->fp_n = k;
    return PULSE_OK;
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
    p.t0_us = t0;
    if (comp == NULL || plog == NULL || cfg == NULL || cfg->max_keys == 0 || cfg->max_bytes_per_pass == 0 ||
        cfg->max_pass_ms < 0 ||
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
    st = capture(plog, &caps, &n);
    if (st != PULSE_OK)
        goto out;
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

    /* Steps 4 and 5: the window, from the cursor to the budget. */
    for (first = 0; first < nsealed && caps[first].seg->base < comp->cursor_base; first++)
        ;
    if (first == nsealed)
        first = 0;
    if (first == 0)
        comp->cycle_clean = true; /* a fresh cycle over an unchanged map */
    st = run_window(&p, caps, first, nsealed, &last);
    {
        pulse_status_t sst = sync_deletions(&p);
        if (st == PULSE_OK)
            st = sst;
    }
    if (st != PULSE_OK)
        goto out;
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
    st = remember_layout(comp, plog, caps, n);
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

/* ---- finishing an interrupted merge (recovery) ------------------------ */

/* Parses "<20 digits>-<20 digits>.merge" with first < end. */
static bool parse_merge_name(const char *name, int64_t *first_out, int64_t *end_out)
{
    char seg[25];

    if (strlen(name) != MERGE_NAME_LEN || name[20] != '-' || strcmp(name + 41, MERGE_SUFFIX) != 0)
        return false;
    memcpy(seg, name, 20);
    memcpy(seg + 20, ".log", 5);
    if (!pulse_segment_parse_name(seg, first_out))
        return false;
    memcpy(seg, name + 21, 20);
    if (!pulse_segment_parse_name(seg, end_out))
        return false;
    return *first_out < *end_out;
}

/*
 * Whether the merge file at path holds what a merge writes: at least one
 * batch, every batch whole and CRC-valid, offsets increasing from first and
 * all below end, nothing after the last batch. *ok_out is false (and *why
 * says why) otherwise; a failure to read it at all is an error status.
 */
static pulse_status_t verify_merge_file(const struct pulse_io *io, const char *path, int64_t first, int64_t end,
                                        bool *ok_out, const char **why)
{
    struct reader r;
    uint64_t fsize = 0, ignored = 0;
    int64_t next = first;
    size_t batches = 0;
    int fd = io->open(io, path, O_RDONLY, 0);
    pulse_status_t st = PULSE_OK;

    *ok_out = false;
    *why = "no batch";
    if (fd < 0 || io->fsize(io, fd, &fsize) < 0) {
        int err = errno;
        PULSE_ERROR("recover: cannot read %s: %s", path, strerror(err));
        if (fd >= 0)
            io->close(io, fd);
        return pulse_status_from_errno(err);
    }
    reader_init_fd(&r, io, fd, path, fsize);
    for (;;) {
        const uint8_t *batch;
        size_t len;
        struct pulse_batch_header hdr;
        int64_t last = 0;

        st = reader_next(&r, &batch, &len, &hdr, &last, &ignored);
        if (st == PULSE_EOF) {
            st = PULSE_OK;
            *ok_out = batches > 0;
            break;
        }
        if (st == PULSE_CORRUPT) {
            *why = "a batch that does not verify";
            st = PULSE_OK;
            break;
        }
        if (st != PULSE_OK)
            break;
        if (hdr.base_offset < next || last >= end) {
            *why = "offsets outside the merged range";
            break;
        }
        next = last + 1;
        batches++;
    }
    reader_fini(&r);
    io->close(io, fd);
    return st;
}

/* Unlinks path unless it is already gone. */
static pulse_status_t unlink_if_present(const struct pulse_io *io, const char *path)
{
    if (io->unlink(io, path) < 0 && errno != ENOENT) {
        int err = errno;
        PULSE_ERROR("recover: unlink %s failed: %s", path, strerror(err));
        return pulse_status_from_errno(err);
    }
    return PULSE_OK;
}

/*
 * Rolls one merge forward: removes the segments in (first, end), then the
 * first segment's index (rebuilt by the scan that follows), then renames
 * the merge file over the first segment's data file. Each step is
 * idempotent, so a crash in here is finished by the next open.
 */
static pulse_status_t roll_merge_forward(const struct pulse_io *io, const char *dir, const char *mpath,
                                         int64_t first, int64_t end, const int64_t *bases, size_t nbases)
{
    char *path = NULL;
    uint32_t removed = 0;
    pulse_status_t st = PULSE_OK;

    for (size_t i = 0; i < nbases && st == PULSE_OK; i++) {
        if (bases[i] <= first || bases[i] >= end)
            continue;
        path = pulse_segment_path(dir, bases[i], "index");
        st = path == NULL ? PULSE_NOMEM : unlink_if_present(io, path);
        pulse_free(path);
        path = pulse_segment_path(dir, bases[i], "log");
        if (st == PULSE_OK)
            st = path == NULL ? PULSE_NOMEM : unlink_if_present(io, path);
        pulse_free(path);
        path = NULL;
        removed++;
    }
    /* As in merge_files: removals durable before the rename. */
    if (st == PULSE_OK && io->fsync_dir(io, dir) < 0) {
        int err = errno;
        PULSE_ERROR("recover: fsync directory %s failed: %s", dir, strerror(err));
        st = pulse_status_from_errno(err);
    }
    if (st != PULSE_OK)
        return st;
    pulse_failpoint("compact_finish_merge_before_rename");
    path = pulse_segment_path(dir, first, "index");
    st = path == NULL ? PULSE_NOMEM : unlink_if_present(io, path);
    pulse_free(path);
    path = pulse_segment_path(dir, first, "log");
    if (st == PULSE_OK && path == NULL)
        st = PULSE_NOMEM;
    if (st == PULSE_OK && io->rename(io, mpath, path) < 0) {
        int err = errno;
        PULSE_ERROR("recover: rename %s -> %s failed: %s", mpath, path, strerror(err));
        st = pulse_status_from_errno(err);
    }
    if (st == PULSE_OK && io->fsync_dir(io, dir) < 0) {
        int err = errno;
        PULSE_ERROR("recover: fsync directory %s failed: %s", dir, strerror(err));
        st = pulse_status_from_errno(err);
    }
    if (st == PULSE_OK)
        PULSE_WARN("recover: %s: completed an interrupted compaction merge: %s now holds offsets %" PRId64
                   "..%" PRId64 " (%" PRIu32 " later segment(s) it replaced removed)",
                   dir, path, first, end - 1, removed);
    pulse_free(path);
    return st;
}

/* Collects the merge file names and the segment bases of dir. */
static pulse_status_t scan_for_merges(const char *dir, char ***names_out, size_t *nnames_out, int64_t **bases_out,
                                      size_t *nbases_out)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char **names = NULL;
    int64_t *bases = NULL;
    size_t nn = 0, nb = 0, capn = 0, capb = 0;
    pulse_status_t st = PULSE_OK;

    if (d == NULL) {
        int err = errno;
        PULSE_ERROR("recover: opendir %s failed: %s", dir, strerror(err));
        return pulse_status_from_errno(err);
    }
    while (st == PULSE_OK && (de = readdir(d)) != NULL) {
        int64_t a, b;
        if (parse_merge_name(de->d_name, &a, &b)) {
            if (nn == capn) {
                capn = capn ? capn * 2 : 4;
                char **nb2 = pulse_realloc(names, capn * sizeof *names);
                if (nb2 == NULL) {
                    st = PULSE_NOMEM;
                    break;
                }
                names = nb2;
            }
            names[nn] = pulse_strdup(de->d_name);
            if (names[nn] == NULL)
                st = PULSE_NOMEM;
            else
                nn++;
        } else if (pulse_segment_parse_name(de->d_name, &a)) {
            if (nb == capb) {
                capb = capb ? capb * 2 : 16;
                int64_t *bb = pulse_realloc(bases, capb * sizeof *bases);
                if (bb == NULL) {
                    st = PULSE_NOMEM;
                    break;
                }
                bases = bb;
            }
            bases[nb++] = a;
        }
    }
    closedir(d);
    if (st != PULSE_OK) {
        for (size_t i = 0; i < nn; i++)
            pulse_free(names[i]);
        pulse_free(names);
        pulse_free(bases);
        return st;
    }
    *names_out = names;
    *nnames_out = nn;
    *bases_out = bases;
    *nbases_out = nb;
    return PULSE_OK;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

pulse_status_t pulse_compact_finish_merges(const struct pulse_io *io, const char *dir,
                                           struct pulse_plog_recovery *rec)
{
    char **names = NULL;
    int64_t *bases = NULL;
    size_t nn = 0, nb = 0;
    pulse_status_t st;

    st = scan_for_merges(dir, &names, &nn, &bases, &nb);
    if (st != PULSE_OK || nn == 0)
        goto out;
    qsort(names, nn, sizeof *names, cmp_names);
    for (size_t i = 0; i < nn && st == PULSE_OK; i++) {
        int64_t first = 0, end = 0;
        bool has_first = false, ok = false;
        const char *why = "its first segment is missing";
        size_t need = strlen(dir) + strlen(names[i]) + 2;
        char *mpath = pulse_malloc(need);

        if (mpath == NULL) {
            st = PULSE_NOMEM;
            break;
        }
        snprintf(mpath, need, "%s/%s", dir, names[i]);
        (void)parse_merge_name(names[i], &first, &end);
        for (size_t j = 0; j < nb; j++)
            has_first = has_first || bases[j] == first;
        if (has_first)
            st = verify_merge_file(io, mpath, first, end, &ok, &why);
        if (st == PULSE_OK && ok) {
            st = roll_merge_forward(io, dir, mpath, first, end, bases, nb);
        } else if (st == PULSE_OK) {
            /* Never remove data on an unproven file: the segments left keep
             * serving, the offsets only the merge file held are unreadable
             * until an operator restores them. */
            PULSE_ERROR("recover: CORRUPT interrupted compaction merge %s: %s. It is left in place and not "
                        "served; the remaining segment files are kept as they are. Keep a copy of it for "
                        "inspection (pulse-log dump reads it as a segment file)",
                        mpath, why);
            rec->corrupt_segments++;
        }
        pulse_free(mpath);
    }
out:
    for (size_t i = 0; i < nn; i++)
        pulse_free(names[i]);
    pulse_free(names);
    pulse_free(bases);
    return st;
}
