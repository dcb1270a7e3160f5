/* SPDX-License-Identifier: MIT */
/*
 * cursor.c - consumer cursors: the next offset a consumer will read, per
 * topic and partition, stored durably in the metadata store.
 *
 * A commit is validated completely (consumer name, every topic, partition
 * and offset in [0, high watermark]) and then written in one sync write
 * batch, so a multi-cursor commit lands entirely or not at all, and is on
 * disk before the caller is answered.
 *
 * Group commit. Commits are queued for the broker's committer thread
 * (admin.h), which takes every commit queued while its previous write ran
 * and hands them here as one group: each is validated alone, the valid ones
 * go to LevelDB together in one sync batch (pulse_meta_cursor_put_sets), and
 * each gets its own status. A commit that fails validation is left out of
 * the batch and cannot affect the others; a failed write fails every commit
 * in it. Nobody blocks: the HTTP request is suspended meanwhile.
 *
 * Why no cursor outlives its topic, without a lock (this replaced an admin
 * read/write lock that made commits wait behind a delete waiting behind a
 * compaction pass):
 *   1. Validation and the write of a group happen on the committer, one
 *      group after another, with nothing in between.
 *   2. A delete's first step (pulse_broker_topic_delete_unmap) also runs on
 *      the committer, between groups: it takes the topic off the map. So
 *      every group is either wholly before it or wholly after it.
 *   3. A group after it cannot validate a cursor of the topic: lookups no
 *      longer find it, and the name stays reserved (the dying list) until
 *      the delete has finished, so no new topic of that name exists either.
 *   4. A group before it wrote its cursors before the unmap, and the
 *      delete's metadata batch, which removes every cursor of the topic,
 *      runs on the admin thread after the unmap (after the topic's last
 *      user let go), so it removes them.
 * Hence a commit for a topic being deleted, or already deleted, is refused
 * (PULSE_TOPIC_NOT_FOUND) or removed by the delete; it never lands. If the
 * delete's metadata batch fails, the topic does not return to the map (the
 * delete is decided, topic.c): its cursors stay in the store until the
 * batch is written again, and no commit can add to them meanwhile.
 */
#include "broker/broker.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "broker/admin.h"
#include "broker/broker_int.h"
#include "common/status.h"
#include "common/alloc.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "meta/meta.h"

pulse_status_t pulse_local_cursor_commit_async(struct pulse_broker *base, const char *consumer,
                                               const struct pulse_cursor *cursors, size_t n, pulse_admin_done_fn done,
                                               void *arg, char *errbuf, size_t errlen)
{
    struct pulse_local *b = pulse_local_of(base);
    pulse_status_t st = PULSE_OK;
    struct pulse_admin_job *job = NULL;

    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (!pulse_broker_cname_valid(consumer)) {
        pulse_errbuf_set(errbuf, errlen,
                         "consumer name must be 1 to 249 characters of [A-Za-z0-9._-], not \".\" or \"..\", "
                         "and must not begin with \"__\"");
        return PULSE_INVALID_NAME;
    }
    if (cursors == NULL || n == 0) {
        pulse_errbuf_set(errbuf, errlen, "no cursors to commit");
        return PULSE_INVALID;
    }
    job = pulse_broker_admin_job_create(PULSE_ADMIN_COMMIT, done, arg);
    if (job == NULL)
        return PULSE_NOMEM;
    job->cursors = pulse_calloc(n, sizeof *job->cursors);
    if (job->cursors == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    memcpy(job->cursors, cursors, n * sizeof *cursors);
    job->n = n;
    memcpy(job->name, consumer, strlen(consumer) + 1);
    job->errbuf = errbuf;
    job->errlen = errlen;
    st = pulse_broker_admin_submit(b->admin, job);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "the broker is shutting down");
        goto out;
    }
    job = NULL;
out:
    pulse_broker_admin_job_free(job);
    return st;
}

/* Checks one commit against the live topics and fills mc (n entries).
 * Thread: the committer (see the file comment for why that matters). */
