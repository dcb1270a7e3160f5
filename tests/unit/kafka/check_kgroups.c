/* SPDX-License-Identifier: MIT */
/*
 * check_kgroups.c - the Kafka backend's consumer groups (kgroups.c,
 * kgcalls.c, and what they added to kgroupsm.c): the group log's events
 * as the state machine sees them (the end of a group fetch, a deleted
 * topic, since when an owner owns, ids with a secret, descriptions that
 * leave out expired members), and, over the mock cluster, hostile records
 * in the group log are skipped by the reader while the groups keep working.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "broker/broker.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/settings.h"
#include "kafka/kafka.h"
#include "kafka/kafka_int.h"
#include "kafka/kafka_settings.h"
#include "kafka/kgroups.h"
#include "kafka/kgroupsm.h"

static const struct kgsm_topic topics_t4[] = {{"t", 4}};
static const struct kgsm_topic topics_t4_u2[] = {{"t", 4}, {"u", 2}};

static struct kgsm_event join2(int64_t offset, int64_t time_ms, const struct kgsm_topic *t, size_t nt,
                               const char *secret)
{
    struct kgsm_event e = {KGSM_JOIN, offset, time_ms, NULL, t, nt, 30000, 0, NULL, 0, secret, false};
    return e;
}

static struct kgsm_event call2(enum kgsm_kind kind, int64_t offset, int64_t time_ms, const char *member, uint64_t gen,
                               const struct pulse_group_partition *pos, size_t n)
{
    struct kgsm_event e = {kind, offset, time_ms, member, NULL, 0, 0, gen, pos, n, NULL, false};
    return e;
}

static pulse_status_t apply_ev(struct kgsm *g, struct kgsm_event ev, struct pulse_group_view *v)
{
    if (v != NULL)
        memset(v, 0, sizeof *v);
    return pulse_kgsm_apply(g, &ev, v);
}

START_TEST(test_the_end_of_a_group_fetch_is_fenced_by_generation_and_ownership)
{
    struct kgsm *g = pulse_kgsm_new();
    struct pulse_group_view v;
    ck_assert_int_eq(apply_ev(g, join2(1, 1000, topics_t4, 1, NULL), &v), PULSE_OK);
    uint64_t gen = v.generation;
    struct pulse_group_partition read[1] = {{"t", 3, -1}};
    pulse_group_view_fini(&v);
    ck_assert_int_eq(apply_ev(g, call2(KGSM_FETCHED, 2, 1001, "m-1", gen, read, 1), NULL), PULSE_OK);
    ck_assert_int_eq(apply_ev(g, call2(KGSM_FETCHED, 3, 1002, "m-1", gen + 1, read, 1), NULL), PULSE_GROUP_FENCED);
    /* A second member: partition 3 is handed over at m-1's next call, and
     * that call (a fetch's end) then finds it no longer owned. */
    ck_assert_int_eq(apply_ev(g, join2(4, 1003, topics_t4, 1, NULL), NULL), PULSE_OK);
    gen = pulse_kgsm_generation(g);
    const char *assigned = NULL;
    ck_assert_str_eq(pulse_kgsm_owner(g, "t", 3, &assigned), "m-1");
    ck_assert_str_eq(assigned, "m-4");
    ck_assert_int_eq(apply_ev(g, call2(KGSM_FETCHED, 5, 1004, "m-1", gen, read, 1), NULL), PULSE_GROUP_FENCED);
    ck_assert_str_eq(pulse_kgsm_owner(g, "t", 3, NULL), "m-4");
    ck_assert_int_eq(apply_ev(g, call2(KGSM_FETCHED, 6, 1005, "m-9", gen, read, 1), NULL), PULSE_REJOIN);
    pulse_kgsm_free(g);
}
END_TEST

