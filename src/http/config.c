/* SPDX-License-Identifier: MIT */
/*
 * config.c - pulsed's settings: one table of keys (name, type, field,
 * default text, bounds) drives defaults, parsing, the environment names and
 * the effective-configuration dump, so the four cannot disagree. Defaults
 * are parsed from text by the same code that parses user input.
 * docs/Configuration.md and conf/pulse.conf describe every key.
 */
#include "http/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/local.h"
#include "common/status.h"
#include "common/alloc.h"
#include "common/log.h"

enum key_type { KT_STR, KT_SIZE, KT_DUR, KT_INT, KT_RATIO, KT_SYNC, KT_LEVEL, KT_LISTEN };

struct key_def {
    const char *name; /* "section.key" */
    enum key_type type;
    size_t off;
    const char *def;
    int64_t min; /* numeric bounds, inclusive */
    int64_t max;
};

#define F(field) offsetof(struct pulse_config, field)
#define GIB (1024ll * 1024 * 1024)
#define DAY_MS (86400000ll)

static const struct key_def keys[] = {
    {"server.listen", KT_LISTEN, F(listen), "127.0.0.1:8080", 0, 0},
    {"server.data-dir", KT_STR, F(data_dir), "./data", 0, 0},
    {"server.max-body-bytes", KT_SIZE, F(max_body_bytes), "16MiB", 1, GIB},
    {"server.max-records-per-request", KT_INT, F(max_records_per_request), "10000", 1, 1000000},
    {"server.max-connections", KT_INT, F(max_connections), "1000", 1, 1000000},
    {"server.max-connections-per-ip", KT_INT, F(max_connections_per_ip), "64", 0, 1000000},
    {"server.connection-timeout", KT_DUR, F(connection_timeout_ms), "30s", 1, DAY_MS},
    {"server.header-timeout", KT_DUR, F(header_timeout_ms), "10s", 1, DAY_MS},
    {"server.body-timeout", KT_DUR, F(body_timeout_ms), "10s", 1, DAY_MS},
    {"server.body-min-rate", KT_SIZE, F(body_min_rate), "1KiB", 0, GIB},
    {"server.memory-budget", KT_SIZE, F(memory_budget), "256MiB", 1024 * 1024, 1024 * GIB},
    {"server.threads", KT_INT, F(threads), "0", 0, 256},
    {"storage.segment-max-bytes", KT_SIZE, F(segment_max_bytes), "512MiB", 1024, 2 * GIB - 1},
    {"storage.index-interval-bytes", KT_SIZE, F(index_interval_bytes), "4096", 1, GIB},
    {"storage.sync-mode", KT_SYNC, F(sync_mode), "every-write", 0, 0},
    {"storage.sync-interval", KT_DUR, F(sync_interval_ms), "1s", 1, DAY_MS},
    {"storage.retention-interval", KT_DUR, F(retention_interval_ms), "30s", 0, 365 * DAY_MS},
    {"storage.compaction-interval", KT_DUR, F(compaction_interval_ms), "30s", 0, 365 * DAY_MS},
    {"storage.compaction-tombstone-retention", KT_DUR, F(compaction_tombstone_retention_ms), "24h", 0,
     100000 * DAY_MS},
    {"storage.compaction-min-gain-ratio", KT_RATIO, F(compaction_min_gain_ratio), "0.1", 0, 1},
    {"storage.compaction-max-bytes-per-pass", KT_SIZE, F(compaction_max_bytes_per_pass), "1GiB", 1, INT64_MAX},
    {"storage.compaction-max-pass-time", KT_DUR, F(compaction_max_pass_ms), "5s", 0, DAY_MS},
    {"storage.segment-fd-cache", KT_INT, F(segment_fd_cache), "1024", 16, 1000000},
    {"storage.checkpoint-interval", KT_DUR, F(checkpoint_interval_ms), "1s", 0, DAY_MS},
    {"topic-defaults.partitions", KT_INT, F(partitions), "1", 1, 256},
    {"topic-defaults.retention-ms", KT_DUR, F(retention_ms), "7d", 0, INT64_MAX},
    {"topic-defaults.retention-bytes", KT_SIZE, F(retention_bytes), "0", 0, INT64_MAX},
    /* no default text: unset means "follow storage.segment-max-bytes" */
    {"topic-defaults.segment-bytes", KT_SIZE, F(segment_bytes), NULL, 1024, 2 * GIB - 1},
    {"log.level", KT_LEVEL, F(level), "info", 0, 0},
};

