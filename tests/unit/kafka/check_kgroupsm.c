/* SPDX-License-Identifier: MIT */
/*
 * check_kgroupsm.c - the group log's state machine (src/kafka/kgroupsm.h):
 * gateways that apply the same log agree on every answer whatever their
 * clocks; even and sticky assignment; a partition moves only after its
 * previous owner's next call; leases end by the log's time; commits are
 * fenced by generation and ownership.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker.h"
#include "common/alloc.h"
#include "kafka/kgroupsm.h"

static const struct kgsm_topic topic_t4[] = {{"t", 4}};

static struct kgsm_event join_ev(int64_t offset, int64_t time_ms, int64_t lease_ms)
{
    struct kgsm_event e = {KGSM_JOIN, offset, time_ms, NULL, topic_t4, 1, lease_ms, 0, NULL, 0, NULL, false};
    return e;
}

static struct kgsm_event call_ev(enum kgsm_kind kind, int64_t offset, int64_t time_ms, const char *member)
{
    struct kgsm_event e = {kind, offset, time_ms, member, NULL, 0, 0, 0, NULL, 0, NULL, false};
    return e;
}

/* Applies ev and returns the status; the view's partition count in *nparts
 * and its pending count in *npending (when not NULL). */
static pulse_status_t apply(struct kgsm *g, struct kgsm_event ev, size_t *nparts, size_t *npending)
{
    struct pulse_group_view v;
    memset(&v, 0, sizeof v);
    pulse_status_t st = pulse_kgsm_apply(g, &ev, &v);
    if (nparts != NULL)
        *nparts = v.nparts;
    if (npending != NULL)
        *npending = v.npending;
    pulse_group_view_fini(&v);
    return st;
}

