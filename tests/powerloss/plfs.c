/* SPDX-License-Identifier: MIT */
/*
 * plfs.c - a FUSE passthrough that forgets, at a simulated power cut, what
 * was not made durable (tests/powerloss/README.md: the rules and their
 * sources, the interface, how to use it).
 *
 *   plfs [--seed N] [--torn] [--verbose] BACKING MOUNTPOINT
 *
 * Every operation goes through to BACKING at once; before one changes a
 * file's bytes or size, or a directory's entries, plfs_state.c saves what
 * the change destroys (plfs.h, "Model"). SIGUSR1 is the power cut
 * (plfs_cut.c), SIGTERM, SIGINT, SIGHUP (or fusermount3 -u) the clean
 * stop. Both unmount first, so nothing changes BACKING while it is
 * rewritten.
 *
 * Operations served: the file and directory ones pulsed and LevelDB use
 * (open/create with O_TRUNC and O_APPEND, read, write, truncate, fallocate
 * (modes 0 and KEEP_SIZE), fsync, fsyncdir, mkdir, rmdir, unlink, rename
 * (and RENAME_NOREPLACE), symlink, readdir, statfs, chmod, chown, utimens).
 * Hard links are refused (EPERM): neither uses them. POSIX locks are left
 * to the kernel (no lock operation), which keeps them locally.
 */
#define FUSE_USE_VERSION 314

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/alloc.h"
#include "plfs.h"

struct plfs plfs = {.backing_fd = -1, .stash_fd = -1};

static volatile sig_atomic_t cut_requested, stop_requested;

/* An open file (its BACKING descriptor and inode) or directory (dir). */
struct handle {
    int fd;
    uint64_t ino;
    DIR *dir;
    struct handle *prev, *next; /* every open handle, freed at exit */
};

static struct handle *handles;

static struct handle *handle_of(const struct fuse_file_info *fi)
{
    return (struct handle *)(uintptr_t)fi->fh;
}

static void handle_link(struct handle *h, struct fuse_file_info *fi)
{
    h->next = handles;
    if (handles != NULL)
        handles->prev = h;
    handles = h;
    fi->fh = (uint64_t)(uintptr_t)h;
}

static void handle_free(struct handle *h)
{
    if (h->prev != NULL)
        h->prev->next = h->next;
    else
        handles = h->next;
    if (h->next != NULL)
        h->next->prev = h->prev;
    if (h->dir != NULL)
        closedir(h->dir);
    else
        close(h->fd);
    pulse_free(h);
}

/* The path below BACKING: "." for the root. */
static const char *rel(const char *path)
{
    return path[1] == '\0' ? "." : path + 1;
}

/* The stash is not part of the mounted view. */
static int hidden(const char *path)
{
    size_t n = strlen(PLFS_STASH);
    return path != NULL && strncmp(path + 1, PLFS_STASH, n) == 0 && (path[n + 1] == '\0' || path[n + 1] == '/');
}

/* Opens the directory that holds path; stores its inode in *ino. */
static int open_parent(const char *path, uint64_t *ino)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    size_t n = (size_t)(slash - path);
    if (n >= sizeof(dir))
        return -ENAMETOOLONG;
    memcpy(dir, path, n);
    dir[n] = '\0';
    int fd = openat(plfs.backing_fd, n == 0 ? "." : dir + 1, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int err = errno;
        close(fd);
        return -err;
    }
    *ino = (uint64_t)st.st_ino;
    return fd;
}

/* Records that the directory holding path is about to change; returns its
 * descriptor (the caller closes it) and inode. */
static int parent_change(const char *path, uint64_t *ino)
{
    int fd = open_parent(path, ino);
    if (fd < 0)
        return fd;
    int rc = plfs_dir_change(fd, *ino);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}

static const char *base(const char *path)
{
    return strrchr(path, '/') + 1;
}

