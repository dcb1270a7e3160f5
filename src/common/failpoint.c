/* SPDX-License-Identifier: MIT */
/*
 * failpoint.c - see failpoint.h.
 *
 * The environment is read at every call rather than cached: tests arm a
 * failpoint with setenv() in a forked child, after the parent may already
 * have passed the same point, and failpoints sit only on rare paths (topic
 * create/delete, compaction commits), never on a per-record one.
 *
 * Compiled to nothing in a release build (see failpoint.h).
 */
#include "common/failpoint.h"

#ifdef PULSE_HOOKS

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

/* The delay PULSE_FAILPOINT_DELAY names for name, in ms; 0 for none. */
static long delay_ms(const char *name)
{
    const char *armed = getenv("PULSE_FAILPOINT_DELAY");
    size_t len = strlen(name);
    char *end = NULL;
    long ms;

    if (armed == NULL || strncmp(armed, name, len) != 0 || armed[len] != ':')
        return 0;
    errno = 0;
    ms = strtol(armed + len + 1, &end, 10);
    if (errno != 0 || end == armed + len + 1 || *end != '\0' || ms < 1 || ms > 60000)
        return 0;
    return ms;
}

bool pulse_failpoint_delay_armed(const char *name)
{
    return delay_ms(name) > 0;
}

void pulse_failpoint_delay(const char *name)
{
    long ms = delay_ms(name);
    if (ms == 0)
        return;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

#endif /* PULSE_HOOKS */
