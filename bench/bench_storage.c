/* SPDX-License-Identifier: MIT */
/*
 * bench_storage.c - throughput and recovery benchmark of the partition log,
 * measured against the disk's own limits in the same run.
 *
 * This is a program, not a test: it prints one JSON object per line, one per
 * measurement, with the keys bench, workload, mb_s, ops_s, ratio_to and ratio
 * (null where they do not apply) plus the parameters of the workload. Every
 * ratio is taken against a figure measured by this same process a few
 * seconds earlier, on the same file system, so that a slow or noisy machine
 * moves the numerator and the denominator together.
 *
 * Workloads (each selectable with --only):
 *   fdatasync  the bare limit of a durable small append: write() of exactly
 *              the bytes of a one-record batch, then fdatasync(), in a loop;
 *   seqwrite   the bare limit of bulk writing: 1 MiB write()s into a new
 *              file, one fdatasync() at the end (included in the time);
 *   append     pulse_plog_append of 256-byte records, 1/100/1000 per batch,
 *              every-write and interval sync, 1 and 8 appender threads;
 *   read       pulse_plog_read over a log in the page cache, with and without
 *              a second pulse_batch_verify of every batch by the reader, next
 *              to a bare pread (+ CRC32C) of the same segment files;
 *   recovery   pulse_plog_open of a cleanly closed log (snapshot fast path)
 *              and of the same log with its snapshot deleted (full scan), at
 *              two log sizes so that flatness can be seen;
 *   crc        CRC32C alone, in memory, by CPU time: each path (table, one
 *              hardware stream, three streams) on a one-record batch, a
 *              100-record batch and 1 MiB, and the combine.
 *
 * The disk-bound workloads (fdatasync, seqwrite, append) run in --rounds
 * rounds and are reported once, as medians; see struct disk_rounds. mb_s
 * counts bytes written to the log (batch headers and record framing
 * included), payload_mb_s only the 256-byte values, ops_s records.
 *
 * Only the public storage API (storage/plog.h, storage/batch.h) and common/
 * are used, so the figures are what a broker built on the engine can get.
 * Everything is written under a mkdtemp() directory below --dir (default
 * $TMPDIR or /tmp), removed at the end. Time-bounded loops stop at a deadline
 * or a byte cap, whichever comes first, so the whole run stays bounded.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/status.h"
#include "storage/batch.h"
#include "storage/plog.h"

#define RECORD_BYTES 256u
#define MIB (1024ull * 1024ull)
#define BATCH_BUF_MAX (64u * 1024u * 1024u)
#define READ_CHUNK MIB
#define MAX_THREADS 8u
#define MAX_LATENCIES (4u * 1024u * 1024u)

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BUILT_WITH_SANITIZERS 1
#else
#define BUILT_WITH_SANITIZERS 0
#endif

struct opts {
    const char *root; /* parent of the scratch directory */
    const char *only; /* comma-separated workload names, NULL = all */
    bool quick;
    double seconds;       /* per time-bounded workload */
    uint64_t append_cap;  /* bytes per append / seqwrite workload */
    uint64_t read_bytes;  /* size of the log read back */
    uint64_t recov_small; /* the two recovery log sizes */
    uint64_t recov_large;
    uint64_t segment_bytes; /* segment size of every log written here */
    unsigned rounds;        /* rounds of the disk-bound workloads */
};

/* Figures of the recovery workload that a later one is divided by; 0 until
 * measured. */
struct anchors {
    double snap_small_ms;
};

/* One measurement of one round; extra holds its JSON detail fields. */
struct sample {
    bool ok;
    double mb_s;
    double ops_s;
    char extra[640];
};

#define MAX_ROUNDS 9u
#define N_APPEND 12u /* 2 sync modes x 3 batch sizes x 2 thread counts */

/*
 * The disk-bound workloads run in rounds: every round measures the bare
 * limits and then every append configuration, so that a ratio is always
 * taken between figures measured seconds apart. The machine is shared and
 * its disk rate drifts by several times within a minute; the median of the
 * per-round ratios is robust to that drift where one long run each is not.
 */
struct disk_rounds {
    unsigned n;
    struct sample fsync[MAX_ROUNDS];
    struct sample seq[MAX_ROUNDS];
    struct sample app[N_APPEND][MAX_ROUNDS];
};

struct latencies {
    int64_t *us;
    size_t n;
    size_t cap;
};

static char scratch[PATH_MAX];

static double mb_per_s(uint64_t bytes, int64_t us)
{
    return us > 0 ? (double)bytes / 1e6 / ((double)us / 1e6) : 0.0;
}

static double per_s(uint64_t count, int64_t us)
{
    return us > 0 ? (double)count / ((double)us / 1e6) : 0.0;
}

/* A JSON number, or null for "not measured". */
static void put_num(const char *key, double v)
{
    if (isnan(v) || isinf(v))
        printf(",\"%s\":null", key);
    else
        printf(",\"%s\":%.3f", key, v);
}

/*
 * One measurement line. ratio_to NULL prints nulls for the ratio; target < 0
 * prints no target. extra is pre-formatted JSON fields (",\"k\":v..." or "").
 */
static void emit(const char *workload, double mb_s, double ops_s, const char *ratio_to, double ratio, double target,
                 const char *extra)
{
    printf("{\"bench\":\"storage\",\"workload\":\"%s\"", workload);
    put_num("mb_s", mb_s);
    put_num("ops_s", ops_s);
    if (ratio_to != NULL && ratio > 0) {
        printf(",\"ratio_to\":\"%s\"", ratio_to);
        put_num("ratio", ratio);
    } else {
        printf(",\"ratio_to\":null,\"ratio\":null");
    }
    if (target >= 0)
        put_num("target", target);
    printf("%s}\n", extra);
    fflush(stdout);
}

static bool selected(const struct opts *o, const char *name)
{
    if (o->only == NULL)
        return true;
    size_t n = strlen(name);
    const char *p = o->only;
    while (*p != '\0') {
        const char *e = strchr(p, ',');
        size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return true;
        if (e == NULL)
            break;
        p = e + 1;
    }
    return false;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a;
    int64_t y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

static void lat_add(struct latencies *lat, int64_t us)
{
    if (lat->n == lat->cap) {
        if (lat->cap >= MAX_LATENCIES)
            return;
        size_t cap = lat->cap ? lat->cap * 2 : 4096;
        int64_t *p = pulse_realloc(lat->us, cap * sizeof(*p));
        if (p == NULL)
            return; /* percentiles over what fits: good enough for a benchmark */
        lat->us = p;
        lat->cap = cap;
    }
    lat->us[lat->n++] = us;
}

/* Appends ",\"p50_us\":..,\"p99_us\":.." for the recorded latencies (sorts them). */
static void lat_format(struct latencies *lat, char *out, size_t outsz)
{
    if (lat->n == 0) {
        out[0] = '\0';
        return;
    }
    qsort(lat->us, lat->n, sizeof(*lat->us), cmp_i64);
    snprintf(out, outsz, ",\"p50_us\":%lld,\"p99_us\":%lld", (long long)lat->us[lat->n / 2],
             (long long)lat->us[(lat->n * 99) / 100]);
}

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    (void)ftw;
    if (remove(path) != 0)
        fprintf(stderr, "bench: remove %s: %s\n", path, strerror(errno));
    return 0;
}

