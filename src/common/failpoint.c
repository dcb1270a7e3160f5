/* SPDX-License-Identifier: MIT */
/*
 * failpoint.c - see failpoint.h.
 *
 * The environment is read at every call rather than cached: tests arm a
 * failpoint with setenv() in a forked child, after the parent may already
 * have passed the same point, and failpoints sit only on rare paths (topic
 * create/delete, compaction commits), never on a per-record one.
 */
#include "common/failpoint.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void pulse_failpoint(const char *name)
{
    const char *armed = getenv("PULSE_FAILPOINT");
    if (armed == NULL || strcmp(armed, name) != 0)
        return;
    /* write(2), not stdio: nothing buffered may be flushed on the way out. */
    static const char msg[] = "pulse: failpoint reached, exiting abruptly\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(PULSE_FAILPOINT_EXIT_CODE);
}
