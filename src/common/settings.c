/* SPDX-License-Identifier: MIT */
/*
 * settings.c - parsing and storing the values of declared settings (see
 * settings.h). Every refusal names the key and says what was expected, in
 * the words docs/Configuration.md uses; the messages are part of the
 * interface (pulsed prints them and exits 2).
 */
#include "common/settings.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

pulse_status_t pulse_settings_parse_u64_prefix(const char *text, uint64_t *out, const char **end)
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

pulse_status_t pulse_settings_parse_size(const char *text, uint64_t *out)
{
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {{"", 1}, {"B", 1}, {"KiB", 1024}, {"MiB", 1024 * 1024}, {"GiB", 1024ull * 1024 * 1024}};
    uint64_t v = 0;
    const char *rest = NULL;
    pulse_status_t st = pulse_settings_parse_u64_prefix(text, &v, &rest);
    if (st != PULSE_OK)
        return st;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(rest, units[i].unit) == 0)
            return scaled(v, units[i].mult, out);
    return PULSE_INVALID;
}

pulse_status_t pulse_settings_parse_duration_ms(const char *text, int64_t *out)
{
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {{"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    uint64_t v = 0;
    const char *rest = NULL;
    pulse_status_t st = pulse_settings_parse_u64_prefix(text, &v, &rest);
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

const struct pulse_setting *pulse_settings_find(const struct pulse_settings_table *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->keys[i].name, name) == 0)
            return &t->keys[i];
    return NULL;
}

static pulse_status_t apply_string(const struct pulse_setting *s, char *field, const char *value, char *errbuf,
                                   size_t errlen)
{
    pulse_status_t st;

    if (value[0] == '\0' && s->type != PULSE_SETTING_LIST) {
        pulse_errbuf_set(errbuf, errlen, "%s: empty value", s->name);
        return PULSE_INVALID;
    }
    if (s->check != NULL) {
        st = s->check(s->name, value, errbuf, errlen);
        if (st != PULSE_OK)
            return st;
    }
    char *copy = pulse_strdup(value);
    if (copy == NULL) {
        pulse_errbuf_set(errbuf, errlen, "%s: out of memory", s->name);
        return PULSE_NOMEM;
    }
    char **slot = (char **)(void *)field;
    pulse_free(*slot);
    *slot = copy;
    return PULSE_OK;
}

static pulse_status_t apply_number(const struct pulse_setting *s, char *field, const char *value, char *errbuf,
                                   size_t errlen)
{
    long long lo = (long long)s->min;
    long long hi = (long long)s->max;

    switch (s->type) {
    case PULSE_SETTING_SIZE: {
        uint64_t v = 0;
        if (pulse_settings_parse_size(value, &v) != PULSE_OK || v < (uint64_t)s->min || v > (uint64_t)s->max) {
            pulse_errbuf_set(errbuf, errlen, "%s: \"%s\" is not a size in %lld..%lld bytes (units B, KiB, MiB, GiB)",
                             s->name, value, lo, hi);
            return PULSE_INVALID;
        }
        memcpy(field, &v, sizeof v);
        return PULSE_OK;
    }
    case PULSE_SETTING_DURATION: {
        int64_t v = 0;
        if (pulse_settings_parse_duration_ms(value, &v) != PULSE_OK || v < s->min || v > s->max) {
            pulse_errbuf_set(errbuf, errlen, "%s: \"%s\" is not a duration in %lld..%lld ms (units ms, s, m, h, d)",
                             s->name, value, lo, hi);
            return PULSE_INVALID;
        }
        memcpy(field, &v, sizeof v);
        return PULSE_OK;
    }
    case PULSE_SETTING_INT: {
        uint64_t v = 0;
        const char *rest = NULL;
        if (pulse_settings_parse_u64_prefix(value, &v, &rest) != PULSE_OK || *rest != '\0' || v < (uint64_t)s->min ||
            v > (uint64_t)s->max) {
            pulse_errbuf_set(errbuf, errlen, "%s: \"%s\" is not an integer in %lld..%lld", s->name, value, lo, hi);
            return PULSE_INVALID;
        }
        int64_t iv = (int64_t)v;
        memcpy(field, &iv, sizeof iv);
        return PULSE_OK;
    }
    case PULSE_SETTING_RATIO: {
        char *end = NULL;
        errno = 0;
        double d = strtod(value, &end);
        int err = errno;
        if (err != 0 || end == value || *end != '\0' || !(d >= (double)s->min && d <= (double)s->max)) {
            pulse_errbuf_set(errbuf, errlen, "%s: \"%s\" is not a number in %lld..%lld", s->name, value, lo, hi);
            return PULSE_INVALID;
        }
        memcpy(field, &d, sizeof d);
        return PULSE_OK;
    }
    case PULSE_SETTING_STRING:
    case PULSE_SETTING_LIST:
        break;
    }
    return PULSE_INVALID;
}

pulse_status_t pulse_settings_apply(const struct pulse_setting *s, void *base, const char *value, char *errbuf,
                                    size_t errlen)
{
    char *field = (char *)base + s->off;

    if (s->type == PULSE_SETTING_STRING || s->type == PULSE_SETTING_LIST)
        return apply_string(s, field, value, errbuf, errlen);
    return apply_number(s, field, value, errbuf, errlen);
}

pulse_status_t pulse_settings_init(const struct pulse_settings_table *t, void *base)
{
    memset(base, 0, t->size);
    for (size_t i = 0; i < t->n; i++) {
        if (t->keys[i].def == NULL)
            continue;
        pulse_status_t st = pulse_settings_apply(&t->keys[i], base, t->keys[i].def, NULL, 0);
        if (st != PULSE_OK) {
            pulse_settings_fini(t, base);
            return st;
        }
    }
    return PULSE_OK;
}

/* Adds (name, value) to pairs, or replaces name's value. */
static pulse_status_t pairs_set(struct pulse_setting_pairs *pairs, const char *name, const char *value)
{
    char *v = pulse_strdup(value);
    if (v == NULL)
        return PULSE_NOMEM;
    for (size_t i = 0; i < pairs->n; i++) {
        if (strcmp(pairs->names[i], name) == 0) {
            pulse_free(pairs->values[i]);
            pairs->values[i] = v;
            return PULSE_OK;
        }
    }
    char *nm = pulse_strdup(name);
    char **names = pulse_realloc(pairs->names, (pairs->n + 1) * sizeof *names);
    if (names != NULL)
        pairs->names = names;
    char **values = names != NULL ? pulse_realloc(pairs->values, (pairs->n + 1) * sizeof *values) : NULL;
    if (values != NULL)
        pairs->values = values;
    if (nm == NULL || names == NULL || values == NULL) {
        pulse_free(nm);
        pulse_free(v);
        return PULSE_NOMEM;
    }
    pairs->names[pairs->n] = nm;
    pairs->values[pairs->n] = v;
    pairs->n++;
    return PULSE_OK;
}

pulse_status_t pulse_settings_apply_prefixed(const struct pulse_settings_prefix *p, void *base, const char *name,
                                             const char *value, char *errbuf, size_t errlen)
{
    size_t plen = strlen(p->prefix);
    if (strncmp(name, p->prefix, plen) != 0 || name[plen] == '\0')
        return PULSE_NOT_FOUND;
    if (value[0] == '\0') {
        pulse_errbuf_set(errbuf, errlen, "%s: empty value", name);
        return PULSE_INVALID;
    }
    pulse_status_t st = pairs_set((struct pulse_setting_pairs *)(void *)((char *)base + p->off), name + plen, value);
    if (st != PULSE_OK)
        pulse_errbuf_set(errbuf, errlen, "%s: out of memory", name);
    return st;
}

void pulse_settings_prefix_fini(const struct pulse_settings_prefix *p, void *base)
{
    struct pulse_setting_pairs *pairs = (struct pulse_setting_pairs *)(void *)((char *)base + p->off);
    for (size_t i = 0; i < pairs->n; i++) {
        pulse_free(pairs->names[i]);
        pulse_free(pairs->values[i]);
    }
    pulse_free(pairs->names);
    pulse_free(pairs->values);
    memset(pairs, 0, sizeof *pairs);
}

void pulse_settings_fini(const struct pulse_settings_table *t, void *base)
{
    for (size_t i = 0; i < t->n; i++) {
        if (t->keys[i].type != PULSE_SETTING_STRING && t->keys[i].type != PULSE_SETTING_LIST)
            continue;
        char **slot = (char **)(void *)((char *)base + t->keys[i].off);
        pulse_free(*slot);
        *slot = NULL;
    }
}
