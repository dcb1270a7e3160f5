/* SPDX-License-Identifier: MIT */
/*
 * server_checks.c - refusals decided from the request line and headers
 * alone, before a byte of body is read: a NUL, control byte or blank in the
 * request line, header fields that are not tokens or hold control
 * characters or are folded, framing that could smuggle a second request
 * (two Content-Lengths, Content-Length with Transfer-Encoding, a coding
 * other than exactly "chunked"), a missing or repeated Host, and query
 * parameters the route does not take. libmicrohttpd 0.9.75 checks none of
 * these (c-notes section 8); each is answered 400, 413 or 501, and the
 * framing and field errors close the connection, since the bytes after such
 * a head cannot be trusted to start a request.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http/conns.h"
#include "http/http_int.h"
#include "http/server_int.h"

/* Copies text for an error message: printable ASCII only (anything else
 * becomes '?'), so a hostile path or name cannot break the JSON body. */
const char *pulse_server_printable(const char *text, char *out, size_t len)
{
    size_t i = 0;
    for (; text != NULL && text[i] != '\0' && i + 1 < len; i++)
        out[i] = isprint((unsigned char)text[i]) ? text[i] : '?';
    out[i] = '\0';
    return out;
}

struct framing {
    unsigned n_length;
    unsigned n_encoding;
    const char *length;
    const char *encoding;
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct framing *f = cls;
    if (key != NULL && strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        f->n_length++;
        f->length = value != NULL ? value : "";
    } else if (key != NULL && strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        f->n_encoding++;
        f->encoding = value != NULL ? value : "";
    }
    return MHD_YES;
}

/*
 * RFC 9112 6.3: a request whose body length is ambiguous is refused and its
 * connection closed, because the bytes after it cannot be trusted to start a
 * request (libmicrohttpd 0.9.75 takes the first of two Content-Lengths, or
 * chunked over Content-Length, and would parse a smuggled request). Checked
 * on every request, whether or not its route takes a body.
 *
 * Transfer-Encoding is taken only when it is exactly "chunked" (any case),
 * the one comparison MHD makes (MHD_str_equal_caseless_): anything else -
 * another coding, a list, "chunked " with a blank MHD keeps - would leave
 * MHD reading a body of unknown length that never ends, so it is 501.
 */
bool pulse_server_refuse_framing(struct pulse_hreq *r)
{
    struct framing f = {0, 0, NULL, NULL};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_framing, &f);
    if (f.n_length == 0 && f.n_encoding == 0)
        return false;
    r->close = true;
    if (f.n_length > 0 && f.n_encoding > 0) {
        pulse_server_reply_error(r, 400, "invalid_request",
                                 "a request must not carry both Content-Length and Transfer-Encoding");
        return true;
    }
    if (f.n_length > 1) {
        pulse_server_reply_error(r, 400, "invalid_request", "a request must carry at most one Content-Length");
        return true;
    }
    if (f.n_encoding > 0) {
        if (f.n_encoding == 1 && strcasecmp(f.encoding, "chunked") == 0) {
            r->close = false;
            return false;
        }
        char enc[64];
        pulse_server_reply_error(r, 501, "not_implemented",
                                 "Transfer-Encoding \"%s\" is not supported; only exactly \"chunked\" is (no other "
                                 "coding, no list, no blanks)",
                                 f.n_encoding > 1 ? "(several)" : pulse_server_printable(f.encoding, enc, sizeof enc));
        return true;
    }
    const char *p = f.length;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t digits = strspn(p, "0123456789");
    size_t blanks = strspn(p + digits, " \t");
    if (digits == 0 || p[digits + blanks] != '\0') {
        pulse_server_reply_error(r, 400, "invalid_request", "Content-Length must be a non-negative integer");
        return true;
    }
    while (digits > 1 && *p == '0') {
        p++;
        digits--;
    }
    char text[32];
    int64_t len = 0;
    bool fits = digits < sizeof text;
    if (fits) {
        memcpy(text, p, digits);
        text[digits] = '\0';
        fits = pulse_request_parse_i64(text, 0, INT64_MAX, &len) == PULSE_OK;
    }
    if (!fits) {
        /* Answered at once, instead of waiting for a body that never ends. */
        pulse_server_reply_error(r, 413, "payload_too_large", "Content-Length %.20s... does not fit in 63 bits", p);
        return true;
    }
    r->close = false;
    return false;
}

