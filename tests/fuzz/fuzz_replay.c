/* SPDX-License-Identifier: MIT */
/*
 * fuzz_replay.c - the main() of every *_replay program in tests/fuzz: feeds
 * each file of a corpus directory (argv[1], else
 * $PULSE_SRCDIR/tests/fuzz/corpus/batch) to the driver's
 * LLVMFuzzerTestOneInput, so make check replays the corpus without
 * libFuzzer. An empty corpus fails: the replay would test nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *prog = "fuzz_replay";

/* Reads path whole into an exactly-sized heap block; returns 0 on success. */
static int replay_file(const char *path)
{
    int rc = -1;
    int fd = -1;
    uint8_t *data = NULL;
    struct stat sb;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
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
            fprintf(stderr, "%s: %s: short read\n", prog, path);
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
    prog = argv[0];
    const char *dir = argc > 1 ? argv[1] : NULL;
    if (dir == NULL) {
        const char *src = getenv("PULSE_SRCDIR");
        snprintf(dflt, sizeof dflt, "%s/tests/fuzz/corpus/batch", src != NULL ? src : ".");
        dir = dflt;
    }
    DIR *d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "%s: %s: %s\n", prog, dir, strerror(errno));
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
    printf("%s: %d inputs from %s\n", prog, files, dir);
    /* An empty corpus means the replay tested nothing: fail loudly. */
    return failed == 0 && files > 0 ? 0 : 1;
}
