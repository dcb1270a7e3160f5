/* SPDX-License-Identifier: MIT */
/* check_http.c - the HTTP layer's pure parts: configuration parsing and
 * precedence, the status -> HTTP error table, media types and
 * Accept negotiation, request ids, strict integers, gzip bodies with a cap,
 * routing and its query parameter table, timestamps, the memory budget and
 * the request-head deadline (on real sockets). The server itself is exercised end to end by
 * tests/integration. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "broker/local.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/settings.h"
#include "common/status.h"
#include "http/budget.h"
#include "http/config.h"
#include "http/conns.h"
#include "http/errmap.h"
#include "http/json.h"
#include "http/request.h"
#include "http/router.h"

/* ---- helpers ---------------------------------------------------------- */

static char tmpdir[64];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/check_http.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/pulse.conf", tmpdir);
    unlink(path);
    rmdir(tmpdir);
}

/* Writes text into <tmpdir>/pulse.conf and returns the path (static). */
static const char *write_conf(const char *text)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/pulse.conf", tmpdir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static const char *fake_env_name;
static const char *fake_env_value;

static const char *fake_getenv(const char *name)
{
    if (fake_env_name != NULL && strcmp(name, fake_env_name) == 0)
        return fake_env_value;
    return NULL;
}

/* ---- configuration ---------------------------------------------------- */

START_TEST(test_config_defaults_match_the_documented_values)
{
    struct pulse_config cfg;
    ck_assert_int_eq(pulse_config_init(&cfg), PULSE_OK);
    ck_assert_str_eq(cfg.server.listen, "127.0.0.1:8080");
    ck_assert_str_eq(cfg.server.data_dir, "./data");
    ck_assert_uint_eq(cfg.server.max_body_bytes, 16u * 1024 * 1024);
    ck_assert_int_eq(cfg.server.max_records_per_request, 10000);
    ck_assert_int_eq(cfg.server.max_connections, 1000);
    ck_assert_int_eq(cfg.server.max_connections_per_ip, 64);
    ck_assert_int_eq(cfg.server.connection_timeout_ms, 30000);
    ck_assert_int_eq(cfg.server.header_timeout_ms, 10000);
    ck_assert_int_eq(cfg.server.body_timeout_ms, 10000);
    ck_assert_uint_eq(cfg.server.body_min_rate, 1024);
    ck_assert_uint_eq(cfg.server.memory_budget, 256u * 1024 * 1024);
    ck_assert_int_eq(cfg.server.threads, 0);
    ck_assert_uint_eq(cfg.storage.segment_max_bytes, 512ull * 1024 * 1024);
    ck_assert_uint_eq(cfg.storage.index_interval_bytes, 4096);
    ck_assert_str_eq(cfg.broker.sync_mode, "every-write");
    ck_assert_int_eq(cfg.broker.sync_interval_ms, 1000);
    ck_assert_int_eq(cfg.broker.retention_interval_ms, 30000);
    ck_assert_int_eq(cfg.broker.compaction_interval_ms, 30000);
    ck_assert_int_eq(cfg.storage.compaction_tombstone_retention_ms, 24 * 3600 * 1000);
    ck_assert(cfg.storage.compaction_min_gain_ratio > 0.0999 && cfg.storage.compaction_min_gain_ratio < 0.1001);
    ck_assert_uint_eq(cfg.storage.compaction_max_bytes_per_pass, 1024ull * 1024 * 1024);
    ck_assert_int_eq(cfg.storage.compaction_max_pass_ms, 5000);
    ck_assert_int_eq(cfg.broker.partitions, 1);
    ck_assert_int_eq(cfg.broker.retention_ms, 7ll * 86400 * 1000);
    ck_assert_uint_eq(cfg.broker.retention_bytes, 0);
    ck_assert_str_eq(cfg.log.level, "info");
    pulse_config_fini(&cfg);
}
END_TEST

START_TEST(test_sizes_accept_bytes_and_binary_units_only)
{
    uint64_t v = 0;
    ck_assert_int_eq(pulse_settings_parse_size("123", &v), PULSE_OK);
    ck_assert_uint_eq(v, 123);
    ck_assert_int_eq(pulse_settings_parse_size("7B", &v), PULSE_OK);
    ck_assert_uint_eq(v, 7);
    ck_assert_int_eq(pulse_settings_parse_size("2KiB", &v), PULSE_OK);
    ck_assert_uint_eq(v, 2048);
    ck_assert_int_eq(pulse_settings_parse_size("16MiB", &v), PULSE_OK);
    ck_assert_uint_eq(v, 16u * 1024 * 1024);
    ck_assert_int_eq(pulse_settings_parse_size("3 GiB", &v), PULSE_OK);
    ck_assert_uint_eq(v, 3ull * 1024 * 1024 * 1024);
    ck_assert_int_ne(pulse_settings_parse_size("1KB", &v), PULSE_OK);
    ck_assert_int_ne(pulse_settings_parse_size("1MB", &v), PULSE_OK);
    ck_assert_int_ne(pulse_settings_parse_size("-1", &v), PULSE_OK);
    ck_assert_int_ne(pulse_settings_parse_size("", &v), PULSE_OK);
    ck_assert_int_ne(pulse_settings_parse_size("1.5MiB", &v), PULSE_OK);
    ck_assert_int_ne(pulse_settings_parse_size("99999999999999999999", &v), PULSE_OK);
    ck_assert_int_ne(pulse_settings_parse_size("17179869184GiB", &v), PULSE_OK);
}
END_TEST

START_TEST(test_durations_are_milliseconds_unless_suffixed)
{
    int64_t v = 0;
    ck_assert_int_eq(pulse_settings_parse_duration_ms("250", &v), PULSE_OK);
    ck_assert_int_eq(v, 250);
    ck_assert_int_eq(pulse_settings_parse_duration_ms("250ms", &v), PULSE_OK);
    ck_assert_int_eq(v, 250);
    ck_assert_int_eq(pulse_settings_parse_duration_ms("30s", &v), PULSE_OK);
    ck_assert_int_eq(v, 30000);
    ck_assert_int_eq(pulse_settings_parse_duration_ms("2m", &v), PULSE_OK);
    ck_assert_int_eq(v, 120000);
    ck_assert_int_eq(pulse_settings_parse_duration_ms("24h", &v), PULSE_OK);
    ck_assert_int_eq(v, 86400000);
    ck_assert_int_eq(pulse_settings_parse_duration_ms("7d", &v), PULSE_OK);
    ck_assert_int_eq(v, 604800000);
    ck_assert_int_ne(pulse_settings_parse_duration_ms("1w", &v), PULSE_OK);
    ck_assert_int_ne(pulse_settings_parse_duration_ms("1.5s", &v), PULSE_OK);
    ck_assert_int_ne(pulse_settings_parse_duration_ms("s", &v), PULSE_OK);
    ck_assert_int_ne(pulse_settings_parse_duration_ms("-5s", &v), PULSE_OK);
    ck_assert_int_ne(pulse_settings_parse_duration_ms("999999999999999999d", &v), PULSE_OK);
}
END_TEST

