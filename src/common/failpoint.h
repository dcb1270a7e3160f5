/* SPDX-License-Identifier: MIT */
/*
 * failpoint.h - named crash points for crash-safety tests.
 *
 * A test sets the environment variable PULSE_FAILPOINT to a point's name and
 * runs the real code (in a forked child or a pulsed process); when execution
 * reaches pulse_failpoint("that-name") the process leaves at once with
 * _exit(99): no atexit handlers, no buffered stdio, no close-time snapshot,
 * just as a crash would leave the files. The test then reopens the data and
 * checks it. Failpoints sit on rare paths only; unset, one costs a getenv.
 *
 * Debug and test builds only (PULSE_HOOKS, see common/debug.h). In a
 * release build the three calls below are macros that compile to nothing
 * (pulse_failpoint_delay_armed to false): no code, no point names and no
 * environment variable names reach the binary, so a release pulsed cannot
 * be made to exit or stall through its environment. They keep the names of
 * functions so that call sites read the same in both builds.
 */
#ifndef PULSE_COMMON_FAILPOINT_H
#define PULSE_COMMON_FAILPOINT_H

#include <stdbool.h>

#include "common/debug.h"

#define PULSE_FAILPOINT_EXIT_CODE 99

#ifdef PULSE_HOOKS

void pulse_failpoint(const char *name);

/*
 * A named slow point: when the environment variable PULSE_FAILPOINT_DELAY is
 * "<name>:<ms>" (ms 1..60000) and name matches, the calling thread sleeps that
 * long, as if the disk or the work behind that point were slow. Tests use it
 * to make a maintenance pass or a metadata write take long for real, without
 * a large data set. Unset, it costs a getenv; it sits on per-pass or
 * per-write paths, never on a per-record one. Thread: any.
 */
void pulse_failpoint_delay(const char *name);

/* Whether PULSE_FAILPOINT_DELAY names this point (with a valid delay), for
 * code that takes another path when a test slows it down. Thread: any. */
bool pulse_failpoint_delay_armed(const char *name);

#else

#define pulse_failpoint(name) ((void)0)
#define pulse_failpoint_delay(name) ((void)0)
#define pulse_failpoint_delay_armed(name) false

#endif

#endif
