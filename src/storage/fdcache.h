/* SPDX-License-Identifier: MIT */
/*
 * fdcache.h - a bounded cache of open segment files (docs/Storage.md
 * "Descriptors"; docs/Operations.md "Descriptor budget").
 *
 * A segment does not own a descriptor: each of its files is a struct
 * pulse_fdc_file that the cache opens on demand and may close again. One
 * cache is shared by every log of a broker, so the descriptors its segments
 * hold are bounded by the cache's capacity, however many segments and
 * partitions there are.
 *
 * A file is one of:
 *   closed   - no descriptor; pinning it opens its path (never O_CREAT);
 *   idle     - open, on the LRU list, may be closed when the cache is over
 *              capacity;
 *   pinned   - open and in use (pins > 0); never closed under its user;
 *   dirty    - open and holding bytes no fdatasync covered yet: never
 *              closed (closing could lose a writeback error, or let the
 *              kernel forget the dirty inode) until pulse_fdc_clean says a
 *              sync covered the last write;
 *   retired  - its path was (or is about to be) unlinked or replaced: the
 *              descriptor stays open until the file is finalised, so
 *              readers still holding the segment read the old inode; it is
 *              never reopened by path.
 * A file remembers the identity (device and inode) of the first descriptor
 * it had. Reopening it by path after it was closed checks that the path
 * still names that file: should it have been replaced meanwhile (a
 * compaction swapped a new file in while the retirement that should have
 * kept the old one open failed), the pin fails instead of reading the new
 * file's bytes at the old file's positions, which would look like damage.
 * Pinned, dirty and retired files count against the capacity but are never
 * evicted; the cache then runs over capacity until they become idle again,
 * and closes idle files as soon as it is back under it (least recently used
 * first). When open() fails with EMFILE or ENFILE the cache closes idle
 * files and tries once more; if that fails too the caller gets
 * PULSE_NOFILE.
 *
 * Thread: every function may be called from any thread. Locks: one mutex
 * per cache, never held across open() or close(); callers may hold their
 * own locks (a log's writer lock) around these calls.
 */
#ifndef PULSE_STORAGE_FDCACHE_H
#define PULSE_STORAGE_FDCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "common/fsio.h"
struct pulse_fdcache;

#define PULSE_FDCACHE_DEFAULT_CAPACITY 1024u
/* Fewer than this many cached files would make every read an open(). */
#define PULSE_FDCACHE_MIN_CAPACITY 16u

/* One file that the cache may open and close. Embedded in its owner, which
 * initialises it with pulse_fdc_file_init and finalises it with
 * pulse_fdc_file_fini. The fields belong to the cache (its mutex). */
struct pulse_fdc_file {
    struct pulse_fdcache *cache;
    const struct pulse_io *io;
    const char *path; /* borrowed from the owner; outlives the file */
    int fd;           /* -1 when closed */
    uint32_t pins;
    bool opening; /* an open() of it is in flight outside the mutex */
    bool dirty;
    bool retired;
    bool have_id; /* id is the file's identity, from its first descriptor */
    struct pulse_file_id id;
    uint64_t ticket;                    /* counts pulse_fdc_dirty calls */
    struct pulse_fdc_file *prev, *next; /* LRU of idle files (newest first) */
};

struct pulse_fdcache_stats {
    size_t capacity;
    size_t open;    /* descriptors open now (idle, pinned, dirty, retired) */
    size_t pinned;  /* of them, not evictable now */
    uint64_t hits;  /* pins that found the file open */
    uint64_t opens; /* pins that had to open it */
    uint64_t evictions;
    uint64_t emfile; /* open() failures for lack of descriptors */
};

/* capacity is clamped to at least PULSE_FDCACHE_MIN_CAPACITY. */
pulse_status_t pulse_fdcache_create(size_t capacity, struct pulse_fdcache **out);
/* Every file must have been finalised. NULL is a no-op. */
void pulse_fdcache_destroy(struct pulse_fdcache *cache);
void pulse_fdcache_get_stats(struct pulse_fdcache *cache, struct pulse_fdcache_stats *out);

/* Starts closed. path must outlive the file. */
void pulse_fdc_file_init(struct pulse_fdc_file *f, struct pulse_fdcache *cache, const struct pulse_io *io,
                         const char *path);
/* Closes the descriptor if open (a retired file's too). The file must not
 * be pinned by anyone but its retirement. */
void pulse_fdc_file_fini(struct pulse_fdc_file *f);

/* Hands a descriptor the caller opened (e.g. with O_CREAT) to the file; it
 * becomes idle. If the file is open already, fd is closed instead. The
 * cache may close other idle files. */
void pulse_fdc_adopt(struct pulse_fdc_file *f, int fd);

/* Pins the file, opening it (O_RDWR, never O_CREAT) when closed, and
 * returns its descriptor, valid until the matching pulse_fdc_unpin.
 * PULSE_NOFILE when the process is out of descriptors even after closing
 * idle files; PULSE_IO (ENOENT included: a segment file vanished; or the
 * path names another file than the one first opened), logged. */
pulse_status_t pulse_fdc_pin(struct pulse_fdc_file *f, int *fd_out);
void pulse_fdc_unpin(struct pulse_fdc_file *f);

/* Marks a pinned file as holding unsynced bytes; returns a ticket for
 * pulse_fdc_clean. */
uint64_t pulse_fdc_dirty(struct pulse_fdc_file *f);
/* A sync that began after the pulse_fdc_dirty that returned ticket has
 * succeeded: unless the file was written again since, it may be closed. */
void pulse_fdc_clean(struct pulse_fdc_file *f, uint64_t ticket);

/* Closes the file now if it is idle (a sealed segment's index, a segment
 * recovery is done with). */
void pulse_fdc_close_idle(struct pulse_fdc_file *f);

/* Retires the file: opens it if closed and keeps the descriptor until
 * pulse_fdc_file_fini. Call before its path is unlinked or replaced while
 * others may still read it. PULSE_NOFILE / PULSE_IO as pulse_fdc_pin (the
 * caller must then not unlink or replace the path). Idempotent. */
pulse_status_t pulse_fdc_retire(struct pulse_fdc_file *f);

/* Takes a retirement back when the unlink or rename it was for did not
 * happen after all (it failed first): the path still names the file, and
 * its descriptor may be closed again. Only the retirer may call it. */
void pulse_fdc_unretire(struct pulse_fdc_file *f);

#endif
