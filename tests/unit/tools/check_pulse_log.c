/* SPDX-License-Identifier: MIT */
/*
 * check_pulse_log.c - runs the real pulse-log binary ($PULSE_BUILDDIR/pulse-log)
 * on segment files built with the batch codec in a mkdtemp() directory:
 * dump as text and as JSON lines, verify of a valid partition, and verify of
 * really damaged copies (a flipped byte, a torn tail, a bad index entry,
 * offsets that go backwards across segments), checking exit codes and the
 * reported file and byte position.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/crc32c.h"
#include "common/endian.h"
#include "storage/batch.h"

#define SEG0 "00000000000000000000"
#define SEG1 "00000000000000000010"

static char tmpdir[256];
static char out_text[1 << 16];
static char err_text[1 << 16];

/* Layout of the test segment, filled by build_partition. */
static size_t batch_pos[3];
static size_t seg_size;

static void write_file(const char *name, const uint8_t *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, p, n), (ssize_t)n);
    close(fd);
}

static void read_file(const char *path, char *dst, size_t cap)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(dst, 1, cap - 1, f);
    dst[n] = '\0';
    fclose(f);
}

/*
 * Segment 0: three batches.
 *   base 0: "user-42" = "hello" with header trace=abc; null key = "plain"
 *   base 2: tombstone "user-42"
 *   base 3: binary key/value, empty value, header with null value
 * Index: entries for the batches at base 0 and base 3.
 */
static void build_partition(void)
{
    static const uint8_t bin[] = {0x00, 0xff, 0xfe};
    struct pulse_header_in trace = {(const uint8_t *)"trace", 5, (const uint8_t *)"abc", 3};
    struct pulse_header_in nullv = {(const uint8_t *)"gone", 4, NULL, PULSE_BATCH_NULL};
    struct pulse_record_in b0[2] = {
        {1764400000000, 0, (const uint8_t *)"user-42", 7, (const uint8_t *)"hello", 5, &trace, 1},
        {1764400000001, 0, NULL, PULSE_BATCH_NULL, (const uint8_t *)"plain", 5, NULL, 0},
    };
    struct pulse_record_in b1[1] = {
        {1764400000002, 0, (const uint8_t *)"user-42", 7, NULL, PULSE_BATCH_NULL, NULL, 0},
    };
    struct pulse_record_in b2[3] = {
        {1764400000003, 0, bin, sizeof bin, bin, sizeof bin, NULL, 0},
        {1764400000004, 0, (const uint8_t *)"k", 1, (const uint8_t *)"", 0, &nullv, 1},
        {1764400000005, 0, (const uint8_t *)"k", 1, (const uint8_t *)"q\"uote", 6, NULL, 0},
    };
    struct pulse_buf seg;
    pulse_buf_init(&seg, 1 << 20);
    batch_pos[0] = seg.len;
    ck_assert_int_eq(pulse_batch_encode(&seg, 0, 0, b0, 2), PULSE_OK);
    batch_pos[1] = seg.len;
    ck_assert_int_eq(pulse_batch_encode(&seg, 2, 0, b1, 1), PULSE_OK);
    batch_pos[2] = seg.len;
    ck_assert_int_eq(pulse_batch_encode(&seg, 3, 0, b2, 3), PULSE_OK);
    seg_size = seg.len;
    write_file(SEG0 ".log", seg.data, seg.len);

    uint8_t idx[16];
    pulse_put_be32(idx, 0);
    pulse_put_be32(idx + 4, (uint32_t)batch_pos[0]);
    pulse_put_be32(idx + 8, 3);
    pulse_put_be32(idx + 12, (uint32_t)batch_pos[2]);
    write_file(SEG0 ".index", idx, sizeof idx);
    pulse_buf_fini(&seg);
}

static void setup(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/pulse-log-test.XXXXXX", base != NULL ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    build_partition();
}