START_TEST(test_unknown_key_is_refused_and_named)
{
    struct pulse_config cfg;
    char err[256] = "";
    ck_assert_int_eq(pulse_config_init(&cfg), PULSE_OK);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.bogus", "1", err, sizeof err), PULSE_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(err, "server.bogus"));
    ck_assert_int_ne(pulse_config_set_assignment(&cfg, "storage.nope=3", err, sizeof err), PULSE_OK);
    ck_assert_ptr_nonnull(strstr(err, "storage.nope"));
    ck_assert_int_ne(pulse_config_set_assignment(&cfg, "no-equals-sign", err, sizeof err), PULSE_OK);

    make_tmpdir();
    const char *path = write_conf("[server]\nlisten = 127.0.0.1:9\n[storage]\ncolour = blue\n");
    ck_assert_int_ne(pulse_config_load_file(&cfg, path, err, sizeof err), PULSE_OK);
    ck_assert_ptr_nonnull(strstr(err, "storage.colour"));
    ck_assert_ptr_nonnull(strstr(err, ":4:"));
    remove_tmpdir();
    pulse_config_fini(&cfg);
}
END_TEST

START_TEST(test_bad_values_are_refused_and_leave_the_setting_unchanged)
{
    struct pulse_config cfg;
    char err[256] = "";
    ck_assert_int_eq(pulse_config_init(&cfg), PULSE_OK);
    ck_assert_int_eq(pulse_config_set(&cfg, "storage.sync-mode", "sometimes", err, sizeof err), PULSE_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "storage.sync-mode"));
    ck_assert_str_eq(cfg.broker.sync_mode, "every-write");
    ck_assert_int_eq(pulse_config_set(&cfg, "topic-defaults.partitions", "0", err, sizeof err), PULSE_INVALID);
    ck_assert_int_eq(pulse_config_set(&cfg, "topic-defaults.partitions", "257", err, sizeof err), PULSE_INVALID);
    ck_assert_int_eq(pulse_config_set(&cfg, "topic-defaults.partitions", "2x", err, sizeof err), PULSE_INVALID);
    ck_assert_int_eq(cfg.broker.partitions, 1);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.max-body-bytes", "0", err, sizeof err), PULSE_INVALID);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.max-body-bytes", "12KB", err, sizeof err), PULSE_INVALID);
    ck_assert_uint_eq(cfg.server.max_body_bytes, 16u * 1024 * 1024);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.connection-timeout", "0", err, sizeof err), PULSE_INVALID);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.listen", "localhost", err, sizeof err), PULSE_INVALID);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.listen", "1.2.3.4:70000", err, sizeof err), PULSE_INVALID);
    ck_assert_str_eq(cfg.server.listen, "127.0.0.1:8080");
    ck_assert_int_eq(pulse_config_set(&cfg, "log.level", "loud", err, sizeof err), PULSE_INVALID);
    ck_assert_int_eq(pulse_config_set(&cfg, "storage.compaction-min-gain-ratio", "1.5", err, sizeof err),
                     PULSE_INVALID);
    ck_assert_int_eq(pulse_config_set(&cfg, "storage.segment-max-bytes", "1000", err, sizeof err), PULSE_INVALID);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.data-dir", "", err, sizeof err), PULSE_INVALID);
    /* and good values do take */
    ck_assert_int_eq(pulse_config_set(&cfg, "storage.sync-mode", "interval", err, sizeof err), PULSE_OK);
    ck_assert_str_eq(cfg.broker.sync_mode, "interval");
    ck_assert_int_eq(pulse_config_set(&cfg, "server.listen", "[::1]:0", err, sizeof err), PULSE_OK);
    pulse_config_fini(&cfg);
}
END_TEST

START_TEST(test_precedence_is_default_then_file_then_env_then_command_line)
{
    struct pulse_config cfg;
    char err[256] = "";
    make_tmpdir();
    ck_assert_int_eq(pulse_config_init(&cfg), PULSE_OK);
    const char *path = write_conf("# comment\n"
                                  "[storage]\n"
                                  "  sync-mode = interval\n"
                                  "segment-max-bytes = 1MiB\n"
                                  "\n"
                                  "[server]\n"
                                  "data-dir = \"/from/file\"\n"
                                  "max-body-bytes = 1KiB\n");
    ck_assert_int_eq(pulse_config_load_file(&cfg, path, err, sizeof err), PULSE_OK);
    ck_assert_str_eq(cfg.broker.sync_mode, "interval");
    ck_assert_str_eq(cfg.server.data_dir, "/from/file");
    ck_assert_uint_eq(cfg.storage.segment_max_bytes, 1024 * 1024);
    ck_assert_uint_eq(cfg.server.max_body_bytes, 1024);

    fake_env_name = "PULSE_STORAGE_SYNC_MODE";
    fake_env_value = "every-write";
    ck_assert_int_eq(pulse_config_load_env(&cfg, fake_getenv, err, sizeof err), PULSE_OK);
    ck_assert_str_eq(cfg.broker.sync_mode, "every-write");
    ck_assert_str_eq(cfg.server.data_dir, "/from/file");

    fake_env_name = "PULSE_SERVER_DATA_DIR";
    fake_env_value = "/from/env";
    ck_assert_int_eq(pulse_config_load_env(&cfg, fake_getenv, err, sizeof err), PULSE_OK);
    ck_assert_str_eq(cfg.server.data_dir, "/from/env");

    ck_assert_int_eq(pulse_config_set_assignment(&cfg, "server.data-dir=/from/cli", err, sizeof err), PULSE_OK);
    ck_assert_str_eq(cfg.server.data_dir, "/from/cli");

    fake_env_name = "PULSE_TOPIC_DEFAULTS_PARTITIONS";
    fake_env_value = "zero";
    ck_assert_int_ne(pulse_config_load_env(&cfg, fake_getenv, err, sizeof err), PULSE_OK);
    ck_assert_ptr_nonnull(strstr(err, "PULSE_TOPIC_DEFAULTS_PARTITIONS"));
    fake_env_name = NULL;
    pulse_config_fini(&cfg);
    remove_tmpdir();
}
END_TEST

START_TEST(test_malformed_config_file_lines_are_refused)
{
    struct pulse_config cfg;
    char err[256] = "";
    make_tmpdir();
    ck_assert_int_eq(pulse_config_init(&cfg), PULSE_OK);
    ck_assert_int_ne(pulse_config_load_file(&cfg, write_conf("listen = 1.2.3.4:5\n"), err, sizeof err), PULSE_OK);
    ck_assert_int_ne(pulse_config_load_file(&cfg, write_conf("[server\nlisten = 1.2.3.4:5\n"), err, sizeof err),
                     PULSE_OK);
    ck_assert_int_ne(pulse_config_load_file(&cfg, write_conf("[server]\njust words\n"), err, sizeof err), PULSE_OK);
    ck_assert_str_eq(cfg.server.listen, "127.0.0.1:8080");
    remove_tmpdir();
    ck_assert_int_eq(pulse_config_load_file(&cfg, "/nonexistent/pulse.conf", err, sizeof err), PULSE_IO);
    pulse_config_fini(&cfg);
}
END_TEST

