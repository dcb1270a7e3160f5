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
 */
#ifndef PULSE_COMMON_FAILPOINT_H
#define PULSE_COMMON_FAILPOINT_H

#define PULSE_FAILPOINT_EXIT_CODE 99

void pulse_failpoint(const char *name);

#endif
