/* SPDX-License-Identifier: MIT */
/*
 * fuzz_batch.c - libFuzzer driver for the batch decoder (storage/batch.h).
 *
 * The input is treated like the bytes of a segment file: batches are walked
 * one after another with pulse_batch_parse_header, pulse_batch_verify and the
 * record and header iterators, and every byte of every slice the decoder
 * hands back is read, so a pointer or length outside the input shows up under
 * ASan. The iterator also runs on batches that failed verification: it must
 * be safe on unverified bytes too.
 *
 * Built two ways from this one file:
 *   - with --enable-fuzzing (clang, -fsanitize=fuzzer): the libFuzzer target
 *     tests/fuzz/fuzz_batch;
 *   - with PULSE_FUZZ_REPLAY defined, in every build: tests/fuzz/fuzz_batch_replay,
 *     a plain program that feeds each file of the corpus directory (argv[1],
 *     else $PULSE_SRCDIR/tests/fuzz/corpus/batch) to the same entry point, so
 *     make check replays the corpus without libFuzzer.
 */
#include <stddef.h>
#include <stdint.h>

#include "storage/batch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A sink the compiler cannot drop, so the reads below really happen. */
static volatile uint8_t fuzz_sink;

static void touch(const uint8_t *p, size_t n)
{
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++)
        acc ^= p[i];
    fuzz_sink ^= acc;
}

static void walk_records(const uint8_t *data, size_t size)
{
    struct pulse_batch_iter it;
    struct pulse_record_view rec;
    if (pulse_batch_iter_init(&it, data, size) != PULSE_OK)
        return;
    while (pulse_batch_iter_next(&it, &rec) == PULSE_OK) {
        if (rec.key != NULL)
            touch(rec.key, rec.key_len);
        if (rec.value != NULL)
            touch(rec.value, rec.value_len);
        size_t pos = 0;
        struct pulse_header_view hv;
        while (pulse_record_header_next(&rec, &pos, &hv) == PULSE_OK) {
            touch(hv.key, hv.key_len);
            if (hv.value != NULL)
                touch(hv.value, hv.value_len);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t pos = 0;
    while (pos < size) {
        struct pulse_batch_header hdr;
        int64_t last = -1;
        if (pulse_batch_parse_header(data + pos, size - pos, &hdr) != PULSE_OK)
            break;
        pulse_status_t st = pulse_batch_verify(data + pos, size - pos, &hdr, &last);
        if (st == PULSE_OK && (last < hdr.base_offset))
            __builtin_trap(); /* a verified batch names at least its base offset */
        walk_records(data + pos, size - pos);
        pos += pulse_batch_total_size(&hdr);
    }
    return 0;
}

#ifdef PULSE_FUZZ_REPLAY
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"

/* Reads path whole into an exactly-sized heap block; returns 0 on success. */
static int replay_file(const char *path)
{
    int rc = -1;
    int fd = -1;
    uint8_t *data = NULL;
    struct stat sb;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size < 0) {
        fprintf(stderr, "fuzz_batch_replay: %s: %s\n", path, strerror(errno));
        goto out;
    }
    size_t size = (size_t)sb.st_size;
    data = pulse_malloc(size);
    if (data == NULL)
        goto out;
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, data + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "fuzz_batch_replay: %s: short read\n", path);
            goto out;
        }
        got += (size_t)n;
    }
    LLVMFuzzerTestOneInput(data, size);
    rc = 0;

out:
    pulse_free(data);
    if (fd >= 0)
        close(fd);
    return rc;
}

int main(int argc, char **argv)
{
    char dflt[4096];
    const char *dir = argc > 1 ? argv[1] : NULL;
    if (dir == NULL) {
        const char *src = getenv("PULSE_SRCDIR");
        snprintf(dflt, sizeof dflt, "%s/tests/fuzz/corpus/batch", src != NULL ? src : ".");
        dir = dflt;
    }
    DIR *d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "fuzz_batch_replay: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    int files = 0, failed = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (replay_file(path) != 0)
            failed++;
        files++;
    }
    closedir(d);
    printf("fuzz_batch_replay: %d inputs from %s\n", files, dir);
    /* An empty corpus means the replay tested nothing: fail loudly. */
    return failed == 0 && files > 0 ? 0 : 1;
}
#endif
