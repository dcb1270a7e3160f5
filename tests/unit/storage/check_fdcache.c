/* SPDX-License-Identifier: MIT */
/*
 * check_fdcache.c - the bounded descriptor cache of segment files
 * (src/storage/fdcache.c): idle files are closed least recently used first
 * once the capacity is reached; a pinned, dirty or retired file is never
 * closed, so a reader holding one keeps reading the right bytes however
 * much else is opened meanwhile (from another thread too); EMFILE makes the
 * cache give back its idle descriptors and try again, and is reported as
 * PULSE_NOFILE when nothing can be given back.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"
#include "storage/fdcache.h"
#include "common/fsio.h"

#define NFILES 64

struct env {
    char dir[64];
    char paths[NFILES][96];
    struct pulse_fdc_file files[NFILES];
    struct pulse_fdcache *cache;
};

/* NFILES files whose content is "file <i>", and a cache of capacity cap. */
static void env_open(struct env *e, size_t cap)
{
    memset(e, 0, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/check_fdcache.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(e->dir));
    ck_assert_int_eq(pulse_fdcache_create(cap, &e->cache), PULSE_OK);
    for (int i = 0; i < NFILES; i++) {
        char text[32];
        snprintf(e->paths[i], sizeof e->paths[i], "%s/%02d", e->dir, i);
        int fd = open(e->paths[i], O_CREAT | O_WRONLY | O_TRUNC, 0644);
        ck_assert_int_ge(fd, 0);
        int n = snprintf(text, sizeof text, "file %02d", i);
        ck_assert_int_eq(write(fd, text, (size_t)n), n);
        close(fd);
        pulse_fdc_file_init(&e->files[i], e->cache, pulse_io_posix(), e->paths[i]);
    }
}

static void env_close(struct env *e)
{
    for (int i = 0; i < NFILES; i++) {
        pulse_fdc_file_fini(&e->files[i]);
        unlink(e->paths[i]);
    }
    struct pulse_fdcache_stats st;
    pulse_fdcache_get_stats(e->cache, &st);
    ck_assert_uint_eq(st.open, 0);
    pulse_fdcache_destroy(e->cache);
    rmdir(e->dir);
}

/* The content read through fd is "file <i>". */
static void check_reads(int fd, int i)
{
    char want[32], got[32] = {0};
    snprintf(want, sizeof want, "file %02d", i);
    ck_assert_int_eq(pread(fd, got, strlen(want), 0), (ssize_t)strlen(want));
    ck_assert_str_eq(got, want);
}

static void use(struct env *e, int i)
{
    int fd = -1;
    ck_assert_int_eq(pulse_fdc_pin(&e->files[i], &fd), PULSE_OK);
    check_reads(fd, i);
    pulse_fdc_unpin(&e->files[i]);
}

static size_t open_now(struct env *e)
{
    struct pulse_fdcache_stats st;
    pulse_fdcache_get_stats(e->cache, &st);
    return st.open;
}

START_TEST(test_idle_files_are_closed_least_recently_used_first)
{
    struct env e;
    env_open(&e, 16);
    for (int i = 0; i < 20; i++) {
        use(&e, i);
        ck_assert_uint_le(open_now(&e), 16);
    }
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(e.files[i].fd, -1);
    for (int i = 4; i < 20; i++)
        ck_assert_int_ge(e.files[i].fd, 0);
    /* Using 4 again makes 5 the least recently used: the next miss closes
     * it, not 4. */
    use(&e, 4);
    use(&e, 0);
    ck_assert_int_ge(e.files[4].fd, 0);
    ck_assert_int_eq(e.files[5].fd, -1);
    ck_assert_int_ge(e.files[0].fd, 0);
    struct pulse_fdcache_stats st;
    pulse_fdcache_get_stats(e.cache, &st);
    ck_assert_uint_eq(st.open, 16);
    ck_assert_uint_eq(st.pinned, 0);
    ck_assert_uint_eq(st.opens, 21);
    ck_assert_uint_eq(st.hits, 1);
    ck_assert_uint_eq(st.evictions, 5);
    env_close(&e);
}
END_TEST