START_TEST(test_topic_segment_bytes_follows_storage_until_set)
{
    struct pulse_config cfg;
    ck_assert_int_eq(pulse_config_init(&cfg), PULSE_OK);
    ck_assert_int_eq(pulse_config_set(&cfg, "storage.segment-max-bytes", "2MiB", NULL, 0), PULSE_OK);
    ck_assert_uint_eq(pulse_config_topic_segment_bytes(&cfg), 2 * 1024 * 1024);
    ck_assert_int_eq(pulse_config_set(&cfg, "topic-defaults.segment-bytes", "4KiB", NULL, 0), PULSE_OK);
    ck_assert_uint_eq(pulse_config_topic_segment_bytes(&cfg), 4096);
    pulse_config_fini(&cfg);
}
END_TEST

START_TEST(test_compaction_budget_keys_reach_the_broker_config)
{
    struct pulse_config cfg;
    struct pulse_broker_config bcfg;
    char err[256];
    ck_assert_int_eq(pulse_config_init(&cfg), PULSE_OK);
    ck_assert_int_eq(pulse_config_set(&cfg, "storage.compaction-max-bytes-per-pass", "64MiB", err, sizeof err),
                     PULSE_OK);
    ck_assert_int_eq(pulse_config_set(&cfg, "storage.compaction-max-pass-time", "250ms", err, sizeof err), PULSE_OK);
    memset(&bcfg, 0, sizeof bcfg);
    pulse_config_to_broker(&cfg, &bcfg);
    ck_assert_uint_eq(bcfg.compaction_max_bytes_per_pass, 64u * 1024 * 1024);
    ck_assert_int_eq(bcfg.compaction_max_pass_ms, 250);
    /* 0 turns the time bound off; a zero byte budget would stop every pass. */
    ck_assert_int_eq(pulse_config_set(&cfg, "storage.compaction-max-pass-time", "0", err, sizeof err), PULSE_OK);
    ck_assert_int_ne(pulse_config_set(&cfg, "storage.compaction-max-bytes-per-pass", "0", err, sizeof err), PULSE_OK);
    pulse_config_fini(&cfg);
}
END_TEST

START_TEST(test_descriptor_settings_are_fitted_into_the_process_limit)
{
    struct pulse_config cfg;
    char msg[768] = "";
    ck_assert_int_eq(pulse_config_init(&cfg), PULSE_OK);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.threads", "4", NULL, 0), PULSE_OK);
    /* Plenty: nothing changes. */
    ck_assert(!pulse_config_fit_fd_limit(&cfg, 1 << 20, msg, sizeof msg));
    ck_assert_int_eq(cfg.server.max_connections, 1000);
    ck_assert_int_eq(cfg.storage.segment_fd_cache, 1024);
    /* 512: both shrink, the result fits, and the message names the limit. */
    ck_assert(pulse_config_fit_fd_limit(&cfg, 512, msg, sizeof msg));
    int64_t reserved = PULSE_CONFIG_FD_RESERVED + PULSE_CONFIG_FD_META + 3 * 4;
    ck_assert_int_le(reserved + 2 * cfg.server.max_connections + cfg.storage.segment_fd_cache, 512);
    ck_assert_int_ge(cfg.storage.segment_fd_cache, 16);
    ck_assert_int_ge(cfg.server.max_connections, 100);
    ck_assert_msg(strstr(msg, "descriptor limit 512") != NULL && strstr(msg, "RLIMIT_NOFILE") != NULL, "%s", msg);
    /* Fitted values fit: a second pass changes nothing. */
    ck_assert(!pulse_config_fit_fd_limit(&cfg, 512, msg, sizeof msg));
    /* Absurdly low: the minimums, never zero. */
    ck_assert(pulse_config_fit_fd_limit(&cfg, 64, msg, sizeof msg));
    ck_assert_int_ge(cfg.server.max_connections, 1);
    ck_assert_int_ge(cfg.storage.segment_fd_cache, 16);
    pulse_config_fini(&cfg);
}
END_TEST

START_TEST(test_effective_config_json_lists_every_key_with_typed_values)
{
    struct pulse_config cfg;
    ck_assert_int_eq(pulse_config_init(&cfg), PULSE_OK);
    json_t *j = pulse_config_to_json(&cfg);
    ck_assert_ptr_nonnull(j);
    size_t keys = 0;
    for (size_t i = 0; pulse_config_table(i) != NULL; i++)
        keys += pulse_config_table(i)->n;
    ck_assert_uint_eq(json_object_size(j), keys);
    ck_assert_uint_ge(keys, 44);
    ck_assert_str_eq(json_string_value(json_object_get(j, "auth.token-file")), "");
    ck_assert_str_eq(json_string_value(json_object_get(j, "auth.public")), "dashboard,openapi");
    ck_assert_str_eq(json_string_value(json_object_get(j, "server.allow-insecure")), "off");
    ck_assert_str_eq(json_string_value(json_object_get(j, "server.access-log")), "off");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "groups.lease-default")), 30000);
    ck_assert_str_eq(json_string_value(json_object_get(j, "tls.cert-file")), "");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "limits.burst")), 1000);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "storage.segment-fd-cache")), 1024);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "storage.checkpoint-interval")), 1000);
    ck_assert_str_eq(json_string_value(json_object_get(j, "server.listen")), "127.0.0.1:8080");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "server.max-body-bytes")), 16 * 1024 * 1024);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "topic-defaults.segment-bytes")), 512 * 1024 * 1024);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "storage.sync-interval")), 1000);
    ck_assert(json_is_real(json_object_get(j, "storage.compaction-min-gain-ratio")));
    json_decref(j);
    pulse_config_fini(&cfg);
}
END_TEST

START_TEST(test_listen_address_splits_into_host_and_port)
{
    char host[64];
    uint16_t port = 0;
    bool v6 = true;
    ck_assert_int_eq(pulse_server_listen_split("127.0.0.1:8080", host, sizeof host, &port, &v6), PULSE_OK);
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_uint_eq(port, 8080);
    ck_assert(!v6);
    ck_assert_int_eq(pulse_server_listen_split("[::1]:99", host, sizeof host, &port, &v6), PULSE_OK);
    ck_assert_str_eq(host, "::1");
    ck_assert_uint_eq(port, 99);
    ck_assert(v6);
    ck_assert_int_ne(pulse_server_listen_split(":80", host, sizeof host, &port, &v6), PULSE_OK);
    ck_assert_int_ne(pulse_server_listen_split("::1:80", host, sizeof host, &port, &v6), PULSE_OK);
    ck_assert_int_ne(pulse_server_listen_split("h:", host, sizeof host, &port, &v6), PULSE_OK);
    ck_assert_int_ne(pulse_server_listen_split("h:65536", host, sizeof host, &port, &v6), PULSE_OK);
}
END_TEST