START_TEST(test_owned_since_counts_from_the_generation_the_owner_got_it_in)
{
    struct kgsm *g = pulse_kgsm_new();
    ck_assert_int_eq(apply_ev(g, join2(1, 1000, topics_t4, 1, NULL), NULL), PULSE_OK);
    uint64_t g1 = pulse_kgsm_generation(g);
    ck_assert_uint_eq(pulse_kgsm_owned_since(g, "t", 3, "m-1"), g1);
    ck_assert_int_eq(apply_ev(g, join2(2, 1001, topics_t4, 1, NULL), NULL), PULSE_OK);
    uint64_t g2 = pulse_kgsm_generation(g);
    ck_assert_uint_gt(g2, g1);
    /* m-1 keeps 0 and 1 since g1; 2 and 3 go to m-2 at m-1's next call. */
    ck_assert_uint_eq(pulse_kgsm_owned_since(g, "t", 0, "m-1"), g1);
    ck_assert_uint_eq(pulse_kgsm_owned_since(g, "t", 3, "m-2"), UINT64_MAX);
    ck_assert_int_eq(apply_ev(g, call2(KGSM_HEARTBEAT, 3, 1002, "m-1", 0, NULL, 0), NULL), PULSE_OK);
    ck_assert_uint_eq(pulse_kgsm_owned_since(g, "t", 3, "m-2"), g2);
    ck_assert_uint_eq(pulse_kgsm_owned_since(g, "t", 3, "m-1"), UINT64_MAX);
    ck_assert_uint_eq(pulse_kgsm_owned_since(g, "t", 0, "m-1"), g1);
    pulse_kgsm_free(g);
}
END_TEST

START_TEST(test_a_deleted_topic_leaves_the_group_in_a_new_generation)
{
    struct kgsm *g = pulse_kgsm_new();
    struct pulse_group_view v;
    ck_assert_int_eq(apply_ev(g, join2(1, 1000, topics_t4_u2, 2, NULL), &v), PULSE_OK);
    ck_assert_uint_eq(v.nparts, 6);
    pulse_group_view_fini(&v);
    uint64_t gen = pulse_kgsm_generation(g);
    struct kgsm_event gone = {KGSM_TOPIC_GONE, 2, 1001, NULL, &topics_t4_u2[1], 1, 0, 0, NULL, 0, NULL, false};
    ck_assert_int_eq(pulse_kgsm_apply(g, &gone, NULL), PULSE_OK);
    ck_assert_uint_eq(pulse_kgsm_generation(g), gen + 1);
    ck_assert_ptr_null(pulse_kgsm_owner(g, "u", 0, NULL));
    ck_assert_int_eq(apply_ev(g, call2(KGSM_HEARTBEAT, 3, 1002, "m-1", 0, NULL, 0), &v), PULSE_OK);
    ck_assert_uint_eq(v.nparts, 4);
    pulse_group_view_fini(&v);
    /* Told again (every gateway that notices writes one): nothing moves. */
    gone.offset = 4;
    ck_assert_int_eq(pulse_kgsm_apply(g, &gone, NULL), PULSE_OK);
    ck_assert_uint_eq(pulse_kgsm_generation(g), gen + 1);
    const char *names[4];
    ck_assert_uint_eq(pulse_kgsm_topics(g, names, 4), 1);
    ck_assert_str_eq(names[0], "t");
    pulse_kgsm_free(g);
}
END_TEST

