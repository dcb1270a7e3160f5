/* SPDX-License-Identifier: MIT */
/*
 * conns.h - the gateway's registry of open TCP connections and the
 * deadlines for request heads (server.header-timeout) and request bodies
 * (server.body-timeout, server.body-min-rate).
 *
 * Why: libmicrohttpd's connection timeout is an inactivity timeout, so a
 * client that sends one header line, or one body byte, every few seconds
 * keeps a connection (and a slot of server.max-connections) forever. Here
 * every connection carries a deadline while the client owes us bytes:
 *   - waiting for a request head: the moment it became ready for a request
 *     (accepted, or the previous answer completed on a kept-alive
 *     connection) plus the head timeout;
 *   - receiving a request body: the moment the head arrived plus the body
 *     timeout. When that window ends with the body still incomplete, the
 *     connection gets another window only if the body arrived at
 *     body-min-rate or faster during it (at least min-rate x timeout bytes);
 *     with a min-rate of 0 the whole body is due within one window.
 * While every connection slot is taken (server.max-connections open), a
 * new client waits in the listen queue until one frees, however promptly
 * it would send its request; so then a head or a body window is due one
 * second after its start instead of at its timeout. Idle kept-alive
 * connections, heads still trickling in and bodies slower than the minimum
 * rate give their slots up within about a second (nginx likewise closes
 * idle kept-alive connections when it runs out of them).
 * When a deadline passes, the registry shuts the socket down (shutdown(2),
 * both directions): libmicrohttpd then sees end-of-file, closes the
 * connection the normal way and frees its slot. Nothing is answered (a
 * client that never finished its request gets no status, as with nginx's
 * client_header_timeout). An idle kept-alive connection is a connection
 * waiting for a head, so it is closed after the head timeout too. Between
 * the end of the body and the end of the answer (handlers, suspended
 * publishes and long-polls, answers being written) no deadline applies.
 *
 * Method: one list per phase, each in order of start time by construction
 * (entries are appended with start = now, taken under the lock; a body
 * that earns a new window is moved to the tail the same way), which is
 * deadline order, since every entry of a list has the same allowance. A
 * thread sleeps until the earliest deadline of the two lists, handles
 * every entry that is due and sleeps again; the connection that fills the
 * server wakes it, as allowances then shrink. Cost: O(1)
 * per event, O(expired) per wake-up; body bytes are counted with one
 * relaxed atomic add per upload chunk, no lock.
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
 * Locks: one mutex, held briefly by every call but pulse_conns_body_bytes
 * and by the sweeper; never held while calling out.
 */
#ifndef PULSE_HTTP_CONNS_H
#define PULSE_HTTP_CONNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_conns;
struct pulse_conn;

/* The deadlines (see above): head_timeout_ms and body_timeout_ms are at
 * least 1; body_min_rate is bytes per second, 0 = none; max_connections is
 * the server's connection limit (0: the registry never sees it full). */
struct pulse_conns_limits {
    int64_t head_timeout_ms;
    int64_t body_timeout_ms;
    uint64_t body_min_rate;
    uint64_t max_connections;
};

/*
 * Starts a registry with these deadlines. PULSE_NOMEM, or PULSE_IO when the
 * sweeper thread cannot start. *out untouched on failure.
 */
pulse_status_t pulse_conns_create(const struct pulse_conns_limits *limits, struct pulse_conns **out);

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
 * The access handler saw a request head on c: the head deadline no longer
 * applies, the body deadline starts now. false when the head deadline had
 * already passed (the socket is being shut down): the caller should drop
 * the request.
 */
bool pulse_conns_head_arrived(struct pulse_conns *cs, struct pulse_conn *c);

/* n more body bytes of the current request arrived on c. Thread: c's own
 * worker. Locks: none (an atomic counter the sweeper reads). */
void pulse_conns_body_bytes(struct pulse_conn *c, uint64_t n);

/*
 * The whole request on c has arrived (its body, if any, is complete): the
 * body deadline no longer applies. false when it had already passed (the
 * socket is being shut down): the caller must drop the request without
 * acting on it, since no answer could reach the client.
 */
bool pulse_conns_body_done(struct pulse_conns *cs, struct pulse_conn *c);

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

/* What pulse_conns_stats reports (metrics). */
struct pulse_conns_counts {
    uint64_t open;          /* open connections */
    uint64_t head_timeouts; /* closed at the head deadline since start */
    uint64_t body_timeouts; /* closed at the body deadline since start */
    uint64_t busy_closes;   /* of both, closed after 1 s as the server was full */
    uint64_t sweeps;        /* times the sweeper woke up and looked */
};

/* Locks: the registry mutex. */
void pulse_conns_stats(struct pulse_conns *cs, struct pulse_conns_counts *out);

#endif
