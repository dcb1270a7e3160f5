/* SPDX-License-Identifier: MIT */
/*
 * fsio.c - the POSIX implementation of struct pulse_io and the helpers built
 * on any implementation of it (full pwrite/pread, durable small-file
 * replace and removal, rename-and-sync, mkdir -p, tree removal).
 *
 * The vtable functions are thin: they make the syscall and return its result
 * with errno untouched, so callers can copy errno on the next line as the
 * house rules ask. Everything that needs a policy (looping, EINTR, temp
 * files, directory fsync) is written once here on top of the vtable, so a
 * fault-injecting vtable exercises exactly the same loops as production.
 */
#include "common/fsio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"

/* pulse_io_remove_tree descends at most this deep (one open directory per
 * level). pulsed's own trees are three levels deep; a deeper one was not
 * made by it, and is left (logged) rather than risk the descriptors. */
#define REMOVE_TREE_MAX_DEPTH 64

static int posix_open(const struct pulse_io *io, const char *path, int flags, mode_t mode)
{
    (void)io;
    int fd;
    do {
        fd = open(path, flags | O_CLOEXEC, mode);
    } while (fd < 0 && errno == EINTR);
    return fd;
}

static int posix_close(const struct pulse_io *io, int fd)
{
    (void)io;
    /* Linux releases the descriptor even when close reports EINTR: never
     * retry it, or a descriptor another thread just got could be closed. */
    return close(fd);
}

static ssize_t posix_pread(const struct pulse_io *io, int fd, void *buf, size_t n, off_t off)
{
    (void)io;
    return pread(fd, buf, n, off);
}

static ssize_t posix_pwrite(const struct pulse_io *io, int fd, const void *buf, size_t n, off_t off)
{
    (void)io;
    return pwrite(fd, buf, n, off);
}

static int posix_fdatasync(const struct pulse_io *io, int fd)
{
    (void)io;
    return fdatasync(fd);
}

static int posix_fsync(const struct pulse_io *io, int fd)
{
    (void)io;
    return fsync(fd);
}

static int posix_ftruncate(const struct pulse_io *io, int fd, off_t len)
{
    (void)io;
    int rc;
    do {
        rc = ftruncate(fd, len);
    } while (rc < 0 && errno == EINTR);
    return rc;
}

static int posix_fsize(const struct pulse_io *io, int fd, uint64_t *size_out)
{
    (void)io;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -1;
    *size_out = (uint64_t)st.st_size;
    return 0;
}

static int posix_file_id(const struct pulse_io *io, int fd, struct pulse_file_id *id_out)
{
    (void)io;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -1;
    id_out->dev = (uint64_t)st.st_dev;
    id_out->ino = (uint64_t)st.st_ino;
    return 0;
}

static int posix_rename(const struct pulse_io *io, const char *from, const char *to)
{
    (void)io;
    return rename(from, to);
}

static int posix_unlink(const struct pulse_io *io, const char *path)
{
    (void)io;
    return unlink(path);
}

static int posix_mkdir(const struct pulse_io *io, const char *path, mode_t mode)
{
    (void)io;
    return mkdir(path, mode);
}

static int posix_fsync_dir(const struct pulse_io *io, const char *dir)
{
    (void)io;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    errno = err;
    return rc;
}

static int posix_rmdir(const struct pulse_io *io, const char *path)
{
    (void)io;
    return rmdir(path);
}

static int posix_stat(const struct pulse_io *io, const char *path, bool nofollow, struct stat *st_out)
{
    (void)io;
    return nofollow ? lstat(path, st_out) : stat(path, st_out);
}

static int posix_access(const struct pulse_io *io, const char *path, int mode)
{
    (void)io;
    return faccessat(AT_FDCWD, path, mode, AT_EACCESS);
}

static int posix_list_dir(const struct pulse_io *io, const char *dir, pulse_io_entry_fn fn, void *arg)
{
    (void)io;
    DIR *d = opendir(dir);
    int rc = 0;
    int err = 0;

    if (d == NULL)
        return -1;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (de == NULL) {
            /* readdir says "end" and "error" both with NULL; only errno
             * tells them apart. */
            if (errno != 0) {
                err = errno;
                rc = -1;
            }
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        rc = fn(arg, de->d_name, de->d_type);
        if (rc != 0)
            break;
    }
    closedir(d);
    if (rc == -1 && err != 0)
        errno = err;
    return rc;
}

static const struct pulse_io posix_io = {
    .open = posix_open,
    .close = posix_close,
    .pread = posix_pread,
    .pwrite = posix_pwrite,
    .fdatasync = posix_fdatasync,
    .fsync = posix_fsync,
    .ftruncate = posix_ftruncate,
    .fsize = posix_fsize,
    .file_id = posix_file_id,
    .rename = posix_rename,
    .unlink = posix_unlink,
    .mkdir = posix_mkdir,
    .fsync_dir = posix_fsync_dir,
    .rmdir = posix_rmdir,
    .stat = posix_stat,
    .access = posix_access,
    .list_dir = posix_list_dir,
};

