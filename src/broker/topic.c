/* SPDX-License-Identifier: MIT */
/*
 * topic.c - topics: the name rule, the in-memory name map with reference
 * counts, and the crash-safe create, retention change and delete.
 *
 * Create order: <topics>/<name> is made with a durable "creating" marker
 * in it, then the partition directories and topic.json (the directory's own
 * copy of the definition, datadir.c), the logs are opened, and only then
 * the metadata (topic + partitions) committed in one sync batch; the marker
 * is removed after the commit. A crash before the batch leaves a directory
 * with the marker and no metadata, which the next start removes; a crash
 * after it leaves a complete topic (a marker beside metadata is just
 * removed, and so is one beside records, which prove the commit). A commit
 * that fails may still take effect later (meta.h "Failed writes"), so the
 * undo is a metadata delete written after it; if even that fails, the
 * directory keeps its marker and the store decides at the next start.
 *
 * Delete order: a durable "deleting" marker first (the decision: from then
 * on the delete completes, at the next start if not now), then the metadata
 * (topic, partitions, the topic's cursors) in one sync batch; the directory
 * is then renamed aside to <data>/topics/__deleted-<nonce> (names cannot
 * start with "__", so the aside name never collides with a topic), the
 * parent fsynced, and the tree removed. Only a directory that positively
 * records an unfinished create or delete (a marker, or the aside name) is
 * ever removed at start: a directory without metadata but with a valid
 * topic.json and no marker is a topic the store lost, and is adopted. So a
 * deleted topic never comes back, a recreated name never sees old data, and
 * a lost store never deletes a topic.
 *
 * A delete that fails: only while the marker is surely absent (it could not
 * be written, and removing whatever part of it landed worked) is the topic
 * put back and the error returned. Once the marker may be durable the next
 * start may delete the topic, so it is never served again, whatever fails
 * next: if the metadata batch fails (its outcome unknown until the store is
 * reopened), the topic stays off the map on the dying list, "stalled", its
 * logs closed and its name reserved; the caller is told the topic is
 * deleted (the marker decided it), the next create of the name tries the
 * rest again and answers the store's error while it still fails, and the
 * next start finishes it in any case.
 *
 * No caller ever waits for another's admin work (admin.h). Creates run one
 * at a time on the admin thread, the only thread that adds topics, which is
 * what makes "two concurrent creates of one name: exactly one wins" hold. A
 * delete is two steps: on the committer thread the topic moves from the map
 * to the dying list (so from then on no lookup, publish or cursor commit
 * finds it); on the admin thread, once its last user has let go, the
 * metadata batch, the close, the rename and the removal above. The dying
 * list reserves the name: a create of it waits until the directory has been
 * renamed aside, so it never reuses a directory an old log still writes to.
 */
#include "broker/broker.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/admin.h"
#include "broker/broker_int.h"
#include "broker/syncpool.h"
#include "common/debug.h"
#include "common/status.h"
#include "common/failpoint.h"
#include "storage/compact.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "meta/meta.h"
#include "common/fsio.h"

_Static_assert(PULSE_NAME_MAX == PULSE_META_NAME_MAX, "name limits of broker and meta differ");

void pulse_broker_no_partition_message(char *errbuf, size_t errlen, const char *prefix, const char *topic,
                                       int64_t partition, uint32_t partitions)
{
    const char *p = prefix != NULL ? prefix : "";
    if (partitions == 0)
        pulse_errbuf_set(errbuf, errlen, "%stopic \"%s\" has no partition %lld", p, topic, (long long)partition);
    else if (partitions == 1)
        pulse_errbuf_set(errbuf, errlen, "%stopic \"%s\" has no partition %lld; its only partition is 0", p, topic,
                         (long long)partition);
    else
        pulse_errbuf_set(errbuf, errlen, "%stopic \"%s\" has no partition %lld; its partitions are 0 to %lu", p, topic,
                         (long long)partition, (unsigned long)partitions - 1);
}

/* ---- the name map ---------------------------------------------------- */

/* Index of name in the sorted map, or where it would go (*found false).
 * Caller holds map_lock. */
