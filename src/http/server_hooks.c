/* SPDX-License-Identifier: MIT */
/*
 * server_hooks.c - libmicrohttpd's connection-level callbacks: the glue
 * between MHD, the connection registry with its head and body deadlines
 * (conns.h) and the workarounds of mhdfix.h.
 *
 * MHD_OPTION_NOTIFY_CONNECTION registers every connection with the
 * deadline registry; the access handler then tells it when a head arrived,
 * how many body bytes came and when the body was complete, and the
 * request-completed callback that the next head is due.
 * MHD_OPTION_UNESCAPE_CALLBACK decodes the target as MHD would and flags a
 * decoded control character, which MHD would otherwise pass on as a string
 * cut at a NUL ("orders%00.archive" read as "orders");
 * MHD_OPTION_URI_LOG_CALLBACK notes the raw target before MHD cuts or
 * decodes it, so a raw NUL byte is caught as well (pulse_server_on_uri).
 * The external logger rate-limits MHD's messages.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "http/conns.h"
#include "http/http_int.h"
#include "http/mhdfix.h"
#include "http/server_int.h"

void pulse_server_note_clients(struct pulse_server *srv)
{
    struct pulse_broker *broker = atomic_load(&srv->broker);
    if (broker == NULL)
        return;
    /* Two workers may count and tell in the other order: tell again until
     * what was told is what is counted. */
    unsigned told;
    do {
        told = atomic_load(&srv->clients);
        pulse_broker_note_clients(broker, told);
    } while (atomic_load(&srv->clients) != told);
}

void pulse_server_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                                enum MHD_ConnectionNotificationCode toe)
{
    struct pulse_server *srv = cls;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        pulse_mhdfix_closed(conn);
        /* Called before MHD closes the socket (see conns.h). */
        pulse_conns_closed(srv->conns, *socket_context);
        *socket_context = NULL;
        atomic_fetch_sub(&srv->clients, 1u);
        pulse_server_note_clients(srv);
        return;
    }
    atomic_fetch_add(&srv->clients, 1u);
    pulse_server_note_clients(srv);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    int fd = ci != NULL ? (int)ci->connect_fd : -1;
    *socket_context = fd >= 0 ? pulse_conns_opened(srv->conns, fd) : NULL;
    /* A connection without an entry would have no head deadline: refuse
     * it (MHD reads end-of-file and closes it; pulse_server_on_access drops it
     * too). */
    if (*socket_context == NULL && fd >= 0)
        (void)shutdown(fd, SHUT_RDWR);
}

/*
 * MHD_OPTION_URI_LOG_CALLBACK. libmicrohttpd 0.9.75 (connection.c,
 * parse_initial_message_line) calls it once per request with the raw
 * request target - path and query as they came, before either is split at
 * '?' or decoded - after writing a NUL over the blank before the HTTP
 * version, and before the unescape callback and the access handler. A raw
 * NUL byte inside the target cuts every string MHD hands over later
 * ("DELETE /v1/topics/orders<NUL>.archive" reaches the handler as
 * "/v1/topics/orders"), and nothing else reports it; so the length seen
 * here is kept for the access handler, which compares it with where MHD
 * put the version (server_checks.c). A raw control byte, blank or DEL
 * in the target (never valid there, RFC 9112 3.2) is flagged here too, so
 * it is refused whatever decoding makes of it. Returns NULL: the request's
 * context is still made by the access handler.
 */
void *pulse_server_on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    pulse_mhdfix_request_line(conn);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci == NULL || ci->socket_context == NULL)
        return NULL;
    struct pulse_target_note *note = pulse_conns_target(ci->socket_context);
    note->raw_len = SIZE_MAX;
    note->raw_bad = false;
    note->decoded_bad = false;
    if (uri == NULL)
        return NULL;
    size_t n = 0;
    for (; uri[n] != '\0'; n++) {
        unsigned char c = (unsigned char)uri[n];
        if (c <= 0x20 || c == 0x7f)
            note->raw_bad = true;
    }
    note->raw_len = n;
    return NULL;
}

/*
 * MHD's own decoding (MHD_http_unescape: %HH, nothing else), plus a check
 * MHD lacks: a control character in the result (a NUL cuts the string MHD
 * hands over; CR, LF and the rest have no place in a name, key or number)
 * flags the request, which the access handler refuses with 400. Called for the path
 * and for every query name and value, on the connection's own thread,
 * before the access handler.
 */
size_t pulse_server_on_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
    (void)cls;
    size_t n = MHD_http_unescape(s);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) {
            const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
            if (ci != NULL && ci->socket_context != NULL)
                pulse_conns_target(ci->socket_context)->decoded_bad = true;
            break;
        }
    }
    return n;
}

void pulse_server_mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Rate-limited by MHD's format string: at the descriptor limit MHD retries
 * accept() in a loop and reports every failure (c-notes section 8). Two of
 * MHD's refusals are answered by mhdfix.h before MHD answers them wrongly. */
void pulse_server_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    (void)pulse_mhdfix_log(fmt);
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    /* Every client that leaves an event stream (a closed browser tab) ends
     * it with one of these failed sends: expected, so not a warning. */
    bool left = strstr(fmt, "chunked response body") != NULL || strstr(fmt, "send the footers") != NULL;
    pulse_log_limited(left ? PULSE_LOG_DEBUG : PULSE_LOG_WARN, fmt, "libmicrohttpd: %s", msg);
}