static void rm_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* dir/name into out; a path that does not fit is fatal (the scratch root
 * came from the command line, so this is a usage error). */
static void join_path(char *out, size_t outsz, const char *dir, const char *name)
{
    int n = snprintf(out, outsz, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= outsz) {
        fprintf(stderr, "bench: path too long: %s/%s\n", dir, name);
        exit(2);
    }
}

static void path_in_scratch(char *out, size_t outsz, const char *name)
{
    join_path(out, outsz, scratch, name);
}

/* One batch of n 256-byte records (null key, no headers). */
static pulse_status_t make_batch(struct pulse_buf *out, size_t n)
{
    static uint8_t value[RECORD_BYTES];
    struct pulse_record_in *recs = NULL;
    pulse_status_t st = PULSE_OK;

    for (size_t i = 0; i < sizeof(value); i++)
        value[i] = (uint8_t)('a' + i % 26);
    recs = pulse_calloc(n, sizeof(*recs));
    if (recs == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    int64_t now = pulse_clock_wall_ms();
    for (size_t i = 0; i < n; i++) {
        recs[i].timestamp = now;
        recs[i].key = NULL;
        recs[i].key_len = PULSE_BATCH_NULL;
        recs[i].value = value;
        recs[i].value_len = RECORD_BYTES;
    }
    pulse_buf_reset(out);
    st = pulse_batch_encode(out, 0, 0, recs, n);
out:
    pulse_free(recs);
    return st;
}

static void plog_cfg(const struct opts *o, struct pulse_plog_config *cfg, enum pulse_sync_mode mode)
{
    pulse_plog_config_init(cfg);
    cfg->segment_max_bytes = o->segment_bytes;
    cfg->sync_mode = mode;
    /* sync_interval_ms stays at the engine default (1000 ms), as a broker
     * left at its defaults would run. */
}

/* ---- bare disk limits ------------------------------------------------- */

/*
 * write()+fdatasync() of len bytes per call into a new file, for the run's
 * duration: what one durable small append can cost at best. Appending (not
 * overwriting) matters: every call grows the file, so the file system must
 * journal the new size, exactly as a log append does.
 */
static pulse_status_t bench_fdatasync(const struct opts *o, size_t len, struct sample *out)
{
    char path[PATH_MAX];
    uint8_t *buf = NULL;
    struct latencies lat = {0};
    int fd = -1;
    pulse_status_t st = PULSE_OK;
    uint64_t calls = 0;

    path_in_scratch(path, sizeof(path), "bare-fdatasync");
    buf = pulse_malloc(len);
    if (buf == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    memset(buf, 'x', len);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int err = errno;
        fprintf(stderr, "bench: open %s: %s\n", path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    int64_t t0 = pulse_clock_mono_us();
    int64_t deadline = t0 + (int64_t)(o->seconds * 1e6);
    int64_t now = t0;
    while (now < deadline) {
        int64_t c0 = now;
        ssize_t w = write(fd, buf, len);
        if (w != (ssize_t)len) {
            int err = errno;
            fprintf(stderr, "bench: write %s: %s\n", path, w < 0 ? strerror(err) : "short write");
            st = w < 0 ? pulse_status_from_errno(err) : PULSE_IO;
            goto out;
        }
        if (fdatasync(fd) != 0) {
            int err = errno;
            fprintf(stderr, "bench: fdatasync %s: %s\n", path, strerror(err));
            st = pulse_status_from_errno(err);
            goto out;
        }
        now = pulse_clock_mono_us();
        lat_add(&lat, now - c0);
        calls++;
    }
    int64_t us = now - t0;
    char pct[96];
    lat_format(&lat, pct, sizeof(pct));
    out->ok = true;
    out->ops_s = per_s(calls, us);
    out->mb_s = mb_per_s(calls * len, us);
    snprintf(out->extra, sizeof(out->extra), ",\"bytes_per_call\":%zu,\"calls\":%llu,\"seconds\":%.2f%s", len,
             (unsigned long long)calls, (double)us / 1e6, pct);
out:
    if (fd >= 0)
        close(fd);
    unlink(path);
    pulse_free(lat.us);
    pulse_free(buf);
    return st;
}

/* 1 MiB write()s into a new file up to the byte cap, then one fdatasync;
 * the time includes that final sync, so this is the disk's sustained
 * sequential bandwidth, not the page cache's. */
static pulse_status_t bench_seqwrite(const struct opts *o, struct sample *out)
{
    char path[PATH_MAX];
    uint8_t *buf = NULL;
    int fd = -1;
    pulse_status_t st = PULSE_OK;
    uint64_t done = 0;

    path_in_scratch(path, sizeof(path), "bare-seqwrite");
    buf = pulse_malloc(MIB);
    if (buf == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    memset(buf, 'y', MIB);
    int64_t t0 = pulse_clock_mono_us();
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int err = errno;
        fprintf(stderr, "bench: open %s: %s\n", path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    while (done < o->append_cap) {
        ssize_t w = write(fd, buf, MIB);
        if (w != (ssize_t)MIB) {
            int err = errno;
            fprintf(stderr, "bench: write %s: %s\n", path, w < 0 ? strerror(err) : "short write");
            st = w < 0 ? pulse_status_from_errno(err) : PULSE_IO;
            goto out;
        }
        done += MIB;
    }
    if (fdatasync(fd) != 0) {
        int err = errno;
        fprintf(stderr, "bench: fdatasync %s: %s\n", path, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    int64_t us = pulse_clock_mono_us() - t0;
    out->ok = true;
    out->mb_s = mb_per_s(done, us);
    out->ops_s = per_s(done / MIB, us);
    snprintf(out->extra, sizeof(out->extra), ",\"bytes\":%llu,\"write_size\":%llu,\"seconds\":%.2f",
             (unsigned long long)done, (unsigned long long)MIB, (double)us / 1e6);
out:
    if (fd >= 0)
        close(fd);
    unlink(path);
    pulse_free(buf);
    return st;
}

/* ---- appends ------------------------------------------------------------ */

struct app_shared {
    struct pulse_plog *plog;
    pthread_mutex_t mu; /* guards go */
    pthread_cond_t cond;
    bool go; /* set once every thread exists: the clock starts */
    atomic_bool stop;
    atomic_uint_least64_t bytes;
    int64_t deadline_us; /* set by the main thread before the gate opens */
    uint64_t cap;
};

struct app_thread {
    struct app_shared *sh;
    pthread_t tid;
    size_t nrec;
    bool record_latency;
    uint64_t batches;
    uint64_t bytes;
    struct latencies lat;
    pulse_status_t st;
};

static void *appender(void *arg)
{
    struct app_thread *t = arg;
    struct app_shared *sh = t->sh;
    struct pulse_buf batch;

    pulse_buf_init(&batch, BATCH_BUF_MAX);
    t->st = make_batch(&batch, t->nrec);
    pthread_mutex_lock(&sh->mu);
    while (!sh->go)
        pthread_cond_wait(&sh->cond, &sh->mu);
    pthread_mutex_unlock(&sh->mu);
    if (t->st != PULSE_OK)
        goto out;
    while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
        int64_t c0 = pulse_clock_mono_us();
        int64_t base;
        /* The log rewrites baseOffset and the CRC in place, so one buffer
         * can be appended again and again. */
        t->st = pulse_plog_append(sh->plog, batch.data, batch.len, &base);
        if (t->st != PULSE_OK) {
            atomic_store(&sh->stop, true);
            break;
        }
        int64_t c1 = pulse_clock_mono_us();
        if (t->record_latency)
            lat_add(&t->lat, c1 - c0);
        t->batches++;
        t->bytes += batch.len;
        uint64_t total = atomic_fetch_add_explicit(&sh->bytes, batch.len, memory_order_relaxed) + batch.len;
        if (total >= sh->cap || c1 >= sh->deadline_us)
            atomic_store(&sh->stop, true);
    }
out:
    pulse_buf_fini(&batch);
    return NULL;
}

static const char *mode_name(enum pulse_sync_mode mode)
{
    return mode == PULSE_SYNC_EVERY_WRITE ? "every-write" : "interval";
}

/*
 * nthreads appenders on one log, each appending its own nrec-record batch
 * until the deadline or the byte cap. The clock stops after a final
 * pulse_plog_sync, so interval mode is charged for making its bytes durable
 * just as the bare sequential write is.
 */
static pulse_status_t bench_append_one(const struct opts *o, size_t nrec, enum pulse_sync_mode mode, unsigned nthreads,
                                       struct sample *out)
{
    char dir[PATH_MAX];
    char name[64];
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    struct app_shared sh;
    struct app_thread th[MAX_THREADS];
    unsigned started = 0;
    bool gate = false;
    pulse_status_t st = PULSE_OK;

    memset(th, 0, sizeof(th));
    snprintf(name, sizeof(name), "append-%zu-%s-%u", nrec, mode_name(mode), nthreads);
    path_in_scratch(dir, sizeof(dir), name);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        int err = errno;
        fprintf(stderr, "bench: mkdir %s: %s\n", dir, strerror(err));
        st = pulse_status_from_errno(err);
        goto out;
    }
    plog_cfg(o, &cfg, mode);
    st = pulse_plog_open(dir, &cfg, &plog, NULL);
    if (st != PULSE_OK) {
        fprintf(stderr, "bench: pulse_plog_open %s: %s\n", dir, pulse_status_name(st));
        goto out;
    }
    sh.plog = plog;
    sh.go = false;
    atomic_init(&sh.stop, false);
    atomic_init(&sh.bytes, 0);
    sh.cap = o->append_cap;
    sh.deadline_us = INT64_MAX;
    if (pthread_mutex_init(&sh.mu, NULL) != 0) {
        st = PULSE_NOMEM;
        goto out;
    }
    if (pthread_cond_init(&sh.cond, NULL) != 0) {
        pthread_mutex_destroy(&sh.mu);
        st = PULSE_NOMEM;
        goto out;
    }
    gate = true;
    for (unsigned i = 0; i < nthreads; i++) {
        th[i].sh = &sh;
        th[i].nrec = nrec;
        th[i].record_latency = nthreads == 1;
        if (pthread_create(&th[i].tid, NULL, appender, &th[i]) != 0) {
            fprintf(stderr, "bench: pthread_create failed\n");
            st = PULSE_NOMEM;
            goto out;
        }
        started++;
    }
    /* Every appender is parked on the gate; open it and start the clock. */
    pthread_mutex_lock(&sh.mu);
    int64_t t0 = pulse_clock_mono_us();
    sh.deadline_us = t0 + (int64_t)(o->seconds * 1e6);
    sh.go = true;
    pthread_cond_broadcast(&sh.cond);
    pthread_mutex_unlock(&sh.mu);
    for (unsigned i = 0; i < started; i++)
        pthread_join(th[i].tid, NULL);
    started = 0;
    pulse_status_t sst = pulse_plog_sync(plog);
    int64_t us = pulse_clock_mono_us() - t0;

    uint64_t batches = 0;
    uint64_t bytes = 0;
    for (unsigned i = 0; i < nthreads; i++) {
        batches += th[i].batches;
        bytes += th[i].bytes;
        if (th[i].st != PULSE_OK && st == PULSE_OK)
            st = th[i].st;
    }
    if (st == PULSE_OK)
        st = sst;
    if (st != PULSE_OK) {
        fprintf(stderr, "bench: append workload %s failed: %s\n", name, pulse_status_name(st));
        goto out;
    }
    uint64_t records = batches * nrec;
    double ops = per_s(records, us);
    double mb = mb_per_s(bytes, us);
    struct pulse_plog_stats stats;
    pulse_plog_get_stats(plog, &stats);

    char pct[96] = "";
    if (nthreads == 1)
        lat_format(&th[0].lat, pct, sizeof(pct));
    out->ok = true;
    out->mb_s = mb;
    out->ops_s = ops;
    snprintf(out->extra, sizeof(out->extra),
             ",\"batch_records\":%zu,\"record_bytes\":%u,\"sync\":\"%s\",\"sync_interval_ms\":%u,\"threads\":%u,"
             "\"batches_s\":%.1f,\"payload_mb_s\":%.3f,\"records\":%llu,\"log_bytes\":%llu,\"fdatasyncs\":%llu,"
             "\"seconds\":%.2f%s",
             nrec, RECORD_BYTES, mode_name(mode), cfg.sync_interval_ms, nthreads, per_s(batches, us),
             mb_per_s(records * RECORD_BYTES, us), (unsigned long long)records, (unsigned long long)bytes,
             (unsigned long long)stats.syncs, (double)us / 1e6, pct);
out:
    if (started > 0) {
        /* A thread failed to start: release the others without a clock. */
        atomic_store(&sh.stop, true);
        pthread_mutex_lock(&sh.mu);
        sh.go = true;
        pthread_cond_broadcast(&sh.cond);
        pthread_mutex_unlock(&sh.mu);
        for (unsigned i = 0; i < started; i++)
            pthread_join(th[i].tid, NULL);
    }
    for (unsigned i = 0; i < MAX_THREADS; i++)
        pulse_free(th[i].lat.us);
    if (gate) {
        pthread_cond_destroy(&sh.cond);
        pthread_mutex_destroy(&sh.mu);
    }
    pulse_status_t cst = pulse_plog_close(plog);
    if (st == PULSE_OK)
        st = cst;
    rm_tree(dir);
    return st;
}

static const size_t app_sizes[] = {1, 100, 1000};
static const enum pulse_sync_mode app_modes[] = {PULSE_SYNC_EVERY_WRITE, PULSE_SYNC_INTERVAL};
static const unsigned app_threads[] = {1, MAX_THREADS};

/* Index of an append configuration in struct disk_rounds. */
static size_t app_index(size_t m, size_t s, size_t t)
{
    return m * 6 + s * 2 + t;
}

/* One round of the selected disk-bound workloads. */
static pulse_status_t run_round(const struct opts *o, struct disk_rounds *dr, size_t one_len)
{
    unsigned r = dr->n;
    pulse_status_t st = PULSE_OK;

    /* Each limit runs right before the workloads compared with it:
     * fdatasync before every-write, the sequential write before interval. */
    for (size_t m = 0; m < 2; m++) {
        if (m == 0 && selected(o, "fdatasync") && bench_fdatasync(o, one_len, &dr->fsync[r]) != PULSE_OK)
            st = PULSE_IO;
        if (m == 1 && selected(o, "seqwrite") && bench_seqwrite(o, &dr->seq[r]) != PULSE_OK)
            st = PULSE_IO;
        /* append1: only the one-record every-write appends (t1 and t8),
         * the group-commit pair, for interleaved runs of two builds. */
        bool one = m == 0 && selected(o, "append1");
        if (!selected(o, "append") && !one)
            continue;
        for (size_t s = 0; s < (selected(o, "append") ? 3u : 1u); s++)
            for (size_t t = 0; t < 2; t++)
                if (bench_append_one(o, app_sizes[s], app_modes[m], app_threads[t], &dr->app[app_index(m, s, t)][r]) !=
                    PULSE_OK)
                    st = PULSE_IO;
    }
    dr->n++;
    return st;
}

static double median_of(double *v, unsigned n)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * Emits one line for a workload measured in rounds: medians of mb_s and
 * ops_s, and the median of the per-round ratios num/den where den is given
 * (use_mb picks MB/s rather than ops/s for the ratio). The detail fields are
 * those of the last round.
 */
static void report_rounds(const char *workload, const struct sample *smp, unsigned n, const struct sample *den,
                          bool use_mb, const char *ratio_to, double target)
{
    double mb[MAX_ROUNDS];
    double ops[MAX_ROUNDS];
    double ratio[MAX_ROUNDS];
    unsigned k = 0;
    unsigned kr = 0;
    const char *extra = "";
    char more[256];

    for (unsigned r = 0; r < n; r++) {
        if (!smp[r].ok)
            continue;
        mb[k] = smp[r].mb_s;
        ops[k] = smp[r].ops_s;
        k++;
        extra = smp[r].extra;
        if (den != NULL && den[r].ok) {
            double d = use_mb ? den[r].mb_s : den[r].ops_s;
            double v = use_mb ? smp[r].mb_s : smp[r].ops_s;
            if (d > 0)
                ratio[kr++] = v / d;
        }
    }
    if (k == 0)
        return;
    double mb_med = median_of(mb, k);
    double ops_med = median_of(ops, k);
    double r_med = median_of(ratio, kr);
    snprintf(more, sizeof(more), ",\"rounds\":%u,\"ops_s_min\":%.1f,\"ops_s_max\":%.1f", k, ops[0], ops[k - 1]);
    if (kr > 0) {
        size_t len = strlen(more);
        snprintf(more + len, sizeof(more) - len, ",\"ratio_min\":%.3f,\"ratio_max\":%.3f", ratio[0], ratio[kr - 1]);
    }
    char all[1024];
    snprintf(all, sizeof(all), "%s%s,\"detail\":\"last round\"", more, extra);
    emit(workload, mb_med, ops_med, kr > 0 ? ratio_to : NULL, kr > 0 ? r_med : 0, target, all);
}

static void report_disk(const struct disk_rounds *dr)
{
    report_rounds("bare_fdatasync_loop", dr->fsync, dr->n, NULL, false, NULL, -1);
    report_rounds("bare_sequential_write", dr->seq, dr->n, NULL, false, NULL, -1);
    for (size_t m = 0; m < 2; m++)
        for (size_t s = 0; s < 3; s++)
            for (size_t t = 0; t < 2; t++) {
                size_t nrec = app_sizes[s];
                const struct sample *smp = dr->app[app_index(m, s, t)];
                char workload[96];
                char base[96];
                snprintf(workload, sizeof(workload), "append_%zux%u_%s_t%u", nrec, RECORD_BYTES,
                         mode_name(app_modes[m]), app_threads[t]);
                snprintf(base, sizeof(base), "append_%zux%u_%s_t1", nrec, RECORD_BYTES, mode_name(app_modes[m]));
                if (app_modes[m] == PULSE_SYNC_EVERY_WRITE && t == 0 && nrec == 1)
                    /* The same bytes per durable call as the bare loop. */
                    report_rounds(workload, smp, dr->n, dr->fsync, false, "bare_fdatasync_loop", 0.8);
                else if (app_modes[m] == PULSE_SYNC_EVERY_WRITE && t == 1)
                    /* Group commit: what 8 appenders gain over one. */
                    report_rounds(workload, smp, dr->n, dr->app[app_index(m, s, 0)], false, base, nrec == 1 ? 4.0 : -1);
                else
                    report_rounds(workload, smp, dr->n, dr->seq, true, "bare_sequential_write",
                                  app_modes[m] == PULSE_SYNC_INTERVAL && nrec == 1000 && t == 0 ? 0.7 : -1);
            }
}

/* ---- sequential read ---------------------------------------------------- */

#define READ_PASSES 7 /* rounds of the four read passes */

/* CPU time (user + system) of the calling thread, in microseconds: what
 * a pass cost, whatever other tenants took of the wall clock. */
static int64_t thread_cpu_us(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return 0;
    return (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec + (int64_t)ru.ru_stime.tv_sec * 1000000 +
           ru.ru_stime.tv_usec;
}

/* Fills an open log with 100-record batches up to bytes, then syncs. */
static pulse_status_t fill_log(struct pulse_plog *plog, uint64_t bytes, size_t nrec)
{
    struct pulse_buf batch;
    pulse_status_t st = PULSE_OK;
    uint64_t done = 0;

    pulse_buf_init(&batch, BATCH_BUF_MAX);
    st = make_batch(&batch, nrec);
    if (st != PULSE_OK)
        goto out;
    while (done < bytes) {
        int64_t base;
        st = pulse_plog_append(plog, batch.data, batch.len, &base);
        if (st != PULSE_OK) {
            fprintf(stderr, "bench: pulse_plog_append: %s\n", pulse_status_name(st));
            goto out;
        }
        done += batch.len;
    }
    st = pulse_plog_sync(plog);
out:
    pulse_buf_fini(&batch);
    return st;
}

/* Reads the whole log from its start in 1 MiB slices; with verify, the
 * reader also runs pulse_batch_verify over every batch it got. */
static pulse_status_t read_pass(struct pulse_plog *plog, bool verify, uint64_t *bytes_out, uint64_t *batches_out,
                                int64_t *us_out)
{
    struct pulse_buf buf;
    pulse_status_t st = PULSE_OK;
    uint64_t bytes = 0;
    uint64_t batches = 0;
    int64_t off = pulse_plog_log_start(plog);
    int64_t hw = pulse_plog_high_watermark(plog);

    pulse_buf_init(&buf, BATCH_BUF_MAX);
    int64_t t0 = pulse_clock_mono_us();
    while (off < hw) {
        struct pulse_slice info;
        pulse_buf_reset(&buf);
        st = pulse_plog_read(plog, off, READ_CHUNK, &buf, &info);
        if (st != PULSE_OK) {
            fprintf(stderr, "bench: pulse_plog_read at %lld: %s\n", (long long)off, pulse_status_name(st));
            goto out;
        }
        if (buf.len == 0 || info.next_offset <= off) {
            fprintf(stderr, "bench: read made no progress at %lld\n", (long long)off);
            st = PULSE_CORRUPT;
            goto out;
        }
        if (verify) {
            size_t pos = 0;
            while (pos < buf.len) {
                struct pulse_batch_header hdr;
                st = pulse_batch_verify(buf.data + pos, buf.len - pos, &hdr, NULL);
                if (st != PULSE_OK) {
                    fprintf(stderr, "bench: batch at %lld+%zu fails: %s\n", (long long)off, pos, pulse_status_name(st));
                    goto out;
                }
                pos += pulse_batch_total_size(&hdr);
                batches++;
            }
        }
        bytes += buf.len;
        off = info.next_offset;
    }
    *us_out = pulse_clock_mono_us() - t0;
    *bytes_out = bytes;
    *batches_out = batches;
out:
    pulse_buf_fini(&buf);
    return st;
}

/* The bare limit for reading: pread() of the same segment files in 1 MiB
 * chunks, optionally with CRC32C over every chunk (what verification costs
 * at least). */
static pulse_status_t bare_read_pass(const char *dir, bool crc, uint64_t *bytes_out, int64_t *us_out)
{
    DIR *d = NULL;
    uint8_t *buf = NULL;
    pulse_status_t st = PULSE_OK;
    uint64_t bytes = 0;
    uint32_t sum = 0;

    buf = pulse_malloc(READ_CHUNK);
    d = opendir(dir);
    if (buf == NULL || d == NULL) {
        st = buf == NULL ? PULSE_NOMEM : PULSE_IO;
        goto out;
    }
    int64_t t0 = pulse_clock_mono_us();
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 4, ".log") != 0)
            continue;
        char path[PATH_MAX];
        join_path(path, sizeof(path), dir, de->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        off_t pos = 0;
        for (;;) {
            ssize_t r = pread(fd, buf, READ_CHUNK, pos);
            if (r <= 0)
                break;
            if (crc)
                sum ^= pulse_crc32c(0, buf, (size_t)r);
            pos += r;
            bytes += (uint64_t)r;
        }
        close(fd);
    }
    *us_out = pulse_clock_mono_us() - t0;
    *bytes_out = bytes;
    /* Keeps the compiler from dropping the CRC work. */
    if (sum == 0x12345678u)
        fprintf(stderr, "bench: (crc coincidence)\n");
out:
    if (d != NULL)
        closedir(d);
    pulse_free(buf);
    return st;
}

static pulse_status_t bench_read(const struct opts *o)
{
    char dir[PATH_MAX];
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    pulse_status_t st = PULSE_OK;
    char extra[512];

    path_in_scratch(dir, sizeof(dir), "read");
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        st = pulse_status_from_errno(errno);
        goto out;
    }
    plog_cfg(o, &cfg, PULSE_SYNC_INTERVAL);
    st = pulse_plog_open(dir, &cfg, &plog, NULL);
    if (st != PULSE_OK)
        goto out;
    st = fill_log(plog, o->read_bytes, 100);
    if (st != PULSE_OK)
        goto out;

    /* READ_PASSES rounds after one warm-up pass, each running the four
     * passes back to back: the log was just written so it is in the page
     * cache; what is measured is the engine's slicing, copying and CRC
     * work, not the disk. mb_s is the best pass; ratio is the median of
     * the rounds' ratios, each taken between passes run next to each other,
     * which load from other tenants moves much less than the best passes. */
    uint64_t bytes = 0;
    uint64_t batches = 0;
    int64_t us = 0;
    st = read_pass(plog, true, &bytes, &batches, &us);
    if (st != PULSE_OK)
        goto out;

    double mb[4][READ_PASSES];
    double cpu[4][READ_PASSES]; /* CPU microseconds of the pass */
    double best[4] = {0, 0, 0, 0};
    double best_batches = 0;
    for (int r = 0; r < READ_PASSES; r++) {
        for (int k = 0; k < 4; k++) {
            int64_t c0 = thread_cpu_us();
            st = k < 2 ? bare_read_pass(dir, k == 1, &bytes, &us) : read_pass(plog, k == 3, &bytes, &batches, &us);
            if (st != PULSE_OK)
                goto out;
            cpu[k][r] = (double)(thread_cpu_us() - c0);
            mb[k][r] = mb_per_s(bytes, us);
            if (mb[k][r] > best[k]) {
                best[k] = mb[k][r];
                if (k == 3)
                    best_batches = per_s(batches, us);
            }
        }
    }
    double ratio[4][READ_PASSES];
    double cpu_ratio[4][READ_PASSES]; /* the same ratios by CPU time */
    for (int r = 0; r < READ_PASSES; r++) {
        ratio[1][r] = mb[0][r] > 0 ? mb[1][r] / mb[0][r] : 0;
        ratio[2][r] = mb[1][r] > 0 ? mb[2][r] / mb[1][r] : 0;
        ratio[3][r] = mb[1][r] > 0 ? mb[3][r] / mb[1][r] : 0;
        for (int k = 2; k < 4; k++)
            cpu_ratio[k][r] = cpu[k][r] > 0 ? cpu[1][r] / cpu[k][r] : 0;
    }
    snprintf(extra, sizeof(extra), ",\"bytes\":%llu,\"chunk\":%llu,\"passes\":%d", (unsigned long long)bytes,
             (unsigned long long)READ_CHUNK, READ_PASSES);
    emit("bare_pread", best[0], NAN, NULL, 0, -1, extra);
    emit("bare_pread_crc32c", best[1], NAN, "bare_pread", median_of(ratio[1], READ_PASSES), -1, extra);
    for (int verify = 0; verify < 2; verify++) {
        snprintf(extra, sizeof(extra),
                 ",\"bytes\":%llu,\"max_bytes\":%llu,\"batch_records\":100,\"target_mb_s\":2000,"
                 "\"reader_verifies\":%s,\"passes\":%d,\"cpu_ratio\":%.3f,\"cpu_ms\":%.1f,\"bare_crc_cpu_ms\":%.1f",
                 (unsigned long long)bytes, (unsigned long long)READ_CHUNK, verify ? "true" : "false", READ_PASSES,
                 median_of(cpu_ratio[2 + verify], READ_PASSES), median_of(cpu[2 + verify], READ_PASSES) / 1000.0,
                 median_of(cpu[1], READ_PASSES) / 1000.0);
        emit(verify ? "read_verify_sequential" : "read_sequential", best[2 + verify], verify ? best_batches : NAN,
             "bare_pread_crc32c", median_of(ratio[2 + verify], READ_PASSES), verify ? -1 : 0.9, extra);
    }
out:
    if (st != PULSE_OK)
        fprintf(stderr, "bench: read workload failed: %s\n", pulse_status_name(st));
    pulse_status_t cst = pulse_plog_close(plog);
    if (st == PULSE_OK)
        st = cst;
    rm_tree(dir);
    return st;
}

/* ---- crc ----------------------------------------------------------------- */

/* MB/s of CPU time of one CRC32C path over len bytes, repeated for about
 * seconds of this thread's CPU. */
static double crc_rate(uint32_t (*fn)(uint32_t, const void *, size_t), const uint8_t *buf, size_t len, double seconds)
{
    uint64_t bytes = 0;
    uint32_t c = 0;
    int64_t t0 = thread_cpu_us(), t;
    do {
        for (int i = 0; i < 64; i++)
            c = fn(c, buf, len);
        bytes += 64 * (uint64_t)len;
        t = thread_cpu_us() - t0;
    } while (t < (int64_t)(seconds * 1e6));
    if (c == 0x12345678u)
        fprintf(stderr, "bench: (crc coincidence)\n");
    return (double)bytes / (double)t;
}

static pulse_status_t bench_crc(const struct opts *o)
{
    /* What the CRC covers of a 1-record and a 100-record batch of 256-byte
     * values, and 1 MiB. */
    static const size_t lens[] = {325, 28144, (size_t)1 << 20};
    const double secs = o->quick ? 0.1 : 0.5;
    uint8_t *buf = pulse_malloc(lens[2]);
    char name[64], to[64], extra[128];
    if (buf == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < lens[2]; i++)
        buf[i] = (uint8_t)(i * 131 + 7);
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
        snprintf(extra, sizeof extra, ",\"bytes\":%zu,\"clock\":\"cpu\"", lens[l]);
        double sw = crc_rate(pulse_crc32c_sw, buf, lens[l], secs);
        snprintf(name, sizeof name, "crc32c_sw_%zu", lens[l]);
        emit(name, sw, NAN, NULL, 0, -1, extra);
        if (!pulse_crc32c_hw_available())
            continue;
        double one = crc_rate(pulse_crc32c_hw, buf, lens[l], secs);
        snprintf(to, sizeof to, "crc32c_sw_%zu", lens[l]);
        snprintf(name, sizeof name, "crc32c_hw1_%zu", lens[l]);
        emit(name, one, NAN, to, one / sw, -1, extra);
        double three = crc_rate(pulse_crc32c_hw3, buf, lens[l], secs);
        snprintf(to, sizeof to, "crc32c_hw1_%zu", lens[l]);
        snprintf(name, sizeof name, "crc32c_hw3_%zu", lens[l]);
        emit(name, three, NAN, to, three / one, -1, extra);
    }
    /* The combine a batch header rewrite costs (pulse_crc32c_patch), over
     * what follows the base offset in a 100-record batch. */
    uint32_t c = 1;
    const int n = o->quick ? 100000 : 1000000;
    int64_t t0 = thread_cpu_us();
    for (int i = 0; i < n; i++)
        c = pulse_crc32c_combine(c, (uint32_t)i, 28136 - (size_t)(i & 1023));
    double us = (double)(thread_cpu_us() - t0);
    snprintf(extra, sizeof extra, ",\"ns_per_op\":%.1f,\"len_b\":\"27113..28136\",\"check\":%u", us * 1e3 / n, c & 1);
    emit("crc32c_combine", NAN, n / us * 1e6, NULL, 0, -1, extra);
    pulse_free(buf);
    return PULSE_OK;
}

/* ---- recovery ------------------------------------------------------------ */

/* Drops the directory's files from the page cache (they are clean after a
 * close), so a full scan has to read from the disk. */
static void evict_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[PATH_MAX];
        join_path(path, sizeof(path), dir, de->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    closedir(d);
}

/* Opens and closes dir once; *ms_out gets the wall time of the open. */
static pulse_status_t timed_open(const char *dir, const struct pulse_plog_config *cfg, bool drop_snapshot, bool cold,
                                 double *ms_out, struct pulse_plog_recovery *rec)
{
    struct pulse_plog *plog = NULL;
    char snap[PATH_MAX];
    pulse_status_t st = PULSE_OK;

    if (drop_snapshot) {
        join_path(snap, sizeof(snap), dir, "snapshot");
        if (unlink(snap) != 0 && errno != ENOENT) {
            st = pulse_status_from_errno(errno);
            goto out;
        }
    }
    if (cold)
        evict_dir(dir);
    int64_t t0 = pulse_clock_mono_us();
    st = pulse_plog_open(dir, cfg, &plog, rec);
    int64_t us = pulse_clock_mono_us() - t0;
    if (st != PULSE_OK) {
        fprintf(stderr, "bench: pulse_plog_open %s: %s\n", dir, pulse_status_name(st));
        goto out;
    }
    *ms_out = (double)us / 1000.0;
out:
    if (plog != NULL) {
        pulse_status_t cst = pulse_plog_close(plog);
        if (st == PULSE_OK)
            st = cst;
    }
    return st;
}

static pulse_status_t bench_recovery_size(const struct opts *o, struct anchors *an, uint64_t size, bool large)
{
    char dir[PATH_MAX];
    char name[64];
    struct pulse_plog_config cfg;
    struct pulse_plog *plog = NULL;
    struct pulse_plog_recovery rec;
    pulse_status_t st = PULSE_OK;
    double ms[5];
    char extra[512];

    snprintf(name, sizeof(name), "recovery-%llu", (unsigned long long)size);
    path_in_scratch(dir, sizeof(dir), name);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        st = pulse_status_from_errno(errno);
        goto out;
    }
    plog_cfg(o, &cfg, PULSE_SYNC_INTERVAL);
    st = pulse_plog_open(dir, &cfg, &plog, NULL);
    if (st != PULSE_OK)
        goto out;
    st = fill_log(plog, size, 1000);
    if (st != PULSE_OK)
        goto out;
    struct pulse_plog_stats stats;
    pulse_plog_get_stats(plog, &stats);
    /* A clean close writes the snapshot that the fast path trusts. */
    st = pulse_plog_close(plog);
    plog = NULL;
    if (st != PULSE_OK)
        goto out;

    /* Snapshot fast path: median of five opens. */
    memset(&rec, 0, sizeof(rec));
    for (int i = 0; i < 5; i++) {
        st = timed_open(dir, &cfg, false, false, &ms[i], &rec);
        if (st != PULSE_OK)
            goto out;
    }
    qsort(ms, 5, sizeof(ms[0]), cmp_double);
    double snap_ms = ms[2];
    const char *ratio_to = NULL;
    double ratio = 0;
    if (!large)
        an->snap_small_ms = snap_ms;
    else if (an->snap_small_ms > 0) {
        ratio_to = "recovery_snapshot_small";
        ratio = snap_ms / an->snap_small_ms;
    }
    snprintf(extra, sizeof(extra),
             ",\"log_bytes\":%llu,\"segments\":%u,\"segment_bytes\":%llu,\"ms\":%.3f,\"ms_min\":%.3f,"
             "\"ms_max\":%.3f,\"used_snapshot\":%s,\"engine_elapsed_us\":%lld,\"target_ms\":20,\"cache\":\"warm\"",
             (unsigned long long)stats.size_bytes, stats.segments, (unsigned long long)o->segment_bytes, snap_ms, ms[0],
             ms[4], rec.used_snapshot ? "true" : "false", (long long)rec.elapsed_us);
    emit(large ? "recovery_snapshot_large" : "recovery_snapshot_small", NAN, NAN, ratio_to, ratio, -1, extra);

    /* Full scan (snapshot deleted before each open): median of three. */
    memset(&rec, 0, sizeof(rec));
    for (int i = 0; i < 3; i++) {
        st = timed_open(dir, &cfg, true, false, &ms[i], &rec);
        if (st != PULSE_OK)
            goto out;
    }
    qsort(ms, 3, sizeof(ms[0]), cmp_double);
    double scan_ms = ms[1];
    snprintf(extra, sizeof(extra),
             ",\"log_bytes\":%llu,\"segments\":%u,\"ms\":%.3f,\"used_snapshot\":%s,\"indexes_rebuilt\":%u,"
             "\"engine_elapsed_us\":%lld,\"cache\":\"warm\"",
             (unsigned long long)stats.size_bytes, stats.segments, scan_ms, rec.used_snapshot ? "true" : "false",
             rec.indexes_rebuilt, (long long)rec.elapsed_us);
    emit(large ? "recovery_full_scan_large" : "recovery_full_scan_small",
         mb_per_s(stats.size_bytes, (int64_t)(scan_ms * 1000)), NAN,
         large ? "recovery_snapshot_large" : "recovery_snapshot_small", snap_ms > 0 ? scan_ms / snap_ms : 0, -1, extra);

    /* Full scan again with the files evicted from the page cache first. */
    memset(&rec, 0, sizeof(rec));
    st = timed_open(dir, &cfg, true, true, &ms[0], &rec);
    if (st != PULSE_OK)
        goto out;
    snprintf(extra, sizeof(extra),
             ",\"log_bytes\":%llu,\"segments\":%u,\"ms\":%.3f,\"used_snapshot\":%s,\"indexes_rebuilt\":%u,"
             "\"engine_elapsed_us\":%lld,\"cache\":\"cold\"",
             (unsigned long long)stats.size_bytes, stats.segments, ms[0], rec.used_snapshot ? "true" : "false",
             rec.indexes_rebuilt, (long long)rec.elapsed_us);
    emit(large ? "recovery_full_scan_cold_large" : "recovery_full_scan_cold_small",
         mb_per_s(stats.size_bytes, (int64_t)(ms[0] * 1000)), NAN, NULL, 0, -1, extra);

    /* And the snapshot path with a cold cache (the snapshot was rewritten by
     * the close above): median of three, each after its own eviction (one
     * open is a few dozen small reads, so a single one is at the mercy of
     * whatever else the disk is doing). */
    memset(&rec, 0, sizeof(rec));
    for (int i = 0; i < 3; i++) {
        st = timed_open(dir, &cfg, false, true, &ms[i], &rec);
        if (st != PULSE_OK)
            goto out;
    }
    qsort(ms, 3, sizeof(ms[0]), cmp_double);
    snprintf(extra, sizeof(extra),
             ",\"log_bytes\":%llu,\"segments\":%u,\"ms\":%.3f,\"ms_min\":%.3f,\"ms_max\":%.3f,\"used_snapshot\":%s,"
             "\"engine_elapsed_us\":%lld,\"target_ms\":20,\"cache\":\"cold\"",
             (unsigned long long)stats.size_bytes, stats.segments, ms[1], ms[0], ms[2],
             rec.used_snapshot ? "true" : "false", (long long)rec.elapsed_us);
    emit(large ? "recovery_snapshot_cold_large" : "recovery_snapshot_cold_small", NAN, NAN, NULL, 0, -1, extra);
out:
    if (st != PULSE_OK)
        fprintf(stderr, "bench: recovery workload %s failed: %s\n", name, pulse_status_name(st));
    if (plog != NULL)
        pulse_plog_close(plog);
    rm_tree(dir);
    return st;
}

static pulse_status_t bench_recovery(const struct opts *o, struct anchors *an)
{
    pulse_status_t st = bench_recovery_size(o, an, o->recov_small, false);
    pulse_status_t st2 = bench_recovery_size(o, an, o->recov_large, true);
    return st != PULSE_OK ? st : st2;
}

/* ---- main ---------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_storage [--dir DIR] [--quick] [--seconds S] [--only LIST]\n"
               "  --dir DIR     parent of the scratch directory (default $TMPDIR or /tmp)\n"
               "  --quick       small sizes and 1 s loops (also PULSE_BENCH_QUICK=1)\n"
               "  --seconds S   length of each time-bounded loop (default 2, quick 1)\n"
               "  --rounds N    rounds of the disk-bound workloads, medians reported\n"
               "                (default 3, quick 1)\n"
               "  --only LIST   comma-separated: fdatasync,seqwrite,append,append1,read,recovery,crc\n"
               "                (append1: only the 1-record every-write appends, t1 and t8)\n"
               "Prints one JSON object per measurement on stdout.\n");
}

/* Copies src into a JSON string body: quotes, backslashes and controls
 * become '?', trailing blanks are cut. */
static void json_safe(char *dst, size_t dstsz, const char *src)
{
    size_t n = 0;
    for (; *src != '\0' && n + 1 < dstsz; src++) {
        unsigned char ch = (unsigned char)*src;
        dst[n++] = ch == '"' || ch == '\\' || ch < 0x20 ? '?' : (char)ch;
    }
    while (n > 0 && dst[n - 1] == ' ')
        n--;
    dst[n] = '\0';
}

/* The first "model name" of /proc/cpuinfo, or "unknown". */
static void cpu_model(char *out, size_t outsz)
{
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    snprintf(out, outsz, "unknown");
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        char *colon = strchr(line, ':');
        if (colon != NULL) {
            colon++;
            while (*colon == ' ' || *colon == '\t')
                colon++;
            colon[strcspn(colon, "\n")] = '\0';
            json_safe(out, outsz, colon);
        }
        break;
    }
    fclose(f);
}

