/* SPDX-License-Identifier: MIT */
/* log.c - see log.h. The default level is info; tests may lower it via
 * PULSE_LOG_LEVEL in the environment (read once, lazily).
 *
 * The rate limiter keeps a small table of keys, each with the start of its
 * current one-second window, the lines let through in it, and the count (and
 * last text) of the lines held back. Reports of held-back counts are
 * collected under the mutex and written after it is released, so a slow
 * stderr never blocks another thread's bookkeeping. */
#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/settings.h"

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

static pulse_status_t check_level(const char *name, const char *value, char *errbuf, size_t errlen)
{
    enum pulse_log_level lvl;

    if (pulse_log_parse_level(value, &lvl) == 0)
        return PULSE_OK;
    pulse_errbuf_set(errbuf, errlen, "%s: \"%s\" is not debug, info, warn, error or off", name, value);
    return PULSE_INVALID;
}

static const struct pulse_setting log_keys[] = {
    {"log.level", PULSE_SETTING_STRING, offsetof(struct pulse_log_settings, level), "info", NULL, 0, 0, check_level,
     "lowest level written to standard error: debug, info, warn, error or off"},
};

static const struct pulse_settings_table log_table = {"log", log_keys, sizeof log_keys / sizeof log_keys[0],
                                                      sizeof(struct pulse_log_settings)};

const struct pulse_settings_table *pulse_log_settings(void)
{
    return &log_table;
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

static void vlog(enum pulse_log_level level, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

void pulse_log(enum pulse_log_level level, const char *fmt, ...)
{
    if (!pulse_log_enabled(level))
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, fmt, ap);
    va_end(ap);
}

void pulse_log_always(enum pulse_log_level level, const char *fmt, ...)
{
    if (pulse_log_get_level() == PULSE_LOG_OFF)
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, fmt, ap);
    va_end(ap);
}

/* One line: time, level, message. */
static void vlog(enum pulse_log_level level, const char *fmt, va_list ap)
{
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);

    struct timespec ts;
    struct tm tm;
    char when[32];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "%s.%03ldZ level=%s %s\n", when, ts.tv_nsec / 1000000L, level_names[level], msg);
}

/* ---- rate limiting ----------------------------------------------------- */

#define WINDOW_US 1000000
#define HELD_TEXT 240
/* Reports written per call at most; the rest wait for the next call. */
#define REPORTS_PER_CALL 8

struct limit_slot {
    const void *key; /* NULL: free */
    enum pulse_log_level level;
    int64_t window_us; /* start of the current window */
    int64_t last_us;   /* last call, to pick a slot to reuse */
    uint32_t lines;    /* let through in the current window */
    uint32_t held;     /* held back since held_us */
    int64_t held_us;
    char text[HELD_TEXT]; /* the last line held back */
};

struct limit_report {
    enum pulse_log_level level;
    uint32_t held;
    int64_t span_us;
    char text[HELD_TEXT];
};

static pthread_mutex_t limit_mu = PTHREAD_MUTEX_INITIALIZER;
static struct limit_slot limit_slots[PULSE_LOG_LIMIT_KEYS];

/* Moves a slot's held-back count into a report. Caller holds limit_mu. */
static void take_report(struct limit_slot *s, int64_t now, struct limit_report *r)
{
    r->level = s->level;
    r->held = s->held;
    r->span_us = now - s->held_us;
    memcpy(r->text, s->text, sizeof r->text);
    s->held = 0;
}

/* Collects the counts whose window is over (all of them with force).
 * Caller holds limit_mu. */
static size_t collect_reports(int64_t now, bool force, struct limit_report *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < PULSE_LOG_LIMIT_KEYS && n < max; i++) {
        struct limit_slot *s = &limit_slots[i];
        if (s->key != NULL && s->held > 0 && (force || now - s->window_us >= WINDOW_US))
            take_report(s, now, &out[n++]);
    }
    return n;
}

/* The slot of key, or a free one, or the one idle longest (whose count is
 * reported first). Caller holds limit_mu. */
static struct limit_slot *find_slot(const void *key, int64_t now, struct limit_report *evicted, bool *have_evicted)
{
    struct limit_slot *free_slot = NULL, *oldest = NULL;

    for (size_t i = 0; i < PULSE_LOG_LIMIT_KEYS; i++) {
        struct limit_slot *s = &limit_slots[i];
        if (s->key == key)
            return s;
        if (s->key == NULL) {
            if (free_slot == NULL)
                free_slot = s;
        } else if (oldest == NULL || s->last_us < oldest->last_us) {
            oldest = s;
        }
    }
    if (free_slot == NULL) {
        free_slot = oldest;
        if (free_slot->held > 0) {
            take_report(free_slot, now, evicted);
            *have_evicted = true;
        }
    }
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->key = key;
    free_slot->window_us = now;
    return free_slot;
}

static void write_reports(const struct limit_report *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pulse_log(r[i].level, "... repeated %" PRIu32 " more times in %.1f s: %s", r[i].held,
                  (double)r[i].span_us / 1e6, r[i].text);
}

void pulse_log_vlimited(enum pulse_log_level level, const void *key, const char *fmt, va_list ap)
{
    struct limit_report reports[REPORTS_PER_CALL + 1];
    size_t nrep;
    bool have_evicted = false;
    bool pass;
    char msg[2048];
    int64_t now;

    if (!pulse_log_enabled(level))
        return;
    vsnprintf(msg, sizeof msg, fmt, ap);
    now = pulse_clock_mono_us();
    pthread_mutex_lock(&limit_mu);
    nrep = collect_reports(now, false, reports, REPORTS_PER_CALL);
    struct limit_slot *s = find_slot(key, now, &reports[nrep], &have_evicted);
    if (have_evicted)
        nrep++;
    s->level = level;
    s->last_us = now;
    if (now - s->window_us >= WINDOW_US) {
        s->window_us = now;
        s->lines = 0;
    }
    pass = s->lines < PULSE_LOG_BURST;
    if (pass) {
        s->lines++;
    } else {
        if (s->held == 0)
            s->held_us = now;
        s->held++;
        size_t len = strnlen(msg, sizeof s->text - 1);
        memcpy(s->text, msg, len);
        s->text[len] = '\0';
    }
    pthread_mutex_unlock(&limit_mu);
    write_reports(reports, nrep);
    if (pass)
        pulse_log(level, "%s", msg);
}

void pulse_log_limited(enum pulse_log_level level, const void *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pulse_log_vlimited(level, key, fmt, ap);
    va_end(ap);
}

void pulse_log_flush_limited(void)
{
    struct limit_report reports[PULSE_LOG_LIMIT_KEYS];
    size_t n;

    pthread_mutex_lock(&limit_mu);
    n = collect_reports(pulse_clock_mono_us(), true, reports, PULSE_LOG_LIMIT_KEYS);
    pthread_mutex_unlock(&limit_mu);
    write_reports(reports, n);
}
