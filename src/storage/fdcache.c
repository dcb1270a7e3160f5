/* SPDX-License-Identifier: MIT */
/*
 * fdcache.c - the bounded cache of open segment files (see fdcache.h).
 *
 * Method. The cache keeps one mutex, a count of open descriptors (an open()
 * in flight counts already, so concurrent misses cannot overshoot
 * together), and a doubly linked LRU list of the idle files: open, not
 * pinned, not dirty, not retired. The invariant "a file is on the list
 * exactly when it is idle" is restored after every state change, and then,
 * while more descriptors are open than the capacity allows, idle files are
 * taken from the old end of the list. Their descriptors are closed after the
 * mutex is released, as is every open(): a slow file system never stalls
 * another thread's cache hit.
 *
 * A miss marks the file "opening" so that a second pinner of the same file
 * waits for the first open() instead of opening it twice. The descriptor a
 * miss opens is checked against the identity the file had first (fstat
 * outside the mutex, compared under it).
 */
#include "storage/fdcache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/fsio.h"

/* Descriptors closed per batch after the mutex is dropped. */
#define VICTIMS_MAX 32

struct pulse_fdcache {
    pthread_mutex_t mu;
    pthread_cond_t opened; /* an "opening" file finished its open() */
    size_t capacity;
    size_t open;                        /* open descriptors, plus opens in flight */
    size_t idle;                        /* files on the LRU list */
    struct pulse_fdc_file *head, *tail; /* newest, oldest */
    uint64_t hits, opens, evictions, emfile;
};

struct victim {
    const struct pulse_io *io;
    int fd;
};

pulse_status_t pulse_fdcache_create(size_t capacity, struct pulse_fdcache **out)
{
    struct pulse_fdcache *c = pulse_calloc(1, sizeof *c);

    if (c == NULL)
        return PULSE_NOMEM;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->opened, NULL);
    c->capacity = capacity < PULSE_FDCACHE_MIN_CAPACITY ? PULSE_FDCACHE_MIN_CAPACITY : capacity;
    *out = c;
    return PULSE_OK;
}

void pulse_fdcache_destroy(struct pulse_fdcache *cache)
{
    if (cache == NULL)
        return;
    if (cache->open != 0)
        PULSE_ERROR("fdcache: destroyed with %zu descriptors still open", cache->open);
    pthread_cond_destroy(&cache->opened);
    pthread_mutex_destroy(&cache->mu);
    pulse_free(cache);
}

void pulse_fdcache_get_stats(struct pulse_fdcache *cache, struct pulse_fdcache_stats *out)
{
    pthread_mutex_lock(&cache->mu);
    out->capacity = cache->capacity;
    out->open = cache->open;
    out->pinned = cache->open - cache->idle;
    out->hits = cache->hits;
    out->opens = cache->opens;
    out->evictions = cache->evictions;
    out->emfile = cache->emfile;
    pthread_mutex_unlock(&cache->mu);
}

/* ---- list, under mu ------------------------------------------------------ */

static bool is_idle(const struct pulse_fdc_file *f)
{
    return f->fd >= 0 && f->pins == 0 && !f->dirty && !f->retired;
}

static void lru_push(struct pulse_fdcache *c, struct pulse_fdc_file *f)
{
    f->prev = NULL;
    f->next = c->head;
    if (c->head != NULL)
        c->head->prev = f;
    c->head = f;
    if (c->tail == NULL)
        c->tail = f;
    c->idle++;
}

static void lru_remove(struct pulse_fdcache *c, struct pulse_fdc_file *f)
{
    if (f->prev != NULL)
        f->prev->next = f->next;
    else
        c->head = f->next;
    if (f->next != NULL)
        f->next->prev = f->prev;
    else
        c->tail = f->prev;
    f->prev = f->next = NULL;
    c->idle--;
}

/* Takes idle files from the old end while more than target are open. */
static size_t take_victims(struct pulse_fdcache *c, size_t target, struct victim *v)
{
    size_t n = 0;

    while (c->open > target && c->tail != NULL && n < VICTIMS_MAX) {
        struct pulse_fdc_file *f = c->tail;
        lru_remove(c, f);
        v[n].io = f->io;
        v[n].fd = f->fd;
        n++;
        f->fd = -1;
        c->open--;
        c->evictions++;
    }
    return n;
}

