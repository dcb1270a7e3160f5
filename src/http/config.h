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

#include "common/status.h"

struct json_t;
struct pulse_broker_config;

struct pulse_config {
    /* [server] */
    char *listen;   /* "HOST:PORT" or "[V6]:PORT" */
    char *data_dir;
    uint64_t max_body_bytes;
    int64_t max_records_per_request;
    int64_t max_connections;
    int64_t max_connections_per_ip; /* 0 = no per-address limit */
    int64_t connection_timeout_ms;
    int64_t header_timeout_ms; /* a request head must arrive within this */
    int64_t body_timeout_ms;   /* a request body must arrive within this... */
    uint64_t body_min_rate;    /* ...or keep this many bytes per second; 0 = no extension */
    uint64_t memory_budget;    /* in-flight request/answer memory, all requests */
    int64_t threads; /* 0 = number of online cores */
    /* [storage] */
    uint64_t segment_max_bytes;
    uint64_t index_interval_bytes;
    char *sync_mode; /* "every-write" | "interval" */
    int64_t sync_interval_ms;
    int64_t retention_interval_ms;
    int64_t compaction_interval_ms;
    int64_t compaction_tombstone_retention_ms;
    double compaction_min_gain_ratio;
    uint64_t compaction_max_bytes_per_pass;
    int64_t compaction_max_pass_ms; /* 0 = no time bound */
    int64_t segment_fd_cache;
    int64_t checkpoint_interval_ms; /* durable-end checkpoint of a partition at most this often */
    /* [topic-defaults] */
    int64_t partitions;
    int64_t retention_ms;
    uint64_t retention_bytes;
    uint64_t segment_bytes; /* 0 until set: follows storage.segment-max-bytes */
    /* [log] */
    char *level;
};

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

/* Parsers used by pulse_config_set, exposed for reuse and tests. */
pulse_status_t pulse_config_parse_size(const char *text, uint64_t *out);
pulse_status_t pulse_config_parse_duration_ms(const char *text, int64_t *out);

/*
 * Splits server.listen into a host and a port. host (hostlen bytes) gets
 * the address without brackets; *is_v6 tells whether it was bracketed.
 * PULSE_INVALID when malformed.
 */
pulse_status_t pulse_config_split_listen(const char *listen, char *host, size_t hostlen, uint16_t *port,
                                         bool *is_v6);

/*
 * Checks a server.listen value the way pulse_config_set does: HOST:PORT
 * with a port in 0..65535 (0 picks a free port; otherwise "port must be
 * 1..65535") and a host that is an IPv4 address, a bracketed IPv6 address
 * or localhost (names are not resolved). PULSE_INVALID with a message
 * naming server.listen.
 */
pulse_status_t pulse_config_check_listen(const char *listen, char *errbuf, size_t errlen);

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
