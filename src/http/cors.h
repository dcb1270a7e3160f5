/* SPDX-License-Identifier: MIT */
/*
 * cors.h - cross-origin rules of the HTTP layer (docs/API.md "Browsers and
 * CORS"): which Origin a request comes from, whether server.cors-origins
 * lets that origin read answers and write, and the values of the
 * Access-Control-* answer headers. Pure functions over strings (no
 * libmicrohttpd types): the server (server_access.c, server_reply.c) asks
 * them and adds the headers; the router owns which methods and request
 * headers each route takes.
 *
 * The rule: a request without an Origin header (curl, any program) is not a
 * browser's cross-origin request and is served as always. A request whose
 * Origin is the server's own ("http://" + Host) is same-origin (the
 * dashboard) and served as always. Any other Origin is allowed when
 * server.cors-origins lists it exactly (scheme, host and port, as browsers
 * send it) or holds "*"; its answers then carry Access-Control-Allow-Origin.
 * A write (POST, PUT, PATCH, DELETE) from an origin that is not allowed is
 * refused with 403 before its body is read, so it is never executed; a
 * read from one is answered without the CORS headers (the browser keeps
 * the answer from the page).
 *
 * Thread: any. Locks: none.
 */
#ifndef PULSE_HTTP_CORS_H
#define PULSE_HTTP_CORS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/status.h"

enum pulse_cors_verdict {
    PULSE_CORS_NONE = 0, /* no Origin header: not a cross-origin browser request */
    PULSE_CORS_SAME,     /* Origin is this server's own */
    PULSE_CORS_ALLOWED,  /* listed in server.cors-origins (or "*") */
    PULSE_CORS_REFUSED   /* any other origin */
};

/* The response headers a browser page may read (Access-Control-Expose-Headers). */
#define PULSE_CORS_EXPOSE_HEADERS                                                                                 \
    "Pulse-Next-Offset, Pulse-High-Watermark, Pulse-Log-Start-Offset, Pulse-Skipped, Retry-After, X-Request-Id, " \
    "Allow"
/* Seconds a browser may cache a preflight answer. */
#define PULSE_CORS_MAX_AGE "600"

/*
 * Judges origin (the Origin header, NULL when absent) against origins (the
 * server.cors-origins value: comma-separated exact origins or "*"; empty =
 * none) for a request whose Host header is host (nullable).
 */
enum pulse_cors_verdict pulse_cors_judge(const char *origins, const char *origin, const char *host);

/* The same for a server speaking https (true) or plain http (false): the
 * server's own origin is "<that scheme>://<Host>". pulse_cors_judge is
 * this with https false. */
enum pulse_cors_verdict pulse_cors_judge_scheme(const char *origins, const char *origin, const char *host, bool https);

/* True when origins (server.cors-origins) names at least one origin: CORS
 * is on, and every answer says Vary: Origin. */
bool pulse_cors_enabled(const char *origins);

/*
 * The check of server.cors-origins (a pulse_setting_check_fn): empty, "*",
 * or a comma-separated list of origins "scheme://host[:port]" (http or
 * https, no path, no trailing slash; blanks around commas allowed).
 * PULSE_INVALID with a message naming the key and the bad entry.
 */
pulse_status_t pulse_cors_check_origins(const char *name, const char *value, char *errbuf, size_t errlen);

/* The check of server.cors-credentials: "on" or "off". */
pulse_status_t pulse_cors_check_switch(const char *name, const char *value, char *errbuf, size_t errlen);

#endif
