/* SPDX-License-Identifier: MIT */
/*
 * kafka.c - the Kafka backend's life (open, drain, close), its librdkafka
 * handles and their configuration, the delivery-report thread (kpoll),
 * health, metrics and the table of the seam's functions.
 *
 * Configuration: every handle gets bootstrap.servers, then the backend's
 * own defaults for its role (the producer: idempotent, acks=all,
 * murmur2_random, linger.ms=1; the fetchers: the settings that avoid
 * librdkafka 2.0.2's fetch stalls), then the kafka.property.* pass-through,
 * which wins. The bound of every call is kafka.request-timeout; the
 * producer's message.timeout.ms is the same bound, so a publish to a
 * cluster that is gone fails (503) instead of waiting.
 */
#include "kafka/kafka.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/log.h"
#include "kafka/kafka_int.h"
#include "kafka/kafka_settings.h"
#include "kafka/kgroups.h"

pulse_status_t pulse_kafka_status(rd_kafka_resp_err_t err)
{
    switch (err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR:
        return PULSE_OK;
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
        return PULSE_TOPIC_NOT_FOUND;
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
        return PULSE_PARTITION_NOT_FOUND;
    case RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS:
        return PULSE_EXISTS;
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
        return PULSE_TOO_LARGE;
    case RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE:
    case RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET:
        return PULSE_RANGE;
    case RD_KAFKA_RESP_ERR__NOENT:
        return PULSE_NOT_FOUND;
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
    case RD_KAFKA_RESP_ERR__QUEUE_FULL:
        return PULSE_UNAVAILABLE;
    case RD_KAFKA_RESP_ERR__PURGE_QUEUE:
    case RD_KAFKA_RESP_ERR__PURGE_INFLIGHT:
    case RD_KAFKA_RESP_ERR__DESTROY:
        return PULSE_SHUTDOWN;
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
    case RD_KAFKA_RESP_ERR_INVALID_MSG:
    case RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP:
    case RD_KAFKA_RESP_ERR_INVALID_PARTITIONS:
    case RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR:
    case RD_KAFKA_RESP_ERR_INVALID_CONFIG:
        return PULSE_INVALID;
    default:
        return PULSE_IO;
    }
}

bool pulse_kafka_retriable(rd_kafka_resp_err_t err)
{
    switch (err) {
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_OFFSET_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_REPLICA_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR:
        return true;
    default:
        return false;
    }
}

/* A configuration: bootstrap.servers, then defaults (name, value, ...,
 * NULL), then the kafka.property.* pass-through, which wins. NULL with
 * errbuf naming the property librdkafka refused. */
static rd_kafka_conf_t *make_conf(struct pulse_kafka *k, const struct pulse_kafka_settings *ks,
                                  const char *const *defaults, char *errbuf, size_t errlen)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char err[512] = "";
    const char *servers = k->mock != NULL ? rd_kafka_mock_cluster_bootstraps(k->mock) : ks->bootstrap_servers;

    if (rd_kafka_conf_set(conf, "bootstrap.servers", servers, err, sizeof err) != RD_KAFKA_CONF_OK)
        goto fail;
    for (size_t i = 0; defaults != NULL && defaults[i] != NULL; i += 2)
        if (rd_kafka_conf_set(conf, defaults[i], defaults[i + 1], err, sizeof err) != RD_KAFKA_CONF_OK)
            goto fail;
    for (size_t i = 0; i < ks->properties.n; i++)
        if (rd_kafka_conf_set(conf, ks->properties.names[i], ks->properties.values[i], err, sizeof err) !=
            RD_KAFKA_CONF_OK)
            goto fail;
    return conf;
fail:
    pulse_errbuf_set(errbuf, errlen, "librdkafka refused a property: %s", err);
    rd_kafka_conf_destroy(conf);
    return NULL;
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    /* Rate-limited: a cluster that is gone makes librdkafka repeat itself
     * on every reconnect attempt. */
    if (level <= 5)
        pulse_log_limited(level <= 3 ? PULSE_LOG_ERROR : PULSE_LOG_WARN, "librdkafka", "librdkafka %s: %s", fac, buf);
}

/* librdkafka's statistics (statistics.interval.ms): the last JSON is kept
 * for /metrics. Returning 0 lets librdkafka free json. */
