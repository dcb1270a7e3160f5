/* SPDX-License-Identifier: MIT */
/*
 * check_model.c - the partition log against an in-memory reference model.
 *
 * A seeded random run (PULSE_TEST_SEED overrides the default seed; every
 * failure message prints it) of concurrent appends (acknowledged and
 * async), a concurrent reader, random-offset reads, trims, clean reopens and
 * simulated power cuts (tests/lib/faultio). The model holds the id of the
 * record at every offset and whether its append was acknowledged. After a
 * power cut the log must keep every acknowledged record; it may keep
 * unacknowledged ones only as they were written; the log end never falls
 * below an acknowledged offset, so no acknowledged offset is reused.
 */
#include "plogtest.h"

#include <pthread.h>
#include <stdatomic.h>

#include "faultio.h"

static unsigned g_seed;

#define MCHECK(cond) ck_assert_msg((cond), "model mismatch (rerun with PULSE_TEST_SEED=%u): %s", g_seed, #cond)

#define MAX_OFFSETS 200000

struct model {
    uint64_t *ids; /* id at offset, UINT64_MAX = none */
    bool *acked;
    int64_t start; /* log start */
    int64_t end;   /* offsets known to exist end here */
};

struct appended {
    int64_t base;
    uint32_t n;
    uint64_t first_id;
    bool acked;
};

struct worker {
    struct pulse_plog *plog;
    unsigned seed;
    int appends;
    atomic_ulong *next_id;
    struct appended *out;
    int nout;
};

static void *append_worker(void *p)
{
    struct worker *w = p;
    struct pulse_buf b;
    pulse_buf_init(&b, 1 << 22);
    for (int i = 0; i < w->appends; i++) {
        uint32_t n = 1 + (uint32_t)(rand_r(&w->seed) % 4);
        size_t vlen = 8 + (size_t)(rand_r(&w->seed) % 200);
        bool async = rand_r(&w->seed) % 8 == 0;
        uint64_t id = atomic_fetch_add(w->next_id, n);
        int64_t base = -1, end = -1;
        pulse_status_t st;
        pt_batch(&b, id, n, vlen, (int64_t)id);
        if (async)
            st = pulse_plog_append_async(w->plog, b.data, b.len, &base, &end, NULL);
        else
            st = pulse_plog_append(w->plog, b.data, b.len, &base);
        MCHECK(st == PULSE_OK);
        w->out[w->nout++] = (struct appended){base, n, id, !async};
    }
    pulse_buf_fini(&b);
    return NULL;
}

struct reader {
    struct pulse_plog *plog;
    unsigned seed;
    atomic_bool *stop;
    int reads;
};

/* Reads while appends run: whatever comes back must be whole, intact,
 * in offset order and below the HW the read saw. */
static void *read_worker(void *p)
{
    struct reader *r = p;
    struct pulse_buf buf;
    pulse_buf_init(&buf, 1 << 24);
    while (!atomic_load(r->stop)) {
        int64_t hw = pulse_plog_high_watermark(r->plog);
        int64_t start = pulse_plog_log_start(r->plog);
        if (hw <= start)
            continue;
        int64_t off = start + (int64_t)(rand_r(&r->seed) % (unsigned)(hw - start));
        struct pulse_slice info;
        struct pt_log l = {0};
        pulse_buf_reset(&buf);
        pulse_status_t st = pulse_plog_read(r->plog, off, 1 + (uint64_t)(rand_r(&r->seed) % 3000), &buf, &info);
        MCHECK(st == PULSE_OK);
        MCHECK(info.len == buf.len);
        pt_decode(buf.data, buf.len, info.start_offset, &l);
        for (size_t i = 0; i < l.n; i++) {
            MCHECK(l.offs[i] < info.high_watermark);
            MCHECK(i == 0 || l.offs[i] == l.offs[i - 1] + 1);
        }
        MCHECK(l.n == 0 || l.offs[0] == info.start_offset);
        pt_log_free(&l);
        r->reads++;
    }
    pulse_buf_fini(&buf);
    return NULL;
}

