/* SPDX-License-Identifier: MIT */
/*
 * fsio.h - the only door to the file system, of the storage engine and of
 * the broker's topic directories alike (the I/O seam; its functions keep
 * the pulse_io_ prefix of struct pulse_io).
 *
 * Every file operation goes through a struct pulse_io vtable (as leveldb's
 * Env and redis' rio do), so tests can substitute a faulty one
 * (tests/lib/faultio.c) that fails the Nth write, sync, rename, mkdir or
 * removal with EIO/ENOSPC, makes short writes, or drops unsynced bytes to
 * simulate a crash. Production code uses pulse_io_posix().
 *
 * Two levels:
 *   - the vtable: one thin call per system call, nothing more;
 *   - the helpers below it (pulse_io_*): every file-system policy written
 *     once on top of any vtable - full reads and writes, mkdir -p, the
 *     durable small-file replace and removal, rename-and-sync, tree
 *     removal. A faulty vtable exercises exactly the loops production runs.
 *
 * Functions follow POSIX conventions exactly: -1 and errno on failure, and
 * the caller copies errno on the next line. pread/pwrite may be partial, as
 * the syscalls may; callers loop (pulse_io_pwrite_all / pulse_io_pread_all).
 * Thread: every function may be called from any thread.
 */
#ifndef PULSE_COMMON_FSIO_H
#define PULSE_COMMON_FSIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Which file a descriptor refers to (see pulse_io.file_id). */
struct pulse_file_id {
    uint64_t dev;
    uint64_t ino;
};

/* One entry of a directory (pulse_io.list_dir): its name and its d_type
 * (DT_DIR, DT_REG, ...; DT_UNKNOWN where the file system does not say).
 * A nonzero return stops the listing and is passed back. */
typedef int (*pulse_io_entry_fn)(void *arg, const char *name, unsigned char type);

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
    int (*rmdir)(const struct pulse_io *io, const char *path);
    /* stat(2) of path, or lstat(2) (a symbolic link itself) when nofollow. */
    int (*stat)(const struct pulse_io *io, const char *path, bool nofollow, struct stat *st_out);
    /* faccessat(2) with AT_EACCESS: may this process (its effective ids)
     * use path as mode (R_OK, W_OK, X_OK) asks. */
    int (*access)(const struct pulse_io *io, const char *path, int mode);
    /* Calls fn for every entry of dir but "." and "..", in directory
     * order. Returns fn's first nonzero result (the listing stops there),
     * 0 after the last entry, or -1 with errno when dir cannot be opened
     * or read. Entries removed or added meanwhile may or may not be seen,
     * as with readdir(3). */
    int (*list_dir)(const struct pulse_io *io, const char *dir, pulse_io_entry_fn fn, void *arg);
};

/* The real file system. Static storage; never freed. */
const struct pulse_io *pulse_io_posix(void);

/* Loops over partial transfers and EINTR. pwrite_all returns 0 or -1 with
 * errno; on -1, *done_out (nullable) tells how many bytes did land, so the
 * caller can truncate a short write away. pread_all returns the number of
 * bytes read (short only at end of file) or -1. */
int pulse_io_pwrite_all(const struct pulse_io *io, int fd, const void *buf, size_t n, off_t off, size_t *done_out);
ssize_t pulse_io_pread_all(const struct pulse_io *io, int fd, void *buf, size_t n, off_t off);

/* Writes a small file durably: temp file in the same directory (name starts
 * with ".tmp-"), write, fdatasync, rename over path, fsync the directory.
 * The temp file is removed on failure. Returns 0 or -1 with errno. */
int pulse_io_replace_file(const struct pulse_io *io, const char *dir, const char *name, const void *data, size_t len);

/* Reads a small file whole (the counterpart of pulse_io_replace_file):
 * *data_out gets its bytes (pulse_free; at least one byte is allocated)
 * and *len_out their count. Returns 0, or -1 with errno: ENOENT when it
 * does not exist, EFBIG when it holds more than max bytes (none of it is
 * read), ENAMETOOLONG, ENOMEM, or the error of the open, fstat or pread. */
int pulse_io_read_file(const struct pulse_io *io, const char *dir, const char *name, size_t max, uint8_t **data_out,
                       size_t *len_out);

/* Removes dir/name durably: unlink, then fsync the directory. A file that
 * is not there is fine (the directory is fsynced all the same, since an
 * earlier removal may not be durable yet). Returns 0 or -1 with errno. */
int pulse_io_remove_file(const struct pulse_io *io, const char *dir, const char *name);

/* Renames from to to and fsyncs dir, the directory holding both (a rename
 * is durable only once its directory is). 0 or -1 with errno; after a
 * failed fsync the rename may or may not survive a crash. */
int pulse_io_rename_sync(const struct pulse_io *io, const char *from, const char *to, const char *dir);

/* Makes the directory path durably: mkdir, then fsync the directory that
 * holds it (a new name is durable only once its directory is; without
 * this a power cut can take the new directory, and everything later made
 * durable inside it, away). Returns 0, or -1 with errno: EEXIST when path
 * exists already (nothing is synced then), the mkdir's error, or the
 * fsync's (the directory exists, but may not survive a power cut). */
int pulse_io_mkdir_sync(const struct pulse_io *io, const char *path, mode_t mode);

/* mkdir -p: makes every missing directory of path (mode for each); one that
 * exists already is fine. Nothing is fsynced: the caller syncs the parents
 * whose new entries must be durable. Returns 0 or -1 with errno. */
int pulse_io_mkdir_p(const struct pulse_io *io, const char *path, mode_t mode);

/* rm -rf of path without ever following a symbolic link (a link is
 * removed, not its target). Best effort: an entry that cannot be removed
 * is logged and the rest is still removed. Returns 0 when path is gone
 * (or was never there), else -1 with the errno of the first failure.
 * Nothing is fsynced: the caller syncs the parent directory. */
int pulse_io_remove_tree(const struct pulse_io *io, const char *path);

#endif