#define N_KEYS (sizeof keys / sizeof keys[0])

/* Parses a non-negative decimal integer prefix; *end gets the rest. */
static pulse_status_t parse_u64_prefix(const char *text, uint64_t *out, const char **end)
{
    const char *p = text;
    uint64_t v = 0;
    if (!isdigit((unsigned char)*p))
        return PULSE_INVALID;
    while (isdigit((unsigned char)*p)) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return PULSE_RANGE;
        v = v * 10 + d;
        p++;
    }
    while (*p == ' ' || *p == '\t')
        p++;
    *out = v;
    *end = p;
    return PULSE_OK;
}

static pulse_status_t scaled(uint64_t v, uint64_t mult, uint64_t *out)
{
    if (mult != 0 && v > UINT64_MAX / mult)
        return PULSE_RANGE;
    *out = v * mult;
    return PULSE_OK;
}

pulse_status_t pulse_config_parse_size(const char *text, uint64_t *out)
{
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {{"", 1}, {"B", 1}, {"KiB", 1024}, {"MiB", 1024 * 1024}, {"GiB", 1024ull * 1024 * 1024}};
    uint64_t v = 0;
    const char *rest = NULL;
    pulse_status_t st = parse_u64_prefix(text, &v, &rest);
    if (st != PULSE_OK)
        return st;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(rest, units[i].unit) == 0)
            return scaled(v, units[i].mult, out);
    return PULSE_INVALID;
}

pulse_status_t pulse_config_parse_duration_ms(const char *text, int64_t *out)
{
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {{"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    uint64_t v = 0;
    const char *rest = NULL;
    pulse_status_t st = parse_u64_prefix(text, &v, &rest);
    if (st != PULSE_OK)
        return st;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(rest, units[i].unit) == 0) {
            uint64_t ms = 0;
            st = scaled(v, units[i].mult, &ms);
            if (st != PULSE_OK || ms > (uint64_t)INT64_MAX)
                return PULSE_RANGE;
            *out = (int64_t)ms;
            return PULSE_OK;
        }
    }
    return PULSE_INVALID;
}

pulse_status_t pulse_config_split_listen(const char *listen, char *host, size_t hostlen, uint16_t *port,
                                         bool *is_v6)
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
    if (parse_u64_prefix(colon + 1, &p, &rest) != PULSE_OK || *rest != '\0' || p > 65535)
        return PULSE_INVALID;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (uint16_t)p;
    *is_v6 = v6;
    return PULSE_OK;
}