static int stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    struct pulse_kafka *k = opaque;
    (void)rk;
    char *copy = pulse_malloc(len + 1);
    if (copy == NULL)
        return 0;
    memcpy(copy, json, len);
    copy[len] = '\0';
    pthread_mutex_lock(&k->stats_mu);
    char *old = k->stats_json;
    k->stats_json = copy;
    pthread_mutex_unlock(&k->stats_mu);
    pulse_free(old);
    return 0;
}

/* The producer: every publish, metadata, watermark and Admin call. */
static pulse_status_t make_producer(struct pulse_kafka *k, const struct pulse_kafka_settings *ks, char *errbuf,
                                    size_t errlen)
{
    char tmo[32];
    snprintf(tmo, sizeof tmo, "%lld", (long long)k->timeout_ms);
    const char *const defaults[] = {"enable.idempotence",
                                    "true",
                                    "acks",
                                    "all",
                                    "partitioner",
                                    "murmur2_random",
                                    "linger.ms",
                                    "1",
                                    "message.timeout.ms",
                                    tmo,
                                    "statistics.interval.ms",
                                    "5000",
                                    "client.id",
                                    "pulsed",
                                    NULL};
    char err[512] = "";
    rd_kafka_conf_t *conf = make_conf(k, ks, defaults, errbuf, errlen);
    if (conf == NULL)
        return PULSE_INVALID;
    rd_kafka_conf_set_opaque(conf, k);
    rd_kafka_conf_set_dr_msg_cb(conf, pulse_kafka_dr_cb);
    rd_kafka_conf_set_stats_cb(conf, stats_cb);
    rd_kafka_conf_set_log_cb(conf, log_cb);
    k->prod = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (k->prod == NULL) {
        rd_kafka_conf_destroy(conf);
        pulse_errbuf_set(errbuf, errlen, "cannot make the Kafka producer: %s", err);
        return PULSE_INVALID;
    }
    return PULSE_OK;
}

/* The fetchers: legacy consumers (no group), with the settings the notes
 * measured to avoid 2.0.2's stalls: a partition queue that never passes
 * queued.min.messages (else a 1 s pause), a short fetch.wait.max.ms (a new
 * start waits for a parked long-poll Fetch), no silent offset reset. */
static pulse_status_t make_fetchers(struct pulse_kafka *k, const struct pulse_kafka_settings *ks, char *errbuf,
                                    size_t errlen)
{
    /* Memory: a handle's prefetch is bounded by queued.max.messages.kbytes
     * (64 MB by default, per partition) and one Fetch answer by
     * fetch.max.bytes; a read stops its partition when it has its bytes,
     * so more than a few MB of prefetch per handle is waste. */
    const char *const defaults[] = {"queued.min.messages",
                                    "1000000",
                                    "fetch.wait.max.ms",
                                    "10",
                                    "auto.offset.reset",
                                    "error",
                                    "enable.partition.eof",
                                    "false",
                                    "queued.max.messages.kbytes",
                                    "8192",
                                    "fetch.max.bytes",
                                    "8388608",
                                    "fetch.message.max.bytes",
                                    "1048576",
                                    "receive.message.max.bytes",
                                    "9437184",
                                    "client.id",
                                    "pulsed-fetch",
                                    NULL};
    k->n_fetchers = (size_t)ks->fetch_handles;
    k->fetchers = pulse_calloc(k->n_fetchers, sizeof *k->fetchers);
    if (k->fetchers == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < k->n_fetchers; i++) {
        char err[512] = "";
        pthread_mutex_init(&k->fetchers[i].mu, NULL);
        rd_kafka_conf_t *conf = make_conf(k, ks, defaults, errbuf, errlen);
        if (conf == NULL)
            return PULSE_INVALID;
        rd_kafka_conf_set_log_cb(conf, log_cb);
        k->fetchers[i].rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
        if (k->fetchers[i].rk == NULL) {
            rd_kafka_conf_destroy(conf);
            pulse_errbuf_set(errbuf, errlen, "cannot make a Kafka consumer: %s", err);
            return PULSE_INVALID;
        }
    }
    return PULSE_OK;
}

/* The group log's reader (kgroups.c): a legacy consumer like the
 * fetchers, that starts at the log's start when its offset is gone. */
static pulse_status_t make_group_log(struct pulse_kafka *k, const struct pulse_kafka_config *cfg, char *errbuf,
                                     size_t errlen)
{
    const char *const defaults[] = {"queued.min.messages",
                                    "1000000",
                                    "fetch.wait.max.ms",
                                    "10",
                                    "auto.offset.reset",
                                    "earliest",
                                    "enable.partition.eof",
                                    "false",
                                    "client.id",
                                    "pulsed-groups",
                                    NULL};
    rd_kafka_conf_t *conf = make_conf(k, cfg->settings, defaults, errbuf, errlen);
    if (conf == NULL)
        return PULSE_INVALID;
    rd_kafka_conf_set_log_cb(conf, log_cb);
    return pulse_kgroups_open(k, cfg, conf, errbuf, errlen);
}

