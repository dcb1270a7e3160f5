/* SPDX-License-Identifier: MIT */
/*
 * recoverytest.h - helpers shared by the files of check_recovery
 * (recoverytest.c), and the test cases each file contributes to the suite
 * (check_recovery.c). Built on plogtest.h (temporary directories,
 * recognisable records).
 */
#ifndef PULSE_TESTS_RECOVERYTEST_H
#define PULSE_TESTS_RECOVERYTEST_H

#include "plogtest.h"

#include <stdbool.h>
#include <sys/types.h>

#include "storage/damage.h"
#include "storage/index.h"
#include "storage/segment.h"

/* The io every log of these tests is opened with (main creates it). These
 * tests check what recovery decides, not that fsync reaches the disk
 * (check_fault does that): syncs are skipped to keep the exhaustive loops
 * fast. */
extern struct faultio *g_fio;

/* Whole-file image helpers. */
struct image {
    uint8_t *data;
    size_t len;
    bool exists;
};

/* Runs damage(dir, logp, i) for i in [from, to) on a fresh copy of the
 * log's files each time (snapshot: the given image, or none), then check. */
struct run {
    const char *dir;
    struct image log, idx;
    char logp[512], idxp[512], snapp[600];
};

/* Everything observable about a log. */
struct state {
    int64_t leo, hw, start;
    struct pulse_segment_info *segs;
    size_t nsegs;
    struct pulse_index_entry *entries;
    size_t nentries;
    struct pt_log recs;
};

/* Opens dir through g_fio with segments of seg bytes and this index
 * interval; rec (nullable) gets what recovery found. */
struct pulse_plog *open_rec(const char *dir, uint64_t seg, uint32_t interval, struct pulse_plog_recovery *rec);
/* Appends batches of `recs` records with value lengths varying by id. */
void fill(struct pulse_plog *plog, uint64_t *id, int batches, uint32_t recs, size_t vlen);
/* The log holds exactly ids 0..n-1 at offsets 0..n-1. */
void expect_ids(struct pulse_plog *plog, uint64_t n);
/* Whole-file images: load (exists false when the file is missing), store
 * (removes the file for an image that did not exist), free. */
void img_load(struct image *img, const char *path);
void img_store(const struct image *img, const char *path);
void img_free(struct image *img);
/* Removes what recovery leaves after finding damage (the record and the
 * forensic copies), so that every run of a loop starts from the same files. */
void forget_damage(const char *dir);
/* Files in dir/forensics. */
int forensic_copies(const char *dir);
/* The damage record of dir: *n entries (0 when there is none). */
struct pulse_damage *read_record(const char *dir, size_t *n);
/* Reads [from, HW) and checks that exactly the ids in want[0..n) come back
 * at their own offsets (id == offset here), and that every offset missing
 * from want was reported as skipped by the read that stepped over it. */
void expect_offsets(struct pulse_plog *plog, const int64_t *want, size_t n, bool skips_damaged);
/* Appends one batch of 2 records with ids equal to the offsets it must get. */
void append_expect(struct pulse_plog *plog, int64_t want_base);
/* Builds a one-segment log of n batches of 2 records (ids = offsets) with
 * this index interval, closed cleanly. snap_before_last (nullable) gets
 * the snapshot as it was before the last batch: it does not cover that
 * batch, as after a crash while it was being written. Returns the position
 * where batch `pos_of` starts. */
long long build_log(const char *dir, int n, uint32_t interval, struct image *snap_before_last, int pos_of);
/* After a torn last batch: cut back to it, offsets go on from 10. */
void reopen_expect_cut(const char *dir, long long cut_from, long long size);
/* struct run: init keeps images of the log and index files of dir's first
 * segment, reset restores them and the snapshot image (or none) and forgets
 * recorded damage, fini frees them. */
void run_init(struct run *r, const char *dir);
void run_reset(struct run *r, const struct image *snap);
void run_fini(struct run *r);
/* struct state: capture, free, and assert two are equal. */
void capture(struct pulse_plog *plog, struct state *s);
void state_free(struct state *s);
void state_eq(const struct state *a, const struct state *b);
/* A multi-segment log, closed cleanly (snapshot written). */
uint64_t build_multi(const char *dir);
/* The inode number of path (a replaced file gets a new one), 0 if none. */
ino_t inode_of(const char *path);
/* Copies the files of directory from into directory to. */
void copy_dir_files(const char *from, const char *to);

/* The test cases of each file, in check_recovery's order. */
TCase *recovery_tail_tcase(void);
TCase *recovery_snapshot_tcase(void);
TCase *recovery_damage_tcase(void);

#endif
