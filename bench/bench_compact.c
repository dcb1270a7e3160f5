/* SPDX-License-Identifier: MIT */
/*
 * bench_compact.c - cost of the storage maintenance passes.
 *
 * A program, not a test: it prints one JSON object per line.
 *
 *   compact    a log of --records records (default 1,000,000) over --keys
 *              distinct keys (default 100,000), 32-byte values, 100 records
 *              per appended batch, 16 MiB segments. One pass with the
 *              default config except no budget (every sealed segment in one
 *              pass) is timed; mb_s is sealed bytes processed (the
 *              dedupe scan reads the whole log, the rewrite the sealed part)
 *              per second. A second pass over the unchanged log shows the
 *              skip. maxrss_delta_kb is the growth of the process's peak
 *              resident size across the first pass (the dedupe map and the
 *              buffers).
 *   small      the case of tiny segments (4 KiB, --small-segment-bytes):
 *              --small-records records (default 140,000, about 2,800
 *              segments' worth) over --small-keys keys (default 1,000),
 *              32-byte values, 10 records per appended batch. One pass with
 *              the default config (the 1 GiB / 5 s budget) is timed, then
 *              passes run until one changes nothing; the segment counts and
 *              log sizes before and after are reported.
 *   retention  a log of 10,000 sealed segments of one small batch each
 *              (segment_max_bytes 1024), then one pulse_retention_apply that
 *              removes all of them; its wall time is reported.
 *
 * Everything lives under a mkdtemp() directory below --dir (default /tmp),
 * removed at the end. --quick divides the sizes by ten (and uses 1 MiB
 * segments so that the smaller log still has sealed ones). --only
 * compact,small,retention runs a subset.
 */
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "storage/batch.h"
#include "storage/compact.h"
#include "storage/plog.h"
#include "storage/retention.h"

#define PER_BATCH 100u
#define VALUE_BYTES 32u

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static long maxrss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng_state = x;
    return x;
}

/* The log keeps one descriptor open per sealed segment (two for the active
 * one): make room for nsegs of them, raising the limit when allowed. Returns
 * how many segments fit. */
static unsigned fit_descriptors(unsigned nsegs)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return nsegs;
    /* Root may raise the hard cap itself; others get the hard cap. */
    rlim_t want = (rlim_t)nsegs + 64;
    struct rlimit up = {want, want};
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want && setrlimit(RLIMIT_NOFILE, &up) == 0)
        rl = up;
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur != RLIM_INFINITY && (rlim_t)nsegs + 64 > rl.rlim_cur) {
        fprintf(stderr, "bench_compact: %u segments need %u descriptors; limit %llu: using %llu segments\n", nsegs,
                nsegs + 64, (unsigned long long)rl.rlim_cur, (unsigned long long)(rl.rlim_cur - 64));
        return (unsigned)(rl.rlim_cur - 64);
    }
    return nsegs;
}

static int open_log(const char *dir, uint64_t seg_bytes, struct pulse_plog **plog)
{
    struct pulse_plog_config cfg;
    pulse_plog_config_init(&cfg);
    cfg.segment_max_bytes = seg_bytes;
    /* Building the data set is not what is measured: sync once at the end. */
    cfg.sync_mode = PULSE_SYNC_INTERVAL;
    cfg.sync_interval_ms = 3600u * 1000u;
    return pulse_plog_open(dir, &cfg, plog, NULL) == PULSE_OK ? 0 : -1;
}

