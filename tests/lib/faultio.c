/* SPDX-License-Identifier: MIT */
/*
 * faultio.c - fault-injecting struct pulse_io over the POSIX one (see
 * faultio.h). Modeled on leveldb's fault_injection_test Env and SQLite's
 * test6.c: the file system is real, only the failures and the notion of
 * "what would survive a power cut" are simulated.
 */
#include "faultio.h"

#include <errno.h>
#include <fnmatch.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fsio.h"

#define MAX_FILES 512
#define MAX_FD 4096

struct file_rec {
    bool used;
    char path[512];
    uint64_t synced;
};

struct faultio {
    struct pulse_io io; /* first: the vtable callbacks cast back */
    const struct pulse_io *real;
    pthread_mutex_t lock;
    atomic_ulong counts[FAULTIO_OP_COUNT];
    atomic_ulong preads;                     /* pread calls (never failed) */
    atomic_ullong pread_bytes;               /* and the bytes they returned */
    unsigned long fail_at[FAULTIO_OP_COUNT]; /* lock; 0 = none */
    int fail_err[FAULTIO_OP_COUNT];
    char fail_path[FAULTIO_OP_COUNT][256]; /* lock; fnmatch pattern, "" = none */
    int fail_path_err[FAULTIO_OP_COUNT];
    unsigned long short_at; /* lock; pwrite count that goes short */
    size_t short_keep;
    int short_err;
    bool fail_next_pwrite;
    bool crashed;
    atomic_uint sync_delay_us;
    atomic_bool sync_noop;
    void (*_Atomic hook)(void *arg);
    void *_Atomic hook_arg;
    struct file_rec files[MAX_FILES];
    int fd_file[MAX_FD]; /* fd -> files index, -1 */
};

static struct faultio *F(const struct pulse_io *io)
{
    return (struct faultio *)(uintptr_t)io;
}

/* Counts the call; returns the errno to inject or 0. */
static int tick(struct faultio *fio, enum faultio_op op)
{
    unsigned long n = atomic_fetch_add(&fio->counts[op], 1) + 1;
    int err = 0;

    pthread_mutex_lock(&fio->lock);
    if (fio->crashed && op != FAULTIO_OPEN)
        err = EIO;
    else if (fio->fail_at[op] != 0 && n == fio->fail_at[op]) {
        err = fio->fail_err[op];
        fio->fail_at[op] = 0;
    }
    pthread_mutex_unlock(&fio->lock);
    return err;
}

/* Counts the call like tick; a call whose path matches the op's pattern
 * (faultio_fail_path) fails instead, once. */
static int tick_path(struct faultio *fio, enum faultio_op op, const char *path)
{
    int err = tick(fio, op);
    pthread_mutex_lock(&fio->lock);
    if (err == 0 && fio->fail_path[op][0] != '\0' && fnmatch(fio->fail_path[op], path, 0) == 0) {
        err = fio->fail_path_err[op];
        fio->fail_path[op][0] = '\0';
    }
    pthread_mutex_unlock(&fio->lock);
    return err;
}

static int find_file(struct faultio *fio, const char *path)
{
    for (int i = 0; i < MAX_FILES; i++)
        if (fio->files[i].used && strcmp(fio->files[i].path, path) == 0)
            return i;
    return -1;
}

static int add_file(struct faultio *fio, const char *path, uint64_t synced)
{
    for (int i = 0; i < MAX_FILES; i++) {
        if (!fio->files[i].used) {
            fio->files[i].used = true;
            strncpy(fio->files[i].path, path, sizeof fio->files[i].path - 1);
            fio->files[i].path[sizeof fio->files[i].path - 1] = '\0';
            fio->files[i].synced = synced;
            return i;
        }
    }
    return -1;
}

static int f_open(const struct pulse_io *io, const char *path, int flags, mode_t mode)
{
    struct faultio *fio = F(io);
    int err = tick(fio, FAULTIO_OPEN);
    struct stat st;
    bool existed;
    int fd;

    if (err == 0 && fio->crashed && (flags & (O_CREAT | O_WRONLY | O_RDWR)) != 0)
        err = EIO;
    if (err != 0) {
        errno = err;
        return -1;
    }
    existed = stat(path, &st) == 0;
    fd = fio->real->open(fio->real, path, flags, mode);
    if (fd < 0)
        return -1;
    pthread_mutex_lock(&fio->lock);
    if (fd < MAX_FD) {
        int i = find_file(fio, path);
        if (i < 0)
            i = add_file(fio, path, existed && (flags & O_TRUNC) == 0 ? (uint64_t)st.st_size : 0);
        else if ((flags & O_TRUNC) != 0)
            fio->files[i].synced = 0;
        fio->fd_file[fd] = i;
    }
    pthread_mutex_unlock(&fio->lock);
    return fd;
}