static void teardown(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Runs pulse-log with up to three arguments; returns its exit status and
 * leaves its stdout and stderr in out_text and err_text. */
static int run_tool(const char *a1, const char *a2, const char *a3)
{
    const char *bdir = getenv("PULSE_BUILDDIR");
    char bin[512], outp[512], errp[512];
    snprintf(bin, sizeof bin, "%s/pulse-log", bdir != NULL ? bdir : ".");
    snprintf(outp, sizeof outp, "%s/.stdout", tmpdir);
    snprintf(errp, sizeof errp, "%s/.stderr", tmpdir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(127);
        char *argv[5] = {bin, (char *)a1, (char *)a2, (char *)a3, NULL};
        execv(bin, argv);
        _exit(127);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    read_file(outp, out_text, sizeof out_text);
    read_file(errp, err_text, sizeof err_text);
    ck_assert_msg(WIFEXITED(status), "pulse-log died: %s", err_text);
    return WEXITSTATUS(status);
}

static void path_of(char *dst, size_t cap, const char *name)
{
    snprintf(dst, cap, "%s/%s", tmpdir, name);
}

/* Flips one byte of a file in place. */
static void flip_byte(const char *name, size_t pos)
{
    char path[512];
    path_of(path, sizeof path, name);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t c;
    ck_assert_int_eq(pread(fd, &c, 1, (off_t)pos), 1);
    c ^= 0x20;
    ck_assert_int_eq(pwrite(fd, &c, 1, (off_t)pos), 1);
    close(fd);
}

START_TEST(test_verify_accepts_a_valid_partition_directory)
{
    int rc = run_tool("verify", tmpdir, NULL);
    ck_assert_msg(rc == 0, "rc %d: %s%s", rc, out_text, err_text);
    ck_assert_msg(strstr(out_text, "ok: 1 segment, 3 batches, 6 records, offsets 0..5, 2 index entries") != NULL, "%s",
                  out_text);
    char seg[512];
    path_of(seg, sizeof seg, SEG0 ".log");
    ck_assert_int_eq(run_tool("verify", seg, NULL), 0);
}
END_TEST

START_TEST(test_dump_prints_every_batch_and_record)
{
    char seg[512];
    path_of(seg, sizeof seg, SEG0 ".log");
    int rc = run_tool("dump", seg, NULL);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err_text);
    char want[256];
    snprintf(want, sizeof want, "batch at byte %zu: base_offset=3 records=3 flags=0x0000 crc=ok", batch_pos[2]);
    ck_assert_msg(strstr(out_text, want) != NULL, "%s", out_text);
    ck_assert_ptr_nonnull(strstr(out_text, "batch at byte 0: base_offset=0 records=2 flags=0x0000 crc=ok "
                                           "first_timestamp=1764400000000 last_timestamp=1764400000001"));
    ck_assert_ptr_nonnull(strstr(out_text, "  offset=0 timestamp=1764400000000 key=\"user-42\" value=\"hello\" "
                                           "headers={\"trace\":\"abc\"}\n"));
    ck_assert_ptr_nonnull(strstr(out_text, "  offset=1 timestamp=1764400000001 key=null value=\"plain\""));
    ck_assert_ptr_nonnull(strstr(out_text, "  offset=2 timestamp=1764400000002 key=\"user-42\" value=null"));
    ck_assert_ptr_nonnull(strstr(out_text, "key=\"\\x00\\xff\\xfe\" value=\"\\x00\\xff\\xfe\""));
    ck_assert_ptr_nonnull(strstr(out_text, "key=\"k\" value=\"\" headers={\"gone\":null}"));
    ck_assert_ptr_nonnull(strstr(out_text, "value=\"q\\\"uote\""));
}
END_TEST

START_TEST(test_dump_json_gives_one_fetch_shaped_object_per_record)
{
    char seg[512];
    path_of(seg, sizeof seg, SEG0 ".log");
    int rc = run_tool("dump", "--json", seg);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err_text);
    const char *want =
        "{\"offset\":0,\"timestamp\":1764400000000,\"key\":\"user-42\",\"value\":\"hello\","
        "\"headers\":{\"trace\":\"abc\"}}\n"
        "{\"offset\":1,\"timestamp\":1764400000001,\"key\":null,\"value\":\"plain\",\"headers\":{}}\n"
        "{\"offset\":2,\"timestamp\":1764400000002,\"key\":\"user-42\",\"value\":null,\"headers\":{}}\n"
        "{\"offset\":3,\"timestamp\":1764400000003,\"key_base64\":\"AP/+\",\"value_base64\":\"AP/+\","
        "\"headers\":{}}\n"
        "{\"offset\":4,\"timestamp\":1764400000004,\"key\":\"k\",\"value\":\"\",\"headers\":{\"gone\":null}}\n"
        "{\"offset\":5,\"timestamp\":1764400000005,\"key\":\"k\",\"value\":\"q\\\"uote\",\"headers\":{}}\n";
    ck_assert_str_eq(out_text, want);
}
END_TEST

