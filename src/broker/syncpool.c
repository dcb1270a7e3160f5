/* SPDX-License-Identifier: MIT */
/*
 * syncpool.c - see syncpool.h. A run publishes (fn, arg, n) under the
 * mutex; every thread, the caller included, takes the next index until
 * none is left, and the caller waits until as many calls have returned as
 * were handed out.
 */
#include "broker/syncpool.h"

#include <pthread.h>
#include <stdbool.h>

#include "common/alloc.h"

struct pulse_syncpool {
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* a run started, or stop */
    pthread_cond_t done_cv; /* the last call of a run returned */
    pthread_t *threads;
    uint32_t nthreads; /* started threads (the caller of run not counted) */
    bool stop;
    /* The run in progress (n == 0: none); all under mu. */
    pulse_syncpool_fn fn;
    void *arg;
    size_t n;
    size_t next;
    size_t done;
};

/* Runs items of the current run until none is left to take. Called and
 * returns with mu held. */
static void work(struct pulse_syncpool *sp)
{
    while (sp->next < sp->n) {
        size_t i = sp->next++;
        pulse_syncpool_fn fn = sp->fn;
        void *arg = sp->arg;
        pthread_mutex_unlock(&sp->mu);
        fn(arg, i);
        pthread_mutex_lock(&sp->mu);
        if (++sp->done == sp->n)
            pthread_cond_broadcast(&sp->done_cv);
    }
}

static void *pool_main(void *a)
{
    struct pulse_syncpool *sp = a;

    pthread_mutex_lock(&sp->mu);
    while (!sp->stop) {
        work(sp);
        if (!sp->stop)
            pthread_cond_wait(&sp->work_cv, &sp->mu);
    }
    pthread_mutex_unlock(&sp->mu);
    return NULL;
}

void pulse_syncpool_run(struct pulse_syncpool *sp, size_t n, pulse_syncpool_fn fn, void *arg)
{
    if (sp == NULL) {
        for (size_t i = 0; i < n; i++)
            fn(arg, i);
        return;
    }
    if (n == 0)
        return;
    pthread_mutex_lock(&sp->mu);
    sp->fn = fn;
    sp->arg = arg;
    sp->n = n;
    sp->next = 0;
    sp->done = 0;
    if (n > 1 && sp->nthreads > 0)
        pthread_cond_broadcast(&sp->work_cv);
    work(sp);
    while (sp->done < sp->n)
        pthread_cond_wait(&sp->done_cv, &sp->mu);
    sp->n = 0;
    sp->next = 0;
    sp->fn = NULL;
    sp->arg = NULL;
    pthread_mutex_unlock(&sp->mu);
}

uint32_t pulse_syncpool_size(const struct pulse_syncpool *sp)
{
    return sp->nthreads + 1;
}

void pulse_syncpool_close(struct pulse_syncpool *sp)
{
    if (sp == NULL)
        return;
    pthread_mutex_lock(&sp->mu);
    sp->stop = true;
    pthread_cond_broadcast(&sp->work_cv);
    pthread_mutex_unlock(&sp->mu);
    for (uint32_t i = 0; i < sp->nthreads; i++)
        pthread_join(sp->threads[i], NULL);
    pthread_cond_destroy(&sp->done_cv);
    pthread_cond_destroy(&sp->work_cv);
    pthread_mutex_destroy(&sp->mu);
    pulse_free(sp->threads);
    pulse_free(sp);
}

pulse_status_t pulse_syncpool_open(uint32_t nthreads, struct pulse_syncpool **out)
{
    struct pulse_syncpool *sp = pulse_calloc(1, sizeof *sp);
    uint32_t extra = nthreads > 1 ? nthreads - 1 : 0;

    if (sp == NULL)
        return PULSE_NOMEM;
    sp->threads = extra > 0 ? pulse_calloc(extra, sizeof *sp->threads) : NULL;
    if (extra > 0 && sp->threads == NULL) {
        pulse_free(sp);
        return PULSE_NOMEM;
    }
    pthread_mutex_init(&sp->mu, NULL);
    pthread_cond_init(&sp->work_cv, NULL);
    pthread_cond_init(&sp->done_cv, NULL);
    for (uint32_t i = 0; i < extra; i++) {
        if (pthread_create(&sp->threads[i], NULL, pool_main, sp) != 0) {
            pulse_syncpool_close(sp);
            return PULSE_NOMEM;
        }
        sp->nthreads++;
    }
    *out = sp;
    return PULSE_OK;
}

struct pulse_syncpool *pulse_syncpool_for(size_t n, size_t share, uint32_t max_extra)
{
    struct pulse_syncpool *sp = NULL;
    size_t extra = n / share;

    if (extra > max_extra)
        extra = max_extra;
    if (extra == 0 || pulse_syncpool_open((uint32_t)extra + 1, &sp) != PULSE_OK)
        return NULL;
    return sp;
}