START_TEST(test_listen_value_is_checked_when_the_configuration_is_read)
{
    struct pulse_config cfg;
    char err[256] = "";

    ck_assert_int_eq(pulse_config_init(&cfg), PULSE_OK);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.listen", "127.0.0.1:70000", err, sizeof err), PULSE_INVALID);
    ck_assert_msg(strstr(err, "port must be 1..65535") != NULL, "%s", err);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.listen", "[::1]:123456789012345678901", err, sizeof err),
                     PULSE_INVALID);
    ck_assert_msg(strstr(err, "port must be 1..65535") != NULL, "%s", err);
    /* A name is not resolved: refused here (exit 2), not at bind (exit 1). */
    ck_assert_int_eq(pulse_config_set(&cfg, "server.listen", "no-such-host.invalid:80", err, sizeof err),
                     PULSE_INVALID);
    ck_assert_msg(strstr(err, "not an IP address") != NULL, "%s", err);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.listen", "[not-v6]:80", err, sizeof err), PULSE_INVALID);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.listen", "127.0.0.1:x", err, sizeof err), PULSE_INVALID);
    ck_assert_msg(strstr(err, "is not HOST:PORT") != NULL, "%s", err);
    ck_assert_str_eq(cfg.server.listen, "127.0.0.1:8080");
    ck_assert_int_eq(pulse_config_set(&cfg, "server.listen", "localhost:65535", err, sizeof err), PULSE_OK);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.listen", "0.0.0.0:1", err, sizeof err), PULSE_OK);
    ck_assert_int_eq(pulse_config_set(&cfg, "server.listen", "[::]:0", err, sizeof err), PULSE_OK);
    pulse_config_fini(&cfg);
}
END_TEST

/* ---- errmap ----------------------------------------------------------- */

START_TEST(test_every_status_has_its_own_http_mapping)
{
    const struct pulse_errmap_entry *fallback = pulse_errmap_lookup((pulse_status_t)-1);
    ck_assert_ptr_eq(fallback, pulse_errmap_lookup(PULSE_STATUS_COUNT));
    for (int st = 0; st < PULSE_STATUS_COUNT; st++) {
        const struct pulse_errmap_entry *e = pulse_errmap_lookup((pulse_status_t)st);
        ck_assert_msg(e != fallback, "status %s has no row in errmap.c", pulse_status_name((pulse_status_t)st));
        ck_assert_ptr_nonnull(e->code);
        ck_assert(e->http_status >= 200 && e->http_status <= 599);
        /* only OK is a success */
        ck_assert_int_eq(e->http_status < 300, st == PULSE_OK);
    }
}
END_TEST

