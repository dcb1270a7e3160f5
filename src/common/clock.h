/* SPDX-License-Identifier: MIT */
/* clock.h - wall-clock milliseconds (record timestamps) and a monotonic clock
 * (deadlines, durations). Never mix the two. */
#ifndef PULSE_COMMON_CLOCK_H
#define PULSE_COMMON_CLOCK_H

#include <stdint.h>

/* Milliseconds since the Unix epoch (CLOCK_REALTIME). */
int64_t pulse_clock_wall_ms(void);

/* Microseconds from an arbitrary fixed point (CLOCK_MONOTONIC). */
int64_t pulse_clock_mono_us(void);

#endif