static size_t map_find(struct pulse_local *b, const char *name, bool *found)
{
    size_t lo = 0, hi = b->ntopics;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(b->topics[mid]->name, name);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

struct pulse_broker_topic *pulse_broker_topic_acquire(struct pulse_local *b, const char *name)
{
    struct pulse_broker_topic *t = NULL;
    bool found;
    size_t i;

    if (name == NULL)
        return NULL;
    pthread_rwlock_rdlock(&b->map_lock);
    i = map_find(b, name, &found);
    if (found) {
        t = b->topics[i];
        atomic_fetch_add(&t->refs, 1);
    }
    pthread_rwlock_unlock(&b->map_lock);
    return t;
}

void pulse_broker_topic_release(struct pulse_local *b, struct pulse_broker_topic *t)
{
    if (t == NULL)
        return;
    /* Only the admin thread waits for a count to drop (to 1, the dying
     * list's); wake it when this was the last other reference. t must not
     * be touched after the decrement (the admin thread may free it at once),
     * so the check reads the broker's count of dying topics. Either that
     * load sees the delete's increment, or the admin thread's later look at
     * refs (under its mutex, after it took the delete) sees this decrement
     * (sequentially consistent atomics). */
    int refs = atomic_fetch_sub(&t->refs, 1);
    PULSE_ASSERT(refs >= 2); /* the caller's and the list's (or dying list's) */
    if (refs == 2 && atomic_load(&b->deleting) > 0)
        pulse_broker_admin_wake(b->admin);
}

struct pulse_broker_topic *pulse_broker_topic_acquire_next(struct pulse_local *b, const char *after)
{
    struct pulse_broker_topic *t = NULL;
    bool found;
    size_t i;

    pthread_rwlock_rdlock(&b->map_lock);
    i = map_find(b, after, &found);
    if (found)
        i++;
    if (i < b->ntopics) {
        t = b->topics[i];
        atomic_fetch_add(&t->refs, 1);
    }
    pthread_rwlock_unlock(&b->map_lock);
    return t;
}

/* Whether a create may take name: PULSE_OK (free), PULSE_EXISTS (a live
 * topic) or PULSE_BUSY (a delete of it has not finished; *stalled gets the
 * topic when that delete is stalled, else NULL). One map_lock hold sees
 * both the map and the dying list, and a delete moves a topic from one to
 * the other under that lock, so a name is never seen free while its
 * directory is still in use. Free stays free, and a stalled topic stays on
 * the dying list, until the caller (the admin thread, the only one that
 * adds topics or finishes deletes) acts. */
static pulse_status_t name_state(struct pulse_local *b, const char *name, struct pulse_broker_topic **stalled)
{
    pulse_status_t st = PULSE_OK;
    bool found;

    *stalled = NULL;
    pthread_rwlock_rdlock(&b->map_lock);
    (void)map_find(b, name, &found);
    if (found)
        st = PULSE_EXISTS;
    for (struct pulse_broker_topic *d = b->dying; d != NULL && st == PULSE_OK; d = d->dying_next) {
        if (strcmp(d->name, name) == 0) {
            st = PULSE_BUSY;
            if (atomic_load(&d->delete_stalled))
                *stalled = d;
        }
    }
    pthread_rwlock_unlock(&b->map_lock);
    return st;
}

/* Takes t off the dying list: its name is free again. */
static void dying_remove(struct pulse_local *b, struct pulse_broker_topic *t)
{
    pthread_rwlock_wrlock(&b->map_lock);
    for (struct pulse_broker_topic **pp = &b->dying; *pp != NULL; pp = &(*pp)->dying_next) {
        if (*pp == t) {
            *pp = t->dying_next;
            break;
        }
    }
    t->dying_next = NULL;
    pthread_rwlock_unlock(&b->map_lock);
    atomic_fetch_sub(&b->deleting, 1);
}

pulse_status_t pulse_broker_topic_snapshot(struct pulse_local *b, struct pulse_broker_topic ***out, size_t *n_out)
{
    struct pulse_broker_topic **list = NULL;
    size_t n;

    pthread_rwlock_rdlock(&b->map_lock);
    n = b->ntopics;
    if (n > 0) {
        list = pulse_malloc(n * sizeof *list);
        if (list == NULL) {
            pthread_rwlock_unlock(&b->map_lock);
            return PULSE_NOMEM;
        }
        for (size_t i = 0; i < n; i++) {
            list[i] = b->topics[i];
            atomic_fetch_add(&list[i]->refs, 1);
        }
    }
    pthread_rwlock_unlock(&b->map_lock);
    *out = list;
    *n_out = n;
    return PULSE_OK;
}

/* Allocates t->plogs (and t->compactors for a compacted topic) for
 * t->nparts partitions; t->cleanup must be set. */
static pulse_status_t alloc_parts(struct pulse_broker_topic *t)
{
    t->plogs = pulse_calloc(t->nparts, sizeof *t->plogs);
    if (t->plogs == NULL)
        return PULSE_NOMEM;
    if (t->cleanup != PULSE_CLEANUP_COMPACT)
        return PULSE_OK;
    t->compactors = pulse_calloc(t->nparts, sizeof *t->compactors);
    if (t->compactors == NULL)
        return PULSE_NOMEM; /* topic_destroy frees what was allocated */
    for (uint32_t p = 0; p < t->nparts; p++) {
        pulse_status_t st = pulse_compact_create(&t->compactors[p]);
        if (st != PULSE_OK)
            return st;
    }
    return PULSE_OK;
}

/* Closes one partition log (syncing it, and writing its snapshot when its
 * durable state moved) and forgets it; a failure is logged with its cause
 * and returned. */
static pulse_status_t close_one(struct pulse_broker_topic *t, uint32_t p)
{
    pulse_status_t st = pulse_plog_close(t->plogs[p]);
    if (st != PULSE_OK && t->plogs[p] != NULL)
        PULSE_WARN("topic %s partition %" PRIu32 ": close: %s", t->name, p, pulse_status_message(st));
    t->plogs[p] = NULL;
    return st;
}

/* Closes the partition logs (syncing them and writing their snapshots). */
static void close_logs(struct pulse_broker_topic *t)
{
    if (t->plogs == NULL)
        return;
    for (uint32_t p = 0; p < t->nparts; p++)
        (void)close_one(t, p);
}

/* The partition logs of a stop, one slot each, in (topic, partition)
 * order; each slot is closed by exactly one item of the pool's run. */
struct close_slot {
    struct pulse_broker_topic *t;
    uint32_t p;
    pulse_status_t st;
};

static void close_item(void *arg, size_t k)
{
    struct close_slot *s = &((struct close_slot *)arg)[k];

    s->st = close_one(s->t, s->p);
}

pulse_status_t pulse_broker_topic_close_all(struct pulse_broker_topic **topics, size_t n)
{
    struct close_slot *slots;
    struct pulse_syncpool *pool;
    pulse_status_t st = PULSE_OK;
    size_t parts = 0, k = 0;

    for (size_t i = 0; i < n; i++)
        parts += topics[i]->plogs == NULL ? 0 : topics[i]->nparts;
    slots = pulse_malloc((parts > 0 ? parts : 1) * sizeof *slots);
    if (slots == NULL)
        return PULSE_OK; /* pulse_broker_topic_destroy closes them one by one */
    for (size_t i = 0; i < n; i++)
        for (uint32_t p = 0; topics[i]->plogs != NULL && p < topics[i]->nparts; p++)
            slots[k++] = (struct close_slot){.t = topics[i], .p = p, .st = PULSE_OK};
    /* NULL (too few logs, or no thread): the caller closes them all. */
    pool = pulse_syncpool_for(parts, PULSE_BROKER_CLOSE_SHARE, PULSE_BROKER_CLOSERS);
    pulse_syncpool_run(pool, parts, close_item, slots);
    pulse_syncpool_close(pool);
    for (k = 0; k < parts && st == PULSE_OK; k++)
        st = slots[k].st;
    pulse_free(slots);
    return st;
}

void pulse_broker_topic_destroy(struct pulse_broker_topic *t)
{
    if (t == NULL)
        return;
    close_logs(t);
    if (t->compactors != NULL) {
        for (uint32_t p = 0; p < t->nparts; p++)
            pulse_compact_destroy(t->compactors[p]);
    }
    pulse_free(t->compactors);
    pulse_free(t->plogs);
    pulse_free(t);
}

/* The one constructor of a topic object (start-up and create): def's
 * values, a fresh uid, one reference (the map's once inserted), partition
 * arrays allocated, logs not open yet. PULSE_CORRUPT for a definition out
 * of range (a stored one; a create's spec was checked by resolve_spec). */
static pulse_status_t topic_new(struct pulse_local *b, const struct pulse_meta_topic *def,
                                struct pulse_broker_topic **out)
{
    struct pulse_broker_topic *t;
    pulse_status_t st;

    if (def->partitions < 1 || def->partitions > PULSE_BROKER_MAX_PARTITIONS ||
        def->segment_bytes < (int64_t)PULSE_PLOG_MIN_SEGMENT_BYTES ||
        def->segment_bytes > (int64_t)PULSE_PLOG_MAX_SEGMENT_BYTES)
        return PULSE_CORRUPT;
    t = pulse_calloc(1, sizeof *t);
    if (t == NULL)
        return PULSE_NOMEM;
    memcpy(t->name, def->name, sizeof t->name);
    t->uid = atomic_fetch_add(&b->topic_uids, 1) + 1;
    t->nparts = def->partitions;
    t->cleanup = def->cleanup == 1 ? PULSE_CLEANUP_COMPACT : PULSE_CLEANUP_DELETE;
    atomic_init(&t->retention_ms, def->retention_ms);
    atomic_init(&t->retention_bytes, def->retention_bytes);
    atomic_init(&t->compression, def->compression == 1 ? PULSE_COMPRESSION_ZLIB : PULSE_COMPRESSION_NONE);
    t->segment_bytes = def->segment_bytes;
    t->created_at_ms = def->created_at_ms;
    atomic_init(&t->refs, 1);
    st = alloc_parts(t);
    if (st != PULSE_OK) {
        pulse_broker_topic_destroy(t);
        return st;
    }
    *out = t;
    return PULSE_OK;
}

/* Makes room for one more topic in the map, so that the insert after a
 * create's commit cannot fail. Locks: map_lock (write), briefly. */
static pulse_status_t map_reserve(struct pulse_local *b)
{
    pulse_status_t st = PULSE_OK;

    pthread_rwlock_wrlock(&b->map_lock);
    if (b->ntopics == b->topics_cap) {
        size_t ncap = b->topics_cap ? b->topics_cap * 2 : 16;
        struct pulse_broker_topic **nt = pulse_realloc(b->topics, ncap * sizeof *nt);
        if (nt == NULL) {
            st = PULSE_NOMEM;
        } else {
            b->topics = nt;
            b->topics_cap = ncap;
        }
    }
    pthread_rwlock_unlock(&b->map_lock);
    return st;
}

/* Inserts t in name order; map_reserve made room (only the admin thread, or
 * the opener before it runs, inserts, so nobody took it meanwhile). Locks:
 * map_lock (write), briefly. */
static void map_insert(struct pulse_local *b, struct pulse_broker_topic *t)
{
    bool found;
    size_t i;

    pthread_rwlock_wrlock(&b->map_lock);
    i = map_find(b, t->name, &found);
    memmove(&b->topics[i + 1], &b->topics[i], (b->ntopics - i) * sizeof *b->topics);
    b->topics[i] = t;
    b->ntopics++;
    pthread_rwlock_unlock(&b->map_lock);
}

pulse_status_t pulse_broker_topic_add(struct pulse_local *b, const struct pulse_meta_topic *def,
                                      struct pulse_broker_topic **out, char *errbuf, size_t errlen)
{
    struct pulse_broker_topic *t = NULL;
    pulse_status_t st = topic_new(b, def, &t);

    if (st == PULSE_CORRUPT)
        pulse_errbuf_set(errbuf, errlen, "topic %s has an invalid stored definition", def->name);
    if (st != PULSE_OK)
        return st;
    st = map_reserve(b);
    if (st != PULSE_OK) {
        pulse_broker_topic_destroy(t);
        return st;
    }
    /* In the map from here on: closed with the broker if its logs fail. */
    map_insert(b, t);
    *out = t;
    return PULSE_OK;
}

/* ---- info ------------------------------------------------------------ */

static pulse_status_t make_info(struct pulse_broker_topic *t, bool with_stats, struct pulse_topic_info **out)
{
    struct pulse_topic_info *info = pulse_calloc(1, sizeof *info);

    if (info == NULL)
        return PULSE_NOMEM;
    memcpy(info->name, t->name, sizeof info->name);
    info->partitions = t->nparts;
    info->cleanup = t->cleanup;
    info->retention_ms = atomic_load(&t->retention_ms);
    info->retention_bytes = atomic_load(&t->retention_bytes);
    info->compression = (enum pulse_compression)atomic_load(&t->compression);
    info->segment_bytes = t->segment_bytes;
    info->created_at_ms = t->created_at_ms;
    if (with_stats) {
        info->stats = pulse_calloc(t->nparts, sizeof *info->stats);
        if (info->stats == NULL) {
            pulse_free(info);
            return PULSE_NOMEM;
        }
        for (uint32_t p = 0; p < t->nparts; p++) {
            struct pulse_plog_stats ps;
            pulse_plog_get_stats(t->plogs[p], &ps);
            info->stats[p].partition = p;
            info->stats[p].log_start_offset = ps.log_start;
            info->stats[p].high_watermark = ps.high_watermark;
            info->stats[p].size_bytes = ps.size_bytes;
            info->stats[p].segments = ps.segments;
        }
    }
    *out = info;
    return PULSE_OK;
}

pulse_status_t pulse_local_topic_get(struct pulse_broker *base, const char *name, bool with_stats,
                                     struct pulse_topic_info **out)
{
    struct pulse_local *b = pulse_local_of(base);
    struct pulse_broker_topic *t = pulse_broker_topic_acquire(b, name);
    pulse_status_t st;

    if (t == NULL)
        return PULSE_TOPIC_NOT_FOUND;
    st = make_info(t, with_stats, out);
    pulse_broker_topic_release(b, t);
    return st;
}

pulse_status_t pulse_local_topic_list(struct pulse_broker *base, bool with_stats, struct pulse_topic_info ***out,
                                      size_t *n_out)
{
    struct pulse_local *b = pulse_local_of(base);
    pulse_status_t st = PULSE_OK;
    struct pulse_broker_topic **list = NULL;
    struct pulse_topic_info **infos = NULL;
    size_t n = 0, done = 0;

    st = pulse_broker_topic_snapshot(b, &list, &n);
    if (st != PULSE_OK)
        return st;
    if (n > 0) {
        infos = pulse_calloc(n, sizeof *infos);
        if (infos == NULL) {
            st = PULSE_NOMEM;
            goto out;
        }
    }
    for (; done < n; done++) {
        st = make_info(list[done], with_stats, &infos[done]);
        if (st != PULSE_OK)
            goto out;
    }
    *out = infos;
    *n_out = n;
    infos = NULL;
out:
    pulse_topic_info_list_free(infos, done);
    for (size_t i = 0; i < n; i++)
        pulse_broker_topic_release(b, list[i]);
    pulse_free(list);
    return st;
}

/* ---- create ---------------------------------------------------------- */

static pulse_status_t resolve_spec(struct pulse_local *b, const struct pulse_topic_spec *spec,
                                   struct pulse_meta_topic *def, char *errbuf, size_t errlen)
{
    memset(def, 0, sizeof *def);
    if (spec == NULL || !pulse_broker_cname_valid(spec->name)) {
        pulse_errbuf_set(errbuf, errlen,
                         "topic name must be 1 to 249 characters of [A-Za-z0-9._-], not \".\" or \"..\", "
                         "and must not begin with \"__\"");
        return PULSE_INVALID_NAME;
    }
    memcpy(def->name, spec->name, strlen(spec->name) + 1);
    int64_t parts = spec->partitions < 0 ? (int64_t)b->cfg.default_partitions : spec->partitions;
    if (parts < 1 || parts > PULSE_BROKER_MAX_PARTITIONS) {
        pulse_errbuf_set(errbuf, errlen, "partitions must be between 1 and %d", PULSE_BROKER_MAX_PARTITIONS);
        return PULSE_INVALID;
    }
    def->partitions = (uint32_t)parts;
    if (spec->cleanup < 0)
        def->cleanup = PULSE_CLEANUP_DELETE;
    else if (spec->cleanup == PULSE_CLEANUP_DELETE || spec->cleanup == PULSE_CLEANUP_COMPACT)
        def->cleanup = spec->cleanup;
    else {
        pulse_errbuf_set(errbuf, errlen, "cleanup must be \"delete\" or \"compact\"");
        return PULSE_INVALID;
    }
    if (spec->compression > PULSE_COMPRESSION_ZLIB) {
        pulse_errbuf_set(errbuf, errlen, "compression must be \"none\" or \"zlib\"");
        return PULSE_INVALID;
    }
    def->compression = spec->compression == PULSE_COMPRESSION_ZLIB ? 1 : 0;
    def->retention_ms = spec->retention_ms < 0 ? b->cfg.default_retention_ms : spec->retention_ms;
    def->retention_bytes = spec->retention_bytes < 0 ? b->cfg.default_retention_bytes : spec->retention_bytes;
    if (def->retention_ms < 0 || def->retention_bytes < 0) {
        pulse_errbuf_set(errbuf, errlen, "retention_ms and retention_bytes must be >= 0");
        return PULSE_INVALID;
    }
    def->segment_bytes = spec->segment_bytes < 0 ? (int64_t)b->cfg.segment_max_bytes : spec->segment_bytes;
    if (def->segment_bytes < (int64_t)PULSE_PLOG_MIN_SEGMENT_BYTES ||
        def->segment_bytes > (int64_t)PULSE_PLOG_MAX_SEGMENT_BYTES) {
        pulse_errbuf_set(errbuf, errlen, "segment_bytes must be between %llu and %llu", PULSE_PLOG_MIN_SEGMENT_BYTES,
                         PULSE_PLOG_MAX_SEGMENT_BYTES);
        return PULSE_INVALID;
    }
    def->created_at_ms = pulse_clock_wall_ms();
    return PULSE_OK;
}

/* Makes <topics>/<name> with its "creating" marker, every partition
 * directory and topic.json, all durable before any metadata names them.
 * The marker is durable before anything else is put in the directory, so a
 * directory with content but without the marker is never an unfinished
 * create (datadir.c relies on it); a crash before the marker leaves an
 * empty directory, which the next start removes. */
static pulse_status_t make_dirs(struct pulse_local *b, const struct pulse_meta_topic *def)
{
    const struct pulse_io *io = pulse_broker_io(b);
    char path[PATH_MAX];
    pulse_status_t st;

    snprintf(path, sizeof path, "%s/%s", b->topics_dir, def->name);
    if (io->mkdir(io, path, 0755) != 0) {
        int e = errno;
        PULSE_ERROR("mkdir %s failed: %s", path, strerror(e));
        return pulse_status_from_errno(e);
    }
    st = pulse_broker_mark_set(b, def->name, PULSE_BROKER_CREATE_MARK);
    if (st != PULSE_OK)
        return st;
    for (uint32_t p = 0; p < def->partitions; p++) {
        snprintf(path, sizeof path, "%s/%s/%" PRIu32, b->topics_dir, def->name, p);
        if (io->mkdir(io, path, 0755) != 0) {
            int e = errno;
            PULSE_ERROR("mkdir %s failed: %s", path, strerror(e));
            return pulse_status_from_errno(e);
        }
    }
    /* topic.json's own write fsyncs the topic directory, which makes the
     * partition directories durable too. */
    st = pulse_broker_topic_file_write(b, def);
    if (st != PULSE_OK)
        return st;
    if (pulse_broker_fsync_dir(b, b->topics_dir) != 0)
        return PULSE_IO;
    return PULSE_OK;
}

/* A directory of this name without metadata, found at create (after a
 * successful start, only a failed create whose cleanup failed leaves one):
 * an unfinished create or delete, or an empty directory, goes; anything
 * else may be data, and the create is refused rather than delete it. */
static pulse_status_t clear_leftover(struct pulse_local *b, const char *name, char *errbuf, size_t errlen)
{
    const struct pulse_io *io = pulse_broker_io(b);
    char path[PATH_MAX];
    char aside[PATH_MAX];
    char mark[PATH_MAX + 16];
    struct stat sb;
    bool marked;

    snprintf(path, sizeof path, "%s/%s", b->topics_dir, name);
    if (io->stat(io, path, true, &sb) != 0)
        return PULSE_OK;
    snprintf(mark, sizeof mark, "%s/%s", path, PULSE_BROKER_CREATE_MARK);
    marked = io->stat(io, mark, false, &sb) == 0;
    snprintf(mark, sizeof mark, "%s/%s", path, PULSE_BROKER_DELETE_MARK);
    marked = marked || io->stat(io, mark, false, &sb) == 0;
    if (!marked) {
        if (io->rmdir(io, path) == 0)
            return PULSE_OK; /* empty */
        pulse_errbuf_set(errbuf, errlen,
                         "directory %s exists without metadata; restart pulsed to adopt it, or move it aside", path);
        return PULSE_EXISTS;
    }
    if (pulse_broker_dir_set_aside(b, name, aside, sizeof aside) != PULSE_OK)
        return PULSE_IO;
    pulse_broker_remove_tree(b, aside);
    pulse_broker_fsync_dir(b, b->topics_dir);
    return PULSE_OK;
}

pulse_status_t pulse_local_topic_create_async(struct pulse_broker *base, const struct pulse_topic_spec *spec,
                                              struct pulse_topic_info **out, pulse_admin_done_fn done, void *arg,
                                              char *errbuf, size_t errlen)
{
    struct pulse_local *b = pulse_local_of(base);
    pulse_status_t st;
    struct pulse_admin_job *job;

    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    job = pulse_broker_admin_job_create(PULSE_ADMIN_CREATE, done, arg);
    if (job == NULL)
        return PULSE_NOMEM;
    st = resolve_spec(b, spec, &job->def, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    job->out = out;
    job->errbuf = errbuf;
    job->errlen = errlen;
    st = pulse_broker_admin_submit(b->admin, job);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "the broker is shutting down");
        goto out;
    }
    job = NULL;
out:
    pulse_broker_admin_job_free(job);
    return st;
}

