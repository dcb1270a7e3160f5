/* SPDX-License-Identifier: MIT */
/*
 * c11threads.c - C11 threads, mutexes and condition variables for the
 * test binaries that run librdkafka, routed through the pthread calls
 * that sanitizers intercept.
 *
 * Why: librdkafka 2.0.2 (Debian 12) starts its threads with C11
 * thrd_create and locks with mtx_lock / cnd_wait. glibc implements those
 * by calling its internal pthread functions directly, not through the
 * interposable pthread_create / pthread_mutex_lock symbols, so
 * ThreadSanitizer never sees librdkafka's threads start (they crash in
 * their first allocation: TSan has no state for them) nor its locks (every
 * hand-over through a librdkafka queue, e.g. a record's opaque written by
 * the publishing thread and read in the delivery report, would be a false
 * race). Defined in the executable, these definitions take precedence over
 * glibc's for librdkafka's calls (the executable comes first in the
 * dynamic linker's search order), and each forwards to the pthread call,
 * which TSan (and ASan) intercept. glibc's own mtx_t / cnd_t are unions
 * over pthread_mutex_t / pthread_cond_t, so the objects are the same.
 *
 * What TSan still cannot see: librdkafka's own memory accesses and its
 * atomics (it is not instrumented). Races inside librdkafka are not
 * reported; races in Pulse's code, and the order librdkafka's locks and
 * thread starts and joins give it, are.
 *
 * Linked into check_kafka in every build (the forwarding is the same
 * behaviour under ASan and in a plain build).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <threads.h>

#include "common/alloc.h"

struct c11_start {
    thrd_start_t fn;
    void *arg;
};

static void *c11_trampoline(void *p)
{
    struct c11_start s = *(struct c11_start *)p;
    pulse_free(p);
    return (void *)(intptr_t)s.fn(s.arg);
}

static int c11_result(int rc)
{
    return rc == 0           ? thrd_success
           : rc == ENOMEM    ? thrd_nomem
           : rc == ETIMEDOUT ? thrd_timedout
           : rc == EBUSY     ? thrd_busy
                             : thrd_error;
}

int thrd_create(thrd_t *thr, thrd_start_t fn, void *arg)
{
    struct c11_start *s = pulse_malloc(sizeof *s);
    if (s == NULL)
        return thrd_nomem;
    s->fn = fn;
    s->arg = arg;
    int rc = pthread_create((pthread_t *)thr, NULL, c11_trampoline, s);
    if (rc != 0)
        pulse_free(s);
    return c11_result(rc);
}

int thrd_join(thrd_t thr, int *res)
{
    void *v = NULL;
    int rc = pthread_join((pthread_t)thr, &v);
    if (rc == 0 && res != NULL)
        *res = (int)(intptr_t)v;
    return c11_result(rc);
}

int thrd_detach(thrd_t thr)
{
    return c11_result(pthread_detach((pthread_t)thr));
}

int mtx_init(mtx_t *m, int type)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    if (type & mtx_recursive)
        pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    int rc = pthread_mutex_init((pthread_mutex_t *)m, &a);
    pthread_mutexattr_destroy(&a);
    return c11_result(rc);
}

void mtx_destroy(mtx_t *m)
{
    pthread_mutex_destroy((pthread_mutex_t *)m);
}

int mtx_lock(mtx_t *m)
{
    return c11_result(pthread_mutex_lock((pthread_mutex_t *)m));
}

int mtx_trylock(mtx_t *m)
{
    return c11_result(pthread_mutex_trylock((pthread_mutex_t *)m));
}

int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict ts)
{
    return c11_result(pthread_mutex_timedlock((pthread_mutex_t *)m, ts));
}

int mtx_unlock(mtx_t *m)
{
    return c11_result(pthread_mutex_unlock((pthread_mutex_t *)m));
}

int cnd_init(cnd_t *c)
{
    return c11_result(pthread_cond_init((pthread_cond_t *)c, NULL));
}

void cnd_destroy(cnd_t *c)
{
    pthread_cond_destroy((pthread_cond_t *)c);
}

int cnd_signal(cnd_t *c)
{
    return c11_result(pthread_cond_signal((pthread_cond_t *)c));
}

int cnd_broadcast(cnd_t *c)
{
    return c11_result(pthread_cond_broadcast((pthread_cond_t *)c));
}

int cnd_wait(cnd_t *c, mtx_t *m)
{
    return c11_result(pthread_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m));
}

int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m, const struct timespec *restrict ts)
{
    return c11_result(pthread_cond_timedwait((pthread_cond_t *)c, (pthread_mutex_t *)m, ts));
}

void call_once(once_flag *flag, void (*fn)(void))
{
    pthread_once((pthread_once_t *)flag, fn);
}