START_TEST(test_verify_reports_a_flipped_byte_with_its_batch_position)
{
    /* A byte inside the records of the second batch: its CRC fails. */
    flip_byte(SEG0 ".log", batch_pos[1] + PULSE_BATCH_HEADER_SIZE + 20);
    int rc = run_tool("verify", tmpdir, NULL);
    ck_assert_int_eq(rc, 1);
    char want[600];
    snprintf(want, sizeof want, "%s/" SEG0 ".log: byte %zu: CRC mismatch", tmpdir, batch_pos[1]);
    ck_assert_msg(strncmp(out_text, want, strlen(want)) == 0, "got: %s", out_text);
    /* The damaged range is named with its bytes and offsets, and the walk
     * goes on past it (the rule recovery applies: the batch after it is
     * kept). */
    snprintf(want, sizeof want, "; damaged range: bytes %zu..%zu, offsets 2..3 unreadable; valid batches follow\n",
             batch_pos[1], batch_pos[2]);
    ck_assert_msg(strstr(out_text, want) != NULL, "got: %s", out_text);
    ck_assert_msg(strstr(out_text, ": damaged: 1 segment, 2 batches, 5 records, offsets 0..5, 2 index entries, "
                                   "1 damaged range and 0 damaged tails") != NULL,
                  "got: %s", out_text);

    /* dump shows the damaged batch as crc=BAD, hides its records, goes on. */
    char seg[512];
    path_of(seg, sizeof seg, SEG0 ".log");
    ck_assert_int_eq(run_tool("dump", seg, NULL), 1);
    ck_assert_ptr_nonnull(strstr(out_text, "base_offset=2 records=1 flags=0x0000 crc=BAD"));
    ck_assert_ptr_null(strstr(out_text, "  offset=2 "));
    ck_assert_ptr_nonnull(strstr(out_text, "  offset=5 "));
    ck_assert_ptr_nonnull(strstr(err_text, "CRC mismatch"));
}
END_TEST

/* A record whose framing is wrong under a CRC that matches (rewritten
 * after the damage): dump shows the header as crc=ok, hides the records and
 * goes on; a header that is itself unusable ends the dump. */
START_TEST(test_dump_hides_records_of_a_bad_batch_and_stops_at_an_unusable_header)
{
    char path[600], seg[512];
    uint8_t b[4096];
    size_t len = batch_pos[2] - batch_pos[1];
    path_of(seg, sizeof seg, SEG0 ".log");
    int fd = open(seg, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, b, len, (off_t)batch_pos[1]), (ssize_t)len);
    /* The record's length field: one byte longer than its fields. */
    b[PULSE_BATCH_HEADER_SIZE + 3] ^= 0x01;
    pulse_put_be32(b + 4, pulse_crc32c(0, b + 8, len - 8));
    ck_assert_int_eq(pwrite(fd, b, len, (off_t)batch_pos[1]), (ssize_t)len);
    ck_assert_int_eq(run_tool("dump", seg, NULL), 1);
    ck_assert_ptr_nonnull(strstr(out_text, "base_offset=2 records=1 flags=0x0000 crc=ok"));
    ck_assert_ptr_null(strstr(out_text, "  offset=2 "));
    ck_assert_ptr_nonnull(strstr(out_text, "  offset=5 "));
    ck_assert_msg(strstr(err_text, "has bad framing") != NULL, "%s", err_text);
    /* The magic byte of the same batch: nothing says where the next one is. */
    b[0] ^= 0xff;
    ck_assert_int_eq(pwrite(fd, b, 1, (off_t)batch_pos[1]), 1);
    close(fd);
    ck_assert_int_eq(run_tool("dump", seg, NULL), 1);
    ck_assert_ptr_nonnull(strstr(out_text, "  offset=1 "));
    ck_assert_ptr_null(strstr(out_text, "base_offset=2"));
    ck_assert_ptr_null(strstr(out_text, "  offset=5 "));
    snprintf(path, sizeof path, "%s: byte %zu: bad batch header", seg, batch_pos[1]);
    ck_assert_msg(strstr(err_text, path) != NULL, "%s", err_text);
}
END_TEST

