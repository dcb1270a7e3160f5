/* SPDX-License-Identifier: MIT */
/*
 * plfs.h - the pieces of plfs (tests/powerloss/README.md) shared by its
 * three files: plfs.c (the FUSE operations and main), plfs_state.c (what is
 * not durable yet) and plfs_cut.c (the power cut and the clean stop).
 *
 * Model. BACKING always holds what the mounted view shows (write-through).
 * Beside it plfs keeps the undo information that turns BACKING into its
 * durable state: per file, the size at its last fsync and the bytes at that
 * fsync of every page changed since; per directory, its entries at its last
 * fsync (taken at its first change since); and the files and directories
 * removed or replaced since, kept in the stash directory BACKING/.plfs-stash
 * (hidden from the mount) under the name "i<inode number>", so an undone
 * unlink or rename has an inode to bring back. Inodes are named by their
 * BACKING inode number, which rename keeps. plfs refuses hard links, so an
 * inode has at most one name.
 *
 * Thread: plfs serves requests on one thread (fuse_loop); nothing here locks.
 */
#ifndef PULSE_TESTS_POWERLOSS_PLFS_H
#define PULSE_TESTS_POWERLOSS_PLFS_H

#include <stddef.h>
#include <stdint.h>

#define PLFS_PAGE 4096u
#define PLFS_STASH ".plfs-stash"

/* One page changed since the file's last fsync. */
struct plfs_page {
    uint64_t index;
    char *orig;      /* its bytes at the last fsync; NULL: it lay past the synced size */
    size_t orig_len; /* bytes in orig: the synced size cuts the last page short */
};

/* One directory entry as of the directory's last fsync. */
struct plfs_dent {
    char *name;
    uint64_t ino;
    int is_dir;
};

/* What plfs knows of one inode; exists while any of open, file_dirty,
 * dir_dirty is set. */
struct plfs_node {
    uint64_t ino;
    unsigned open; /* file handles open on it */
    int file_dirty;
    uint64_t synced_size;
    struct plfs_page *pages; /* sorted by index */
    size_t npages, cap_pages;
    int dir_dirty;
    struct plfs_dent *dents; /* the durable entries, when dir_dirty */
    size_t ndents, cap_dents;
    uint64_t *ties; /* directories a rename tied to this one since its last fsync */
    size_t nties, cap_ties;
};

/* The mount: BACKING and the stash, open for the whole run. */
struct plfs {
    int backing_fd;
    int stash_fd;
    uint64_t root_ino;
    int torn;
    uint64_t seed;
    int verbose;
};

extern struct plfs plfs;

/* plfs_state.c. Functions returning int return 0 or a negative errno. */
struct plfs_node *plfs_node_find(uint64_t ino);
struct plfs_node *plfs_node_get(uint64_t ino);
void plfs_node_release(struct plfs_node *node);
struct plfs_node *plfs_node_at(size_t i);
size_t plfs_node_count(void);
void plfs_state_free(void);

int plfs_file_change(int fd, uint64_t ino, uint64_t off, uint64_t len);
int plfs_file_resize(int fd, uint64_t ino, uint64_t new_size);
void plfs_file_synced(uint64_t ino);

int plfs_dir_change(int dir_fd, uint64_t dir_ino);
int plfs_dir_created(uint64_t dir_ino);
int plfs_dir_tie(uint64_t a, uint64_t b);
void plfs_dir_synced(uint64_t dir_ino);
int plfs_dir_referenced(uint64_t ino);
void plfs_stash_collect(void);

/* plfs_cut.c */
int plfs_cut(void);
int plfs_clean_stop(void);
int plfs_remove_tree(int dir_fd, const char *name);
uint64_t plfs_random(uint64_t *state);

#endif
