/* SPDX-License-Identifier: MIT */
/*
 * auth_settings.c - the [auth] keys (auth_settings.h).
 */
#include "http/auth_settings.h"

#include <stddef.h>
#include <string.h>

#include "common/settings.h"

#define F(field) offsetof(struct pulse_auth_settings, field)

static const char *const public_names[] = {"dashboard", "openapi", "metrics"};

/* The item of list (comma-separated, blanks around items ignored) at
 * *pos: false at the end. */
static bool next_item(const char *list, size_t *pos, const char **item, size_t *len)
{
    const char *p = list + *pos;
    while (*p == ' ' || *p == ',')
        p++;
    if (*p == '\0')
        return false;
    size_t n = strcspn(p, ", ");
    *item = p;
    *len = n;
    *pos = (size_t)(p + n - list);
    return true;
}

static bool item_is(const char *item, size_t len, const char *word)
{
    return strlen(word) == len && strncmp(item, word, len) == 0;
}

static pulse_status_t check_public(const char *name, const char *value, char *errbuf, size_t errlen)
{
    size_t pos = 0;
    const char *item = NULL;
    size_t len = 0;
    while (next_item(value, &pos, &item, &len)) {
        bool known = false;
        for (size_t i = 0; i < sizeof public_names / sizeof public_names[0]; i++)
            known = known || item_is(item, len, public_names[i]);
        if (!known) {
            pulse_errbuf_set(errbuf, errlen, "%s: \"%.*s\" is not dashboard, openapi or metrics", name, (int)len, item);
            return PULSE_INVALID;
        }
    }
    return PULSE_OK;
}

bool pulse_auth_settings_is_public(const char *list, enum pulse_route r)
{
    const char *word = NULL;
    if (r == PULSE_ROUTE_DASHBOARD || r == PULSE_ROUTE_ASSET)
        word = "dashboard";
    else if (r == PULSE_ROUTE_OPENAPI)
        word = "openapi";
    else if (r == PULSE_ROUTE_METRICS)
        word = "metrics";
    size_t pos = 0;
    const char *item = NULL;
    size_t len = 0;
    while (word != NULL && list != NULL && next_item(list, &pos, &item, &len))
        if (item_is(item, len, word))
            return true;
    return false;
}

static const struct pulse_setting keys[] = {
    /* A LIST key because it may be empty (authentication off); it holds
     * one path. */
    {"auth.token-file", PULSE_SETTING_LIST, F(token_file), "", NULL, 0, 0, NULL,
     "bearer token file (one token per line, conf/tokens.example; reloaded on SIGHUP); empty = no authentication"},
    {"auth.public", PULSE_SETTING_LIST, F(public_routes), "dashboard,openapi", NULL, 0, 0, check_public,
     "with a token file, what needs no token: dashboard (/ and /ui/*), openapi (/openapi.yaml), metrics"},
};

static const struct pulse_settings_table table = {"auth", keys, sizeof keys / sizeof keys[0],
                                                  sizeof(struct pulse_auth_settings)};

const struct pulse_settings_table *pulse_auth_settings(void)
{
    return &table;
}