static pulse_status_t delete_retry(struct pulse_local *b, struct pulse_broker_topic *t);

/*
 * Whether a create of name may go ahead, making it so where it can:
 * PULSE_OK, PULSE_EXISTS, PULSE_BUSY (a delete of the name waits for its
 * topic's last user: run the create again after it), or the error of a
 * stalled delete of the name that still cannot finish (it is tried once
 * more here first). Metadata of a name that is neither live nor dying can
 * only be what a failed create left (its batch took effect after it
 * failed, meta.h "Failed writes"): it is removed. errbuf says why on
 * failure.
 */
static pulse_status_t claim_name(struct pulse_local *b, const char *name, char *errbuf, size_t errlen)
{
    struct pulse_broker_topic *stalled = NULL;
    struct pulse_meta_topic existing;
    pulse_status_t st = name_state(b, name, &stalled);

    if (stalled != NULL) {
        st = delete_retry(b, stalled);
        if (st != PULSE_OK) {
            pulse_errbuf_set(errbuf, errlen,
                             "topic \"%s\" is still being deleted: its metadata cannot be removed yet (%s); the "
                             "delete finishes when the metadata store can be written again, or at the next start",
                             name, pulse_status_message(st));
            return st;
        }
    }
    if (st == PULSE_EXISTS)
        pulse_errbuf_set(errbuf, errlen, "topic \"%s\" already exists", name);
    if (st != PULSE_OK)
        return st;
    st = pulse_meta_topic_get(b->meta, name, &existing);
    if (st == PULSE_NOT_FOUND)
        return PULSE_OK;
    if (st == PULSE_OK) {
        PULSE_WARN("topic %s: removing the metadata an earlier failed create left behind", name);
        st = pulse_meta_topic_delete(b->meta, name, NULL);
    }
    if (st != PULSE_OK)
        pulse_errbuf_set(errbuf, errlen, "cannot check the metadata of topic \"%s\": %s", name,
                         pulse_status_message(st));
    return st;
}

