/* SPDX-License-Identifier: MIT */
/*
 * conns.c - see conns.h. The waiting list is doubly linked so a head that
 * arrives unlinks its connection in O(1); it is kept in deadline order by
 * construction (every deadline is "now + timeout", taken under the lock).
 *
 * Logging: under attack thousands of heads time out; the first is logged at
 * once, later ones are summed and logged at most every LOG_EVERY_US, and the
 * exact count is always in the metrics.
 */
#include "http/conns.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"

#define LOG_EVERY_US (10ll * 1000 * 1000)

struct pulse_conn {
    struct pulse_conn *prev; /* waiting-list links; NULL when not listed */
    struct pulse_conn *next;
    int fd;
    int64_t deadline_us;
    bool waiting;    /* listed: no head seen since the connection became ready */
    bool expired;    /* the sweeper shut the socket down */
    struct pulse_target_note target; /* owner thread only (conns.h) */
};

struct pulse_conns {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* CLOCK_MONOTONIC */
    pthread_t thread;
    bool stop;
    int64_t timeout_us;
    struct pulse_conn *head; /* waiting connections, earliest deadline first */
    struct pulse_conn *tail;
    uint64_t open;
    uint64_t timeouts;
    uint64_t unlogged;
    int64_t logged_at_us;
};

/* ---- the waiting list (lock held) ------------------------------------- */

static void unlink_waiting(struct pulse_conns *cs, struct pulse_conn *c)
{
    if (!c->waiting)
        return;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        cs->head = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    else
        cs->tail = c->prev;
    c->prev = c->next = NULL;
    c->waiting = false;
}

static void append_waiting(struct pulse_conns *cs, struct pulse_conn *c)
{
    c->deadline_us = pulse_clock_mono_us() + cs->timeout_us;
    c->prev = cs->tail;
    c->next = NULL;
    if (cs->tail != NULL)
        cs->tail->next = c;
    else
        cs->head = c;
    cs->tail = c;
    c->waiting = true;
    /* The sweeper sleeps without a deadline only when the list is empty. */
    if (cs->head == c)
        pthread_cond_signal(&cs->wake);
}

/* ---- the sweeper ------------------------------------------------------ */

/* Shuts down every connection whose deadline passed; returns how many. */
static uint64_t expire_due(struct pulse_conns *cs, int64_t now)
{
    uint64_t n = 0;
    while (cs->head != NULL && cs->head->deadline_us <= now) {
        struct pulse_conn *c = cs->head;
        unlink_waiting(cs, c);
        c->expired = true;
        /* Both directions: MHD reads end-of-file and closes the connection;
         * the descriptor stays MHD's to close. */
        (void)shutdown(c->fd, SHUT_RDWR);
        n++;
    }
    cs->timeouts += n;
    return n;
}

static void wait_next(struct pulse_conns *cs)
{
    if (cs->head == NULL) {
        pthread_cond_wait(&cs->wake, &cs->lock);
        return;
    }
    /* pulse_clock_mono_us is CLOCK_MONOTONIC's own reading, the clock of
     * the condition variable. */
    int64_t at = cs->head->deadline_us;
    struct timespec ts = {(time_t)(at / 1000000), (long)(at % 1000000) * 1000};
    (void)pthread_cond_timedwait(&cs->wake, &cs->lock, &ts);
}

static void *sweeper(void *arg)
{
    struct pulse_conns *cs = arg;
    pthread_mutex_lock(&cs->lock);
    while (!cs->stop) {
        int64_t now = pulse_clock_mono_us();
        uint64_t n = expire_due(cs, now);
        cs->unlogged += n;
        if (cs->unlogged > 0 && (cs->logged_at_us == 0 || now - cs->logged_at_us >= LOG_EVERY_US)) {
            uint64_t count = cs->unlogged;
            cs->unlogged = 0;
            cs->logged_at_us = now;
            long long ms = (long long)(cs->timeout_us / 1000);
            pthread_mutex_unlock(&cs->lock);
            PULSE_WARN("http: closed %llu connection(s) whose request head did not arrive within %lld ms "
                       "(server.header-timeout); more are summed for 10 s",
                       (unsigned long long)count, ms);
            pthread_mutex_lock(&cs->lock);
            continue;
        }
        wait_next(cs);
    }
    pthread_mutex_unlock(&cs->lock);
    return NULL;
}

