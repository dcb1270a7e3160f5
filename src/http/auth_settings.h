/* SPDX-License-Identifier: MIT */
/*
 * auth_settings.h - the settings of bearer-token authentication ([auth]):
 * where the token file is and which of the routes that serve files and
 * metrics need no token (docs/Security.md, docs/Configuration.md).
 *
 * Thread: any. Locks: none.
 */
#ifndef PULSE_HTTP_AUTH_SETTINGS_H
#define PULSE_HTTP_AUTH_SETTINGS_H

#include <stdbool.h>

#include "http/router.h"

struct pulse_settings_table;

struct pulse_auth_settings {
    char *token_file;    /* path of the token file; "" = authentication off */
    char *public_routes; /* comma-separated: dashboard, openapi, metrics; may be "" */
};

/* The table of the keys above (static storage). */
const struct pulse_settings_table *pulse_auth_settings(void);

/* True when auth.public (list) names the PUBLIC route r: "dashboard"
 * covers / and /ui/{asset}, "openapi" /openapi.yaml, "metrics" /metrics. */
bool pulse_auth_settings_is_public(const char *list, enum pulse_route r);

#endif
