/* SPDX-License-Identifier: MIT */
/*
 * meta.c - the LevelDB metadata store (the only file that includes
 * <leveldb/c.h>).
 *
 * Everything here is small and rare compared with event data: identity,
 * topic definitions and cursors. The layout is the key list of meta.h
 * (storage contract section 6). Design points:
 *   - One leveldb_t per broker; LevelDB's LOCK file is what refuses a second
 *     process on the same data directory, so an open error about taking the
 *     lock becomes PULSE_BUSY with a message an operator understands, and
 *     one about permissions says "permission denied" (open_error).
 *   - Damage is found at open, not while serving: every record is read once
 *     with checksums verified (verify_all), a directory whose CURRENT file
 *     is gone is refused rather than started over, and what LevelDB drops
 *     silently (paranoid checks are off) is reported from its own LOG.
 *     pulse_meta_repair runs LevelDB's repair under LevelDB's lock.
 *   - Every write is a sync write: LevelDB appends the batch to its log and
 *     fdatasyncs it before returning, so an acknowledged topic create,
 *     delete or cursor commit survives a crash. Multi-key changes use one
 *     leveldb_writebatch_t, which LevelDB applies atomically after a crash.
 *   - Prefix scans always end their prefix with '/', and names cannot
 *     contain '/', so a scan for one topic or consumer never matches another
 *     whose name merely starts the same way.
 *   - LevelDB error strings are malloc'd by LevelDB: each is freed with
 *     leveldb_free right after it has been logged or copied, and err is
 *     reset to NULL before every call (c-notes section 2).
 *   - A failed write (a full disk, most often) leaves LevelDB's log writer
 *     believing the record was written whole: its block accounting runs
 *     ahead of the file, so records written after it land misaligned and
 *     the next open's log replay drops them (acknowledged cursor commits
 *     and topic creates were lost that way on a filled tmpfs). A failed
 *     sync write also latches LevelDB into refusing every later write. So
 *     after any failed write the store is marked stale, and the next write
 *     first closes and reopens it: the open replays the old log (a torn
 *     last record is dropped, as after a crash) and starts a new one. Reads
 *     keep using the stale handle meanwhile. The reopen needs room for a
 *     table, a log and a manifest, so it waits until the file system has
 *     META_REOPEN_MIN_FREE bytes free (writes answer PULSE_NOSPACE until
 *     then). The handle is guarded by a rwlock: every use holds it for
 *     reading, a reopen for writing.
 *   - LevelDB 1.23 makes a new file's name durable only by syncing its
 *     directory when a MANIFEST is synced. When its memtable fills, it
 *     starts a new log file and writes the next batches there, fdatasynced,
 *     while the directory is synced only once the background flush of the
 *     old memtable writes the MANIFEST: a power cut in between drops the
 *     new log's name, and with it every write acknowledged into that log.
 *     So after each sync write, a log file newer than the newest one whose
 *     name we made durable gets its directory fsynced before the write is
 *     acknowledged (sync_new_log).
 *   - Consequence for callers: a write that returned an error may still
 *     take effect. When its record reached the log but the fdatasync
 *     failed, LevelDB did not apply it (reads of the stale handle do not
 *     see it), but the reopen's replay of the log does, just before the
 *     write that caused the reopen, or the next open does. Log order is
 *     kept: the failed batch lands before anything written after it. So
 *     an undo must be a later write that makes the outcome certain (for
 *     example deleting what a failed create wrote), never the assumption
 *     that nothing changed (meta.h "Failed writes"). Tests produce this
 *     with pulse_meta_fail_writes, since LevelDB's C API has no Env to
 *     inject faults through.
 */
#include "meta/meta.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <jansson.h>
#include <leveldb/c.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/status.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/endian.h"
#include "common/fsio.h"
#include "common/log.h"
#include "meta/meta_int.h"

/* Longest key: "cursor/" + name + "/" + name + "/" + a 10-digit partition. */
#define KEY_MAX 640
/* Identity and topic records are tiny; anything bigger is not ours. */
#define RECORD_MAX 65536
/* LevelDB's LOG is rewritten at every open; more than this is not read. */
#define LEVELDB_LOG_MAX (256 * 1024)

/* Free bytes a reopen after a failed write waits for (see the file
 * comment): a memtable flush (4 MiB at most), a log and a manifest. */
#define META_REOPEN_MIN_FREE (8u * 1024 * 1024)

struct pulse_meta {
    leveldb_t *db; /* lock; NULL after a reopen failed */
    char *dir;     /* owned, for reopening */
    pthread_rwlock_t lock;
    atomic_bool stale; /* a write failed: reopen before the next write */
    leveldb_options_t *opts;
    leveldb_readoptions_t *ropts;
    leveldb_writeoptions_t *wopts; /* sync = 1 */
    char cluster_id[PULSE_META_ID_LEN + 1];
    char broker_id[PULSE_META_ID_LEN + 1];
    atomic_uint_fast64_t sync_writes; /* write_batch calls that succeeded */
    /* sync_new_log: the newest LevelDB log file whose name is durable
     * (0: none made durable by us yet). */
    pthread_mutex_t logsync_mu;
    uint64_t synced_log; /* logsync_mu */
    /* pulse_meta_fail_writes (tests): writes still to fail, how, and the
     * failed batches that are "in the log" (hook_mu). */
    atomic_uint hook_left;
    pthread_mutex_t hook_mu;
    enum pulse_meta_fault hook_how;
    leveldb_writebatch_t *deferred;
};

/* Logs and frees a LevelDB error string; returns the status to report.
 * LevelDB reports a full disk, or the descriptor limit, as an IO error whose
 * text carries strerror, and a block or table that fails its checksum as
 * "Corruption: ..."; the latter is PULSE_CORRUPT so that the broker can name
 * the repair. */
static pulse_status_t level_fail(const char *what, char **err)
{
    pulse_status_t st = PULSE_IO;

    if (*err != NULL) {
        PULSE_ERROR("meta: %s failed: %s", what, *err);
        if (strstr(*err, "No space left") != NULL || strstr(*err, "quota") != NULL)
            st = PULSE_NOSPACE;
        else if (strstr(*err, "Too many open files") != NULL)
            st = PULSE_NOFILE;
        else if (strncmp(*err, "Corruption", 10) == 0)
            st = PULSE_CORRUPT;
        leveldb_free(*err);
        *err = NULL;
    }
    return st;
}

