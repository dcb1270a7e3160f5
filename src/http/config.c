/* SPDX-License-Identifier: MIT */
/*
 * config.c - pulsed's configuration sources: the file, the environment and
 * the command line. It knows no key itself: every "section.key" goes to
 * the layer table that declares it (config.h lists them), which parses,
 * checks and stores the value in that layer's struct inside struct
 * pulse_config. Defaults, the environment names and the effective-
 * configuration dump all come from the same tables, so they cannot
 * disagree; docs/Configuration.md and conf/pulse.conf are held to them by
 * make check (tests/unit/http/check_settings.c).
 */
#include "http/config.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/local.h"
#include "common/alloc.h"
#include "common/settings.h"
#include "common/status.h"

/* Each layer's table and where its struct sits in struct pulse_config. */
static const struct {
    const struct pulse_settings_table *(*table)(void);
    size_t off;
} layers[] = {
    {pulse_server_settings, offsetof(struct pulse_config, server)},
    {pulse_store_settings, offsetof(struct pulse_config, storage)},
    {pulse_broker_settings, offsetof(struct pulse_config, broker)},
    {pulse_log_settings, offsetof(struct pulse_config, log)},
    {pulse_kafka_settings, offsetof(struct pulse_config, kafka)},
    {pulse_tls_settings, offsetof(struct pulse_config, tls)},
    {pulse_limits_settings, offsetof(struct pulse_config, limits)},
};

#define N_LAYERS (sizeof layers / sizeof layers[0])

/* Pass-through prefixes ("kafka.property.NAME") and where their layer's
 * struct sits. Not read from the environment (a variable name cannot say
 * where NAME's dots were). */
static const struct {
    const struct pulse_settings_prefix *(*prefix)(void);
    size_t off;
} prefixed[] = {
    {pulse_kafka_settings_prefix, offsetof(struct pulse_config, kafka)},
};

#define N_PREFIXED (sizeof prefixed / sizeof prefixed[0])

const struct pulse_settings_table *pulse_config_table(size_t i)
{
    return i < N_LAYERS ? layers[i].table() : NULL;
}

/* The key called name, or NULL; *off_out gets the offset of its layer's
 * struct in struct pulse_config. */
static const struct pulse_setting *find_key(const char *name, size_t *off_out)
{
    for (size_t i = 0; i < N_LAYERS; i++) {
        const struct pulse_setting *s = pulse_settings_find(layers[i].table(), name);
        if (s != NULL) {
            *off_out = layers[i].off;
            return s;
        }
    }
    return NULL;
}

pulse_status_t pulse_config_set(struct pulse_config *cfg, const char *key, const char *value, char *errbuf,
                                size_t errlen)
{
    size_t off = 0;
    const struct pulse_setting *s = find_key(key, &off);
    for (size_t i = 0; s == NULL && i < N_PREFIXED; i++) {
        pulse_status_t st = pulse_settings_apply_prefixed(prefixed[i].prefix(), (char *)cfg + prefixed[i].off, key,
                                                          value, errbuf, errlen);
        if (st != PULSE_NOT_FOUND)
            return st;
    }
    if (s == NULL) {
        pulse_errbuf_set(errbuf, errlen, "unknown configuration key \"%s\"", key);
        return PULSE_NOT_FOUND;
    }
    return pulse_settings_apply(s, (char *)cfg + off, value, errbuf, errlen);
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
    for (size_t i = 0; i < N_LAYERS; i++) {
        pulse_status_t st = pulse_settings_init(layers[i].table(), (char *)cfg + layers[i].off);
        if (st != PULSE_OK) {
            pulse_config_fini(cfg);
            return st;
        }
    }
    return PULSE_OK;
}

