/* SPDX-License-Identifier: MIT */
/*
 * conns.c - see conns.h. Each phase list is doubly linked so an entry
 * leaves it in O(1); it is kept in order of the entries' start times by
 * construction (every entry is appended with start = now, taken under the
 * lock), which is also deadline order: an entry is due at its start plus
 * the list's allowance, the same for every entry of the list (the timeout,
 * or BUSY_GRACE_US while the server is full).
 *
 * Logging: under attack thousands of requests time out; the first is
 * logged at once, later ones are summed and logged at most every
 * LOG_EVERY_US, and the exact counts are always in the metrics.
 */
#include "http/conns.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"

#define LOG_EVERY_US (10ll * 1000 * 1000)
/* While every connection slot is taken, a head or a body window is due
 * this long after its start (or at its timeout, when that is shorter). */
#define BUSY_GRACE_US (1000ll * 1000)

struct conn_list {
    struct pulse_conn *first; /* earliest start */
    struct pulse_conn *last;
    int64_t timeout_us;
};

struct pulse_conn {
    struct pulse_conn *prev; /* links in *list; NULL when not listed */
    struct pulse_conn *next;
    struct conn_list *list; /* the phase list holding it; NULL: none */
    int fd;
    int64_t start_us;                /* when the head or the body window began */
    bool expired;                    /* the sweeper shut the socket down */
    _Atomic uint64_t body_bytes;     /* of the current request (its worker adds) */
    uint64_t window_bytes;           /* body_bytes when the current window began */
    struct pulse_target_note target; /* owner thread only (conns.h) */
};

/* What one pass of the sweeper closed. */
struct sweep {
    uint64_t heads;
    uint64_t bodies;
    uint64_t early; /* of them, before their timeout: the server was full */
};

struct pulse_conns {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* CLOCK_MONOTONIC */
    pthread_t thread;
    bool stop;
    struct conn_list heads;  /* waiting for a request head */
    struct conn_list bodies; /* receiving a request body */
    uint64_t body_min_rate;  /* bytes per second; 0: a window never earns another */
    uint64_t max_open;       /* the server is full at this many; 0: never */
    uint64_t open;
    uint64_t head_timeouts;
    uint64_t body_timeouts;
    uint64_t busy_closes;
    struct sweep unlogged; /* closed since the last log line */
    int64_t logged_at_us;
    /* When the sleeping sweeper wakes by itself (INT64_MAX: only when
     * signalled); 0 while it runs (it looks at the lists before it sleeps
     * again, so nothing needs to wake it). */
    int64_t wake_at;
    uint64_t sweeps;
};

/* ---- the phase lists (lock held) -------------------------------------- */

/* Every connection slot is taken: no new client gets in until one frees. */
static bool busy(const struct pulse_conns *cs)
{
    return cs->max_open > 0 && cs->open >= cs->max_open;
}

/* How long after its start an entry of l is due. */
static int64_t allowance(const struct pulse_conns *cs, const struct conn_list *l)
{
    return busy(cs) && BUSY_GRACE_US < l->timeout_us ? BUSY_GRACE_US : l->timeout_us;
}

static void unlink_conn(struct pulse_conn *c)
{
    struct conn_list *l = c->list;
    if (l == NULL)
        return;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        l->first = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    else
        l->last = c->prev;
    c->prev = c->next = NULL;
    c->list = NULL;
}

/* Appends c (not listed) to l, starting now. */
static void append_conn(struct pulse_conns *cs, struct conn_list *l, struct pulse_conn *c, int64_t now)
{
    c->start_us = now;
    c->prev = l->last;
    c->next = NULL;
    if (l->last != NULL)
        l->last->next = c;
    else
        l->first = c;
    l->last = c;
    c->list = l;
    /* The sweeper sleeps until the earliest first entry, or without a
     * deadline when both lists are empty: a new first entry may be due
     * earlier. Only then is it woken: on a kept-alive connection every
     * request moves the connection between the lists, and a wake-up per
     * move (a futex call here, a context switch there) cost more than the
     * rest of the bookkeeping. A sweeper that wakes at its old time for
     * nothing sleeps again until the new first entry is due. */
    if (l->first == c && now + allowance(cs, l) < cs->wake_at)
        pthread_cond_signal(&cs->wake);
}

/* ---- the sweeper ------------------------------------------------------ */

