/* SPDX-License-Identifier: MIT */
/*
 * server.h - the HTTP gateway of pulsed: a libmicrohttpd daemon (epoll,
 * internal thread pool, suspend/resume) serving the HTTP API v1 on top of
 * a broker.
 *
 * No worker thread ever waits for an fsync, a metadata write, a long-poll
 * or a remote system: publishes, admin requests (topic create, patch and
 * delete, cursor commits, consumer deletes) and long-polls suspend their
 * connection and the broker's callbacks resume it; cursor and consumer
 * reads complete inline or resume the connection later (async.c). The
 * broker calls a worker makes synchronously do not wait (broker/broker.h):
 * topic lookups, /readyz and /metrics answer from the broker's memory (the
 * metrics' consumer lag scans the metadata store's cursor keys), and a
 * fetch reads at most max_bytes from the page cache or the disk.
 * docs/Architecture.md section 10 has the whole table.
 *
 * Lifecycle: pulse_server_create (listening; /readyz 503 while the broker
 * recovers) -> pulse_server_attach -> pulse_server_set_ready -> ... ->
 * pulse_server_shutdown -> pulse_server_destroy.
 */
#ifndef PULSE_HTTP_SERVER_H
#define PULSE_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_server;
struct pulse_broker;
struct pulse_config;

/*
 * Binds cfg->listen and starts the daemon. cfg and broker (nullable: attach
 * it later with pulse_server_attach; until then every route but /healthz
 * answers 503) are borrowed and must outlive the server. errbuf (nullable) gets a one-line reason:
 * PULSE_INVALID (bad listen address), PULSE_IO (bind/listen failed, e.g.
 * address in use), PULSE_NOMEM. On failure *out is untouched.
 * Thread: the main thread, with SIGPIPE ignored and the stop signals
 * blocked (the daemon's threads inherit the mask).
 */
pulse_status_t pulse_server_create(const struct pulse_config *cfg, struct pulse_broker *broker,
                                   struct pulse_server **out, char *errbuf, size_t errlen);

/* Hands the server its broker once recovery is done. Thread: any, once. */
void pulse_server_attach(struct pulse_server *srv, struct pulse_broker *broker);

/* The bound TCP port (useful with port 0). Thread: any. */
uint16_t pulse_server_port(const struct pulse_server *srv);

/*
 * SIGHUP: reads tls.cert-file and tls.key-file again and serves them from
 * the next TLS handshake on; the listener and open connections stay. On
 * failure (PULSE_INVALID, PULSE_NOMEM) the certificate served so far
 * stays, and errbuf names the file and the reason; on success errbuf says
 * what was reloaded (and that a changed tls.client-ca-file takes a
 * restart). PULSE_OK and nothing done without HTTPS. Thread: any (main's
 * signal loop). Locks: tls.h's key pair mutex.
 */
pulse_status_t pulse_server_reload_tls(struct pulse_server *srv, char *errbuf, size_t errlen);

/* Flips /readyz between 200 and 503. Thread: any. Locks: none (atomic). */
void pulse_server_set_ready(struct pulse_server *srv, bool ready);

/*
 * Graceful stop: readiness 503, stop accepting, answer new requests 503,
 * drain the broker (parked long-polls answer, pending publishes complete),
 * wait up to deadline_ms for in-flight requests, stop the daemon.
 * PULSE_BUSY if a connection was still suspended at the deadline: the
 * daemon is then left running (stopping it would abort) and the caller
 * should exit without closing the broker.
 * Thread: the main thread, once.
 */
pulse_status_t pulse_server_shutdown(struct pulse_server *srv, int64_t deadline_ms);

/* Stops the daemon if still running and frees the server. NULL is a no-op. */
void pulse_server_destroy(struct pulse_server *srv);

#endif
