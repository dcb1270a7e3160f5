/* SPDX-License-Identifier: MIT */
/*
 * kgroups.h - inside the Kafka backend's consumer groups: what the group
 * log (kgroups.c: the events, the reader, the waiters) shares with the
 * seam's group calls (kgcalls.c). Never included from another directory.
 *
 * Locks: kg->mu (struct kgroups) guards the group table, each group's
 * state machine and waiters, and the pending calls. No call to the cluster
 * and no completion runs with it held; no other lock is taken under it.
 */
#ifndef PULSE_KAFKA_KGROUPS_H
#define PULSE_KAFKA_KGROUPS_H

#include "kafka/kafka_int.h"
#include "kafka/kgroupsm.h"

struct pulse_buf;

/* The group log: one partition, read from its start by every gateway. */
#define PULSE_KAFKA_GROUP_LOG "__pulse_groups"

#define KG_POLL_MS 20
#define KG_EVENT_MAX (900 * 1024) /* below Kafka's default message.max.bytes */
#define KG_PARTITIONS_MAX 100000  /* most partitions a join may report per topic */
#define KG_POS_MAX 100000

struct kgcall;
struct kggroup;

/* Under kg->mu, right after the call's event was applied (sm is its
 * group's state, st what the state machine answered): the call's own
 * reading of the state; returns the call's status. */
typedef pulse_status_t (*kgcall_at_fn)(struct kgcall *c, const struct kgsm *sm, pulse_status_t st);
/* Then with no lock held: completes the call (done exactly once) and frees
 * it (pulse_kgroups_call_free). NULL: done(arg, st), then free. */
typedef void (*kgcall_after_fn)(struct pulse_kafka *k, struct kgcall *c, pulse_status_t st);

enum kgcall_kind { KC_JOIN, KC_HEARTBEAT, KC_LEAVE, KC_POLL, KC_FETCHED, KC_COMMIT };

/* A call of this gateway waiting for its event. */
struct kgcall {
    struct kgcall *next;
    uint64_t seq;
    enum kgcall_kind kind;
    int64_t deadline_us;
    char group[PULSE_NAME_MAX + 1];
    struct pulse_group_view *view; /* the caller's; NULL for leave, fetched */
    pulse_admin_done_fn done;
    void *arg;
    char *errbuf;
    size_t errlen;
    kgcall_at_fn at_event; /* nullable */
    kgcall_after_fn after; /* nullable */
    /* poll: where the member's last answer left off */
    struct pulse_group_partition *from;
    size_t nfrom;
    uint64_t from_gen;
    bool has_from, start_latest, need_marks;
    int64_t *committed; /* poll: per view partition, the state's committed position (-1 none) */
    /* commit: the positions, for the consumer-group offsets */
    struct pulse_group_partition *pos;
    size_t npos;
};

struct kgwait;

struct kggroup {
    char name[PULSE_NAME_MAX + 1];
    struct kgsm *sm;
    struct kgwait *waiters;
};

struct kgroups {
    pthread_mutex_t mu;
    struct kggroup **groups; /* sorted by name; never freed before close */
    size_t ngroups;
    struct kgcall *pending;
    char gw[17]; /* this gateway's random id, hex */
    atomic_ullong seq;
    int64_t lease_min_ms, lease_max_ms, lease_default_ms;
    uint32_t max_members, max_groups;
    rd_kafka_t *reader;
    rd_kafka_topic_t *rkt;
    bool consuming;    /* kgread (open before it starts) */
    atomic_bool ready; /* the log exists and is read: calls are taken */
    pthread_t thread;
    bool started;
    int64_t applied; /* offset of the last event applied, -1 none (mu) */
    /* The log's end when kgread started (-1 until asked); caught_up once
     * kgread applied everything before it: until then the group list and
     * descriptions answer PULSE_UNAVAILABLE (a gateway that just started
     * would show groups part-built). Member calls need no wait: their
     * events come after everything before them. */
    int64_t start_end; /* kgread only */
    atomic_bool caught_up;
    atomic_ullong events, bad_events, calls, timeouts, fenced, joins, commits;
};

/* kgroups.c: a new call of this gateway (its sequence number and deadline
 * set), or NULL; free with pulse_kgroups_call_free (NULL is a no-op). */
struct kgcall *pulse_kgroups_call_new(struct pulse_kafka *k, enum kgcall_kind kind, const char *group,
                                      pulse_admin_done_fn done, void *arg);