static void model_check_reads(struct pulse_plog *plog, const struct model *m, unsigned *seed)
{
    struct pulse_buf buf;
    MCHECK(pulse_plog_log_start(plog) == m->start);
    MCHECK(pulse_plog_high_watermark(plog) == m->end);
    /* Everything, in small steps. */
    struct pt_log all = {0};
    pt_read_all(plog, m->start, 1 + (uint64_t)(rand_r(seed) % 2000), &all);
    MCHECK(all.n == (size_t)(m->end - m->start));
    for (size_t i = 0; i < all.n; i++) {
        MCHECK(all.offs[i] == m->start + (int64_t)i);
        MCHECK(all.ids[i] == m->ids[all.offs[i]]);
    }
    pt_log_free(&all);
    /* Random offsets, including below the start and at/after HW. */
    pulse_buf_init(&buf, 1 << 24);
    for (int k = 0; k < 40; k++) {
        int64_t off = (int64_t)(rand_r(seed) % (unsigned)(m->end + 3));
        struct pulse_slice info;
        struct pt_log l = {0};
        pulse_buf_reset(&buf);
        pulse_status_t st = pulse_plog_read(plog, off, (uint64_t)(rand_r(seed) % 1500), &buf, &info);
        if (off > m->end) {
            MCHECK(st == PULSE_RANGE);
            continue;
        }
        MCHECK(st == PULSE_OK);
        int64_t want_start = off < m->start ? m->start : off;
        MCHECK(info.start_offset == want_start);
        pt_decode(buf.data, buf.len, info.start_offset, &l);
        if (want_start == m->end)
            MCHECK(l.n == 0);
        else
            MCHECK(l.n > 0 && l.offs[0] == want_start);
        for (size_t i = 0; i < l.n; i++)
            MCHECK(l.ids[i] == m->ids[l.offs[i]]);
        MCHECK(info.next_offset == (l.n > 0 ? l.offs[l.n - 1] + 1 : want_start));
        pt_log_free(&l);
    }
    pulse_buf_fini(&buf);
}

