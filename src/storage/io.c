/* SPDX-License-Identifier: MIT */
/*
 * io.c - the POSIX implementation of struct pulse_io and the loops built on
 * any implementation of it (full pwrite/pread, durable small-file replace).
 *
 * The vtable functions are thin: they make the syscall and return its result
 * with errno untouched, so callers can copy errno on the next line as the
 * house rules ask. Everything that needs a policy (looping, EINTR, temp
 * files, directory fsync) is written once here on top of the vtable, so a
 * fault-injecting vtable exercises exactly the same loops as production.
 */
#include "storage/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"

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
};

const struct pulse_io *pulse_io_posix(void)
{
    return &posix_io;
}

int pulse_io_pwrite_all(const struct pulse_io *io, int fd, const void *buf, size_t n, off_t off,
                        size_t *done_out)
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

int pulse_io_replace_file(const struct pulse_io *io, const char *dir, const char *name,
                          const void *data, size_t len)
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
