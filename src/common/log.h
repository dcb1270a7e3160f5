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

#include <stdarg.h>

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

/* The log's settings ([log]; common/settings.h has the table format):
 * log.level, a name pulse_log_parse_level takes. */
struct pulse_settings_table;
struct pulse_log_settings {
    char *level;
};
const struct pulse_settings_table *pulse_log_settings(void);

void pulse_log(enum pulse_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A line written at level whatever log.level is, unless it is off: for
 * output a setting of its own turns on (server.access-log). */
void pulse_log_always(enum pulse_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Rate-limited logging, for lines a fault can repeat without bound: a full
 * disk refusing every publish, libmicrohttpd failing accept() at the
 * descriptor limit (about 190,000 times a second). key names "the same
 * line": a call site (PULSE_LOG_SITE) or another stable pointer, such as a
 * library's format string. At most PULSE_LOG_BURST lines per key get through
 * in any one second; the rest are counted, and once that second is over the
 * count is logged, with the text of the last one held back, by the next
 * rate-limited call of any key (or pulse_log_flush_limited):
 *   "... repeated 189995 more times in 1.0 s: libmicrohttpd: Hit process ..."
 * Up to PULSE_LOG_LIMIT_KEYS keys are tracked at once; a new key takes the
 * slot idle the longest (reporting its count first).
 * Thread: any. Locks: a private mutex, never held while writing.
 */
#define PULSE_LOG_BURST 5
#define PULSE_LOG_LIMIT_KEYS 64

void pulse_log_limited(enum pulse_log_level level, const void *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void pulse_log_vlimited(enum pulse_log_level level, const void *key, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Logs every count still held back, whatever its age. Thread: any. */
void pulse_log_flush_limited(void);

#define PULSE_LOG_STR_(x) #x
#define PULSE_LOG_STR(x) PULSE_LOG_STR_(x)
/* A key unique to the line of code that uses it. */
#define PULSE_LOG_SITE ((const void *)(__FILE__ ":" PULSE_LOG_STR(__LINE__)))

#define PULSE_WARN_RL(...) pulse_log_limited(PULSE_LOG_WARN, PULSE_LOG_SITE, __VA_ARGS__)
#define PULSE_ERROR_RL(...) pulse_log_limited(PULSE_LOG_ERROR, PULSE_LOG_SITE, __VA_ARGS__)

#define PULSE_DEBUG_LOG(...) pulse_log(PULSE_LOG_DEBUG, __VA_ARGS__)
#define PULSE_INFO(...) pulse_log(PULSE_LOG_INFO, __VA_ARGS__)
#define PULSE_WARN(...) pulse_log(PULSE_LOG_WARN, __VA_ARGS__)
#define PULSE_ERROR(...) pulse_log(PULSE_LOG_ERROR, __VA_ARGS__)

#endif