/* Tests: librdkafka's in-process mock cluster, owned by a handle of its
 * own (destroyed after the mock, or librdkafka aborts). */
static pulse_status_t make_mock(struct pulse_kafka *k, int brokers, char *errbuf, size_t errlen)
{
    char err[512] = "";
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, log_cb);
    /* It connects nowhere: its "no bootstrap.servers" warning is noise. */
    (void)rd_kafka_conf_set(conf, "log_level", "3", err, sizeof err);
    k->mock_owner = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (k->mock_owner == NULL) {
        rd_kafka_conf_destroy(conf);
        pulse_errbuf_set(errbuf, errlen, "cannot make the mock cluster's handle: %s", err);
        return PULSE_INVALID;
    }
    k->mock = rd_kafka_mock_cluster_new(k->mock_owner, brokers);
    if (k->mock == NULL) {
        pulse_errbuf_set(errbuf, errlen, "cannot start the mock cluster");
        return PULSE_IO;
    }
    k->mock_brokers = brokers;
    PULSE_INFO("kafka: mock cluster of %d broker(s) at %s (tests only)", brokers,
               rd_kafka_mock_cluster_bootstraps(k->mock));
    return PULSE_OK;
}

/* kpoll: delivery reports and statistics, for every publish. */
static void *poll_main(void *arg)
{
    struct pulse_kafka *k = arg;
    while (!atomic_load(&k->stopping))
        rd_kafka_poll(k->prod, 100);
    return NULL;
}

static void init_locks(struct pulse_kafka *k)
{
    pthread_mutex_init(&k->meta_mu, NULL);
    pthread_mutex_init(&k->stats_mu, NULL);
    pthread_mutex_init(&k->wait_mu, NULL);
    pthread_cond_init(&k->wait_cv, NULL);
    pthread_mutex_init(&k->admin_mu, NULL);
    pthread_cond_init(&k->admin_cv, NULL);
}

static pulse_status_t start_threads(struct pulse_kafka *k, char *errbuf, size_t errlen)
{
    if (pthread_create(&k->poll_thread, NULL, poll_main, k) != 0)
        goto fail;
    k->poll_started = true;
    if (pthread_create(&k->wait_thread, NULL, pulse_kafka_wait_main, k) != 0)
        goto fail;
    k->wait_started = true;
    if (pthread_create(&k->admin_thread, NULL, pulse_kafka_admin_main, k) != 0)
        goto fail;
    k->admin_started = true;
    return PULSE_OK;
fail:
    pulse_errbuf_set(errbuf, errlen, "cannot start the Kafka backend's threads");
    return PULSE_NOMEM;
}

static void kafka_close(struct pulse_broker *b);
extern const struct pulse_broker_ops pulse_kafka_ops;

pulse_status_t pulse_kafka_open(const struct pulse_kafka_config *cfg, struct pulse_broker **out, char *errbuf,
                                size_t errlen)
{
    const struct pulse_kafka_settings *ks = cfg->settings;
    pulse_status_t st = PULSE_OK;
    struct pulse_kafka *k = pulse_calloc(1, sizeof *k);
    if (k == NULL)
        return PULSE_NOMEM;
    k->base.ops = &pulse_kafka_ops;
    init_locks(k);
    k->started_at_ms = (int64_t)time(NULL) * 1000;
    k->timeout_ms = ks->request_timeout_ms;
    k->max_records = cfg->max_records_per_publish;
    k->default_partitions = cfg->default_partitions;
    if (gethostname(k->broker_id, sizeof k->broker_id - 1) != 0)
        snprintf(k->broker_id, sizeof k->broker_id, "pulsed");
    snprintf(k->cluster_id, sizeof k->cluster_id, "unknown");
    if (ks->mock_brokers > 0 && (st = make_mock(k, (int)ks->mock_brokers, errbuf, errlen)) != PULSE_OK)
        goto out;
    if ((st = make_producer(k, ks, errbuf, errlen)) != PULSE_OK)
        goto out;
    if ((st = make_fetchers(k, ks, errbuf, errlen)) != PULSE_OK)
        goto out;
    if ((st = make_group_log(k, cfg, errbuf, errlen)) != PULSE_OK)
        goto out;
    /* The cluster may not be up yet: that is /readyz's to say, not a
     * reason to refuse to start. */
    if (pulse_kafka_meta_refresh_marks(k) == PULSE_OK) {
        char *id = rd_kafka_clusterid(k->prod, (int)k->timeout_ms);
        if (id != NULL)
            snprintf(k->cluster_id, sizeof k->cluster_id, "%s", id);
        rd_kafka_mem_free(k->prod, id);
    } else {
        PULSE_WARN("kafka: the cluster at %s cannot be reached yet; /readyz answers 503 until it can",
                   k->mock != NULL ? rd_kafka_mock_cluster_bootstraps(k->mock) : ks->bootstrap_servers);
    }
    st = start_threads(k, errbuf, errlen);
out:
    if (st != PULSE_OK) {
        kafka_close(&k->base);
        return st;
    }
    *out = &k->base;
    return PULSE_OK;
}

