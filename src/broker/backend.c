/* SPDX-License-Identifier: MIT */
/*
 * backend.c - the broker seam's dispatchers (broker.h -> the backend's
 * table, backend.h), the blocking forms built once for every backend from
 * the asynchronous calls, and the helpers that free what the calls return.
 *
 * A blocking form hands the asynchronous call a completion that a waiter of
 * its own (struct sync below) waits on; the callback may come before the
 * call returns (then the wait returns at once) or later from a thread of
 * the backend. That is why a blocking form must never run on a thread of
 * the backend: the callback it waits for could be queued behind itself.
 */
#include "broker/backend.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "common/alloc.h"

/* ---- lifecycle and identity --------------------------------------------- */

void pulse_broker_drain(struct pulse_broker *b)
{
    b->ops->drain(b);
}

void pulse_broker_close(struct pulse_broker *b)
{
    if (b != NULL)
        b->ops->close(b);
}

const char *pulse_broker_cluster_id(const struct pulse_broker *b)
{
    return b->ops->cluster_id(b);
}

const char *pulse_broker_broker_id(const struct pulse_broker *b)
{
    return b->ops->broker_id(b);
}

int64_t pulse_broker_started_at_ms(const struct pulse_broker *b)
{
    return b->ops->started_at_ms(b);
}

/* ---- the blocking forms' waiter ----------------------------------------- */

struct sync {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    pulse_status_t st;
};

static void sync_init(struct sync *s)
{
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->done = false;
    s->st = PULSE_OK;
}

