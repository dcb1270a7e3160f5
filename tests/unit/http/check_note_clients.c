/* SPDX-License-Identifier: MIT */
/*
 * check_note_clients.c - the HTTP server tells its broker how many client
 * connections are open (pulse_broker_note_clients), as they open and
 * close, and on attach for those opened before: the local backend lets a
 * publisher block in its partition's fdatasync only while one is open
 * (broker.h). The real server runs over a fake backend that records what
 * it is told.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker/backend.h"
#include "common/clock.h"
#include "common/log.h"
#include "http/config.h"
#include "http/server.h"

static atomic_uint told;
static atomic_uint times;

static void fake_drain(struct pulse_broker *b)
{
    (void)b;
}

static void fake_note_clients(struct pulse_broker *b, uint32_t open)
{
    (void)b;
    atomic_store(&told, open);
    atomic_fetch_add(&times, 1);
}

static const struct pulse_broker_ops fake_ops = {
    .name = "fake",
    .drain = fake_drain,
    .note_clients = fake_note_clients,
};

static struct pulse_broker fake = {&fake_ops};

static struct pulse_config cfg;
static struct pulse_server *srv;

static int connect_to(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Waits (at most 10 s) until the broker was told want. */
static void wait_told(unsigned want)
{
    int64_t t0 = pulse_clock_mono_us();
    while (atomic_load(&told) != want) {
        ck_assert_msg(pulse_clock_mono_us() - t0 < 10 * 1000 * 1000, "told %u, want %u", atomic_load(&told), want);
        usleep(1000);
    }
}

static void start(struct pulse_broker *broker)
{
    char err[256] = "";
    signal(SIGPIPE, SIG_IGN);
    pulse_log_set_level(PULSE_LOG_ERROR);
    atomic_store(&told, 999u);
    atomic_store(&times, 0u);
    ck_assert_int_eq(pulse_config_init(&cfg), PULSE_OK);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.listen", "127.0.0.1:0", err, sizeof err), PULSE_OK);
    ck_assert_msg(pulse_server_create(&cfg, broker, &srv, err, sizeof err) == PULSE_OK, "%s", err);
    pulse_server_set_ready(srv, true);
}

static void stop(void)
{
    pulse_server_destroy(srv);
    pulse_config_fini(&cfg);
}

START_TEST(test_the_broker_is_told_the_open_connections_as_they_come_and_go)
{
    enum { N = 3 };
    int fd[N];
    start(&fake);
    uint16_t port = pulse_server_port(srv);
    for (int i = 0; i < N; i++) {
        fd[i] = connect_to(port);
        wait_told((unsigned)i + 1);
    }
    close(fd[0]);
    close(fd[1]);
    wait_told(1);
    close(fd[2]);
    wait_told(0);
    stop();
}
END_TEST

/* Connections that opened before a broker was attached are counted all
 * the same, and it is told on attach. */
START_TEST(test_a_broker_attached_late_is_told_the_connections_already_open)
{
    int a, b;
    start(NULL);
    uint16_t port = pulse_server_port(srv);
    a = connect_to(port);
    b = connect_to(port);
    usleep(100 * 1000); /* MHD accepts them meanwhile */
    ck_assert_uint_eq(atomic_load(&times), 0u);
    pulse_server_attach(srv, &fake);
    wait_told(2);
    close(a);
    wait_told(1);
    close(b);
    wait_told(0);
    stop();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("note_clients");
    TCase *tc = tcase_create("count");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_the_broker_is_told_the_open_connections_as_they_come_and_go);
    tcase_add_test(tc, test_a_broker_attached_late_is_told_the_connections_already_open);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
