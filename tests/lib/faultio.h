/* SPDX-License-Identifier: MIT */
/*
 * faultio.h - a struct pulse_io for tests: the real file system plus
 * injected failures and a simulated power loss.
 *
 * It counts every call of the kinds below (stat, access and directory
 * listings are passed through uncounted; preads are counted apart, with
 * their bytes, and never failed), fails the Nth call of a chosen kind with
 * a chosen errno (one shot), makes the Nth pwrite short (k bytes land, then
 * optionally the next pwrite fails), and remembers per file the size at its
 * last successful fdatasync/fsync. faultio_crash() cuts every file it has
 * seen back to that size, dropping what was only in the page cache, as a
 * power cut would (directory entries are treated as durable; the engine
 * fsyncs the directory anyway). After a crash every mutating call fails
 * with EIO so the log under test can be freed without touching the files.
 *
 * Thread: all calls are thread-safe.
 */
#ifndef PULSE_TESTS_LIB_FAULTIO_H
#define PULSE_TESTS_LIB_FAULTIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pulse_io;
struct faultio;

enum faultio_op {
    FAULTIO_OPEN = 0,
    FAULTIO_PWRITE,
    FAULTIO_FDATASYNC,
    FAULTIO_FSYNC,
    FAULTIO_FSYNC_DIR,
    FAULTIO_RENAME,
    FAULTIO_FTRUNCATE,
    FAULTIO_UNLINK,
    FAULTIO_MKDIR,
    FAULTIO_RMDIR,
    FAULTIO_OP_COUNT
};

/* NULL on out of memory. */
struct faultio *faultio_create(void);
void faultio_destroy(struct faultio *fio);
/* The vtable; lives as long as fio. */
const struct pulse_io *faultio_io(struct faultio *fio);

/* The nth call of op from now on (1-based) fails with err, once. */
void faultio_fail_nth(struct faultio *fio, enum faultio_op op, unsigned long nth, int err);
/* The next call of op (FAULTIO_RENAME: by its target; FAULTIO_FSYNC_DIR)
 * whose path matches pattern (fnmatch(3), no flags: '*' matches '/' too)
 * fails with err, once. Unlike faultio_fail_nth it cannot hit a call of a
 * background thread (a checkpoint's rename) by accident. */
void faultio_fail_path(struct faultio *fio, enum faultio_op op, const char *pattern, int err);
/* The nth pwrite from now on writes only keep bytes and reports that short
 * count; if err != 0 the pwrite after it fails with err. */
void faultio_short_write_nth(struct faultio *fio, unsigned long nth, size_t keep, int err);
/* Calls of op so far (failed ones included). */
unsigned long faultio_count(struct faultio *fio, enum faultio_op op);
/* preads so far (they are counted, never failed) and the bytes they
 * returned: what a read cost the file system. */
void faultio_read_counts(struct faultio *fio, unsigned long *calls, unsigned long long *bytes);
/* Size of path at its last successful fdatasync/fsync (or when first
 * opened, for a file that existed before). 0 for an unknown file. */
uint64_t faultio_synced_size(struct faultio *fio, const char *path);
/* Every successful fdatasync/fsync first sleeps us microseconds, as a slow
 * disk would, so that concurrent appenders really overlap a sync. */
void faultio_set_sync_delay_us(struct faultio *fio, unsigned us);
/* With on set, fdatasync/fsync/directory fsync succeed without reaching
 * the disk (sizes are still recorded as synced). For tests that check
 * logic, not durability, and must stay fast. */
void faultio_set_sync_noop(struct faultio *fio, bool on);
/* fn(arg) runs at the start of every fdatasync, in the syncing thread,
 * before the real call; lets a test act while a sync is in flight. NULL
 * clears it. */
void faultio_set_sync_hook(struct faultio *fio, void (*fn)(void *arg), void *arg);
/* Simulated power loss: every known file is cut to its synced size; from
 * now on all mutating calls fail with EIO. */
void faultio_crash(struct faultio *fio);

#endif