/* File system type and device of the mount holding path (longest matching
 * mount point in /proc/self/mounts). */
static void fs_of(const char *path, char *type, size_t typesz, char *dev, size_t devsz)
{
    char real[PATH_MAX];
    char line[1024];
    size_t best = 0;
    FILE *f = NULL;

    snprintf(type, typesz, "unknown");
    snprintf(dev, devsz, "unknown");
    if (realpath(path, real) == NULL)
        return;
    f = fopen("/proc/self/mounts", "r");
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        char d[256];
        char m[512];
        char t[64];
        if (sscanf(line, "%255s %511s %63s", d, m, t) != 3)
            continue;
        size_t ml = strlen(m);
        bool under = strcmp(m, "/") == 0 || (strncmp(real, m, ml) == 0 && (real[ml] == '/' || real[ml] == '\0'));
        if (under && ml >= best) {
            best = ml;
            json_safe(type, typesz, t);
            json_safe(dev, devsz, d);
        }
    }
    fclose(f);
}

static void print_machine(void)
{
    char model[256];
    char fstype[64];
    char dev[256];
    char kernel[256];
    struct utsname u;

    cpu_model(model, sizeof(model));
    fs_of(scratch, fstype, sizeof(fstype), dev, sizeof(dev));
    if (uname(&u) == 0)
        json_safe(kernel, sizeof(kernel), u.release);
    else
        snprintf(kernel, sizeof(kernel), "unknown");
    printf("{\"bench\":\"storage\",\"workload\":\"machine\",\"mb_s\":null,\"ops_s\":null,\"ratio_to\":null,"
           "\"ratio\":null,\"nproc\":%ld,\"cpu_model\":\"%s\",\"kernel\":\"%s\",\"data_fs\":\"%s\","
           "\"data_device\":\"%s\"}\n",
           sysconf(_SC_NPROCESSORS_ONLN), model, kernel, fstype, dev);
}