static bool key_fmt(char *key, size_t *len_out, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Formats a key into a KEY_MAX buffer; false if it would not fit. */
static bool key_fmt(char *key, size_t *len_out, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(key, KEY_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= KEY_MAX)
        return false;
    *len_out = (size_t)n;
    return true;
}

static bool name_ok(const char *name)
{
    size_t len;

    if (name == NULL)
        return false;
    len = strnlen(name, PULSE_META_NAME_MAX + 1);
    return len >= 1 && len <= PULSE_META_NAME_MAX && strchr(name, '/') == NULL;
}

/* Writes the batches pulse_meta_fail_writes failed "after they reached the
 * log" (tests): what the replay of the log does for a real such write.
 * Caller holds the lock for writing, or is closing the store. */
static void apply_deferred(struct pulse_meta *meta)
{
    leveldb_writebatch_t *wb;
    char *err = NULL;

    pthread_mutex_lock(&meta->hook_mu);
    wb = meta->deferred;
    meta->deferred = NULL;
    pthread_mutex_unlock(&meta->hook_mu);
    if (wb == NULL || meta->db == NULL) {
        if (wb != NULL)
            leveldb_writebatch_destroy(wb);
        return;
    }
    leveldb_write(meta->db, meta->wopts, wb, &err);
    leveldb_writebatch_destroy(wb);
    if (err != NULL)
        (void)level_fail("replay of a failed write", &err);
    else
        PULSE_WARN("meta: a write that had failed took effect when %s was reopened", meta->dir);
}

/* Closes and reopens the store (see the file comment). Caller holds the
 * lock for writing. */
static pulse_status_t reopen_locked(struct pulse_meta *meta)
{
    struct statvfs vfs;
    char *err = NULL;

    if (meta->db != NULL && statvfs(meta->dir, &vfs) == 0 &&
        (uint64_t)vfs.f_bavail * vfs.f_frsize < META_REOPEN_MIN_FREE)
        return PULSE_NOSPACE; /* keep the stale handle for reads */
    if (meta->db != NULL)
        leveldb_close(meta->db);
    meta->db = leveldb_open(meta->opts, meta->dir, &err);
    if (err != NULL) {
        meta->db = NULL;
        return level_fail("reopen after a failed write", &err);
    }
    atomic_store(&meta->stale, false);
    PULSE_WARN("meta: reopened the metadata store %s after a failed write", meta->dir);
    apply_deferred(meta);
    return PULSE_OK;
}

/* Takes the lock for reading, for one use of the handle. A write to a stale
 * store, and any use while a reopen failed, reopen it first. */
static pulse_status_t db_enter(struct pulse_meta *meta, bool write)
{
    for (;;) {
        pulse_status_t st = PULSE_OK;
        pthread_rwlock_rdlock(&meta->lock);
        if (meta->db != NULL && !(write && atomic_load(&meta->stale)))
            return PULSE_OK;
        pthread_rwlock_unlock(&meta->lock);
        pthread_rwlock_wrlock(&meta->lock);
        if (meta->db == NULL || (write && atomic_load(&meta->stale)))
            st = reopen_locked(meta);
        pthread_rwlock_unlock(&meta->lock);
        if (st != PULSE_OK)
            return st;
    }
}

static void db_leave(struct pulse_meta *meta)
{
    pthread_rwlock_unlock(&meta->lock);
}

/* Gets a key. *val_out is leveldb-malloc'd (leveldb_free) or NULL when the
 * key is absent. */
static pulse_status_t get_raw(struct pulse_meta *meta, const char *key, size_t klen, char **val_out, size_t *vlen_out)
{
    char *err = NULL;
    char *val;
    size_t vlen = 0;
    pulse_status_t st = db_enter(meta, false);

    if (st != PULSE_OK)
        return st;
    val = leveldb_get(meta->db, meta->ropts, key, klen, &vlen, &err);
    db_leave(meta);
    if (err != NULL) {
        leveldb_free(val);
        return level_fail("get", &err);
    }
    *val_out = val;
    *vlen_out = vlen;
    return PULSE_OK;
}

/* pulse_meta_fail_writes: whether this write is to fail; a batch that is
 * to take effect later is kept for apply_deferred. */
static bool hook_fails(struct pulse_meta *meta, leveldb_writebatch_t *wb)
{
    bool fail = false;

    if (atomic_load(&meta->hook_left) == 0)
        return false;
    pthread_mutex_lock(&meta->hook_mu);
    if (atomic_load(&meta->hook_left) > 0) {
        atomic_fetch_sub(&meta->hook_left, 1);
        fail = true;
        if (meta->hook_how == PULSE_META_FAULT_APPLIED_LATER) {
            if (meta->deferred == NULL)
                meta->deferred = leveldb_writebatch_create();
            leveldb_writebatch_append(meta->deferred, wb);
        }
    }
    pthread_mutex_unlock(&meta->hook_mu);
    return fail;
}

void pulse_meta_fail_writes(struct pulse_meta *meta, unsigned n, enum pulse_meta_fault how)
{
    pthread_mutex_lock(&meta->hook_mu);
    meta->hook_how = how;
    atomic_store(&meta->hook_left, n);
    pthread_mutex_unlock(&meta->hook_mu);
}

/* The number of the newest "NNNNNN.log" file in dir (LevelDB's log),
 * 0 when there is none; -1 with errno when dir cannot be read. */
static int newest_log(const char *dir, uint64_t *out)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    uint64_t best = 0;

    if (d == NULL)
        return -1;
    while ((de = readdir(d)) != NULL) {
        char *end = NULL;
        const char *dot = strrchr(de->d_name, '.');
        if (dot == NULL || strcmp(dot, ".log") != 0 || dot == de->d_name)
            continue;
        unsigned long long n = strtoull(de->d_name, &end, 10);
        if (end == dot && n > best)
            best = n;
    }
    closedir(d);
    *out = best;
    return 0;
}

/* After a sync write: makes the name of the log file it went to durable
 * when LevelDB started that file since the last time (file comment), by
 * fsyncing the store's directory. A failure means the write may not
 * survive a power cut, so it is reported as the write's failure. */
