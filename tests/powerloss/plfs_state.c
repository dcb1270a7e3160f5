/* SPDX-License-Identifier: MIT */
/*
 * plfs_state.c - what plfs knows is not durable yet (plfs.h, "Model").
 *
 * A table of nodes sorted by inode number holds, per file, the size at its
 * last fsync and the synced bytes of every page changed since (saved before
 * the change reaches BACKING, so memory grows with unsynced data only), and
 * per directory, its entries at its last fsync. A node lives while a handle
 * is open on it or it has something undurable; an fsync drops what it made
 * durable.
 *
 * Directories and renames. A directory's fsync makes its entries durable. A
 * rename between two directories is one journal transaction on the Linux
 * file systems (ext4, XFS, btrfs): it reaches the disk whole or not at all,
 * so syncing either directory makes it durable in both. plfs ties the two
 * directories and an fsync of one makes every directory tied to it,
 * transitively, durable (README.md, "Rules").
 */
#include "plfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"

static struct plfs_node **nodes;
static size_t nnodes, cap_nodes;

/* The index of ino in nodes, or where it would go. */
static size_t node_slot(uint64_t ino)
{
    size_t lo = 0, hi = nnodes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (nodes[mid]->ino < ino)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Grows *arr (of elem-sized items, *cap of them) to hold one more than n. */
static int grow(void *arr, size_t *cap, size_t n, size_t elem)
{
    void **p = arr;
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 16;
    void *q = pulse_realloc(*p, ncap * elem);
    if (q == NULL)
        return -ENOMEM;
    *p = q;
    *cap = ncap;
    return 0;
}

struct plfs_node *plfs_node_find(uint64_t ino)
{
    size_t i = node_slot(ino);
    return i < nnodes && nodes[i]->ino == ino ? nodes[i] : NULL;
}

/* The node of ino, created empty if there is none; NULL when out of memory. */
struct plfs_node *plfs_node_get(uint64_t ino)
{
    size_t i = node_slot(ino);
    if (i < nnodes && nodes[i]->ino == ino)
        return nodes[i];
    if (grow(&nodes, &cap_nodes, nnodes, sizeof(*nodes)) < 0)
        return NULL;
    struct plfs_node *node = pulse_calloc(1, sizeof(*node));
    if (node == NULL)
        return NULL;
    node->ino = ino;
    memmove(&nodes[i + 1], &nodes[i], (nnodes - i) * sizeof(*nodes));
    nodes[i] = node;
    nnodes++;
    return node;
}

static void clear_pages(struct plfs_node *node)
{
    for (size_t i = 0; i < node->npages; i++)
        pulse_free(node->pages[i].orig);
    pulse_free(node->pages);
    node->pages = NULL;
    node->npages = node->cap_pages = 0;
    node->file_dirty = 0;
}

static void clear_dents(struct plfs_node *node)
{
    for (size_t i = 0; i < node->ndents; i++)
        pulse_free(node->dents[i].name);
    pulse_free(node->dents);
    pulse_free(node->ties);
    node->dents = NULL;
    node->ties = NULL;
    node->ndents = node->cap_dents = node->nties = node->cap_ties = 0;
    node->dir_dirty = 0;
}

/* Frees node if nothing keeps it: no open handle, nothing undurable. */
void plfs_node_release(struct plfs_node *node)
{
    if (node == NULL || node->open || node->file_dirty || node->dir_dirty)
        return;
    size_t i = node_slot(node->ino);
    memmove(&nodes[i], &nodes[i + 1], (nnodes - i - 1) * sizeof(*nodes));
    nnodes--;
    clear_pages(node);
    clear_dents(node);
    pulse_free(node);
}

struct plfs_node *plfs_node_at(size_t i)
{
    return nodes[i];
}

size_t plfs_node_count(void)
{
    return nnodes;
}

void plfs_state_free(void)
{
    for (size_t i = 0; i < nnodes; i++) {
        clear_pages(nodes[i]);
        clear_dents(nodes[i]);
        pulse_free(nodes[i]);
    }
    pulse_free(nodes);
    nodes = NULL;
    nnodes = cap_nodes = 0;
}

/* Starts tracking a file at its first change since its last fsync: its
 * size now is its synced size, since every change passes through plfs. */
static struct plfs_node *file_node(int fd, uint64_t ino)
{
    struct plfs_node *node = plfs_node_get(ino);
    if (node == NULL || node->file_dirty)
        return node;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return NULL;
    node->synced_size = (uint64_t)st.st_size;
    node->file_dirty = 1;
    return node;
}

/* Records page index as changed, saving its synced bytes first. */
static int page_change(int fd, struct plfs_node *node, uint64_t index)
{
    size_t lo = 0, hi = node->npages;
    if (hi > 0 && node->pages[hi - 1].index < index)
        lo = hi; /* the common case: appending */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (node->pages[mid].index < index)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < node->npages && node->pages[lo].index == index)
        return 0;
    if (grow(&node->pages, &node->cap_pages, node->npages, sizeof(*node->pages)) < 0)
        return -ENOMEM;
    struct plfs_page page = {.index = index, .orig = NULL, .orig_len = 0};
    uint64_t start = index * PLFS_PAGE;
    if (start < node->synced_size) {
        uint64_t left = node->synced_size - start;
        page.orig_len = left < PLFS_PAGE ? (size_t)left : PLFS_PAGE;
        page.orig = pulse_malloc(page.orig_len);
        if (page.orig == NULL)
            return -ENOMEM;
        ssize_t got = pread(fd, page.orig, page.orig_len, (off_t)start);
        if (got != (ssize_t)page.orig_len) {
            int err = got < 0 ? errno : EIO;
            pulse_free(page.orig);
            return -err;
        }
    }
    memmove(&node->pages[lo + 1], &node->pages[lo], (node->npages - lo) * sizeof(*node->pages));
    node->pages[lo] = page;
    node->npages++;
    return 0;
}

