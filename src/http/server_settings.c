/* SPDX-License-Identifier: MIT */
/*
 * server_settings.c - the HTTP server's keys (server_settings.h).
 */
#include "http/server_settings.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/settings.h"
#include "http/cors.h"

#define F(field) offsetof(struct pulse_server_settings, field)
#define GIB (1024ll * 1024 * 1024)
#define DAY_MS (86400000ll)

pulse_status_t pulse_server_listen_split(const char *listen, char *host, size_t hostlen, uint16_t *port, bool *is_v6)
{
    const char *colon = NULL;
    const char *h = listen;
    size_t hlen = 0;
    bool v6 = false;
    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (close == NULL || close[1] != ':')
            return PULSE_INVALID;
        h = listen + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
        v6 = true;
    } else {
        colon = strrchr(listen, ':');
        if (colon == NULL || memchr(listen, ':', (size_t)(colon - listen)) != NULL)
            return PULSE_INVALID;
        hlen = (size_t)(colon - listen);
    }
    if (hlen == 0 || hlen >= hostlen)
        return PULSE_INVALID;
    uint64_t p = 0;
    const char *rest = NULL;
    if (pulse_settings_parse_u64_prefix(colon + 1, &p, &rest) != PULSE_OK || *rest != '\0' || p > 65535)
        return PULSE_INVALID;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (uint16_t)p;
    *is_v6 = v6;
    return PULSE_OK;
}

pulse_status_t pulse_server_listen_check(const char *listen, char *errbuf, size_t errlen)
{
    char host[256];
    uint16_t port = 0;
    bool v6 = false;
    unsigned char addr[16];

    if (pulse_server_listen_split(listen, host, sizeof host, &port, &v6) != PULSE_OK) {
        /* Tell a port out of range from a value of the wrong shape. */
        const char *colon = strrchr(listen, ':');
        const char *d = colon != NULL ? colon + 1 : "";
        size_t digits = strspn(d, "0123456789");
        if (colon != NULL && colon != listen && digits > 0 && d[digits] == '\0' &&
            (digits > 5 || strtoul(d, NULL, 10) > 65535)) {
            pulse_errbuf_set(errbuf, errlen, "server.listen: \"%s\": port must be 1..65535 (or 0 to pick a free port)",
                             listen);
            return PULSE_INVALID;
        }
        pulse_errbuf_set(errbuf, errlen, "server.listen: \"%s\" is not HOST:PORT", listen);
        return PULSE_INVALID;
    }
    /* Names are not resolved (a listener bound to whatever a name resolves
     * to at start is a surprise waiting to happen); only localhost is
     * known. Checked here, so that pulsed exits 2 like for any bad setting,
     * rather than 1 when it later fails to bind. */
    if ((!v6 && strcmp(host, "localhost") == 0) || inet_pton(v6 ? AF_INET6 : AF_INET, host, addr) == 1)
        return PULSE_OK;
    pulse_errbuf_set(errbuf, errlen,
                     "server.listen: host \"%s\" is not an IP address (use an IPv4 address, [IPv6] in brackets or "
                     "localhost; names are not resolved)",
                     host);
    return PULSE_INVALID;
}

static pulse_status_t check_listen(const char *name, const char *value, char *errbuf, size_t errlen)
{
    (void)name; /* pulse_server_listen_check names server.listen itself */
    return pulse_server_listen_check(value, errbuf, errlen);
}

static const struct pulse_setting keys[] = {
    {"server.listen", PULSE_SETTING_STRING, F(listen), "127.0.0.1:8080", NULL, 0, 0, check_listen,
     "address to listen on: IPv4:PORT, [IPv6]:PORT or localhost:PORT; port 0 picks a free one"},
    {"server.data-dir", PULSE_SETTING_STRING, F(data_dir), "./data", NULL, 0, 0, NULL,
     "where the metadata store and the partition logs live; one process per directory"},
    {"server.max-body-bytes", PULSE_SETTING_SIZE, F(max_body_bytes), "16MiB", NULL, 1, GIB, NULL,
     "largest request body, after gzip decoding"},
    {"server.max-records-per-request", PULSE_SETTING_INT, F(max_records_per_request), "10000", NULL, 1, 1000000, NULL,
     "most records in one publish (and cursors in one commit)"},
    {"server.max-connections", PULSE_SETTING_INT, F(max_connections), "1000", NULL, 1, 1000000, NULL,
     "most client connections at once"},
    {"server.max-connections-per-ip", PULSE_SETTING_INT, F(max_connections_per_ip), "64", NULL, 0, 1000000, NULL,
     "most connections from one client address; 0 = no limit"},
    {"server.connection-timeout", PULSE_SETTING_DURATION, F(connection_timeout_ms), "30s", NULL, 1, DAY_MS, NULL,
     "inactivity timeout of a connection, rounded up to whole seconds"},
    {"server.header-timeout", PULSE_SETTING_DURATION, F(header_timeout_ms), "10s", NULL, 1, DAY_MS, NULL,
     "time a client has to send a complete request head"},
    {"server.body-timeout", PULSE_SETTING_DURATION, F(body_timeout_ms), "10s", NULL, 1, DAY_MS, NULL,
     "time a client has to send a request body (extended while it keeps body-min-rate)"},
    {"server.body-min-rate", PULSE_SETTING_SIZE, F(body_min_rate), "1KiB", NULL, 0, GIB, NULL,
     "bytes per second a body must keep to be given another body-timeout; 0 = one window only"},
    {"server.memory-budget", PULSE_SETTING_SIZE, F(memory_budget), "256MiB", NULL, 1024 * 1024, 1024 * GIB, NULL,
     "memory all requests and answers in flight may hold together"},
    {"server.stream-max", PULSE_SETTING_INT, F(stream_max), "512", NULL, 0, 1000000, NULL,
     "most event streams (text/event-stream) open at once; past it 503; 0 = none"},
    {"server.stream-heartbeat", PULSE_SETTING_DURATION, F(stream_heartbeat_ms), "15s", NULL, 10, DAY_MS, NULL,
     "an idle event stream gets a comment line this often"},
    {"server.stream-buffer-bytes", PULSE_SETTING_SIZE, F(stream_buffer_bytes), "256KiB", NULL, 4096, GIB, NULL,
     "events one stream may have on their way to its client; a live client further behind is cut"},
    {"server.threads", PULSE_SETTING_INT, F(threads), "0", NULL, 0, 256, NULL,
     "HTTP worker threads; 0 = one per online CPU core"},
    {"server.cors-origins", PULSE_SETTING_LIST, F(cors_origins), "", NULL, 0, 0, pulse_cors_check_origins,
     "browser origins allowed to call the API across origins: comma-separated, or *; empty = none"},
    {"server.cors-credentials", PULSE_SETTING_STRING, F(cors_credentials), "off", NULL, 0, 0, pulse_cors_check_switch,
     "on: answers to allowed origins say Access-Control-Allow-Credentials: true"},
    {"server.allow-insecure", PULSE_SETTING_STRING, F(allow_insecure), "off", NULL, 0, 0, pulse_cors_check_switch,
     "on: serve a non-loopback address without auth.token-file (refused otherwise; warned at every start)"},
    {"server.access-log", PULSE_SETTING_STRING, F(access_log), "off", NULL, 0, 0, pulse_cors_check_switch,
     "on: one line per request on stderr (time, client, token name, method, path, status, bytes, duration)"},
};

static const struct pulse_settings_table table = {"server", keys, sizeof keys / sizeof keys[0],
                                                  sizeof(struct pulse_server_settings)};

const struct pulse_settings_table *pulse_server_settings(void)
{
    return &table;
}