void pulse_kgroups_call_free(struct kgcall *c);
/* The event's head "K gw seq" into b. */
pulse_status_t pulse_kgroups_head(struct pulse_buf *b, char kind, const struct pulse_kafka *k, const struct kgcall *c);
/* Registers c and produces b (its event; st: how building b went) to the
 * log; frees b. PULSE_OK: c completes later, exactly once. Else c is freed
 * and never completes: PULSE_SHUTDOWN, PULSE_TOO_LARGE, the producer's
 * refusal, or st. */
pulse_status_t pulse_kgroups_submit(struct pulse_kafka *k, struct kgcall *c, struct pulse_buf *b, pulse_status_t st);
/* Appends a "topic gone" event for each topic of group the metadata
 * cache no longer has (best effort: a failure is retried by the next
 * call). Locks: kg->mu, then meta_mu, never both at once. */
void pulse_kgroups_note_gone(struct pulse_kafka *k, const char *group);
/* Whether m is a member id's text: 1..40 of [A-Za-z0-9-]. */
bool pulse_kgroups_member_valid(const char *m);
/* The group called name, or NULL (kg->mu held). */
struct kggroup *pulse_kgroups_find(struct kgroups *kg, const char *name);

/* Makes sure the log exists (the mock: rd_kafka_mock_topic_create; a
 * real cluster: CreateTopics when all-topics metadata lacks it), makes
 * its reader from conf (taken, even on failure) and starts kgread. On
 * failure k->groups may be part-made: pulse_kgroups_close frees it. */
pulse_status_t pulse_kgroups_open(struct pulse_kafka *k, const struct pulse_kafka_config *cfg, rd_kafka_conf_t *conf,
                                  char *errbuf, size_t errlen);
/* Fails every pending call and fires every group waiter (PULSE_SHUTDOWN). */
void pulse_kgroups_drain(struct pulse_kafka *k);
/* Joins kgread (k->stopping must be set) and frees the groups. */
void pulse_kgroups_close(struct pulse_kafka *k);
pulse_status_t pulse_kgroups_metrics(struct pulse_kafka *k, struct pulse_buf *out);
/* PULSE_TOO_LARGE (errbuf says) when a join to group would pass
 * groups.max-members or groups.max-groups as this gateway's state is now
 * (calls in flight elsewhere may pass it by a few). */
pulse_status_t pulse_kgroups_room(struct kgroups *kg, const char *group, char *errbuf, size_t errlen);
/* The group wait (broker.h pulse_broker_group_wait): parked on the data
 * positions (kwait) and on the group (news for the member, deadline). */
pulse_status_t pulse_kafka_group_wait(struct pulse_broker *b, const char *group, const char *member,
                                      uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                      int64_t deadline_mono_us, pulse_wait_fn fn, void *arg, bool *parked_out);

/* kgcalls.c: the seam's other group calls (backend.h). */
pulse_status_t pulse_kafka_group_join_async(struct pulse_broker *b, const char *group,
                                            const struct pulse_group_join_spec *spec, struct pulse_group_view *view,
                                            pulse_admin_done_fn done, void *arg, char *errbuf, size_t errlen);
pulse_status_t pulse_kafka_group_heartbeat_async(struct pulse_broker *b, const char *group, const char *member,
                                                 struct pulse_group_view *view, pulse_admin_done_fn done, void *arg);
pulse_status_t pulse_kafka_group_leave_async(struct pulse_broker *b, const char *group, const char *member,
                                             pulse_admin_done_fn done, void *arg);
pulse_status_t pulse_kafka_group_fetched_async(struct pulse_broker *b, const char *group, const char *member,
                                               uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                               pulse_admin_done_fn done, void *arg);
pulse_status_t pulse_kafka_group_poll_async(struct pulse_broker *b, const char *group, const char *member,
                                            const struct pulse_group_resume *from, struct pulse_group_view *view,
                                            pulse_admin_done_fn done, void *arg, char *errbuf, size_t errlen);
pulse_status_t pulse_kafka_group_commit_async(struct pulse_broker *b, const char *group, const char *member,
                                              uint64_t generation, const struct pulse_group_partition *pos, size_t n,
                                              struct pulse_group_view *view, pulse_admin_done_fn done, void *arg,
                                              char *errbuf, size_t errlen);
pulse_status_t pulse_kafka_group_list(struct pulse_broker *b, char ***names_out, size_t *n_out);
pulse_status_t pulse_kafka_group_describe_async(struct pulse_broker *b, const char *group,
                                                struct pulse_group_info **out, pulse_admin_done_fn done, void *arg);

#endif
