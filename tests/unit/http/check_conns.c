/* SPDX-License-Identifier: MIT */
/*
 * check_conns.c - the cost of the slow-client registry (conns.h) on a
 * kept-alive connection: a request moves the connection between the head
 * and body lists, and the sweeper is woken only when a move makes an entry
 * due earlier than it planned to look, not at every move.
 */
#include <check.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/conns.h"

START_TEST(test_requests_on_a_kept_alive_connection_do_not_wake_the_sweeper_each)
{
    int sv[2];
    struct pulse_conns *cs = NULL;
    /* Deadlines of 10 s: nothing is due during the test. */
    const struct pulse_conns_limits limits = {10000, 10000, 0, 0};
    ck_assert_int_eq(pulse_conns_create(&limits, &cs), PULSE_OK);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct pulse_conn *c = pulse_conns_opened(cs, sv[0]);
    ck_assert_ptr_nonnull(c);
    usleep(20 * 1000); /* the sweeper planned its wake-up */
    struct pulse_conns_counts before, after;
    pulse_conns_stats(cs, &before);
    for (int i = 0; i < 100; i++) {
        ck_assert(pulse_conns_head_arrived(cs, c));
        ck_assert(pulse_conns_body_done(cs, c));
        pulse_conns_request_done(cs, c);
        usleep(500); /* time for a woken sweeper to run */
    }
    pulse_conns_stats(cs, &after);
    ck_assert_msg(after.sweeps - before.sweeps <= 2, "the sweeper woke %llu times for 100 requests",
                  (unsigned long long)(after.sweeps - before.sweeps));
    ck_assert_uint_eq(after.head_timeouts, 0);
    pulse_conns_closed(cs, c);
    pulse_conns_destroy(cs);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* Not woken for nothing, but still woken when a deadline comes sooner: a
 * connection opened while another one's long head deadline is planned is
 * shut at its own. */
START_TEST(test_the_sweeper_still_shuts_a_head_that_is_due)
{
    int sv[2];
    struct pulse_conns *cs = NULL;
    const struct pulse_conns_limits limits = {100, 10000, 0, 0};
    ck_assert_int_eq(pulse_conns_create(&limits, &cs), PULSE_OK);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct pulse_conn *c = pulse_conns_opened(cs, sv[0]);
    ck_assert(pulse_conns_head_arrived(cs, c)); /* now in the body list, 10 s */
    usleep(20 * 1000);
    ck_assert(pulse_conns_body_done(cs, c));
    pulse_conns_request_done(cs, c); /* back in the head list: due in 100 ms */
    usleep(400 * 1000);
    struct pulse_conns_counts n;
    pulse_conns_stats(cs, &n);
    ck_assert_uint_eq(n.head_timeouts, 1);
    pulse_conns_closed(cs, c);
    pulse_conns_destroy(cs);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conns");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_requests_on_a_kept_alive_connection_do_not_wake_the_sweeper_each);
    tcase_add_test(tc, test_the_sweeper_still_shuts_a_head_that_is_due);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