/* Before bytes [off, off + len) of the file open as fd change. fd must be
 * readable. */
int plfs_file_change(int fd, uint64_t ino, uint64_t off, uint64_t len)
{
    if (len == 0)
        return 0;
    struct plfs_node *node = file_node(fd, ino);
    if (node == NULL)
        return -ENOMEM;
    for (uint64_t p = off / PLFS_PAGE; p <= (off + len - 1) / PLFS_PAGE; p++) {
        int rc = page_change(fd, node, p);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Before the file open as fd is truncated or extended to new_size: the
 * bytes between the old and the new end change. */
int plfs_file_resize(int fd, uint64_t ino, uint64_t new_size)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    uint64_t cur = (uint64_t)st.st_size;
    struct plfs_node *node = file_node(fd, ino);
    if (node == NULL)
        return -ENOMEM;
    if (cur == new_size)
        return 0;
    uint64_t lo = cur < new_size ? cur : new_size;
    uint64_t hi = cur < new_size ? new_size : cur;
    return plfs_file_change(fd, ino, lo, hi - lo);
}

/* fsync or fdatasync of the file: all its bytes and its size are durable. */
void plfs_file_synced(uint64_t ino)
{
    struct plfs_node *node = plfs_node_find(ino);
    if (node == NULL)
        return;
    clear_pages(node);
    plfs_node_release(node);
}

static int add_dent(struct plfs_node *node, const char *name, uint64_t ino, int is_dir)
{
    if (grow(&node->dents, &node->cap_dents, node->ndents, sizeof(*node->dents)) < 0)
        return -ENOMEM;
    char *copy = pulse_strdup(name);
    if (copy == NULL)
        return -ENOMEM;
    node->dents[node->ndents++] = (struct plfs_dent){.name = copy, .ino = ino, .is_dir = is_dir};
    return 0;
}

/* Reads the entries of the directory open as dir_fd into node->dents. */
static int read_dents(int dir_fd, struct plfs_node *node)
{
    int fd = dup(dir_fd);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        int err = errno;
        close(fd);
        return -err;
    }
    rewinddir(d);
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (node->ino == plfs.root_ino && strcmp(de->d_name, PLFS_STASH) == 0)
            continue;
        struct stat st;
        if (fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = -errno;
            break;
        }
        rc = add_dent(node, de->d_name, (uint64_t)st.st_ino, S_ISDIR(st.st_mode));
    }
    closedir(d);
    return rc;
}

