/* SPDX-License-Identifier: MIT */
/*
 * plfs_cut.c - the power cut and the clean stop of plfs, run on BACKING
 * after the mount is gone.
 *
 * The cut, in five steps:
 *   1. walk BACKING and the stash: every inode, where it is, and an open
 *      descriptor on every directory (so later renames need no paths);
 *   2. put every changed file back to its synced bytes and size (with
 *      --torn, keep a random prefix of its changed pages: README.md);
 *   3. work out the durable tree from the root: a directory changed since
 *      its fsync lists its saved entries, any other its present ones;
 *   4. move every entry into the stash as "i<ino>", then move each inode of
 *      the durable tree to its durable name (directories keep their inode,
 *      so the descriptors of step 1 stay valid throughout);
 *   5. delete what is left in the stash (never durable, or durably removed)
 *      and the stash itself.
 * A failure anywhere leaves BACKING half-restored: plfs says so and exits 1.
 */
#include "plfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"

/* One entry found by the walk, or one entry of the durable tree. */
struct ent {
    uint64_t parent; /* inode of its directory */
    char *name;
    uint64_t ino;
    int is_dir;
};

struct ents {
    struct ent *v;
    size_t n, cap;
};

/* A directory found by the walk and its descriptor. */
struct dirfd_ent {
    uint64_t ino;
    int fd;
};

/* found.v[idx] has inode ino: the index by inode, built after the walk. */
struct ino_idx {
    uint64_t ino;
    size_t idx;
};

struct walk {
    struct ents found;
    struct dirfd_ent *dirs; /* sorted by inode once the walk is done */
    size_t ndirs, cap_dirs;
    struct ino_idx *byino; /* found, sorted by inode */
    char *seen;            /* per found entry: already in the durable tree */
    uint64_t stash_ino;
};

