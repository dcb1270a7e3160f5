/* SPDX-License-Identifier: MIT */
/*
 * log.h - leveled logging to stderr, one line per event.
 *
 * Format: "2026-11-29T20:00:00.123Z level=warn msg..." so lines grep well and
 * sort by time. The level is process-wide and atomic; pulse_log is safe from
 * any thread (one fprintf per line, which stdio locks).
 */
#ifndef PULSE_COMMON_LOG_H
#define PULSE_COMMON_LOG_H

enum pulse_log_level {
    PULSE_LOG_DEBUG = 0,
    PULSE_LOG_INFO = 1,
    PULSE_LOG_WARN = 2,
    PULSE_LOG_ERROR = 3,
    PULSE_LOG_OFF = 4
};

void pulse_log_set_level(enum pulse_log_level level);
enum pulse_log_level pulse_log_get_level(void);

/* Parses "debug", "info", "warn", "error", "off". Returns 0 on success. */
int pulse_log_parse_level(const char *s, enum pulse_log_level *out);

int pulse_log_enabled(enum pulse_log_level level);

void pulse_log(enum pulse_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define PULSE_DEBUG_LOG(...) pulse_log(PULSE_LOG_DEBUG, __VA_ARGS__)
#define PULSE_INFO(...) pulse_log(PULSE_LOG_INFO, __VA_ARGS__)
#define PULSE_WARN(...) pulse_log(PULSE_LOG_WARN, __VA_ARGS__)
#define PULSE_ERROR(...) pulse_log(PULSE_LOG_ERROR, __VA_ARGS__)

#endif