static int bench_compact(const char *root, uint64_t records, uint64_t keys, uint64_t seg_bytes)
{
    char dir[4200];
    struct pulse_plog *plog = NULL;
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    struct pulse_compact_result r1, r2;
    struct pulse_plog_stats before, after;
    struct pulse_record_in recs[PER_BATCH];
    char kbufs[PER_BATCH][24];
    uint8_t value[VALUE_BYTES];
    struct pulse_buf b;
    int64_t t0 = pulse_clock_wall_ms();
    long rss0, rss1;
    int rc = -1;

    snprintf(dir, sizeof dir, "%s/compact", root);
    if (open_log(dir, seg_bytes, &plog) != 0)
        return -1;
    pulse_buf_init(&b, 64u << 20);
    memset(value, 'v', sizeof value);
    for (uint64_t done = 0; done < records; done += PER_BATCH) {
        int64_t base = 0;
        memset(recs, 0, sizeof recs);
        for (unsigned i = 0; i < PER_BATCH; i++) {
            int kl = snprintf(kbufs[i], sizeof kbufs[i], "key-%" PRIu64, rng() % keys);
            recs[i].timestamp = t0;
            recs[i].key = (const uint8_t *)kbufs[i];
            recs[i].key_len = (uint32_t)kl;
            recs[i].value = value;
            recs[i].value_len = VALUE_BYTES;
        }
        pulse_buf_reset(&b);
        if (pulse_batch_encode(&b, 0, 0, recs, PER_BATCH) != PULSE_OK ||
            pulse_plog_append(plog, b.data, b.len, &base) != PULSE_OK)
            goto out;
    }
    if (pulse_plog_sync(plog) != PULSE_OK)
        goto out;
    pulse_plog_get_stats(plog, &before);
    pulse_compact_config_init(&cfg);
    cfg.max_bytes_per_pass = UINT64_MAX;
    cfg.max_pass_ms = 0;
    if (pulse_compact_create(&comp) != PULSE_OK)
        goto out;
    rss0 = maxrss_kb();
    if (pulse_compact_run(comp, plog, &cfg, pulse_clock_wall_ms(), &r1) != PULSE_OK)
        goto out;
    rss1 = maxrss_kb();
    if (pulse_compact_run(comp, plog, &cfg, pulse_clock_wall_ms(), &r2) != PULSE_OK)
        goto out;
    pulse_plog_get_stats(plog, &after);
    printf("{\"bench\":\"compact\",\"records\":%" PRIu64 ",\"keys\":%" PRIu64 ",\"value_bytes\":%u,"
           "\"segments\":%" PRIu32 ",\"segment_bytes\":%" PRIu64 ",\"log_bytes\":%" PRIu64 ",\"sealed_bytes\":%" PRIu64
           ",\"rewritten\":%" PRIu32 ",\"merged\":%" PRIu32 ",\"deleted\":%" PRIu32 ",\"gated\":%" PRIu32
           ",\"bytes_after\":%" PRIu64
           ",\"seconds\":%.3f,\"mb_s\":%.1f,\"maxrss_delta_kb\":%ld,\"second_pass_us\":%" PRId64
           ",\"log_bytes_after\":%" PRIu64 "}\n",
           records, keys, VALUE_BYTES, before.segments, seg_bytes, before.size_bytes, r1.bytes_before,
           r1.segments_rewritten, r1.segments_merged, r1.segments_deleted, r1.skipped_by_gain_gate, r1.bytes_after,
           (double)r1.duration_us / 1e6,
           r1.duration_us > 0 ? (double)r1.bytes_before / (1024.0 * 1024.0) / ((double)r1.duration_us / 1e6) : 0.0,
           rss1 - rss0, r2.duration_us, after.size_bytes);
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "bench_compact: compact workload failed\n");
    pulse_compact_destroy(comp);
    pulse_buf_fini(&b);
    pulse_plog_close(plog);
    return rc;
}

#define SMALL_PER_BATCH 10u