uint64_t plfs_random(uint64_t *state)
{
    /* splitmix64: a seed gives the same tears every run. */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int ents_add(struct ents *e, uint64_t parent, const char *name, uint64_t ino, int is_dir)
{
    if (e->n == e->cap) {
        size_t ncap = e->cap ? e->cap * 2 : 64;
        struct ent *v = pulse_realloc(e->v, ncap * sizeof(*v));
        if (v == NULL)
            return -ENOMEM;
        e->v = v;
        e->cap = ncap;
    }
    char *copy = pulse_strdup(name);
    if (copy == NULL)
        return -ENOMEM;
    e->v[e->n++] = (struct ent){.parent = parent, .name = copy, .ino = ino, .is_dir = is_dir};
    return 0;
}

static void ents_free(struct ents *e)
{
    for (size_t i = 0; i < e->n; i++)
        pulse_free(e->v[i].name);
    pulse_free(e->v);
    e->v = NULL;
    e->n = e->cap = 0;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
    return a < b ? -1 : a > b;
}

static int cmp_dirfd(const void *a, const void *b)
{
    return cmp_u64(((const struct dirfd_ent *)a)->ino, ((const struct dirfd_ent *)b)->ino);
}

static int cmp_ino_idx(const void *a, const void *b)
{
    return cmp_u64(((const struct ino_idx *)a)->ino, ((const struct ino_idx *)b)->ino);
}

static int walk_dirfd(const struct walk *w, uint64_t ino)
{
    struct dirfd_ent key = {.ino = ino, .fd = -1};
    const struct dirfd_ent *d = bsearch(&key, w->dirs, w->ndirs, sizeof(*w->dirs), cmp_dirfd);
    return d != NULL ? d->fd : -1;
}

static int walk_add_dir(struct walk *w, uint64_t ino, int fd)
{
    if (w->ndirs == w->cap_dirs) {
        size_t ncap = w->cap_dirs ? w->cap_dirs * 2 : 32;
        struct dirfd_ent *v = pulse_realloc(w->dirs, ncap * sizeof(*v));
        if (v == NULL)
            return -ENOMEM;
        w->dirs = v;
        w->cap_dirs = ncap;
    }
    w->dirs[w->ndirs++] = (struct dirfd_ent){.ino = ino, .fd = fd};
    return 0;
}

static void walk_free(struct walk *w)
{
    ents_free(&w->found);
    for (size_t i = 0; i < w->ndirs; i++)
        close(w->dirs[i].fd);
    pulse_free(w->dirs);
    pulse_free(w->byino);
    pulse_free(w->seen);
}

/* The index in found of the entry of ino, or -1. */
static long walk_find(const struct walk *w, uint64_t ino)
{
    struct ino_idx key = {.ino = ino, .idx = 0};
    const struct ino_idx *x = bsearch(&key, w->byino, w->found.n, sizeof(*w->byino), cmp_ino_idx);
    return x != NULL ? (long)x->idx : -1;
}

/* Sorts what the walk found for lookups by inode. A second name for an
 * inode is a hard link: refused. */
static int walk_index(struct walk *w)
{
    qsort(w->dirs, w->ndirs, sizeof(*w->dirs), cmp_dirfd);
    w->byino = pulse_calloc(w->found.n + 1, sizeof(*w->byino));
    w->seen = pulse_calloc(w->found.n + 1, 1);
    if (w->byino == NULL || w->seen == NULL)
        return -1;
    for (size_t i = 0; i < w->found.n; i++)
        w->byino[i] = (struct ino_idx){.ino = w->found.v[i].ino, .idx = i};
    qsort(w->byino, w->found.n, sizeof(*w->byino), cmp_ino_idx);
    for (size_t i = 1; i < w->found.n; i++)
        if (w->byino[i].ino == w->byino[i - 1].ino) {
            fprintf(stderr, "plfs: cut: %s and %s are one inode (%" PRIu64 "): hard links are not supported\n",
                    w->found.v[w->byino[i - 1].idx].name, w->found.v[w->byino[i].idx].name, w->byino[i].ino);
            return -1;
        }
    return 0;
}

/* Records one entry of directory dir (open as dir_fd); opens it if it is a
 * directory. */
static int walk_entry(struct walk *w, uint64_t dir, int dir_fd, const char *name)
{
    struct stat st;
    if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        fprintf(stderr, "plfs: cut: stat %s: %s\n", name, strerror(errno));
        return -1;
    }
    if (ents_add(&w->found, dir, name, (uint64_t)st.st_ino, S_ISDIR(st.st_mode)) < 0)
        return -1;
    if (!S_ISDIR(st.st_mode))
        return 0;
    int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || walk_add_dir(w, (uint64_t)st.st_ino, fd) < 0) {
        fprintf(stderr, "plfs: cut: open directory %s: %s\n", name, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return 0;
}

/* Lists directory i of w->dirs (adding the directories it holds). */
static int walk_dir(struct walk *w, size_t i)
{
    uint64_t dir = w->dirs[i].ino;
    int fd = dup(w->dirs[i].fd);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (d == NULL) {
        fprintf(stderr, "plfs: cut: list directory %" PRIu64 ": %s\n", dir, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    rewinddir(d); /* the descriptor is a dup: it shares the offset */
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (dir == plfs.root_ino && strcmp(de->d_name, PLFS_STASH) == 0)
            continue;
        rc = walk_entry(w, dir, w->dirs[i].fd, de->d_name);
    }
    closedir(d);
    return rc;
}

/* Step 1: every inode under BACKING and in the stash. */
static int walk_all(struct walk *w)
{
    struct stat st;
    if (fstat(plfs.stash_fd, &st) < 0)
        return -1;
    w->stash_ino = (uint64_t)st.st_ino;
    int root = dup(plfs.backing_fd), stash = dup(plfs.stash_fd);
    if (root < 0 || stash < 0 || walk_add_dir(w, plfs.root_ino, root) < 0 || walk_add_dir(w, w->stash_ino, stash) < 0) {
        fprintf(stderr, "plfs: cut: %s\n", strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < w->ndirs; i++)
        if (walk_dir(w, i) < 0)
            return -1;
    return walk_index(w);
}

/* Step 2 for one file (open as fd): its synced bytes and size back, but
 * with --torn the first `keep` changed pages keep their new bytes. */
static int restore_file(int fd, const struct plfs_node *node, size_t keep)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -1;
    uint64_t cur = (uint64_t)st.st_size;
    if (keep == node->npages && keep > 0)
        return 0; /* every change reached the disk */
    uint64_t size = node->synced_size;
    for (size_t i = 0; i < node->npages; i++) {
        const struct plfs_page *p = &node->pages[i];
        uint64_t start = p->index * PLFS_PAGE;
        if (i < keep && start < cur) {
            uint64_t end = start + PLFS_PAGE < cur ? start + PLFS_PAGE : cur;
            size = end > size ? end : size;
        } else if (p->orig != NULL && pwrite(fd, p->orig, p->orig_len, (off_t)start) != (ssize_t)p->orig_len) {
            return -1;
        }
    }
    return ftruncate(fd, (off_t)size);
}

/* Step 2: every changed file that still exists. */
static int restore_files(const struct walk *w)
{
    uint64_t rng = plfs.seed;
    for (size_t i = 0; i < plfs_node_count(); i++) {
        const struct plfs_node *node = plfs_node_at(i);
        if (!node->file_dirty)
            continue;
        size_t keep = plfs.torn ? (size_t)(plfs_random(&rng) % (node->npages + 1)) : 0;
        long at = walk_find(w, node->ino);
        if (at < 0 || w->found.v[at].is_dir)
            continue; /* deleted for good: it cannot come back */
        const struct ent *e = &w->found.v[at];
        int fd = openat(walk_dirfd(w, e->parent), e->name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || restore_file(fd, node, keep) < 0) {
            fprintf(stderr, "plfs: cut: restore %s: %s\n", e->name, strerror(errno));
            if (fd >= 0)
                close(fd);
            return -1;
        }
        close(fd);
        if (plfs.verbose)
            fprintf(stderr, "plfs: cut: %s: size %" PRIu64 ", %zu of %zu changed pages kept\n", e->name,
                    node->synced_size, keep, node->npages);
    }
    return 0;
}

/* Adds the durable entries of directory dir to out. */
static int durable_dir(const struct walk *w, uint64_t dir, struct ents *out)
{
    const struct plfs_node *node = plfs_node_find(dir);
    if (node != NULL && node->dir_dirty) {
        for (size_t i = 0; i < node->ndents; i++)
            if (ents_add(out, dir, node->dents[i].name, node->dents[i].ino, node->dents[i].is_dir) < 0)
                return -1;
        return 0;
    }
    for (size_t i = 0; i < w->found.n; i++) {
        const struct ent *e = &w->found.v[i];
        if (e->parent == dir && ents_add(out, dir, e->name, e->ino, e->is_dir) < 0)
            return -1;
    }
    return 0;
}

/* Step 3: the durable tree, breadth first from the root. Every inode in it
 * must still exist (the stash keeps what a durable entry names). */
static int durable_tree(struct walk *w, struct ents *out)
{
    if (durable_dir(w, plfs.root_ino, out) < 0)
        return -1;
    for (size_t i = 0; i < out->n; i++) {
        const struct ent *e = &out->v[i];
        long at = walk_find(w, e->ino);
        if (at < 0) {
            fprintf(stderr, "plfs: cut: durable entry %s (inode %" PRIu64 ") has no inode left\n", e->name, e->ino);
            return -1;
        }
        if (w->seen[at]) {
            fprintf(stderr, "plfs: cut: inode %" PRIu64 " has two durable names (one is %s)\n", e->ino, e->name);
            return -1;
        }
        w->seen[at] = 1;
        if (e->is_dir && durable_dir(w, e->ino, out) < 0)
            return -1;
    }
    return 0;
}

static void stash_name(char *buf, size_t len, uint64_t ino)
{
    snprintf(buf, len, "i%" PRIu64, ino);
}

/* Step 4: every entry into the stash, then the durable tree out of it. */
static int rebuild(const struct walk *w, const struct ents *tree)
{
    char name[32];
    for (size_t i = 0; i < w->found.n; i++) {
        const struct ent *e = &w->found.v[i];
        if (e->parent == w->stash_ino)
            continue;
        stash_name(name, sizeof(name), e->ino);
        if (renameat(walk_dirfd(w, e->parent), e->name, plfs.stash_fd, name) < 0) {
            fprintf(stderr, "plfs: cut: move %s aside: %s\n", e->name, strerror(errno));
            return -1;
        }
    }
    for (size_t i = 0; i < tree->n; i++) {
        const struct ent *e = &tree->v[i];
        stash_name(name, sizeof(name), e->ino);
        int dir_fd = e->parent == plfs.root_ino ? plfs.backing_fd : walk_dirfd(w, e->parent);
        if (renameat(plfs.stash_fd, name, dir_fd, e->name) < 0) {
            fprintf(stderr, "plfs: cut: put back %s: %s\n", e->name, strerror(errno));
            return -1;
        }
    }
    return 0;
}

int plfs_cut(void)
{
    struct walk w = {0};
    struct ents tree = {0};
    int rc = -1;
    if (walk_all(&w) < 0 || restore_files(&w) < 0)
        goto out;
    if (durable_tree(&w, &tree) < 0 || rebuild(&w, &tree) < 0)
        goto out;
    rc = plfs_clean_stop();
    if (plfs.verbose)
        fprintf(stderr, "plfs: cut: %zu durable entries\n", tree.n);
out:
    ents_free(&tree);
    walk_free(&w);
    return rc;
}

/* Removes name (a file or a whole tree) from directory dir_fd. */
int plfs_remove_tree(int dir_fd, const char *name)
{
    struct stat st;
    if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlinkat(dir_fd, name, 0);
    int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            rc = plfs_remove_tree(dirfd(d), de->d_name);
    closedir(d);
    return rc < 0 ? rc : unlinkat(dir_fd, name, AT_REMOVEDIR);
}

/* The stash goes (everything in it was removed for good), and BACKING is
 * flushed like a clean shutdown's. */
int plfs_clean_stop(void)
{
    if (plfs_remove_tree(plfs.backing_fd, PLFS_STASH) < 0) {
        fprintf(stderr, "plfs: remove %s: %s\n", PLFS_STASH, strerror(errno));
        return -1;
    }
    if (syncfs(plfs.backing_fd) < 0) {
        fprintf(stderr, "plfs: syncfs: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}
