/* SPDX-License-Identifier: MIT */
/*
 * async.c - broker calls whose completion may come inline or later
 * (http_int.h "async.c").
 *
 * The broker's asynchronous calls call back exactly once, either on the
 * calling thread before they return (the local backend answers a cursor
 * read at once) or later from one of its own threads (a remote backend,
 * or a local one that queues the work). Suspending the connection before
 * every such call, as publish does, would make the common inline case pay
 * a trip through MHD's resume machinery for nothing; suspending after the
 * call races with a callback that already fired. So the request carries a
 * small state machine, decided by compare-and-swap:
 *
 *   RUNNING  -> DONE       the callback came first (inline, or on another
 *                          thread before the handler got to suspend): the
 *                          handler answers on its own thread, no suspension;
 *   RUNNING  -> SUSPENDED  the handler suspended first: the callback
 *                          resumes the connection, and the resume function
 *                          answers on re-entry.
 *
 * If the callback wins while the handler is suspending (between its check
 * and its swap), the handler resumes itself at once. Either way the resume
 * function runs exactly once, on a worker, with the status in
 * r->async_status.
 */
#include <microhttpd.h>

#include "http/http_int.h"

enum { CALL_IDLE = 0, CALL_RUNNING, CALL_DONE, CALL_SUSPENDED };

void pulse_server_call_begin(struct pulse_hreq *r, pulse_hreq_resume_fn resume)
{
    r->resume = resume;
    atomic_store(&r->call_status, PULSE_OK);
    atomic_store(&r->call_state, CALL_RUNNING);
}

void pulse_server_call_done(void *arg, pulse_status_t st)
{
    struct pulse_hreq *r = arg;
    int expect = CALL_RUNNING;

    atomic_store(&r->call_status, (int)st);
    if (atomic_compare_exchange_strong(&r->call_state, &expect, CALL_DONE))
        return; /* the handler has not suspended: it answers (r is its) */
    /* SUSPENDED: after this r belongs to the worker that resumes it. */
    pulse_server_wake(r, st);
}

void pulse_server_call_end(struct pulse_hreq *r, pulse_status_t st, bool called_back)
{
    if (!called_back) {
        /* Refused at submission: no callback comes. */
        atomic_store(&r->call_state, CALL_IDLE);
        atomic_store(&r->async_status, (int)st);
        r->resume(r);
        return;
    }
    if (atomic_load(&r->call_state) != CALL_DONE) {
        int expect = CALL_RUNNING;
        pulse_server_suspend(r, r->resume);
        if (atomic_compare_exchange_strong(&r->call_state, &expect, CALL_SUSPENDED))
            return; /* the callback resumes it */
        /* The callback came while suspending: resume at once. */
        pulse_server_wake(r, (pulse_status_t)atomic_load(&r->call_status));
        return;
    }
    atomic_store(&r->call_state, CALL_IDLE);
    atomic_store(&r->async_status, atomic_load(&r->call_status));
    r->resume(r);
}
