/* SPDX-License-Identifier: MIT */
/*
 * conns.h - the gateway's registry of open TCP connections and the deadline
 * for request heads (server.header-timeout).
 *
 * Why: libmicrohttpd's connection timeout is an inactivity timeout, so a
 * client that sends one header line every few seconds keeps a connection
 * (and a slot of server.max-connections) forever. Here every connection that
 * waits for a request head carries a deadline: the moment it became ready
 * for a request (accepted, or the previous answer completed on a kept-alive
 * connection) plus the head timeout. When the deadline passes before the
 * access handler saw the head, the registry shuts the socket down
 * (shutdown(2), both directions): libmicrohttpd then sees end-of-file, closes
 * the connection the normal way and frees its slot. Nothing is answered (a
 * client that never finished its request gets no status, as with nginx's
 * client_header_timeout). An idle kept-alive connection is a connection
 * waiting for a head, so it is closed after the head timeout too.
 *
 * Method: connections waiting for a head sit in one list in deadline order
 * (all deadlines are "now + the same timeout" taken under the lock, so
 * appending keeps the order); a thread sleeps until the first deadline,
 * shuts down every expired socket and sleeps again. Cost: O(1) per event,
 * O(expired) per wake-up.
 *
 * Descriptor safety: libmicrohttpd calls its connection-closed notification
 * (pulse_conns_closed) before it closes the socket, and the sweeper calls
 * shutdown(2) only on entries still registered, under the registry lock, so
 * it never touches a descriptor number that was closed and reused.
 *
 * The registry also carries what the callbacks that run before the access
 * handler learnt about the request target of the request being parsed
 * (struct pulse_target_note); they and the access handler run on the
 * connection's own worker thread, one request at a time.
 *
 * Thread: the pulse_conns_* calls come from libmicrohttpd's workers (any
 * worker for any connection); the sweeper is the registry's own thread.
 * Locks: one mutex, held briefly by every call and by the sweeper; never
 * held while calling out.
 */
#ifndef PULSE_HTTP_CONNS_H
#define PULSE_HTTP_CONNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_conns;
struct pulse_conn;

/*
 * Starts a registry whose request heads are due head_timeout_ms after a
 * connection becomes ready for a request. PULSE_NOMEM, or PULSE_IO when the
 * sweeper thread cannot start. *out untouched on failure.
 */
pulse_status_t pulse_conns_create(int64_t head_timeout_ms, struct pulse_conns **out);

/* Stops the sweeper and frees the registry and any entries left. Call only
 * once nothing calls into it any more (the daemon is stopped). NULL is a
 * no-op. */
void pulse_conns_destroy(struct pulse_conns *cs);

/*
 * A new connection on socket fd (borrowed; its owner closes it after
 * pulse_conns_closed). Returns its entry, waiting for its first head; NULL
 * on NOMEM (the caller should then shut the socket down).
 */
struct pulse_conn *pulse_conns_opened(struct pulse_conns *cs, int fd);

/* The connection is going away (before its socket is closed): its entry is
 * unlinked and freed. NULL is a no-op. */
void pulse_conns_closed(struct pulse_conns *cs, struct pulse_conn *c);

/*
 * The access handler saw a request head on c: its deadline no longer
 * applies. false when the deadline had already passed (the socket is being
 * shut down): the caller should drop the request.
 */
bool pulse_conns_head_arrived(struct pulse_conns *cs, struct pulse_conn *c);

/* The request on c completed; its next head is due within the timeout from
 * now (a kept-alive connection). */
void pulse_conns_request_done(struct pulse_conns *cs, struct pulse_conn *c);

/*
 * Notes on the request target of the request being parsed on c (server.c):
 * libmicrohttpd's URI log callback, which runs first for every request,
 * sets raw_len and raw_bad and clears decoded_bad; the unescape callback
 * sets decoded_bad; the access handler reads them on its first call.
 * Thread: c's own worker only (no lock).
 */
struct pulse_target_note {
    size_t raw_len;   /* strlen of the raw target when logged; SIZE_MAX = none seen */
    bool raw_bad;     /* a raw control byte, blank or DEL in the target */
    bool decoded_bad; /* a control character decoded from it (%00, %0a, ...) */
};
struct pulse_target_note *pulse_conns_target(struct pulse_conn *c);

/* Open connections and heads timed out since start (metrics). Locks: the
 * registry mutex. */
void pulse_conns_stats(struct pulse_conns *cs, uint64_t *open, uint64_t *head_timeouts);

#endif