static void print_env(const struct opts *o)
{
    print_machine();
    printf("{\"bench\":\"storage\",\"workload\":\"environment\",\"mb_s\":null,\"ops_s\":null,\"ratio_to\":null,"
           "\"ratio\":null,\"quick\":%s,\"seconds\":%.2f,\"rounds\":%u,\"append_cap_bytes\":%llu,\"read_bytes\":%llu,"
           "\"recovery_bytes\":[%llu,%llu],\"segment_bytes\":%llu,\"record_bytes\":%u,\"sanitizers\":%s,"
           "\"crc32c_hw\":%s,\"scratch\":\"%s\"}\n",
           o->quick ? "true" : "false", o->seconds, o->rounds, (unsigned long long)o->append_cap,
           (unsigned long long)o->read_bytes, (unsigned long long)o->recov_small, (unsigned long long)o->recov_large,
           (unsigned long long)o->segment_bytes, RECORD_BYTES, BUILT_WITH_SANITIZERS ? "true" : "false",
           pulse_crc32c_hw_available() ? "true" : "false", scratch);
    if (BUILT_WITH_SANITIZERS)
        fprintf(stderr, "bench: built with sanitizers: figures are not representative\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {{"dir", required_argument, NULL, 'd'},
                                             {"quick", no_argument, NULL, 'q'},
                                             {"seconds", required_argument, NULL, 's'},
                                             {"only", required_argument, NULL, 'o'},
                                             {"rounds", required_argument, NULL, 'r'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    struct opts o;
    struct anchors an;
    struct disk_rounds *dr = NULL;
    const char *env;
    double seconds = 0;
    long rounds = 0;
    int c;
    int rc = 0;

    memset(&o, 0, sizeof(o));
    memset(&an, 0, sizeof(an));
    env = getenv("TMPDIR");
    o.root = env != NULL && env[0] != '\0' ? env : "/tmp";
    env = getenv("PULSE_BENCH_QUICK");
    o.quick = env != NULL && env[0] != '\0' && strcmp(env, "0") != 0;
    while ((c = getopt_long(argc, argv, "d:qs:o:r:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'd':
            o.root = optarg;
            break;
        case 'q':
            o.quick = true;
            break;
        case 's':
            seconds = strtod(optarg, NULL);
            if (!(seconds > 0 && seconds <= 600)) {
                fprintf(stderr, "bench: --seconds must be in (0, 600]\n");
                return 2;
            }
            break;
        case 'o':
            o.only = optarg;
            break;
        case 'r':
            rounds = strtol(optarg, NULL, 10);
            if (rounds < 1 || rounds > (long)MAX_ROUNDS) {
                fprintf(stderr, "bench: --rounds must be in [1, %u]\n", MAX_ROUNDS);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (o.only != NULL) {
        static const char *const known[] = {"fdatasync", "seqwrite", "append", "append1", "read", "recovery", "crc"};
        const char *p = o.only;
        while (*p != '\0') {
            size_t len = strcspn(p, ",");
            bool ok = false;
            for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
                ok = ok || (strlen(known[i]) == len && strncmp(p, known[i], len) == 0);
            if (!ok) {
                fprintf(stderr, "bench: unknown workload in --only: %.*s\n", (int)len, p);
                return 2;
            }
            p += len;
            if (*p == ',')
                p++;
        }
    }
    if (o.quick) {
        o.seconds = 1;
        o.rounds = 1;
        o.append_cap = 64 * MIB;
        o.read_bytes = 64 * MIB;
        o.recov_small = 32 * MIB;
        o.recov_large = 128 * MIB;
        o.segment_bytes = 32 * MIB;
    } else {
        o.seconds = 2;
        o.rounds = 3;
        o.append_cap = 512 * MIB;
        o.read_bytes = 256 * MIB;
        o.recov_small = 256 * MIB;
        o.recov_large = 1024 * MIB;
        o.segment_bytes = 128 * MIB;
    }
    if (seconds > 0)
        o.seconds = seconds;
    if (rounds > 0)
        o.rounds = (unsigned)rounds;

    pulse_log_set_level(PULSE_LOG_WARN);
    int n = snprintf(scratch, sizeof(scratch), "%s/pulse-bench-XXXXXX", o.root);
    if (n < 0 || (size_t)n >= sizeof(scratch) || mkdtemp(scratch) == NULL) {
        fprintf(stderr, "bench: mkdtemp %s: %s\n", scratch, strerror(errno));
        return 1;
    }
    print_env(&o);

    /* The size of a one-record batch: the bare fdatasync loop writes exactly
     * this much per call so that the two are comparable. */
    struct pulse_buf one;
    pulse_buf_init(&one, BATCH_BUF_MAX);
    pulse_status_t st = make_batch(&one, 1);
    size_t one_len = one.len;
    pulse_buf_fini(&one);
    if (st != PULSE_OK) {
        fprintf(stderr, "bench: cannot encode a batch: %s\n", pulse_status_name(st));
        rc = 1;
        goto out;
    }

    if (selected(&o, "fdatasync") || selected(&o, "seqwrite") || selected(&o, "append") || selected(&o, "append1")) {
        dr = pulse_calloc(1, sizeof(*dr));
        if (dr == NULL) {
            rc = 1;
            goto out;
        }
        for (unsigned r = 0; r < o.rounds; r++)
            if (run_round(&o, dr, one_len) != PULSE_OK)
                rc = 1;
        report_disk(dr);
    }
    if (selected(&o, "read") && bench_read(&o) != PULSE_OK)
        rc = 1;
    if (selected(&o, "recovery") && bench_recovery(&o, &an) != PULSE_OK)
        rc = 1;
    if (selected(&o, "crc") && bench_crc(&o) != PULSE_OK)
        rc = 1;
out:
    pulse_free(dr);
    rm_tree(scratch);
    return rc;
}