/*
 * The metadata commit of a create failed, yet its batch may still take
 * effect (meta.h "Failed writes"). A delete written after it settles that:
 * true when it went, so the metadata is surely absent and the directory may
 * go. Otherwise the directory stays, with its "creating" marker, and what
 * the store ends up holding decides at the next start (metadata: the
 * create committed and the topic is kept; none: it is removed) or at the
 * next create of the name (claim_name, clear_leftover).
 */
static bool create_undo(struct pulse_local *b, const char *name)
{
    pulse_status_t st = pulse_meta_topic_delete(b->meta, name, NULL);

    if (st == PULSE_OK)
        return true;
    PULSE_ERROR("topic %s: the create failed and its metadata could not be cleaned up either (%s); its directory "
                "stays with its \"%s\" marker: the next start keeps the topic if the failed write took effect after "
                "all, and removes the directory otherwise",
                name, pulse_status_message(st), PULSE_BROKER_CREATE_MARK);
    return false;
}

pulse_status_t pulse_broker_topic_create_run(struct pulse_local *b, const struct pulse_meta_topic *spec_def,
                                             struct pulse_topic_info **out, char *errbuf, size_t errlen)
{
    pulse_status_t st;
    struct pulse_meta_topic def = *spec_def;
    struct pulse_broker_topic *t = NULL;
    bool dirs_made = false;
    char path[PATH_MAX];