static pulse_status_t validate(struct pulse_local *b, const struct pulse_cursor *cursors, size_t n,
                               struct pulse_meta_cursor *mc, char *errbuf, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        const struct pulse_cursor *c = &cursors[i];
        struct pulse_broker_topic *t;
        int64_t hw;

        t = NULL;
        if (strnlen(c->topic, sizeof c->topic) < sizeof c->topic)
            t = pulse_broker_topic_acquire(b, c->topic);
        if (t == NULL) {
            pulse_errbuf_set(errbuf, errlen, "cursors[%zu]: topic \"%.*s\" does not exist", i, PULSE_NAME_MAX,
                             c->topic);
            return PULSE_TOPIC_NOT_FOUND;
        }
        if (c->partition >= t->nparts) {
            char prefix[40];
            snprintf(prefix, sizeof prefix, "cursors[%zu]: ", i);
            pulse_broker_no_partition_message(errbuf, errlen, prefix, t->name, c->partition, t->nparts);
            pulse_broker_topic_release(b, t);
            return PULSE_PARTITION_NOT_FOUND;
        }
        hw = pulse_plog_high_watermark(t->plogs[c->partition]);
        pulse_broker_topic_release(b, t);
        if (c->offset < 0 || c->offset > hw) {
            pulse_errbuf_set(errbuf, errlen,
                             "cursors[%zu]: offset %" PRId64 " is outside [0, %" PRId64 "] of %s/%" PRIu32, i,
                             c->offset, hw, c->topic, c->partition);
            return PULSE_RANGE;
        }
        memcpy(mc[i].topic, c->topic, sizeof mc[i].topic);
        mc[i].partition = c->partition;
        mc[i].offset = c->offset;
    }
    return PULSE_OK;
}

void pulse_broker_cursor_commit_group(struct pulse_local *b, struct pulse_admin_job **jobs, size_t n)
{
    struct pulse_meta_cursor_set *sets = pulse_calloc(n, sizeof *sets);
    struct pulse_meta_cursor **mcs = pulse_calloc(n, sizeof *mcs);
    size_t nsets = 0;
    pulse_status_t st = PULSE_OK;

    for (size_t i = 0; i < n; i++) {
        struct pulse_admin_job *job = jobs[i];
        if (sets == NULL || mcs == NULL || (mcs[i] = pulse_calloc(job->n, sizeof *mcs[i])) == NULL) {
            job->st = PULSE_NOMEM;
            continue;
        }
        job->st = validate(b, job->cursors, job->n, mcs[i], job->errbuf, job->errlen);
        if (job->st == PULSE_OK)
            sets[nsets++] = (struct pulse_meta_cursor_set){job->name, mcs[i], job->n};
    }
    if (nsets > 0) {
        /* Test hook: a slow metadata disk (see failpoint.h). */
        pulse_failpoint_delay("cursor_commit_write");
        st = pulse_meta_cursor_put_sets(b->meta, sets, nsets);
        if (st == PULSE_OK)
            pulse_broker_admin_count_commits(b->admin, nsets);
    }
    for (size_t i = 0; i < n; i++) {
        struct pulse_admin_job *job = jobs[i];
        if (job->st == PULSE_OK && st != PULSE_OK) {
            job->st = st;
            pulse_errbuf_set(job->errbuf, job->errlen, "cannot store the cursors: %s", pulse_status_message(st));
        }
        if (mcs != NULL)
            pulse_free(mcs[i]);
    }
    pulse_free(mcs);
    pulse_free(sets);
}

pulse_status_t pulse_local_cursor_get(struct pulse_local *b, const char *consumer, const char *topic,
                                      uint32_t partition, struct pulse_cursor *out)
{
    pulse_status_t st;
    struct pulse_broker_topic *t = NULL;
    int64_t off = 0;
    int64_t hw;

    if (!pulse_broker_cname_valid(consumer) || !pulse_broker_cname_valid(topic))
        return PULSE_INVALID_NAME;
    t = pulse_broker_topic_acquire(b, topic);
    if (t == NULL)
        return PULSE_TOPIC_NOT_FOUND;
    if (partition >= t->nparts) {
        st = PULSE_PARTITION_NOT_FOUND;
        goto out;
    }
    st = pulse_meta_cursor_get(b->meta, consumer, topic, partition, &off);
    if (st == PULSE_NOT_FOUND)
        st = PULSE_CURSOR_NOT_FOUND;
    if (st != PULSE_OK)
        goto out;
    hw = pulse_plog_high_watermark(t->plogs[partition]);
    memset(out, 0, sizeof *out);
    memcpy(out->topic, t->name, sizeof out->topic);
    out->partition = partition;
    out->offset = off;
    out->high_watermark = hw;
    out->lag = hw > off ? hw - off : 0;
out:
    pulse_broker_topic_release(b, t);
    return st;
}