START_TEST(test_a_pinned_file_is_never_closed_and_reads_right_after_heavy_eviction)
{
    struct env e;
    int fd = -1;
    env_open(&e, 16);
    ck_assert_int_eq(pulse_fdc_pin(&e.files[7], &fd), PULSE_OK);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < NFILES; i++)
            if (i != 7)
                use(&e, i);
    ck_assert_int_eq(e.files[7].fd, fd);
    ck_assert_int_ne(fcntl(fd, F_GETFD), -1);
    check_reads(fd, 7);
    pulse_fdc_unpin(&e.files[7]);
    /* Idle again: the next misses may close it. */
    for (int i = 0; i < NFILES; i++)
        if (i != 7)
            use(&e, i);
    ck_assert_int_eq(e.files[7].fd, -1);
    use(&e, 7);
    env_close(&e);
}
END_TEST

START_TEST(test_pins_beyond_capacity_overflow_then_shrink_back)
{
    struct env e;
    int fds[NFILES];
    env_open(&e, 16);
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(pulse_fdc_pin(&e.files[i], &fds[i]), PULSE_OK);
    ck_assert_uint_eq(open_now(&e), 40);
    for (int i = 0; i < 40; i++) {
        check_reads(fds[i], i);
        pulse_fdc_unpin(&e.files[i]);
    }
    ck_assert_uint_eq(open_now(&e), 16);
    env_close(&e);
}
END_TEST

START_TEST(test_a_dirty_file_stays_open_until_a_sync_covers_its_last_write)
{
    struct env e;
    int fd = -1;
    env_open(&e, 16);
    ck_assert_int_eq(pulse_fdc_pin(&e.files[0], &fd), PULSE_OK);
    uint64_t t1 = pulse_fdc_dirty(&e.files[0]);
    pulse_fdc_unpin(&e.files[0]);
    ck_assert_int_eq(pulse_fdc_pin(&e.files[0], &fd), PULSE_OK);
    uint64_t t2 = pulse_fdc_dirty(&e.files[0]);
    pulse_fdc_unpin(&e.files[0]);
    for (int i = 1; i < NFILES; i++)
        use(&e, i);
    ck_assert_int_eq(e.files[0].fd, fd);
    /* A sync that began before the second write covers only the first. */
    pulse_fdc_clean(&e.files[0], t1);
    for (int i = 1; i < NFILES; i++)
        use(&e, i);
    ck_assert_int_eq(e.files[0].fd, fd);
    pulse_fdc_clean(&e.files[0], t2);
    for (int i = 1; i < NFILES; i++)
        use(&e, i);
    ck_assert_int_eq(e.files[0].fd, -1);
    env_close(&e);
}
END_TEST

START_TEST(test_a_retired_file_keeps_its_inode_after_its_path_is_replaced)
{
    struct env e;
    int fd = -1;
    env_open(&e, 16);
    ck_assert_int_eq(pulse_fdc_retire(&e.files[3]), PULSE_OK);
    ck_assert_int_eq(pulse_fdc_retire(&e.files[3]), PULSE_OK); /* idempotent */
    /* The path now names another file (as after a compaction's rename). */
    ck_assert_int_eq(rename(e.paths[9], e.paths[3]), 0);
    for (int i = 10; i < NFILES; i++)
        use(&e, i);
    ck_assert_int_eq(pulse_fdc_pin(&e.files[3], &fd), PULSE_OK);
    check_reads(fd, 3); /* the old inode, not the file renamed over it */
    pulse_fdc_unpin(&e.files[3]);
    pulse_fdc_close_idle(&e.files[3]); /* not idle: stays */
    ck_assert_int_ge(e.files[3].fd, 0);
    /* Its path is file 9's now: restore a file there for cleanup. */
    int nfd = open(e.paths[9], O_CREAT | O_WRONLY, 0644);
    close(nfd);
    env_close(&e);
}
END_TEST

