/* SPDX-License-Identifier: MIT */
/* log.c - see log.h. The default level is info; tests may lower it via
 * PULSE_LOG_LEVEL in the environment (read once, lazily). */
#include "common/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int current_level = -1;

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

int pulse_log_parse_level(const char *s, enum pulse_log_level *out)
{
    for (int i = 0; i <= PULSE_LOG_OFF; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum pulse_log_level)i;
            return 0;
        }
    }
    if (strcmp(s, "warning") == 0) {
        *out = PULSE_LOG_WARN;
        return 0;
    }
    return -1;
}

void pulse_log_set_level(enum pulse_log_level level)
{
    atomic_store(&current_level, (int)level);
}

enum pulse_log_level pulse_log_get_level(void)
{
    int lvl = atomic_load_explicit(&current_level, memory_order_relaxed);
    if (lvl < 0) {
        enum pulse_log_level parsed = PULSE_LOG_INFO;
        const char *env = getenv("PULSE_LOG_LEVEL");
        if (env != NULL)
            (void)pulse_log_parse_level(env, &parsed);
        int expected = -1;
        atomic_compare_exchange_strong(&current_level, &expected, (int)parsed);
        lvl = atomic_load(&current_level);
    }
    return (enum pulse_log_level)lvl;
}

int pulse_log_enabled(enum pulse_log_level level)
{
    return level >= pulse_log_get_level() && level < PULSE_LOG_OFF;
}

void pulse_log(enum pulse_log_level level, const char *fmt, ...)
{
    if (!pulse_log_enabled(level))
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    struct timespec ts;
    struct tm tm;
    char when[32];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "%s.%03ldZ level=%s %s\n", when, ts.tv_nsec / 1000000L, level_names[level], msg);
}