pulse_status_t pulse_local_cursor_list(struct pulse_local *b, const char *consumer, struct pulse_cursor **out,
                                       size_t *n_out)
{
    pulse_status_t st;
    struct pulse_meta_cursor *mc = NULL;
    struct pulse_cursor *cs = NULL;
    size_t n = 0, k = 0;

    if (!pulse_broker_cname_valid(consumer))
        return PULSE_INVALID_NAME;
    st = pulse_meta_cursor_list(b->meta, consumer, &mc, &n);
    if (st != PULSE_OK)
        return st;
    if (n > 0) {
        cs = pulse_calloc(n, sizeof *cs);
        if (cs == NULL) {
            st = PULSE_NOMEM;
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct pulse_broker_topic *t = pulse_broker_topic_acquire(b, mc[i].topic);
        /* A cursor whose topic is gone (a delete between the scan and this
         * lookup) is not listed. */
        if (t == NULL)
            continue;
        if (mc[i].partition < t->nparts) {
            int64_t hw = pulse_plog_high_watermark(t->plogs[mc[i].partition]);
            memcpy(cs[k].topic, mc[i].topic, sizeof cs[k].topic);
            cs[k].partition = mc[i].partition;
            cs[k].offset = mc[i].offset;
            cs[k].high_watermark = hw;
            cs[k].lag = hw > mc[i].offset ? hw - mc[i].offset : 0;
            k++;
        }
        pulse_broker_topic_release(b, t);
    }
    if (k == 0) {
        pulse_free(cs);
        cs = NULL;
    }
    *out = cs;
    *n_out = k;
    cs = NULL;
out:
    pulse_free(cs);
    pulse_free(mc);
    return st;
}

pulse_status_t pulse_local_consumer_list(struct pulse_local *b, char ***names_out, size_t *n_out)
{
    return pulse_meta_consumer_list(b->meta, names_out, n_out);
}

/* ---- the asynchronous reads ------------------------------------------- */

static pulse_status_t read_cursor(struct pulse_local *b, struct pulse_admin_job *job)
{
    return pulse_local_cursor_get(b, job->name, job->topic_name, job->partition, job->read_out);
}

static pulse_status_t read_cursors(struct pulse_local *b, struct pulse_admin_job *job)
{
    return pulse_local_cursor_list(b, job->name, job->read_out, job->n_out);
}

static pulse_status_t read_consumers(struct pulse_local *b, struct pulse_admin_job *job)
{
    return pulse_local_consumer_list(b, job->read_out, job->n_out);
}

/*
 * Runs a read and completes it. This backend answers on the caller's
 * thread before returning: a LevelDB read takes the store's lock for
 * reading only, which no write holds across its sync (meta.c), and LevelDB
 * serves it from the memtable and block cache or with a few preads of its
 * table files; it never waits for a write or a compaction
 * (docs/Architecture.md section 10). Tests make it behave as a remote
 * backend does - the answer later, from another thread - with
 * PULSE_FAILPOINT_DELAY=cursor_read:<ms>: the read is then queued to the
 * committer, which sleeps that long before it runs it.
 */
static pulse_status_t read_submit(struct pulse_local *b, const struct pulse_admin_job *tmpl)
{
    if (!pulse_failpoint_delay_armed("cursor_read")) {
        struct pulse_admin_job job = *tmpl;
        job.done(job.arg, job.read(b, &job));
        return PULSE_OK;
    }
    struct pulse_admin_job *job = pulse_broker_admin_job_create(PULSE_ADMIN_READ, tmpl->done, tmpl->arg);
    if (job == NULL)
        return PULSE_NOMEM;
    memcpy(job->name, tmpl->name, sizeof job->name);
    memcpy(job->topic_name, tmpl->topic_name, sizeof job->topic_name);
    job->partition = tmpl->partition;
    job->read = tmpl->read;
    job->read_out = tmpl->read_out;
    job->n_out = tmpl->n_out;
    pulse_status_t st = pulse_broker_admin_submit(b->admin, job);
    if (st != PULSE_OK)
        pulse_broker_admin_job_free(job);
    return st;
}

pulse_status_t pulse_local_cursor_get_async(struct pulse_broker *base, const char *consumer, const char *topic,
                                            uint32_t partition, struct pulse_cursor *out, pulse_admin_done_fn done,
                                            void *arg)
{
    struct pulse_admin_job job = {.kind = PULSE_ADMIN_READ, .done = done, .arg = arg, .read = read_cursor};

    if (!pulse_broker_cname_valid(consumer) || !pulse_broker_cname_valid(topic))
        return PULSE_INVALID_NAME;
    memcpy(job.name, consumer, strlen(consumer) + 1);
    memcpy(job.topic_name, topic, strlen(topic) + 1);
    job.partition = partition;
    job.read_out = out;
    return read_submit(pulse_local_of(base), &job);
}

pulse_status_t pulse_local_cursor_list_async(struct pulse_broker *base, const char *consumer, struct pulse_cursor **out,
                                             size_t *n_out, pulse_admin_done_fn done, void *arg)
{
    struct pulse_admin_job job = {.kind = PULSE_ADMIN_READ, .done = done, .arg = arg, .read = read_cursors};

    if (!pulse_broker_cname_valid(consumer))
        return PULSE_INVALID_NAME;
    memcpy(job.name, consumer, strlen(consumer) + 1);
    job.read_out = out;
    job.n_out = n_out;
    return read_submit(pulse_local_of(base), &job);
}

pulse_status_t pulse_local_consumer_list_async(struct pulse_broker *base, char ***names_out, size_t *n_out,
                                               pulse_admin_done_fn done, void *arg)
{
    struct pulse_admin_job job = {.kind = PULSE_ADMIN_READ, .done = done, .arg = arg, .read = read_consumers};

    job.read_out = names_out;
    job.n_out = n_out;
    return read_submit(pulse_local_of(base), &job);
}

pulse_status_t pulse_local_consumer_delete_async(struct pulse_broker *base, const char *consumer,
                                                 pulse_admin_done_fn done, void *arg)
{
    struct pulse_local *b = pulse_local_of(base);
    pulse_status_t st;
    struct pulse_admin_job *job;

    if (!pulse_broker_cname_valid(consumer))
        return PULSE_INVALID_NAME;
    job = pulse_broker_admin_job_create(PULSE_ADMIN_CONSUMER_DELETE, done, arg);
    if (job == NULL)
        return PULSE_NOMEM;
    memcpy(job->name, consumer, strlen(consumer) + 1);
    st = pulse_broker_admin_submit(b->admin, job);
    if (st != PULSE_OK)
        pulse_broker_admin_job_free(job);
    return st;
}

/* ---- at open: log ends proven by cursors ----------------------------- */

pulse_status_t pulse_broker_cursor_raise_ends(struct pulse_local *b, char *errbuf, size_t errlen)
{
    struct pulse_meta_cursor *hi = NULL;
    size_t n = 0;
    uint32_t raised = 0;
    pulse_status_t st = pulse_meta_cursor_highest(b->meta, &hi, &n);

    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "cannot read the consumer cursors: %s", pulse_status_message(st));
        return st;
    }
    for (size_t i = 0; i < n && st == PULSE_OK; i++) {
        struct pulse_broker_topic *t = pulse_broker_topic_acquire(b, hi[i].topic);
        int64_t skipped = 0;
        if (t == NULL)
            continue;
        if (hi[i].partition < t->nparts)
            st = pulse_plog_raise_end(t->plogs[hi[i].partition], hi[i].offset, &skipped);
        if (st != PULSE_OK)
            pulse_errbuf_set(errbuf, errlen,
                             "topic %s partition %" PRIu32 ": a consumer's cursor at %" PRId64
                             " proves offsets the log no longer holds, and they cannot be recorded as missing: %s",
                             t->name, hi[i].partition, hi[i].offset, pulse_status_message(st));
        else if (skipped > 0) {
            PULSE_ERROR("topic %s partition %" PRIu32 ": a consumer's committed cursor at %" PRId64
                        " is past the recovered log end %" PRId64 ": the %" PRId64 " offsets between were handed "
                        "out and are lost; they are recorded as missing (fetches skip them) and the next publish "
                        "gets offset %" PRId64 " (docs/Operations.md \"Damaged data\")",
                        t->name, hi[i].partition, hi[i].offset, hi[i].offset - skipped, skipped, hi[i].offset);
            raised++;
        }
        pulse_broker_topic_release(b, t);
    }
    if (raised > 0)
        PULSE_ERROR("broker: %" PRIu32 " partition(s) had lost offsets that consumer cursors prove were handed out",
                    raised);
    pulse_free(hi);
    return st;
}