    st = claim_name(b, def.name, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    st = clear_leftover(b, def.name, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    st = topic_new(b, &def, &t);
    if (st != PULSE_OK)
        goto out;
    /* Room in the map first: once committed, the topic must be servable. */
    st = map_reserve(b);
    if (st != PULSE_OK)
        goto out;
    dirs_made = true;
    st = make_dirs(b, &def);
    if (st != PULSE_OK)
        goto out;
    pulse_failpoint("topic_create_after_dirs");
    st = pulse_broker_topic_open_logs(b, t, NULL);
    if (st != PULSE_OK)
        goto out;
    /* The commit point: one sync batch with the topic and its partitions. */
    st = pulse_meta_topic_create(b->meta, &def);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "cannot store the metadata of topic \"%s\": %s", def.name,
                         pulse_status_message(st));
        dirs_made = create_undo(b, def.name);
        goto out;
    }
    pulse_failpoint("topic_create_after_meta");
    dirs_made = false;
    /* Committed. A marker left behind (this fails, or a crash) is removed
     * at the next start, which sees the metadata (or, if the store is lost,
     * the records beside it). */
    if (pulse_broker_mark_clear(b, def.name, PULSE_BROKER_CREATE_MARK) != PULSE_OK)
        PULSE_WARN("topic %s: its \"%s\" marker stays until the next start", def.name, PULSE_BROKER_CREATE_MARK);
    map_insert(b, t);
    PULSE_INFO("topic %s created with %" PRIu32 " partition%s", t->name, t->nparts, t->nparts == 1 ? "" : "s");
    if (out != NULL) {
        /* The topic exists now; failing to describe it is not a failed
         * create, but the caller gets no info. */
        if (make_info(t, true, out) != PULSE_OK)
            *out = NULL;
    }
    t = NULL;
out:
    if (t != NULL) {
        pulse_broker_topic_destroy(t);
        /* Set aside before removal: a half-removed tree must never stay
         * under the topic's name (it could lose its marker first). */
        if (dirs_made && pulse_broker_dir_set_aside(b, def.name, path, sizeof path) == PULSE_OK) {
            pulse_broker_remove_tree(b, path);
            pulse_broker_fsync_dir(b, b->topics_dir);
        }
    }
    return st;
}