static int f_close(const struct pulse_io *io, int fd)
{
    struct faultio *fio = F(io);
    pthread_mutex_lock(&fio->lock);
    if (fd >= 0 && fd < MAX_FD)
        fio->fd_file[fd] = -1;
    pthread_mutex_unlock(&fio->lock);
    return fio->real->close(fio->real, fd);
}

static ssize_t f_pread(const struct pulse_io *io, int fd, void *buf, size_t n, off_t off)
{
    struct faultio *fio = F(io);
    ssize_t got = fio->real->pread(fio->real, fd, buf, n, off);
    atomic_fetch_add(&fio->preads, 1);
    if (got > 0)
        atomic_fetch_add(&fio->pread_bytes, (unsigned long long)got);
    return got;
}

static ssize_t f_pwrite(const struct pulse_io *io, int fd, const void *buf, size_t n, off_t off)
{
    struct faultio *fio = F(io);
    int err = tick(fio, FAULTIO_PWRITE);
    unsigned long cnt = atomic_load(&fio->counts[FAULTIO_PWRITE]);
    size_t keep = n;

    pthread_mutex_lock(&fio->lock);
    if (err == 0 && fio->fail_next_pwrite) {
        fio->fail_next_pwrite = false;
        err = fio->short_err;
    } else if (err == 0 && fio->short_at != 0 && cnt == fio->short_at) {
        fio->short_at = 0;
        keep = fio->short_keep < n ? fio->short_keep : n;
        fio->fail_next_pwrite = fio->short_err != 0;
        if (keep == 0 && fio->short_err != 0) {
            fio->fail_next_pwrite = false;
            err = fio->short_err;
        }
    }
    pthread_mutex_unlock(&fio->lock);
    if (err != 0) {
        errno = err;
        return -1;
    }
    if (keep == 0 && n > 0) {
        errno = EIO;
        return -1;
    }
    return fio->real->pwrite(fio->real, fd, buf, keep, off);
}

static void mark_synced(struct faultio *fio, int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return;
    pthread_mutex_lock(&fio->lock);
    if (fd >= 0 && fd < MAX_FD && fio->fd_file[fd] >= 0)
        fio->files[fio->fd_file[fd]].synced = (uint64_t)st.st_size;
    pthread_mutex_unlock(&fio->lock);
}

static int f_fdatasync(const struct pulse_io *io, int fd)
{
    struct faultio *fio = F(io);
    int err = tick(fio, FAULTIO_FDATASYNC);
    void (*hook)(void *) = atomic_load(&fio->hook);
    if (err != 0) {
        errno = err;
        return -1;
    }
    if (hook != NULL)
        hook(atomic_load(&fio->hook_arg));
    /* Snapshot the size first: bytes written while the sync runs are not
     * covered by it. */
    struct stat st;
    bool have = fstat(fd, &st) == 0;
    unsigned delay = atomic_load(&fio->sync_delay_us);
    if (delay > 0)
        usleep(delay);
    if (!atomic_load(&fio->sync_noop) && fio->real->fdatasync(fio->real, fd) < 0)
        return -1;
    if (have) {
        pthread_mutex_lock(&fio->lock);
        if (fd >= 0 && fd < MAX_FD && fio->fd_file[fd] >= 0) {
            struct file_rec *r = &fio->files[fio->fd_file[fd]];
            if ((uint64_t)st.st_size > r->synced)
                r->synced = (uint64_t)st.st_size;
        }
        pthread_mutex_unlock(&fio->lock);
    }
    return 0;
}

static int f_fsync(const struct pulse_io *io, int fd)
{
    struct faultio *fio = F(io);
    int err = tick(fio, FAULTIO_FSYNC);
    if (err != 0) {
        errno = err;
        return -1;
    }
    if (!atomic_load(&fio->sync_noop) && fio->real->fsync(fio->real, fd) < 0)
        return -1;
    mark_synced(fio, fd);
    return 0;
}

