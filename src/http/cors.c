/* SPDX-License-Identifier: MIT */
/*
 * cors.c - see cors.h. Origins are compared byte for byte after the list's
 * blanks are trimmed, as the Fetch standard serialises them (lower-case
 * scheme and host, no default port); the host of a same-origin check is
 * compared case-insensitively, as Host headers may be written either way.
 */
#include "http/cors.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The next comma-separated entry of *list, blanks trimmed: its start and
 * length; false at the end. */
static bool next_entry(const char **list, const char **start, size_t *len)
{
    const char *p = *list;
    while (*p == ' ' || *p == '\t' || *p == ',')
        p++;
    if (*p == '\0')
        return false;
    const char *end = p + strcspn(p, ",");
    *list = end;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *start = p;
    *len = (size_t)(end - p);
    return true;
}

bool pulse_cors_enabled(const char *origins)
{
    const char *e = NULL;
    size_t n = 0;
    return origins != NULL && next_entry(&origins, &e, &n);
}

/* The scheme is the one this server speaks: an HTTPS server's own pages
 * send https://, and an http:// origin is another server's. */
static bool same_origin(const char *origin, const char *host, bool https)
{
    const char *scheme = https ? "https://" : "http://";
    size_t n = strlen(scheme);
    if (host == NULL || host[0] == '\0' || strncasecmp(origin, scheme, n) != 0)
        return false;
    return strcasecmp(origin + n, host) == 0;
}

enum pulse_cors_verdict pulse_cors_judge(const char *origins, const char *origin, const char *host)
{
    return pulse_cors_judge_scheme(origins, origin, host, false);
}

enum pulse_cors_verdict pulse_cors_judge_scheme(const char *origins, const char *origin, const char *host, bool https)
{
    if (origin == NULL)
        return PULSE_CORS_NONE;
    if (same_origin(origin, host, https))
        return PULSE_CORS_SAME;
    const char *list = origins != NULL ? origins : "";
    const char *e = NULL;
    size_t n = 0;
    size_t olen = strlen(origin);
    while (next_entry(&list, &e, &n)) {
        if ((n == 1 && e[0] == '*') || (n == olen && memcmp(e, origin, n) == 0))
            return PULSE_CORS_ALLOWED;
    }
    return PULSE_CORS_REFUSED;
}

/* Whether e[0, n) is "scheme://host[:port]" with scheme http or https, a
 * host of letters, digits, '.', '-' (or a bracketed IPv6 address), and a
 * port of 1 to 5 digits. */
static bool origin_shape(const char *e, size_t n)
{
    size_t at = 0;
    if (n > 7 && memcmp(e, "http://", 7) == 0)
        at = 7;
    else if (n > 8 && memcmp(e, "https://", 8) == 0)
        at = 8;
    else
        return false;
    size_t host = at;
    if (e[at] == '[') {
        while (at < n && e[at] != ']')
            at++;
        if (at == n)
            return false;
        at++;
    } else {
        while (at < n &&
               (e[at] == '.' || e[at] == '-' || (e[at] >= 'a' && e[at] <= 'z') || (e[at] >= '0' && e[at] <= '9')))
            at++;
    }
    if (at == host)
        return false;
    if (at == n)
        return true;
    if (e[at] != ':')
        return false;
    size_t digits = n - at - 1;
    if (digits == 0 || digits > 5)
        return false;
    for (size_t i = at + 1; i < n; i++)
        if (e[i] < '0' || e[i] > '9')
            return false;
    return true;
}

pulse_status_t pulse_cors_check_origins(const char *name, const char *value, char *errbuf, size_t errlen)
{
    const char *list = value;
    const char *e = NULL;
    size_t n = 0;
    while (next_entry(&list, &e, &n)) {
        if ((n == 1 && e[0] == '*') || origin_shape(e, n))
            continue;
        pulse_errbuf_set(errbuf, errlen,
                         "%s: \"%.*s\" is not an origin: write scheme://host[:port] exactly as the browser sends "
                         "it in Origin (http or https, lower case, no path or trailing slash), or * for any",
                         name, (int)(n > 200 ? 200 : n), e);
        return PULSE_INVALID;
    }
    return PULSE_OK;
}

pulse_status_t pulse_cors_check_switch(const char *name, const char *value, char *errbuf, size_t errlen)
{
    if (strcmp(value, "on") == 0 || strcmp(value, "off") == 0)
        return PULSE_OK;
    pulse_errbuf_set(errbuf, errlen, "%s: \"%s\" is neither on nor off", name, value);
    return PULSE_INVALID;
}
