/* SPDX-License-Identifier: MIT */
/*
 * check_kafka.c - the Kafka backend (src/kafka) through the broker seam,
 * over librdkafka's in-process mock cluster (kafka.mock-brokers = 3):
 * publish and fetch round trips, the murmur2 routing of keyed records,
 * errors injected into the mock's Produce answers (retriable ones are
 * invisible; a non-retriable one fails only its records, which a publish
 * reports per record) and into the Fetch, ListOffsets and Metadata answers
 * a read needs (retriable ones invisible, a non-retriable one refused at
 * once), topic lookups off the caller's thread (one shared refresh, a
 * cluster gone answered in bounded time), cursors as consumer-group offsets that a Kafka
 * consumer of the group sees, long-poll wake-ups, lookups that must not
 * create topics, and a cluster that cannot be reached (bounded
 * PULSE_UNAVAILABLE, never a hang); topic reads served from the cache
 * (never waiting for the cluster, one failing partition not taking the
 * others down), topic delete on the mock, what the mock refuses, the
 * retention change's merge of configs, positions by time. Also the
 * kafka.property.* pass-through of the settings. Threaded (librdkafka's
 * threads and the backend's): .ci/extra runs it under TSan, with
 * c11threads.c and tsan.supp (docs/Scaling.md "Tests").
 */
#include <check.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "broker/broker.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/settings.h"
#include "kafka/kafka.h"
#include "kafka/kafka_int.h"
#include "kafka/kafka_settings.h"

static struct pulse_kafka_settings ks;

/* Settings for a broker: name=value pairs (kafka.* keys or
 * kafka.property.*), NULL-terminated. */
static void settings(const char *const *kv)
{
    char err[256] = "";
    ck_assert_int_eq(pulse_settings_init(pulse_kafka_settings(), &ks), PULSE_OK);
    for (size_t i = 0; kv != NULL && kv[i] != NULL; i += 2) {
        const struct pulse_setting *s = pulse_settings_find(pulse_kafka_settings(), kv[i]);
        pulse_status_t st = s != NULL ? pulse_settings_apply(s, &ks, kv[i + 1], err, sizeof err)
                                      : pulse_settings_apply_prefixed(pulse_kafka_settings_prefix(), &ks, kv[i],
                                                                      kv[i + 1], err, sizeof err);
        ck_assert_msg(st == PULSE_OK, "%s: %s", kv[i], err);
    }
}

static struct pulse_broker *open_with(const char *const *kv)
{
    struct pulse_broker *b = NULL;
    char err[512] = "";
    settings(kv);
    struct pulse_kafka_config cfg = {.settings = &ks, .max_records_per_publish = 10000, .default_partitions = 1};
    ck_assert_msg(pulse_kafka_open(&cfg, &b, err, sizeof err) == PULSE_OK, "%s", err);
    return b;
}

static struct pulse_broker *open_mock(void)
{
    /* max.in.flight=1: the mock's idempotence check is lax with more
     * (kafka-librdkafka notes M8), and these tests assert log contents. */
    static const char *const kv[] = {"kafka.mock-brokers", "3", "kafka.property.max.in.flight", "1", NULL};
    return open_with(kv);
}

static void close_broker(struct pulse_broker *b)
{
    pulse_broker_close(b);
    pulse_settings_prefix_fini(pulse_kafka_settings_prefix(), &ks);
    pulse_settings_fini(pulse_kafka_settings(), &ks);
}

static void create(struct pulse_broker *b, const char *name, int32_t partitions)
{
    char err[256] = "";
    struct pulse_topic_spec spec = {name, partitions, -1, -1, -1, -1, -1};
    ck_assert_msg(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err) == PULSE_OK, "%s", err);
}

static struct pulse_publish_record value_rec(const char *key, const char *value, int32_t partition)
{
    struct pulse_publish_record r;
    memset(&r, 0, sizeof r);
    r.key = (const uint8_t *)key;
    r.key_len = key != NULL ? strlen(key) : 0;
    r.value = (const uint8_t *)value;
    r.value_len = strlen(value);
    r.partition = partition;
    return r;
}

/* Reads partition p of topic from offset into a new fetch (records at
 * hand); the caller destroys it. */
static struct pulse_fetch *read_all(struct pulse_broker *b, const char *topic, uint32_t p, int64_t offset,
                                    struct pulse_fetch_pos *pos)
{
    struct pulse_fetch *f = NULL;
    uint64_t need = 0;
    ck_assert_int_eq(pulse_broker_fetch_create(b, topic, p, &f), PULSE_OK);
    ck_assert_int_eq(pulse_broker_fetch_read(b, f, offset, 1 << 20, pos, &need), PULSE_OK);
    return f;
}

START_TEST(test_publish_then_fetch_round_trips_keys_headers_and_timestamps)
{
    struct pulse_broker *b = open_mock();
    create(b, "rt", 2);
    struct pulse_header h = {(const uint8_t *)"hk", 2, (const uint8_t *)"hv", 2};
    struct pulse_publish_record recs[3] = {value_rec("k1", "v1", 1), value_rec(NULL, "v2", 1),
                                           value_rec("k3", "v3", 1)};
    recs[0].headers = &h;
    recs[0].header_count = 1;
    recs[1].has_timestamp = true;
    recs[1].timestamp = 1234567;
    struct pulse_offset_pair offs[3];
    char err[256] = "";
    ck_assert_msg(pulse_broker_publish_wait(b, "rt", recs, 3, offs, err, sizeof err) == PULSE_OK, "%s", err);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(offs[i].partition, 1);
        ck_assert_int_eq(offs[i].offset, i);
    }
    struct pulse_fetch_pos pos;
    struct pulse_fetch *f = read_all(b, "rt", 1, 1, &pos);
    ck_assert_int_eq(pos.high_watermark, 3);
    ck_assert_int_eq(pos.next_offset, 3);
    struct pulse_record rec;
    ck_assert_int_eq(pulse_broker_fetch_next(f, &rec), PULSE_OK);
    ck_assert_int_eq(rec.offset, 1);
    ck_assert_ptr_null(rec.key);
    ck_assert_int_eq(rec.timestamp, 1234567);
    ck_assert_int_eq(pulse_broker_fetch_next(f, &rec), PULSE_OK);
    ck_assert_int_eq(rec.offset, 2);
    ck_assert_mem_eq(rec.value, "v3", 2);
    ck_assert_int_eq(pulse_broker_fetch_next(f, &rec), PULSE_EOF);
    pulse_broker_fetch_destroy(f);
    /* The first record, with its header. */
    f = read_all(b, "rt", 1, 0, &pos);
    ck_assert_int_eq(pulse_broker_fetch_next(f, &rec), PULSE_OK);
    ck_assert_uint_eq(rec.header_count, 1);
    size_t it = 0;
    struct pulse_header got;
    ck_assert(rec.header_next(&rec, &it, &got));
    ck_assert_mem_eq(got.key, "hk", 2);
    ck_assert_mem_eq(got.value, "hv", 2);
    pulse_broker_fetch_destroy(f);
    /* Raw batches: Kafka has no Pulse segment bytes. */
    struct pulse_raw_slice raw;
    ck_assert_int_eq(pulse_broker_fetch_raw(b, "rt", 1, 0, 1 << 20, &raw), PULSE_NOT_SUPPORTED);
    close_broker(b);
}
END_TEST