static void expire(struct pulse_conn *c)
{
    unlink_conn(c);
    c->expired = true;
    /* Both directions: MHD reads end-of-file and closes the connection;
     * the descriptor stays MHD's to close. */
    (void)shutdown(c->fd, SHUT_RDWR);
}

/* Shuts down every head that is due. */
static void expire_heads(struct pulse_conns *cs, int64_t now, struct sweep *sw)
{
    int64_t allowed = allowance(cs, &cs->heads);
    while (cs->heads.first != NULL && cs->heads.first->start_us + allowed <= now) {
        expire(cs->heads.first);
        sw->heads++;
        if (allowed < cs->heads.timeout_us)
            sw->early++;
    }
}

/*
 * Ends every body window that is due: a body that brought at least
 * body-min-rate bytes per second of the window (and at least one byte)
 * starts another one at the tail (its start, now, is the latest in the
 * list); the rest are shut down. The window is measured as it really ran
 * (it can be longer than the allowance: the sweeper's own delay, or the
 * server just became full).
 */
static void end_body_windows(struct pulse_conns *cs, int64_t now, struct sweep *sw)
{
    int64_t allowed = allowance(cs, &cs->bodies);
    while (cs->bodies.first != NULL && cs->bodies.first->start_us + allowed <= now) {
        struct pulse_conn *c = cs->bodies.first;
        uint64_t got = atomic_load_explicit(&c->body_bytes, memory_order_relaxed) - c->window_bytes;
        /* Milliseconds keep the product in range: 1 GiB/s for a day. */
        uint64_t need = cs->body_min_rate * (uint64_t)((now - c->start_us) / 1000) / 1000;
        if (cs->body_min_rate > 0 && got >= (need > 0 ? need : 1)) {
            c->window_bytes += got;
            unlink_conn(c);
            append_conn(cs, &cs->bodies, c, now);
            continue;
        }
        expire(c);
        sw->bodies++;
        if (allowed < cs->bodies.timeout_us)
            sw->early++;
    }
}

static void wait_next(struct pulse_conns *cs)
{
    int64_t at = INT64_MAX;
    if (cs->heads.first != NULL)
        at = cs->heads.first->start_us + allowance(cs, &cs->heads);
    if (cs->bodies.first != NULL && cs->bodies.first->start_us + allowance(cs, &cs->bodies) < at)
        at = cs->bodies.first->start_us + allowance(cs, &cs->bodies);
    cs->wake_at = at;
    if (at == INT64_MAX) {
        pthread_cond_wait(&cs->wake, &cs->lock);
    } else {
        /* pulse_clock_mono_us is CLOCK_MONOTONIC's own reading, the clock
         * of the condition variable. */
        struct timespec ts = {(time_t)(at / 1000000), (long)(at % 1000000) * 1000};
        (void)pthread_cond_timedwait(&cs->wake, &cs->lock, &ts);
    }
    cs->wake_at = 0;
}

/* Logs what was closed since the last line. Called with the lock held;
 * drops it while writing. */
static void log_closes(struct pulse_conns *cs, int64_t now)
{
    struct sweep sw = cs->unlogged;
    memset(&cs->unlogged, 0, sizeof cs->unlogged);
    cs->logged_at_us = now;
    long long head_ms = (long long)(cs->heads.timeout_us / 1000);
    long long body_ms = (long long)(cs->bodies.timeout_us / 1000);
    unsigned long long max_open = (unsigned long long)cs->max_open;
    pthread_mutex_unlock(&cs->lock);
    if (sw.heads > 0)
        PULSE_WARN("http: closed %llu connection(s) whose request head did not arrive within %lld ms "
                   "(server.header-timeout); more are summed for 10 s",
                   (unsigned long long)sw.heads, head_ms);
    if (sw.bodies > 0)
        PULSE_WARN("http: closed %llu connection(s) whose request body did not arrive within %lld ms, or "
                   "slower than server.body-min-rate after that (server.body-timeout); more are summed for 10 s",
                   (unsigned long long)sw.bodies, body_ms);
    if (sw.early > 0)
        PULSE_WARN("http: %llu of these were closed after 1 s already: every connection slot was taken "
                   "(server.max-connections = %llu)",
                   (unsigned long long)sw.early, max_open);
    pthread_mutex_lock(&cs->lock);
}

