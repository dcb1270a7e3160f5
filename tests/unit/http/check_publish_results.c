/* SPDX-License-Identifier: MIT */
/*
 * check_publish_results.c - what a publish answers when a backend reports
 * per-record results (docs/API.md "Per-record results"): a record stored
 * with an offset the backend does not know shows "offset": null, and a
 * publish some of whose records failed answers the failure's status with
 * error.offsets, the failed records marked with "error". The real HTTP
 * server runs over a fake backend (a table of functions with only the
 * calls these requests make), so the shapes are checked without needing a
 * Kafka cluster or a disk that fills at the right moment.
 */
#include <arpa/inet.h>
#include <check.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker/backend.h"
#include "common/log.h"
#include "http/config.h"
#include "http/server.h"

/* The fake backend: "t" has two partitions; record i of a publish gets
 * offsets[i] of the scenario and the publish completes with `result`. */
static int64_t scenario[3];
static pulse_status_t result;

static void fake_drain(struct pulse_broker *b)
{
    (void)b;
}

static pulse_status_t fake_publish(struct pulse_broker *b, const char *topic, const struct pulse_publish_record *recs,
                                   size_t n, struct pulse_offset_pair *offsets_out, pulse_publish_done_fn done,
                                   void *arg, bool *pending_out, char *errbuf, size_t errlen)
{
    (void)b, (void)topic, (void)recs;
    for (size_t i = 0; i < n && i < 3; i++) {
        offsets_out[i].partition = (uint32_t)i % 2;
        offsets_out[i].offset = scenario[i];
    }
    if (result != PULSE_OK)
        pulse_errbuf_set(errbuf, errlen, "record 1 (partition 1) was not stored: refused");
    *pending_out = true;
    done(arg, result); /* before the call returns: allowed */
    return PULSE_OK;
}

static const struct pulse_broker_ops fake_ops = {
    .name = "fake",
    .drain = fake_drain,
    .publish = fake_publish,
};

static struct pulse_broker fake = {&fake_ops};

/* POSTs body to /v1/topics/t/records; *status gets the HTTP status; the
 * parsed JSON body is returned (json_decref). */
static json_t *post(uint16_t port, const char *body, int *status)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char req[1024];
    int len = snprintf(req, sizeof req,
                       "POST /v1/topics/t/records HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                       "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                       strlen(body), body);
    ck_assert_int_eq(write(fd, req, (size_t)len), len);
    static char resp[65536];
    size_t got = 0;
    ssize_t r;
    while ((r = read(fd, resp + got, sizeof resp - 1 - got)) > 0)
        got += (size_t)r;
    close(fd);
    resp[got] = '\0';
    ck_assert_int_eq(sscanf(resp, "HTTP/1.1 %d", status), 1);
    const char *b = strstr(resp, "\r\n\r\n");
    ck_assert_ptr_nonnull(b);
    json_t *j = json_loads(b + 4, 0, NULL);
    ck_assert_msg(j != NULL, "not JSON: %s", b + 4);
    return j;
}

static struct pulse_config cfg;
static struct pulse_server *srv;

static void start(void)
{
    char err[256] = "";
    signal(SIGPIPE, SIG_IGN);
    pulse_log_set_level(PULSE_LOG_ERROR);
    ck_assert_int_eq(pulse_config_init(&cfg), PULSE_OK);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.listen", "127.0.0.1:0", err, sizeof err), PULSE_OK);
    ck_assert_msg(pulse_server_create(&cfg, &fake, &srv, err, sizeof err) == PULSE_OK, "%s", err);
    pulse_server_set_ready(srv, true);
}

static void stop(void)
{
    pulse_server_destroy(srv);
    pulse_config_fini(&cfg);
}

static const char three[] = "{\"records\":[{\"value\":\"a\"},{\"value\":\"b\"},{\"value\":\"c\"}]}";

START_TEST(test_an_acknowledged_record_without_an_offset_shows_null)
{
    int status = 0;
    start();
    scenario[0] = 5, scenario[1] = PULSE_OFFSET_UNKNOWN, scenario[2] = 6;
    result = PULSE_OK;
    json_t *j = post(pulse_server_port(srv), three, &status);
    ck_assert_int_eq(status, 200);
    json_t *offs = json_object_get(j, "offsets");
    ck_assert_uint_eq(json_array_size(offs), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(offs, 0), "offset")), 5);
    ck_assert(json_is_null(json_object_get(json_array_get(offs, 1), "offset")));
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(offs, 1), "partition")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(offs, 2), "offset")), 6);
    json_decref(j);
    stop();
}
END_TEST

START_TEST(test_a_partly_failed_publish_answers_per_record)
{
    int status = 0;
    start();
    scenario[0] = 5, scenario[1] = PULSE_OFFSET_NONE, scenario[2] = PULSE_OFFSET_UNKNOWN;
    result = PULSE_UNAVAILABLE;
    json_t *j = post(pulse_server_port(srv), three, &status);
    ck_assert_int_eq(status, 503);
    json_t *err = json_object_get(j, "error");
    ck_assert_str_eq(json_string_value(json_object_get(err, "code")), "unavailable");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(err, "message")), "record 1"));
    json_t *offs = json_object_get(err, "offsets");
    ck_assert_uint_eq(json_array_size(offs), 3);
    json_t *r0 = json_array_get(offs, 0), *r1 = json_array_get(offs, 1), *r2 = json_array_get(offs, 2);
    ck_assert_int_eq(json_integer_value(json_object_get(r0, "offset")), 5);
    ck_assert_ptr_null(json_object_get(r0, "error"));
    ck_assert(json_is_null(json_object_get(r1, "offset")));
    ck_assert_str_eq(json_string_value(json_object_get(r1, "error")), "unavailable");
    ck_assert(json_is_null(json_object_get(r2, "offset"))); /* stored, offset unknown */
    ck_assert_ptr_null(json_object_get(r2, "error"));
    json_decref(j);
    stop();
}
END_TEST

START_TEST(test_a_publish_that_stored_nothing_is_a_plain_error)
{
    int status = 0;
    start();
    scenario[0] = scenario[1] = scenario[2] = PULSE_OFFSET_NONE;
    result = PULSE_UNAVAILABLE;
    json_t *j = post(pulse_server_port(srv), three, &status);
    ck_assert_int_eq(status, 503);
    ck_assert_ptr_null(json_object_get(json_object_get(j, "error"), "offsets"));
    json_decref(j);
    stop();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("publish_results");
    TCase *tc = tcase_create("shapes");
    tcase_add_test(tc, test_an_acknowledged_record_without_an_offset_shows_null);
    tcase_add_test(tc, test_a_partly_failed_publish_answers_per_record);
    tcase_add_test(tc, test_a_publish_that_stored_nothing_is_a_plain_error);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
