/* SPDX-License-Identifier: MIT */
/*
 * io.h - the storage engine's only door to the file system.
 *
 * Every file operation of src/storage goes through a struct pulse_io vtable
 * (as leveldb's Env and redis' rio do), so tests can substitute a faulty one
 * (tests/lib/faultio.c) that fails the Nth write or sync with EIO/ENOSPC,
 * makes short writes, or drops unsynced bytes to simulate a crash. Production
 * code uses pulse_io_posix().
 *
 * Functions follow POSIX conventions exactly: -1 and errno on failure, and
 * the caller copies errno on the next line. pread/pwrite may be partial, as
 * the syscalls may; callers loop (pulse_io_pwrite_all / pulse_io_pread_all).
 * Thread: every function may be called from any thread.
 */
#ifndef PULSE_STORAGE_IO_H
#define PULSE_STORAGE_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Which file a descriptor refers to (see pulse_io.file_id). */
struct pulse_file_id {
    uint64_t dev;
    uint64_t ino;
};

struct pulse_io {
    int (*open)(const struct pulse_io *io, const char *path, int flags, mode_t mode);
    int (*close)(const struct pulse_io *io, int fd);
    ssize_t (*pread)(const struct pulse_io *io, int fd, void *buf, size_t n, off_t off);
    ssize_t (*pwrite)(const struct pulse_io *io, int fd, const void *buf, size_t n, off_t off);
    int (*fdatasync)(const struct pulse_io *io, int fd);
    int (*fsync)(const struct pulse_io *io, int fd);
    int (*ftruncate)(const struct pulse_io *io, int fd, off_t len);
    int (*fsize)(const struct pulse_io *io, int fd, uint64_t *size_out);
    /* The identity of the open file (st_dev, st_ino): two descriptors with
     * the same identity read the same file. */
    int (*file_id)(const struct pulse_io *io, int fd, struct pulse_file_id *id_out);
    int (*rename)(const struct pulse_io *io, const char *from, const char *to);
    int (*unlink)(const struct pulse_io *io, const char *path);
    int (*mkdir)(const struct pulse_io *io, const char *path, mode_t mode);
    /* fsync of a directory, so that created, renamed or removed entries in
     * it are durable. */
    int (*fsync_dir)(const struct pulse_io *io, const char *dir);
};

/* The real file system. Static storage; never freed. */
const struct pulse_io *pulse_io_posix(void);

/* Loops over partial transfers and EINTR. pwrite_all returns 0 or -1 with
 * errno; on -1, *done_out (nullable) tells how many bytes did land, so the
 * caller can truncate a short write away. pread_all returns the number of
 * bytes read (short only at end of file) or -1. */
int pulse_io_pwrite_all(const struct pulse_io *io, int fd, const void *buf, size_t n, off_t off,
                        size_t *done_out);
ssize_t pulse_io_pread_all(const struct pulse_io *io, int fd, void *buf, size_t n, off_t off);

/* Writes a small file durably: temp file in the same directory (name starts
 * with ".tmp-"), write, fdatasync, rename over path, fsync the directory.
 * The temp file is removed on failure. Returns 0 or -1 with errno. */
int pulse_io_replace_file(const struct pulse_io *io, const char *dir, const char *name,
                          const void *data, size_t len);

/* Reads a small file whole (the counterpart of pulse_io_replace_file):
 * *data_out gets its bytes (pulse_free; at least one byte is allocated)
 * and *len_out their count. Returns 0, or -1 with errno: ENOENT when it
 * does not exist, EFBIG when it holds more than max bytes (none of it is
 * read), ENAMETOOLONG, ENOMEM, or the error of the open, fstat or pread. */
int pulse_io_read_file(const struct pulse_io *io, const char *dir, const char *name, size_t max, uint8_t **data_out,
                       size_t *len_out);

#endif