START_TEST(test_two_members_split_evenly_and_a_moved_partition_waits_for_its_owner)
{
    struct kgsm *g = pulse_kgsm_new();
    size_t n = 0, pend = 0;
    ck_assert_int_eq(apply(g, join_ev(10, 1000, 30000), &n, &pend), PULSE_OK);
    ck_assert_uint_eq(n, 4);
    uint64_t gen1 = pulse_kgsm_generation(g);
    ck_assert_int_eq(apply(g, join_ev(11, 1001, 30000), &n, &pend), PULSE_OK);
    /* Two are assigned to m-11, still owned by m-10 until its next call. */
    ck_assert_uint_eq(n, 0);
    ck_assert_uint_eq(pend, 2);
    ck_assert_uint_gt(pulse_kgsm_generation(g), gen1);
    ck_assert_int_eq(apply(g, call_ev(KGSM_HEARTBEAT, 12, 1002, "m-10"), &n, &pend), PULSE_OK);
    ck_assert_uint_eq(n, 2); /* m-10 kept two (sticky) and let two go */
    ck_assert_int_eq(apply(g, call_ev(KGSM_HEARTBEAT, 13, 1003, "m-11"), &n, &pend), PULSE_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(pend, 0);
    /* Its leave gives m-11 everything. */
    ck_assert_int_eq(apply(g, call_ev(KGSM_LEAVE, 14, 1004, "m-10"), NULL, NULL), PULSE_OK);
    ck_assert_int_eq(apply(g, call_ev(KGSM_HEARTBEAT, 15, 1005, "m-11"), &n, &pend), PULSE_OK);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(apply(g, call_ev(KGSM_HEARTBEAT, 16, 1006, "m-10"), NULL, NULL), PULSE_REJOIN);
    pulse_kgsm_free(g);
}
END_TEST

START_TEST(test_leases_end_by_the_log_time_which_never_goes_back)
{
    struct kgsm *g = pulse_kgsm_new();
    ck_assert_int_eq(apply(g, join_ev(1, 10000, 5000), NULL, NULL), PULSE_OK);
    ck_assert_int_eq(apply(g, join_ev(2, 10000, 60000), NULL, NULL), PULSE_OK);
    /* A gateway whose clock is behind writes an older time: "now" stays
     * 10000, so m-1's renewed lease ends at 15000, not 7000. */
    ck_assert_int_eq(apply(g, call_ev(KGSM_HEARTBEAT, 3, 2000, "m-1"), NULL, NULL), PULSE_OK);
    ck_assert_int_eq(apply(g, call_ev(KGSM_HEARTBEAT, 6, 12000, "m-2"), NULL, NULL), PULSE_OK);
    ck_assert_uint_eq(pulse_kgsm_members(g), 2);
    /* An event at 15000 ends m-1's lease, whoever writes it. */
    size_t n = 0;
    ck_assert_int_eq(apply(g, call_ev(KGSM_HEARTBEAT, 7, 15000, "m-2"), &n, NULL), PULSE_OK);
    ck_assert_uint_eq(pulse_kgsm_members(g), 1);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(apply(g, call_ev(KGSM_HEARTBEAT, 8, 15001, "m-1"), NULL, NULL), PULSE_REJOIN);
    /* Events out of order are refused. */
    ck_assert_int_eq(apply(g, call_ev(KGSM_HEARTBEAT, 8, 15002, "m-2"), NULL, NULL), PULSE_INVALID);
    pulse_kgsm_free(g);
}
END_TEST

START_TEST(test_commits_are_fenced_by_generation_and_ownership)
{
    struct kgsm *g = pulse_kgsm_new();
    ck_assert_int_eq(apply(g, join_ev(1, 1000, 30000), NULL, NULL), PULSE_OK);
    uint64_t gen = pulse_kgsm_generation(g);
    struct pulse_group_partition pos[1] = {{"t", 2, 7}};
    struct kgsm_event c = call_ev(KGSM_COMMIT, 2, 1001, "m-1");
    c.generation = gen;
    c.pos = pos;
    c.npos = 1;
    ck_assert_int_eq(apply(g, c, NULL, NULL), PULSE_OK);
    ck_assert_int_eq(pulse_kgsm_committed(g, "t", 2), 7);
    /* A second member: a new generation. m-1 keeps partitions 0 and 1
     * (sticky, the first two), 2 and 3 go to m-3. */
    ck_assert_int_eq(apply(g, join_ev(3, 1002, 30000), NULL, NULL), PULSE_OK);
    const char *assigned = NULL;
    ck_assert_str_eq(pulse_kgsm_owner(g, "t", 0, &assigned), "m-1");
    ck_assert_str_eq(assigned, "m-1");
    ck_assert_str_eq(pulse_kgsm_owner(g, "t", 2, &assigned), "m-1"); /* until m-1's next call */
    ck_assert_str_eq(assigned, "m-3");
    /* The old generation is fenced even for a partition m-1 keeps. */
    c.offset = 4;
    pos[0].partition = 0;
    pos[0].offset = 9;
    ck_assert_int_eq(apply(g, c, NULL, NULL), PULSE_GROUP_FENCED);
    ck_assert_int_eq(pulse_kgsm_committed(g, "t", 0), -1);
    /* The new generation: partition 0 is taken, 2 (moving away) is not. */
    c.offset = 5;
    c.generation = pulse_kgsm_generation(g);
    size_t kept = 0;
    ck_assert_int_eq(apply(g, c, &kept, NULL), PULSE_OK);
    ck_assert_uint_eq(kept, 2);
    ck_assert_int_eq(pulse_kgsm_committed(g, "t", 0), 9);
    c.offset = 6;
    pos[0].partition = 2;
    pos[0].offset = 11;
    ck_assert_int_eq(apply(g, c, NULL, NULL), PULSE_GROUP_FENCED);
    ck_assert_int_eq(pulse_kgsm_committed(g, "t", 2), 7);
    /* An unknown member must join again. */
    c.offset = 7;
    c.member = "m-99";
    ck_assert_int_eq(apply(g, c, NULL, NULL), PULSE_REJOIN);
    pulse_kgsm_free(g);
}
END_TEST

/* Two gateways read the same log (each with its own state, as in two
 * processes): every answer, generation and position is the same. */
START_TEST(test_gateways_that_apply_the_same_log_agree_on_every_answer)
{
    struct kgsm *a = pulse_kgsm_new(), *b = pulse_kgsm_new();
    struct pulse_group_partition pos[1] = {{"t", 0, 3}};
    srand(7);
    int64_t t = 1000;
    for (int64_t off = 0; off < 400; off++) {
        struct kgsm_event e;
        char id[32];
        snprintf(id, sizeof id, "m-%d", rand() % (int)(off + 1));
        t += rand() % 3000 - 1000; /* clocks disagree: time may go back */
        switch (rand() % 4) {
        case 0:
            e = join_ev(off, t, 2000 + rand() % 8000);
            break;
        case 1:
            e = call_ev(KGSM_LEAVE, off, t, id);
            break;
        case 2:
            e = call_ev(KGSM_COMMIT, off, t, id);
            e.generation = pulse_kgsm_generation(a) - (uint64_t)(rand() % 2);
            pos[0].partition = (uint32_t)(rand() % 4);
            e.pos = pos;
            e.npos = 1;
            break;
        default:
            e = call_ev(KGSM_HEARTBEAT, off, t, id);
        }
        struct pulse_group_view va, vb;
        memset(&va, 0, sizeof va);
        memset(&vb, 0, sizeof vb);
        ck_assert_int_eq(pulse_kgsm_apply(a, &e, &va), pulse_kgsm_apply(b, &e, &vb));
        ck_assert_str_eq(va.member_id, vb.member_id);
        ck_assert_uint_eq(va.generation, vb.generation);
        ck_assert_uint_eq(va.nparts, vb.nparts);
        ck_assert_uint_eq(va.npending, vb.npending);
        for (size_t i = 0; i < va.nparts; i++) {
            ck_assert_str_eq(va.parts[i].topic, vb.parts[i].topic);
            ck_assert_uint_eq(va.parts[i].partition, vb.parts[i].partition);
            ck_assert_int_eq(va.parts[i].offset, vb.parts[i].offset);
        }
        pulse_group_view_fini(&va);
        pulse_group_view_fini(&vb);
        ck_assert_uint_eq(pulse_kgsm_members(a), pulse_kgsm_members(b));
        for (uint32_t p = 0; p < 4; p++)
            ck_assert_int_eq(pulse_kgsm_committed(a, "t", p), pulse_kgsm_committed(b, "t", p));
    }
    pulse_kgsm_free(a);
    pulse_kgsm_free(b);
}
END_TEST

/* Over a random log: every owner and every assignee is a member, every
 * partition is assigned while the group has members, and the shares
 * differ by at most one (every member consumes the same topic). */
START_TEST(test_assignment_stays_even_and_owners_are_members)
{
    struct kgsm *g = pulse_kgsm_new();
    srand(11);
    int64_t t = 1000;
    for (int64_t off = 0; off < 600; off++) {
        char id[32];
        snprintf(id, sizeof id, "m-%d", rand() % (int)(off + 1));
        t += rand() % 2000;
        int pick = rand() % 6;
        struct kgsm_event e = pick < 2    ? join_ev(off, t, 3000 + rand() % 5000)
                              : pick == 2 ? call_ev(KGSM_LEAVE, off, t, id)
                                          : call_ev(KGSM_HEARTBEAT, off, t, id);
        ck_assert_int_ne(apply(g, e, NULL, NULL), PULSE_NOMEM);
        size_t counts[4] = {0};
        char names[4][32] = {""};
        for (uint32_t p = 0; p < 4; p++) {
            const char *assigned = NULL;
            const char *owner = pulse_kgsm_owner(g, "t", p, &assigned);
            if (owner == NULL)
                continue; /* no member consumes t: no partitions */
            ck_assert_msg(owner[0] == '\0' || pulse_kgsm_is_member(g, owner), "owner %s left", owner);
            ck_assert_msg(pulse_kgsm_members(g) == 0 || pulse_kgsm_is_member(g, assigned), "p%u unassigned", p);
            for (size_t k = 0; k < 4; k++) {
                if (names[k][0] == '\0' || strcmp(names[k], assigned) == 0) {
                    snprintf(names[k], sizeof names[k], "%s", assigned);
                    counts[k]++;
                    break;
                }
            }
        }
        size_t m = pulse_kgsm_members(g), lo = 4, hi = 0, used = 0;
        for (size_t k = 0; k < 4; k++) {
            if (names[k][0] == '\0')
                continue;
            used++;
            lo = counts[k] < lo ? counts[k] : lo;
            hi = counts[k] > hi ? counts[k] : hi;
        }
        if (m > 0 && used > 0) {
            if (used < m && m <= 4)
                lo = 0; /* a member with no partition */
            ck_assert_msg(hi - lo <= 1, "uneven at offset %lld: %zu..%zu over %zu members", (long long)off, lo, hi, m);
        }
    }
    pulse_kgsm_free(g);
}
END_TEST

static Suite *kgroupsm_suite(void)
{
    Suite *s = suite_create("kgroupsm");
    TCase *tc = tcase_create("log");
    tcase_add_test(tc, test_two_members_split_evenly_and_a_moved_partition_waits_for_its_owner);
    tcase_add_test(tc, test_leases_end_by_the_log_time_which_never_goes_back);
    tcase_add_test(tc, test_commits_are_fenced_by_generation_and_ownership);
    tcase_add_test(tc, test_gateways_that_apply_the_same_log_agree_on_every_answer);
    tcase_add_test(tc, test_assignment_stays_even_and_owners_are_members);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(kgroupsm_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