const struct pulse_io *pulse_io_posix(void)
{
    return &posix_io;
}

int pulse_io_pwrite_all(const struct pulse_io *io, int fd, const void *buf, size_t n, off_t off, size_t *done_out)
{
    const uint8_t *p = buf;
    size_t done = 0;
    int rc = 0;

    while (done < n) {
        ssize_t w = io->pwrite(io, fd, p + done, n - done, off + (off_t)done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            rc = -1;
            break;
        }
        if (w == 0) {
            /* pwrite never returns 0 for n > 0 on a regular file; treat it as
             * a full device rather than loop forever. */
            errno = ENOSPC;
            rc = -1;
            break;
        }
        done += (size_t)w;
    }
    if (done_out != NULL)
        *done_out = done;
    return rc;
}

ssize_t pulse_io_pread_all(const struct pulse_io *io, int fd, void *buf, size_t n, off_t off)
{
    uint8_t *p = buf;
    size_t done = 0;

    while (done < n) {
        ssize_t r = io->pread(io, fd, p + done, n - done, off + (off_t)done);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break; /* end of file */
        done += (size_t)r;
    }
    return (ssize_t)done;
}

int pulse_io_replace_file(const struct pulse_io *io, const char *dir, const char *name, const void *data, size_t len)
{
    char tmp[4096];
    char dst[4096];
    int fd = -1;
    int rc = -1;
    int err = 0;

    if (snprintf(tmp, sizeof tmp, "%s/.tmp-%s", dir, name) >= (int)sizeof tmp ||
        snprintf(dst, sizeof dst, "%s/%s", dir, name) >= (int)sizeof dst) {
        err = ENAMETOOLONG;
        goto out;
    }
    /* O_TRUNC is right here and only here: the temp file is ours alone and a
     * leftover from a crash holds nothing worth keeping. */
    fd = io->open(io, tmp, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0) {
        err = errno;
        goto out;
    }
    if (pulse_io_pwrite_all(io, fd, data, len, 0, NULL) < 0) {
        err = errno;
        goto out;
    }
    /* Data must be on disk before the name points at it, or a crash could
     * leave the new name on an empty file. */
    if (io->fdatasync(io, fd) < 0) {
        err = errno;
        goto out;
    }
    if (io->close(io, fd) < 0) {
        fd = -1;
        err = errno;
        goto out;
    }
    fd = -1;
    if (io->rename(io, tmp, dst) < 0) {
        err = errno;
        goto out;
    }
    /* The rename is durable only once the directory is. */
    if (io->fsync_dir(io, dir) < 0) {
        err = errno;
        goto out;
    }
    rc = 0;
out:
    if (fd >= 0)
        io->close(io, fd);
    if (rc < 0) {
        if (err != ENAMETOOLONG)
            io->unlink(io, tmp);
        errno = err;
    }
    return rc;
}

int pulse_io_read_file(const struct pulse_io *io, const char *dir, const char *name, size_t max, uint8_t **data_out,
                       size_t *len_out)
{
    char path[4096];
    uint8_t *data = NULL;
    uint64_t size = 0;
    ssize_t got = 0;
    int fd = -1;
    int err = 0;

    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        err = ENAMETOOLONG;
        goto out;
    }
    fd = io->open(io, path, O_RDONLY, 0);
    if (fd < 0 || io->fsize(io, fd, &size) < 0) {
        err = errno;
        goto out;
    }
    if (size > max) {
        err = EFBIG;
        goto out;
    }
    data = pulse_malloc(size > 0 ? (size_t)size : 1);
    if (data == NULL) {
        err = ENOMEM;
        goto out;
    }
    got = pulse_io_pread_all(io, fd, data, (size_t)size, 0);
    if (got < 0)
        err = errno;
out:
    if (fd >= 0)
        io->close(io, fd);
    if (err != 0) {
        pulse_free(data);
        errno = err;
        return -1;
    }
    *data_out = data;
    *len_out = (size_t)got;
    return 0;
}
int pulse_io_remove_file(const struct pulse_io *io, const char *dir, const char *name)
{
    char path[4096];

    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (io->unlink(io, path) < 0 && errno != ENOENT)
        return -1;
    /* Also when the file was already gone: the unlink that removed it may
     * not be durable yet. */
    return io->fsync_dir(io, dir);
}

int pulse_io_rename_sync(const struct pulse_io *io, const char *from, const char *to, const char *dir)
{
    if (io->rename(io, from, to) < 0)
        return -1;
    return io->fsync_dir(io, dir);
}