static pulse_status_t sync_new_log(struct pulse_meta *meta)
{
    pulse_status_t st = PULSE_OK;
    uint64_t newest = 0;
    const struct pulse_io *io = pulse_io_posix();

    pthread_mutex_lock(&meta->logsync_mu);
    if (newest_log(meta->dir, &newest) < 0) {
        int err = errno;
        PULSE_ERROR("meta: listing %s failed: %s", meta->dir, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    if (newest <= meta->synced_log)
        goto out;
    if (io->fsync_dir(io, meta->dir) < 0) {
        int err = errno;
        PULSE_ERROR("meta: fsync directory %s failed: %s", meta->dir, strerror(err));
        st = pulse_status_from_errno(err);
    } else {
        meta->synced_log = newest;
    }
out:
    pthread_mutex_unlock(&meta->logsync_mu);
    return st;
}

static pulse_status_t write_batch(struct pulse_meta *meta, leveldb_writebatch_t *wb, const char *what)
{
    char *err = NULL;
    pulse_status_t st = db_enter(meta, true);

    if (st != PULSE_OK)
        return st;
    if (hook_fails(meta, wb)) {
        atomic_store(&meta->stale, true);
        db_leave(meta);
        PULSE_ERROR("meta: %s failed: injected write failure (test)", what);
        return PULSE_IO;
    }
    leveldb_write(meta->db, meta->wopts, wb, &err);
    if (err != NULL)
        atomic_store(&meta->stale, true);
    db_leave(meta);
    if (err != NULL)
        return level_fail(what, &err);
    st = sync_new_log(meta);
    if (st != PULSE_OK)
        return st;
    atomic_fetch_add(&meta->sync_writes, 1);
    return PULSE_OK;
}

typedef pulse_status_t (*scan_fn)(void *ctx, const char *key, size_t klen, const char *val, size_t vlen);

/* Calls fn for every key that starts with prefix, in key order. The key and
 * value pointers live only during the call. */
static pulse_status_t scan_prefix(struct pulse_meta *meta, const char *prefix, scan_fn fn, void *ctx)
{
    pulse_status_t st = PULSE_OK;
    size_t plen = strlen(prefix);
    leveldb_iterator_t *it;
    char *err = NULL;

    st = db_enter(meta, false);
    if (st != PULSE_OK)
        return st;
    it = leveldb_create_iterator(meta->db, meta->ropts);
    if (it == NULL) {
        db_leave(meta);
        return PULSE_NOMEM;
    }
    for (leveldb_iter_seek(it, prefix, plen); leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t klen = 0;
        size_t vlen = 0;
        const char *key = leveldb_iter_key(it, &klen);
        const char *val;

        if (klen < plen || memcmp(key, prefix, plen) != 0)
            break;
        val = leveldb_iter_value(it, &vlen);
        st = fn(ctx, key, klen, val, vlen);
        if (st != PULSE_OK)
            goto out;
    }
    leveldb_iter_get_error(it, &err);
    if (err != NULL)
        st = level_fail("scan", &err);
out:
    leveldb_iter_destroy(it);
    db_leave(meta);
    return st;
}

#if defined(__SANITIZE_THREAD__)
/*
 * ThreadSanitizer builds only. The system libleveldb is not instrumented, so
 * TSan sees the memcpy/memcmp it does on its lock-free memtable but not the
 * atomics that order them, and reports races inside LevelDB between a writer
 * and a concurrent iterator. Those accesses are LevelDB's own business
 * (a shared leveldb_t is documented thread-safe); ignore what the library
 * itself does, while every access of ours stays checked.
 */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
    return "race:libleveldb.so\n";
}
#endif

/* ---- JSON records ---------------------------------------------------- */

/* Adds key -> compact JSON text of doc to the batch. Steals doc (NULL means
 * the caller's json_pack ran out of memory). */
static pulse_status_t put_json(leveldb_writebatch_t *wb, const char *key, size_t klen, json_t *doc)
{
    char text[2048];
    size_t n;

    if (doc == NULL)
        return PULSE_NOMEM;
    n = json_dumpb(doc, text, sizeof text, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(doc);
    if (n == 0 || n > sizeof text)
        return PULSE_TOO_LARGE;
    leveldb_writebatch_put(wb, key, klen, text, n);
    return PULSE_OK;
}

static json_t *load_json(const char *val, size_t vlen)
{
    json_error_t jerr;

    if (vlen == 0 || vlen > RECORD_MAX)
        return NULL;
    return json_loadb(val, vlen, JSON_REJECT_DUPLICATES, &jerr);
}

json_t *pulse_meta_topic_to_doc(const struct pulse_meta_topic *t)
{
    json_t *doc = json_pack("{s:s, s:I, s:s, s:I, s:I, s:I, s:I}", "name", t->name, "partitions",
                            (json_int_t)t->partitions, "cleanup", t->cleanup == 1 ? "compact" : "delete",
                            "retention_ms", (json_int_t)t->retention_ms, "retention_bytes",
                            (json_int_t)t->retention_bytes, "segment_bytes", (json_int_t)t->segment_bytes,
                            "created_at_ms", (json_int_t)t->created_at_ms);
    /* Only when on: see struct pulse_meta_topic. */
    if (doc != NULL && t->compression == 1 && json_object_set_new(doc, "compression", json_string("zlib")) != 0) {
        json_decref(doc);
        doc = NULL;
    }
    return doc;
}

pulse_status_t pulse_meta_topic_from_doc(json_t *doc, struct pulse_meta_topic *out)
{
    pulse_status_t st = PULSE_CORRUPT;
    const char *name = NULL;
    const char *cleanup = NULL;
    json_int_t parts = 0, rms = 0, rbytes = 0, segb = 0, created = 0;

    if (doc == NULL)
        goto out;
    if (json_unpack(doc, "{s:s, s:I, s:s, s:I, s:I, s:I, s:I}", "name", &name, "partitions", &parts, "cleanup",
                    &cleanup, "retention_ms", &rms, "retention_bytes", &rbytes, "segment_bytes", &segb, "created_at_ms",
                    &created) != 0)
        goto out;
    if (!name_ok(name) || parts < 1 || parts > 65536 || rms < 0 || rbytes < 0 || segb <= 0)
        goto out;
    memset(out, 0, sizeof *out);
    if (strcmp(cleanup, "delete") == 0)
        out->cleanup = 0;
    else if (strcmp(cleanup, "compact") == 0)
        out->cleanup = 1;
    else
        goto out;
    /* Optional: absent means none (a record of an earlier version). */
    json_t *comp = json_object_get(doc, "compression");
    if (comp != NULL) {
        const char *c = json_string_value(comp);
        if (c != NULL && strcmp(c, "zlib") == 0)
            out->compression = 1;
        else if (c == NULL || strcmp(c, "none") != 0)
            goto out;
    }
    memcpy(out->name, name, strlen(name) + 1);
    out->partitions = (uint32_t)parts;
    out->retention_ms = rms;
    out->retention_bytes = rbytes;
    out->segment_bytes = segb;
    out->created_at_ms = created;
    st = PULSE_OK;
out:
    return st;
}

static pulse_status_t topic_from_json(const char *val, size_t vlen, struct pulse_meta_topic *out)
{
    json_t *doc = load_json(val, vlen);
    pulse_status_t st = pulse_meta_topic_from_doc(doc, out);

    json_decref(doc);
    return st;
}

/* ---- identity -------------------------------------------------------- */

static pulse_status_t random_id(char *id)
{
    static const char hex[] = "0123456789abcdef";
    uint8_t raw[PULSE_META_ID_LEN / 2];
    size_t got = 0;

    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0) {
            int e = errno;
            if (e == EINTR)
                continue;
            PULSE_ERROR("meta: getrandom failed: %s", strerror(e));
            return PULSE_IO;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof raw; i++) {
        id[2 * i] = hex[raw[i] >> 4];
        id[2 * i + 1] = hex[raw[i] & 15];
    }
    id[PULSE_META_ID_LEN] = '\0';
    return PULSE_OK;
}

bool pulse_meta_id_valid(const char *val, size_t vlen)
{
    if (vlen != PULSE_META_ID_LEN)
        return false;
    for (size_t i = 0; i < vlen; i++)
        if (!((val[i] >= '0' && val[i] <= '9') || (val[i] >= 'a' && val[i] <= 'f')))
            return false;
    return true;
}

/*
 * Loads <kind>/current into id, or creates it: from want when the caller
 * has a copy (the data directory's identity file: the store was lost or
 * damaged, and the identity must survive that), else a fresh random id. The
 * <kind>/<id> record and the pointer go in one sync batch, so a crash
 * leaves either no identity (created again at the next start) or a
 * complete one. *origin_out tells which of the three happened.
 */
static pulse_status_t load_or_create_id(struct pulse_meta *meta, const char *kind, const char *want, bool required,
                                        char *id, enum pulse_meta_id_origin *origin_out, char *errbuf, size_t errlen)
{
    pulse_status_t st;
    char key[KEY_MAX];
    size_t klen;
    char *val = NULL;
    size_t vlen = 0;
    leveldb_writebatch_t *wb = NULL;
    json_t *doc = NULL;

    if (!key_fmt(key, &klen, "%s/current", kind))
        return PULSE_INVALID;
    st = get_raw(meta, key, klen, &val, &vlen);
    if (st != PULSE_OK)
        goto out;
    if (val != NULL) {
        if (!pulse_meta_id_valid(val, vlen)) {
            pulse_errbuf_set(errbuf, errlen, "metadata key %s holds a malformed id", key);
            st = PULSE_CORRUPT;
            goto out;
        }
        memcpy(id, val, vlen);
        id[vlen] = '\0';
        *origin_out = PULSE_META_ID_LOADED;
        /* The caller's copy and the store disagree: one of them belongs to
         * another data directory, and guessing which would mix two brokers'
         * state. Refused; the caller names both places. */
        if (want != NULL && strcmp(want, id) != 0) {
            pulse_errbuf_set(errbuf, errlen, "the metadata store holds %s id %s, the data directory %s id %s", kind, id,
                             kind, want);
            st = PULSE_INVALID;
        }
        goto out;
    }
    if (required) {
        pulse_errbuf_set(errbuf, errlen, "the metadata store holds no %s id", kind);
        st = PULSE_NOT_FOUND;
        goto out;
    }
    if (want != NULL && pulse_meta_id_valid(want, strlen(want))) {
        memcpy(id, want, PULSE_META_ID_LEN + 1);
        *origin_out = PULSE_META_ID_ADOPTED;
    } else {
        st = random_id(id);
        if (st != PULSE_OK)
            goto out;
        *origin_out = PULSE_META_ID_CREATED;
    }
    wb = leveldb_writebatch_create();
    doc = json_pack("{s:s, s:I}", "id", id, "created_at_ms", (json_int_t)pulse_clock_wall_ms());
    if (!key_fmt(key, &klen, "%s/%s", kind, id)) {
        st = PULSE_INVALID;
        goto out;
    }
    st = put_json(wb, key, klen, doc);
    doc = NULL;
    if (st != PULSE_OK)
        goto out;
    if (!key_fmt(key, &klen, "%s/current", kind)) {
        st = PULSE_INVALID;
        goto out;
    }
    leveldb_writebatch_put(wb, key, klen, id, PULSE_META_ID_LEN);
    st = write_batch(meta, wb, "identity create");
    if (st == PULSE_OK)
        PULSE_INFO("meta: %s %s id %s", *origin_out == PULSE_META_ID_ADOPTED ? "restored" : "created", kind, id);
out:
    if (st != PULSE_OK && errbuf != NULL && errlen > 0 && errbuf[0] == '\0')
        pulse_errbuf_set(errbuf, errlen, "cannot load or create the %s identity: %s", kind, pulse_status_message(st));
    leveldb_free(val);
    if (wb != NULL)
        leveldb_writebatch_destroy(wb);
    json_decref(doc);
    return st;
}

/* Writes the schema version on a fresh store (*created_out = true);
 * refuses a newer one. */
static pulse_status_t check_schema(struct pulse_meta *meta, bool *created_out, char *errbuf, size_t errlen)
{
    static const char key[] = "meta/schema-version";
    pulse_status_t st;
    char *val = NULL;
    size_t vlen = 0;
    uint8_t be[8];
    char *err = NULL;

    st = get_raw(meta, key, sizeof key - 1, &val, &vlen);
    if (st != PULSE_OK)
        goto out;
    if (val == NULL) {
        *created_out = true;
        pulse_put_be64(be, PULSE_META_SCHEMA_VERSION);
        leveldb_put(meta->db, meta->wopts, key, sizeof key - 1, (const char *)be, sizeof be, &err);
        if (err != NULL)
            st = level_fail("schema version write", &err);
        goto out;
    }
    if (vlen != 8) {
        pulse_errbuf_set(errbuf, errlen, "metadata schema version has %zu bytes instead of 8", vlen);
        st = PULSE_CORRUPT;
        goto out;
    }
    int64_t version = (int64_t)pulse_get_be64((const uint8_t *)val);
    if (version > PULSE_META_SCHEMA_VERSION) {
        pulse_errbuf_set(errbuf, errlen,
                         "metadata schema version %" PRId64 " is newer than this build supports (%d); "
                         "run a newer pulsed on this data directory",
                         version, PULSE_META_SCHEMA_VERSION);
        st = PULSE_INVALID;
        goto out;
    }
    if (version < 1) {
        pulse_errbuf_set(errbuf, errlen, "metadata schema version %" PRId64 " is invalid", version);
        st = PULSE_CORRUPT;
        goto out;
    }
out:
    leveldb_free(val);
    return st;
}

/* ---- open, verify and repair ------------------------------------------ */

/*
 * Before LevelDB sees the directory. A store whose CURRENT file is gone
 * looks like no store at all to leveldb_open with create_if_missing, which
 * would start an empty one and then delete the old tables as obsolete. A
 * directory with tables or logs but no CURRENT is therefore damaged, and
 * `pulsed --repair-metadata` rebuilds CURRENT from those files.
 */
static pulse_status_t check_dir(const char *dir, char *errbuf, size_t errlen)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    bool current = false;
    bool files = false;

    if (d == NULL) {
        int e = errno;
        if (e == ENOENT)
            return PULSE_OK; /* a first start, or a lost store: created below */
        if (e == EACCES || e == EPERM)
            pulse_errbuf_set(errbuf, errlen, "permission denied: %s (running as uid %u)", dir, (unsigned)geteuid());
        else if (e == ENOTDIR)
            pulse_errbuf_set(errbuf, errlen, "not a directory: %s", dir);
        else
            pulse_errbuf_set(errbuf, errlen, "cannot open metadata store %s: %s", dir, strerror(e));
        return pulse_status_from_errno(e);
    }
    while ((de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        size_t len = strlen(n);
        if (strcmp(n, "CURRENT") == 0)
            current = true;
        else if (strncmp(n, "MANIFEST-", 9) == 0 ||
                 (len > 4 && (strcmp(n + len - 4, ".ldb") == 0 || strcmp(n + len - 4, ".sst") == 0 ||
                              strcmp(n + len - 4, ".log") == 0)))
            files = true;
    }
    closedir(d);
    if (files && !current) {
        pulse_errbuf_set(errbuf, errlen, "metadata store %s is damaged: it holds tables or logs but no CURRENT file",
                         dir);
        return PULSE_CORRUPT;
    }
    return PULSE_OK;
}

/* Turns leveldb_open's message into a status and a sentence naming the
 * cause. LevelDB says "IO error: lock <dir>/LOCK: already held by process"
 * (this process) or "...: Resource temporarily unavailable" (another one)
 * when the lock is taken, but "IO error: <dir>/LOCK: Permission denied" when
 * it may not even open the file: only the first two mean "in use". */
static pulse_status_t open_error(const char *dir, const char *err, char *errbuf, size_t errlen)
{
    if (strstr(err, "Permission denied") != NULL) {
        pulse_errbuf_set(errbuf, errlen, "permission denied: %s (running as uid %u)", dir, (unsigned)geteuid());
        return PULSE_ACCESS;
    }
    if (strncmp(err, "IO error: lock ", 15) == 0) {
        pulse_errbuf_set(errbuf, errlen, "metadata store %s is in use by another process (%s)", dir, err);
        return PULSE_BUSY;
    }
    if (strncmp(err, "Corruption", 10) == 0) {
        pulse_errbuf_set(errbuf, errlen, "metadata store %s is damaged: %s", dir, err);
        return PULSE_CORRUPT;
    }
    pulse_errbuf_set(errbuf, errlen, "cannot open metadata store %s: %s", dir, err);
    if (strstr(err, "No space left") != NULL || strstr(err, "quota") != NULL)
        return PULSE_NOSPACE;
    return PULSE_IO;
}

/*
 * Collects the lines of LevelDB's own log (<dir>/LOG, rewritten at every
 * open and repair) that contain one of needles: the only trace LevelDB
 * leaves of records it dropped. Up to nkeep lines are kept (without their
 * timestamp and thread columns); *count_out gets how many matched. Best
 * effort: an unreadable LOG reports nothing.
 */
static void scan_leveldb_log(const char *dir, const char *const *needles, size_t nneedles, uint32_t *count_out,
                             char (*keep)[PULSE_META_NOTE_MAX], uint32_t nkeep)
{
    char path[PATH_MAX];
    char *text = NULL;
    ssize_t n = 0;
    int fd;
    uint32_t count = 0;

    *count_out = 0;
    if (snprintf(path, sizeof path, "%s/LOG", dir) >= (int)sizeof path)
        return;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    text = pulse_malloc(LEVELDB_LOG_MAX + 1);
    if (text != NULL) {
        ssize_t r;
        while (n < LEVELDB_LOG_MAX && (r = read(fd, text + n, LEVELDB_LOG_MAX - (size_t)n)) != 0) {
            if (r < 0) {
                if (errno == EINTR)
                    continue;
                break;
            }
            n += r;
        }
        text[n] = '\0';
    }
    close(fd);
    for (char *line = text; line != NULL && *line != '\0';) {
        char *nl = strchr(line, '\n');
        bool hit = false;
        if (nl != NULL)
            *nl = '\0';
        for (size_t i = 0; i < nneedles && !hit; i++)
            hit = strstr(line, needles[i]) != NULL;
        if (hit) {
            if (count < nkeep) {
                /* "2026/12/01-10:38:41.610066 139636427749184 text" */
                const char *msg = line;
                for (int col = 0; col < 2 && strchr(msg, ' ') != NULL; col++)
                    msg = strchr(msg, ' ') + 1;
                snprintf(keep[count], PULSE_META_NOTE_MAX, "%s", msg);
            }
            count++;
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    pulse_free(text);
    *count_out = count;
}

/* Reads every record once with checksums verified, so that damage LevelDB
 * did not notice at open (tables are opened lazily) is found now rather
 * than halfway through serving, and counts topics and cursors. */
static pulse_status_t verify_all(struct pulse_meta *meta, const char *dir, struct pulse_meta_open_report *rep,
                                 char *errbuf, size_t errlen)
{
    leveldb_iterator_t *it = leveldb_create_iterator(meta->db, meta->ropts);
    char *err = NULL;

    if (it == NULL)
        return PULSE_NOMEM;
    for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t klen = 0;
        size_t vlen = 0;
        const char *key = leveldb_iter_key(it, &klen);
        (void)leveldb_iter_value(it, &vlen);
        if (klen > 6 && memcmp(key, "topic/", 6) == 0)
            rep->topics++;
        else if (klen > 7 && memcmp(key, "cursor/", 7) == 0)
            rep->cursors++;
    }
    leveldb_iter_get_error(it, &err);
    leveldb_iter_destroy(it);
    if (err == NULL)
        return PULSE_OK;
    pulse_errbuf_set(errbuf, errlen, "metadata store %s is damaged: %s", dir, err);
    return level_fail("verify", &err);
}

pulse_status_t pulse_meta_open(const char *dir, struct pulse_meta **out, char *errbuf, size_t errlen)
{
    return pulse_meta_open_ex(dir, NULL, out, NULL, errbuf, errlen);
}

static pulse_status_t meta_alloc(const char *dir, struct pulse_meta **out)
{
    struct pulse_meta *meta = pulse_calloc(1, sizeof *meta);

    if (meta == NULL)
        return PULSE_NOMEM;
    pthread_rwlock_init(&meta->lock, NULL);
    pthread_mutex_init(&meta->hook_mu, NULL);
    pthread_mutex_init(&meta->logsync_mu, NULL);
    atomic_init(&meta->stale, false);
    atomic_init(&meta->hook_left, 0);
    meta->dir = pulse_strdup(dir);
    meta->opts = leveldb_options_create();
    meta->ropts = leveldb_readoptions_create();
    meta->wopts = leveldb_writeoptions_create();
    if (meta->dir == NULL || meta->opts == NULL || meta->ropts == NULL || meta->wopts == NULL) {
        pulse_meta_close(meta);
        return PULSE_NOMEM;
    }
    leveldb_options_set_create_if_missing(meta->opts, 1);
    /* Bounded, and counted in the broker's descriptor budget
     * (PULSE_CONFIG_FD_META, docs/Operations.md); LevelDB's default is
     * 1000. The store is small: a few table files at most. */
    leveldb_options_set_max_open_files(meta->opts, PULSE_META_MAX_OPEN_FILES);
    /* Paranoid checks stay off: with them LevelDB refuses to open when the
     * last record of its log was torn by a power cut. Every write we
     * acknowledge was fdatasynced whole, so a torn record can only be one we
     * never acknowledged, and dropping it (LevelDB logs that) is right.
     * The price: a damaged record in the middle of the log is dropped the
     * same way, silently but for a LOG line. The data directory's own
     * copies (identity and topic files) are what make that survivable; the
     * LOG line is reported (pulse_meta_open_report.damage). Reads still
     * verify block checksums, and verify_all reads everything once. */
    leveldb_options_set_paranoid_checks(meta->opts, 0);
    leveldb_readoptions_set_verify_checksums(meta->ropts, 1);
    /* Sync writes: the metadata log is fdatasynced before a write returns,
     * which is what lets the broker acknowledge topic and cursor changes. */
    leveldb_writeoptions_set_sync(meta->wopts, 1);
    *out = meta;
    return PULSE_OK;
}

pulse_status_t pulse_meta_open_ex(const char *dir, const struct pulse_meta_open_opts *opts, struct pulse_meta **out,
                                  struct pulse_meta_open_report *report, char *errbuf, size_t errlen)
{
    static const char *const damage_words[] = {"Corruption"};
    const struct pulse_meta_identity *want = opts != NULL ? opts->identity : NULL;
    bool required = opts != NULL && opts->identity_required;
    pulse_status_t st = PULSE_OK;
    struct pulse_meta *meta = NULL;
    struct pulse_meta_open_report rep;
    char *err = NULL;

    memset(&rep, 0, sizeof rep);
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    st = check_dir(dir, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    st = meta_alloc(dir, &meta);
    if (st != PULSE_OK)
        goto out;
    meta->db = leveldb_open(meta->opts, dir, &err);
    if (err != NULL) {
        st = open_error(dir, err, errbuf, errlen);
        PULSE_ERROR("meta: open %s failed: %s", dir, err);
        leveldb_free(err);
        err = NULL;
        meta->db = NULL;
        goto out;
    }
    scan_leveldb_log(dir, damage_words, 1, &rep.damage_lines, &rep.damage, 1);
    if (rep.damage_lines > 0)
        PULSE_WARN("meta: LevelDB dropped damaged records while opening %s (%" PRIu32 " report(s), first: %s)", dir,
                   rep.damage_lines, rep.damage);
    st = verify_all(meta, dir, &rep, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    st = check_schema(meta, &rep.created, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    st = load_or_create_id(meta, "cluster", want != NULL ? want->cluster_id : NULL, required, meta->cluster_id,
                           &rep.cluster_origin, errbuf, errlen);
    if (st == PULSE_OK)
        st = load_or_create_id(meta, "broker", want != NULL ? want->broker_id : NULL, required, meta->broker_id,
                               &rep.broker_origin, errbuf, errlen);
    if (st != PULSE_OK) {
        rep.identity_mismatch = st == PULSE_INVALID;
        goto out;
    }
    *out = meta;
    meta = NULL;
out:
    if (report != NULL)
        *report = rep;
    if (st != PULSE_OK && errbuf != NULL && errlen > 0 && errbuf[0] == '\0')
        pulse_errbuf_set(errbuf, errlen, "cannot open metadata store %s: %s", dir, pulse_status_message(st));
    pulse_meta_close(meta);
    return st;
}

/* Number of table files in <dir>/lost, where LevelDB's repair moves the
 * tables it cannot read (and, every time, the logs and manifests it has
 * replaced). */
static uint32_t count_lost_tables(const char *dir)
{
    char path[PATH_MAX];
    DIR *d;
    struct dirent *de;
    uint32_t n = 0;

    if (snprintf(path, sizeof path, "%s/lost", dir) >= (int)sizeof path)
        return 0;
    d = opendir(path);
    if (d == NULL)
        return 0;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len > 4 && (strcmp(de->d_name + len - 4, ".ldb") == 0 || strcmp(de->d_name + len - 4, ".sst") == 0))
            n++;
    }
    closedir(d);
    return n;
}

/* Takes LevelDB's own lock on <dir>/LOCK (the fcntl write lock leveldb_open
 * takes), because leveldb_repair_db takes none: a broker must not have the
 * store open while its files are rewritten. *fd_out is closed to release. */
static pulse_status_t repair_lock(const char *dir, int *fd_out, char *errbuf, size_t errlen)
{
    char path[PATH_MAX];
    struct flock fl;
    int fd;

    if (snprintf(path, sizeof path, "%s/LOCK", dir) >= (int)sizeof path)
        return PULSE_INVALID;
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        if (e == EACCES || e == EPERM || e == EROFS)
            pulse_errbuf_set(errbuf, errlen, "permission denied: %s (running as uid %u)", path, (unsigned)geteuid());
        else
            pulse_errbuf_set(errbuf, errlen, "cannot open %s: %s", path, strerror(e));
        return pulse_status_from_errno(e);
    }
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    if (fcntl(fd, F_SETLK, &fl) != 0) {
        int e = errno;
        pulse_errbuf_set(errbuf, errlen, "metadata store %s is in use by another process (%s)", dir, strerror(e));
        close(fd);
        return PULSE_BUSY;
    }
    *fd_out = fd;
    return PULSE_OK;
}

pulse_status_t pulse_meta_repair(const char *dir, struct pulse_meta_repair_report *report, char *errbuf, size_t errlen)
{
    static const char *const damage_words[] = {"Corruption", "ignoring"};
    pulse_status_t st = PULSE_OK;
    struct pulse_meta_repair_report rep;
    leveldb_options_t *opts = NULL;
    struct stat sb;
    char *err = NULL;
    int lockfd = -1;
    uint32_t lost_before;

    memset(&rep, 0, sizeof rep);
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (stat(dir, &sb) != 0) {
        int e = errno;
        if (e == ENOENT)
            goto done; /* nothing to repair: the rebuild starts from an empty store */
    }
    rep.found = true;
    st = check_dir(dir, errbuf, errlen);
    if (st == PULSE_CORRUPT)
        st = PULSE_OK; /* a missing CURRENT is what repair is for */
    if (st != PULSE_OK)
        goto out;
    st = repair_lock(dir, &lockfd, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    lost_before = count_lost_tables(dir);
    opts = leveldb_options_create();
    if (opts == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    leveldb_repair_db(opts, dir, &err);
    if (err != NULL) {
        pulse_errbuf_set(errbuf, errlen, "LevelDB could not repair %s: %s", dir, err);
        st = level_fail("repair", &err);
        goto out;
    }
    rep.tables_set_aside = count_lost_tables(dir) - lost_before;
    scan_leveldb_log(dir, damage_words, 2, &rep.damage_lines, rep.damage, PULSE_META_REPAIR_NOTES);
done:
    if (report != NULL)
        *report = rep;
out:
    if (opts != NULL)
        leveldb_options_destroy(opts);
    if (lockfd >= 0)
        close(lockfd); /* releases the lock */
    return st;
}

void pulse_meta_close(struct pulse_meta *meta)
{
    if (meta == NULL)
        return;
    /* A failed write that reached the log is replayed by the next open. */
    apply_deferred(meta);
    if (meta->db != NULL)
        leveldb_close(meta->db);
    if (meta->wopts != NULL)
        leveldb_writeoptions_destroy(meta->wopts);
    if (meta->ropts != NULL)
        leveldb_readoptions_destroy(meta->ropts);
    if (meta->opts != NULL)
        leveldb_options_destroy(meta->opts);
    pthread_rwlock_destroy(&meta->lock);
    pthread_mutex_destroy(&meta->hook_mu);
    pthread_mutex_destroy(&meta->logsync_mu);
    pulse_free(meta->dir);
    pulse_free(meta);
}

const char *pulse_meta_cluster_id(const struct pulse_meta *meta)
{
    return meta->cluster_id;
}

const char *pulse_meta_broker_id(const struct pulse_meta *meta)
{
    return meta->broker_id;
}

/* ---- topics ---------------------------------------------------------- */

pulse_status_t pulse_meta_topic_create(struct pulse_meta *meta, const struct pulse_meta_topic *topic)
{
    pulse_status_t st = PULSE_OK;
    leveldb_writebatch_t *wb = NULL;
    json_t *doc = NULL;
    char key[KEY_MAX];
    size_t klen;

    if (!name_ok(topic->name) || topic->partitions == 0)
        return PULSE_INVALID;
    wb = leveldb_writebatch_create();
    if (!key_fmt(key, &klen, "topic/%s", topic->name)) {
        st = PULSE_INVALID;
        goto out;
    }
    st = put_json(wb, key, klen, pulse_meta_topic_to_doc(topic));
    if (st != PULSE_OK)
        goto out;
    for (uint32_t p = 0; p < topic->partitions; p++) {
        doc = json_pack("{s:s, s:I, s:I}", "topic", topic->name, "partition", (json_int_t)p, "created_at_ms",
                        (json_int_t)topic->created_at_ms);
        if (!key_fmt(key, &klen, "partition/%s/%" PRIu32, topic->name, p)) {
            st = PULSE_INVALID;
            goto out;
        }
        st = put_json(wb, key, klen, doc);
        doc = NULL;
        if (st != PULSE_OK)
            goto out;
    }
    /* One batch: after a crash the topic exists with all its partitions or
     * not at all. */
    st = write_batch(meta, wb, "topic create");
out:
    json_decref(doc);
    leveldb_writebatch_destroy(wb);
    return st;
}

pulse_status_t pulse_meta_topic_put(struct pulse_meta *meta, const struct pulse_meta_topic *topic)
{
    pulse_status_t st;
    leveldb_writebatch_t *wb;
    char key[KEY_MAX];
    size_t klen;

    if (!name_ok(topic->name) || !key_fmt(key, &klen, "topic/%s", topic->name))
        return PULSE_INVALID;
    wb = leveldb_writebatch_create();
    st = put_json(wb, key, klen, pulse_meta_topic_to_doc(topic));
    if (st == PULSE_OK)
        st = write_batch(meta, wb, "topic update");
    leveldb_writebatch_destroy(wb);
    return st;
}

pulse_status_t pulse_meta_topic_get(struct pulse_meta *meta, const char *name, struct pulse_meta_topic *out)
{
    pulse_status_t st;
    char key[KEY_MAX];
    size_t klen;
    char *val = NULL;
    size_t vlen = 0;

    if (!name_ok(name) || !key_fmt(key, &klen, "topic/%s", name))
        return PULSE_NOT_FOUND;
    st = get_raw(meta, key, klen, &val, &vlen);
    if (st != PULSE_OK)
        goto out;
    if (val == NULL) {
        st = PULSE_NOT_FOUND;
        goto out;
    }
    st = topic_from_json(val, vlen, out);
    if (st == PULSE_OK && strcmp(out->name, name) != 0)
        st = PULSE_CORRUPT;
    if (st != PULSE_OK)
        PULSE_ERROR("meta: record %s is malformed", key);
out:
    leveldb_free(val);
    return st;
}

struct topic_list_ctx {
    struct pulse_meta_topic *items;
    size_t n;
    size_t cap;
};

static pulse_status_t topic_list_cb(void *ctx, const char *key, size_t klen, const char *val, size_t vlen)
{
    struct topic_list_ctx *tl = ctx;
    pulse_status_t st;

    if (tl->n == tl->cap) {
        size_t ncap = tl->cap ? tl->cap * 2 : 16;
        struct pulse_meta_topic *items = pulse_realloc(tl->items, ncap * sizeof *items);
        if (items == NULL)
            return PULSE_NOMEM;
        tl->items = items;
        tl->cap = ncap;
    }
    st = topic_from_json(val, vlen, &tl->items[tl->n]);
    if (st != PULSE_OK || klen != 6 + strlen(tl->items[tl->n].name) ||
        memcmp(key + 6, tl->items[tl->n].name, klen - 6) != 0) {
        PULSE_ERROR("meta: topic record %.*s is malformed", (int)(klen > 300 ? 300 : klen), key);
        return PULSE_CORRUPT;
    }
    tl->n++;
    return PULSE_OK;
}

pulse_status_t pulse_meta_topic_list(struct pulse_meta *meta, struct pulse_meta_topic **out, size_t *n_out)
{
    struct topic_list_ctx tl = {0};
    pulse_status_t st;

    /* Keys sort bytewise and so do names: the list comes out sorted. */
    st = scan_prefix(meta, "topic/", topic_list_cb, &tl);
    if (st != PULSE_OK) {
        pulse_free(tl.items);
        return st;
    }
    if (tl.n == 0) {
        pulse_free(tl.items);
        tl.items = NULL;
    }
    *out = tl.items;
    *n_out = tl.n;
    return PULSE_OK;
}

struct delete_ctx {
    leveldb_writebatch_t *wb;
    const char *topic; /* NULL: delete every key seen */
    size_t count;
};

static pulse_status_t delete_all_cb(void *ctx, const char *key, size_t klen, const char *val, size_t vlen)
{
    struct delete_ctx *dc = ctx;

    (void)val;
    (void)vlen;
    leveldb_writebatch_delete(dc->wb, key, klen);
    dc->count++;
    return PULSE_OK;
}

/* cursor/<consumer>/<topic>/<p>: deletes the key when <topic> is exactly
 * dc->topic. */
static pulse_status_t delete_topic_cursor_cb(void *ctx, const char *key, size_t klen, const char *val, size_t vlen)
{
    struct delete_ctx *dc = ctx;
    const char *end = key + klen;
    const char *c = key + 7; /* after "cursor/" */
    const char *t;
    const char *slash;
    size_t tlen = strlen(dc->topic);

    (void)val;
    (void)vlen;
    slash = memchr(c, '/', (size_t)(end - c));
    if (slash == NULL)
        return PULSE_OK;
    t = slash + 1;
    slash = memchr(t, '/', (size_t)(end - t));
    if (slash == NULL)
        return PULSE_OK;
    if ((size_t)(slash - t) == tlen && memcmp(t, dc->topic, tlen) == 0) {
        leveldb_writebatch_delete(dc->wb, key, klen);
        dc->count++;
    }
    return PULSE_OK;
}

pulse_status_t pulse_meta_topic_delete(struct pulse_meta *meta, const char *name, size_t *cursors_out)
{
    pulse_status_t st = PULSE_OK;
    struct delete_ctx dc = {0};
    char key[KEY_MAX];
    size_t klen;

    if (!name_ok(name) || !key_fmt(key, &klen, "partition/%s/", name))
        return PULSE_INVALID;
    dc.wb = leveldb_writebatch_create();
    dc.topic = name;
    /* The trailing '/' keeps "orders" from matching "orders2". */
    st = scan_prefix(meta, key, delete_all_cb, &dc);
    if (st != PULSE_OK)
        goto out;
    dc.count = 0;
    st = scan_prefix(meta, "cursor/", delete_topic_cursor_cb, &dc);
    if (st != PULSE_OK)
        goto out;
    if (!key_fmt(key, &klen, "topic/%s", name)) {
        st = PULSE_INVALID;
        goto out;
    }
    leveldb_writebatch_delete(dc.wb, key, klen);
    /* One sync batch: the topic, its partitions and its cursors go together,
     * so a crash never leaves a half-deleted topic visible. */
    st = write_batch(meta, dc.wb, "topic delete");
    if (st == PULSE_OK && cursors_out != NULL)
        *cursors_out = dc.count;
out:
    leveldb_writebatch_destroy(dc.wb);
    return st;
}

static pulse_status_t count_cb(void *ctx, const char *key, size_t klen, const char *val, size_t vlen)
{
    (void)key;
    (void)klen;
    (void)val;
    (void)vlen;
    (*(uint32_t *)ctx)++;
    return PULSE_OK;
}

pulse_status_t pulse_meta_partition_count(struct pulse_meta *meta, const char *name, uint32_t *n_out)
{
    char key[KEY_MAX];
    size_t klen;
    uint32_t n = 0;
    pulse_status_t st;

    if (!name_ok(name) || !key_fmt(key, &klen, "partition/%s/", name))
        return PULSE_INVALID;
    st = scan_prefix(meta, key, count_cb, &n);
    if (st == PULSE_OK)
        *n_out = n;
    return st;
}

/* ---- cursors --------------------------------------------------------- */

static pulse_status_t count64_cb(void *ctx, const char *key, size_t klen, const char *val, size_t vlen)
{
    (void)key;
    (void)klen;
    (void)val;
    (void)vlen;
    (*(uint64_t *)ctx)++;
    return PULSE_OK;
}

pulse_status_t pulse_meta_cursor_count(struct pulse_meta *meta, uint64_t *n_out)
{
    uint64_t n = 0;
    pulse_status_t st = scan_prefix(meta, "cursor/", count64_cb, &n);

    if (st == PULSE_OK)
        *n_out = n;
    return st;
}

pulse_status_t pulse_meta_cursor_put(struct pulse_meta *meta, const char *consumer,
                                     const struct pulse_meta_cursor *cursors, size_t n)
{
    struct pulse_meta_cursor_set set = {consumer, cursors, n};

    return pulse_meta_cursor_put_sets(meta, &set, 1);
}

pulse_status_t pulse_meta_cursor_put_sets(struct pulse_meta *meta, const struct pulse_meta_cursor_set *sets,
                                          size_t nsets)
{
    pulse_status_t st = PULSE_OK;
    leveldb_writebatch_t *wb;
    char key[KEY_MAX];
    size_t klen;
    uint8_t be[8];

    if (sets == NULL || nsets == 0)
        return PULSE_INVALID;
    for (size_t s = 0; s < nsets; s++)
        if (!name_ok(sets[s].consumer) || sets[s].cursors == NULL || sets[s].n == 0)
            return PULSE_INVALID;
    wb = leveldb_writebatch_create();
    for (size_t s = 0; s < nsets; s++) {
        const struct pulse_meta_cursor *cursors = sets[s].cursors;
        for (size_t i = 0; i < sets[s].n; i++) {
            if (!name_ok(cursors[i].topic) || cursors[i].offset < 0 ||
                !key_fmt(key, &klen, "cursor/%s/%s/%" PRIu32, sets[s].consumer, cursors[i].topic,
                         cursors[i].partition)) {
                st = PULSE_INVALID;
                goto out;
            }
            pulse_put_be64(be, (uint64_t)cursors[i].offset);
            leveldb_writebatch_put(wb, key, klen, (const char *)be, sizeof be);
        }
    }
    /* Every set in one sync batch: all or none, and one fdatasync of the
     * metadata log for all of them. Within the batch a later put of the
     * same key wins, so sets keep the order they were given in. */
    st = write_batch(meta, wb, "cursor commit");
out:
    leveldb_writebatch_destroy(wb);
    return st;
}

uint64_t pulse_meta_sync_writes(const struct pulse_meta *meta)
{
    return atomic_load(&meta->sync_writes);
}

static pulse_status_t cursor_value(const char *val, size_t vlen, int64_t *offset_out)
{
    int64_t off;

    if (vlen != 8)
        return PULSE_CORRUPT;
    off = (int64_t)pulse_get_be64((const uint8_t *)val);
    if (off < 0)
        return PULSE_CORRUPT;
    *offset_out = off;
    return PULSE_OK;
}

pulse_status_t pulse_meta_cursor_get(struct pulse_meta *meta, const char *consumer, const char *topic,
                                     uint32_t partition, int64_t *offset_out)
{
    pulse_status_t st;
    char key[KEY_MAX];
    size_t klen;
    char *val = NULL;
    size_t vlen = 0;

    if (!name_ok(consumer) || !name_ok(topic) ||
        !key_fmt(key, &klen, "cursor/%s/%s/%" PRIu32, consumer, topic, partition))
        return PULSE_NOT_FOUND;
    st = get_raw(meta, key, klen, &val, &vlen);
    if (st != PULSE_OK)
        goto out;
    if (val == NULL) {
        st = PULSE_NOT_FOUND;
        goto out;
    }
    st = cursor_value(val, vlen, offset_out);
    if (st != PULSE_OK)
        PULSE_ERROR("meta: cursor %s is malformed", key);
out:
    leveldb_free(val);
    return st;
}

struct cursor_list_ctx {
    size_t prefix_len;
    struct pulse_meta_cursor *items;
    size_t n;
    size_t cap;
};

/* Parses "<topic>/<decimal partition>" (the key after the consumer). */
static bool parse_topic_partition(const char *s, size_t len, struct pulse_meta_cursor *out)
{
    const char *slash = NULL;
    uint64_t p = 0;
    size_t tlen;

    for (size_t i = len; i > 0; i--) {
        if (s[i - 1] == '/') {
            slash = s + i - 1;
            break;
        }
    }
    if (slash == NULL)
        return false;
    tlen = (size_t)(slash - s);
    if (tlen == 0 || tlen > PULSE_META_NAME_MAX || memchr(s, '/', tlen) != NULL)
        return false;
    const char *d = slash + 1;
    size_t dlen = len - tlen - 1;
    if (dlen == 0 || dlen > 10)
        return false;
    for (size_t i = 0; i < dlen; i++) {
        if (d[i] < '0' || d[i] > '9')
            return false;
        p = p * 10 + (uint64_t)(d[i] - '0');
    }
    if (p > UINT32_MAX)
        return false;
    memcpy(out->topic, s, tlen);
    out->topic[tlen] = '\0';
    out->partition = (uint32_t)p;
    return true;
}

static pulse_status_t cursor_list_cb(void *ctx, const char *key, size_t klen, const char *val, size_t vlen)
{
    struct cursor_list_ctx *cl = ctx;

    if (cl->n == cl->cap) {
        size_t ncap = cl->cap ? cl->cap * 2 : 16;
        struct pulse_meta_cursor *items = pulse_realloc(cl->items, ncap * sizeof *items);
        if (items == NULL)
            return PULSE_NOMEM;
        cl->items = items;
        cl->cap = ncap;
    }
    if (!parse_topic_partition(key + cl->prefix_len, klen - cl->prefix_len, &cl->items[cl->n]) ||
        cursor_value(val, vlen, &cl->items[cl->n].offset) != PULSE_OK) {
        PULSE_ERROR("meta: cursor record %.*s is malformed", (int)(klen > 600 ? 600 : klen), key);
        return PULSE_CORRUPT;
    }
    cl->n++;
    return PULSE_OK;
}

static int cursor_cmp(const void *a, const void *b)
{
    const struct pulse_meta_cursor *x = a;
    const struct pulse_meta_cursor *y = b;
    int c = strcmp(x->topic, y->topic);

    if (c != 0)
        return c;
    return x->partition < y->partition ? -1 : x->partition > y->partition;
}

pulse_status_t pulse_meta_cursor_list(struct pulse_meta *meta, const char *consumer, struct pulse_meta_cursor **out,
                                      size_t *n_out)
{
    struct cursor_list_ctx cl = {0};
    char key[KEY_MAX];
    size_t klen;
    pulse_status_t st;

    *out = NULL;
    *n_out = 0;
    if (!name_ok(consumer) || !key_fmt(key, &klen, "cursor/%s/", consumer))
        return PULSE_OK;
    cl.prefix_len = klen;
    st = scan_prefix(meta, key, cursor_list_cb, &cl);
    if (st != PULSE_OK) {
        pulse_free(cl.items);
        return st;
    }
    /* Key order puts partition "10" before "2" and "a.b" before "a": sort
     * into the documented order. */
    if (cl.n > 1)
        qsort(cl.items, cl.n, sizeof *cl.items, cursor_cmp);
    if (cl.n == 0) {
        pulse_free(cl.items);
        cl.items = NULL;
    }
    *out = cl.items;
    *n_out = cl.n;
    return PULSE_OK;
}

/* cursor_list_cb for a key of any consumer: the topic starts after
 * "cursor/<consumer>/". */
static pulse_status_t any_cursor_cb(void *ctx, const char *key, size_t klen, const char *val, size_t vlen)
{
    struct cursor_list_ctx *cl = ctx;
    const char *slash = klen > 7 ? memchr(key + 7, '/', klen - 7) : NULL;

    if (slash == NULL) {
        PULSE_ERROR("meta: cursor record %.*s is malformed", (int)(klen > 600 ? 600 : klen), key);
        return PULSE_CORRUPT;
    }
    cl->prefix_len = (size_t)(slash - key) + 1;
    return cursor_list_cb(ctx, key, klen, val, vlen);
}

/* By topic, then partition, then the highest offset first. */
static int cursor_cmp_highest(const void *a, const void *b)
{
    const struct pulse_meta_cursor *x = a;
    const struct pulse_meta_cursor *y = b;
    int c = cursor_cmp(a, b);

    if (c != 0)
        return c;
    return x->offset > y->offset ? -1 : x->offset < y->offset;
}

pulse_status_t pulse_meta_cursor_highest(struct pulse_meta *meta, struct pulse_meta_cursor **out, size_t *n_out)
{
    struct cursor_list_ctx cl = {0};
    size_t k = 0;
    pulse_status_t st;

    *out = NULL;
    *n_out = 0;
    st = scan_prefix(meta, "cursor/", any_cursor_cb, &cl);
    if (st != PULSE_OK) {
        pulse_free(cl.items);
        return st;
    }
    if (cl.n > 1)
        qsort(cl.items, cl.n, sizeof *cl.items, cursor_cmp_highest);
    for (size_t i = 0; i < cl.n; i++) {
        if (k > 0 && cursor_cmp(&cl.items[k - 1], &cl.items[i]) == 0)
            continue;
        cl.items[k++] = cl.items[i];
    }
    if (k == 0) {
        pulse_free(cl.items);
        cl.items = NULL;
    }
    *out = cl.items;
    *n_out = k;
    return PULSE_OK;
}

struct name_list_ctx {
    char **names;
    size_t n;
    size_t cap;
};

static pulse_status_t consumer_list_cb(void *ctx, const char *key, size_t klen, const char *val, size_t vlen)
{
    struct name_list_ctx *nl = ctx;
    const char *c = key + 7;
    const char *slash;
    size_t clen;

    (void)val;
    (void)vlen;
    slash = memchr(c, '/', klen - 7);
    if (slash == NULL)
        return PULSE_OK;
    clen = (size_t)(slash - c);
    if (clen == 0 || clen > PULSE_META_NAME_MAX)
        return PULSE_OK;
    /* Keys of one consumer are adjacent, so comparing with the last name
     * is enough to de-duplicate. */
    if (nl->n > 0 && strlen(nl->names[nl->n - 1]) == clen && memcmp(nl->names[nl->n - 1], c, clen) == 0)
        return PULSE_OK;
    if (nl->n == nl->cap) {
        size_t ncap = nl->cap ? nl->cap * 2 : 16;
        char **names = pulse_realloc(nl->names, ncap * sizeof *names);
        if (names == NULL)
            return PULSE_NOMEM;
        nl->names = names;
        nl->cap = ncap;
    }
    nl->names[nl->n] = pulse_strndup(c, clen);
    if (nl->names[nl->n] == NULL)
        return PULSE_NOMEM;
    nl->n++;
    return PULSE_OK;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

pulse_status_t pulse_meta_consumer_list(struct pulse_meta *meta, char ***names_out, size_t *n_out)
{
    struct name_list_ctx nl = {0};
    pulse_status_t st;

    st = scan_prefix(meta, "cursor/", consumer_list_cb, &nl);
    if (st != PULSE_OK) {
        pulse_meta_names_free(nl.names, nl.n);
        return st;
    }
    /* "a.b/" sorts before "a/" in key order; sort by name. */
    if (nl.n > 1)
        qsort(nl.names, nl.n, sizeof *nl.names, name_cmp);
    if (nl.n == 0) {
        pulse_free(nl.names);
        nl.names = NULL;
    }
    *names_out = nl.names;
    *n_out = nl.n;
    return PULSE_OK;
}

void pulse_meta_names_free(char **names, size_t n)
{
    if (names == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        pulse_free(names[i]);
    pulse_free(names);
}

pulse_status_t pulse_meta_consumer_delete(struct pulse_meta *meta, const char *consumer)
{
    pulse_status_t st;
    struct delete_ctx dc = {0};
    char key[KEY_MAX];
    size_t klen;

    if (!name_ok(consumer) || !key_fmt(key, &klen, "cursor/%s/", consumer))
        return PULSE_INVALID;
    dc.wb = leveldb_writebatch_create();
    st = scan_prefix(meta, key, delete_all_cb, &dc);
    if (st == PULSE_OK && dc.count > 0)
        st = write_batch(meta, dc.wb, "consumer delete");
    leveldb_writebatch_destroy(dc.wb);
    return st;
}