/* Kafka's murmur2 (Utils.murmur2 of the Java client). */
static uint32_t murmur2(const uint8_t *data, size_t len)
{
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x9747b28c ^ (uint32_t)len;
    size_t i = 0;
    for (; i + 4 <= len; i += 4) {
        uint32_t k = (uint32_t)data[i] | (uint32_t)data[i + 1] << 8 | (uint32_t)data[i + 2] << 16 |
                     (uint32_t)data[i + 3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (len - i) {
    case 3:
        h ^= (uint32_t)data[i + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[i + 1] << 8;
        /* fall through */
    case 1:
        h ^= data[i];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

START_TEST(test_keyed_records_land_where_java_clients_put_them)
{
    struct pulse_broker *b = open_mock();
    create(b, "keyed", 6);
    char keys[40][16];
    struct pulse_publish_record recs[40];
    struct pulse_offset_pair offs[40];
    char err[256] = "";
    for (int i = 0; i < 40; i++) {
        snprintf(keys[i], sizeof keys[i], "key-%d", i * 7);
        recs[i] = value_rec(keys[i], "v", -1);
    }
    ck_assert_msg(pulse_broker_publish_wait(b, "keyed", recs, 40, offs, err, sizeof err) == PULSE_OK, "%s", err);
    for (int i = 0; i < 40; i++)
        ck_assert_uint_eq(offs[i].partition, (murmur2((const uint8_t *)keys[i], strlen(keys[i])) & 0x7fffffff) % 6);
    close_broker(b);
}
END_TEST

START_TEST(test_retriable_produce_errors_are_invisible)
{
    struct pulse_broker *b = open_mock();
    create(b, "retry", 1);
    /* Produce is API key 0. */
    rd_kafka_mock_push_request_errors(pulse_kafka_mock(b), 0, 3, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
                                      RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS);
    struct pulse_publish_record recs[5];
    struct pulse_offset_pair offs[5];
    char err[256] = "";
    for (int i = 0; i < 5; i++)
        recs[i] = value_rec(NULL, "r", 0);
    ck_assert_msg(pulse_broker_publish_wait(b, "retry", recs, 5, offs, err, sizeof err) == PULSE_OK, "%s", err);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(offs[i].offset, i);
    struct pulse_fetch_pos pos;
    struct pulse_fetch *f = read_all(b, "retry", 0, 0, &pos);
    ck_assert_int_eq(pos.high_watermark, 5);
    pulse_broker_fetch_destroy(f);
    close_broker(b);
}
END_TEST

START_TEST(test_a_non_retriable_produce_error_fails_only_its_records)
{
    struct pulse_broker *b = open_mock();
    create(b, "partial", 2);
    char err[256] = "";
    /* Partitions 0 and 1 on different brokers (an injected error fails a
     * whole Produce request, which carries every partition the broker
     * leads), and the producer told so by a first publish to each. */
    rd_kafka_mock_partition_set_leader(pulse_kafka_mock(b), "partial", 0, 1);
    rd_kafka_mock_partition_set_leader(pulse_kafka_mock(b), "partial", 1, 2);
    struct pulse_publish_record warm[2] = {value_rec(NULL, "w0", 0), value_rec(NULL, "w1", 1)};
    struct pulse_offset_pair woffs[2];
    ck_assert_int_eq(pulse_broker_publish_wait(b, "partial", warm, 2, woffs, err, sizeof err), PULSE_OK);
    /* Broker 1 (partition 0) refuses its next Produce, not retriably. */
    rd_kafka_mock_broker_push_request_error_rtts(pulse_kafka_mock(b), 1, 0, 1, RD_KAFKA_RESP_ERR_INVALID_RECORD, 0);
    struct pulse_publish_record recs[4] = {value_rec(NULL, "a", 0), value_rec(NULL, "b", 1), value_rec(NULL, "c", 0),
                                           value_rec(NULL, "d", 1)};
    struct pulse_offset_pair offs[4];
    pulse_status_t st = pulse_broker_publish_wait(b, "partial", recs, 4, offs, err, sizeof err);
    ck_assert_msg(st == PULSE_INVALID, "%s", err); /* INVALID_RECORD: the client's records, 400 */
    ck_assert_int_eq(offs[0].offset, PULSE_OFFSET_NONE);
    ck_assert_int_eq(offs[2].offset, PULSE_OFFSET_NONE);
    ck_assert_int_eq(offs[1].offset, 1);
    ck_assert_int_eq(offs[3].offset, 2);
    /* Nothing of the failed records is in partition 0. */
    struct pulse_fetch_pos pos;
    struct pulse_fetch *f = read_all(b, "partial", 0, 0, &pos);
    ck_assert_int_eq(pos.high_watermark, 1);
    pulse_broker_fetch_destroy(f);
    close_broker(b);
}
END_TEST

START_TEST(test_cursors_are_consumer_group_offsets_kafka_consumers_see)
{
    struct pulse_broker *b = open_mock();
    create(b, "cur", 2);
    struct pulse_publish_record recs[3] = {value_rec(NULL, "a", 1), value_rec(NULL, "b", 1), value_rec(NULL, "c", 1)};
    struct pulse_offset_pair offs[3];
    char err[256] = "";
    ck_assert_int_eq(pulse_broker_publish_wait(b, "cur", recs, 3, offs, err, sizeof err), PULSE_OK);
    struct pulse_cursor c;
    memset(&c, 0, sizeof c);
    snprintf(c.topic, sizeof c.topic, "cur");
    c.partition = 1;
    c.offset = 2;
    ck_assert_msg(pulse_broker_cursor_commit(b, "grp", &c, 1, err, sizeof err) == PULSE_OK, "%s", err);
    struct pulse_cursor got;
    ck_assert_int_eq(pulse_broker_cursor_get(b, "grp", "cur", 1, &got), PULSE_OK);
    ck_assert_int_eq(got.offset, 2);
    ck_assert_int_eq(got.high_watermark, 3);
    ck_assert_int_eq(got.lag, 1);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "grp", "cur", 0, &got), PULSE_CURSOR_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "grp", "cur", 9, &got), PULSE_PARTITION_NOT_FOUND);
    struct pulse_cursor *list = NULL;
    size_t n = 0;
    ck_assert_int_eq(pulse_broker_cursor_list(b, "grp", &list, &n), PULSE_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(list[0].topic, "cur");
    ck_assert_int_eq(list[0].offset, 2);
    pulse_free(list);
    /* Beyond the high watermark: refused, nothing written. */
    c.offset = 4;
    ck_assert_int_eq(pulse_broker_cursor_commit(b, "grp", &c, 1, err, sizeof err), PULSE_RANGE);
    /* A Kafka consumer of group "grp" sees the committed offset. */
    char e2[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", rd_kafka_mock_cluster_bootstraps(pulse_kafka_mock(b)), e2, sizeof e2);
    rd_kafka_conf_set(conf, "group.id", "grp", e2, sizeof e2);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, e2, sizeof e2);
    ck_assert_ptr_nonnull(rk);
    rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(tp, "cur", 1);
    ck_assert_int_eq(rd_kafka_committed(rk, tp, 5000), RD_KAFKA_RESP_ERR_NO_ERROR);
    ck_assert_int_eq(tp->elems[0].offset, 2);
    rd_kafka_topic_partition_list_destroy(tp);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    close_broker(b);
}
END_TEST

static atomic_int woken = -1;

static void on_wake(void *arg, pulse_status_t st)
{
    (void)arg;
    atomic_store(&woken, (int)st);
}

START_TEST(test_a_waiter_wakes_when_a_publish_raises_the_high_watermark)
{
    struct pulse_broker *b = open_mock();
    create(b, "wait", 1);
    bool parked = false;
    atomic_store(&woken, -1);
    ck_assert_int_eq(pulse_broker_wait_data(b, "wait", 0, 0, pulse_clock_mono_us() + 10000000, on_wake, NULL, &parked),
                     PULSE_OK);
    ck_assert(parked);
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
    ck_assert_int_eq(atomic_load(&woken), -1);
    struct pulse_publish_record r = value_rec(NULL, "x", 0);
    struct pulse_offset_pair off;
    char err[256] = "";
    int64_t t0 = pulse_clock_mono_us();
    ck_assert_int_eq(pulse_broker_publish_wait(b, "wait", &r, 1, &off, err, sizeof err), PULSE_OK);
    while (atomic_load(&woken) == -1 && pulse_clock_mono_us() - t0 < 5000000)
        nanosleep(&ts, NULL);
    ck_assert_int_eq(atomic_load(&woken), PULSE_OK);
    ck_assert_int_lt(pulse_clock_mono_us() - t0, 3000000);
    close_broker(b);
}
END_TEST

/* One waiter on several positions (the shape of a topic-wide read): data
 * at any of them fires it; with none, the deadline does. */
START_TEST(test_a_waiter_on_several_partitions_wakes_on_any_or_at_its_deadline)
{
    struct pulse_broker *b = open_mock();
    struct pulse_kafka *k = (struct pulse_kafka *)(void *)b;
    create(b, "multi", 3);
    const char *topics[3] = {"multi", "multi", "multi"};
    uint32_t parts[3] = {0, 1, 2};
    int64_t offs[3] = {0, 0, 0};
    bool parked = false;
    atomic_store(&woken, -1);
    int64_t t0 = pulse_clock_mono_us();
    ck_assert_int_eq(pulse_kafka_wait_positions(k, topics, parts, offs, 3, t0 + 300000, on_wake, NULL, &parked),
                     PULSE_OK);
    struct timespec ts = {0, 20 * 1000000L};
    while (atomic_load(&woken) == -1 && pulse_clock_mono_us() - t0 < 5000000)
        nanosleep(&ts, NULL);
    ck_assert_int_eq(atomic_load(&woken), PULSE_OK);
    ck_assert_int_ge(pulse_clock_mono_us() - t0, 290000); /* the deadline, not data */
    atomic_store(&woken, -1);
    t0 = pulse_clock_mono_us();
    ck_assert_int_eq(pulse_kafka_wait_positions(k, topics, parts, offs, 3, t0 + 10000000, on_wake, NULL, &parked),
                     PULSE_OK);
    struct pulse_publish_record r = value_rec(NULL, "x", 2);
    struct pulse_offset_pair off;
    char err[256] = "";
    ck_assert_int_eq(pulse_broker_publish_wait(b, "multi", &r, 1, &off, err, sizeof err), PULSE_OK);
    while (atomic_load(&woken) == -1 && pulse_clock_mono_us() - t0 < 5000000)
        nanosleep(&ts, NULL);
    ck_assert_int_eq(atomic_load(&woken), PULSE_OK);
    ck_assert_int_lt(pulse_clock_mono_us() - t0, 3000000);
    ck_assert_int_eq(pulse_kafka_wait_positions(k, topics, parts, offs, 0, t0, on_wake, NULL, &parked), PULSE_INVALID);
    close_broker(b);
}
END_TEST

/* Every metadata request naming an unknown topic would create it on the
 * mock: lookups, publishes, fetches and cursors of an unknown topic must
 * not. */
START_TEST(test_lookups_of_an_unknown_topic_do_not_create_it)
{
    struct pulse_broker *b = open_mock();
    struct pulse_topic_info *info = NULL;
    struct pulse_publish_record r = value_rec("k", "x", -1);
    struct pulse_offset_pair off;
    struct pulse_fetch_pos pos;
    struct pulse_cursor got;
    char err[256] = "";
    ck_assert_int_eq(pulse_broker_topic_get(b, "ghost", true, &info), PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "ghost", &r, 1, &off, err, sizeof err), PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_fetch_probe(b, "ghost", 0, 0, &pos), PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c", "ghost", 0, &got), PULSE_TOPIC_NOT_FOUND);
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
    ck_assert_int_eq(pulse_kafka_meta_refresh((struct pulse_kafka *)(void *)b), PULSE_OK);
    ck_assert_int_eq(pulse_broker_topic_get(b, "ghost", false, &info), PULSE_TOPIC_NOT_FOUND);
    close_broker(b);
}
END_TEST

START_TEST(test_a_cluster_that_cannot_be_reached_answers_unavailable_in_bounded_time)
{
    /* Port 1 on loopback: nothing listens. */
    static const char *const kv[] = {"kafka.bootstrap-servers", "127.0.0.1:1", "kafka.request-timeout", "500ms", NULL};
    int64_t t0 = pulse_clock_mono_us();
    struct pulse_broker *b = open_with(kv);
    struct pulse_fenced_partition *fenced = NULL;
    size_t nf = 0;
    ck_assert_int_eq(pulse_broker_fenced_list(b, &fenced, &nf), PULSE_UNAVAILABLE);
    struct pulse_topic_info *info = NULL;
    ck_assert_int_eq(pulse_broker_topic_get(b, "t", false, &info), PULSE_UNAVAILABLE);
    struct pulse_publish_record r = value_rec(NULL, "x", -1);
    struct pulse_offset_pair off;
    char err[256] = "";
    ck_assert_int_eq(pulse_broker_publish_wait(b, "t", &r, 1, &off, err, sizeof err), PULSE_UNAVAILABLE);
    struct pulse_topic_spec spec = {"t", 1, -1, -1, -1, -1, -1};
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_UNAVAILABLE);
    struct pulse_cursor c;
    ck_assert_int_eq(pulse_broker_cursor_get(b, "c", "t", 0, &c), PULSE_UNAVAILABLE);
    close_broker(b);
    /* Open, five refusals and close: each call is bounded by 500 ms. */
    ck_assert_int_lt(pulse_clock_mono_us() - t0, 8000000);
}
END_TEST

/* Every broker of the mock goes down while the gateway runs, then comes
 * back: publishes fail with PULSE_UNAVAILABLE within the bound (never a
 * hang), health says so, and both recover without a restart. */
START_TEST(test_a_cluster_that_goes_away_is_unavailable_then_comes_back)
{
    /* A short reconnect backoff: librdkafka's default grows to 10 s. */
    static const char *const kv[] = {"kafka.mock-brokers",
                                     "3",
                                     "kafka.request-timeout",
                                     "1s",
                                     "kafka.property.reconnect.backoff.max.ms",
                                     "200",
                                     NULL};
    struct pulse_broker *b = open_with(kv);
    rd_kafka_mock_cluster_t *mc = pulse_kafka_mock(b);
    create(b, "away", 1);
    struct pulse_publish_record r = value_rec(NULL, "x", 0);
    struct pulse_offset_pair off;
    char err[256] = "";
    ck_assert_int_eq(pulse_broker_publish_wait(b, "away", &r, 1, &off, err, sizeof err), PULSE_OK);
    for (int id = 1; id <= 3; id++)
        rd_kafka_mock_broker_set_down(mc, id);
    int64_t t0 = pulse_clock_mono_us();
    pulse_status_t st = pulse_broker_publish_wait(b, "away", &r, 1, &off, err, sizeof err);
    ck_assert_msg(st == PULSE_UNAVAILABLE, "%s: %s", pulse_status_message(st), err);
    ck_assert_int_lt(pulse_clock_mono_us() - t0, 4000000);
    /* Health: kwait's next metadata refresh (every second) fails. */
    struct pulse_fenced_partition *fenced = NULL;
    size_t nf = 0;
    struct timespec ts = {0, 100 * 1000000L};
    while (pulse_broker_fenced_list(b, &fenced, &nf) == PULSE_OK && pulse_clock_mono_us() - t0 < 10000000)
        nanosleep(&ts, NULL);
    ck_assert_int_eq(pulse_broker_fenced_list(b, &fenced, &nf), PULSE_UNAVAILABLE);
    for (int id = 1; id <= 3; id++)
        rd_kafka_mock_broker_set_up(mc, id);
    t0 = pulse_clock_mono_us();
    while (pulse_broker_fenced_list(b, &fenced, &nf) != PULSE_OK && pulse_clock_mono_us() - t0 < 15000000)
        nanosleep(&ts, NULL);
    ck_assert_int_eq(pulse_broker_fenced_list(b, &fenced, &nf), PULSE_OK);
    /* The producer reconnects on its own schedule: publishes succeed again
     * within a few seconds, each failing one bounded by the timeout. */
    while ((st = pulse_broker_publish_wait(b, "away", &r, 1, &off, err, sizeof err)) != PULSE_OK &&
           pulse_clock_mono_us() - t0 < 10000000)
        ck_assert_int_eq(st, PULSE_UNAVAILABLE);
    ck_assert_msg(st == PULSE_OK, "%s", err);
    close_broker(b);
}
END_TEST

/* A producer of its own on the mock: records published "through another
 * gateway". */
static void publish_elsewhere(struct pulse_broker *b, const char *topic, int32_t partition, int count)
{
    char e[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", rd_kafka_mock_cluster_bootstraps(pulse_kafka_mock(b)), e, sizeof e);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, e, sizeof e);
    ck_assert_ptr_nonnull(rk);
    for (int i = 0; i < count; i++)
        ck_assert_int_eq(rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                                           RD_KAFKA_V_VALUE("x", 1), RD_KAFKA_V_END),
                         RD_KAFKA_RESP_ERR_NO_ERROR);
    ck_assert_int_eq(rd_kafka_flush(rk, 5000), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(rk);
}

/* The high watermark topic_get shows for partition p, or -1 (refused). */
static int64_t shown_hw(struct pulse_broker *b, const char *topic, uint32_t p, pulse_status_t *st, int64_t *took_us)
{
    struct pulse_topic_info *info = NULL;
    int64_t t0 = pulse_clock_mono_us();
    *st = pulse_broker_topic_get(b, topic, true, &info);
    *took_us = pulse_clock_mono_us() - t0;
    int64_t hw = *st == PULSE_OK ? info->stats[p].high_watermark : -1;
    pulse_topic_info_free(info);
    return hw;
}

/* topic_get and topic_list run on HTTP workers, which must not wait: they
 * answer from the cache kwait refreshes (with the watermarks), raised at
 * once by this gateway's own publishes. When the cluster goes away they
 * keep answering at once - from the cache, then PULSE_UNAVAILABLE - never
 * after a call to the cluster (which would take the request timeout). */
START_TEST(test_topic_reads_answer_from_the_cache_and_never_wait_for_the_cluster)
{
    static const char *const kv[] = {"kafka.mock-brokers",
                                     "3",
                                     "kafka.request-timeout",
                                     "2s",
                                     "kafka.property.reconnect.backoff.max.ms",
                                     "200",
                                     NULL};
    struct pulse_broker *b = open_with(kv);
    rd_kafka_mock_cluster_t *mc = pulse_kafka_mock(b);
    create(b, "tr", 2);
    struct pulse_publish_record recs[3] = {value_rec(NULL, "a", 0), value_rec(NULL, "b", 0), value_rec(NULL, "c", 0)};
    struct pulse_offset_pair offs[3];
    char err[256] = "";
    ck_assert_int_eq(pulse_broker_publish_wait(b, "tr", recs, 3, offs, err, sizeof err), PULSE_OK);
    pulse_status_t st;
    int64_t took = 0;
    /* Our own publish: seen by the very next read. */
    ck_assert_int_eq(shown_hw(b, "tr", 0, &st, &took), 3);
    /* Published elsewhere: seen within a refresh or two. */
    publish_elsewhere(b, "tr", 1, 2);
    int64_t t0 = pulse_clock_mono_us();
    while (shown_hw(b, "tr", 1, &st, &took) != 2 && pulse_clock_mono_us() - t0 < 5000000)
        nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
    ck_assert_int_eq(shown_hw(b, "tr", 1, &st, &took), 2);
    /* The cluster goes away: every read answers at once (from the cache,
     * then 503 once the refresh has failed), none takes the 2 s timeout. */
    for (int id = 1; id <= 3; id++)
        rd_kafka_mock_broker_set_down(mc, id);
    int64_t slowest = 0;
    bool refused = false;
    t0 = pulse_clock_mono_us();
    while (!refused && pulse_clock_mono_us() - t0 < 15000000) {
        struct pulse_topic_info **list = NULL;
        size_t n = 0;
        (void)shown_hw(b, "tr", 0, &st, &took);
        slowest = took > slowest ? took : slowest;
        ck_assert_msg(st == PULSE_OK || st == PULSE_UNAVAILABLE, "%s", pulse_status_message(st));
        refused = st == PULSE_UNAVAILABLE;
        int64_t t1 = pulse_clock_mono_us();
        pulse_status_t lst = pulse_broker_topic_list(b, true, &list, &n);
        took = pulse_clock_mono_us() - t1;
        slowest = took > slowest ? took : slowest;
        if (lst == PULSE_OK)
            pulse_topic_info_list_free(list, n);
        nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
    }
    ck_assert_msg(refused, "topic_get kept answering from a cache the cluster no longer confirms");
    ck_assert_msg(slowest < 250000, "a topic read waited %lld us for the cluster", (long long)slowest);
    /* Back: served again without a restart. */
    for (int id = 1; id <= 3; id++)
        rd_kafka_mock_broker_set_up(mc, id);
    t0 = pulse_clock_mono_us();
    while (shown_hw(b, "tr", 0, &st, &took) != 3 && pulse_clock_mono_us() - t0 < 15000000)
        nanosleep(&(struct timespec){0, 100 * 1000000L}, NULL);
    ck_assert_int_eq(shown_hw(b, "tr", 0, &st, &took), 3);
    close_broker(b);
}
END_TEST

static atomic_int gone_st = -1;

static void on_gone(void *arg, pulse_status_t st)
{
    (void)arg;
    atomic_store(&gone_st, (int)st);
}

/* The mock cannot delete a topic; the backend hides it there (kadmin.c),
 * and from then on every call of the seam treats it as deleted: what a
 * real cluster's DeleteTopics leads to. Its name cannot be used again on
 * the mock. Retention changes and consumer list/delete are refused there
 * with PULSE_NOT_SUPPORTED before anything is sent (no controller for
 * Describe/AlterConfigs; librdkafka 2.0.2 leaks on an unsupported
 * ListConsumerGroups and aborts on an unsupported DeleteGroups). */
START_TEST(test_a_deleted_topic_is_gone_for_every_call_and_the_mock_refuses_what_it_cannot_serve)
{
    struct pulse_broker *b = open_mock();
    create(b, "gone", 2);
    create(b, "stays", 1);
    struct pulse_publish_record r = value_rec(NULL, "x", 1);
    struct pulse_offset_pair off;
    char err[256] = "";
    ck_assert_int_eq(pulse_broker_publish_wait(b, "gone", &r, 1, &off, err, sizeof err), PULSE_OK);
    struct pulse_cursor c[2];
    memset(c, 0, sizeof c);
    snprintf(c[0].topic, sizeof c[0].topic, "gone");
    c[0].partition = 1;
    c[0].offset = 1;
    snprintf(c[1].topic, sizeof c[1].topic, "stays");
    ck_assert_msg(pulse_broker_cursor_commit(b, "cg", c, 2, err, sizeof err) == PULSE_OK, "%s", err);
    /* A waiter on the topic, then the delete. */
    bool parked = false;
    struct pulse_wait_pos wp = {"gone", 0, 0};
    ck_assert_int_eq(pulse_broker_wait_any(b, &wp, 1, pulse_clock_mono_us() + 10000000, on_gone, NULL, &parked, NULL),
                     PULSE_OK);
    ck_assert(parked);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "gone"), PULSE_OK);
    int64_t t0 = pulse_clock_mono_us();
    while (atomic_load(&gone_st) == -1 && pulse_clock_mono_us() - t0 < 5000000)
        nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
    ck_assert_int_eq(atomic_load(&gone_st), PULSE_TOPIC_NOT_FOUND);
    struct pulse_topic_info *info = NULL;
    ck_assert_int_eq(pulse_broker_topic_get(b, "gone", false, &info), PULSE_TOPIC_NOT_FOUND);
    struct pulse_topic_info **list = NULL;
    size_t n = 0;
    ck_assert_int_eq(pulse_broker_topic_list(b, true, &list, &n), PULSE_OK);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_ne(list[i]->name, "gone");
    pulse_topic_info_list_free(list, n);
    ck_assert_int_eq(pulse_broker_publish_wait(b, "gone", &r, 1, &off, err, sizeof err), PULSE_TOPIC_NOT_FOUND);
    struct pulse_fetch_pos pos;
    ck_assert_int_eq(pulse_broker_fetch_probe(b, "gone", 1, 0, &pos), PULSE_TOPIC_NOT_FOUND);
    struct pulse_cursor *cs = NULL;
    ck_assert_int_eq(pulse_broker_cursor_list(b, "cg", &cs, &n), PULSE_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(cs[0].topic, "stays");
    pulse_free(cs);
    ck_assert_int_eq(pulse_broker_topic_delete(b, "gone"), PULSE_TOPIC_NOT_FOUND);
    /* What the mock cannot serve. */
    struct pulse_topic_spec spec = {"gone", 1, -1, -1, -1, -1, -1};
    err[0] = '\0';
    ck_assert_int_eq(pulse_broker_topic_create(b, &spec, NULL, err, sizeof err), PULSE_NOT_SUPPORTED);
    ck_assert_msg(strstr(err, "deleted") != NULL, "%s", err);
    ck_assert_int_eq(pulse_broker_topic_set_retention(b, "stays", 1000, -1, NULL), PULSE_NOT_SUPPORTED);
    ck_assert_int_eq(pulse_broker_topic_set_retention(b, "gone", 1000, -1, NULL), PULSE_TOPIC_NOT_FOUND);
    char **names = NULL;
    ck_assert_int_eq(pulse_broker_consumer_list(b, &names, &n), PULSE_NOT_SUPPORTED);
    ck_assert_int_eq(pulse_broker_consumer_delete(b, "cg"), PULSE_NOT_SUPPORTED);
    close_broker(b);
}
END_TEST

static void add_config(struct kconfig *c, size_t i, const char *name, const char *value, bool dynamic)
{
    c[i].name = (char *)(uintptr_t)name;
    c[i].value = (char *)(uintptr_t)value;
    c[i].dynamic = dynamic;
}

static const char *config_value(const struct kconfig *c, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(c[i].name, name) == 0)
            return c[i].value;
    return NULL;
}

/* librdkafka 2.0.2's AlterConfigs replaces the topic's whole dynamic set:
 * the retention change writes back every config set on the topic, with
 * only retention.ms / retention.bytes changed, and none of the broker's
 * defaults (which would then be pinned on the topic). */
START_TEST(test_a_retention_change_writes_back_every_config_set_on_the_topic)
{
    struct kconfig got[4];
    add_config(got, 0, "retention.ms", "1000", true);
    add_config(got, 1, "cleanup.policy", "compact", true);
    add_config(got, 2, "segment.bytes", "1073741824", false);
    add_config(got, 3, "max.message.bytes", "2000", true);
    struct kconfig *set = NULL;
    size_t n = 0;
    ck_assert_int_eq(pulse_kafka_retention_configs(got, 4, 5000, -1, &set, &n), PULSE_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(config_value(set, n, "retention.ms"), "5000");
    ck_assert_str_eq(config_value(set, n, "cleanup.policy"), "compact");
    ck_assert_str_eq(config_value(set, n, "max.message.bytes"), "2000");
    ck_assert_ptr_null(config_value(set, n, "segment.bytes"));
    ck_assert_ptr_null(config_value(set, n, "retention.bytes"));
    pulse_kafka_configs_free(set, n);
    /* retention.bytes added; Pulse's 0 (no limit) is Kafka's -1. */
    ck_assert_int_eq(pulse_kafka_retention_configs(got, 4, -1, 0, &set, &n), PULSE_OK);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(config_value(set, n, "retention.ms"), "1000");
    ck_assert_str_eq(config_value(set, n, "retention.bytes"), "-1");
    pulse_kafka_configs_free(set, n);
    /* A sensitive config set on the topic could not be written back. */
    add_config(got, 2, "some.secret", NULL, true);
    ck_assert_int_eq(pulse_kafka_retention_configs(got, 4, 5000, -1, &set, &n), PULSE_NOT_SUPPORTED);
}
END_TEST

/* Positions by time are ListOffsets by timestamp, which the mock answers
 * with "none" (-1) for every time (kfetch.c): first the mock's answer is
 * pinned here (if a librdkafka ever gives it a time index, this fails and
 * the refusal below can go), then the gateway's: unknown topics and
 * partitions as always, else PULSE_NOT_SUPPORTED on the mock rather than
 * a wrong offset. */
START_TEST(test_offset_for_time_is_refused_on_the_mock_which_has_no_time_index)
{
    struct pulse_broker *b = open_mock();
    create(b, "times", 2);
    struct pulse_publish_record recs[3] = {value_rec(NULL, "a", 1), value_rec(NULL, "b", 1), value_rec(NULL, "c", 1)};
    for (int i = 0; i < 3; i++) {
        recs[i].has_timestamp = true;
        recs[i].timestamp = 1000 * (i + 1);
    }
    struct pulse_offset_pair offs[3];
    char err[256] = "";
    ck_assert_msg(pulse_broker_publish_wait(b, "times", recs, 3, offs, err, sizeof err) == PULSE_OK, "%s", err);
    struct pulse_kafka *k = (struct pulse_kafka *)(void *)b;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, "times", 1)->offset = 1500;
    ck_assert_int_eq(rd_kafka_offsets_for_times(k->prod, list, 5000), RD_KAFKA_RESP_ERR_NO_ERROR);
    ck_assert_int_eq(list->elems[0].offset, -1); /* the record at 2000 is offset 1 */
    rd_kafka_topic_partition_list_destroy(list);
    int64_t got = -7;
    ck_assert_int_eq(pulse_broker_offset_for_time(b, "times", 1, 1500, &got), PULSE_NOT_SUPPORTED);
    ck_assert_int_eq(pulse_broker_offset_for_time(b, "times", 2, 5, &got), PULSE_PARTITION_NOT_FOUND);
    ck_assert_int_eq(pulse_broker_offset_for_time(b, "nope", 0, 5, &got), PULSE_TOPIC_NOT_FOUND);
    ck_assert_int_eq(got, -7);
    close_broker(b);
}
END_TEST

/* One broker answers every ListOffsets with an error for its partitions:
 * the refresh keeps the other partitions' watermarks moving and the
 * gateway healthy (one partition without a leader must not take /readyz
 * and every topic read down with it). */
START_TEST(test_a_partition_whose_watermarks_fail_does_not_fail_the_refresh)
{
    struct pulse_broker *b = open_mock();
    rd_kafka_mock_cluster_t *mc = pulse_kafka_mock(b);
    create(b, "sick", 1);
    create(b, "well", 1);
    ck_assert_int_eq(rd_kafka_mock_partition_set_leader(mc, "sick", 0, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
    ck_assert_int_eq(rd_kafka_mock_partition_set_leader(mc, "well", 0, 2), RD_KAFKA_RESP_ERR_NO_ERROR);
    nanosleep(&(struct timespec){0, 300 * 1000000L}, NULL);
    /* ApiKey 2 = ListOffsets, on broker 1 only, for the rest of the test. */
    for (int i = 0; i < 300; i++)
        ck_assert_int_eq(rd_kafka_mock_broker_push_request_error_rtts(mc, 1, 2, 1, RD_KAFKA_RESP_ERR_INVALID_REQUEST,
                                                                      0),
                         RD_KAFKA_RESP_ERR_NO_ERROR);
    publish_elsewhere(b, "well", 0, 2);
    pulse_status_t st;
    int64_t took = 0;
    int64_t t0 = pulse_clock_mono_us();
    while (shown_hw(b, "well", 0, &st, &took) != 2 && pulse_clock_mono_us() - t0 < 5000000)
        nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
    ck_assert_msg(shown_hw(b, "well", 0, &st, &took) == 2, "well/0 not refreshed: %s", pulse_status_message(st));
    /* Waiters: one on the sick partition, one on the well one; a publish
     * to the well one wakes its waiter long before its deadline. */
    bool parked = false;
    struct pulse_wait_pos sick = {"sick", 0, 0}, well = {"well", 0, 2};
    atomic_store(&woken, -1);
    ck_assert_int_eq(pulse_broker_wait_any(b, &sick, 1, pulse_clock_mono_us() + 20000000, on_gone, NULL, &parked, NULL),
                     PULSE_OK);
    ck_assert_int_eq(pulse_broker_wait_any(b, &well, 1, pulse_clock_mono_us() + 20000000, on_wake, NULL, &parked, NULL),
                     PULSE_OK);
    publish_elsewhere(b, "well", 0, 1);
    t0 = pulse_clock_mono_us();
    while (atomic_load(&woken) == -1 && pulse_clock_mono_us() - t0 < 5000000)
        nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
    ck_assert_int_eq(atomic_load(&woken), PULSE_OK);
    struct pulse_fenced_partition *fenced = NULL;
    size_t nf = 0;
    ck_assert_int_eq(pulse_broker_fenced_list(b, &fenced, &nf), PULSE_OK);
    /* A topic whose positions were never learned: listed without stats,
     * its own read with stats PULSE_UNAVAILABLE, without stats served. */
    ck_assert_int_eq(rd_kafka_mock_topic_create(mc, "never", 1, 3), RD_KAFKA_RESP_ERR_NO_ERROR);
    ck_assert_int_eq(rd_kafka_mock_partition_set_leader(mc, "never", 0, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
    struct pulse_topic_info *info = NULL;
    t0 = pulse_clock_mono_us();
    while (pulse_broker_topic_get(b, "never", false, &info) != PULSE_OK && pulse_clock_mono_us() - t0 < 5000000)
        nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
    ck_assert_ptr_nonnull(info);
    pulse_topic_info_free(info);
    info = NULL;
    ck_assert_int_eq(pulse_broker_topic_get(b, "never", true, &info), PULSE_UNAVAILABLE);
    struct pulse_topic_info **list = NULL;
    size_t n = 0;
    ck_assert_int_eq(pulse_broker_topic_list(b, true, &list, &n), PULSE_OK);
    bool seen = false;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(list[i]->name, "never") == 0) {
            seen = true;
            ck_assert_ptr_null(list[i]->stats);
        } else if (strcmp(list[i]->name, "well") == 0) {
            ck_assert_int_eq(list[i]->stats[0].high_watermark, 3);
        }
    }
    ck_assert(seen);
    pulse_topic_info_list_free(list, n);
    rd_kafka_mock_clear_request_errors(mc, 2);
    pulse_broker_drain(b); /* the waiter on the sick partition */
    close_broker(b);
}
END_TEST

START_TEST(test_pass_through_properties_are_kept_in_order_and_replaced)
{
    static const char *const kv[] = {"kafka.property.security.protocol",
                                     "SSL",
                                     "kafka.property.linger.ms",
                                     "3",
                                     "kafka.property.security.protocol",
                                     "PLAINTEXT",
                                     NULL};
    char err[256] = "";
    settings(kv);
    ck_assert_uint_eq(ks.properties.n, 2);
    ck_assert_str_eq(ks.properties.names[0], "security.protocol");
    ck_assert_str_eq(ks.properties.values[0], "PLAINTEXT");
    ck_assert_str_eq(ks.properties.names[1], "linger.ms");
    ck_assert_int_eq(pulse_settings_apply_prefixed(pulse_kafka_settings_prefix(), &ks, "kafka.property.", "x", err,
                                                   sizeof err),
                     PULSE_NOT_FOUND);
    ck_assert_int_eq(pulse_settings_apply_prefixed(pulse_kafka_settings_prefix(), &ks, "kafka.property.a", "", err,
                                                   sizeof err),
                     PULSE_INVALID);
    pulse_settings_prefix_fini(pulse_kafka_settings_prefix(), &ks);
    pulse_settings_fini(pulse_kafka_settings(), &ks);
    /* librdkafka refuses an unknown property when the backend opens. */
    static const char *const bad[] = {"kafka.mock-brokers", "1", "kafka.property.no.such.thing", "1", NULL};
    settings(bad);
    struct pulse_broker *b = NULL;
    struct pulse_kafka_config cfg = {.settings = &ks, .max_records_per_publish = 100, .default_partitions = 1};
    ck_assert_int_eq(pulse_kafka_open(&cfg, &b, err, sizeof err), PULSE_INVALID);
    ck_assert_msg(strstr(err, "no.such.thing") != NULL, "%s", err);
    pulse_settings_prefix_fini(pulse_kafka_settings_prefix(), &ks);
    pulse_settings_fini(pulse_kafka_settings(), &ks);
}
END_TEST

/* Topic lookups (the seam's topic_lookup_async, which the HTTP handlers
 * call before a publish or fetch). */
struct lookup {
    atomic_int st; /* -1 until answered */
    atomic_int calls;
    char err[128]; /* valid until answered (the seam's rule) */
};

static void on_lookup(void *arg, pulse_status_t st)
{
    struct lookup *l = arg;
    atomic_store(&l->st, (int)st);
    atomic_fetch_add(&l->calls, 1);
}

/* Starts a lookup into l; returns how long the call took (us). */
static int64_t start_lookup(struct pulse_broker *b, const char *topic, struct lookup *l)
{
    bool pending = false;
    l->err[0] = '\0';
    atomic_init(&l->st, -1);
    atomic_init(&l->calls, 0);
    int64_t t0 = pulse_clock_mono_us();
    pulse_status_t st = pulse_broker_topic_lookup_async(b, topic, on_lookup, l, &pending, l->err, sizeof l->err);
    int64_t took = pulse_clock_mono_us() - t0;
    if (st != PULSE_OK || !pending) {
        atomic_store(&l->st, (int)st);
        atomic_fetch_add(&l->calls, 1);
    }
    return took;
}

static pulse_status_t lookup_result(struct lookup *l, int64_t bound_us)
{
    int64_t t0 = pulse_clock_mono_us();
    while (atomic_load(&l->st) < 0 && pulse_clock_mono_us() - t0 < bound_us)
        nanosleep(&(struct timespec){0, 2 * 1000000L}, NULL);
    ck_assert_int_eq(atomic_load(&l->calls), 1);
    return (pulse_status_t)atomic_load(&l->st);
}

static uint64_t refreshes_begun(struct pulse_broker *b)
{
    struct pulse_kafka *k = (struct pulse_kafka *)(void *)b;
    pthread_mutex_lock(&k->meta_mu);
    uint64_t n = k->meta_started;
    pthread_mutex_unlock(&k->meta_mu);
    return n;
}

/* A topic created behind the gateway's back (on the mock directly) is
 * found by a lookup, which never waits on the caller's thread; 40 lookups
 * waiting at once share the refresh kwait runs for them. */
START_TEST(test_lookups_wait_for_one_shared_refresh_off_the_callers_thread)
{
    struct pulse_broker *b = open_mock();
    create(b, "seen", 1);
    ck_assert_int_eq(pulse_kafka_meta_refresh((struct pulse_kafka *)(void *)b), PULSE_OK);
    rd_kafka_mock_topic_create(pulse_kafka_mock(b), "behind", 2, 1);
    /* Past the 100 ms in which a miss trusts the last refresh. */
    nanosleep(&(struct timespec){0, 150 * 1000000L}, NULL);
    struct lookup behind[20], never[20], seen;
    uint64_t before = refreshes_begun(b);
    int64_t slowest = start_lookup(b, "seen", &seen);
    for (int i = 0; i < 20; i++) {
        int64_t a = start_lookup(b, "behind", &behind[i]);
        int64_t c = start_lookup(b, "never-made", &never[i]);
        slowest = a > slowest ? a : slowest;
        slowest = c > slowest ? c : slowest;
    }
    ck_assert_msg(slowest < 50000, "a lookup call took %lld us", (long long)slowest);
    ck_assert_int_eq(lookup_result(&seen, 0), PULSE_OK); /* cached: at once */
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(lookup_result(&behind[i], 5000000), PULSE_OK);
        ck_assert_int_eq(lookup_result(&never[i], 5000000), PULSE_TOPIC_NOT_FOUND);
    }
    /* One refresh for all of them (kwait's once-a-second one may fall in
     * between and answer some). */
    uint64_t used = refreshes_begun(b) - before;
    ck_assert_msg(used >= 1 && used <= 3, "%llu refreshes for 40 lookups", (unsigned long long)used);
    /* The publish that follows finds the topic. */
    struct pulse_publish_record r = value_rec(NULL, "x", 1);
    struct pulse_offset_pair off;
    char err[256] = "";
    ck_assert_msg(pulse_broker_publish_wait(b, "behind", &r, 1, &off, err, sizeof err) == PULSE_OK, "%s", err);
    ck_assert_int_eq(off.offset, 0);
    close_broker(b);
}
END_TEST

/* With every broker down and the cache not yet known stale, lookups park
 * (the caller goes on at once) and the failed refresh answers all of them
 * PULSE_UNAVAILABLE, naming the cluster, within two request timeouts; a
 * lookup still waiting at close is answered then, once. */
START_TEST(test_lookups_with_the_cluster_gone_are_answered_unavailable_in_bounded_time)
{
    static const char *const kv[] = {"kafka.mock-brokers", "3", "kafka.request-timeout", "1s", NULL};
    struct pulse_broker *b = open_with(kv);
    ck_assert_int_eq(pulse_kafka_meta_refresh((struct pulse_kafka *)(void *)b), PULSE_OK);
    for (int id = 1; id <= 3; id++)
        rd_kafka_mock_broker_set_down(pulse_kafka_mock(b), id);
    nanosleep(&(struct timespec){0, 150 * 1000000L}, NULL);
    struct lookup l[30];
    int64_t slowest = 0, t0 = pulse_clock_mono_us();
    for (int i = 0; i < 30; i++) {
        char name[32];
        snprintf(name, sizeof name, "gone-%d", i);
        int64_t took = start_lookup(b, name, &l[i]);
        slowest = took > slowest ? took : slowest;
    }
    ck_assert_msg(slowest < 50000, "a lookup call took %lld us", (long long)slowest);
    for (int i = 0; i < 30; i++) {
        ck_assert_int_eq(lookup_result(&l[i], 5000000), PULSE_UNAVAILABLE);
        ck_assert_msg(strstr(l[i].err, "cluster cannot be reached") != NULL, "%s", l[i].err);
    }
    ck_assert_msg(pulse_clock_mono_us() - t0 < 2 * 1000000 + 500000, "lookups answered after %lld us",
                  (long long)(pulse_clock_mono_us() - t0));
    /* Parked at close (or refused at once): answered exactly once. */
    struct lookup last;
    (void)start_lookup(b, "gone-last", &last);
    close_broker(b);
    pulse_status_t st = lookup_result(&last, 0);
    ck_assert_msg(st == PULSE_SHUTDOWN || st == PULSE_UNAVAILABLE, "%s", pulse_status_message(st));
}
END_TEST

/* Publishes n one-byte records to partition 0 of topic. */
static void publish_n(struct pulse_broker *b, const char *topic, int n)
{
    struct pulse_publish_record recs[16];
    struct pulse_offset_pair offs[16];
    char err[256] = "";
    ck_assert_int_le(n, 16);
    for (int i = 0; i < n; i++)
        recs[i] = value_rec(NULL, "r", 0);
    ck_assert_msg(pulse_broker_publish_wait(b, topic, recs, (size_t)n, offs, err, sizeof err) == PULSE_OK, "%s", err);
}

/* Reads partition 0 of topic from 0: the status, and the records at hand
 * in *n. */
static pulse_status_t read_count(struct pulse_broker *b, const char *topic, size_t *n)
{
    struct pulse_fetch *f = NULL;
    struct pulse_fetch_pos pos;
    struct pulse_record rec;
    uint64_t need = 0;
    *n = 0;
    ck_assert_int_eq(pulse_broker_fetch_create(b, topic, 0, &f), PULSE_OK);
    pulse_status_t st = pulse_broker_fetch_read(b, f, 0, 1 << 20, &pos, &need);
    while (st == PULSE_OK && pulse_broker_fetch_next(f, &rec) == PULSE_OK)
        (*n)++;
    pulse_broker_fetch_destroy(f);
    return st;
}

/* Retriable errors injected into the answers a fetch and a publish need
 * besides Produce - Fetch (API key 1), ListOffsets (2), Metadata (3) -
 * are retried inside the request timeout and never reach the caller. */
START_TEST(test_retriable_errors_on_fetch_list_offsets_and_metadata_are_invisible)
{
    struct pulse_broker *b = open_mock();
    rd_kafka_mock_cluster_t *mc = pulse_kafka_mock(b);
    create(b, "rfetch", 1);
    publish_n(b, "rfetch", 5);
    size_t n = 0;
    rd_kafka_mock_push_request_errors(mc, 1, 2, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
                                      RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT);
    ck_assert_int_eq(read_count(b, "rfetch", &n), PULSE_OK);
    ck_assert_uint_eq(n, 5);
    rd_kafka_mock_push_request_errors(mc, 2, 2, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
                                      RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE);
    ck_assert_int_eq(read_count(b, "rfetch", &n), PULSE_OK);
    ck_assert_uint_eq(n, 5);
    rd_kafka_mock_push_request_errors(mc, 3, 2, RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
                                      RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT);
    publish_n(b, "rfetch", 2);
    ck_assert_int_eq(read_count(b, "rfetch", &n), PULSE_OK);
    ck_assert_uint_eq(n, 7);
    close_broker(b);
}
END_TEST

/* A non-retriable error on the fetch path (the cluster refusing the
 * gateway's principal) is a refusal at once - not an empty answer, not a
 * wait for the timeout - whether it comes in the Fetch or the ListOffsets
 * answer; the next read, the error used up, serves the records. */
START_TEST(test_a_non_retriable_fetch_error_is_refused_at_once)
{
    struct pulse_broker *b = open_mock(); /* request timeout 5 s */
    rd_kafka_mock_cluster_t *mc = pulse_kafka_mock(b);
    create(b, "nfetch", 1);
    publish_n(b, "nfetch", 3);
    size_t n = 0;
    for (int16_t api = 1; api <= 2; api++) { /* Fetch, ListOffsets */
        rd_kafka_mock_push_request_errors(mc, api, 1, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
        int64_t t0 = pulse_clock_mono_us();
        pulse_status_t st = read_count(b, "nfetch", &n);
        int64_t took = pulse_clock_mono_us() - t0;
        ck_assert_msg(st == PULSE_IO || st == PULSE_UNAVAILABLE, "API %d: %s", api, pulse_status_name(st));
        ck_assert_uint_eq(n, 0);
        ck_assert_msg(took < 2000000, "API %d: refused after %lld us", api, (long long)took);
        ck_assert_int_eq(read_count(b, "nfetch", &n), PULSE_OK);
        ck_assert_uint_eq(n, 3);
    }
    close_broker(b);
}
END_TEST

static atomic_int parked_st = -1;

static void on_parked(void *arg, pulse_status_t st)
{
    (void)arg;
    atomic_store(&parked_st, (int)st);
}

/* A long-poll, stream or topic-wide read parks a waiter from an HTTP
 * worker: on a topic the cache has it never refreshes the cache there,
 * even when the cache has gone stale because the cluster stopped answering
 * (kwait's refresh is still waiting for its timeout). */
START_TEST(test_a_waiter_on_a_known_topic_parks_at_once_with_the_cluster_silent)
{
    static const char *const kv[] = {"kafka.mock-brokers", "3", "kafka.request-timeout", "3s", NULL};
    struct pulse_broker *b = open_with(kv);
    create(b, "silent", 1);
    ck_assert_int_eq(pulse_kafka_meta_refresh((struct pulse_kafka *)(void *)b), PULSE_OK);
    for (int id = 1; id <= 3; id++)
        rd_kafka_mock_broker_set_down(pulse_kafka_mock(b), id);
    /* Past the second after which the cache counts as stale. */
    nanosleep(&(struct timespec){1, 300 * 1000000L}, NULL);
    bool parked = false;
    int64_t t0 = pulse_clock_mono_us();
    pulse_status_t st = pulse_broker_wait_data(b, "silent", 0, 0, pulse_clock_mono_us() + 200000, on_parked, NULL,
                                               &parked);
    int64_t took = pulse_clock_mono_us() - t0;
    ck_assert_int_eq(st, PULSE_OK);
    ck_assert(parked);
    ck_assert_msg(took < 250000, "parking a waiter took %lld us", (long long)took);
    close_broker(b); /* fires it */
    ck_assert_int_ge(atomic_load(&parked_st), 0);
}
END_TEST

static Suite *kafka_suite(void)
{
    Suite *s = suite_create("kafka");
    TCase *tc = tcase_create("mock");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_publish_then_fetch_round_trips_keys_headers_and_timestamps);
    tcase_add_test(tc, test_keyed_records_land_where_java_clients_put_them);
    tcase_add_test(tc, test_retriable_produce_errors_are_invisible);
    tcase_add_test(tc, test_a_non_retriable_produce_error_fails_only_its_records);
    tcase_add_test(tc, test_cursors_are_consumer_group_offsets_kafka_consumers_see);
    tcase_add_test(tc, test_a_waiter_wakes_when_a_publish_raises_the_high_watermark);
    tcase_add_test(tc, test_a_waiter_on_several_partitions_wakes_on_any_or_at_its_deadline);
    tcase_add_test(tc, test_lookups_of_an_unknown_topic_do_not_create_it);
    tcase_add_test(tc, test_a_cluster_that_cannot_be_reached_answers_unavailable_in_bounded_time);
    tcase_add_test(tc, test_a_cluster_that_goes_away_is_unavailable_then_comes_back);
    tcase_add_test(tc, test_pass_through_properties_are_kept_in_order_and_replaced);
    tcase_add_test(tc, test_a_partition_whose_watermarks_fail_does_not_fail_the_refresh);
    tcase_add_test(tc, test_topic_reads_answer_from_the_cache_and_never_wait_for_the_cluster);
    tcase_add_test(tc, test_a_deleted_topic_is_gone_for_every_call_and_the_mock_refuses_what_it_cannot_serve);
    tcase_add_test(tc, test_a_retention_change_writes_back_every_config_set_on_the_topic);
    tcase_add_test(tc, test_offset_for_time_is_refused_on_the_mock_which_has_no_time_index);
    tcase_add_test(tc, test_lookups_wait_for_one_shared_refresh_off_the_callers_thread);
    tcase_add_test(tc, test_lookups_with_the_cluster_gone_are_answered_unavailable_in_bounded_time);
    tcase_add_test(tc, test_retriable_errors_on_fetch_list_offsets_and_metadata_are_invisible);
    tcase_add_test(tc, test_a_non_retriable_fetch_error_is_refused_at_once);
    tcase_add_test(tc, test_a_waiter_on_a_known_topic_parks_at_once_with_the_cluster_silent);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    pulse_log_set_level(PULSE_LOG_ERROR);
    SRunner *sr = srunner_create(kafka_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
