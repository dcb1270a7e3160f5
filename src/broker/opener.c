/* SPDX-License-Identifier: MIT */
/*
 * opener.c - the start's open of every partition log, on several threads.
 *
 * A start opens every partition of every topic the metadata store names
 * (pulse_plog_open: recovery). After a clean stop that is CPU and system
 * calls only, no sync (docs/Performance.md "Many partitions"): about 40 us
 * a partition, half a second for 10,000 on one thread. The opens are
 * independent of one another (each log has its own directory; the
 * descriptor cache, the I/O layer, the allocator and the log are safe to
 * use from several threads), so they run on a pool of threads of the
 * start's own (pulse_syncpool, the code the syncer's pool runs on): the
 * caller and up to PULSE_BROKER_OPENERS more, one per
 * PULSE_BROKER_OPEN_SHARE partitions, each taking the next partition in
 * (topic, partition) order. A start with fewer partitions than that opens
 * them on the caller alone, as before. The same pool then reads back the
 * idempotency keys (idem.c) and is closed before the broker's own threads
 * start.
 *
 * What a start does is that of the one-thread loop this replaced:
 *  - topics are made and put into the map first, on the calling thread, in
 *    the store's (name) order; the first invalid stored definition ends
 *    the list there, as it ended the loop;
 *  - the answer is the first failure in (topic, partition) order, with the
 *    same status and error text; no partition after the first failure
 *    found so far is begun (one already being opened on another thread is
 *    finished, and closed with the broker like every opened log, which
 *    a failed start closes);
 *  - the report counts what the partitions before the first failure did,
 *    and the topics all of whose partitions opened;
 *  - the caller joins every thread before it goes on: nothing is served,
 *    and /readyz does not answer 200, until every open has returned.
 * The lines a partition's open logs (a failure, what recovery repaired or
 * found damaged) come from the thread that opened it: one partition's
 * lines keep their order, but lines of different partitions may
 * interleave.
 *
 * Thread: the opener of the broker, before its threads start.
 */
#include "broker/broker_int.h"

#include <stdatomic.h>
#include <string.h>

#include "broker/syncpool.h"
#include "common/alloc.h"
#include "common/status.h"
#include "meta/meta.h"

/* One partition to open, and what its open did. */
struct open_slot {
    struct pulse_broker_topic *t;
    uint32_t p;
    uint32_t topic; /* index of t in job->pcfgs */
    pulse_status_t st;
    struct pulse_plog_recovery rec;
};

struct open_job {
    const struct pulse_local *b;
    const struct pulse_plog_config *pcfgs; /* one per topic */
    struct open_slot *slots;
    size_t n;
    _Atomic size_t failed; /* the lowest slot that failed; n: none */
};

static void open_slot(struct open_job *job, size_t k)
{
    struct open_slot *s = &job->slots[k];
    size_t f;

    s->st = pulse_broker_partition_open(job->b, s->t, s->p, &job->pcfgs[s->topic], &s->rec);
    if (s->st == PULSE_OK)
        return;
    f = atomic_load(&job->failed);
    while (k < f && !atomic_compare_exchange_weak(&job->failed, &f, k))
        ;
}

/* Item k of the run: skipped once a failure was found before it (the
 * lowest failure only ever moves down, so later items are skipped too). */
static void open_item(void *arg, size_t k)
{
    struct open_job *job = arg;

    if (k < atomic_load(&job->failed))
        open_slot(job, k);
}

/* Adds the slots before the first failure to rep, in order, and the topics
 * all of whose partitions opened; sets errbuf for the failed one. */
static pulse_status_t collect(struct pulse_local *b, const struct open_job *job, struct pulse_broker_open_report *rep,
                              char *errbuf, size_t errlen)
{
    size_t failed = atomic_load(&job->failed);
    const struct open_slot *s;

    for (size_t k = 0; k < failed && k < job->n; k++) {
        s = &job->slots[k];
        pulse_broker_open_report_add(rep, &s->rec);
        if (s->p + 1 == s->t->nparts)
            rep->topics++;
    }
    if (failed >= job->n)
        return PULSE_OK;
    s = &job->slots[failed];
    if (!pulse_broker_datadir_explain(b, s->t->name, errbuf, errlen))
        pulse_errbuf_set(errbuf, errlen, "cannot open the logs of topic %s: %s", s->t->name,
                         pulse_status_message(s->st));
    return s->st;
}

/* The slots of topics[0..nt), in order, with each topic's log
 * configuration in pcfgs. */
static void fill_slots(struct pulse_local *b, struct pulse_broker_topic **topics, size_t nt,
                       struct pulse_plog_config *pcfgs, struct open_slot *slots)
{
    size_t k = 0;

    for (size_t i = 0; i < nt; i++) {
        pulse_broker_log_config(b, topics[i], &pcfgs[i]);
        for (uint32_t p = 0; p < topics[i]->nparts; p++)
            slots[k++] = (struct open_slot){.t = topics[i], .p = p, .topic = (uint32_t)i, .st = PULSE_OK};
    }
}

struct pulse_syncpool *pulse_broker_start_pool(const struct pulse_meta_topic *defs, size_t ndefs)
{
    size_t parts = 0;

    for (size_t i = 0; i < ndefs; i++)
        parts += defs[i].partitions;
    return pulse_syncpool_for(parts, PULSE_BROKER_OPEN_SHARE, PULSE_BROKER_OPENERS);
}

pulse_status_t pulse_broker_topics_open(struct pulse_local *b, struct pulse_syncpool *pool,
                                        const struct pulse_meta_topic *defs, size_t ndefs,
                                        struct pulse_broker_open_report *rep, char *errbuf, size_t errlen)
{
    struct pulse_broker_topic **topics = pulse_calloc(ndefs > 0 ? ndefs : 1, sizeof *topics);
    struct pulse_plog_config *pcfgs = pulse_calloc(ndefs > 0 ? ndefs : 1, sizeof *pcfgs);
    struct open_job job = {.b = b};
    pulse_status_t def_st = PULSE_OK, st;
    size_t nt = 0, parts = 0;

    if (topics == NULL || pcfgs == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    /* Names come sorted from the store: each insert is an append. */
    for (; nt < ndefs; nt++) {
        def_st = pulse_broker_topic_add(b, &defs[nt], &topics[nt], errbuf, errlen);
        if (def_st != PULSE_OK)
            break;
        parts += topics[nt]->nparts;
    }
    job.slots = pulse_calloc(parts > 0 ? parts : 1, sizeof *job.slots);
    if (job.slots == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    fill_slots(b, topics, nt, pcfgs, job.slots);
    job.pcfgs = pcfgs;
    job.n = parts;
    atomic_init(&job.failed, parts);
    pulse_syncpool_run(pool, parts, open_item, &job);
    st = collect(b, &job, rep, errbuf, errlen);
    if (st == PULSE_OK)
        st = def_st; /* its errbuf is still the one topic_add wrote */
out:
    pulse_free(job.slots);
    pulse_free(pcfgs);
    pulse_free(topics);
    return st;
}