START_TEST(test_ids_carry_the_secret_and_descriptions_mask_it_and_leave_out_expired_members)
{
    struct kgsm *g = pulse_kgsm_new();
    struct pulse_group_view v;
    ck_assert_int_eq(apply_ev(g, join2(7, 1000, topics_t4, 1, "0123456789abcdef"), &v), PULSE_OK);
    ck_assert_str_eq(v.member_id, "m-0123456789abcdef-7");
    pulse_group_view_fini(&v);
    struct kgsm_event b = join2(8, 1000, topics_t4, 1, "fedcba9876543210");
    b.lease_ms = 500;
    ck_assert_int_eq(pulse_kgsm_apply(g, &b, NULL), PULSE_OK);
    struct pulse_group_info *info = pulse_calloc(1, sizeof *info);
    ck_assert_int_eq(pulse_kgsm_describe(g, 1200, info), PULSE_OK);
    ck_assert_uint_eq(info->nmembers, 2);
    ck_assert_str_eq(info->members[0].label, "m-****************-7");
    ck_assert_int_eq(info->members[0].lease_expires_in_ms, 29800);
    pulse_group_info_free(info);
    /* At 1600 the second member's lease is over: not shown, nor as owner. */
    info = pulse_calloc(1, sizeof *info);
    ck_assert_int_eq(pulse_kgsm_describe(g, 1600, info), PULSE_OK);
    ck_assert_uint_eq(info->nmembers, 1);
    ck_assert_str_eq(info->members[0].member_id, "m-0123456789abcdef-7");
    for (size_t i = 0; i < info->nparts; i++)
        ck_assert_msg(strcmp(info->parts[i].owner, "m-fedcba9876543210-8") != 0, "an expired owner is shown");
    pulse_group_info_free(info);
    ck_assert_uint_eq(pulse_kgsm_members(g), 2); /* the state itself waits for the next event */
    pulse_kgsm_free(g);
}
END_TEST

/* ---- over the mock cluster ------------------------------------------------- */

static struct pulse_kafka_settings ks;

static struct pulse_broker *open_mock(void)
{
    struct pulse_broker *b = NULL;
    char err[512] = "";
    ck_assert_int_eq(pulse_settings_init(pulse_kafka_settings(), &ks), PULSE_OK);
    const struct pulse_setting *s = pulse_settings_find(pulse_kafka_settings(), "kafka.mock-brokers");
    ck_assert_int_eq(pulse_settings_apply(s, &ks, "1", err, sizeof err), PULSE_OK);
    struct pulse_kafka_config cfg = {.settings = &ks, .max_records_per_publish = 100, .default_partitions = 1};
    ck_assert_msg(pulse_kafka_open(&cfg, &b, err, sizeof err) == PULSE_OK, "%s", err);
    return b;
}

static void close_mock(struct pulse_broker *b)
{
    pulse_broker_close(b);
    pulse_settings_prefix_fini(pulse_kafka_settings_prefix(), &ks);
    pulse_settings_fini(pulse_kafka_settings(), &ks);
}

static void produce_raw(struct pulse_kafka *k, const char *key, const char *value)
{
    char text[256];
    size_t klen = key != NULL ? strlen(key) : 0, vlen = strlen(value);
    ck_assert_uint_lt(vlen, sizeof text);
    memcpy(text, value, vlen + 1);
    rd_kafka_resp_err_t err = rd_kafka_producev(k->prod, RD_KAFKA_V_TOPIC(PULSE_KAFKA_GROUP_LOG),
                                                RD_KAFKA_V_PARTITION(0), RD_KAFKA_V_KEY(key, klen),
                                                RD_KAFKA_V_VALUE(text, vlen), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                                RD_KAFKA_V_END);
    ck_assert_int_eq(err, RD_KAFKA_RESP_ERR_NO_ERROR);
}

static unsigned long long metric(struct pulse_broker *b, const char *name)
{
    struct pulse_buf out;
    pulse_buf_init(&out, SIZE_MAX);
    ck_assert_int_eq(pulse_broker_metrics(b, &out), PULSE_OK);
    ck_assert_int_eq(pulse_buf_append(&out, "", 1), PULSE_OK);
    char pat[128];
    snprintf(pat, sizeof pat, "\n%s ", name);
    const char *at = strstr((const char *)out.data, pat);
    ck_assert_msg(at != NULL, "no %s", name);
    unsigned long long v = strtoull(at + strlen(pat), NULL, 10);
    pulse_buf_fini(&out);
    return v;
}

