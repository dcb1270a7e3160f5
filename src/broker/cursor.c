/* SPDX-License-Identifier: MIT */
/*
 * cursor.c - consumer cursors: the next offset a consumer will read, per
 * topic and partition, stored durably in the metadata store.
 *
 * A commit is validated completely (consumer name, every topic, partition
 * and offset in [0, high watermark]) and then written as one sync write
 * batch, so a multi-cursor commit lands entirely or not at all, and is on
 * disk before the caller is answered. Commits hold the broker's admin lock
 * for reading: a topic delete (which removes the topic's cursors in its own
 * batch) cannot interleave between a commit's checks and its write, so no
 * cursor ever outlives its topic.
 */
#include "broker/broker.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "broker/broker_int.h"
#include "common/status.h"
#include "common/alloc.h"
#include "meta/meta.h"

static bool cname_valid(const char *name)
{
    return name != NULL && pulse_broker_name_valid(name, strnlen(name, PULSE_NAME_MAX + 1));
}

pulse_status_t pulse_broker_cursor_commit(struct pulse_broker *b, const char *consumer,
                                          const struct pulse_cursor *cursors, size_t n, char *errbuf, size_t errlen)
{
    pulse_status_t st = PULSE_OK;
    struct pulse_meta_cursor *mc = NULL;

    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (!cname_valid(consumer)) {
        pulse_errbuf_set(errbuf, errlen,
                "consumer name must be 1 to 249 characters of [A-Za-z0-9._-], not \".\" or \"..\", "
                "and must not begin with \"__\"");
        return PULSE_INVALID_NAME;
    }
    if (cursors == NULL || n == 0) {
        pulse_errbuf_set(errbuf, errlen, "no cursors to commit");
        return PULSE_INVALID;
    }
    mc = pulse_calloc(n, sizeof *mc);
    if (mc == NULL)
        return PULSE_NOMEM;

    pthread_rwlock_rdlock(&b->admin_lock);
    for (size_t i = 0; i < n; i++) {
        const struct pulse_cursor *c = &cursors[i];
        struct pulse_broker_topic *t;
        int64_t hw;

        t = NULL;
        if (strnlen(c->topic, sizeof c->topic) < sizeof c->topic)
            t = pulse_broker_topic_acquire(b, c->topic);
        if (t == NULL) {
            pulse_errbuf_set(errbuf, errlen, "cursor %zu: topic \"%.*s\" does not exist", i, PULSE_NAME_MAX, c->topic);
            st = PULSE_TOPIC_NOT_FOUND;
            goto out;
        }
        if (c->partition >= t->nparts) {
            pulse_errbuf_set(errbuf, errlen, "cursor %zu: topic \"%s\" has no partition %" PRIu32, i, t->name, c->partition);
            pulse_broker_topic_release(b, t);
            st = PULSE_PARTITION_NOT_FOUND;
            goto out;
        }
        hw = pulse_plog_high_watermark(t->plogs[c->partition]);
        pulse_broker_topic_release(b, t);
        if (c->offset < 0 || c->offset > hw) {
            pulse_errbuf_set(errbuf, errlen,
                    "cursor %zu: offset %" PRId64 " is outside [0, %" PRId64 "] of %s/%" PRIu32, i, c->offset, hw,
                    c->topic, c->partition);
            st = PULSE_RANGE;
            goto out;
        }
        memcpy(mc[i].topic, c->topic, sizeof mc[i].topic);
        mc[i].partition = c->partition;
        mc[i].offset = c->offset;
    }
    st = pulse_meta_cursor_put(b->meta, consumer, mc, n);
    if (st != PULSE_OK)
        pulse_errbuf_set(errbuf, errlen, "cannot store the cursors: %s", pulse_status_message(st));
out:
    pthread_rwlock_unlock(&b->admin_lock);
    pulse_free(mc);
    return st;
}

pulse_status_t pulse_broker_cursor_get(struct pulse_broker *b, const char *consumer, const char *topic,
                                       uint32_t partition, struct pulse_cursor *out)
{
    pulse_status_t st;
    struct pulse_broker_topic *t = NULL;
    int64_t off = 0;
    int64_t hw;

    if (!cname_valid(consumer) || !cname_valid(topic))
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

pulse_status_t pulse_broker_cursor_list(struct pulse_broker *b, const char *consumer, struct pulse_cursor **out,
                                        size_t *n_out)
{
    pulse_status_t st;
    struct pulse_meta_cursor *mc = NULL;
    struct pulse_cursor *cs = NULL;
    size_t n = 0, k = 0;

    if (!cname_valid(consumer))
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

pulse_status_t pulse_broker_consumer_list(struct pulse_broker *b, char ***names_out, size_t *n_out)
{
    return pulse_meta_consumer_list(b->meta, names_out, n_out);
}

void pulse_broker_names_free(char **names, size_t n)
{
    pulse_meta_names_free(names, n);
}

pulse_status_t pulse_broker_consumer_delete(struct pulse_broker *b, const char *consumer)
{
    if (!cname_valid(consumer))
        return PULSE_INVALID_NAME;
    return pulse_meta_consumer_delete(b->meta, consumer);
}
