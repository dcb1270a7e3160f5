/* SPDX-License-Identifier: MIT */
/*
 * h_static.c - the files compiled into pulsed (embed.h): the dashboard at
 * "/" and its assets at "/ui/{asset}", and /openapi.yaml.
 *
 * Every such answer carries an entity tag made at build time and
 * "Cache-Control: no-cache": a browser keeps its copy but asks each time,
 * and an If-None-Match naming the current tag gets a 304 without a body, so
 * a reload costs a few hundred bytes and a new build is seen at once (no
 * versioned file names to keep in step with index.html). The
 * Content-Security-Policy allows scripts and styles from this server only
 * (the page has no inline script or style attribute), and connections to
 * any server, since the dashboard can watch a pulsed on another origin
 * (that server's CORS setting decides whether it answers).
 */
#include <string.h>

#include "http/embed.h"
#include "http/http_int.h"
#include "http/server_int.h"

#define DASHBOARD_CSP                                                                                \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src *; " \
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/* True when the If-None-Match value (a comma-separated list of entity tags,
 * weak or strong, or "*") names etag. Weak comparison (RFC 9110, 13.1.2). */
static bool etag_listed(const char *list, const char *etag)
{
    size_t elen = strlen(etag);
    const char *p = list;
    while (*p != '\0') {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, ",");
        size_t len = n;
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        const char *tag = p;
        if (len >= 2 && strncmp(tag, "W/", 2) == 0) {
            tag += 2;
            len -= 2;
        }
        if ((len == 1 && tag[0] == '*') || (len == elen && strncmp(tag, etag, len) == 0))
            return true;
        p += n;
    }
    return false;
}

static void reply_file(struct pulse_hreq *r, const struct pulse_embed_file *f)
{
    const char *inm = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
    bool fresh = inm != NULL && etag_listed(inm, f->etag);
    struct MHD_Response *resp = NULL;
    r->bytes_out = fresh ? 0 : (int64_t)f->len;
    if (fresh)
        resp = MHD_create_response_from_buffer(0, (void *)(uintptr_t) "", MHD_RESPMEM_PERSISTENT);
    else
        resp = MHD_create_response_from_buffer(f->len, (void *)(uintptr_t)f->data, MHD_RESPMEM_PERSISTENT);
    if (resp == NULL) {
        pulse_server_reply_oom(r);
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, f->etag);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Content-Security-Policy", DASHBOARD_CSP);
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    pulse_server_reply(r, fresh ? 304 : 200, resp, fresh ? NULL : pulse_embed_media_type(f->path));
}

void pulse_h_static_dashboard(struct pulse_hreq *r)
{
    const struct pulse_embed_file *f = pulse_embed_find(pulse_web_files, "/ui/index.html");
    if (f == NULL) {
        pulse_server_reply_error(r, 404, "not_found", "this pulsed was built without its dashboard");
        return;
    }
    reply_file(r, f);
}

void pulse_h_static_asset(struct pulse_hreq *r)
{
    char path[96];
    const struct pulse_embed_file *f = NULL;
    const struct pulse_route_param *a = &r->match.asset;
    /* Asset names are short; a longer one cannot be in the table. */
    if (a->len + sizeof "/ui/" <= sizeof path) {
        memcpy(path, "/ui/", 4);
        memcpy(path + 4, a->p, a->len);
        path[4 + a->len] = '\0';
        f = pulse_embed_find(pulse_web_files, path);
    }
    if (f == NULL) {
        char shown[160];
        pulse_server_reply_error(r, 404, "not_found", "no such resource: %s",
                                 pulse_server_printable(r->url, shown, sizeof shown));
        return;
    }
    reply_file(r, f);
}

void pulse_h_static_openapi(struct pulse_hreq *r)
{
    reply_file(r, &pulse_openapi_files[0]);
}