/* ---- retention ------------------------------------------------------- */

pulse_status_t pulse_local_topic_set_retention_async(struct pulse_broker *base, const char *name, int64_t retention_ms,
                                                     int64_t retention_bytes, struct pulse_topic_info **out,
                                                     pulse_admin_done_fn done, void *arg)
{
    struct pulse_topic_change chg = {retention_ms, retention_bytes, -1};
    return pulse_local_topic_change_async(base, name, &chg, out, done, arg);
}

pulse_status_t pulse_local_topic_change_async(struct pulse_broker *base, const char *name,
                                              const struct pulse_topic_change *chg, struct pulse_topic_info **out,
                                              pulse_admin_done_fn done, void *arg)
{
    struct pulse_local *b = pulse_local_of(base);
    pulse_status_t st;
    struct pulse_admin_job *job;

    if (!pulse_broker_cname_valid(name))
        return PULSE_TOPIC_NOT_FOUND;
    if (chg->compression > PULSE_COMPRESSION_ZLIB)
        return PULSE_INVALID;
    job = pulse_broker_admin_job_create(PULSE_ADMIN_RETENTION, done, arg);
    if (job == NULL)
        return PULSE_NOMEM;
    memcpy(job->name, name, strlen(name) + 1);
    job->retention_ms = chg->retention_ms;
    job->retention_bytes = chg->retention_bytes;
    job->compression = chg->compression < 0 ? -1 : chg->compression;
    job->out = out;
    st = pulse_broker_admin_submit(b->admin, job);
    if (st != PULSE_OK)
        pulse_broker_admin_job_free(job);
    return st;
}

