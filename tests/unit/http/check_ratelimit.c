/* SPDX-License-Identifier: MIT */
/*
 * check_ratelimit.c - the token buckets of [limits] (http/ratelimit.h),
 * driven with made-up times: a burst then refusals with the wait to the
 * next token, refusals that take nothing, byte debt waited out, a body
 * larger than the bucket, and a table that forgets the least recently
 * seen client at its cap.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "http/ratelimit.h"

#define SEC 1000000ll

static struct pulse_ratelimit *table(int64_t rps, uint64_t bps, int64_t burst_ms, int64_t max_clients)
{
    struct pulse_limits_settings s = {rps, bps, burst_ms, max_clients};
    struct pulse_ratelimit *rl = NULL;
    ck_assert_int_eq(pulse_ratelimit_create(&s, &rl), PULSE_OK);
    return rl;
}

static const unsigned char *key(char c)
{
    static unsigned char k[4][PULSE_RATELIMIT_KEY_LEN];
    int i = (c - 'a') & 3;
    memset(k[i], c, sizeof k[i]);
    return k[i];
}

START_TEST(test_burst_is_admitted_then_refused_until_the_next_token)
{
    struct pulse_ratelimit *rl = table(2, 0, 1000, 100); /* bucket of 2 */
    const char *which = NULL;
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 0, 0, NULL), 0);
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 0, 0, NULL), 0);
    /* Half a second to the next token: Retry-After rounds up to 1. */
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 0, 0, &which), 1);
    ck_assert_str_eq(which, "limits.requests-per-second");
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 0, SEC / 2, NULL), 0);
    ck_assert_uint_eq(pulse_ratelimit_refusals(rl), 1);
    pulse_ratelimit_destroy(rl);
}
END_TEST

START_TEST(test_a_refusal_takes_nothing)
{
    struct pulse_ratelimit *rl = table(1, 0, 1000, 100); /* bucket of 1 */
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 0, 0, NULL), 0);
    for (int i = 1; i <= 9; i++)
        ck_assert_uint_ge(pulse_ratelimit_admit(rl, key('a'), 0, i * SEC / 10, NULL), 1);
    /* Ten refusals later the second's token is still there, once. */
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 0, SEC, NULL), 0);
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 0, SEC, NULL), 1);
    pulse_ratelimit_destroy(rl);
}
END_TEST

START_TEST(test_byte_debt_is_waited_out)
{
    struct pulse_ratelimit *rl = table(0, 1000, 1000, 100); /* 1000 B/s, bucket of 1000 */
    const char *which = NULL;
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 500, 0, NULL), 0);
    /* A fetch served 2500 bytes: 2000 in debt, two seconds to pay. */
    pulse_ratelimit_charge(rl, key('a'), 2500, 0);
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 0, 0, &which), 2);
    ck_assert_str_eq(which, "limits.bytes-per-second");
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 0, SEC, NULL), 1);
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 0, 2 * SEC, NULL), 0);
    /* Declared bodies must fit what the bucket holds now (nothing). */
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 400, 2 * SEC, NULL), 1);
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 400, 2 * SEC + SEC / 2, NULL), 0);
    pulse_ratelimit_destroy(rl);
}
END_TEST

START_TEST(test_a_body_larger_than_the_bucket_passes_once_it_is_full)
{
    struct pulse_ratelimit *rl = table(0, 1000, 1000, 100);
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 100, 0, NULL), 0);
    /* 5000 B never fit a 1000 B bucket: it waits for a full one... */
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 5000, 0, NULL), 1);
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 5000, SEC / 10, NULL), 0);
    /* ...and leaves the bucket 4000 B in debt. */
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 0, SEC / 10, NULL), 4);
    pulse_ratelimit_destroy(rl);
}
END_TEST

START_TEST(test_the_table_forgets_the_least_recently_seen_client_at_its_cap)
{
    struct pulse_ratelimit *rl = table(1, 0, 1000, 2);
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 0, 0, NULL), 0); /* a empty */
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('b'), 0, 1, NULL), 0); /* b empty */
    ck_assert_uint_eq(pulse_ratelimit_count(rl), 2);
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('c'), 0, 2, NULL), 0); /* evicts a */
    ck_assert_uint_eq(pulse_ratelimit_count(rl), 2);
    ck_assert_uint_eq(pulse_ratelimit_evictions(rl), 1);
    /* b is remembered (still empty); a comes back with a full bucket,
     * evicting c... */
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('b'), 0, 3, NULL), 1);
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 0, 4, NULL), 0);
    ck_assert_uint_eq(pulse_ratelimit_evictions(rl), 2);
    /* ...not b, seen more recently. */
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('b'), 0, 5, NULL), 1);
    ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('c'), 0, 6, NULL), 0);
    ck_assert_uint_eq(pulse_ratelimit_count(rl), 2);
    pulse_ratelimit_destroy(rl);
}
END_TEST