pulse_status_t pulse_config_check_listen(const char *listen, char *errbuf, size_t errlen)
{
    char host[256];
    uint16_t port = 0;
    bool v6 = false;
    unsigned char addr[16];

    if (pulse_config_split_listen(listen, host, sizeof host, &port, &v6) != PULSE_OK) {
        /* Tell a port out of range from a value of the wrong shape. */
        const char *colon = strrchr(listen, ':');
        const char *d = colon != NULL ? colon + 1 : "";
        size_t digits = strspn(d, "0123456789");
        if (colon != NULL && colon != listen && digits > 0 && d[digits] == '\0' &&
            (digits > 5 || strtoul(d, NULL, 10) > 65535)) {
            pulse_errbuf_set(errbuf, errlen,
                             "server.listen: \"%s\": port must be 1..65535 (or 0 to pick a free port)", listen);
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

static const struct key_def *find_key(const char *name)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

/* Parses value for k into a typed scratch value; applies it only when valid. */
static pulse_status_t apply(struct pulse_config *cfg, const struct key_def *k, const char *value, char *errbuf,
                            size_t errlen)
{
    pulse_status_t st = PULSE_OK;
    char *field = (char *)cfg + k->off;
    char *copy = NULL;

    switch (k->type) {
    case KT_STR:
    case KT_LISTEN:
    case KT_SYNC:
    case KT_LEVEL: {
        if (value[0] == '\0') {
            st = PULSE_INVALID;
            pulse_errbuf_set(errbuf, errlen, "%s: empty value", k->name);
            goto out;
        }
        if (k->type == KT_LISTEN) {
            st = pulse_config_check_listen(value, errbuf, errlen);
            if (st != PULSE_OK)
                goto out;
        } else if (k->type == KT_SYNC) {
            if (strcmp(value, "every-write") != 0 && strcmp(value, "interval") != 0) {
                st = PULSE_INVALID;
                pulse_errbuf_set(errbuf, errlen, "%s: \"%s\" is not every-write or interval", k->name, value);
                goto out;
            }
        } else if (k->type == KT_LEVEL) {
            enum pulse_log_level lvl;
            if (pulse_log_parse_level(value, &lvl) != 0) {
                st = PULSE_INVALID;
                pulse_errbuf_set(errbuf, errlen, "%s: \"%s\" is not debug, info, warn, error or off", k->name, value);
                goto out;
            }
        }
        copy = pulse_strdup(value);
        if (copy == NULL) {
            st = PULSE_NOMEM;
            pulse_errbuf_set(errbuf, errlen, "%s: out of memory", k->name);
            goto out;
        }
        char **slot = (char **)(void *)field;
        pulse_free(*slot);
        *slot = copy;
        copy = NULL;
        break;
    }
    case KT_SIZE: {
        uint64_t v = 0;
        if (pulse_config_parse_size(value, &v) != PULSE_OK || v < (uint64_t)k->min || v > (uint64_t)k->max) {
            st = PULSE_INVALID;
            pulse_errbuf_set(errbuf, errlen, "%s: \"%s\" is not a size in %lld..%lld bytes (units B, KiB, MiB, GiB)",
                    k->name, value, (long long)k->min, (long long)k->max);
            goto out;
        }
        memcpy(field, &v, sizeof v);
        break;
    }
    case KT_DUR: {
        int64_t v = 0;
        if (pulse_config_parse_duration_ms(value, &v) != PULSE_OK || v < k->min || v > k->max) {
            st = PULSE_INVALID;
            pulse_errbuf_set(errbuf, errlen, "%s: \"%s\" is not a duration in %lld..%lld ms (units ms, s, m, h, d)",
                    k->name, value, (long long)k->min, (long long)k->max);
            goto out;
        }
        memcpy(field, &v, sizeof v);
        break;
    }
    case KT_INT: {
        uint64_t v = 0;
        const char *rest = NULL;
        if (parse_u64_prefix(value, &v, &rest) != PULSE_OK || *rest != '\0' || v < (uint64_t)k->min ||
            v > (uint64_t)k->max) {
            st = PULSE_INVALID;
            pulse_errbuf_set(errbuf, errlen, "%s: \"%s\" is not an integer in %lld..%lld", k->name, value,
                    (long long)k->min, (long long)k->max);
            goto out;
        }
        int64_t iv = (int64_t)v;
        memcpy(field, &iv, sizeof iv);
        break;
    }
    case KT_RATIO: {
        char *end = NULL;
        errno = 0;
        double d = strtod(value, &end);
        int err = errno;
        if (err != 0 || end == value || *end != '\0' || !(d >= (double)k->min && d <= (double)k->max)) {
            st = PULSE_INVALID;
            pulse_errbuf_set(errbuf, errlen, "%s: \"%s\" is not a number in %lld..%lld", k->name, value,
                    (long long)k->min, (long long)k->max);
            goto out;
        }
        memcpy(field, &d, sizeof d);
        break;
    }
    }
out:
    pulse_free(copy);
    return st;
}

pulse_status_t pulse_config_set(struct pulse_config *cfg, const char *key, const char *value, char *errbuf,
                                size_t errlen)
{
    const struct key_def *k = find_key(key);
    if (k == NULL) {
        pulse_errbuf_set(errbuf, errlen, "unknown configuration key \"%s\"", key);
        return PULSE_NOT_FOUND;
    }
    return apply(cfg, k, value, errbuf, errlen);
}

pulse_status_t pulse_config_set_assignment(struct pulse_config *cfg, const char *assignment, char *errbuf,
                                           size_t errlen)
{
    pulse_status_t st = PULSE_OK;
    char *copy = pulse_strdup(assignment);
    if (copy == NULL)
        return PULSE_NOMEM;
    char *eq = strchr(copy, '=');
    if (eq == NULL) {
        st = PULSE_INVALID;
        pulse_errbuf_set(errbuf, errlen, "\"%s\" is not section.key=value", assignment);
        goto out;
    }
    *eq = '\0';
    st = pulse_config_set(cfg, copy, eq + 1, errbuf, errlen);
out:
    pulse_free(copy);
    return st;
}

pulse_status_t pulse_config_init(struct pulse_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < N_KEYS; i++) {
        if (keys[i].def == NULL)
            continue;
        pulse_status_t st = apply(cfg, &keys[i], keys[i].def, NULL, 0);
        if (st != PULSE_OK) {
            pulse_config_fini(cfg);
            return st;
        }
    }
    return PULSE_OK;
}

void pulse_config_fini(struct pulse_config *cfg)
{
    for (size_t i = 0; i < N_KEYS; i++) {
        enum key_type t = keys[i].type;
        if (t == KT_STR || t == KT_LISTEN || t == KT_SYNC || t == KT_LEVEL) {
            char **slot = (char **)(void *)((char *)cfg + keys[i].off);
            pulse_free(*slot);
            *slot = NULL;
        }
    }
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

pulse_status_t pulse_config_load_file(struct pulse_config *cfg, const char *path, char *errbuf, size_t errlen)
{
    pulse_status_t st = PULSE_OK;
    char line[4096];
    char section[128] = "";
    unsigned lineno = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        int err = errno;
        pulse_errbuf_set(errbuf, errlen, "cannot read config file %s: %s", path, strerror(err));
        return PULSE_IO;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        lineno++;
        if (strchr(line, '\n') == NULL && !feof(f)) {
            st = PULSE_INVALID;
            pulse_errbuf_set(errbuf, errlen, "%s:%u: line too long", path, lineno);
            goto out;
        }
        char *s = trim(line);
        if (*s == '\0' || *s == '#')
            continue;
        if (*s == '[') {
            size_t n = strlen(s);
            if (s[n - 1] != ']' || n - 2 >= sizeof section || n < 3) {
                st = PULSE_INVALID;
                pulse_errbuf_set(errbuf, errlen, "%s:%u: bad section header \"%s\"", path, lineno, s);
                goto out;
            }
            memcpy(section, s + 1, n - 2);
            section[n - 2] = '\0';
            continue;
        }
        char *eq = strchr(s, '=');
        if (eq == NULL || section[0] == '\0') {
            st = PULSE_INVALID;
            pulse_errbuf_set(errbuf, errlen, "%s:%u: expected \"key = value\" inside a [section]", path, lineno);
            goto out;
        }
        *eq = '\0';
        char *k = trim(s);
        char *v = trim(eq + 1);
        size_t vlen = strlen(v);
        if (vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"') {
            v[vlen - 1] = '\0';
            v++;
        }
        char full[256];
        if ((size_t)snprintf(full, sizeof full, "%s.%s", section, k) >= sizeof full) {
            st = PULSE_INVALID;
            pulse_errbuf_set(errbuf, errlen, "%s:%u: key too long", path, lineno);
            goto out;
        }
        char msg[512] = "";
        st = pulse_config_set(cfg, full, v, msg, sizeof msg);
        if (st != PULSE_OK) {
            pulse_errbuf_set(errbuf, errlen, "%s:%u: %s", path, lineno, msg);
            goto out;
        }
    }
    if (ferror(f)) {
        st = PULSE_IO;
        pulse_errbuf_set(errbuf, errlen, "error reading config file %s", path);
    }
out:
    fclose(f);
    return st;
}

static const char *default_getenv(const char *name)
{
    return getenv(name);
}

pulse_status_t pulse_config_load_env(struct pulse_config *cfg, pulse_config_getenv_fn getenv_fn, char *errbuf,
                                     size_t errlen)
{
    if (getenv_fn == NULL)
        getenv_fn = default_getenv;
    for (size_t i = 0; i < N_KEYS; i++) {
        char name[128] = "PULSE_";
        size_t j = strlen(name);
        for (const char *p = keys[i].name; *p != '\0' && j + 1 < sizeof name; p++)
            name[j++] = (*p == '-' || *p == '.') ? '_' : (char)toupper((unsigned char)*p);
        name[j] = '\0';
        const char *v = getenv_fn(name);
        if (v == NULL)
            continue;
        char msg[512] = "";
        pulse_status_t st = apply(cfg, &keys[i], v, msg, sizeof msg);
        if (st != PULSE_OK) {
            pulse_errbuf_set(errbuf, errlen, "environment %s: %s", name, msg);
            return st;
        }
    }
    return PULSE_OK;
}

uint64_t pulse_config_topic_segment_bytes(const struct pulse_config *cfg)
{
    return cfg->segment_bytes != 0 ? cfg->segment_bytes : cfg->segment_max_bytes;
}

void pulse_config_to_broker(const struct pulse_config *cfg, struct pulse_broker_config *bcfg)
{
    bcfg->data_dir = cfg->data_dir;
    bcfg->segment_max_bytes = cfg->segment_max_bytes;
    bcfg->index_interval_bytes = (uint32_t)cfg->index_interval_bytes;
    bcfg->sync_mode = strcmp(cfg->sync_mode, "interval") == 0 ? PULSE_SYNC_INTERVAL : PULSE_SYNC_EVERY_WRITE;
    bcfg->sync_interval_ms = (uint32_t)cfg->sync_interval_ms;
    bcfg->default_partitions = (uint32_t)cfg->partitions;
    bcfg->default_retention_ms = cfg->retention_ms;
    bcfg->default_retention_bytes = (int64_t)cfg->retention_bytes;
    bcfg->max_records_per_publish = (uint32_t)cfg->max_records_per_request;
    bcfg->retention_interval_ms = cfg->retention_interval_ms;
    bcfg->compaction_interval_ms = cfg->compaction_interval_ms;
    bcfg->compaction_tombstone_retention_ms = cfg->compaction_tombstone_retention_ms;
    bcfg->compaction_min_gain_ratio = cfg->compaction_min_gain_ratio;
    bcfg->compaction_max_bytes_per_pass = cfg->compaction_max_bytes_per_pass;
    bcfg->compaction_max_pass_ms = cfg->compaction_max_pass_ms;
    bcfg->segment_fd_cache = (uint32_t)cfg->segment_fd_cache;
    bcfg->checkpoint_interval_ms = (uint32_t)cfg->checkpoint_interval_ms;
}

bool pulse_config_fit_fd_limit(struct pulse_config *cfg, uint64_t nofile, char *msg, size_t msglen)
{
    int64_t threads = cfg->threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? n : 1;
    }
    /* Each HTTP worker has an epoll descriptor and an inter-thread
     * channel (a pipe at worst). */
    uint64_t reserved = PULSE_CONFIG_FD_RESERVED + PULSE_CONFIG_FD_META + 3 * (uint64_t)threads;
    uint64_t conns = (uint64_t)cfg->max_connections;
    uint64_t cache = (uint64_t)cfg->segment_fd_cache;
    uint64_t need = reserved + 2 * conns + cache;

    if (need <= nofile)
        return false;
    uint64_t avail = nofile > reserved + 2 + 16 ? nofile - reserved : 2 + 16;
    uint64_t fit_cache = avail / 4 > 16 ? avail / 4 : 16;
    if (fit_cache > cache)
        fit_cache = cache;
    uint64_t fit_conns = avail > fit_cache + 2 ? (avail - fit_cache) / 2 : 1;
    if (fit_conns > conns)
        fit_conns = conns;
    pulse_errbuf_set(msg, msglen,
                     "the descriptor limit %llu (RLIMIT_NOFILE) is below what the settings need (%llu = %llu "
                     "reserved + 2 x %llu connections + %llu cached segment files): serving at most %llu "
                     "connections (server.max-connections) and caching %llu segment files "
                     "(storage.segment-fd-cache); raise the limit (ulimit -n, systemd LimitNOFILE=) to use the "
                     "configured values",
                     (unsigned long long)nofile, (unsigned long long)need, (unsigned long long)reserved,
                     (unsigned long long)conns, (unsigned long long)cache, (unsigned long long)fit_conns,
                     (unsigned long long)fit_cache);
    cfg->max_connections = (int64_t)fit_conns;
    cfg->segment_fd_cache = (int64_t)fit_cache;
    return true;
}

struct json_t *pulse_config_to_json(const struct pulse_config *cfg)
{
    json_t *obj = json_object();
    if (obj == NULL)
        return NULL;
    for (size_t i = 0; i < N_KEYS; i++) {
        const char *field = (const char *)cfg + keys[i].off;
        json_t *v = NULL;
        switch (keys[i].type) {
        case KT_STR:
        case KT_LISTEN:
        case KT_SYNC:
        case KT_LEVEL: {
            const char *s = NULL;
            memcpy(&s, field, sizeof s);
            v = json_string(s != NULL ? s : "");
            break;
        }
        case KT_SIZE: {
            uint64_t u = 0;
            memcpy(&u, field, sizeof u);
            if (keys[i].off == F(segment_bytes))
                u = pulse_config_topic_segment_bytes(cfg);
            v = json_integer((json_int_t)u);
            break;
        }
        case KT_DUR:
        case KT_INT: {
            int64_t n = 0;
            memcpy(&n, field, sizeof n);
            v = json_integer((json_int_t)n);
            break;
        }
        case KT_RATIO: {
            double d = 0;
            memcpy(&d, field, sizeof d);
            v = json_real(d);
            break;
        }
        }
        if (v == NULL || json_object_set_new(obj, keys[i].name, v) != 0) {
            json_decref(obj);
            return NULL;
        }
    }
    return obj;
}