/* Refuses new publishes and admin calls, lets what is in flight complete
 * (bounded by the request timeout; what is left is purged and fails with
 * PULSE_SHUTDOWN), and fires every waiter. */
static void kafka_drain(struct pulse_broker *b)
{
    struct pulse_kafka *k = kafka_of(b);
    if (atomic_exchange(&k->draining, true))
        return;
    pulse_kafka_wait_fire_all(k, PULSE_SHUTDOWN);
    pulse_kgroups_drain(k);
    pulse_kafka_meta_lookups_fire_all(k, PULSE_SHUTDOWN);
    if (k->prod != NULL && rd_kafka_flush(k->prod, (int)k->timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_purge(k->prod, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        (void)rd_kafka_flush(k->prod, 1000);
    }
    pulse_kafka_admin_drain(k);
}

static void join_threads(struct pulse_kafka *k)
{
    atomic_store(&k->stopping, true);
    pthread_mutex_lock(&k->wait_mu);
    pthread_cond_broadcast(&k->wait_cv);
    pthread_mutex_unlock(&k->wait_mu);
    pthread_mutex_lock(&k->admin_mu);
    pthread_cond_broadcast(&k->admin_cv);
    pthread_mutex_unlock(&k->admin_mu);
    if (k->poll_started)
        pthread_join(k->poll_thread, NULL);
    if (k->wait_started)
        pthread_join(k->wait_thread, NULL);
    if (k->admin_started)
        pthread_join(k->admin_thread, NULL);
}

static void kafka_close(struct pulse_broker *b)
{
    struct pulse_kafka *k = kafka_of(b);
    if (k->poll_started)
        kafka_drain(b);
    join_threads(k);
    pulse_kgroups_close(k);
    for (size_t i = 0; k->fetchers != NULL && i < k->n_fetchers; i++) {
        if (k->fetchers[i].rk != NULL)
            rd_kafka_destroy(k->fetchers[i].rk);
        pthread_mutex_destroy(&k->fetchers[i].mu);
    }
    pulse_free(k->fetchers);
    if (k->prod != NULL)
        rd_kafka_destroy(k->prod);
    if (k->mock != NULL)
        rd_kafka_mock_cluster_destroy(k->mock); /* before its owner */
    if (k->mock_owner != NULL)
        rd_kafka_destroy(k->mock_owner);
    pulse_kafka_meta_snapshot_free(k->topics, k->n_topics);
    for (size_t i = 0; i < k->n_mock_deleted; i++)
        pulse_free(k->mock_deleted[i]);
    pulse_free(k->mock_deleted);
    pulse_free(k->stats_json);
    pthread_mutex_destroy(&k->meta_mu);
    pthread_mutex_destroy(&k->stats_mu);
    pthread_mutex_destroy(&k->wait_mu);
    pthread_cond_destroy(&k->wait_cv);
    pthread_mutex_destroy(&k->admin_mu);
    pthread_cond_destroy(&k->admin_cv);
    pulse_free(k);
}

static const char *kafka_cluster_id(const struct pulse_broker *b)
{
    return ((const struct pulse_kafka *)(const void *)b)->cluster_id;
}

static const char *kafka_broker_id(const struct pulse_broker *b)
{
    return ((const struct pulse_kafka *)(const void *)b)->broker_id;
}

static int64_t kafka_started_at_ms(const struct pulse_broker *b)
{
    return ((const struct pulse_kafka *)(const void *)b)->started_at_ms;
}

rd_kafka_mock_cluster_t *pulse_kafka_mock(struct pulse_broker *b)
{
    return kafka_of(b)->mock;
}

/* Fetched records are counted by the gateway, not per topic. */
static void kafka_note_fetched(struct pulse_broker *b, const char *topic, uint64_t records, uint64_t bytes)
{
    struct pulse_kafka *k = kafka_of(b);
    (void)topic;
    atomic_fetch_add(&k->fetched_records, records);
    atomic_fetch_add(&k->fetched_bytes, bytes);
}

/* /readyz: the cluster answered the last metadata refresh (kwait makes one
 * every second). No partition is ever fenced in this backend. */
static pulse_status_t kafka_fenced_list(struct pulse_broker *b, struct pulse_fenced_partition **out, size_t *n_out)
{
    struct pulse_kafka *k = kafka_of(b);
    *out = NULL;
    *n_out = 0;
    return atomic_load(&k->cluster_ok) ? PULSE_OK : PULSE_UNAVAILABLE;
}

/* One family of per-broker gauges from librdkafka's statistics: a line per
 * broker (bootstrap entries, nodeid -1, left out). */
static pulse_status_t broker_family(json_t *stats, struct pulse_buf *out, const char *name, const char *help,
                                    double (*value)(json_t *br, const char **label))
{
    pulse_status_t st = pulse_buf_printf(out, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
    const char *broker;
    json_t *br;
    json_object_foreach(json_object_get(stats, "brokers"), broker, br)
    {
        if (st != PULSE_OK || json_integer_value(json_object_get(br, "nodeid")) < 0)
            continue;
        const char *label = NULL;
        double v = value(br, &label);
        if (label != NULL)
            st = pulse_buf_printf(out, "%s{broker=\"%s\",%s} %.6f\n", name, broker, label, v);
        else
            st = pulse_buf_printf(out, "%s{broker=\"%s\"} %.6f\n", name, broker, v);
        if (st == PULSE_OK && label != NULL) { /* the rtt family has two lines */
            json_t *rtt = json_object_get(br, "rtt");
            st = pulse_buf_printf(out, "%s{broker=\"%s\",quantile=\"0.99\"} %.6f\n", name, broker,
                                  (double)json_integer_value(json_object_get(rtt, "p99")) / 1e6);
        }
    }
    return st;
}

static double rtt_avg(json_t *br, const char **label)
{
    *label = "quantile=\"avg\"";
    return (double)json_integer_value(json_object_get(json_object_get(br, "rtt"), "avg")) / 1e6;
}

static double outbuf(json_t *br, const char **label)
{
    (void)label;
    return (double)json_integer_value(json_object_get(br, "outbuf_cnt"));
}

static double waitresp(json_t *br, const char **label)
{
    (void)label;
    return (double)json_integer_value(json_object_get(br, "waitresp_cnt"));
}

static double broker_up(json_t *br, const char **label)
{
    const char *state = json_string_value(json_object_get(br, "state"));
    (void)label;
    return state != NULL && strcmp(state, "UP") == 0 ? 1 : 0;
}

/* What matters of librdkafka's statistics: the producer's queue, errors,
 * and per broker the round-trip time, requests waiting to be sent and for
 * their answer, and whether it is up. */
static pulse_status_t stats_metrics(json_t *stats, struct pulse_buf *out)
{
    pulse_status_t st = pulse_buf_printf(
        out,
        "# HELP pulse_kafka_producer_queue_messages Records in the producer's queues (librdkafka msg_cnt).\n"
        "# TYPE pulse_kafka_producer_queue_messages gauge\npulse_kafka_producer_queue_messages %lld\n"
        "# HELP pulse_kafka_tx_errors_total Request transmission errors (librdkafka txerrs).\n"
        "# TYPE pulse_kafka_tx_errors_total counter\npulse_kafka_tx_errors_total %lld\n",
        (long long)json_integer_value(json_object_get(stats, "msg_cnt")),
        (long long)json_integer_value(json_object_get(stats, "txerrs")));
    if (st == PULSE_OK)
        st = broker_family(stats, out, "pulse_kafka_broker_rtt_seconds",
                           "Broker round-trip time, average and p99 (librdkafka rtt).", rtt_avg);
    if (st == PULSE_OK)
        st = broker_family(stats, out, "pulse_kafka_broker_outbuf_requests",
                           "Requests waiting to be sent to the broker.", outbuf);
    if (st == PULSE_OK)
        st = broker_family(stats, out, "pulse_kafka_broker_waitresp_requests",
                           "Requests sent and waiting for the broker's answer.", waitresp);
    if (st == PULSE_OK)
        st = broker_family(stats, out, "pulse_kafka_broker_up", "Whether the connection to the broker is up.",
                           broker_up);
    return st;
}

static pulse_status_t kafka_metrics(struct pulse_broker *b, struct pulse_buf *out)
{
    struct pulse_kafka *k = kafka_of(b);
    pulse_status_t st = pulse_buf_printf(
        out,
        "# HELP pulse_kafka_up Whether the last metadata refresh reached the cluster.\n"
        "# TYPE pulse_kafka_up gauge\npulse_kafka_up %d\n"
        "# HELP pulse_kafka_published_records_total Records acknowledged by the cluster.\n"
        "# TYPE pulse_kafka_published_records_total counter\npulse_kafka_published_records_total %llu\n"
        "# HELP pulse_kafka_publish_failed_records_total Records the cluster did not take.\n"
        "# TYPE pulse_kafka_publish_failed_records_total counter\npulse_kafka_publish_failed_records_total %llu\n"
        "# HELP pulse_kafka_fetched_records_total Records served by fetches.\n"
        "# TYPE pulse_kafka_fetched_records_total counter\npulse_kafka_fetched_records_total %llu\n",
        atomic_load(&k->cluster_ok) ? 1 : 0, (unsigned long long)atomic_load(&k->published),
        (unsigned long long)atomic_load(&k->publish_failed), (unsigned long long)atomic_load(&k->fetched_records));
    pthread_mutex_lock(&k->stats_mu);
    json_t *stats = k->stats_json != NULL ? json_loads(k->stats_json, 0, NULL) : NULL;
    pthread_mutex_unlock(&k->stats_mu);
    if (st == PULSE_OK && stats != NULL)
        st = stats_metrics(stats, out);
    json_decref(stats);
    if (st == PULSE_OK && k->groups != NULL)
        st = pulse_kgroups_metrics(k, out);
    return st;
}

const struct pulse_broker_ops pulse_kafka_ops = {
    .name = "kafka",
    .drain = kafka_drain,
    .close = kafka_close,
    .cluster_id = kafka_cluster_id,
    .broker_id = kafka_broker_id,
    .started_at_ms = kafka_started_at_ms,
    .topic_create_async = pulse_kafka_topic_create_async,
    .topic_get = pulse_kafka_topic_get,
    .topic_list = pulse_kafka_topic_list,
    .topic_set_retention_async = pulse_kafka_topic_set_retention_async,
    .topic_delete_async = pulse_kafka_topic_delete_async,
    .publish = pulse_kafka_publish,
    .fetch_create = pulse_kafka_fetch_create,
    .fetch_read = pulse_kafka_fetch_read,
    .fetch_next = pulse_kafka_fetch_next,
    .fetch_rewind = pulse_kafka_fetch_rewind,
    .fetch_destroy = pulse_kafka_fetch_destroy,
    .fetch_probe = pulse_kafka_fetch_probe,
    .fetch_raw = NULL,
    .note_fetched = kafka_note_fetched,
    .offset_for_time = pulse_kafka_offset_for_time,
    .wait_any = pulse_kafka_wait_any,
    .cursor_commit_async = pulse_kafka_cursor_commit_async,
    .cursor_get_async = pulse_kafka_cursor_get_async,
    .cursor_list_async = pulse_kafka_cursor_list_async,
    .consumer_list_async = pulse_kafka_consumer_list_async,
    .consumer_delete_async = pulse_kafka_consumer_delete_async,
    .metrics = kafka_metrics,
    .fenced_list = kafka_fenced_list,
    /* consumer groups: the group log (kgroups.c, kgcalls.c); join,
     * heartbeat, leave and fetched only in their asynchronous forms */
    .group_join = NULL,
    .group_heartbeat = NULL,
    .group_leave = NULL,
    .group_poll_async = pulse_kafka_group_poll_async,
    .group_fetched = NULL,
    .group_wait = pulse_kafka_group_wait,
    .group_commit_async = pulse_kafka_group_commit_async,
    .group_list = pulse_kafka_group_list,
    .group_describe_async = pulse_kafka_group_describe_async,
    .group_join_async = pulse_kafka_group_join_async,
    .group_heartbeat_async = pulse_kafka_group_heartbeat_async,
    .group_leave_async = pulse_kafka_group_leave_async,
    .group_fetched_async = pulse_kafka_group_fetched_async,
    .topic_lookup_async = pulse_kafka_topic_lookup_async,
};