static void close_victims(const struct victim *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i].io->close(v[i].io, v[i].fd);
}

/* Puts f on the list if it just became idle, then trims to capacity.
 * Takes the mutex; closes outside it. */
static void settle_unlock(struct pulse_fdcache *c, struct pulse_fdc_file *f, bool was_idle)
{
    struct victim v[VICTIMS_MAX];
    size_t n;

    if (!was_idle && is_idle(f))
        lru_push(c, f);
    for (;;) {
        n = take_victims(c, c->capacity, v);
        if (n < VICTIMS_MAX)
            break;
        pthread_mutex_unlock(&c->mu);
        close_victims(v, n);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    close_victims(v, n);
}

/* ---- files --------------------------------------------------------------- */

void pulse_fdc_file_init(struct pulse_fdc_file *f, struct pulse_fdcache *cache, const struct pulse_io *io,
                         const char *path)
{
    memset(f, 0, sizeof *f);
    f->cache = cache;
    f->io = io;
    f->path = path;
    f->fd = -1;
}

void pulse_fdc_file_fini(struct pulse_fdc_file *f)
{
    struct pulse_fdcache *c = f->cache;
    int fd;

    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    if (is_idle(f))
        lru_remove(c, f);
    fd = f->fd;
    if (fd >= 0)
        c->open--;
    f->fd = -1;
    f->pins = 0;
    f->dirty = false;
    f->retired = false;
    pthread_mutex_unlock(&c->mu);
    if (fd >= 0)
        f->io->close(f->io, fd);
    f->cache = NULL;
}

/* Under mu: whether id (got_id false: unknown) may be the file's. The
 * first known identity is remembered. */
static bool same_file(struct pulse_fdc_file *f, bool got_id, const struct pulse_file_id *id)
{
    if (!got_id)
        return true;
    if (!f->have_id) {
        f->id = *id;
        f->have_id = true;
        return true;
    }
    return f->id.dev == id->dev && f->id.ino == id->ino;
}

void pulse_fdc_adopt(struct pulse_fdc_file *f, int fd)
{
    struct pulse_fdcache *c = f->cache;
    struct pulse_file_id id = {0, 0};
    bool got_id = f->io->file_id(f->io, fd, &id) == 0;

    pthread_mutex_lock(&c->mu);
    if (f->fd >= 0 || f->opening || !same_file(f, got_id, &id)) {
        /* Open already (or being opened): the same file, keep that one.
         * Or another file than the one this was: never adopted. */
        pthread_mutex_unlock(&c->mu);
        f->io->close(f->io, fd);
        return;
    }
    f->fd = fd;
    c->open++;
    settle_unlock(c, f, false);
}

/* open() outside the mutex; on EMFILE/ENFILE closes every idle file and
 * tries once more. Returns the descriptor or -1 with *err set. */
static int open_file(struct pulse_fdcache *c, struct pulse_fdc_file *f, int *err)
{
    struct victim v[VICTIMS_MAX];
    size_t n;
    int fd = f->io->open(f->io, f->path, O_RDWR | O_CLOEXEC, 0);

    if (fd >= 0)
        return fd;
    *err = errno;
    if (*err != EMFILE && *err != ENFILE)
        return -1;
    pthread_mutex_lock(&c->mu);
    c->emfile++;
    do {
        n = take_victims(c, 0, v);
        pthread_mutex_unlock(&c->mu);
        close_victims(v, n);
        pthread_mutex_lock(&c->mu);
    } while (n == VICTIMS_MAX);
    pthread_mutex_unlock(&c->mu);
    fd = f->io->open(f->io, f->path, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        *err = errno;
    return fd;
}

pulse_status_t pulse_fdc_pin(struct pulse_fdc_file *f, int *fd_out)
{
    struct pulse_fdcache *c = f->cache;
    struct victim v[VICTIMS_MAX];
    size_t n;
    int fd, err = 0;

    pthread_mutex_lock(&c->mu);
    while (f->fd < 0 && f->opening)
        pthread_cond_wait(&c->opened, &c->mu);
    if (f->fd >= 0) {
        if (is_idle(f))
            lru_remove(c, f);
        f->pins++;
        c->hits++;
        *fd_out = f->fd;
        pthread_mutex_unlock(&c->mu);
        return PULSE_OK;
    }
    /* A miss: reserve the descriptor, make room, open outside the mutex. */
    f->opening = true;
    c->open++;
    n = take_victims(c, c->capacity, v);
    pthread_mutex_unlock(&c->mu);
    close_victims(v, n);
    fd = open_file(c, f, &err);
    struct pulse_file_id id = {0, 0};
    bool got_id = fd >= 0 && f->io->file_id(f->io, fd, &id) == 0;
    pthread_mutex_lock(&c->mu);
    f->opening = false;
    pthread_cond_broadcast(&c->opened);
    if (fd >= 0 && !same_file(f, got_id, &id)) {
        size_t open = --c->open;
        pthread_mutex_unlock(&c->mu);
        f->io->close(f->io, fd);
        PULSE_ERROR_RL("fdcache: %s names another file than the one opened there before (it was replaced); not "
                       "reading it in that one's place (%zu segment files open)",
                       f->path, open);
        return PULSE_IO;
    }
    if (fd < 0) {
        size_t open = --c->open;
        pthread_mutex_unlock(&c->mu);
        if (err == EMFILE || err == ENFILE)
            PULSE_ERROR_RL("fdcache: open %s failed: %s (%zu segment files open, cache capacity %zu); raise "
                           "the descriptor limit (ulimit -n) or lower storage.segment-fd-cache or "
                           "server.max-connections",
                           f->path, strerror(err), open, c->capacity);
        else
            PULSE_ERROR_RL("fdcache: open %s failed: %s", f->path, strerror(err));
        return pulse_status_from_errno(err);
    }
    f->fd = fd;
    f->pins++;
    c->opens++;
    *fd_out = fd;
    pthread_mutex_unlock(&c->mu);
    return PULSE_OK;
}

void pulse_fdc_unpin(struct pulse_fdc_file *f)
{
    struct pulse_fdcache *c = f->cache;

    pthread_mutex_lock(&c->mu);
    f->pins--;
    settle_unlock(c, f, false);
}

uint64_t pulse_fdc_dirty(struct pulse_fdc_file *f)
{
    struct pulse_fdcache *c = f->cache;
    uint64_t ticket;

    pthread_mutex_lock(&c->mu);
    /* The caller holds a pin, so f is not on the list. */
    f->dirty = true;
    ticket = ++f->ticket;
    pthread_mutex_unlock(&c->mu);
    return ticket;
}

void pulse_fdc_clean(struct pulse_fdc_file *f, uint64_t ticket)
{
    struct pulse_fdcache *c = f->cache;

    pthread_mutex_lock(&c->mu);
    if (!f->dirty || f->ticket != ticket) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    f->dirty = false;
    settle_unlock(c, f, false);
}

void pulse_fdc_close_idle(struct pulse_fdc_file *f)
{
    struct pulse_fdcache *c = f->cache;
    int fd = -1;

    pthread_mutex_lock(&c->mu);
    if (is_idle(f)) {
        lru_remove(c, f);
        fd = f->fd;
        f->fd = -1;
        c->open--;
    }
    pthread_mutex_unlock(&c->mu);
    if (fd >= 0)
        f->io->close(f->io, fd);
}

void pulse_fdc_unretire(struct pulse_fdc_file *f)
{
    struct pulse_fdcache *c = f->cache;

    pthread_mutex_lock(&c->mu);
    if (!f->retired) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    f->retired = false;
    settle_unlock(c, f, false);
}

pulse_status_t pulse_fdc_retire(struct pulse_fdc_file *f)
{
    struct pulse_fdcache *c = f->cache;
    int fd;
    pulse_status_t st;

    pthread_mutex_lock(&c->mu);
    bool done = f->retired;
    pthread_mutex_unlock(&c->mu);
    if (done)
        return PULSE_OK;
    st = pulse_fdc_pin(f, &fd);
    if (st != PULSE_OK)
        return st;
    pthread_mutex_lock(&c->mu);
    f->retired = true;
    f->pins--;
    pthread_mutex_unlock(&c->mu);
    return PULSE_OK;
}
