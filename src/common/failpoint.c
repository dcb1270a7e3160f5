/* SPDX-License-Identifier: MIT */
#include "common/failpoint.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *armed; /* the environment's string, or NULL */

static void load(void)
{
    const char *fp = getenv("PULSE_FAILPOINT");
    armed = (fp != NULL && fp[0] != '\0') ? fp : NULL;
}

void pulse_failpoint(const char *name)
{
    pthread_once(&once, load);
    if (armed == NULL || strcmp(armed, name) != 0)
        return;
    /* write(2), not stdio: nothing buffered may be flushed on the way out. */
    static const char msg[] = "pulse: failpoint reached, exiting abruptly\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(PULSE_FAILPOINT_EXIT_CODE);
}
