/* SPDX-License-Identifier: MIT */
/*
 * server_settings.h - the settings of pulsed's HTTP server ([server]): the
 * listening address, the data directory the process serves, and the
 * limits on requests, connections, timeouts, memory and threads.
 *
 * The table (common/settings.h) declares each key with its default,
 * bounds and a one-line description; docs/Configuration.md and
 * conf/pulse.conf describe the same keys, and make check holds them to it.
 *
 * Thread: any. Locks: none.
 */
#ifndef PULSE_HTTP_SERVER_SETTINGS_H
#define PULSE_HTTP_SERVER_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_settings_table;

struct pulse_server_settings {
    char *listen; /* "HOST:PORT" or "[V6]:PORT" */
    char *data_dir;
    uint64_t max_body_bytes;
    int64_t max_records_per_request;
    int64_t max_connections;
    int64_t max_connections_per_ip; /* 0 = no per-address limit */
    int64_t connection_timeout_ms;
    int64_t header_timeout_ms;    /* a request head must arrive within this */
    int64_t body_timeout_ms;      /* a request body must arrive within this... */
    uint64_t body_min_rate;       /* ...or keep this many bytes per second; 0 = no extension */
    uint64_t memory_budget;       /* in-flight request/answer memory, all requests */
    int64_t threads;              /* 0 = number of online cores */
    char *cors_origins;           /* comma-separated origins or "*"; "" = CORS off (http/cors.h) */
    char *cors_credentials;       /* "on": Access-Control-Allow-Credentials; "off" */
    int64_t stream_max;           /* event streams at once (h_stream.c) */
    int64_t stream_heartbeat_ms;  /* comment line on an idle stream */
    uint64_t stream_buffer_bytes; /* per stream: its buffer and socket send buffer */
    char *allow_insecure;         /* "on": serve a non-loopback address without tokens (warned at start) */
    char *access_log;             /* "on": one info line per request (server_access.c) */
};

/* The table of the keys above (static storage). */
const struct pulse_settings_table *pulse_server_settings(void);

/*
 * Splits server.listen into a host and a port. host (hostlen bytes) gets
 * the address without brackets; *is_v6 tells whether it was bracketed.
 * PULSE_INVALID when malformed.
 */
pulse_status_t pulse_server_listen_split(const char *listen, char *host, size_t hostlen, uint16_t *port, bool *is_v6);

/*
 * Checks a server.listen value, as setting the key does: HOST:PORT with a
 * port in 0..65535 (0 picks a free port; otherwise "port must be
 * 1..65535") and a host that is an IPv4 address, a bracketed IPv6 address
 * or localhost (names are not resolved). PULSE_INVALID with a message
 * naming server.listen.
 */
pulse_status_t pulse_server_listen_check(const char *listen, char *errbuf, size_t errlen);

#endif