/*
 * Is the request line the one the client sent, with no NUL byte inside?
 * libmicrohttpd 0.9.75 parses the line in place in its read buffer: the
 * method runs from the line's start to the first blank (written over with
 * a NUL), then blanks, then the target (url), then a NUL written over the
 * blank before the version, which is 8 characters "HTTP/d.d" (a line
 * without a version is refused by MHD itself with 400). So the target MHD
 * saw is exactly version - 1 - url bytes long; pulse_server_on_uri noted its strlen
 * before anything was split or decoded, and a raw NUL makes the two
 * differ. The method likewise must end at the NUL MHD wrote, followed only
 * by blanks up to the target ("DELETE<NUL>x /..." would read as DELETE).
 */
static bool request_line_whole(const struct pulse_target_note *note, const char *method, const char *url,
                               const char *version)
{
    if (note->raw_len == SIZE_MAX || method == NULL || url == NULL || version == NULL || version[0] == '\0')
        return false;
    if (version <= url || (size_t)(version - 1 - url) != note->raw_len)
        return false;
    const char *p = method + strlen(method);
    if (p >= url)
        return false;
    for (p++; p < url; p++)
        if (*p != ' ')
            return false;
    return true;
}

/* Why the request line is refused (400 and close), or NULL. */
const char *pulse_server_line_problem(struct pulse_conn *hc, const char *method, const char *url, const char *version)
{
    const struct pulse_target_note *note = pulse_conns_target(hc);
    if (!request_line_whole(note, method, url, version))
        return "the request line holds a NUL byte";
    if (note->raw_bad)
        return "the request target holds a raw blank, control character or DEL (percent-encode it)";
    return NULL;
}

struct header_check {
    const char *name;    /* the first bad field */
    const char *problem; /* NULL: all fields are clean */
    unsigned n_host;
};

/*
 * Did MHD store this field as it parsed it from one line? libmicrohttpd
 * 0.9.75 parses a field line in place: it writes a NUL over the colon and
 * skips the blanks after it, so the value starts right after the name's
 * NUL and some blanks in the same buffer. A field continued on a folded
 * line (obs-fold, a line starting with a blank) breaks that: MHD appends
 * the continuation to a copy of the NAME, elsewhere ("Content-Length: 0"
 * + " 27" becomes the field "Content-Length27" with the value "0"), and a
 * raw NUL inside the name cuts it short. Walking back from the value over
 * the blanks must land on the NUL that ends the name. (The walk stays in
 * the line: MHD's value always follows a colon in its read buffer.)
 */
static bool field_whole(const char *key, const char *value)
{
    const char *p = value;
    while (p[-1] == ' ' || p[-1] == '\t')
        p--;
    return p[-1] == '\0' && p - 1 == key + strlen(key);
}

/* Equal ignoring case, with '_' taken for '-' in name. */
static bool name_like(const char *name, const char *want)
{
    for (; *name != '\0' && *want != '\0'; name++, want++)
        if (tolower((unsigned char)(*name == '_' ? '-' : *name)) != tolower((unsigned char)*want))
            return false;
    return *name == '\0' && *want == '\0';
}