static void sync_fini(struct sync *s)
{
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

/* The completion handed to the asynchronous call (any thread, once). */
static void sync_done(void *arg, pulse_status_t st)
{
    struct sync *s = arg;

    pthread_mutex_lock(&s->mu);
    s->st = st;
    s->done = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* The result: submitted is what the asynchronous call returned; when it
 * refused (no completion will come) that is the result, else the
 * completion's status once it came. Releases s. */
static pulse_status_t sync_result(struct sync *s, pulse_status_t submitted)
{
    pulse_status_t st = submitted;

    if (submitted == PULSE_OK) {
        pthread_mutex_lock(&s->mu);
        while (!s->done)
            pthread_cond_wait(&s->cv, &s->mu);
        st = s->st;
        pthread_mutex_unlock(&s->mu);
    }
    sync_fini(s);
    return st;
}

/* ---- topics --------------------------------------------------------------- */

void pulse_topic_info_free(struct pulse_topic_info *info)
{
    if (info == NULL)
        return;
    pulse_free(info->stats);
    pulse_free(info);
}

void pulse_topic_info_list_free(struct pulse_topic_info **list, size_t n)
{
    if (list == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        pulse_topic_info_free(list[i]);
    pulse_free(list);
}

pulse_status_t pulse_broker_topic_create_async(struct pulse_broker *b, const struct pulse_topic_spec *spec,
                                               struct pulse_topic_info **out, pulse_admin_done_fn done, void *arg,
                                               char *errbuf, size_t errlen)
{
    return b->ops->topic_create_async(b, spec, out, done, arg, errbuf, errlen);
}

pulse_status_t pulse_broker_topic_create(struct pulse_broker *b, const struct pulse_topic_spec *spec,
                                         struct pulse_topic_info **out, char *errbuf, size_t errlen)
{
    struct sync s;
    sync_init(&s);
    return sync_result(&s, b->ops->topic_create_async(b, spec, out, sync_done, &s, errbuf, errlen));
}

pulse_status_t pulse_broker_topic_get(struct pulse_broker *b, const char *name, bool with_stats,
                                      struct pulse_topic_info **out)
{
    return b->ops->topic_get(b, name, with_stats, out);
}

pulse_status_t pulse_broker_topic_list(struct pulse_broker *b, bool with_stats, struct pulse_topic_info ***out,
                                       size_t *n_out)
{
    return b->ops->topic_list(b, with_stats, out, n_out);
}

pulse_status_t pulse_broker_topic_set_retention_async(struct pulse_broker *b, const char *name, int64_t retention_ms,
                                                      int64_t retention_bytes, struct pulse_topic_info **out,
                                                      pulse_admin_done_fn done, void *arg)
{
    return b->ops->topic_set_retention_async(b, name, retention_ms, retention_bytes, out, done, arg);
}

pulse_status_t pulse_broker_topic_change_async(struct pulse_broker *b, const char *name,
                                               const struct pulse_topic_change *chg, struct pulse_topic_info **out,
                                               pulse_admin_done_fn done, void *arg)
{
    if (b->ops->topic_change_async != NULL)
        return b->ops->topic_change_async(b, name, chg, out, done, arg);
    if (chg->compression >= 0)
        return PULSE_NOT_SUPPORTED;
    return b->ops->topic_set_retention_async(b, name, chg->retention_ms, chg->retention_bytes, out, done, arg);
}

pulse_status_t pulse_broker_topic_lookup_async(struct pulse_broker *b, const char *topic, pulse_admin_done_fn done,
                                               void *arg, bool *pending_out, char *errbuf, size_t errlen)
{
    *pending_out = false;
    if (b->ops->topic_lookup_async == NULL)
        return PULSE_OK;
    return b->ops->topic_lookup_async(b, topic, done, arg, pending_out, errbuf, errlen);
}

pulse_status_t pulse_broker_topic_set_retention(struct pulse_broker *b, const char *name, int64_t retention_ms,
                                                int64_t retention_bytes, struct pulse_topic_info **out)
{
    struct sync s;
    sync_init(&s);
    return sync_result(&s,
                       b->ops->topic_set_retention_async(b, name, retention_ms, retention_bytes, out, sync_done, &s));
}

pulse_status_t pulse_broker_topic_delete_async(struct pulse_broker *b, const char *name, pulse_admin_done_fn done,
                                               void *arg)
{
    return b->ops->topic_delete_async(b, name, done, arg);
}

pulse_status_t pulse_broker_topic_delete(struct pulse_broker *b, const char *name)
{
    struct sync s;
    sync_init(&s);
    return sync_result(&s, b->ops->topic_delete_async(b, name, sync_done, &s));
}

/* ---- publish -------------------------------------------------------------- */

pulse_status_t pulse_broker_publish(struct pulse_broker *b, const char *topic, const struct pulse_publish_record *recs,
                                    size_t n, struct pulse_offset_pair *offsets_out, pulse_publish_done_fn done,
                                    void *arg, bool *pending_out, char *errbuf, size_t errlen)
{
    return b->ops->publish(b, topic, recs, n, offsets_out, done, arg, pending_out, errbuf, errlen);
}

pulse_status_t pulse_broker_publish_wait(struct pulse_broker *b, const char *topic,
                                         const struct pulse_publish_record *recs, size_t n,
                                         struct pulse_offset_pair *offsets_out, char *errbuf, size_t errlen)
{
    struct sync s;
    bool pending = false;

    sync_init(&s);
    pulse_status_t st = b->ops->publish(b, topic, recs, n, offsets_out, sync_done, &s, &pending, errbuf, errlen);
    if (st != PULSE_OK || !pending) {
        sync_fini(&s);
        return st;
    }
    st = sync_result(&s, PULSE_OK);
    if (st != PULSE_OK)
        pulse_errbuf_set(errbuf, errlen, "the records did not become durable: %s", pulse_status_message(st));
    return st;
}

pulse_status_t pulse_broker_publish_idem(struct pulse_broker *b, const char *topic,
                                         const struct pulse_publish_record *recs, size_t n,
                                         struct pulse_publish_idem *idem, struct pulse_offset_pair *offsets_out,
                                         pulse_publish_done_fn done, void *arg, bool *pending_out, char *errbuf,
                                         size_t errlen)
{
    if (b->ops->publish_idem == NULL) {
        pulse_errbuf_set(errbuf, errlen, "the %s backend has no idempotent publish", b->ops->name);
        return PULSE_NOT_SUPPORTED;
    }
    return b->ops->publish_idem(b, topic, recs, n, idem, offsets_out, done, arg, pending_out, errbuf, errlen);
}

/* ---- fetch ------------------------------------------------------------------ */

pulse_status_t pulse_broker_fetch_create(struct pulse_broker *b, const char *topic, uint32_t partition,
                                         struct pulse_fetch **out)
{
    return b->ops->fetch_create(b, topic, partition, out);
}

pulse_status_t pulse_broker_fetch_read(struct pulse_broker *b, struct pulse_fetch *f, int64_t offset,
                                       uint64_t max_bytes, struct pulse_fetch_pos *pos, uint64_t *need)
{
    return b->ops->fetch_read(b, f, offset, max_bytes, pos, need);
}

pulse_status_t pulse_broker_fetch_next(struct pulse_fetch *f, struct pulse_record *rec)
{
    return f->ops->fetch_next(f, rec);
}

void pulse_broker_fetch_rewind(struct pulse_fetch *f)
{
    f->ops->fetch_rewind(f);
}

void pulse_broker_fetch_destroy(struct pulse_fetch *f)
{
    if (f != NULL)
        f->ops->fetch_destroy(f);
}

pulse_status_t pulse_broker_fetch_probe(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t offset,
                                        struct pulse_fetch_pos *pos)
{
    return b->ops->fetch_probe(b, topic, partition, offset, pos);
}

pulse_status_t pulse_broker_fetch_raw(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t offset,
                                      uint64_t max_bytes, struct pulse_raw_slice *out)
{
    if (b->ops->fetch_raw == NULL)
        return PULSE_NOT_SUPPORTED;
    return b->ops->fetch_raw(b, topic, partition, offset, max_bytes, out);
}

pulse_status_t pulse_broker_offset_for_time(struct pulse_broker *b, const char *topic, uint32_t partition,
                                            int64_t ts_ms, int64_t *offset_out)
{
    if (b->ops->offset_for_time == NULL)
        return PULSE_NOT_SUPPORTED;
    return b->ops->offset_for_time(b, topic, partition, ts_ms, offset_out);
}

void pulse_broker_note_fetched(struct pulse_broker *b, const char *topic, uint64_t records, uint64_t bytes)
{
    b->ops->note_fetched(b, topic, records, bytes);
}

void pulse_broker_note_clients(struct pulse_broker *b, uint32_t open)
{
    if (b->ops->note_clients != NULL)
        b->ops->note_clients(b, open);
}

pulse_status_t pulse_broker_wait_data(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t offset,
                                      int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out)
{
    struct pulse_wait_pos one = {topic, partition, offset};
    return b->ops->wait_any(b, &one, 1, deadline_mono_us, fn, arg, parked_out, NULL);
}

pulse_status_t pulse_broker_wait_any(struct pulse_broker *b, const struct pulse_wait_pos *pos, size_t n,
                                     int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out,
                                     size_t *ready_out)
{
    return b->ops->wait_any(b, pos, n, deadline_mono_us, fn, arg, parked_out, ready_out);
}

/* ---- consumers and cursors ------------------------------------------------ */

pulse_status_t pulse_broker_cursor_commit_async(struct pulse_broker *b, const char *consumer,
                                                const struct pulse_cursor *cursors, size_t n, pulse_admin_done_fn done,
                                                void *arg, char *errbuf, size_t errlen)
{
    return b->ops->cursor_commit_async(b, consumer, cursors, n, done, arg, errbuf, errlen);
}

pulse_status_t pulse_broker_cursor_commit(struct pulse_broker *b, const char *consumer,
                                          const struct pulse_cursor *cursors, size_t n, char *errbuf, size_t errlen)
{
    struct sync s;
    sync_init(&s);
    return sync_result(&s, b->ops->cursor_commit_async(b, consumer, cursors, n, sync_done, &s, errbuf, errlen));
}

pulse_status_t pulse_broker_cursor_get_async(struct pulse_broker *b, const char *consumer, const char *topic,
                                             uint32_t partition, struct pulse_cursor *out, pulse_admin_done_fn done,
                                             void *arg)
{
    return b->ops->cursor_get_async(b, consumer, topic, partition, out, done, arg);
}

pulse_status_t pulse_broker_cursor_get(struct pulse_broker *b, const char *consumer, const char *topic,
                                       uint32_t partition, struct pulse_cursor *out)
{
    struct sync s;
    sync_init(&s);
    return sync_result(&s, b->ops->cursor_get_async(b, consumer, topic, partition, out, sync_done, &s));
}

pulse_status_t pulse_broker_cursor_list_async(struct pulse_broker *b, const char *consumer, struct pulse_cursor **out,
                                              size_t *n_out, pulse_admin_done_fn done, void *arg)
{
    return b->ops->cursor_list_async(b, consumer, out, n_out, done, arg);
}

pulse_status_t pulse_broker_cursor_list(struct pulse_broker *b, const char *consumer, struct pulse_cursor **out,
                                        size_t *n_out)
{
    struct sync s;
    sync_init(&s);
    return sync_result(&s, b->ops->cursor_list_async(b, consumer, out, n_out, sync_done, &s));
}

pulse_status_t pulse_broker_consumer_list_async(struct pulse_broker *b, char ***names_out, size_t *n_out,
                                                pulse_admin_done_fn done, void *arg)
{
    return b->ops->consumer_list_async(b, names_out, n_out, done, arg);
}

pulse_status_t pulse_broker_consumer_list(struct pulse_broker *b, char ***names_out, size_t *n_out)
{
    struct sync s;
    sync_init(&s);
    return sync_result(&s, b->ops->consumer_list_async(b, names_out, n_out, sync_done, &s));
}

void pulse_broker_names_free(char **names, size_t n)
{
    if (names == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        pulse_free(names[i]);
    pulse_free(names);
}

pulse_status_t pulse_broker_consumer_delete_async(struct pulse_broker *b, const char *consumer,
                                                  pulse_admin_done_fn done, void *arg)
{
    return b->ops->consumer_delete_async(b, consumer, done, arg);
}

pulse_status_t pulse_broker_consumer_delete(struct pulse_broker *b, const char *consumer)
{
    struct sync s;
    sync_init(&s);
    return sync_result(&s, b->ops->consumer_delete_async(b, consumer, sync_done, &s));
}

/* ---- health and metrics ------------------------------------------------------ */

pulse_status_t pulse_broker_metrics(struct pulse_broker *b, struct pulse_buf *out)
{
    return b->ops->metrics(b, out);
}

pulse_status_t pulse_broker_metrics_per_topic(struct pulse_broker *b, struct pulse_buf *out)
{
    if (b->ops->metrics_per_topic == NULL)
        return b->ops->metrics(b, out);
    return b->ops->metrics_per_topic(b, out);
}

pulse_status_t pulse_broker_fenced_list(struct pulse_broker *b, struct pulse_fenced_partition **out, size_t *n_out)
{
    return b->ops->fenced_list(b, out, n_out);
}

/* ---- consumer groups ---------------------------------------------------- */

bool pulse_broker_name_valid(const char *name, size_t len)
{
    if (name == NULL || len < 1 || len > PULSE_NAME_MAX)
        return false;
    if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
        return false;
    if (len >= 2 && name[0] == '_' && name[1] == '_')
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return false;
    }
    return true;
}

/* Here, beside the rule it applies, so that every user of the seam (the
 * Kafka backend included) links it without the local backend's topic map. */
bool pulse_broker_cname_valid(const char *name)
{
    return name != NULL && pulse_broker_name_valid(name, strnlen(name, PULSE_NAME_MAX + 1));
}

pulse_status_t pulse_group_join_names_check(const char *group, const struct pulse_group_join_spec *spec, char *errbuf,
                                            size_t errlen)
{
    if (!pulse_broker_cname_valid(group)) {
        pulse_errbuf_set(errbuf, errlen,
                         "group name must be 1 to 249 characters of [A-Za-z0-9._-], not \".\" or "
                         "\"..\", and must not begin with \"__\"");
        return PULSE_INVALID_NAME;
    }
    if (spec->ntopics == 0 || spec->ntopics > PULSE_GROUP_MAX_TOPICS) {
        pulse_errbuf_set(errbuf, errlen, "a member consumes 1 to %d topics", PULSE_GROUP_MAX_TOPICS);
        return PULSE_INVALID;
    }
    for (size_t i = 0; i < spec->ntopics; i++) {
        const char *t = spec->topics[i];
        if (!pulse_broker_cname_valid(t)) {
            pulse_errbuf_set(errbuf, errlen, "topics[%zu] breaks the name rule", i);
            return PULSE_INVALID_NAME;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(t, spec->topics[j]) == 0) {
                pulse_errbuf_set(errbuf, errlen, "topic \"%s\" is named twice", t);
                return PULSE_INVALID;
            }
        }
    }
    return PULSE_OK;
}

pulse_status_t pulse_group_join_lease(const struct pulse_group_join_spec *spec, int64_t lease_min_ms,
                                      int64_t lease_default_ms, int64_t lease_max_ms, int64_t *lease_ms, char *errbuf,
                                      size_t errlen)
{
    *lease_ms = spec->lease_ms == 0 ? lease_default_ms : spec->lease_ms;
    if (*lease_ms < lease_min_ms || *lease_ms > lease_max_ms) {
        pulse_errbuf_set(errbuf, errlen,
                         "lease_ms must be in %" PRId64 "..%" PRId64 " (groups.lease-min, groups.lease-max)",
                         lease_min_ms, lease_max_ms);
        return PULSE_INVALID;
    }
    return PULSE_OK;
}

void pulse_group_view_fini(struct pulse_group_view *v)
{
    if (v == NULL)
        return;
    pulse_free(v->parts);
    v->parts = NULL;
    v->nparts = 0;
}

void pulse_group_info_free(struct pulse_group_info *info)
{
    if (info == NULL)
        return;
    for (size_t i = 0; i < info->nmembers; i++)
        pulse_broker_names_free(info->members[i].topics, info->members[i].ntopics);
    pulse_free(info->members);
    pulse_free(info->parts);
    pulse_free(info);
}

pulse_status_t pulse_broker_group_join(struct pulse_broker *b, const char *group,
                                       const struct pulse_group_join_spec *spec, struct pulse_group_view *view,
                                       char *errbuf, size_t errlen)
{
    if (b->ops->group_join == NULL) { /* only the asynchronous form */
        struct sync s;
        sync_init(&s);
        return sync_result(&s, b->ops->group_join_async(b, group, spec, view, sync_done, &s, errbuf, errlen));
    }
    return b->ops->group_join(b, group, spec, view, errbuf, errlen);
}

pulse_status_t pulse_broker_group_heartbeat(struct pulse_broker *b, const char *group, const char *member,
                                            struct pulse_group_view *view)
{
    if (b->ops->group_heartbeat == NULL) {
        struct sync s;
        sync_init(&s);
        return sync_result(&s, b->ops->group_heartbeat_async(b, group, member, view, sync_done, &s));
    }
    return b->ops->group_heartbeat(b, group, member, view);
}

pulse_status_t pulse_broker_group_leave(struct pulse_broker *b, const char *group, const char *member)
{
    if (b->ops->group_leave == NULL) {
        struct sync s;
        sync_init(&s);
        return sync_result(&s, b->ops->group_leave_async(b, group, member, sync_done, &s));
    }
    return b->ops->group_leave(b, group, member);
}

/* The asynchronous forms: a backend without one (local) answers from its
 * synchronous call, and done runs on the caller's thread before return. */
static pulse_status_t done_now(pulse_status_t st, pulse_admin_done_fn done, void *arg)
{
    if (st == PULSE_OK)
        done(arg, PULSE_OK);
    return st;
}

pulse_status_t pulse_broker_group_join_async(struct pulse_broker *b, const char *group,
                                             const struct pulse_group_join_spec *spec, struct pulse_group_view *view,
                                             pulse_admin_done_fn done, void *arg, char *errbuf, size_t errlen)
{
    if (b->ops->group_join_async != NULL)
        return b->ops->group_join_async(b, group, spec, view, done, arg, errbuf, errlen);
    return done_now(b->ops->group_join(b, group, spec, view, errbuf, errlen), done, arg);
}

pulse_status_t pulse_broker_group_heartbeat_async(struct pulse_broker *b, const char *group, const char *member,
                                                  struct pulse_group_view *view, pulse_admin_done_fn done, void *arg)
{
    if (b->ops->group_heartbeat_async != NULL)
        return b->ops->group_heartbeat_async(b, group, member, view, done, arg);
    return done_now(b->ops->group_heartbeat(b, group, member, view), done, arg);
}

pulse_status_t pulse_broker_group_leave_async(struct pulse_broker *b, const char *group, const char *member,
                                              pulse_admin_done_fn done, void *arg)
{
    if (b->ops->group_leave_async != NULL)
        return b->ops->group_leave_async(b, group, member, done, arg);
    return done_now(b->ops->group_leave(b, group, member), done, arg);
}

pulse_status_t pulse_broker_group_fetched_async(struct pulse_broker *b, const char *group, const char *member,
                                                uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                                pulse_admin_done_fn done, void *arg)
{
    if (b->ops->group_fetched_async != NULL)
        return b->ops->group_fetched_async(b, group, member, generation, pos, n, done, arg);
    return done_now(b->ops->group_fetched(b, group, member, generation, pos, n), done, arg);
}

pulse_status_t pulse_broker_group_poll_async(struct pulse_broker *b, const char *group, const char *member,
                                             const struct pulse_group_resume *from, struct pulse_group_view *view,
                                             pulse_admin_done_fn done, void *arg, char *errbuf, size_t errlen)
{
    return b->ops->group_poll_async(b, group, member, from, view, done, arg, errbuf, errlen);
}

pulse_status_t pulse_broker_group_fetched(struct pulse_broker *b, const char *group, const char *member,
                                          uint64_t generation, const struct pulse_group_partition *pos, size_t n)
{
    if (b->ops->group_fetched == NULL) {
        struct sync s;
        sync_init(&s);
        return sync_result(&s, b->ops->group_fetched_async(b, group, member, generation, pos, n, sync_done, &s));
    }
    return b->ops->group_fetched(b, group, member, generation, pos, n);
}

pulse_status_t pulse_broker_group_wait(struct pulse_broker *b, const char *group, const char *member,
                                       uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                       int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out)
{
    return b->ops->group_wait(b, group, member, generation, pos, n, deadline_mono_us, fn, arg, parked_out);
}

pulse_status_t pulse_broker_group_commit_async(struct pulse_broker *b, const char *group, const char *member,
                                               uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                               struct pulse_group_view *view, pulse_admin_done_fn done, void *arg,
                                               char *errbuf, size_t errlen)
{
    return b->ops->group_commit_async(b, group, member, generation, pos, n, view, done, arg, errbuf, errlen);
}

pulse_status_t pulse_broker_group_commit(struct pulse_broker *b, const char *group, const char *member,
                                         uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                         struct pulse_group_view *view, char *errbuf, size_t errlen)
{
    struct sync s;
    sync_init(&s);
    return sync_result(&s, b->ops->group_commit_async(b, group, member, generation, pos, n, view, sync_done, &s, errbuf,
                                                      errlen));
}

pulse_status_t pulse_broker_group_list(struct pulse_broker *b, char ***names_out, size_t *n_out)
{
    return b->ops->group_list(b, names_out, n_out);
}

pulse_status_t pulse_broker_group_describe_async(struct pulse_broker *b, const char *group,
                                                 struct pulse_group_info **out, pulse_admin_done_fn done, void *arg)
{
    return b->ops->group_describe_async(b, group, out, done, arg);
}

pulse_status_t pulse_broker_group_describe(struct pulse_broker *b, const char *group, struct pulse_group_info **out)
{
    struct sync s;
    sync_init(&s);
    return sync_result(&s, b->ops->group_describe_async(b, group, out, sync_done, &s));
}