int pulse_io_mkdir_sync(const struct pulse_io *io, const char *path, mode_t mode)
{
    char parent[4096];
    size_t len = strlen(path);

    if (len >= sizeof parent) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(parent, path, len + 1);
    while (len > 1 && parent[len - 1] == '/')
        parent[--len] = '\0';
    char *slash = strrchr(parent, '/');
    if (slash == NULL)
        snprintf(parent, sizeof parent, ".");
    else if (slash == parent)
        parent[1] = '\0'; /* "/name": the root holds it */
    else
        *slash = '\0';
    if (io->mkdir(io, path, mode) < 0)
        return -1;
    return io->fsync_dir(io, parent);
}

int pulse_io_mkdir_p(const struct pulse_io *io, const char *path, mode_t mode)
{
    char tmp[4096];
    size_t len = strlen(path);

    if (len == 0 || len >= sizeof tmp) {
        errno = len == 0 ? ENOENT : ENAMETOOLONG;
        return -1;
    }
    /* The whole path first: it usually exists (a partition log opening at
     * start), and one call is all that takes. */
    if (io->mkdir(io, path, mode) == 0 || errno == EEXIST)
        return 0;
    if (errno != ENOENT)
        return -1;
    memcpy(tmp, path, len + 1);
    /* Each prefix that ends at a '/' (the leading one aside), then the
     * whole path: an existing one is fine, whatever it is, as with
     * mkdir -p; the caller's next use of the path says if it is not a
     * directory. */
    for (char *p = tmp + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (io->mkdir(io, tmp, mode) < 0 && errno != EEXIST)
            return -1;
        *p = c;
        if (c == '\0')
            return 0;
    }
}

/* ---- tree removal -------------------------------------------------------- */

struct rm_tree {
    const struct pulse_io *io;
    char path[PATH_MAX]; /* the entry being removed; grows and shrinks */
    size_t len;
    unsigned depth;
    int err; /* the first failure's errno; 0 = none */
};

static void rm_failed(struct rm_tree *t, int e)
{
    PULSE_ERROR("remove %s failed: %s", t->path, strerror(e));
    if (t->err == 0)
        t->err = e;
}

static int rm_entry(void *arg, const char *name, unsigned char type);

/* Removes t->path: a directory's entries first, then the directory; any
 * other kind of file (a symbolic link included) is unlinked. */
static void rm_path(struct rm_tree *t, bool is_dir)
{
    if (!is_dir) {
        if (t->io->unlink(t->io, t->path) < 0 && errno != ENOENT)
            rm_failed(t, errno);
        return;
    }
    if (t->depth >= REMOVE_TREE_MAX_DEPTH) {
        rm_failed(t, ELOOP);
        return;
    }
    t->depth++;
    if (t->io->list_dir(t->io, t->path, rm_entry, t) < 0 && errno != ENOENT)
        rm_failed(t, errno);
    t->depth--;
    if (t->io->rmdir(t->io, t->path) < 0 && errno != ENOENT)
        rm_failed(t, errno);
}

static int rm_entry(void *arg, const char *name, unsigned char type)
{
    struct rm_tree *t = arg;
    size_t saved = t->len;
    size_t n = strlen(name);
    bool is_dir = type == DT_DIR;

    if (saved + 1 + n >= sizeof t->path) {
        PULSE_ERROR("remove %s/%s failed: %s", t->path, name, strerror(ENAMETOOLONG));
        if (t->err == 0)
            t->err = ENAMETOOLONG;
        return 0;
    }
    t->path[saved] = '/';
    memcpy(t->path + saved + 1, name, n + 1);
    t->len = saved + 1 + n;
    if (type == DT_UNKNOWN) {
        /* The link itself, never its target. */
        struct stat st;
        is_dir = t->io->stat(t->io, t->path, true, &st) == 0 && S_ISDIR(st.st_mode);
    }
    rm_path(t, is_dir);
    t->path[saved] = '\0';
    t->len = saved;
    return 0;
}

int pulse_io_remove_tree(const struct pulse_io *io, const char *path)
{
    struct rm_tree *t;
    struct stat st;
    size_t len = strlen(path);
    int rc = -1;

    if (io->stat(io, path, true, &st) < 0)
        return errno == ENOENT ? 0 : -1;
    if (len >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    t = pulse_calloc(1, sizeof *t);
    if (t == NULL) {
        errno = ENOMEM;
        return -1;
    }
    t->io = io;
    memcpy(t->path, path, len + 1);
    t->len = len;
    rm_path(t, S_ISDIR(st.st_mode));
    if (io->stat(io, path, true, &st) < 0 && errno == ENOENT)
        rc = 0;
    /* Still there: say why (the first failure). */
    int err = t->err != 0 ? t->err : EEXIST;
    pulse_free(t);
    if (rc < 0)
        errno = err;
    return rc;
}