START_TEST(test_api_statuses_map_to_the_contract_codes)
{
    static const struct {
        pulse_status_t st;
        unsigned http;
        const char *code;
    } want[] = {
        {PULSE_INVALID, 400, "invalid_request"},
        {PULSE_INVALID_NAME, 400, "invalid_name"},
        {PULSE_TOPIC_NOT_FOUND, 404, "topic_not_found"},
        {PULSE_PARTITION_NOT_FOUND, 404, "partition_not_found"},
        {PULSE_CURSOR_NOT_FOUND, 404, "cursor_not_found"},
        {PULSE_EXISTS, 409, "topic_exists"},
        {PULSE_TOO_LARGE, 413, "payload_too_large"},
        {PULSE_RANGE, 416, "offset_out_of_range"},
        {PULSE_NOSPACE, 507, "storage_full"},
        {PULSE_IO, 500, "storage_error"},
        {PULSE_FENCED, 503, "partition_fenced"},
        {PULSE_SHUTDOWN, 503, "unavailable"},
        {PULSE_NOT_FOUND, 404, "not_found"},
        {PULSE_NOT_SUPPORTED, 406, "not_acceptable"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct pulse_errmap_entry *e = pulse_errmap_lookup(want[i].st);
        ck_assert_uint_eq(e->http_status, want[i].http);
        ck_assert_str_eq(e->code, want[i].code);
    }
}
END_TEST

/* ---- JSON helpers ------------------------------------------------------ */

START_TEST(test_rfc3339_has_milliseconds_and_utc)
{
    char out[32];
    pulse_json_rfc3339_ms(0, out);
    ck_assert_str_eq(out, "1970-01-01T00:00:00.000Z");
    pulse_json_rfc3339_ms(1795982400123ll, out);
    ck_assert_str_eq(out, "2026-11-29T20:00:00.123Z");
}
END_TEST

START_TEST(test_error_body_has_the_contract_shape)
{
    json_t *e = pulse_json_error("topic_not_found", "topic \"x\" does not exist");
    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(pulse_json_dump(e, 0, &text, &len), PULSE_OK);
    const char *want = "{\"error\":{\"code\":\"topic_not_found\",\"message\":\"topic \\\"x\\\" does not exist\"}}";
    ck_assert_uint_eq(len, strlen(want));
    ck_assert(memcmp(text, want, len) == 0);
    pulse_free(text);
    json_decref(e);
}
END_TEST

/* ---- request helpers -------------------------------------------------- */

START_TEST(test_content_type_matches_ignoring_case_and_parameters)
{
    ck_assert(pulse_request_media_is("application/json", PULSE_MEDIA_JSON));
    ck_assert(pulse_request_media_is("Application/JSON; charset=utf-8", PULSE_MEDIA_JSON));
    ck_assert(pulse_request_media_is("  application/json ;charset=UTF-8", PULSE_MEDIA_JSON));
    ck_assert(!pulse_request_media_is("application/jsonx", PULSE_MEDIA_JSON));
    ck_assert(!pulse_request_media_is("text/plain", PULSE_MEDIA_JSON));
    ck_assert(!pulse_request_media_is("", PULSE_MEDIA_JSON));
    ck_assert(!pulse_request_media_is(NULL, PULSE_MEDIA_JSON));
    ck_assert(pulse_request_media_is("gzip", "gzip"));
}
END_TEST

START_TEST(test_accept_negotiation_prefers_the_first_acceptable_range)
{
    ck_assert_int_eq(pulse_request_accept(NULL, false), PULSE_ACCEPT_JSON);
    ck_assert_int_eq(pulse_request_accept("", false), PULSE_ACCEPT_JSON);
    ck_assert_int_eq(pulse_request_accept("application/json", false), PULSE_ACCEPT_JSON);
    ck_assert_int_eq(pulse_request_accept("*/*", false), PULSE_ACCEPT_JSON);
    ck_assert_int_eq(pulse_request_accept("application/*", false), PULSE_ACCEPT_JSON);
    ck_assert_int_eq(pulse_request_accept("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", false),
                     PULSE_ACCEPT_JSON);
    ck_assert_int_eq(pulse_request_accept("text/html", false), PULSE_ACCEPT_NONE);
    ck_assert_int_eq(pulse_request_accept("application/json;q=0", false), PULSE_ACCEPT_NONE);
    ck_assert_int_eq(pulse_request_accept("application/vnd.pulse.batches", false), PULSE_ACCEPT_NONE);
    ck_assert_int_eq(pulse_request_accept("application/vnd.pulse.batches", true), PULSE_ACCEPT_RAW);
    ck_assert_int_eq(pulse_request_accept("application/vnd.pulse.batches, application/json", true), PULSE_ACCEPT_RAW);
    ck_assert_int_eq(pulse_request_accept("application/json, application/vnd.pulse.batches", true), PULSE_ACCEPT_JSON);
    ck_assert_int_eq(pulse_request_accept("text/plain, application/json;q=0.5", false), PULSE_ACCEPT_JSON);
}
END_TEST

START_TEST(test_request_ids_are_validated_and_generated_as_16_hex)
{
    ck_assert(pulse_request_id_valid("abc-123"));
    ck_assert(pulse_request_id_valid("with space"));
    ck_assert(!pulse_request_id_valid(""));
    ck_assert(!pulse_request_id_valid(NULL));
    ck_assert(!pulse_request_id_valid("tab\there"));
    ck_assert(!pulse_request_id_valid("caf\xc3\xa9"));
    char longid[130];
    memset(longid, 'a', 128);
    longid[128] = '\0';
    ck_assert(pulse_request_id_valid(longid));
    longid[128] = 'a';
    longid[129] = '\0';
    ck_assert(!pulse_request_id_valid(longid));

    char a[17], b[17];
    pulse_request_id_generate(a);
    pulse_request_id_generate(b);
    ck_assert_uint_eq(strlen(a), 16);
    ck_assert_uint_eq(strspn(a, "0123456789abcdef"), 16);
    ck_assert_str_ne(a, b);
}
END_TEST

START_TEST(test_integers_are_parsed_strictly)
{
    int64_t v = 0;
    ck_assert_int_eq(pulse_request_parse_i64("42", 0, 100, &v), PULSE_OK);
    ck_assert_int_eq(v, 42);
    ck_assert_int_eq(pulse_request_parse_i64("-5", -10, 100, &v), PULSE_OK);
    ck_assert_int_eq(v, -5);
    ck_assert_int_eq(pulse_request_parse_i64("9223372036854775807", 0, INT64_MAX, &v), PULSE_OK);
    ck_assert_int_eq(v, INT64_MAX);
    ck_assert_int_ne(pulse_request_parse_i64("9223372036854775808", 0, INT64_MAX, &v), PULSE_OK);
    ck_assert_int_ne(pulse_request_parse_i64("-1", 0, 100, &v), PULSE_OK);
    ck_assert_int_ne(pulse_request_parse_i64("101", 0, 100, &v), PULSE_OK);
    ck_assert_int_ne(pulse_request_parse_i64("", 0, 100, &v), PULSE_OK);
    ck_assert_int_ne(pulse_request_parse_i64("+1", 0, 100, &v), PULSE_OK);
    ck_assert_int_ne(pulse_request_parse_i64(" 1", 0, 100, &v), PULSE_OK);
    ck_assert_int_ne(pulse_request_parse_i64("1x", 0, 100, &v), PULSE_OK);
    ck_assert_int_ne(pulse_request_parse_i64("0x10", 0, 100, &v), PULSE_OK);
    ck_assert_int_ne(pulse_request_parse_i64(NULL, 0, 100, &v), PULSE_OK);
}
END_TEST

/* gzip-compresses in into a new buffer. */
static uint8_t *gzip_bytes(const uint8_t *in, size_t n, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    ck_assert_int_eq(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&z, (uLong)n) + 64;
    uint8_t *out = pulse_malloc(cap);
    ck_assert_ptr_nonnull(out);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    *out_len = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

START_TEST(test_gzip_body_is_inflated_within_the_cap)
{
    uint8_t plain[50000];
    for (size_t i = 0; i < sizeof plain; i++)
        plain[i] = (uint8_t)("pulse records "[i % 14]);
    size_t glen = 0;
    uint8_t *gz = gzip_bytes(plain, sizeof plain, &glen);
    struct pulse_buf out;
    pulse_buf_init(&out, sizeof plain);
    ck_assert_int_eq(pulse_request_gunzip(gz, glen, &out, NULL, NULL), PULSE_OK);
    ck_assert_uint_eq(out.len, sizeof plain);
    ck_assert(memcmp(out.data, plain, sizeof plain) == 0);
    pulse_buf_fini(&out);

    /* one byte less room: refused as too large (a gzip bomb stops here) */
    pulse_buf_init(&out, sizeof plain - 1);
    ck_assert_int_eq(pulse_request_gunzip(gz, glen, &out, NULL, NULL), PULSE_TOO_LARGE);
    pulse_buf_fini(&out);
    pulse_free(gz);
}
END_TEST

START_TEST(test_corrupt_truncated_or_trailing_gzip_is_invalid)
{
    const char *msg = "hello, hello, hello, gzip";
    size_t glen = 0;
    uint8_t *gz = gzip_bytes((const uint8_t *)msg, strlen(msg), &glen);
    struct pulse_buf out;

    pulse_buf_init(&out, 1024);
    ck_assert_int_eq(pulse_request_gunzip(gz, glen - 3, &out, NULL, NULL), PULSE_INVALID);
    pulse_buf_fini(&out);

    uint8_t *longer = pulse_malloc(glen + 2);
    memcpy(longer, gz, glen);
    longer[glen] = 'x';
    longer[glen + 1] = 'y';
    pulse_buf_init(&out, 1024);
    ck_assert_int_eq(pulse_request_gunzip(longer, glen + 2, &out, NULL, NULL), PULSE_INVALID);
    pulse_buf_fini(&out);
    pulse_free(longer);

    gz[glen - 6] ^= 0xff; /* the CRC32 trailer */
    pulse_buf_init(&out, 1024);
    ck_assert_int_eq(pulse_request_gunzip(gz, glen, &out, NULL, NULL), PULSE_INVALID);
    pulse_buf_fini(&out);

    pulse_buf_init(&out, 1024);
    ck_assert_int_eq(pulse_request_gunzip((const uint8_t *)"not gzip at all", 15, &out, NULL, NULL), PULSE_INVALID);
    pulse_buf_fini(&out);
    pulse_buf_init(&out, 1024);
    ck_assert_int_eq(pulse_request_gunzip((const uint8_t *)"", 0, &out, NULL, NULL), PULSE_INVALID);
    pulse_buf_fini(&out);
    pulse_free(gz);
}
END_TEST

/* ---- router ----------------------------------------------------------- */

static int param_is(const struct pulse_route_param *p, const char *s)
{
    return p->p != NULL && p->len == strlen(s) && memcmp(p->p, s, p->len) == 0;
}

START_TEST(test_paths_map_to_route_templates_and_parameters)
{
    struct pulse_route_match m;
    ck_assert_int_eq(pulse_router_match("/v1/topics", &m), PULSE_OK);
    ck_assert_int_eq(m.route, PULSE_ROUTE_TOPICS);
    ck_assert_int_eq(pulse_router_match("/v1/topics/orders", &m), PULSE_OK);
    ck_assert_int_eq(m.route, PULSE_ROUTE_TOPIC);
    ck_assert(param_is(&m.topic, "orders"));
    ck_assert_int_eq(pulse_router_match("/v1/topics/orders/partitions/12/records", &m), PULSE_OK);
    ck_assert_int_eq(m.route, PULSE_ROUTE_FETCH);
    ck_assert(param_is(&m.topic, "orders"));
    ck_assert(param_is(&m.partition, "12"));
    ck_assert_int_eq(pulse_router_match("/v1/consumers/c1/cursors/t/3", &m), PULSE_OK);
    ck_assert_int_eq(m.route, PULSE_ROUTE_CURSOR);
    ck_assert(param_is(&m.consumer, "c1"));
    ck_assert(param_is(&m.topic, "t"));
    ck_assert(param_is(&m.partition, "3"));
    ck_assert_str_eq(pulse_router_template(m.route), "/v1/consumers/{consumer}/cursors/{topic}/{partition}");
    /* One trailing slash is tolerated; a doubled one is not. */
    ck_assert_int_eq(pulse_router_match("/v1/topics/", &m), PULSE_OK);
    ck_assert_int_eq(m.route, PULSE_ROUTE_TOPICS);
    ck_assert_int_eq(pulse_router_match("/v1/topics/orders/partitions/3/", &m), PULSE_OK);
    ck_assert_int_eq(m.route, PULSE_ROUTE_PARTITION);
    ck_assert(param_is(&m.partition, "3"));
    ck_assert_int_eq(pulse_router_match("/v1/topics/orders/partitions", &m), PULSE_OK);
    ck_assert_int_eq(m.route, PULSE_ROUTE_PARTITIONS);
    ck_assert_int_eq(pulse_router_match("/v1/topics//", &m), PULSE_NOT_FOUND);
    ck_assert_int_eq(pulse_router_match("/v1//topics", &m), PULSE_NOT_FOUND);
    ck_assert_int_eq(pulse_router_match("/v1/topics/a/b", &m), PULSE_NOT_FOUND);
    ck_assert_int_eq(pulse_router_match("//", &m), PULSE_NOT_FOUND);
    ck_assert_int_eq(m.route, PULSE_ROUTE_NONE);
    ck_assert_str_eq(pulse_router_template(PULSE_ROUTE_NONE), "unmatched");
}
END_TEST

START_TEST(test_allow_header_lists_the_route_methods)
{
    char allow[64];
    pulse_router_allow_header(PULSE_ROUTE_TOPICS, allow, sizeof allow);
    ck_assert_str_eq(allow, "GET, POST, HEAD, OPTIONS");
    pulse_router_allow_header(PULSE_ROUTE_TOPIC, allow, sizeof allow);
    ck_assert_str_eq(allow, "GET, PATCH, DELETE, HEAD, OPTIONS");
    pulse_router_allow_header(PULSE_ROUTE_PUBLISH, allow, sizeof allow);
    ck_assert_str_eq(allow, "GET, POST, HEAD, OPTIONS");
    ck_assert(pulse_router_allows(PULSE_ROUTE_PUBLISH, PULSE_METHOD_POST));
    /* GET on a topic's records is the topic-wide read. */
    ck_assert(pulse_router_allows(PULSE_ROUTE_PUBLISH, PULSE_METHOD_GET));
    ck_assert(!pulse_router_allows(PULSE_ROUTE_PUBLISH, PULSE_METHOD_PUT));
    ck_assert(pulse_router_allows(PULSE_ROUTE_EVENTS, PULSE_METHOD_GET));
    ck_assert(!pulse_router_allows(PULSE_ROUTE_EVENTS, PULSE_METHOD_POST));
    /* HEAD wherever GET is (with GET's query), OPTIONS everywhere. */
    ck_assert_int_eq(pulse_router_method("HEAD"), PULSE_METHOD_HEAD);
    ck_assert_int_eq(pulse_router_method("OPTIONS"), PULSE_METHOD_OPTIONS);
    ck_assert_int_eq(pulse_router_method("TRACE"), PULSE_METHOD_OTHER);
    ck_assert(pulse_router_allows(PULSE_ROUTE_HEALTHZ, PULSE_METHOD_HEAD));
    ck_assert(pulse_router_allows(PULSE_ROUTE_PUBLISH, PULSE_METHOD_HEAD));
    ck_assert(!pulse_router_allows(PULSE_ROUTE_CONSUMER, PULSE_METHOD_HEAD));
    ck_assert(pulse_router_allows(PULSE_ROUTE_PUBLISH, PULSE_METHOD_OPTIONS));
    ck_assert(!pulse_router_allows(PULSE_ROUTE_HEALTHZ, PULSE_METHOD_OTHER));
    ck_assert_int_ge(pulse_router_query_index(PULSE_ROUTE_FETCH, PULSE_METHOD_HEAD, "offset"), 0);
    ck_assert_int_eq(pulse_router_query_index(PULSE_ROUTE_FETCH, PULSE_METHOD_OPTIONS, "offset"), -1);
    ck_assert(pulse_router_is_write(PULSE_METHOD_DELETE) && !pulse_router_is_write(PULSE_METHOD_HEAD));
    ck_assert_str_eq(
        pulse_router_request_headers(PULSE_ROUTE_PUBLISH),
        "Accept, Authorization, Content-Type, Content-Encoding, Idempotency-Key, Last-Event-ID, X-Request-Id");
    ck_assert_str_eq(pulse_router_request_headers(PULSE_ROUTE_EVENTS),
                     "Accept, Authorization, Last-Event-ID, X-Request-Id");
    ck_assert_str_eq(pulse_router_request_headers(PULSE_ROUTE_TOPICS),
                     "Accept, Authorization, Content-Type, Content-Encoding, Last-Event-ID, X-Request-Id");
    ck_assert_str_eq(pulse_router_request_headers(PULSE_ROUTE_FETCH),
                     "Accept, Authorization, Last-Event-ID, X-Request-Id");
    ck_assert_str_eq(pulse_router_request_headers(PULSE_ROUTE_CONSUMER), "Accept, Authorization, X-Request-Id");
    ck_assert_int_eq(pulse_router_method("PATCH"), PULSE_METHOD_PATCH);
}
END_TEST

START_TEST(test_each_route_accepts_only_its_query_parameters)
{
    const char *fetch[] = {"offset", "consumer", "max_records", "max_bytes", "wait_ms", "format"};
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(pulse_router_query_index(PULSE_ROUTE_FETCH, PULSE_METHOD_GET, fetch[i]), i);
    ck_assert_int_eq(pulse_router_query_index(PULSE_ROUTE_FETCH, PULSE_METHOD_GET, "ofset"), -1);
    ck_assert_int_eq(pulse_router_query_index(PULSE_ROUTE_FETCH, PULSE_METHOD_GET, "Offset"), -1);
    ck_assert_int_eq(pulse_router_query_index(PULSE_ROUTE_FETCH, PULSE_METHOD_GET, ""), -1);
    ck_assert_int_eq(pulse_router_query_index(PULSE_ROUTE_FETCH, PULSE_METHOD_POST, "offset"), -1);
    ck_assert_int_eq(pulse_router_query_index(PULSE_ROUTE_PUBLISH, PULSE_METHOD_POST, "key"), 0);
    ck_assert_int_eq(pulse_router_query_index(PULSE_ROUTE_PUBLISH, PULSE_METHOD_POST, "partition"), 1);
    ck_assert_int_eq(pulse_router_query_index(PULSE_ROUTE_PUBLISH, PULSE_METHOD_POST, "kee"), -1);
    ck_assert_int_ge(pulse_router_query_index(PULSE_ROUTE_PUBLISH, PULSE_METHOD_GET, "positions"), 0);
    ck_assert_int_eq(pulse_router_query_index(PULSE_ROUTE_PUBLISH, PULSE_METHOD_POST, "positions"), -1);
    ck_assert_int_ge(pulse_router_query_index(PULSE_ROUTE_EVENTS, PULSE_METHOD_GET, "last_event_id"), 0);
    ck_assert_int_ge(pulse_router_query_index(PULSE_ROUTE_FETCH, PULSE_METHOD_GET, "timestamp"), 0);
    /* Routes without query parameters take none. */
    for (int r = 0; r <= PULSE_ROUTE_NONE; r++)
        for (int m = 0; m < PULSE_METHOD_COUNT; m++)
            if (r != PULSE_ROUTE_FETCH && r != PULSE_ROUTE_PUBLISH && r != PULSE_ROUTE_EVENTS)
                ck_assert_int_eq(pulse_router_query_index((enum pulse_route)r, (enum pulse_method)m, "offset"), -1);
}
END_TEST

/* ---- memory budget ---------------------------------------------------- */

START_TEST(test_budget_never_passes_its_limit_and_counts_refusals)
{
    struct pulse_budget b;
    pulse_budget_init(&b, 100);
    ck_assert(pulse_budget_reserve(&b, 60));
    ck_assert(pulse_budget_reserve(&b, 40));
    ck_assert(pulse_budget_reserve(&b, 0));
    ck_assert(!pulse_budget_reserve(&b, 1));
    ck_assert_uint_eq(pulse_budget_used(&b), 100);
    ck_assert_uint_eq(pulse_budget_refusals(&b), 1);
    pulse_budget_release(&b, 60);
    ck_assert(!pulse_budget_reserve(&b, 61));
    ck_assert(pulse_budget_reserve(&b, 60));
    ck_assert(!pulse_budget_reserve(&b, UINT64_MAX));
    pulse_budget_release(&b, 100);
    ck_assert_uint_eq(pulse_budget_used(&b), 0);
    ck_assert_uint_eq(pulse_budget_refusals(&b), 3);
}
END_TEST

/* ---- request-head deadline -------------------------------------------- */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* True when the peer of sv[0] was shut down (reads end-of-file). */
static bool peer_shut(int fd)
{
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
    if (n < 0)
        ck_assert_int_eq(errno, EAGAIN);
    return n == 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Asserts that fd's peer is still open when less than ms have passed since
 * t0. The time is read after the check, so a stall of this thread on a
 * loaded machine can only skip the assertion, never fail it. */
static void assert_open_before(int fd, int64_t t0, int64_t ms)
{
    bool shut = peer_shut(fd);
    if (now_ms() - t0 < ms)
        ck_assert(!shut);
}

/* Asserts that fd's peer is shut within 5 s (the cut is made by the conns'
 * own thread, which a loaded machine may run late). */
static void assert_shut_soon(int fd)
{
    for (int i = 0; i < 500 && !peer_shut(fd); i++)
        sleep_ms(10);
    ck_assert(peer_shut(fd));
}

/* Head deadline 100 ms; body windows of 400 ms that must bring 100 bytes
 * (250 bytes/s) to earn another. */
static struct pulse_conns *conns_for_test(void)
{
    struct pulse_conns *cs = NULL;
    const struct pulse_conns_limits limits = {100, 400, 250, 0};
    ck_assert_int_eq(pulse_conns_create(&limits, &cs), PULSE_OK);
    return cs;
}

START_TEST(test_a_head_that_misses_its_deadline_gets_its_socket_shut)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct pulse_conns *cs = conns_for_test();
    int64_t t0 = now_ms();
    struct pulse_conn *c = pulse_conns_opened(cs, sv[0]);
    ck_assert_ptr_nonnull(c);
    /* Data keeps coming: it does not matter, only the head counts. */
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(write(sv[1], "x", 1), 1);
        sleep_ms(10);
    }
    assert_open_before(sv[1], t0, 100);
    assert_shut_soon(sv[1]);
    ck_assert(!pulse_conns_head_arrived(cs, c)); /* too late */
    struct pulse_conns_counts n;
    pulse_conns_stats(cs, &n);
    ck_assert_uint_eq(n.open, 1);
    ck_assert_uint_eq(n.head_timeouts, 1);
    ck_assert_uint_eq(n.body_timeouts, 0);
    pulse_conns_closed(cs, c);
    pulse_conns_stats(cs, &n);
    ck_assert_uint_eq(n.open, 0);
    pulse_conns_destroy(cs);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

START_TEST(test_a_head_in_time_stops_the_deadline_until_the_request_is_done)
{
    int a[2], b[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
    struct pulse_conns *cs = conns_for_test();
    struct pulse_conn *ca = pulse_conns_opened(cs, a[0]);
    struct pulse_conn *cb = pulse_conns_opened(cs, b[0]);
    ck_assert(pulse_conns_head_arrived(cs, ca));
    ck_assert(pulse_conns_body_done(cs, ca));
    sleep_ms(300);
    /* a is in a request (as long as it takes); b never sent a head. */
    assert_shut_soon(b[1]);
    ck_assert(!peer_shut(a[1]));
    /* Answered and kept alive: the next head is due 100 ms from now. */
    int64_t t0 = now_ms();
    pulse_conns_request_done(cs, ca);
    sleep_ms(50);
    assert_open_before(a[1], t0, 100);
    assert_shut_soon(a[1]);
    /* The per-request target notes: none seen yet, then kept per entry. */
    ck_assert_uint_eq(pulse_conns_target(ca)->raw_len, SIZE_MAX);
    ck_assert(!pulse_conns_target(ca)->decoded_bad);
    pulse_conns_target(ca)->decoded_bad = true;
    ck_assert(pulse_conns_target(ca)->decoded_bad);
    ck_assert(!pulse_conns_target(cb)->decoded_bad);
    pulse_conns_closed(cs, ca);
    pulse_conns_closed(cs, cb);
    pulse_conns_destroy(cs);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
}
END_TEST

START_TEST(test_a_trickling_body_is_cut_at_the_end_of_its_window)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct pulse_conns *cs = conns_for_test();
    struct pulse_conn *c = pulse_conns_opened(cs, sv[0]);
    int64_t t0 = now_ms();
    ck_assert(pulse_conns_head_arrived(cs, c));
    /* Far less than 100 bytes per 400 ms window, however steadily. */
    for (int i = 0; i < 10; i++) {
        pulse_conns_body_bytes(c, 2);
        sleep_ms(10);
    }
    assert_open_before(sv[1], t0, 400);
    assert_shut_soon(sv[1]);
    ck_assert(!pulse_conns_body_done(cs, c)); /* too late: never act on it */
    struct pulse_conns_counts n;
    pulse_conns_stats(cs, &n);
    ck_assert_uint_eq(n.head_timeouts, 0);
    ck_assert_uint_eq(n.body_timeouts, 1);
    pulse_conns_closed(cs, c);
    pulse_conns_destroy(cs);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

START_TEST(test_a_body_at_the_minimum_rate_earns_more_windows)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct pulse_conns *cs = conns_for_test();
    struct pulse_conn *c = pulse_conns_opened(cs, sv[0]);
    ck_assert(pulse_conns_head_arrived(cs, c));
    /* 50 bytes every 20 ms (2,500 bytes/s) for 1.2 s: three windows, each
     * bringing about 1,000 bytes. */
    for (int i = 0; i < 60; i++) {
        pulse_conns_body_bytes(c, 50);
        sleep_ms(20);
    }
    ck_assert(!peer_shut(sv[1]));
    /* Then it stops: at most one more window, which brings nothing. */
    sleep_ms(1000);
    assert_shut_soon(sv[1]);
    pulse_conns_closed(cs, c);
    pulse_conns_destroy(cs);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

START_TEST(test_without_a_minimum_rate_the_body_is_due_in_one_window)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct pulse_conns *cs = NULL;
    const struct pulse_conns_limits limits = {100, 200, 0, 0};
    ck_assert_int_eq(pulse_conns_create(&limits, &cs), PULSE_OK);
    struct pulse_conn *c = pulse_conns_opened(cs, sv[0]);
    ck_assert(pulse_conns_head_arrived(cs, c));
    for (int i = 0; i < 20; i++) {
        pulse_conns_body_bytes(c, 1000000);
        sleep_ms(15);
    }
    assert_shut_soon(sv[1]);
    pulse_conns_closed(cs, c);
    pulse_conns_destroy(cs);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

START_TEST(test_a_full_server_cuts_slow_connections_after_a_second)
{
    int a[2], b[2], f[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, f), 0);
    struct pulse_conns *cs = NULL;
    /* Timeouts of 20 s, a limit of 3 connections. */
    const struct pulse_conns_limits limits = {20000, 20000, 1000, 3};
    ck_assert_int_eq(pulse_conns_create(&limits, &cs), PULSE_OK);
    struct pulse_conn *ca = pulse_conns_opened(cs, a[0]); /* will trickle its body */
    struct pulse_conn *cb = pulse_conns_opened(cs, b[0]); /* will trickle its head */
    ck_assert(pulse_conns_head_arrived(cs, ca));
    /* Two of three slots: nothing is cut before its timeout. */
    sleep_ms(1300);
    ck_assert(!peer_shut(a[1]));
    ck_assert(!peer_shut(b[1]));
    /* The third fills the server: the slow ones go within about a second,
     * the fast body (2,000 bytes/s, above 1,000) stays. */
    struct pulse_conn *cf = pulse_conns_opened(cs, f[0]);
    ck_assert(pulse_conns_head_arrived(cs, cf));
    for (int i = 0; i < 5; i++) {
        pulse_conns_body_bytes(cf, 200);
        pulse_conns_body_bytes(ca, 1);
        sleep_ms(100);
    }
    assert_shut_soon(a[1]);
    assert_shut_soon(b[1]);
    for (int i = 0; i < 10; i++) {
        pulse_conns_body_bytes(cf, 200);
        sleep_ms(100);
    }
    ck_assert(!peer_shut(f[1]));
    struct pulse_conns_counts n;
    pulse_conns_stats(cs, &n);
    ck_assert_uint_eq(n.head_timeouts, 1);
    ck_assert_uint_eq(n.body_timeouts, 1);
    ck_assert_uint_eq(n.busy_closes, 2);
    pulse_conns_closed(cs, ca);
    pulse_conns_closed(cs, cb);
    pulse_conns_closed(cs, cf);
    pulse_conns_destroy(cs);
    int fds[] = {a[0], a[1], b[0], b[1], f[0], f[1]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        close(fds[i]);
}
END_TEST

static Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, test_config_defaults_match_the_documented_values);
    tcase_add_test(tc, test_sizes_accept_bytes_and_binary_units_only);
    tcase_add_test(tc, test_durations_are_milliseconds_unless_suffixed);
    tcase_add_test(tc, test_unknown_key_is_refused_and_named);
    tcase_add_test(tc, test_bad_values_are_refused_and_leave_the_setting_unchanged);
    tcase_add_test(tc, test_precedence_is_default_then_file_then_env_then_command_line);
    tcase_add_test(tc, test_malformed_config_file_lines_are_refused);
    tcase_add_test(tc, test_topic_segment_bytes_follows_storage_until_set);
    tcase_add_test(tc, test_descriptor_settings_are_fitted_into_the_process_limit);
    tcase_add_test(tc, test_effective_config_json_lists_every_key_with_typed_values);
    tcase_add_test(tc, test_compaction_budget_keys_reach_the_broker_config);
    tcase_add_test(tc, test_listen_address_splits_into_host_and_port);
    tcase_add_test(tc, test_listen_value_is_checked_when_the_configuration_is_read);
    suite_add_tcase(s, tc);
    tc = tcase_create("errmap");
    tcase_add_test(tc, test_every_status_has_its_own_http_mapping);
    tcase_add_test(tc, test_api_statuses_map_to_the_contract_codes);
    suite_add_tcase(s, tc);
    tc = tcase_create("json");
    tcase_add_test(tc, test_rfc3339_has_milliseconds_and_utc);
    tcase_add_test(tc, test_error_body_has_the_contract_shape);
    suite_add_tcase(s, tc);
    tc = tcase_create("request");
    tcase_add_test(tc, test_content_type_matches_ignoring_case_and_parameters);
    tcase_add_test(tc, test_accept_negotiation_prefers_the_first_acceptable_range);
    tcase_add_test(tc, test_request_ids_are_validated_and_generated_as_16_hex);
    tcase_add_test(tc, test_integers_are_parsed_strictly);
    tcase_add_test(tc, test_gzip_body_is_inflated_within_the_cap);
    tcase_add_test(tc, test_corrupt_truncated_or_trailing_gzip_is_invalid);
    suite_add_tcase(s, tc);
    tc = tcase_create("router");
    tcase_add_test(tc, test_paths_map_to_route_templates_and_parameters);
    tcase_add_test(tc, test_allow_header_lists_the_route_methods);
    tcase_add_test(tc, test_each_route_accepts_only_its_query_parameters);
    suite_add_tcase(s, tc);
    tc = tcase_create("limits");
    tcase_add_test(tc, test_budget_never_passes_its_limit_and_counts_refusals);
    tcase_add_test(tc, test_a_head_that_misses_its_deadline_gets_its_socket_shut);
    tcase_add_test(tc, test_a_head_in_time_stops_the_deadline_until_the_request_is_done);
    tcase_add_test(tc, test_a_trickling_body_is_cut_at_the_end_of_its_window);
    tcase_add_test(tc, test_a_body_at_the_minimum_rate_earns_more_windows);
    tcase_add_test(tc, test_without_a_minimum_rate_the_body_is_due_in_one_window);
    tcase_add_test(tc, test_a_full_server_cuts_slow_connections_after_a_second);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(http_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