START_TEST(test_verify_reports_a_torn_tail)
{
    char seg[512];
    path_of(seg, sizeof seg, SEG0 ".log");
    ck_assert_int_eq(truncate(seg, (off_t)(seg_size - 3)), 0);
    int rc = run_tool("verify", seg, NULL);
    ck_assert_int_eq(rc, 1);
    char want[600];
    snprintf(want, sizeof want, "%s: byte %zu: torn batch", seg, batch_pos[2]);
    ck_assert_msg(strncmp(out_text, want, strlen(want)) == 0, "got: %s", out_text);
    /* A tail shorter than a header is torn too. */
    ck_assert_int_eq(truncate(seg, (off_t)(batch_pos[2] + 10)), 0);
    ck_assert_int_eq(run_tool("verify", seg, NULL), 1);
    ck_assert_msg(strncmp(out_text, want, strlen(want)) == 0, "got: %s", out_text);
}
END_TEST

START_TEST(test_verify_reports_an_index_entry_off_a_batch_boundary)
{
    /* Entry 1 points one byte past the third batch's start. */
    flip_byte(SEG0 ".index", 15);
    ck_assert_int_eq(run_tool("verify", tmpdir, NULL), 1);
    char want[600];
    snprintf(want, sizeof want, "%s/" SEG0 ".index: byte 8: index entry 1 points at byte", tmpdir);
    ck_assert_msg(strncmp(out_text, want, strlen(want)) == 0, "got: %s", out_text);
}
END_TEST

START_TEST(test_verify_reports_an_index_entry_with_the_wrong_offset)
{
    flip_byte(SEG0 ".index", 11); /* relativeOffset 3 -> 0x23 */
    ck_assert_int_eq(run_tool("verify", tmpdir, NULL), 1);
    ck_assert_msg(strstr(out_text, ".index: byte 8: index entry 1 names offset 35") != NULL, "got: %s", out_text);
}
END_TEST

/* Offsets 0..5 in segment 0, then a segment named 10 starting at 10: a
 * gap that only a contiguous log (cleanup=delete) calls missing; and an
 * index file whose segment file is gone, which any log calls lost. */
START_TEST(test_verify_reports_gaps_of_a_contiguous_log_and_lost_segment_files)
{
    struct pulse_record_in r = {1, 0, NULL, PULSE_BATCH_NULL, (const uint8_t *)"x", 1, NULL, 0};
    struct pulse_buf b;
    uint8_t idx[8];
    pulse_buf_init(&b, 1 << 16);
    ck_assert_int_eq(pulse_batch_encode(&b, 10, 0, &r, 1), PULSE_OK);
    write_file(SEG1 ".log", b.data, b.len);
    pulse_buf_fini(&b);
    ck_assert_int_eq(run_tool("verify", tmpdir, NULL), 0);
    ck_assert_int_eq(run_tool("verify", "--not-contiguous", tmpdir), 0);
    ck_assert_int_eq(run_tool("verify", "--contiguous", tmpdir), 1);
    char want[300];
    snprintf(want, sizeof want,
             SEG0 ".log: byte %zu: offsets 6..10 are missing: segment " SEG0
                  ".log ends there but the next one starts at 10",
             seg_size);
    ck_assert_msg(strstr(out_text, want) != NULL, "got: %s", out_text);
    ck_assert_msg(strstr(out_text, ": damaged: 2 segments") != NULL, "got: %s", out_text);
    /* The index of a lost segment 20 with an entry for offset 23. */
    pulse_put_be32(idx, 3);
    pulse_put_be32(idx + 4, 0);
    write_file("00000000000000000020.index", idx, sizeof idx);
    ck_assert_int_eq(run_tool("verify", tmpdir, NULL), 1);
    ck_assert_msg(strstr(out_text, "00000000000000000020.index: byte 0: index file without its segment file: segment "
                                   "00000000000000000020 was lost; offsets below 24 were handed out") != NULL,
                  "got: %s", out_text);
    ck_assert_msg(strstr(out_text, "1 lost segment file") != NULL, "got: %s", out_text);
    ck_assert_int_eq(run_tool("verify", "--contigous", tmpdir), 2);
}
END_TEST