/* On the committer, which also runs every delete's first step: a topic
 * found in the map here is not being deleted, so this put can never
 * rewrite the record of a topic whose delete has committed. */
pulse_status_t pulse_broker_topic_retention_run(struct pulse_local *b, const char *name, int64_t retention_ms,
                                                int64_t retention_bytes, int compression, struct pulse_topic_info **out)
{
    pulse_status_t st;
    struct pulse_broker_topic *t;
    struct pulse_meta_topic def;
    struct pulse_meta_topic old;

    t = pulse_broker_topic_acquire(b, name);
    if (t == NULL) {
        st = PULSE_TOPIC_NOT_FOUND;
        goto out;
    }
    memset(&def, 0, sizeof def);
    memcpy(def.name, t->name, sizeof def.name);
    def.partitions = t->nparts;
    def.cleanup = t->cleanup;
    def.retention_ms = retention_ms >= 0 ? retention_ms : atomic_load(&t->retention_ms);
    def.retention_bytes = retention_bytes >= 0 ? retention_bytes : atomic_load(&t->retention_bytes);
    def.compression = compression >= 0 ? compression : atomic_load(&t->compression);
    def.segment_bytes = t->segment_bytes;
    def.created_at_ms = t->created_at_ms;
    /*
     * Durable first, then visible; and the topic's own file before the
     * store, so that the file is never older than the store. The two can
     * disagree after a crash between the writes (file new, store old: the
     * change was never answered, so applying it at the next start is as
     * right as dropping it), or when the store silently lost the record of
     * an answered change (LevelDB drops a damaged log record). Either way
     * the next start takes the file's retention (datadir.c keep_topic), and
     * a lost store is rebuilt from the file with every answered change.
     * The other order could lose an answered change: store written, then
     * the store's record lost, file old.
     */
    old = def;
    old.retention_ms = atomic_load(&t->retention_ms);
    old.retention_bytes = atomic_load(&t->retention_bytes);
    old.compression = atomic_load(&t->compression);
    st = pulse_broker_topic_file_write(b, &def);
    if (st != PULSE_OK)
        goto out;
    st = pulse_meta_topic_put(b->meta, &def);
    if (st != PULSE_OK) {
        /* Put the file back. If that fails too, the next start applies the
         * change after all (the file wins on retention); the caller got an
         * error for a change that may yet happen, as after a crash. */
        if (pulse_broker_topic_file_write(b, &old) != PULSE_OK)
            PULSE_ERROR("topic %s: the retention change failed but stays in %s; it applies at the next start", def.name,
                        PULSE_BROKER_TOPIC_FILE);
        goto out;
    }
    atomic_store(&t->retention_ms, def.retention_ms);
    atomic_store(&t->retention_bytes, def.retention_bytes);
    atomic_store(&t->compression, def.compression);
    if (out != NULL)
        st = make_info(t, true, out);
out:
    pulse_broker_topic_release(b, t);
    return st;
}

/* ---- delete ---------------------------------------------------------- */

pulse_status_t pulse_local_topic_delete_async(struct pulse_broker *base, const char *name, pulse_admin_done_fn done,
                                              void *arg)
{
    struct pulse_local *b = pulse_local_of(base);
    pulse_status_t st;
    struct pulse_admin_job *job;

    if (!pulse_broker_cname_valid(name))
        return PULSE_TOPIC_NOT_FOUND;
    job = pulse_broker_admin_job_create(PULSE_ADMIN_DELETE, done, arg);
    if (job == NULL)
        return PULSE_NOMEM;
    memcpy(job->name, name, strlen(name) + 1);
    st = pulse_broker_admin_submit(b->admin, job);
    if (st != PULSE_OK)
        pulse_broker_admin_job_free(job);
    return st;
}

pulse_status_t pulse_broker_topic_delete_unmap(struct pulse_local *b, const char *name, struct pulse_broker_topic **out)
{
    struct pulse_broker_topic *t;
    bool found = false;
    size_t i;

    pthread_rwlock_wrlock(&b->map_lock);
    i = map_find(b, name, &found);
    if (!found) {
        pthread_rwlock_unlock(&b->map_lock);
        return PULSE_TOPIC_NOT_FOUND;
    }
    t = b->topics[i];
    memmove(&b->topics[i], &b->topics[i + 1], (b->ntopics - i - 1) * sizeof *b->topics);
    b->ntopics--;
    /* The map's reference is now the dying list's, and the name stays
     * reserved until pulse_broker_topic_delete_finish. Counted before the
     * lock is dropped, so any release that can bring refs to 1 sees it. */
    t->dying_next = b->dying;
    b->dying = t;
    atomic_fetch_add(&b->deleting, 1);
    pthread_rwlock_unlock(&b->map_lock);
    atomic_store(&t->deleted, true);
    pulse_broker_fail_topic(b, t, PULSE_TOPIC_NOT_FOUND);
    *out = t;
    return PULSE_OK;
}