/* Before an entry of the directory open as dir_fd is added, removed or
 * renamed: at its first change since its last fsync, its entries now are
 * its durable ones. */
int plfs_dir_change(int dir_fd, uint64_t dir_ino)
{
    struct plfs_node *node = plfs_node_get(dir_ino);
    if (node == NULL)
        return -ENOMEM;
    if (node->dir_dirty)
        return 0;
    int rc = read_dents(dir_fd, node);
    if (rc < 0) {
        clear_dents(node);
        plfs_node_release(node);
        return rc;
    }
    node->dir_dirty = 1;
    return 0;
}

/* A directory plfs just made: durable, it would be empty. */
int plfs_dir_created(uint64_t dir_ino)
{
    struct plfs_node *node = plfs_node_get(dir_ino);
    if (node == NULL)
        return -ENOMEM;
    clear_dents(node);
    node->dir_dirty = 1;
    return 0;
}

static int add_tie(struct plfs_node *node, uint64_t other)
{
    for (size_t i = 0; i < node->nties; i++)
        if (node->ties[i] == other)
            return 0;
    if (grow(&node->ties, &node->cap_ties, node->nties, sizeof(*node->ties)) < 0)
        return -ENOMEM;
    node->ties[node->nties++] = other;
    return 0;
}

/* A rename moved an entry from directory a to directory b (both already
 * passed plfs_dir_change). */
int plfs_dir_tie(uint64_t a, uint64_t b)
{
    struct plfs_node *na = plfs_node_find(a), *nb = plfs_node_find(b);
    if (a == b || na == NULL || nb == NULL)
        return 0;
    int rc = add_tie(na, b);
    return rc < 0 ? rc : add_tie(nb, a);
}

/* fsync of a directory: its entries, and those of every directory a rename
 * tied to it, are durable. */
void plfs_dir_synced(uint64_t dir_ino)
{
    uint64_t *todo = NULL;
    size_t ntodo = 0, cap = 0;
    struct plfs_node *node = plfs_node_find(dir_ino);
    if (node == NULL || !node->dir_dirty)
        return;
    /* Walk the ties first, clearing each directory once its ties are queued. */
    if (grow(&todo, &cap, ntodo, sizeof(*todo)) == 0)
        todo[ntodo++] = dir_ino;
    while (ntodo > 0) {
        node = plfs_node_find(todo[--ntodo]);
        if (node == NULL || !node->dir_dirty)
            continue;
        for (size_t i = 0; i < node->nties; i++)
            if (grow(&todo, &cap, ntodo, sizeof(*todo)) == 0)
                todo[ntodo++] = node->ties[i];
        clear_dents(node);
        plfs_node_release(node);
    }
    pulse_free(todo);
    plfs_stash_collect();
}

/* Whether some directory's durable entries name ino. */
int plfs_dir_referenced(uint64_t ino)
{
    for (size_t i = 0; i < nnodes; i++) {
        struct plfs_node *node = nodes[i];
        if (!node->dir_dirty)
            continue;
        for (size_t j = 0; j < node->ndents; j++)
            if (node->dents[j].ino == ino)
                return 1;
    }
    return 0;
}

/* Removes one stash entry no durable directory names and no handle holds;
 * returns 1 if it removed one. */
static int collect_one(void)
{
    int fd = dup(plfs.stash_fd);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    rewinddir(d);
    int removed = 0;
    struct dirent *de;
    while (!removed && (de = readdir(d)) != NULL) {
        unsigned long long ino;
        if (sscanf(de->d_name, "i%llu", &ino) != 1)
            continue;
        struct plfs_node *node = plfs_node_find(ino);
        if ((node != NULL && node->open) || plfs_dir_referenced(ino))
            continue;
        if (plfs_remove_tree(plfs.stash_fd, de->d_name) < 0)
            continue;
        if (node != NULL) {
            clear_pages(node);
            clear_dents(node);
            plfs_node_release(node);
        }
        removed = 1;
    }
    closedir(d);
    return removed;
}

/* Frees the stash of what can no longer come back: removing a directory
 * drops its durable entries, which may free more, hence the loop. */
void plfs_stash_collect(void)
{
    while (collect_one())
        ;
}