START_TEST(test_log_matches_reference_model_across_threads_reopens_and_power_cuts)
{
    enum { ROUNDS = 12, THREADS = 3, APPENDS = 40 };
    char *dir = pt_tmpdir();
    unsigned seed = g_seed;
    struct model m;
    atomic_ulong next_id;
    atomic_init(&next_id, 0);
    m.ids = pulse_malloc(MAX_OFFSETS * sizeof *m.ids);
    m.acked = pulse_calloc(MAX_OFFSETS, sizeof *m.acked);
    for (size_t i = 0; i < MAX_OFFSETS; i++)
        m.ids[i] = UINT64_MAX;
    m.start = 0;
    m.end = 0;
    int crashes = 0, trims = 0;

    for (int round = 0; round < ROUNDS; round++) {
        struct faultio *fio = faultio_create();
        struct pulse_plog_config cfg;
        struct pulse_plog *plog = NULL;
        struct pulse_plog_recovery rec;
        faultio_set_sync_noop(fio, true);
        pt_cfg(&cfg, 2048 + (uint64_t)(rand_r(&seed) % 6000), 100 + (uint32_t)(rand_r(&seed) % 900), faultio_io(fio));
        MCHECK(pulse_plog_open(dir, &cfg, &plog, &rec) == PULSE_OK);

        /* After a power cut, the log may have lost unacknowledged records
         * only, and never an acknowledged one. */
        int64_t leo = pulse_plog_log_end(plog);
        MCHECK(leo >= m.start);
        for (int64_t o = leo; o < m.end; o++)
            MCHECK(!m.acked[o]);
        if (leo < m.end)
            m.end = leo;
        model_check_reads(plog, &m, &seed);

        /* Concurrent appends with a concurrent reader. */
        pthread_t th[THREADS], rt;
        struct worker w[THREADS];
        atomic_bool stop;
        atomic_init(&stop, false);
        struct reader r = {plog, seed + 7, &stop, 0};
        MCHECK(pthread_create(&rt, NULL, read_worker, &r) == 0);
        for (int t = 0; t < THREADS; t++) {
            w[t] = (struct worker){plog,     seed + (unsigned)t * 101 + (unsigned)round,     APPENDS,
                                   &next_id, pulse_calloc(APPENDS, sizeof(struct appended)), 0};
            MCHECK(pthread_create(&th[t], NULL, append_worker, &w[t]) == 0);
        }
        for (int t = 0; t < THREADS; t++)
            pthread_join(th[t], NULL);
        atomic_store(&stop, true);
        pthread_join(rt, NULL);
        for (int t = 0; t < THREADS; t++) {
            for (int i = 0; i < w[t].nout; i++) {
                const struct appended *a = &w[t].out[i];
                MCHECK(a->base + a->n <= MAX_OFFSETS);
                for (uint32_t k = 0; k < a->n; k++) {
                    MCHECK(m.ids[a->base + k] == UINT64_MAX || a->base + k >= m.end);
                    m.ids[a->base + k] = a->first_id + k;
                    m.acked[a->base + k] = a->acked;
                }
            }
            pulse_free(w[t].out);
        }
        m.end = pulse_plog_log_end(plog);
        MCHECK(m.end > leo);
        for (int64_t o = leo; o < m.end; o++)
            MCHECK(m.ids[o] != UINT64_MAX); /* offsets are dense: no holes */
        MCHECK(pulse_plog_sync(plog) == PULSE_OK);
        model_check_reads(plog, &m, &seed);

        /* Sometimes trim the oldest segment. */
        if (rand_r(&seed) % 3 == 0) {
            size_t removed = 0;
            MCHECK(pt_trim_oldest(plog, 1, &removed) == PULSE_OK);
            if (removed > 0) {
                trims++;
                m.start = pulse_plog_log_start(plog);
            }
        }
        /* Unacknowledged writes after the last sync, then a power cut or a
         * clean close. */
        {
            struct pulse_buf b;
            pulse_buf_init(&b, 1 << 20);
            int extra = (int)(rand_r(&seed) % 4);
            for (int i = 0; i < extra; i++) {
                int64_t base, end;
                uint64_t id = atomic_fetch_add(&next_id, 2);
                pt_batch(&b, id, 2, 50, (int64_t)id);
                MCHECK(pulse_plog_append_async(plog, b.data, b.len, &base, &end, NULL) == PULSE_OK);
                m.ids[base] = id;
                m.ids[base + 1] = id + 1;
                m.acked[base] = m.acked[base + 1] = false;
            }
            pulse_buf_fini(&b);
        }
        if (rand_r(&seed) % 2 == 0) {
            faultio_crash(fio);
            (void)pulse_plog_close(plog);
            crashes++;
        } else {
            MCHECK(pulse_plog_close(plog) == PULSE_OK);
        }
        /* The model's end now covers every record that was written; after
         * a power cut the check at the next open decides, with the acked
         * flags, what may be gone. */
        {
            int64_t e = m.end;
            while (e < MAX_OFFSETS && m.ids[e] != UINT64_MAX)
                e++;
            m.end = e;
        }
        faultio_destroy(fio);
    }
    MCHECK(crashes > 0);
    (void)trims;
    pulse_free(m.ids);
    pulse_free(m.acked);
    pt_cleanup(dir);
}
END_TEST

int main(void)
{
    const char *env = getenv("PULSE_TEST_SEED");
    g_seed = env != NULL ? (unsigned)strtoul(env, NULL, 10) : 20261129u;
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_log_matches_reference_model_across_threads_reopens_and_power_cuts);
    suite_add_tcase(s, tc);
    return pt_run(s);
}