static int op_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    if (fi != NULL)
        return fstat(handle_of(fi)->fd, st) < 0 ? -errno : 0;
    if (hidden(path))
        return -ENOENT;
    return fstatat(plfs.backing_fd, rel(path), st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static int op_readlink(const char *path, char *buf, size_t size)
{
    if (hidden(path))
        return -ENOENT;
    ssize_t n = readlinkat(plfs.backing_fd, rel(path), buf, size - 1);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return 0;
}

static int op_mkdir(const char *path, mode_t mode)
{
    if (hidden(path))
        return -EPERM;
    uint64_t parent;
    int dfd = parent_change(path, &parent);
    if (dfd < 0)
        return dfd;
    int rc = 0;
    struct stat st;
    if (mkdirat(dfd, base(path), mode) < 0 || fstatat(dfd, base(path), &st, AT_SYMLINK_NOFOLLOW) < 0)
        rc = -errno;
    else
        rc = plfs_dir_created((uint64_t)st.st_ino);
    close(dfd);
    return rc;
}

static int op_symlink(const char *target, const char *path)
{
    if (hidden(path))
        return -EPERM;
    uint64_t parent;
    int dfd = parent_change(path, &parent);
    if (dfd < 0)
        return dfd;
    int rc = symlinkat(target, dfd, base(path)) < 0 ? -errno : 0;
    close(dfd);
    return rc;
}

/* Moves name (in dir_fd) into the stash, where an undone removal finds it. */
static int stash(int dir_fd, const char *name, uint64_t ino)
{
    char sname[32];
    snprintf(sname, sizeof(sname), "i%" PRIu64, ino);
    return renameat(dir_fd, name, plfs.stash_fd, sname) < 0 ? -errno : 0;
}

/* Whether directory name in dir_fd is empty: 1, 0, or a negative errno. */
static int dir_empty(int dir_fd, const char *name)
{
    int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (d == NULL) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return -err;
    }
    int empty = 1;
    struct dirent *de;
    while (empty && (de = readdir(d)) != NULL)
        empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
    closedir(d);
    return empty;
}

/* unlink and rmdir: the entry goes into the stash instead of away. */
static int remove_entry(const char *path, int want_dir)
{
    if (hidden(path))
        return -ENOENT;
    uint64_t parent;
    int dfd = parent_change(path, &parent);
    if (dfd < 0)
        return dfd;
    struct stat st;
    int rc = 0;
    if (fstatat(dfd, base(path), &st, AT_SYMLINK_NOFOLLOW) < 0)
        rc = -errno;
    else if (want_dir && !S_ISDIR(st.st_mode))
        rc = -ENOTDIR;
    else if (!want_dir && S_ISDIR(st.st_mode))
        rc = -EISDIR;
    else if (want_dir && (rc = dir_empty(dfd, base(path))) >= 0)
        rc = rc ? 0 : -ENOTEMPTY;
    if (rc == 0)
        rc = stash(dfd, base(path), (uint64_t)st.st_ino);
    close(dfd);
    return rc;
}

static int op_unlink(const char *path)
{
    return remove_entry(path, 0);
}

static int op_rmdir(const char *path)
{
    return remove_entry(path, 1);
}

static int op_link(const char *from, const char *to)
{
    (void)from;
    (void)to;
    return -EPERM; /* neither pulsed nor LevelDB makes hard links */
}

/* The checks rename(2) makes when `to` exists (st_to) and replaces `from`. */
static int rename_target_ok(int to_fd, const char *to, const struct stat *st_from, const struct stat *st_to)
{
    if (S_ISDIR(st_from->st_mode) && !S_ISDIR(st_to->st_mode))
        return -ENOTDIR;
    if (!S_ISDIR(st_from->st_mode) && S_ISDIR(st_to->st_mode))
        return -EISDIR;
    if (S_ISDIR(st_to->st_mode)) {
        int empty = dir_empty(to_fd, to);
        if (empty <= 0)
            return empty < 0 ? empty : -ENOTEMPTY;
    }
    return 0;
}

/* Does the rename in BACKING, the replaced target going to the stash
 * first (and back if the rename fails). */