START_TEST(test_verify_checks_offsets_against_segment_names)
{
    /* A second segment named base 10 whose batch starts at 4: below its
     * own base (and a repeat of offsets the first segment holds). */
    struct pulse_record_in r = {1, 0, NULL, PULSE_BATCH_NULL, (const uint8_t *)"x", 1, NULL, 0};
    struct pulse_buf b;
    pulse_buf_init(&b, 1 << 16);
    ck_assert_int_eq(pulse_batch_encode(&b, 4, 0, &r, 1), PULSE_OK);
    write_file(SEG1 ".log", b.data, b.len);
    ck_assert_int_eq(run_tool("verify", tmpdir, NULL), 1);
    ck_assert_msg(strstr(out_text, SEG1 ".log: byte 0: batch base offset 4 is below the segment base 10") != NULL,
                  "got: %s", out_text);
    /* Base 10 is fine; a first segment reaching offset 10 is not. */
    pulse_buf_reset(&b);
    ck_assert_int_eq(pulse_batch_encode(&b, 10, 0, &r, 1), PULSE_OK);
    write_file(SEG1 ".log", b.data, b.len);
    ck_assert_int_eq(run_tool("verify", tmpdir, NULL), 0);
    ck_assert_msg(strstr(out_text, "ok: 2 segments, 4 batches, 7 records, offsets 0..10, 2 index entries, "
                                   "1 index file missing") != NULL,
                  "got: %s", out_text);
    /* A segment named base 4 between them: the first one's offsets 4 and 5
     * belong to it, so the first segment's last batch is out of place. */
    pulse_buf_reset(&b);
    ck_assert_int_eq(pulse_batch_encode(&b, 6, 0, &r, 1), PULSE_OK);
    write_file("00000000000000000004.log", b.data, b.len);
    ck_assert_int_eq(run_tool("verify", tmpdir, NULL), 1);
    char want[600];
    snprintf(want, sizeof want, "%s/" SEG0 ".log: byte %zu: batch holds offset 5, which belongs to the next segment",
             tmpdir, batch_pos[2]);
    ck_assert_msg(strncmp(out_text, want, strlen(want)) == 0, "got: %s", out_text);
    pulse_buf_fini(&b);
}
END_TEST

START_TEST(test_usage_errors_exit_2_and_version_prints_the_package_version)
{
    ck_assert_int_eq(run_tool(NULL, NULL, NULL), 2);
    ck_assert_int_eq(run_tool("frobnicate", NULL, NULL), 2);
    ck_assert_int_eq(run_tool("dump", NULL, NULL), 2);
    ck_assert_int_eq(run_tool("verify", "/nonexistent/pulse-log-test", NULL), 2);
    ck_assert_int_eq(run_tool("--version", NULL, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out_text, PACKAGE_VERSION));
    ck_assert_int_eq(run_tool("--help", NULL, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out_text, "Usage: pulse-log"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pulse-log");
    TCase *tc = tcase_create("tool");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_verify_accepts_a_valid_partition_directory);
    tcase_add_test(tc, test_dump_prints_every_batch_and_record);
    tcase_add_test(tc, test_dump_json_gives_one_fetch_shaped_object_per_record);
    tcase_add_test(tc, test_verify_reports_a_flipped_byte_with_its_batch_position);
    tcase_add_test(tc, test_verify_reports_a_torn_tail);
    tcase_add_test(tc, test_dump_hides_records_of_a_bad_batch_and_stops_at_an_unusable_header);
    tcase_add_test(tc, test_verify_reports_an_index_entry_off_a_batch_boundary);
    tcase_add_test(tc, test_verify_reports_an_index_entry_with_the_wrong_offset);
    tcase_add_test(tc, test_verify_checks_offsets_against_segment_names);
    tcase_add_test(tc, test_verify_reports_gaps_of_a_contiguous_log_and_lost_segment_files);
    tcase_add_test(tc, test_usage_errors_exit_2_and_version_prints_the_package_version);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