/* A file that was closed and whose path now names another file (a
 * compaction swapped one in while the retirement that should have kept
 * the old one open failed) is not reopened in its place: the pin fails,
 * rather than hand out bytes of another file at the old file's positions. */
START_TEST(test_a_closed_file_is_never_reopened_when_its_path_names_another_file)
{
    struct env e;
    int fd = -1;
    env_open(&e, 16);
    use(&e, 3); /* opened once: its identity is known */
    pulse_fdc_close_idle(&e.files[3]);
    ck_assert_int_eq(e.files[3].fd, -1);
    ck_assert_int_eq(rename(e.paths[9], e.paths[3]), 0);
    ck_assert_int_eq(pulse_fdc_pin(&e.files[3], &fd), PULSE_IO);
    ck_assert_int_eq(e.files[3].fd, -1);
    ck_assert_uint_eq(open_now(&e), 0);
    /* Neither is a descriptor of the new file adopted in its place. */
    int nfd = open(e.paths[3], O_RDWR);
    ck_assert_int_ge(nfd, 0);
    pulse_fdc_adopt(&e.files[3], nfd);
    ck_assert_int_eq(e.files[3].fd, -1);
    ck_assert_uint_eq(open_now(&e), 0);
    /* The same file reopened by path is fine. */
    use(&e, 4);
    pulse_fdc_close_idle(&e.files[4]);
    use(&e, 4);
    nfd = open(e.paths[9], O_CREAT | O_WRONLY, 0644);
    close(nfd);
    env_close(&e);
}
END_TEST

/* A retirement taken back (the unlink or rename it was for failed) makes
 * the file an ordinary idle one again, which the cache may close. */
START_TEST(test_an_unretired_file_may_be_closed_again)
{
    struct env e;
    env_open(&e, 16);
    ck_assert_int_eq(pulse_fdc_retire(&e.files[2]), PULSE_OK);
    pulse_fdc_close_idle(&e.files[2]);
    ck_assert_int_ge(e.files[2].fd, 0); /* retired: kept */
    pulse_fdc_unretire(&e.files[2]);
    pulse_fdc_close_idle(&e.files[2]);
    ck_assert_int_eq(e.files[2].fd, -1);
    ck_assert_uint_eq(open_now(&e), 0);
    use(&e, 2); /* and reopens by path: the path was never changed */
    env_close(&e);
}
END_TEST

struct reader_arg {
    struct env *e;
    atomic_bool stop;
    atomic_int errors;
    atomic_int reads;
};

/* Keeps one file pinned and reads it while the main thread churns. */
static void *reader_main(void *p)
{
    struct reader_arg *a = p;
    int fd = -1;
    if (pulse_fdc_pin(&a->e->files[0], &fd) != PULSE_OK) {
        atomic_fetch_add(&a->errors, 1);
        return NULL;
    }
    while (!atomic_load(&a->stop)) {
        char got[8] = {0};
        if (pread(fd, got, 7, 0) != 7 || memcmp(got, "file 00", 7) != 0)
            atomic_fetch_add(&a->errors, 1);
        atomic_fetch_add(&a->reads, 1);
    }
    pulse_fdc_unpin(&a->e->files[0]);
    return NULL;
}

/* Pins and unpins everything but file 0, from another thread. */
static void *churn_main(void *p)
{
    struct reader_arg *a = p;
    for (int round = 0; round < 200; round++) {
        for (int i = 1; i < NFILES; i++) {
            int fd = -1;
            if (pulse_fdc_pin(&a->e->files[i], &fd) != PULSE_OK) {
                atomic_fetch_add(&a->errors, 1);
                continue;
            }
            char got[8] = {0};
            char want[8];
            snprintf(want, sizeof want, "file %02d", i);
            if (pread(fd, got, 7, 0) != 7 || memcmp(got, want, 7) != 0)
                atomic_fetch_add(&a->errors, 1);
            pulse_fdc_unpin(&a->e->files[i]);
        }
    }
    return NULL;
}