static int rename_in(int from_fd, const char *from, int to_fd, const char *to, unsigned int flags)
{
    struct stat st_from, st_to;
    if (fstatat(from_fd, from, &st_from, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    if (fstatat(to_fd, to, &st_to, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT)
            return -errno;
        return renameat(from_fd, from, to_fd, to) < 0 ? -errno : 0;
    }
    if (flags & RENAME_NOREPLACE)
        return -EEXIST;
    if (st_from.st_ino == st_to.st_ino)
        return 0;
    int rc = rename_target_ok(to_fd, to, &st_from, &st_to);
    if (rc == 0)
        rc = stash(to_fd, to, (uint64_t)st_to.st_ino);
    if (rc == 0 && renameat(from_fd, from, to_fd, to) < 0) {
        rc = -errno;
        char sname[32];
        snprintf(sname, sizeof(sname), "i%" PRIu64, (uint64_t)st_to.st_ino);
        (void)renameat(plfs.stash_fd, sname, to_fd, to);
    }
    return rc;
}

static int op_rename(const char *from, const char *to, unsigned int flags)
{
    if (hidden(from) || hidden(to))
        return -EPERM;
    if (flags & ~(unsigned int)RENAME_NOREPLACE)
        return -EINVAL; /* RENAME_EXCHANGE, RENAME_WHITEOUT: not used */
    uint64_t from_dir, to_dir;
    int from_fd = parent_change(from, &from_dir);
    if (from_fd < 0)
        return from_fd;
    int to_fd = parent_change(to, &to_dir);
    if (to_fd < 0) {
        close(from_fd);
        return to_fd;
    }
    int rc = rename_in(from_fd, base(from), to_fd, base(to), flags);
    if (rc == 0)
        rc = plfs_dir_tie(from_dir, to_dir);
    close(from_fd);
    close(to_fd);
    return rc;
}

static int op_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    if (fi != NULL)
        return fchmod(handle_of(fi)->fd, mode) < 0 ? -errno : 0;
    if (hidden(path))
        return -ENOENT;
    return fchmodat(plfs.backing_fd, rel(path), mode, 0) < 0 ? -errno : 0;
}

static int op_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
    if (fi != NULL)
        return fchown(handle_of(fi)->fd, uid, gid) < 0 ? -errno : 0;
    if (hidden(path))
        return -ENOENT;
    return fchownat(plfs.backing_fd, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static int op_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
    if (fi != NULL)
        return futimens(handle_of(fi)->fd, tv) < 0 ? -errno : 0;
    if (hidden(path))
        return -ENOENT;
    return utimensat(plfs.backing_fd, rel(path), tv, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

/* Truncates or extends the file open as fd, saving what it destroys. */
static int resize(int fd, uint64_t ino, off_t size)
{
    if (size < 0)
        return -EINVAL;
    int rc = plfs_file_resize(fd, ino, (uint64_t)size);
    if (rc < 0)
        return rc;
    return ftruncate(fd, size) < 0 ? -errno : 0;
}

static int op_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
    if (fi != NULL)
        return resize(handle_of(fi)->fd, handle_of(fi)->ino, size);
    if (hidden(path))
        return -ENOENT;
    int fd = openat(plfs.backing_fd, rel(path), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = fstat(fd, &st) < 0 ? -errno : resize(fd, (uint64_t)st.st_ino, size);
    close(fd);
    return rc;
}

/* Wraps fd (a BACKING file just opened for fi) in a handle; applies the
 * O_TRUNC the backing open left out. Closes fd on failure. */
static int handle_open(int fd, int trunc, struct fuse_file_info *fi)
{
    struct stat st;
    struct handle *h = NULL;
    struct plfs_node *node = NULL;
    int rc = fstat(fd, &st) < 0 ? -errno : 0;
    if (rc == 0 && (h = pulse_calloc(1, sizeof(*h))) == NULL)
        rc = -ENOMEM;
    if (rc == 0 && (node = plfs_node_get((uint64_t)st.st_ino)) == NULL)
        rc = -ENOMEM;
    if (rc == 0 && trunc)
        rc = resize(fd, (uint64_t)st.st_ino, 0);
    if (rc < 0) {
        plfs_node_release(node);
        pulse_free(h);
        close(fd);
        return rc;
    }
    node->open++;
    h->fd = fd;
    h->ino = (uint64_t)st.st_ino;
    handle_link(h, fi);
    return 0;
}

/* The flags for the BACKING open: always readable (a change first saves the
 * bytes it overwrites), no O_APPEND (writes come with the offset the kernel
 * chose), O_TRUNC done by plfs (it must save first), no O_DIRECT. */
static int backing_flags(int flags)
{
    flags &= ~(O_APPEND | O_TRUNC | O_DIRECT | O_CREAT | O_EXCL);
    if ((flags & O_ACCMODE) == O_WRONLY)
        flags = (flags & ~O_ACCMODE) | O_RDWR;
    return flags | O_NOFOLLOW | O_CLOEXEC;
}

static int op_open(const char *path, struct fuse_file_info *fi)
{
    if (hidden(path))
        return -ENOENT;
    int fd = openat(plfs.backing_fd, rel(path), backing_flags(fi->flags));
    if (fd < 0)
        return -errno;
    return handle_open(fd, (fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY, fi);
}

static int op_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    if (hidden(path))
        return -EPERM;
    struct stat st;
    if (fstatat(plfs.backing_fd, rel(path), &st, AT_SYMLINK_NOFOLLOW) == 0)
        return (fi->flags & O_EXCL) ? -EEXIST : op_open(path, fi);
    uint64_t parent;
    int dfd = parent_change(path, &parent);
    if (dfd < 0)
        return dfd;
    int fd = openat(dfd, base(path), backing_flags(fi->flags) | O_CREAT | O_EXCL, mode);
    int err = errno;
    close(dfd);
    if (fd < 0)
        return -err;
    return handle_open(fd, 0, fi);
}

static int op_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)path;
    ssize_t n = pread(handle_of(fi)->fd, buf, size, off);
    return n < 0 ? -errno : (int)n;
}

static int op_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)path;
    struct handle *h = handle_of(fi);
    int rc = plfs_file_change(h->fd, h->ino, (uint64_t)off, size);
    if (rc < 0)
        return rc;
    ssize_t n = pwrite(h->fd, buf, size, off);
    return n < 0 ? -errno : (int)n;
}