static enum MHD_Result check_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct header_check *h = cls;
    const unsigned char *k = (const unsigned char *)(key != NULL ? key : "");
    const unsigned char *v = (const unsigned char *)(value != NULL ? value : "");
    h->name = key != NULL ? key : "";
    if (k[0] == '\0')
        h->problem = "has an empty name";
    for (; h->problem == NULL && *k != '\0'; k++)
        if (*k <= 0x20 || *k >= 0x7f)
            h->problem = "has a blank, control character or non-ASCII byte in its name";
    for (; h->problem == NULL && *v != '\0'; v++)
        if ((*v < 0x20 && *v != '\t') || *v == 0x7f)
            h->problem = "has a control character in its value";
    if (h->problem == NULL && key != NULL && value != NULL && !field_whole(key, value))
        h->problem = "is continued on a folded line (obs-fold), or holds a NUL byte in its name";
    if (h->problem == NULL && strchr(h->name, '_') != NULL &&
        (name_like(h->name, MHD_HTTP_HEADER_CONTENT_LENGTH) || name_like(h->name, MHD_HTTP_HEADER_TRANSFER_ENCODING)))
        h->problem = "is a framing field spelt with '_' for '-', which a gateway may read as the real one";
    if (h->problem == NULL && strcasecmp(h->name, MHD_HTTP_HEADER_HOST) == 0)
        h->n_host++;
    return h->problem == NULL ? MHD_YES : MHD_NO;
}

/*
 * RFC 9112 5.1, 5.2 and RFC 9110 5.5: a field name is a token (no blank
 * before the colon), a field value holds no control character but HTAB, and
 * no field is folded onto a second line. MHD 0.9.75 checks none of these:
 * "Content-Length : 5" is stored under the name "Content-Length ", and a
 * folded Content-Length under a longer name (field_whole), neither of which
 * MHD or we read as the body's length, so the body would be parsed as the
 * next request. "Transfer_Encoding" is a token, but CGI-style gateways map
 * '-' and '_' alike, so a front end may take it for Transfer-Encoding while
 * we do not: refused too, as is Content_Length.
 * (A raw NUL in a value is another matter: MHD cuts the value there, and
 * MHD and these checks both see only the part before it; docs/API.md.)
 *
 * RFC 9112 3.2: an HTTP/1.1 request carries exactly one Host field; no
 * request carries two (which one a proxy routed by is anyone's guess).
 */
bool pulse_server_refuse_headers(struct pulse_hreq *r)
{
    struct header_check h = {NULL, NULL, 0};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, check_header, &h);
    char name[72];
    if (h.problem != NULL) {
        r->close = true;
        pulse_server_reply_error(r, 400, "invalid_request", "header field \"%s\" %s",
                                 pulse_server_printable(h.name, name, sizeof name), h.problem);
        return true;
    }
    if (h.n_host > 1 || (h.n_host == 0 && r->http11)) {
        r->close = true;
        pulse_server_reply_error(r, 400, "invalid_request", "%s",
                                 h.n_host > 1 ? "a request must carry at most one Host header field"
                                              : "an HTTP/1.1 request must carry a Host header field");
        return true;
    }
    return false;
}

struct query_check {
    enum pulse_route route;
    enum pulse_method method;
    unsigned seen; /* bit i: the router's parameter i was given */
    const char *name;
    const char *problem; /* NULL: all known, once, with values */
};

static enum MHD_Result check_query_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct query_check *q = cls;
    int i = pulse_router_query_index(q->route, q->method, key != NULL ? key : "");
    q->name = key != NULL ? key : "";
    if (i < 0)
        q->problem = "is not known on this route";
    else if (q->seen & (1u << i))
        q->problem = "is given more than once";
    else if (value == NULL)
        q->problem = "needs a value (name=value)";
    if (q->problem != NULL)
        return MHD_NO;
    q->seen |= 1u << i;
    return MHD_YES;
}

/* Every query parameter must be one the route takes, once: a misspelt one
 * ("ofset") must never be ignored in silence. */
bool pulse_server_refuse_query(struct pulse_hreq *r)
{
    struct query_check q = {r->match.route, r->method, 0, NULL, NULL};
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, check_query_arg, &q);
    if (q.problem == NULL)
        return false;
    char name[104];
    pulse_server_reply_error(r, 400, "invalid_request", "query parameter \"%s\" %s",
                             pulse_server_printable(q.name, name, sizeof name), q.problem);
    return true;
}