/* The marker could not be written and is surely absent: nothing durable
 * changed, so the topic goes back into the map as it was (its logs were
 * never closed). Publishes and waiters failed meanwhile stay failed; the
 * caller of the delete gets the error. */
static void delete_undo(struct pulse_local *b, struct pulse_broker_topic *t)
{
    /* Between these two steps the name is neither live nor dying, but only
     * this thread (the admin thread) adds topics, so no create can take it. */
    dying_remove(b, t);
    atomic_store(&t->deleted, false);
    if (map_reserve(b) != PULSE_OK) {
        PULSE_ERROR("topic %s: the delete failed and the topic cannot be put back (out of memory); it is served "
                    "again after a restart",
                    t->name);
        pulse_broker_topic_destroy(t);
        return;
    }
    map_insert(b, t);
}

/* A decided delete that cannot finish now: the topic stays on the dying
 * list (its name reserved, never served again) with its logs closed, until
 * delete_retry or the next start finishes it. */
static void delete_stall(struct pulse_broker_topic *t)
{
    close_logs(t);
    atomic_store(&t->delete_stalled, true);
}

/*
 * The steps after the marker: the metadata (topic, partitions, the topic's
 * cursors) in one sync batch, then the logs close and the directory is
 * renamed aside and removed. PULSE_OK once the metadata is gone (t is then
 * freed and its name free); the batch's error when it failed (t stalled).
 */
static pulse_status_t delete_commit(struct pulse_local *b, struct pulse_broker_topic *t)
{
    pulse_status_t st;
    size_t cursors = 0;
    char name[PULSE_NAME_MAX + 1];
    char aside[PATH_MAX];

    memcpy(name, t->name, sizeof name);
    /* It comes after the committer took the topic off the map, so no cursor
     * commit for it can be written after this batch (cursor.c). A failure
     * changes nothing decided: whether or not the failed batch takes effect
     * later (meta.h "Failed writes"), the delete completes. */
    st = pulse_meta_topic_delete(b->meta, name, &cursors);
    if (st != PULSE_OK) {
        PULSE_ERROR("topic %s: the delete is decided (its \"%s\" marker is durable) but its metadata could not be "
                    "removed (%s): the topic is no longer served; the delete finishes at the next create of the "
                    "name once the metadata store can be written, or at the next start",
                    name, PULSE_BROKER_DELETE_MARK, pulse_status_message(st));
        delete_stall(t);
        return st;
    }
    pulse_failpoint("topic_delete_after_meta");

    /* Only the dying list's reference is left (the admin thread checked):
     * no reader is inside the logs. */
    close_logs(t);
    /* Renamed aside first so that the topic's name is free at once and a
     * half-removed tree is never found under it. */
    if (pulse_broker_dir_set_aside(b, name, aside, sizeof aside) != PULSE_OK) {
        PULSE_ERROR("topic %s: its directory is removed at the next start (it carries the \"%s\" marker)", name,
                    PULSE_BROKER_DELETE_MARK);
        dying_remove(b, t);
        pulse_broker_topic_destroy(t);
        return PULSE_OK;
    }
    pulse_failpoint("topic_delete_after_rename");
    /* The directory is out of the way: a create of the name may go. */
    dying_remove(b, t);
    pulse_broker_topic_destroy(t);
    if (pulse_broker_remove_tree(b, aside) != 0)
        PULSE_ERROR("could not remove %s; it is removed at the next start", aside);
    pulse_broker_fsync_dir(b, b->topics_dir);
    PULSE_INFO("topic %s deleted (%zu cursors)", name, cursors);
    return PULSE_OK;
}

/* A stalled delete, once more (the admin thread, at a create of its name):
 * the marker again (it may not have been durable), then the rest. */
static pulse_status_t delete_retry(struct pulse_local *b, struct pulse_broker_topic *t)
{
    pulse_status_t st = pulse_broker_mark_set(b, t->name, PULSE_BROKER_DELETE_MARK);

    if (st != PULSE_OK)
        return st;
    return delete_commit(b, t);
}

pulse_status_t pulse_broker_topic_delete_finish(struct pulse_local *b, struct pulse_broker_topic *t)
{
    pulse_status_t st;

    /* The decision, in the directory itself: from the moment the
     * "deleting" marker is durable the delete completes, now, at a retry
     * or at the next start, whatever the store says. A directory without
     * metadata is otherwise adopted at start (datadir.c), so without the
     * marker a crash between the metadata delete and the rename below would
     * resurrect the topic; with it, such a directory is positively an
     * unfinished delete. */
    st = pulse_broker_mark_set(b, t->name, PULSE_BROKER_DELETE_MARK);
    if (st != PULSE_OK) {
        /* The write failed somewhere between its temp file and the
         * directory fsync: the marker may be there. Only once it is surely
         * gone did nothing change. */
        if (pulse_broker_mark_clear(b, t->name, PULSE_BROKER_DELETE_MARK) == PULSE_OK) {
            delete_undo(b, t);
            return st;
        }
        /* It may be durable, so the next start may delete the topic: it
         * must not take publishes it would then lose. */
        PULSE_ERROR("topic %s: the delete's \"%s\" marker could neither be written nor removed (%s): the topic is "
                    "no longer served; the next start deletes it if the marker is there and serves it again if not",
                    t->name, PULSE_BROKER_DELETE_MARK, pulse_status_message(st));
        delete_stall(t);
        return st;
    }
    pulse_failpoint("topic_delete_after_mark");
    /* Decided: the caller is answered that the topic is deleted even when
     * the rest has to wait (delete_commit says how it finishes). */
    (void)delete_commit(b, t);
    return PULSE_OK;
}
