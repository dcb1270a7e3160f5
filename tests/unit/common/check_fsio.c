/* SPDX-License-Identifier: MIT */
/*
 * check_fsio.c - the file-system helpers built on struct pulse_io: tree
 * removal (never through a symbolic link, best effort, says what stayed),
 * mkdir -p, the durable removal of a small file, rename-and-sync, and the
 * directory listing of the POSIX vtable. Each runs on a real directory
 * under /tmp, through tests/lib/faultio.c where a failure is injected.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "faultio.h"
#include "common/fsio.h"

static char tmpdir[256];

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void setup(void)
{
    pulse_log_set_level(PULSE_LOG_OFF);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/check_fsio.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* tmpdir/rel */
static const char *at(const char *rel)
{
    static char path[4][512];
    static int next;
    char *p = path[next++ % 4];

    snprintf(p, sizeof path[0], "%s/%s", tmpdir, rel);
    return p;
}

static void make_file(const char *rel)
{
    int fd = open(at(rel), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "x", 1), 1);
    close(fd);
}

static bool exists(const char *rel)
{
    struct stat st;
    return lstat(at(rel), &st) == 0;
}

/* tree/{a, d/{b, e/c}, link -> ../outside} and outside/keep. */
static void make_tree(void)
{
    ck_assert_int_eq(mkdir(at("tree"), 0755), 0);
    ck_assert_int_eq(mkdir(at("tree/d"), 0755), 0);
    ck_assert_int_eq(mkdir(at("tree/d/e"), 0755), 0);
    ck_assert_int_eq(mkdir(at("outside"), 0755), 0);
    make_file("tree/a");
    make_file("tree/d/b");
    make_file("tree/d/e/c");
    make_file("outside/keep");
    ck_assert_int_eq(symlink("../outside", at("tree/link")), 0);
}

START_TEST(test_remove_tree_removes_everything_but_never_follows_a_link)
{
    make_tree();
    ck_assert_int_eq(pulse_io_remove_tree(pulse_io_posix(), at("tree")), 0);
    ck_assert(!exists("tree"));
    /* The link went, its target did not. */
    ck_assert(exists("outside/keep"));
    /* Gone already, or never there: nothing to do. */
    ck_assert_int_eq(pulse_io_remove_tree(pulse_io_posix(), at("tree")), 0);
    /* A plain file, and a link to a directory, are removed as themselves. */
    make_file("plain");
    ck_assert_int_eq(pulse_io_remove_tree(pulse_io_posix(), at("plain")), 0);
    ck_assert(!exists("plain"));
    ck_assert_int_eq(symlink("outside", at("dirlink")), 0);
    ck_assert_int_eq(pulse_io_remove_tree(pulse_io_posix(), at("dirlink")), 0);
    ck_assert(!exists("dirlink"));
    ck_assert(exists("outside/keep"));
}
END_TEST

START_TEST(test_remove_tree_goes_on_past_a_failure_and_reports_it)
{
    struct faultio *fio = faultio_create();
    const struct pulse_io *io = faultio_io(fio);

    make_tree();
    faultio_fail_nth(fio, FAULTIO_UNLINK, 1, EIO);
    errno = 0;
    ck_assert_int_eq(pulse_io_remove_tree(io, at("tree")), -1);
    ck_assert_int_eq(errno, EIO);
    /* One file (and so its directories) stayed; everything else went. */
    int left = exists("tree/a") + exists("tree/d/b") + exists("tree/d/e/c") + exists("tree/link");
    ck_assert_int_eq(left, 1);
    ck_assert(exists("outside/keep"));
    /* A second try finishes it. */
    ck_assert_int_eq(pulse_io_remove_tree(io, at("tree")), 0);
    ck_assert(!exists("tree"));
    faultio_destroy(fio);
}
END_TEST

