/* SPDX-License-Identifier: MIT */
/*
 * config.h - the process configuration of pulsed.
 *
 * Every setting is a "section.key" with a default, and may be set by a
 * config file (INI style: "[section]" lines, "key = value" lines, "#"
 * comments), by the environment (PULSE_<SECTION>_<KEY>, upper case, '-' as
 * '_') and by the command line ("-o section.key=value", --listen,
 * --data-dir). Later sources win: default < file < environment < command
 * line. An unknown key or a bad value is refused with a message that names
 * the key; pulsed then exits with status 2.
 *
 * Value syntax: sizes are bytes, or a number with B, KiB, MiB or GiB;
 * durations are milliseconds, or a number with ms, s, m, h or d.
 *
 * Each layer declares its own keys (name, type, default, bounds, a line of
 * description) in a table over a struct of its own (common/settings.h):
 * the HTTP server (http/server_settings.h), the storage engine
 * (storage/store_settings.h), the broker (broker/broker_settings.h) and
 * the log (common/log.h). struct pulse_config is those structs side by
 * side; this module only reads files, the environment and the command line
 * and hands each key to the table that declares it.
 *
 * The struct is a plain value (like struct pulse_buf): callers read the
 * fields; only these functions write them. The string fields are owned by
 * the struct and freed by pulse_config_fini.
 *
 * Thread: any; a struct is filled by one thread (main, at start-up) and
 * only read afterwards. Locks: none.
 */
#ifndef PULSE_HTTP_CONFIG_H
#define PULSE_HTTP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/broker_settings.h"
#include "common/log.h"
#include "common/status.h"
#include "http/ratelimit.h"
#include "http/server_settings.h"
#include "kafka/kafka_settings.h"
#include "http/tls_settings.h"

struct json_t;
struct pulse_broker_config;
struct pulse_settings_table;

struct pulse_config {
    struct pulse_server_settings server; /* [server] */
    struct pulse_store_settings storage; /* [storage]: the engine's own keys */
    struct pulse_broker_settings broker; /* [storage]: sync and maintenance pacing; [topic-defaults] */
    struct pulse_log_settings log;       /* [log] */
    struct pulse_kafka_settings kafka;   /* [kafka]: the Kafka backend */
    struct pulse_tls_settings tls;       /* [tls]: HTTPS (tls_settings.h) */
    struct pulse_limits_settings limits; /* [limits]: rates per client (ratelimit.h) */
};

/* The i-th layer's table (0, 1, ...), in the order keys are looked up,
 * listed and dumped; NULL past the last. Thread: any. */
const struct pulse_settings_table *pulse_config_table(size_t i);

/*
 * Fills cfg with the defaults. PULSE_NOMEM on failure (cfg is then
 * finalised already). Thread: any.
 */
pulse_status_t pulse_config_init(struct pulse_config *cfg);

/* Frees the strings. Safe on a zeroed or finalised struct. */
void pulse_config_fini(struct pulse_config *cfg);

/*
 * Sets one key from text, e.g. ("storage.sync-mode", "interval").
 * PULSE_NOT_FOUND for an unknown key, PULSE_INVALID for a bad value;
 * errbuf (nullable) gets a message naming the key. cfg is unchanged on
 * failure.
 */
pulse_status_t pulse_config_set(struct pulse_config *cfg, const char *key, const char *value, char *errbuf,
                                size_t errlen);

/* Parses "section.key=value" (the -o argument) and sets it. */
pulse_status_t pulse_config_set_assignment(struct pulse_config *cfg, const char *assignment, char *errbuf,
                                           size_t errlen);

/*
 * Reads an INI-style file and sets every key in it. PULSE_IO if it cannot be
 * read; otherwise as pulse_config_set, with the file name and line number in
 * errbuf.
 */
pulse_status_t pulse_config_load_file(struct pulse_config *cfg, const char *path, char *errbuf, size_t errlen);

/*
 * Sets every key whose PULSE_<SECTION>_<KEY> variable is present in the
 * environment. Other PULSE_* variables are ignored. getenv_fn (nullable,
 * default getenv) lets tests supply their own environment.
 */
typedef const char *(*pulse_config_getenv_fn)(const char *name);
pulse_status_t pulse_config_load_env(struct pulse_config *cfg, pulse_config_getenv_fn getenv_fn, char *errbuf,
                                     size_t errlen);

/*
 * Fits the settings that take file descriptors into the process limit
 * nofile (RLIMIT_NOFILE), by the formula of docs/Operations.md
 * "Descriptor budget":
 *   reserved (PULSE_CONFIG_FD_RESERVED + 3 per HTTP thread + the metadata
 *   store's PULSE_CONFIG_FD_META) + 2 per connection + the segment cache.
 * When the configured values need more, server.max-connections and
 * storage.segment-fd-cache are lowered to fit (the cache to at most a
 * quarter of what is left, never below 16) and msg (msglen bytes) says what
 * was done; returns true then. Thread: the caller's, before the server and
 * broker start.
 */
#define PULSE_CONFIG_FD_RESERVED 64
#define PULSE_CONFIG_FD_META 80
bool pulse_config_fit_fd_limit(struct pulse_config *cfg, uint64_t nofile, char *msg, size_t msglen);

/* Fills the broker's settings from cfg (after pulse_broker_config_init). */
void pulse_config_to_broker(const struct pulse_config *cfg, struct pulse_broker_config *bcfg);

/* The effective segment size for new topics. */
uint64_t pulse_config_topic_segment_bytes(const struct pulse_config *cfg);

/*
 * A new JSON object {"section.key": value, ...} of the effective
 * configuration (sizes in bytes, durations in ms). NULL on NOMEM. The caller
 * owns the reference (json_decref).
 */
struct json_t *pulse_config_to_json(const struct pulse_config *cfg);

#endif
