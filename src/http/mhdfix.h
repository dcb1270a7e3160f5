/* SPDX-License-Identifier: MIT */
/*
 * mhdfix.h - answers, in the broker's own words, the two request errors for
 * which libmicrohttpd 0.9.75 sends its answer's status line and headers
 * twice: a Content-Length that is not a number ("-1", "+27", "0x1b",
 * "0, 27") and one past 64 bits.
 *
 * The defect (connection.c of 0.9.75): parse_connection_headers() refuses
 * such a header with transmit_error_response(), which queues the answer,
 * builds its header block and moves the connection on to sending it; but its
 * caller then sets the state back to HEADERS_PROCESSED, and the state
 * machine runs on to START_REPLY and builds the header block a second time,
 * behind the first. The client reads "HTTP/1.1 400 ... Content-Length: 138"
 * and then, as the body, a second status line and header block followed by
 * the first 28 bytes of the HTML page. None of the broker's code runs for
 * such a request (the access handler is never called), so nothing it could
 * queue would help.
 *
 * What this module does instead: MHD reports the refusal through its error
 * log callback just before it builds that answer ("Failed to parse
 * `Content-Length' header." or "Too large value of 'Content-Length'
 * header.", on the connection's own worker thread, before anything of the
 * answer is written). The callback cannot name the connection, so the
 * worker thread remembers the last connection whose request line it parsed
 * (MHD's URI log callback) until the access handler runs for any request
 * on that thread. At the log line, that connection must have a complete
 * head and no answer queued (MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE,
 * _HTTP_STATUS): no other connection of the thread can be in that state
 * then, because MHD calls the access handler, or queues an error answer,
 * in the same pass that completes a head. Then this module writes the JSON
 * error answer itself (400 invalid_request or 413 payload_too_large, with
 * "Connection: close") and shuts the socket down for writing: MHD's own
 * doubled answer then fails with EPIPE and MHD closes the connection.
 * Whenever a check fails, nothing is written and MHD answers as before.
 *
 * Thread: every call runs on the libmicrohttpd worker that owns the
 * connection; the state is thread-local. Locks: none.
 */
#ifndef PULSE_HTTP_MHDFIX_H
#define PULSE_HTTP_MHDFIX_H

#include <stdbool.h>

struct MHD_Connection;

/* The request line of a request on conn was parsed (URI log callback). */
void pulse_mhdfix_request_line(struct MHD_Connection *conn);

/* The access handler was called for a request's head (any connection of
 * this thread): the remembered connection is forgotten. */
void pulse_mhdfix_head_handled(void);

/* conn is closing: forgotten if it was the one remembered. */
void pulse_mhdfix_closed(struct MHD_Connection *conn);

/*
 * From MHD's error log callback, with its format string: true when this
 * was one of the two refusals above and the broker answered it itself
 * (the caller still logs the line).
 */
bool pulse_mhdfix_log(const char *fmt);

#endif