static int op_statfs(const char *path, struct statvfs *st)
{
    (void)path;
    return fstatvfs(plfs.backing_fd, st) < 0 ? -errno : 0;
}

static int op_release(const char *path, struct fuse_file_info *fi)
{
    (void)path;
    struct handle *h = handle_of(fi);
    struct plfs_node *node = plfs_node_find(h->ino);
    if (node != NULL && node->open > 0) {
        node->open--;
        plfs_node_release(node);
    }
    handle_free(h);
    return 0;
}

/* fsync and fdatasync alike make the file's bytes and size durable (its
 * name needs the directory's fsync). BACKING itself is not flushed: plfs is
 * the disk in this model, and a clean stop runs syncfs. */
static int op_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
    (void)path;
    (void)datasync;
    plfs_file_synced(handle_of(fi)->ino);
    return 0;
}

static int op_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
    (void)path;
    struct handle *h = handle_of(fi);
    if (mode & ~FALLOC_FL_KEEP_SIZE)
        return -EOPNOTSUPP; /* punching and zeroing: not used */
    struct stat st;
    if (fstat(h->fd, &st) < 0)
        return -errno;
    if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > st.st_size) {
        int rc = plfs_file_resize(h->fd, h->ino, (uint64_t)(off + len));
        if (rc < 0)
            return rc;
    }
    return fallocate(h->fd, mode, off, len) < 0 ? -errno : 0;
}

static int op_opendir(const char *path, struct fuse_file_info *fi)
{
    if (hidden(path))
        return -ENOENT;
    struct handle *h = pulse_calloc(1, sizeof(*h));
    if (h == NULL)
        return -ENOMEM;
    int fd = openat(plfs.backing_fd, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    h->dir = fd < 0 ? NULL : fdopendir(fd);
    if (h->dir == NULL) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        pulse_free(h);
        return -err;
    }
    h->fd = fd;
    handle_link(h, fi);
    return 0;
}

/* The whole listing in one call (offset 0: libfuse buffers it), without
 * the stash. */
static int op_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
                      enum fuse_readdir_flags flags)
{
    (void)off;
    (void)flags;
    (void)path; /* NULL: nullpath_ok */
    DIR *d = handle_of(fi)->dir;
    struct stat dst;
    if (fstat(dirfd(d), &dst) < 0)
        return -errno;
    int root = (uint64_t)dst.st_ino == plfs.root_ino;
    rewinddir(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (root && strcmp(de->d_name, PLFS_STASH) == 0)
            continue;
        struct stat st = {.st_ino = de->d_ino, .st_mode = (mode_t)DTTOIF(de->d_type)};
        if (fill(buf, de->d_name, &st, 0, 0) != 0)
            break;
    }
    return 0;
}