static int f_ftruncate(const struct pulse_io *io, int fd, off_t len)
{
    struct faultio *fio = F(io);
    int err = tick(fio, FAULTIO_FTRUNCATE);
    if (err != 0) {
        errno = err;
        return -1;
    }
    if (fio->real->ftruncate(fio->real, fd, len) < 0)
        return -1;
    pthread_mutex_lock(&fio->lock);
    if (fd >= 0 && fd < MAX_FD && fio->fd_file[fd] >= 0) {
        struct file_rec *r = &fio->files[fio->fd_file[fd]];
        if (r->synced > (uint64_t)len)
            r->synced = (uint64_t)len;
    }
    pthread_mutex_unlock(&fio->lock);
    return 0;
}

static int f_fsize(const struct pulse_io *io, int fd, uint64_t *size_out)
{
    struct faultio *fio = F(io);
    return fio->real->fsize(fio->real, fd, size_out);
}

static int f_file_id(const struct pulse_io *io, int fd, struct pulse_file_id *id_out)
{
    struct faultio *fio = F(io);
    return fio->real->file_id(fio->real, fd, id_out);
}

static int f_rename(const struct pulse_io *io, const char *from, const char *to)
{
    struct faultio *fio = F(io);
    int err = tick_path(fio, FAULTIO_RENAME, to);
    if (err != 0) {
        errno = err;
        return -1;
    }
    if (fio->real->rename(fio->real, from, to) < 0)
        return -1;
    pthread_mutex_lock(&fio->lock);
    int old = find_file(fio, to);
    int i = find_file(fio, from);
    if (old >= 0 && old != i)
        fio->files[old].used = false;
    if (i >= 0) {
        strncpy(fio->files[i].path, to, sizeof fio->files[i].path - 1);
        fio->files[i].path[sizeof fio->files[i].path - 1] = '\0';
    }
    pthread_mutex_unlock(&fio->lock);
    return 0;
}

static int f_unlink(const struct pulse_io *io, const char *path)
{
    struct faultio *fio = F(io);
    int err = tick(fio, FAULTIO_UNLINK);
    if (err != 0) {
        errno = err;
        return -1;
    }
    if (fio->real->unlink(fio->real, path) < 0)
        return -1;
    pthread_mutex_lock(&fio->lock);
    int i = find_file(fio, path);
    if (i >= 0) {
        fio->files[i].used = false;
        for (int fd = 0; fd < MAX_FD; fd++)
            if (fio->fd_file[fd] == i)
                fio->fd_file[fd] = -1;
    }
    pthread_mutex_unlock(&fio->lock);
    return 0;
}

static int f_mkdir(const struct pulse_io *io, const char *path, mode_t mode)
{
    struct faultio *fio = F(io);
    int err = tick(fio, FAULTIO_MKDIR);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return fio->real->mkdir(fio->real, path, mode);
}

static int f_rmdir(const struct pulse_io *io, const char *path)
{
    struct faultio *fio = F(io);
    int err = tick(fio, FAULTIO_RMDIR);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return fio->real->rmdir(fio->real, path);
}

static int f_stat(const struct pulse_io *io, const char *path, bool nofollow, struct stat *st_out)
{
    struct faultio *fio = F(io);
    return fio->real->stat(fio->real, path, nofollow, st_out);
}

static int f_access(const struct pulse_io *io, const char *path, int mode)
{
    struct faultio *fio = F(io);
    return fio->real->access(fio->real, path, mode);
}

static int f_list_dir(const struct pulse_io *io, const char *dir, pulse_io_entry_fn fn, void *arg)
{
    struct faultio *fio = F(io);
    return fio->real->list_dir(fio->real, dir, fn, arg);
}

static int f_fsync_dir(const struct pulse_io *io, const char *dir)
{
    struct faultio *fio = F(io);
    int err = tick_path(fio, FAULTIO_FSYNC_DIR, dir);
    if (err != 0) {
        errno = err;
        return -1;
    }
    if (atomic_load(&fio->sync_noop))
        return 0;
    return fio->real->fsync_dir(fio->real, dir);
}