static int bench_small(const char *root, uint64_t records, uint64_t keys, uint64_t seg_bytes)
{
    char dir[4200];
    struct pulse_plog *plog = NULL;
    struct pulse_compact *comp = NULL;
    struct pulse_compact_config cfg;
    struct pulse_compact_result r1, r;
    struct pulse_plog_stats before, after;
    struct pulse_record_in recs[SMALL_PER_BATCH];
    char kbufs[SMALL_PER_BATCH][24];
    uint8_t value[VALUE_BYTES];
    struct pulse_buf b;
    int64_t t0 = pulse_clock_wall_ms(), more_us = 0;
    int passes = 1;
    int rc = -1;

    /* About 5 batches per 4 KiB segment. */
    (void)fit_descriptors((unsigned)(records / SMALL_PER_BATCH * (SMALL_PER_BATCH * 70 + 52) / seg_bytes) + 16);
    snprintf(dir, sizeof dir, "%s/small", root);
    if (open_log(dir, seg_bytes, &plog) != 0)
        return -1;
    pulse_buf_init(&b, 1u << 20);
    memset(value, 'v', sizeof value);
    for (uint64_t done = 0; done < records; done += SMALL_PER_BATCH) {
        int64_t base = 0;
        memset(recs, 0, sizeof recs);
        for (unsigned i = 0; i < SMALL_PER_BATCH; i++) {
            int kl = snprintf(kbufs[i], sizeof kbufs[i], "key-%" PRIu64, rng() % keys);
            recs[i].timestamp = t0;
            recs[i].key = (const uint8_t *)kbufs[i];
            recs[i].key_len = (uint32_t)kl;
            recs[i].value = value;
            recs[i].value_len = VALUE_BYTES;
        }
        pulse_buf_reset(&b);
        if (pulse_batch_encode(&b, 0, 0, recs, SMALL_PER_BATCH) != PULSE_OK ||
            pulse_plog_append(plog, b.data, b.len, &base) != PULSE_OK)
            goto out;
    }
    if (pulse_plog_sync(plog) != PULSE_OK)
        goto out;
    pulse_plog_get_stats(plog, &before);
    pulse_compact_config_init(&cfg);
    if (pulse_compact_create(&comp) != PULSE_OK)
        goto out;
    if (pulse_compact_run(comp, plog, &cfg, pulse_clock_wall_ms(), &r1) != PULSE_OK)
        goto out;
    pulse_plog_get_stats(plog, &after);
    /* Whatever the first pass left (its budget, or merges that became
     * possible only after it): run until a pass changes nothing. */
    do {
        if (pulse_compact_run(comp, plog, &cfg, pulse_clock_wall_ms(), &r) != PULSE_OK)
            goto out;
        more_us += r.duration_us;
        passes++;
    } while ((r.segments_rewritten > 0 || r.segments_deleted > 0 || r.budget_reached) && passes < 100);
    {
        struct pulse_plog_stats fin;
        pulse_plog_get_stats(plog, &fin);
        printf("{\"bench\":\"compact_small_segments\",\"records\":%" PRIu64 ",\"keys\":%" PRIu64
               ",\"value_bytes\":%u,\"segment_bytes\":%" PRIu64 ",\"segments_before\":%" PRIu32
               ",\"log_bytes_before\":%" PRIu64 ",\"pass_seconds\":%.3f,\"scanned\":%" PRIu32 ",\"rewritten\":%" PRIu32
               ",\"merged\":%" PRIu32 ",\"deleted\":%" PRIu32 ",\"budget_reached\":%s,\"segments_after\":%" PRIu32
               ",\"log_bytes_after\":%" PRIu64
               ",\"passes_to_converge\":%d,\"later_passes_seconds\":%.3f,\"segments_converged\":%" PRIu32
               ",\"log_bytes_converged\":%" PRIu64 "}\n",
               records, keys, VALUE_BYTES, seg_bytes, before.segments, before.size_bytes, (double)r1.duration_us / 1e6,
               r1.segments_scanned, r1.segments_rewritten, r1.segments_merged, r1.segments_deleted,
               r1.budget_reached ? "true" : "false", after.segments, after.size_bytes, passes, (double)more_us / 1e6,
               fin.segments, fin.size_bytes);
    }
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "bench_compact: small-segment workload failed\n");
    pulse_compact_destroy(comp);
    pulse_buf_fini(&b);
    pulse_plog_close(plog);
    return rc;
}