START_TEST(test_mkdir_p_makes_every_missing_level_and_accepts_existing_ones)
{
    struct stat st;

    ck_assert_int_eq(pulse_io_mkdir_p(pulse_io_posix(), at("x/y/z"), 0755), 0);
    ck_assert_int_eq(stat(at("x/y/z"), &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    ck_assert_int_eq(pulse_io_mkdir_p(pulse_io_posix(), at("x/y/z"), 0755), 0);
    ck_assert_int_eq(pulse_io_mkdir_p(pulse_io_posix(), at("x/y/z/"), 0755), 0);
    /* A file in the way. */
    make_file("x/f");
    errno = 0;
    ck_assert_int_eq(pulse_io_mkdir_p(pulse_io_posix(), at("x/f/g"), 0755), -1);
    ck_assert_int_eq(errno, ENOTDIR);
}
END_TEST

START_TEST(test_mkdir_p_stops_at_the_first_failed_mkdir)
{
    struct faultio *fio = faultio_create();

    faultio_fail_nth(fio, FAULTIO_MKDIR, 2, ENOSPC);
    errno = 0;
    ck_assert_int_eq(pulse_io_mkdir_p(faultio_io(fio), at("p/q/r"), 0755), -1);
    ck_assert_int_eq(errno, ENOSPC);
    ck_assert(!exists("p/q"));
    faultio_destroy(fio);
}
END_TEST

START_TEST(test_remove_file_syncs_the_directory_even_when_the_file_is_gone)
{
    struct faultio *fio = faultio_create();
    const struct pulse_io *io = faultio_io(fio);

    make_file("m");
    ck_assert_int_eq(pulse_io_remove_file(io, tmpdir, "m"), 0);
    ck_assert(!exists("m"));
    ck_assert_uint_eq(faultio_count(fio, FAULTIO_FSYNC_DIR), 1);
    /* Absent: fine, but the directory is synced again (the removal that
     * took it may not be durable yet). */
    ck_assert_int_eq(pulse_io_remove_file(io, tmpdir, "m"), 0);
    ck_assert_uint_eq(faultio_count(fio, FAULTIO_FSYNC_DIR), 2);
    faultio_fail_nth(fio, FAULTIO_FSYNC_DIR, 1, EIO);
    errno = 0;
    ck_assert_int_eq(pulse_io_remove_file(io, tmpdir, "m"), -1);
    ck_assert_int_eq(errno, EIO);
    faultio_destroy(fio);
}
END_TEST

START_TEST(test_rename_sync_syncs_only_a_rename_that_happened)
{
    struct faultio *fio = faultio_create();
    const struct pulse_io *io = faultio_io(fio);

    make_file("from");
    faultio_fail_nth(fio, FAULTIO_RENAME, 1, EIO);
    ck_assert_int_eq(pulse_io_rename_sync(io, at("from"), at("to"), tmpdir), -1);
    ck_assert(exists("from"));
    ck_assert_uint_eq(faultio_count(fio, FAULTIO_FSYNC_DIR), 0);
    ck_assert_int_eq(pulse_io_rename_sync(io, at("from"), at("to"), tmpdir), 0);
    ck_assert(exists("to") && !exists("from"));
    ck_assert_uint_eq(faultio_count(fio, FAULTIO_FSYNC_DIR), 1);
    faultio_destroy(fio);
}
END_TEST

static int count_entry(void *arg, const char *name, unsigned char type)
{
    int *n = arg;
    (void)type;
    ck_assert(strcmp(name, ".") != 0 && strcmp(name, "..") != 0);
    (*n)++;
    return *n == 2 ? 7 : 0;
}

START_TEST(test_list_dir_skips_dot_entries_and_stops_where_asked)
{
    const struct pulse_io *io = pulse_io_posix();
    int n = 0;

    make_file("a");
    make_file("b");
    make_file("c");
    ck_assert_int_eq(io->list_dir(io, tmpdir, count_entry, &n), 7);
    ck_assert_int_eq(n, 2);
    errno = 0;
    ck_assert_int_eq(io->list_dir(io, at("none"), count_entry, &n), -1);
    ck_assert_int_eq(errno, ENOENT);
}
END_TEST

static Suite *fsio_suite(void)
{
    Suite *s = suite_create("fsio");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_remove_tree_removes_everything_but_never_follows_a_link);
    tcase_add_test(tc, test_remove_tree_goes_on_past_a_failure_and_reports_it);
    tcase_add_test(tc, test_mkdir_p_makes_every_missing_level_and_accepts_existing_ones);
    tcase_add_test(tc, test_mkdir_p_stops_at_the_first_failed_mkdir);
    tcase_add_test(tc, test_remove_file_syncs_the_directory_even_when_the_file_is_gone);
    tcase_add_test(tc, test_rename_sync_syncs_only_a_rename_that_happened);
    tcase_add_test(tc, test_list_dir_skips_dot_entries_and_stops_where_asked);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(fsio_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