void pulse_config_fini(struct pulse_config *cfg)
{
    for (size_t i = 0; i < N_LAYERS; i++)
        pulse_settings_fini(layers[i].table(), (char *)cfg + layers[i].off);
    for (size_t i = 0; i < N_PREFIXED; i++)
        pulse_settings_prefix_fini(prefixed[i].prefix(), (char *)cfg + prefixed[i].off);
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

/* Applies the PULSE_<SECTION>_<KEY> variable of s, if present. */
static pulse_status_t load_env_key(const struct pulse_setting *s, void *base, pulse_config_getenv_fn getenv_fn,
                                   char *errbuf, size_t errlen)
{
    char name[128] = "PULSE_";
    size_t j = strlen(name);
    for (const char *p = s->name; *p != '\0' && j + 1 < sizeof name; p++)
        name[j++] = (*p == '-' || *p == '.') ? '_' : (char)toupper((unsigned char)*p);
    name[j] = '\0';
    const char *v = getenv_fn(name);
    if (v == NULL)
        return PULSE_OK;
    char msg[512] = "";
    pulse_status_t st = pulse_settings_apply(s, base, v, msg, sizeof msg);
    if (st != PULSE_OK)
        pulse_errbuf_set(errbuf, errlen, "environment %s: %s", name, msg);
    return st;
}

pulse_status_t pulse_config_load_env(struct pulse_config *cfg, pulse_config_getenv_fn getenv_fn, char *errbuf,
                                     size_t errlen)
{
    if (getenv_fn == NULL)
        getenv_fn = default_getenv;
    for (size_t i = 0; i < N_LAYERS; i++) {
        const struct pulse_settings_table *t = layers[i].table();
        for (size_t k = 0; k < t->n; k++) {
            pulse_status_t st = load_env_key(&t->keys[k], (char *)cfg + layers[i].off, getenv_fn, errbuf, errlen);
            if (st != PULSE_OK)
                return st;
        }
    }
    return PULSE_OK;
}

uint64_t pulse_config_topic_segment_bytes(const struct pulse_config *cfg)
{
    return cfg->broker.segment_bytes != 0 ? cfg->broker.segment_bytes : cfg->storage.segment_max_bytes;
}

void pulse_config_to_broker(const struct pulse_config *cfg, struct pulse_broker_config *bcfg)
{
    bcfg->data_dir = cfg->server.data_dir;
    bcfg->max_records_per_publish = (uint32_t)cfg->server.max_records_per_request;
    pulse_broker_settings_to_config(&cfg->broker, &cfg->storage, bcfg);
}

bool pulse_config_fit_fd_limit(struct pulse_config *cfg, uint64_t nofile, char *msg, size_t msglen)
{
    int64_t threads = cfg->server.threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? n : 1;
    }
    /* Each HTTP worker has an epoll descriptor and an inter-thread
     * channel (a pipe at worst). */
    uint64_t reserved = PULSE_CONFIG_FD_RESERVED + PULSE_CONFIG_FD_META + 3 * (uint64_t)threads;
    uint64_t conns = (uint64_t)cfg->server.max_connections;
    uint64_t cache = (uint64_t)cfg->storage.segment_fd_cache;
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
    cfg->server.max_connections = (int64_t)fit_conns;
    cfg->storage.segment_fd_cache = (int64_t)fit_cache;
    return true;
}

/* The JSON value of setting s in the struct at base: sizes in bytes,
 * durations in ms; an unset key that follows another shows that one's. */
static json_t *value_json(const struct pulse_config *cfg, const struct pulse_setting *s, const char *base)
{
    const char *field = base + s->off;
    switch (s->type) {
    case PULSE_SETTING_STRING:
    case PULSE_SETTING_LIST: {
        const char *v = NULL;
        memcpy(&v, field, sizeof v);
        return json_string(v != NULL ? v : "");
    }
    case PULSE_SETTING_SIZE: {
        uint64_t u = 0;
        memcpy(&u, field, sizeof u);
        if (u == 0 && s->def == NULL && s->follows != NULL) {
            size_t off = 0;
            const struct pulse_setting *f = find_key(s->follows, &off);
            if (f != NULL && f->type == PULSE_SETTING_SIZE)
                memcpy(&u, (const char *)cfg + off + f->off, sizeof u);
        }
        return json_integer((json_int_t)u);
    }
    case PULSE_SETTING_DURATION:
    case PULSE_SETTING_INT: {
        int64_t n = 0;
        memcpy(&n, field, sizeof n);
        return json_integer((json_int_t)n);
    }
    case PULSE_SETTING_RATIO: {
        double d = 0;
        memcpy(&d, field, sizeof d);
        return json_real(d);
    }
    }
    return NULL;
}

/* Whether a pass-through property's value may be shown: not a password,
 * a secret or key material (sasl.password, ssl.key.password,
 * sasl.oauthbearer.client.secret, ssl.key.pem, ...). */
static bool shown(const char *name)
{
    return strstr(name, "password") == NULL && strstr(name, "secret") == NULL && strstr(name, ".key") == NULL &&
           strstr(name, "jaas") == NULL;
}

/* Adds "PREFIX+NAME": VALUE of p's pass-through pairs to obj (secrets as
 * "(hidden)"). */
static int prefixed_json(json_t *obj, const struct pulse_settings_prefix *p, const char *base)
{
    const struct pulse_setting_pairs *pairs = (const struct pulse_setting_pairs *)(const void *)(base + p->off);
    for (size_t i = 0; i < pairs->n; i++) {
        char name[512];
        snprintf(name, sizeof name, "%s%s", p->prefix, pairs->names[i]);
        if (json_object_set_new(obj, name, json_string(shown(pairs->names[i]) ? pairs->values[i] : "(hidden)")) != 0)
            return -1;
    }
    return 0;
}

struct json_t *pulse_config_to_json(const struct pulse_config *cfg)
{
    json_t *obj = json_object();
    if (obj == NULL)
        return NULL;
    for (size_t i = 0; i < N_LAYERS; i++) {
        const struct pulse_settings_table *t = layers[i].table();
        const char *base = (const char *)cfg + layers[i].off;
        for (size_t k = 0; k < t->n; k++) {
            json_t *v = value_json(cfg, &t->keys[k], base);
            if (v == NULL || json_object_set_new(obj, t->keys[k].name, v) != 0) {
                json_decref(obj);
                return NULL;
            }
        }
    }
    for (size_t i = 0; i < N_PREFIXED; i++) {
        if (prefixed_json(obj, prefixed[i].prefix(), (const char *)cfg + prefixed[i].off) != 0) {
            json_decref(obj);
            return NULL;
        }
    }
    return obj;
}
