/* SPDX-License-Identifier: MIT */
/*
 * backend.h - what a broker backend implements: one table of functions,
 * chosen when the broker is opened, behind every call of broker.h.
 *
 * Why a table and not a link-time choice: the backend is a setting of one
 * pulsed binary (broker.backend = local, or kafka: src/kafka), so both must
 * live in the same program and the choice must be
 * made at start, from the configuration. A table read once per call costs
 * one indirect call, nothing next to what any call does, and it makes the
 * contract a list a reader (and the compiler) can check: a backend that
 * misses a function does not compile into a table silently, and the
 * dispatchers in backend.c are the one place that knows a call is virtual.
 *
 * The shape is the one of struct pulse_io (storage/io.h): a const table of
 * functions, plus the first member of the backend's state. A backend embeds
 * struct pulse_broker as the first member of its own state and hands out a
 * pointer to it; its functions convert back (C11 6.7.2.1p15 makes the
 * conversion between a struct and its first member exact). Fetches are
 * backend objects too: struct pulse_fetch starts each backend's fetch
 * state in the same way.
 *
 * Each function has the contract of its broker.h counterpart: the same
 * arguments (the broker first), the same statuses, the same callback rules
 * (exactly once; possibly on the caller's thread before the call returns;
 * never with a lock of the backend held; refused calls get no callback).
 * Blocking forms are not in the table: backend.c builds each one from its
 * asynchronous call. fetch_raw may be NULL: the backend has no stored form
 * to hand out, and pulse_broker_fetch_raw answers PULSE_NOT_SUPPORTED.
 *
 * Thread: as broker.h. The table is immutable.
 */
#ifndef PULSE_BROKER_BACKEND_H
#define PULSE_BROKER_BACKEND_H

#include "broker/broker.h"

struct pulse_broker_ops;

/* The first member of a backend's state. */
struct pulse_broker {
    const struct pulse_broker_ops *ops;
};

/* The first member of a backend's fetch state. */
struct pulse_fetch {
    const struct pulse_broker_ops *ops;
};

struct pulse_broker_ops {
    const char *name; /* the broker.backend value: "local", "kafka" */

    /* lifecycle and identity */
    void (*drain)(struct pulse_broker *b);
    void (*close)(struct pulse_broker *b);
    const char *(*cluster_id)(const struct pulse_broker *b);
    const char *(*broker_id)(const struct pulse_broker *b);
    int64_t (*started_at_ms)(const struct pulse_broker *b);

    /* topics */
    pulse_status_t (*topic_create_async)(struct pulse_broker *b, const struct pulse_topic_spec *spec,
                                         struct pulse_topic_info **out, pulse_admin_done_fn done, void *arg,
                                         char *errbuf, size_t errlen);
    pulse_status_t (*topic_get)(struct pulse_broker *b, const char *name, bool with_stats,
                                struct pulse_topic_info **out);
    pulse_status_t (*topic_list)(struct pulse_broker *b, bool with_stats, struct pulse_topic_info ***out,
                                 size_t *n_out);
    pulse_status_t (*topic_set_retention_async)(struct pulse_broker *b, const char *name, int64_t retention_ms,
                                                int64_t retention_bytes, struct pulse_topic_info **out,
                                                pulse_admin_done_fn done, void *arg);
    pulse_status_t (*topic_delete_async)(struct pulse_broker *b, const char *name, pulse_admin_done_fn done, void *arg);

    /* publish */
    pulse_status_t (*publish)(struct pulse_broker *b, const char *topic, const struct pulse_publish_record *recs,
                              size_t n, struct pulse_offset_pair *offsets_out, pulse_publish_done_fn done, void *arg,
                              bool *pending_out, char *errbuf, size_t errlen);

    /* fetch */
    pulse_status_t (*fetch_create)(struct pulse_broker *b, const char *topic, uint32_t partition,
                                   struct pulse_fetch **out);
    pulse_status_t (*fetch_read)(struct pulse_broker *b, struct pulse_fetch *f, int64_t offset, uint64_t max_bytes,
                                 struct pulse_fetch_pos *pos, uint64_t *need);
    pulse_status_t (*fetch_next)(struct pulse_fetch *f, struct pulse_record *rec);
    void (*fetch_rewind)(struct pulse_fetch *f);
    void (*fetch_destroy)(struct pulse_fetch *f);
    pulse_status_t (*fetch_probe)(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t offset,
                                  struct pulse_fetch_pos *pos);
    pulse_status_t (*fetch_raw)(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t offset,
                                uint64_t max_bytes, struct pulse_raw_slice *out); /* NULL: not supported */
    void (*note_fetched)(struct pulse_broker *b, const char *topic, uint64_t records, uint64_t bytes);
    pulse_status_t (*offset_for_time)(struct pulse_broker *b, const char *topic, uint32_t partition, int64_t ts_ms,
                                      int64_t *offset_out); /* NULL: PULSE_NOT_SUPPORTED */
    pulse_status_t (*wait_any)(struct pulse_broker *b, const struct pulse_wait_pos *pos, size_t n,
                               int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out,
                               size_t *ready_out); /* wait_data is the case n == 1 (backend.c) */