START_TEST(test_hostile_records_in_the_group_log_are_skipped_and_groups_keep_working)
{
    struct pulse_broker *b = open_mock();
    struct pulse_kafka *k = (struct pulse_kafka *)(void *)b;
    struct pulse_topic_spec spec = {"hg", 2, -1, -1, -1, -1, -1};
    char err[256] = "";
    ck_assert_msg(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err) == PULSE_OK, "%s", err);
    static const char *const bad[][2] = {
        {"g", "J 0000000000000000 1 30000 0 0123456789abcdef 1 hg 4294967296"}, /* too many partitions */
        {"g", "J 0000000000000000 2 0 0 0123456789abcdef 1 hg 2"},              /* no lease */
        {"g", "J 0000000000000000 3 30000 0 XYZ 1 hg 2"},                       /* not a secret */
        {"g", "J 0000000000000000 4 30000 0 0123456789abcdef 17 hg 2"},         /* too many topics */
        {"g", "J 0000000000000000 5 30000 0 0123456789abcdef 1 __x 2"},         /* not a name */
        {"g", "H 0000000000000000 6 m-\"; 1"},                                  /* not a member id */
        {"g", "C 0000000000000000 7 m-1 1 99999999 hg 0 1"},                    /* count past the entries */
        {"g", "C 0000000000000000 8 m-1 1 1 hg 0 -1"},                          /* negative offset */
        {"g", "F 0000000000000000 9 m-1 18446744073709551616 0"},               /* generation overflows */
        {"g", "Q 0000000000000000 10 m-1"},                                     /* no such kind */
        {"g", "H 0000000000000000 11 m-1 trailing"},                            /* trailing bytes */
        {"", "H 0000000000000000 12 m-1"},                                      /* no group */
        {"../x", "H 0000000000000000 13 m-1"},                                  /* not a group name */
        {"g", ""},
    };
    size_t nbad = sizeof bad / sizeof bad[0];
    for (size_t i = 0; i < nbad; i++)
        produce_raw(k, bad[i][0][0] != '\0' ? bad[i][0] : NULL, bad[i][1]);
    /* A well-formed event of another gateway: a member the others know. */
    produce_raw(k, "g", "J 00000000000000ff 1 30000 0 0123456789abcdef 1 hg 2");
    const char *topics[] = {"hg"};
    struct pulse_group_join_spec js = {topics, 1, 10000, false};
    struct pulse_group_view v;
    memset(&v, 0, sizeof v);
    ck_assert_msg(pulse_broker_group_join(b, "g", &js, &v, err, sizeof err) == PULSE_OK, "%s", err);
    ck_assert_uint_eq(v.nparts + v.npending, 1); /* the other gateway's member has the other */
    pulse_group_view_fini(&v);
    ck_assert_uint_eq(metric(b, "pulse_kafka_group_log_bad_events_total"), nbad);
    ck_assert_uint_eq(metric(b, "pulse_group_members{group=\"g\"}"), 2);
    close_mock(b);
}
END_TEST

static Suite *kgroups_suite(void)
{
    Suite *s = suite_create("kgroups");
    TCase *tc = tcase_create("log");
    tcase_add_test(tc, test_the_end_of_a_group_fetch_is_fenced_by_generation_and_ownership);
    tcase_add_test(tc, test_owned_since_counts_from_the_generation_the_owner_got_it_in);
    tcase_add_test(tc, test_a_deleted_topic_leaves_the_group_in_a_new_generation);
    tcase_add_test(tc, test_ids_carry_the_secret_and_descriptions_mask_it_and_leave_out_expired_members);
    suite_add_tcase(s, tc);
    TCase *mock = tcase_create("mock");
    tcase_set_timeout(mock, 30);
    tcase_add_test(mock, test_hostile_records_in_the_group_log_are_skipped_and_groups_keep_working);
    suite_add_tcase(s, mock);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(kgroups_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
