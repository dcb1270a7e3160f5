/* SPDX-License-Identifier: MIT */
/*
 * debug.c - see debug.h. The report goes out with one write(2), not stdio:
 * the process is about to abort and may hold stdio's lock, and a line
 * written in one call is not interleaved with another thread's log line.
 */
#include "common/debug.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void pulse_assert_fail(const char *expr, const char *file, int line, const char *func)
{
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "pulse: %s:%d: %s: assertion failed: %s\n", file, line, func, expr);

    if (n > 0) {
        ssize_t ignored = write(STDERR_FILENO, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        (void)ignored;
    }
    abort();
}
