/* SPDX-License-Identifier: MIT */
/*
 * mhdfix.c - see mhdfix.h. The answer is written with one non-blocking
 * send(2) of a few hundred bytes: on a connection whose earlier answers
 * were all sent by MHD, the socket's send buffer takes it whole. If it does
 * not (a client that stopped reading earlier answers), the socket is shut
 * down all the same: that client gets a cut answer and the close, never a
 * second answer behind it.
 */
#include "http/mhdfix.h"

#include <microhttpd.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "http/request.h"

/* The connection whose request line this worker parsed last, until the
 * access handler runs for a head on this worker. */
static _Thread_local struct MHD_Connection *parsing;

void pulse_mhdfix_request_line(struct MHD_Connection *conn)
{
    parsing = conn;
}

void pulse_mhdfix_head_handled(void)
{
    parsing = NULL;
}

void pulse_mhdfix_closed(struct MHD_Connection *conn)
{
    if (parsing == conn)
        parsing = NULL;
}

/* MHD 0.9.75's messages (connection.c, parse_connection_headers). */
static const char bad_length[] = "Failed to parse `Content-Length' header.";
static const char huge_length[] = "Too large value of 'Content-Length' header.";

/* Is conn where MHD is refusing a head right now (see mhdfix.h)? */
static bool refusing_now(struct MHD_Connection *conn)
{
    return conn != NULL && MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE) != NULL &&
           MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS) == NULL;
}

bool pulse_mhdfix_log(const char *fmt)
{
    bool huge = strncmp(fmt, huge_length, sizeof huge_length - 1) == 0;
    if (!huge && strncmp(fmt, bad_length, sizeof bad_length - 1) != 0)
        return false;
    struct MHD_Connection *conn = parsing;
    parsing = NULL;
    if (!refusing_now(conn))
        return false;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci == NULL)
        return false;
    char body[192];
    int blen = snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}",
                        huge ? "payload_too_large" : "invalid_request",
                        huge ? "Content-Length does not fit in 64 bits"
                             : "Content-Length must be a non-negative integer");
    char id[PULSE_REQUEST_ID_MAX + 1];
    pulse_request_id_generate(id);
    unsigned status = huge ? MHD_HTTP_CONTENT_TOO_LARGE : MHD_HTTP_BAD_REQUEST;
    char answer[512];
    int alen = snprintf(answer, sizeof answer,
                        "HTTP/1.1 %u %s\r\nConnection: close\r\nX-Request-Id: %s\r\nContent-Type: application/json\r\n"
                        "Content-Length: %d\r\n\r\n%s",
                        status, MHD_get_reason_phrase_for(status), id, blen, body);
    if (blen < 0 || alen < 0 || (size_t)alen >= sizeof answer)
        return false;
    (void)send(ci->connect_fd, answer, (size_t)alen, MSG_NOSIGNAL | MSG_DONTWAIT);
    /* MHD's own (doubled) answer now fails to send and MHD closes. */
    (void)shutdown(ci->connect_fd, SHUT_WR);
    return true;
}