    /* consumers and cursors */
    pulse_status_t (*cursor_commit_async)(struct pulse_broker *b, const char *consumer,
                                          const struct pulse_cursor *cursors, size_t n, pulse_admin_done_fn done,
                                          void *arg, char *errbuf, size_t errlen);
    pulse_status_t (*cursor_get_async)(struct pulse_broker *b, const char *consumer, const char *topic,
                                       uint32_t partition, struct pulse_cursor *out, pulse_admin_done_fn done,
                                       void *arg);
    pulse_status_t (*cursor_list_async)(struct pulse_broker *b, const char *consumer, struct pulse_cursor **out,
                                        size_t *n_out, pulse_admin_done_fn done, void *arg);
    pulse_status_t (*consumer_list_async)(struct pulse_broker *b, char ***names_out, size_t *n_out,
                                          pulse_admin_done_fn done, void *arg);
    pulse_status_t (*consumer_delete_async)(struct pulse_broker *b, const char *consumer, pulse_admin_done_fn done,
                                            void *arg);

    /* health and metrics */
    pulse_status_t (*metrics)(struct pulse_broker *b, struct pulse_buf *out);
    pulse_status_t (*fenced_list)(struct pulse_broker *b, struct pulse_fenced_partition **out, size_t *n_out);

    /* consumer groups */
    pulse_status_t (*group_join)(struct pulse_broker *b, const char *group, const struct pulse_group_join_spec *spec,
                                 struct pulse_group_view *view, char *errbuf, size_t errlen);
    pulse_status_t (*group_heartbeat)(struct pulse_broker *b, const char *group, const char *member,
                                      struct pulse_group_view *view);
    pulse_status_t (*group_leave)(struct pulse_broker *b, const char *group, const char *member);
    pulse_status_t (*group_poll_async)(struct pulse_broker *b, const char *group, const char *member,
                                       const struct pulse_group_resume *from, struct pulse_group_view *view,
                                       pulse_admin_done_fn done, void *arg, char *errbuf, size_t errlen);
    pulse_status_t (*group_fetched)(struct pulse_broker *b, const char *group, const char *member, uint64_t generation,
                                    const struct pulse_group_partition *pos, size_t n);
    pulse_status_t (*group_wait)(struct pulse_broker *b, const char *group, const char *member, uint64_t generation,
                                 const struct pulse_group_partition *pos, size_t n, int64_t deadline_mono_us,
                                 pulse_wait_fn fn, void *arg, bool *parked_out);
    pulse_status_t (*group_commit_async)(struct pulse_broker *b, const char *group, const char *member,
                                         uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                         struct pulse_group_view *view, pulse_admin_done_fn done, void *arg,
                                         char *errbuf, size_t errlen);
    pulse_status_t (*group_list)(struct pulse_broker *b, char ***names_out, size_t *n_out);
    pulse_status_t (*group_describe_async)(struct pulse_broker *b, const char *group, struct pulse_group_info **out,
                                           pulse_admin_done_fn done, void *arg);

    /* idempotent publish; NULL: not supported */
    pulse_status_t (*publish_idem)(struct pulse_broker *b, const char *topic, const struct pulse_publish_record *recs,
                                   size_t n, struct pulse_publish_idem *idem, struct pulse_offset_pair *offsets_out,
                                   pulse_publish_done_fn done, void *arg, bool *pending_out, char *errbuf,
                                   size_t errlen);

    /* metrics with per-partition families summed by topic; NULL: the
     * backend has no per-partition families, metrics answers instead */
    pulse_status_t (*metrics_per_topic)(struct pulse_broker *b, struct pulse_buf *out);
    /* a change of topic settings beyond retention; NULL: only retention
     * (pulse_broker_topic_change_async) */
    pulse_status_t (*topic_change_async)(struct pulse_broker *b, const char *name, const struct pulse_topic_change *chg,
                                         struct pulse_topic_info **out, pulse_admin_done_fn done, void *arg);
    /* whether a topic exists, found out off the caller's thread; NULL: the
     * backend always knows at once (pulse_broker_topic_lookup_async) */
    pulse_status_t (*topic_lookup_async)(struct pulse_broker *b, const char *topic, pulse_admin_done_fn done, void *arg,
                                         bool *pending_out, char *errbuf, size_t errlen);
    /* the open client connections (pulse_broker_note_clients); NULL: the
     * backend has no use for them */
    void (*note_clients)(struct pulse_broker *b, uint32_t open);

    /* asynchronous forms of the group calls above, for a backend whose
     * group calls wait for the cluster (kafka); NULL: the synchronous one
     * answers (backend.c). A backend with the asynchronous form may leave
     * the synchronous one NULL (backend.c blocks on the asynchronous). */
    pulse_status_t (*group_join_async)(struct pulse_broker *b, const char *group,
                                       const struct pulse_group_join_spec *spec, struct pulse_group_view *view,
                                       pulse_admin_done_fn done, void *arg, char *errbuf, size_t errlen);
    pulse_status_t (*group_heartbeat_async)(struct pulse_broker *b, const char *group, const char *member,
                                            struct pulse_group_view *view, pulse_admin_done_fn done, void *arg);
    pulse_status_t (*group_leave_async)(struct pulse_broker *b, const char *group, const char *member,
                                        pulse_admin_done_fn done, void *arg);
    pulse_status_t (*group_fetched_async)(struct pulse_broker *b, const char *group, const char *member,
                                          uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                          pulse_admin_done_fn done, void *arg);
};

#endif