static int bench_retention(const char *root, unsigned nsegs)
{
    char dir[4200];
    struct pulse_plog *plog = NULL;
    struct pulse_retention_policy pol;
    struct pulse_retention_result res;
    struct pulse_record_in rec;
    uint8_t value[600];
    struct pulse_buf b;
    int64_t t0, t1, build0;
    unsigned requested = nsegs;
    int rc = -1;

    nsegs = fit_descriptors(nsegs);
    snprintf(dir, sizeof dir, "%s/retention", root);
    if (open_log(dir, 1024, &plog) != 0)
        return -1;
    pulse_buf_init(&b, 1u << 20);
    memset(value, 'r', sizeof value);
    memset(&rec, 0, sizeof rec);
    rec.key_len = PULSE_BATCH_NULL;
    rec.value = value;
    rec.value_len = sizeof value; /* one batch per 1024-byte segment */
    rec.timestamp = 1;
    build0 = pulse_clock_mono_us();
    for (unsigned i = 0; i <= nsegs; i++) {
        int64_t base = 0;
        pulse_buf_reset(&b);
        if (pulse_batch_encode(&b, 0, 0, &rec, 1) != PULSE_OK ||
            pulse_plog_append(plog, b.data, b.len, &base) != PULSE_OK)
            goto out;
    }
    if (pulse_plog_sync(plog) != PULSE_OK)
        goto out;
    pol.max_age_ms = 0;
    pol.max_bytes = 1; /* everything sealed goes */
    t0 = pulse_clock_mono_us();
    if (pulse_retention_apply(plog, &pol, pulse_clock_wall_ms(), &res) != PULSE_OK)
        goto out;
    t1 = pulse_clock_mono_us();
    printf("{\"bench\":\"retention\",\"segments_requested\":%u,\"segments_removed\":%zu,\"bytes_removed\":%" PRIu64
           ",\"seconds\":%.3f,\"segments_s\":%.0f,\"build_seconds\":%.1f}\n",
           requested, res.segments_removed, res.bytes_removed, (double)(t1 - t0) / 1e6,
           t1 > t0 ? (double)res.segments_removed / ((double)(t1 - t0) / 1e6) : 0.0, (double)(t0 - build0) / 1e6);
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "bench_compact: retention workload failed\n");
    pulse_buf_fini(&b);
    pulse_plog_close(plog);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {{"dir", required_argument, NULL, 'd'},
                                             {"quick", no_argument, NULL, 'q'},
                                             {"records", required_argument, NULL, 'n'},
                                             {"keys", required_argument, NULL, 'k'},
                                             {"segments", required_argument, NULL, 's'},
                                             {"small-records", required_argument, NULL, 'R'},
                                             {"small-keys", required_argument, NULL, 'K'},
                                             {"small-segment-bytes", required_argument, NULL, 'S'},
                                             {"only", required_argument, NULL, 'o'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *parent = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    uint64_t records = 1000000, keys = 100000;
    unsigned nsegs = 10000;
    uint64_t seg_bytes = 16ull * 1024 * 1024;
    uint64_t small_records = 140000, small_keys = 1000, small_seg = 4096;
    const char *only = "compact,small,retention";
    char root[4096];
    int c, rc = 0;

    while ((c = getopt_long(argc, argv, "d:qn:k:s:R:K:S:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'd':
            parent = optarg;
            break;
        case 'q':
            records = 100000;
            keys = 10000;
            nsegs = 1000;
            seg_bytes = 1024ull * 1024;
            small_records = 14000;
            break;
        case 'R':
            small_records = strtoull(optarg, NULL, 10);
            break;
        case 'K':
            small_keys = strtoull(optarg, NULL, 10);
            break;
        case 'S':
            small_seg = strtoull(optarg, NULL, 10);
            break;
        case 'o':
            only = optarg;
            break;
        case 'n':
            records = strtoull(optarg, NULL, 10);
            break;
        case 'k':
            keys = strtoull(optarg, NULL, 10);
            break;
        case 's':
            nsegs = (unsigned)strtoul(optarg, NULL, 10);
            break;
        default:
            fprintf(stderr, "usage: bench_compact [--dir DIR] [--quick] [--records N] [--keys N] [--segments N]\n"
                            "                     [--small-records N] [--small-keys N] [--small-segment-bytes N]\n"
                            "                     [--only compact,small,retention]\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (keys == 0 || records == 0 || small_keys == 0 || small_records == 0 || small_seg < 1024)
        return 2;
    pulse_log_set_level(PULSE_LOG_WARN);
    snprintf(root, sizeof root, "%s/pulse-bench-compact-XXXXXX", parent);
    if (mkdtemp(root) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    if (strstr(only, "compact") != NULL && bench_compact(root, records, keys, seg_bytes) != 0)
        rc = 1;
    if (strstr(only, "small") != NULL && bench_small(root, small_records, small_keys, small_seg) != 0)
        rc = 1;
    if (strstr(only, "retention") != NULL && bench_retention(root, nsegs) != 0)
        rc = 1;
    nftw(root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