START_TEST(test_eviction_by_other_threads_never_closes_a_file_being_read)
{
    struct env e;
    struct reader_arg a;
    pthread_t r, c1, c2;
    env_open(&e, 16);
    memset(&a, 0, sizeof a);
    a.e = &e;
    atomic_init(&a.stop, false);
    atomic_init(&a.errors, 0);
    atomic_init(&a.reads, 0);
    ck_assert_int_eq(pthread_create(&r, NULL, reader_main, &a), 0);
    while (atomic_load(&a.reads) == 0)
        usleep(100);
    ck_assert_int_eq(pthread_create(&c1, NULL, churn_main, &a), 0);
    ck_assert_int_eq(pthread_create(&c2, NULL, churn_main, &a), 0);
    pthread_join(c1, NULL);
    pthread_join(c2, NULL);
    atomic_store(&a.stop, true);
    pthread_join(r, NULL);
    ck_assert_int_eq(atomic_load(&a.errors), 0);
    struct pulse_fdcache_stats st;
    pulse_fdcache_get_stats(e.cache, &st);
    ck_assert_uint_gt(st.evictions, 1000);
    ck_assert_uint_le(st.open, 16);
    env_close(&e);
}
END_TEST

START_TEST(test_emfile_gives_back_idle_descriptors_or_reports_nofile)
{
    struct env e;
    int fds[NFILES];
    env_open(&e, 1000);
    for (int i = 0; i < 20; i++)
        use(&e, i);
    ck_assert_uint_eq(open_now(&e), 20);
    /* The process may open only 8 more descriptors than it has now. */
    int probe = open("/dev/null", O_RDONLY);
    ck_assert_int_ge(probe, 0);
    close(probe);
    struct rlimit rl = {(rlim_t)probe + 8, (rlim_t)probe + 8};
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    /* 20 idle files are given back as needed: all 44 others open. */
    for (int i = 20; i < NFILES; i++)
        use(&e, i);
    struct pulse_fdcache_stats st;
    pulse_fdcache_get_stats(e.cache, &st);
    ck_assert_uint_gt(st.emfile, 0);
    /* Nothing idle to give back: PULSE_NOFILE, and nothing is leaked. */
    int pinned = 0;
    pulse_status_t last = PULSE_OK;
    for (int i = 0; i < NFILES && last == PULSE_OK; i++) {
        last = pulse_fdc_pin(&e.files[i], &fds[i]);
        if (last == PULSE_OK)
            pinned++;
    }
    ck_assert_int_eq(last, PULSE_NOFILE);
    ck_assert_int_gt(pinned, 0);
    ck_assert_uint_eq(open_now(&e), (size_t)pinned);
    for (int i = 0; i < pinned; i++)
        pulse_fdc_unpin(&e.files[i]);
    env_close(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fdcache");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_idle_files_are_closed_least_recently_used_first);
    tcase_add_test(tc, test_a_pinned_file_is_never_closed_and_reads_right_after_heavy_eviction);
    tcase_add_test(tc, test_pins_beyond_capacity_overflow_then_shrink_back);
    tcase_add_test(tc, test_a_dirty_file_stays_open_until_a_sync_covers_its_last_write);
    tcase_add_test(tc, test_a_retired_file_keeps_its_inode_after_its_path_is_replaced);
    tcase_add_test(tc, test_a_closed_file_is_never_reopened_when_its_path_names_another_file);
    tcase_add_test(tc, test_an_unretired_file_may_be_closed_again);
    tcase_add_test(tc, test_eviction_by_other_threads_never_closes_a_file_being_read);
    tcase_add_test(tc, test_emfile_gives_back_idle_descriptors_or_reports_nofile);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    pulse_log_set_level(PULSE_LOG_OFF);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
