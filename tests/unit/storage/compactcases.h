/* SPDX-License-Identifier: MIT */
/*
 * compactcases.h - what the files of check_compact share beyond
 * compacttest.h: the segment size most of them use, running passes until
 * they converge, the log's shape (segments, the active one), a segment
 * file's bytes; and the test cases each file contributes to the suite
 * (check_compact.c).
 */
#ifndef PULSE_TESTS_COMPACTCASES_H
#define PULSE_TESTS_COMPACTCASES_H

#include <check.h>
#include <inttypes.h>
#include <stdio.h>

#include "common/alloc.h"
#include "storage/compact.h"
#include "storage/plog.h"

#include "compacttest.h"

#define SEG 1024

/* Runs passes until one commits nothing; returns the number of passes. */
static inline int converge(struct pulse_compact *comp, struct pulse_plog *plog, const struct pulse_compact_config *cfg,
                           int64_t now, int max_passes)
{
    for (int i = 1; i <= max_passes; i++) {
        struct pulse_compact_result res;
        ck_assert_int_eq(pulse_compact_run(comp, plog, cfg, now, &res), PULSE_OK);
        if (res.segments_rewritten == 0 && res.segments_deleted == 0 && res.segments_scanned == 0)
            return i;
    }
    return max_passes + 1;
}

static inline size_t nsegments(struct pulse_plog *plog)
{
    struct pulse_plog_stats st;
    pulse_plog_get_stats(plog, &st);
    return st.segments;
}

static inline void active_info(struct pulse_plog *plog, struct pulse_segment_info *out)
{
    struct pulse_segment_info *segs = NULL;
    size_t n = 0;
    ck_assert_int_eq(pulse_plog_list_segments(plog, &segs, &n), PULSE_OK);
    *out = segs[n - 1];
    pulse_free(segs);
}

static inline uint8_t *file_bytes(const char *dir, int64_t base, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%020" PRId64 ".log", dir, base);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = pulse_malloc(sz > 0 ? (size_t)sz : 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(fread(p, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *len = (size_t)sz;
    return p;
}

/* The test cases of each file, in check_compact's order. */
TCase *compact_survivors_tcase(void);
TCase *compact_segments_tcase(void);
TCase *compact_readers_tcase(void);
TCase *compact_merge_tcase(void);
TCase *compact_edits_tcase(void);

#endif