static int op_releasedir(const char *path, struct fuse_file_info *fi)
{
    (void)path;
    handle_free(handle_of(fi));
    return 0;
}

/* fsync of a directory: its entries are durable (not its files' bytes). */
static int op_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
    (void)path;
    (void)datasync;
    struct stat st;
    if (fstat(handle_of(fi)->fd, &st) < 0)
        return -errno;
    plfs_dir_synced((uint64_t)st.st_ino);
    return 0;
}

/* Inode numbers pass through (pulsed compares files by dev and inode); no
 * caching of names or attributes; an open file's unlink reaches plfs (which
 * stashes it) instead of becoming a rename to .fuse_hidden. */
static void *op_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
    (void)conn;
    cfg->use_ino = 1;
    cfg->readdir_ino = 1;
    cfg->entry_timeout = 0;
    cfg->attr_timeout = 0;
    cfg->negative_timeout = 0;
    cfg->hard_remove = 1;
    cfg->nullpath_ok = 1;
    printf("plfs: ready\n");
    fflush(stdout);
    return NULL;
}

static const struct fuse_operations ops = {
    .getattr = op_getattr,
    .readlink = op_readlink,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .symlink = op_symlink,
    .rename = op_rename,
    .link = op_link,
    .chmod = op_chmod,
    .chown = op_chown,
    .truncate = op_truncate,
    .open = op_open,
    .read = op_read,
    .write = op_write,
    .statfs = op_statfs,
    .release = op_release,
    .fsync = op_fsync,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .releasedir = op_releasedir,
    .fsyncdir = op_fsyncdir,
    .init = op_init,
    .create = op_create,
    .utimens = op_utimens,
    .fallocate = op_fallocate,
};

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        cut_requested = 1;
    stop_requested = 1;
}

struct options {
    const char *backing;
    const char *mountpoint;
};

static int usage(void)
{
    fprintf(stderr, "usage: plfs [--seed N] [--torn] [--verbose] BACKING MOUNTPOINT\n");
    return 1;
}

/* Reads our own options; libfuse gets none of them. */
static int parse(int argc, char **argv, struct options *o)
{
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--torn") == 0) {
            plfs.torn = 1;
        } else if (strcmp(argv[i], "--verbose") == 0) {
            plfs.verbose = 1;
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            plfs.seed = strtoull(argv[++i], &end, 10);
            if (errno != 0 || *end != '\0' || argv[i][0] == '\0') {
                fprintf(stderr, "plfs: --seed: not a number: %s\n", argv[i]);
                return -1;
            }
        } else {
            return usage() ? -1 : -1;
        }
    }
    if (argc - i != 2)
        return usage() ? -1 : -1;
    o->backing = argv[i];
    o->mountpoint = argv[i + 1];
    return 0;
}

/* Opens BACKING and a fresh stash (one left by a plfs that died is ours:
 * everything outside it is durable at mount time). */
