/* SPDX-License-Identifier: MIT */
/*
 * broker_scale.c - part of check_broker: many partitions. A close of more
 * partitions than one closer takes (pulse_broker_topic_close_all runs
 * several threads) keeps every record, and the metrics summed by topic
 * (pulse_broker_metrics_per_topic) add up to the per-partition ones.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker.h"
#include "broker/broker_int.h"
#include "common/buf.h"
#include "brokertest.h"

#define TOPICS 3
#define PARTS 100 /* 300 partitions: 4 closers besides the caller */

static void publish_everywhere(struct pulse_broker *b, const char *topic, uint32_t parts, int copies)
{
    struct pulse_publish_record recs[PARTS];
    struct pulse_offset_pair offs[PARTS];
    char err[256];

    for (int c = 0; c < copies; c++) {
        for (uint32_t p = 0; p < parts; p++)
            recs[p] = rec_kv(NULL, "v", (int32_t)p);
        ck_assert_int_eq(pulse_broker_publish_wait(b, topic, recs, parts, offs, err, sizeof err), PULSE_OK);
    }
}

START_TEST(test_close_of_many_written_partitions_keeps_every_record)
{
    struct pulse_broker *b = open_default(NULL);
    char name[32];

    ck_assert_int_gt(TOPICS * PARTS / PULSE_BROKER_CLOSE_SHARE, 1);
    for (int t = 0; t < TOPICS; t++) {
        snprintf(name, sizeof name, "s%d", t);
        create_topic(b, name, PARTS);
        publish_everywhere(b, name, PARTS, t + 1);
    }
    pulse_broker_close(b);
    for (int round = 0; round < 2; round++) { /* the second close is of idle logs */
        struct pulse_broker_open_report rep;
        b = open_default(&rep);
        ck_assert_uint_eq(rep.partitions, TOPICS * PARTS);
        ck_assert_uint_eq(rep.repaired_partitions, 0);
        for (int t = 0; t < TOPICS; t++) {
            snprintf(name, sizeof name, "s%d", t);
            for (uint32_t p = 0; p < PARTS; p++)
                ck_assert_int_eq(hw_of(b, name, p), t + 1);
        }
        pulse_broker_close(b);
    }
}
END_TEST

/* The value of the sample line that starts with prefix, or -1. */
static long long sample(const char *text, const char *prefix)
{
    const char *at = strstr(text, prefix);
    return at == NULL ? -1 : atoll(at + strlen(prefix));
}

START_TEST(test_metrics_per_topic_sum_the_partition_gauges)
{
    struct pulse_broker *b = open_default(NULL);
    struct pulse_buf out;

    create_topic(b, "agg", 4);
    publish_everywhere(b, "agg", 4, 2);
    pulse_buf_init(&out, 1 << 20);
    ck_assert_int_eq(pulse_broker_metrics_per_topic(b, &out), PULSE_OK);
    ck_assert_int_eq(pulse_buf_append_u8(&out, 0), PULSE_OK);
    const char *text = (const char *)out.data;
    ck_assert_int_eq(sample(text, "pulse_topic_partitions{topic=\"agg\"} "), 4);
    ck_assert_int_eq(sample(text, "pulse_topic_high_watermark_sum{topic=\"agg\"} "), 8);
    ck_assert_int_eq(sample(text, "pulse_topic_log_start_offset_sum{topic=\"agg\"} "), 0);
    ck_assert_int_eq(sample(text, "pulse_topic_fenced_partitions{topic=\"agg\"} "), 0);
    ck_assert_int_gt(sample(text, "pulse_topic_size_bytes{topic=\"agg\"} "), 0);
    ck_assert_ptr_null(strstr(text, "partition=\""));
    pulse_buf_fini(&out);
    pulse_broker_close(b);
}
END_TEST

TCase *broker_scale_tcase(void)
{
    TCase *tc = tcase_create("scale");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_close_of_many_written_partitions_keeps_every_record);
    tcase_add_test(tc, test_metrics_per_topic_sum_the_partition_gauges);
    return tc;
}
