/* SPDX-License-Identifier: MIT */
/*
 * server_int.h - private to the server_*.c files of src/http: how the
 * pieces of the HTTP server call each other. Handlers use http_int.h only.
 *
 * The server is one module split by concern:
 *   server.c          the daemon's lifecycle: listen, start, stop
 *   server_access.c   a request's life: context, refusals, body, dispatch,
 *                     suspend/resume, completion
 *   server_checks.c   refusals decided from the request line and headers:
 *                     framing (smuggling), field syntax, Host, query names
 *   server_hooks.c    libmicrohttpd's connection-level callbacks: the
 *                     deadline registry (conns.h), the target notes, the
 *                     log (mhdfix.h)
 *   server_input.c    reading a request: JSON body, query, path
 *                     parameters, field validators
 *   server_mem.c      request memory: the budget, charged allocations
 *                     (jansson's included), the request pool
 *   server_metrics.c  the HTTP metrics registry and its Prometheus text
 *   server_reply.c    answers: JSON, errors, the common headers
 *
 * Thread: as in http_int.h - everything on the MHD worker that owns the
 * request's connection, except where noted.
 */
#ifndef PULSE_HTTP_SERVER_INT_H
#define PULSE_HTTP_SERVER_INT_H

#include <microhttpd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "http/http_int.h"

/* ---- server_access.c: MHD's request callbacks ------------------------- */

/* MHD_AccessHandlerCallback: creates the context on the first call,
 * collects the body, runs the handler or the resume function. */
enum MHD_Result pulse_server_on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                       const char *version, const char *upload_data, size_t *upload_data_size,
                                       void **con_cls);
/* MHD_OPTION_NOTIFY_COMPLETED: the one place a context is freed (its
 * metrics recorded, its memory given back). */
void pulse_server_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                               enum MHD_RequestTerminationCode toe);

/* ---- server_checks.c: refusals from the head alone -------------------- */

/* Each answers (400, 413 or 501; framing and field errors also close the
 * connection) and returns true when r is refused. */
bool pulse_server_refuse_framing(struct pulse_hreq *r);
bool pulse_server_refuse_headers(struct pulse_hreq *r);
bool pulse_server_refuse_query(struct pulse_hreq *r);
/* Why the request line is refused (400 and close), or NULL. */
const char *pulse_server_line_problem(struct pulse_conn *hc, const char *method, const char *url, const char *version);
/* Copies text for an error message: printable ASCII only (anything else
 * becomes '?'); returns out. */
const char *pulse_server_printable(const char *text, char *out, size_t len);

/* ---- server_auth.c: tokens ------------------------------------------------ */

/* Loads auth.token-file into srv->auth and applies the safe default: a
 * non-loopback server.listen without a token file is refused (PULSE_INVALID,
 * errbuf says why and how to proceed) unless server.allow-insecure=on,
 * which is warned about. PULSE_INVALID also for a bad token file. Thread:
 * main, before the daemon starts. */
pulse_status_t pulse_server_auth_start(struct pulse_server *srv, char *errbuf, size_t errlen);
/* Frees srv->auth (the daemon is stopped). */
void pulse_server_auth_stop(struct pulse_server *srv);
/* Answers 401 (no or unknown token, with WWW-Authenticate) or 403 (the
 * route's grant is missing) and returns true when r is refused; keeps the
 * token in r otherwise. From the head alone, before the body. */
bool pulse_server_refuse_auth(struct pulse_hreq *r);
/* Gives back r's token table reference (completion). */
void pulse_server_auth_done(struct pulse_hreq *r);

/* ---- server_hooks.c: MHD's connection-level callbacks ------------------ */

/* MHD_OPTION_NOTIFY_CONNECTION: registers and unregisters connections
 * with the deadline registry (conns.h), and counts them (srv->clients). */
void pulse_server_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                                enum MHD_ConnectionNotificationCode toe);
/* Tells the broker how many connections are open (srv->clients;
 * pulse_broker_note_clients), when one is attached. Thread: any. Locks:
 * none. */
void pulse_server_note_clients(struct pulse_server *srv);
/* MHD_OPTION_URI_LOG_CALLBACK: notes the raw request target. */
void *pulse_server_on_uri(void *cls, const char *uri, struct MHD_Connection *conn);
/* MHD_OPTION_UNESCAPE_CALLBACK: MHD's decoding plus a control-character
 * check. */
size_t pulse_server_on_unescape(void *cls, struct MHD_Connection *conn, char *s);
/* MHD_OPTION_EXTERNAL_LOGGER: rate-limited, through mhdfix.h first.
 * Thread: any MHD thread. */
void pulse_server_mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* ---- server_mem.c ----------------------------------------------------- */

/* Disposes of r's handler state, then frees r's pool; r's budget is given
 * back by the caller. */
void pulse_server_pool_free(struct pulse_hreq *r);

/* ---- server_metrics.c ------------------------------------------------- */

/* Counts a completed request (route, method, status, latency). Locks:
 * srv->mlock. */
void pulse_server_metrics_record(struct pulse_server *srv, const struct pulse_hreq *r, double secs);

/* ---- server_reply.c --------------------------------------------------- */

/* 500 with a fixed body that needs no allocation. */
void pulse_server_reply_oom(struct pulse_hreq *r);

#endif