static void *sweeper(void *arg)
{
    struct pulse_conns *cs = arg;
    pthread_mutex_lock(&cs->lock);
    while (!cs->stop) {
        int64_t now = pulse_clock_mono_us();
        struct sweep sw = {0, 0, 0};
        cs->sweeps++;
        expire_heads(cs, now, &sw);
        end_body_windows(cs, now, &sw);
        cs->head_timeouts += sw.heads;
        cs->body_timeouts += sw.bodies;
        cs->busy_closes += sw.early;
        cs->unlogged.heads += sw.heads;
        cs->unlogged.bodies += sw.bodies;
        cs->unlogged.early += sw.early;
        if (cs->unlogged.heads + cs->unlogged.bodies > 0 &&
            (cs->logged_at_us == 0 || now - cs->logged_at_us >= LOG_EVERY_US)) {
            log_closes(cs, now);
            continue;
        }
        wait_next(cs);
    }
    pthread_mutex_unlock(&cs->lock);
    return NULL;
}

/* ---- lifecycle -------------------------------------------------------- */

pulse_status_t pulse_conns_create(const struct pulse_conns_limits *limits, struct pulse_conns **out)
{
    pulse_status_t st = PULSE_OK;
    pthread_condattr_t attr;
    bool attr_ok = false;
    struct pulse_conns *cs = pulse_calloc(1, sizeof *cs);
    if (cs == NULL)
        return PULSE_NOMEM;
    cs->heads.timeout_us = limits->head_timeout_ms * 1000;
    cs->bodies.timeout_us = limits->body_timeout_ms * 1000;
    cs->body_min_rate = limits->body_min_rate;
    cs->max_open = limits->max_connections;
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
        PULSE_ERROR("http: cannot start the request deadline thread: %s", strerror(err));
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

static void free_list(struct conn_list *l)
{
    while (l->first != NULL) {
        struct pulse_conn *c = l->first;
        unlink_conn(c);
        pulse_free(c);
    }
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
    free_list(&cs->heads);
    free_list(&cs->bodies);
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
    atomic_init(&c->body_bytes, 0);
    c->target.raw_len = SIZE_MAX;
    pthread_mutex_lock(&cs->lock);
    cs->open++;
    /* Full from now on: the sweeper's allowances shrink. */
    if (cs->open == cs->max_open)
        pthread_cond_signal(&cs->wake);
    append_conn(cs, &cs->heads, c, pulse_clock_mono_us());
    pthread_mutex_unlock(&cs->lock);
    return c;
}

void pulse_conns_closed(struct pulse_conns *cs, struct pulse_conn *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&cs->lock);
    unlink_conn(c);
    cs->open--;
    pthread_mutex_unlock(&cs->lock);
    pulse_free(c);
}

bool pulse_conns_head_arrived(struct pulse_conns *cs, struct pulse_conn *c)
{
    pthread_mutex_lock(&cs->lock);
    bool alive = !c->expired;
    unlink_conn(c);
    if (alive) {
        /* Only this worker adds to the counter, and not before this call
         * returns: resetting it here races with nothing. */
        atomic_store_explicit(&c->body_bytes, 0, memory_order_relaxed);
        c->window_bytes = 0;
        append_conn(cs, &cs->bodies, c, pulse_clock_mono_us());
    }
    pthread_mutex_unlock(&cs->lock);
    return alive;
}

void pulse_conns_body_bytes(struct pulse_conn *c, uint64_t n)
{
    atomic_fetch_add_explicit(&c->body_bytes, n, memory_order_relaxed);
}

bool pulse_conns_body_done(struct pulse_conns *cs, struct pulse_conn *c)
{
    pthread_mutex_lock(&cs->lock);
    bool alive = !c->expired;
    unlink_conn(c);
    pthread_mutex_unlock(&cs->lock);
    return alive;
}

void pulse_conns_request_done(struct pulse_conns *cs, struct pulse_conn *c)
{
    pthread_mutex_lock(&cs->lock);
    if (!c->expired) {
        unlink_conn(c);
        append_conn(cs, &cs->heads, c, pulse_clock_mono_us());
    }
    pthread_mutex_unlock(&cs->lock);
}

struct pulse_target_note *pulse_conns_target(struct pulse_conn *c)
{
    return &c->target;
}

void pulse_conns_stats(struct pulse_conns *cs, struct pulse_conns_counts *out)
{
    pthread_mutex_lock(&cs->lock);
    out->open = cs->open;
    out->head_timeouts = cs->head_timeouts;
    out->body_timeouts = cs->body_timeouts;
    out->busy_closes = cs->busy_closes;
    out->sweeps = cs->sweeps;
    pthread_mutex_unlock(&cs->lock);
}