/* ---- lifecycle -------------------------------------------------------- */

pulse_status_t pulse_conns_create(int64_t head_timeout_ms, struct pulse_conns **out)
{
    pulse_status_t st = PULSE_OK;
    pthread_condattr_t attr;
    bool attr_ok = false;
    struct pulse_conns *cs = pulse_calloc(1, sizeof *cs);
    if (cs == NULL)
        return PULSE_NOMEM;
    cs->timeout_us = head_timeout_ms * 1000;
    pthread_mutex_init(&cs->lock, NULL);
    if (pthread_condattr_init(&attr) != 0) {
        st = PULSE_NOMEM;
        goto out;
    }
    attr_ok = true;
    /* Deadlines are monotonic microseconds (pulse_clock_mono_us). */
    if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 || pthread_cond_init(&cs->wake, &attr) != 0) {
        st = PULSE_IO;
        goto out;
    }
    int err = pthread_create(&cs->thread, NULL, sweeper, cs);
    if (err != 0) {
        PULSE_ERROR("http: cannot start the request-head deadline thread: %s", strerror(err));
        pthread_cond_destroy(&cs->wake);
        st = PULSE_IO;
        goto out;
    }
    *out = cs;
    cs = NULL;
out:
    if (attr_ok)
        pthread_condattr_destroy(&attr);
    if (cs != NULL) {
        pthread_mutex_destroy(&cs->lock);
        pulse_free(cs);
    }
    return st;
}

void pulse_conns_destroy(struct pulse_conns *cs)
{
    if (cs == NULL)
        return;
    pthread_mutex_lock(&cs->lock);
    cs->stop = true;
    pthread_cond_signal(&cs->wake);
    pthread_mutex_unlock(&cs->lock);
    pthread_join(cs->thread, NULL);
    while (cs->head != NULL) {
        struct pulse_conn *c = cs->head;
        unlink_waiting(cs, c);
        pulse_free(c);
    }
    pthread_cond_destroy(&cs->wake);
    pthread_mutex_destroy(&cs->lock);
    pulse_free(cs);
}

/* ---- events ----------------------------------------------------------- */

struct pulse_conn *pulse_conns_opened(struct pulse_conns *cs, int fd)
{
    struct pulse_conn *c = pulse_calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->fd = fd;
    c->target.raw_len = SIZE_MAX;
    pthread_mutex_lock(&cs->lock);
    cs->open++;
    append_waiting(cs, c);
    pthread_mutex_unlock(&cs->lock);
    return c;
}

void pulse_conns_closed(struct pulse_conns *cs, struct pulse_conn *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&cs->lock);
    unlink_waiting(cs, c);
    cs->open--;
    pthread_mutex_unlock(&cs->lock);
    pulse_free(c);
}

bool pulse_conns_head_arrived(struct pulse_conns *cs, struct pulse_conn *c)
{
    pthread_mutex_lock(&cs->lock);
    bool alive = !c->expired;
    unlink_waiting(cs, c);
    pthread_mutex_unlock(&cs->lock);
    return alive;
}

void pulse_conns_request_done(struct pulse_conns *cs, struct pulse_conn *c)
{
    pthread_mutex_lock(&cs->lock);
    if (!c->expired) {
        unlink_waiting(cs, c);
        append_waiting(cs, c);
    }
    pthread_mutex_unlock(&cs->lock);
}

struct pulse_target_note *pulse_conns_target(struct pulse_conn *c)
{
    return &c->target;
}

void pulse_conns_stats(struct pulse_conns *cs, uint64_t *open, uint64_t *head_timeouts)
{
    pthread_mutex_lock(&cs->lock);
    *open = cs->open;
    *head_timeouts = cs->timeouts;
    pthread_mutex_unlock(&cs->lock);
}