static int open_backing(const char *backing)
{
    struct stat st;
    plfs.backing_fd = open(backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (plfs.backing_fd < 0 || fstat(plfs.backing_fd, &st) < 0) {
        fprintf(stderr, "plfs: open %s: %s\n", backing, strerror(errno));
        return -1;
    }
    plfs.root_ino = (uint64_t)st.st_ino;
    if (plfs_remove_tree(plfs.backing_fd, PLFS_STASH) < 0 || mkdirat(plfs.backing_fd, PLFS_STASH, 0700) < 0) {
        fprintf(stderr, "plfs: make %s/%s: %s\n", backing, PLFS_STASH, strerror(errno));
        return -1;
    }
    plfs.stash_fd = openat(plfs.backing_fd, PLFS_STASH, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (plfs.stash_fd < 0) {
        fprintf(stderr, "plfs: open %s/%s: %s\n", backing, PLFS_STASH, strerror(errno));
        return -1;
    }
    return 0;
}

/* SIGUSR1 (the cut) and SIGTERM, SIGINT, SIGHUP (a clean stop) are blocked
 * except inside the loop's ppoll, so a signal can neither land between the
 * check of stop_requested and the wait nor interrupt a request half read. */
static int set_signals(sigset_t *wait_mask)
{
    static const int sigs[] = {SIGUSR1, SIGTERM, SIGINT, SIGHUP};
    struct sigaction sa;
    sigset_t block;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        sigaddset(&block, sigs[i]);
        if (sigaction(sigs[i], &sa, NULL) < 0)
            return -1;
    }
    signal(SIGPIPE, SIG_IGN);
    return pthread_sigmask(SIG_BLOCK, &block, wait_mask) != 0 ? -1 : 0;
}

/* libfuse's loop ends on fuse_session_exit, and a session exited while a
 * request was being read drops that request: at a cut that was often the
 * release of a file the killed process held, leaking its handle. This loop
 * reads only when ppoll says a request waits and signals can only arrive in
 * ppoll. Returns 0 when stopped by a signal or an unmount, -1 on an error. */
static int serve_loop(struct fuse_session *se, const sigset_t *wait_mask)
{
    struct fuse_buf buf;
    memset(&buf, 0, sizeof(buf));
    int rc = 0;
    while (!stop_requested && !fuse_session_exited(se)) {
        struct pollfd pfd = {.fd = fuse_session_fd(se), .events = POLLIN};
        if (ppoll(&pfd, 1, NULL, wait_mask) < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "plfs: ppoll /dev/fuse: %s\n", strerror(errno));
            rc = -1;
            break;
        }
        int res = fuse_session_receive_buf(se, &buf);
        if (res == -EINTR || res == -EAGAIN)
            continue;
        if (res <= 0) {
            rc = res < 0 ? -1 : 0; /* 0: unmounted (ENODEV) */
            break;
        }
        fuse_session_process_buf(se, &buf);
    }
    free(buf.mem); /* libfuse's malloc */
    return rc;
}

/* Serves the requests already queued when a signal ended the loop: the
 * releases of files the killed process held, so their handles (ours and
 * libfuse's) are freed. New requests are not waited for. (Signals stay
 * blocked: none can interrupt this.) */
static void drain(struct fuse_session *se)
{
    struct fuse_buf buf;
    memset(&buf, 0, sizeof(buf));
    int fd = fuse_session_fd(se);
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return;
    while (!fuse_session_exited(se) && fuse_session_receive_buf(se, &buf) > 0)
        fuse_session_process_buf(se, &buf);
    free(buf.mem); /* libfuse's malloc */
}

/* Mounts, serves until a signal or an unmount, unmounts. */
static int serve(const struct options *o)
{
    char fsname[PATH_MAX + 16];
    snprintf(fsname, sizeof(fsname), "fsname=plfs:%s", o->backing);
    char *argv[] = {"plfs", "-o", fsname, NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, argv);
    struct fuse *fuse = fuse_new(&args, &ops, sizeof(ops), NULL);
    if (fuse == NULL) {
        fprintf(stderr, "plfs: fuse_new failed\n");
        return -1;
    }
    int rc = -1;
    if (fuse_mount(fuse, o->mountpoint) != 0) {
        fprintf(stderr, "plfs: cannot mount on %s\n", o->mountpoint);
        goto out;
    }
    sigset_t wait_mask;
    if (set_signals(&wait_mask) < 0) {
        fprintf(stderr, "plfs: signal handlers: %s\n", strerror(errno));
        fuse_unmount(fuse);
        goto out;
    }
    rc = serve_loop(fuse_get_session(fuse), &wait_mask);
    drain(fuse_get_session(fuse));
    fuse_unmount(fuse);
out:
    fuse_destroy(fuse);
    fuse_opt_free_args(&args);
    return rc;
}

static void close_handles(void)
{
    while (handles != NULL)
        handle_free(handles);
}

int main(int argc, char **argv)
{
    struct options o = {0};
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (parse(argc, argv, &o) < 0 || open_backing(o.backing) < 0)
        return 1;
    int rc = serve(&o);
    close_handles();
    if (rc == 0 || cut_requested)
        rc = cut_requested ? plfs_cut() : plfs_clean_stop();
    if (rc == 0 && cut_requested)
        fprintf(stderr, "plfs: power cut: %s holds the durable state\n", o.backing);
    plfs_state_free();
    close(plfs.stash_fd);
    close(plfs.backing_fd);
    return rc == 0 ? 0 : 1;
}