struct faultio *faultio_create(void)
{
    struct faultio *fio = pulse_calloc(1, sizeof *fio);
    if (fio == NULL)
        return NULL;
    fio->io.open = f_open;
    fio->io.close = f_close;
    fio->io.pread = f_pread;
    fio->io.pwrite = f_pwrite;
    fio->io.fdatasync = f_fdatasync;
    fio->io.fsync = f_fsync;
    fio->io.ftruncate = f_ftruncate;
    fio->io.fsize = f_fsize;
    fio->io.file_id = f_file_id;
    fio->io.rename = f_rename;
    fio->io.unlink = f_unlink;
    fio->io.mkdir = f_mkdir;
    fio->io.fsync_dir = f_fsync_dir;
    fio->io.rmdir = f_rmdir;
    fio->io.stat = f_stat;
    fio->io.access = f_access;
    fio->io.list_dir = f_list_dir;
    fio->real = pulse_io_posix();
    pthread_mutex_init(&fio->lock, NULL);
    for (int i = 0; i < FAULTIO_OP_COUNT; i++)
        atomic_init(&fio->counts[i], 0);
    atomic_init(&fio->preads, 0);
    atomic_init(&fio->pread_bytes, 0);
    atomic_init(&fio->sync_delay_us, 0);
    atomic_init(&fio->sync_noop, false);
    for (int fd = 0; fd < MAX_FD; fd++)
        fio->fd_file[fd] = -1;
    return fio;
}

void faultio_destroy(struct faultio *fio)
{
    if (fio == NULL)
        return;
    pthread_mutex_destroy(&fio->lock);
    pulse_free(fio);
}

void faultio_read_counts(struct faultio *fio, unsigned long *calls, unsigned long long *bytes)
{
    *calls = atomic_load(&fio->preads);
    *bytes = atomic_load(&fio->pread_bytes);
}

const struct pulse_io *faultio_io(struct faultio *fio)
{
    return &fio->io;
}

void faultio_fail_nth(struct faultio *fio, enum faultio_op op, unsigned long nth, int err)
{
    pthread_mutex_lock(&fio->lock);
    fio->fail_at[op] = atomic_load(&fio->counts[op]) + nth;
    fio->fail_err[op] = err;
    pthread_mutex_unlock(&fio->lock);
}

void faultio_fail_path(struct faultio *fio, enum faultio_op op, const char *pattern, int err)
{
    pthread_mutex_lock(&fio->lock);
    snprintf(fio->fail_path[op], sizeof fio->fail_path[op], "%s", pattern);
    fio->fail_path_err[op] = err;
    pthread_mutex_unlock(&fio->lock);
}

void faultio_short_write_nth(struct faultio *fio, unsigned long nth, size_t keep, int err)
{
    pthread_mutex_lock(&fio->lock);
    fio->short_at = atomic_load(&fio->counts[FAULTIO_PWRITE]) + nth;
    fio->short_keep = keep;
    fio->short_err = err;
    fio->fail_next_pwrite = false;
    pthread_mutex_unlock(&fio->lock);
}

unsigned long faultio_count(struct faultio *fio, enum faultio_op op)
{
    return atomic_load(&fio->counts[op]);
}

uint64_t faultio_synced_size(struct faultio *fio, const char *path)
{
    uint64_t v = 0;
    pthread_mutex_lock(&fio->lock);
    int i = find_file(fio, path);
    if (i >= 0)
        v = fio->files[i].synced;
    pthread_mutex_unlock(&fio->lock);
    return v;
}

void faultio_set_sync_delay_us(struct faultio *fio, unsigned us)
{
    atomic_store(&fio->sync_delay_us, us);
}

void faultio_set_sync_hook(struct faultio *fio, void (*fn)(void *arg), void *arg)
{
    atomic_store(&fio->hook_arg, arg);
    atomic_store(&fio->hook, fn);
}

void faultio_set_sync_noop(struct faultio *fio, bool on)
{
    atomic_store(&fio->sync_noop, on);
}

void faultio_crash(struct faultio *fio)
{
    pthread_mutex_lock(&fio->lock);
    fio->crashed = true;
    for (int i = 0; i < MAX_FILES; i++) {
        struct stat st;
        if (!fio->files[i].used)
            continue;
        if (stat(fio->files[i].path, &st) == 0 && (uint64_t)st.st_size > fio->files[i].synced)
            (void)truncate(fio->files[i].path, (off_t)fio->files[i].synced);
    }
    pthread_mutex_unlock(&fio->lock);
}