START_TEST(test_a_table_without_limits_admits_everything_and_remembers_nothing)
{
    struct pulse_ratelimit *rl = table(0, 0, 1000, 2);
    ck_assert(!pulse_ratelimit_enabled(rl));
    for (int i = 0; i < 100; i++)
        ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a' + (i & 3)), 1u << 30, 0, NULL), 0);
    ck_assert_uint_eq(pulse_ratelimit_count(rl), 0);
    pulse_ratelimit_destroy(rl);
    pulse_ratelimit_destroy(NULL);
}
END_TEST

START_TEST(test_explicit_rates_limit_a_key_whatever_the_defaults)
{
    /* Defaults off: admit lets all through, admit_rates still limits. */
    struct pulse_ratelimit *rl = table(0, 0, 1000, 10);
    const char *which = NULL;
    ck_assert_uint_eq(pulse_ratelimit_admit_rates(rl, key('a'), 1, 0, 0, 0, NULL), 0);
    ck_assert_uint_eq(pulse_ratelimit_admit_rates(rl, key('a'), 1, 0, 0, 0, &which), 1);
    ck_assert_str_eq(which, "limits.requests-per-second");
    ck_assert_uint_eq(pulse_ratelimit_admit_rates(rl, key('a'), 1, 0, 0, SEC, NULL), 0);
    /* Both 0: unlimited and not remembered. */
    for (int i = 0; i < 10; i++)
        ck_assert_uint_eq(pulse_ratelimit_admit_rates(rl, key('b'), 0, 0, 1u << 20, 0, NULL), 0);
    ck_assert_uint_eq(pulse_ratelimit_count(rl), 1);
    /* A byte rate of the key's own: charged bytes are debt at its rate. */
    ck_assert_uint_eq(pulse_ratelimit_admit_rates(rl, key('c'), 0, 100, 0, 0, NULL), 0);
    pulse_ratelimit_charge(rl, key('c'), 300, 0);
    ck_assert_uint_eq(pulse_ratelimit_admit_rates(rl, key('c'), 0, 100, 0, 0, &which), 2);
    ck_assert_str_eq(which, "limits.bytes-per-second");
    pulse_ratelimit_destroy(rl);
}
END_TEST

START_TEST(test_new_rates_for_a_known_key_keep_its_level_within_the_new_size)
{
    struct pulse_ratelimit *rl = table(10, 0, 1000, 10); /* default bucket of 10 */
    for (int i = 0; i < 8; i++)
        ck_assert_uint_eq(pulse_ratelimit_admit(rl, key('a'), 0, 0, NULL), 0);
    /* Lowered to 1/s (a reloaded token file): the 2 left become 1. */
    ck_assert_uint_eq(pulse_ratelimit_admit_rates(rl, key('a'), 1, 0, 0, 0, NULL), 0);
    ck_assert_uint_ge(pulse_ratelimit_admit_rates(rl, key('a'), 1, 0, 0, 0, NULL), 1);
    /* Raised: the level is kept, refilled at the new rate. */
    ck_assert_uint_ge(pulse_ratelimit_admit_rates(rl, key('a'), 100, 0, 0, 0, NULL), 1);
    ck_assert_uint_eq(pulse_ratelimit_admit_rates(rl, key('a'), 100, 0, 0, SEC / 100, NULL), 0);
    pulse_ratelimit_destroy(rl);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ratelimit");
    TCase *tc = tcase_create("buckets");
    tcase_add_test(tc, test_burst_is_admitted_then_refused_until_the_next_token);
    tcase_add_test(tc, test_a_refusal_takes_nothing);
    tcase_add_test(tc, test_byte_debt_is_waited_out);
    tcase_add_test(tc, test_a_body_larger_than_the_bucket_passes_once_it_is_full);
    tcase_add_test(tc, test_the_table_forgets_the_least_recently_seen_client_at_its_cap);
    tcase_add_test(tc, test_a_table_without_limits_admits_everything_and_remembers_nothing);
    tcase_add_test(tc, test_explicit_rates_limit_a_key_whatever_the_defaults);
    tcase_add_test(tc, test_new_rates_for_a_known_key_keep_its_level_within_the_new_size);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
