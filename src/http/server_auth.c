/* SPDX-License-Identifier: MIT */
/*
 * server_auth.c - who may do what (docs/Security.md): the token file
 * loaded at start and on SIGHUP (auth.h), the refusal of a non-loopback
 * listener without tokens (server.allow-insecure), and the check of every
 * request against the grant its route needs (the router's grant table),
 * decided from the request head before a byte of the body is read.
 *
 * A request's token: pulse_server_refuse_auth looks it up once and keeps a
 * reference to its table in r (auth_tab, token) until the request
 * completes (pulse_server_auth_done), so a handler can check a name it
 * reads from the body (pulse_server_authorize), a list can show only what
 * the token covers (pulse_server_may) and the access log can name it. The
 * token itself is never copied, logged or echoed: only its name is.
 *
 * Thread: the request's MHD worker, except pulse_server_auth_start (main,
 * before the daemon starts) and pulse_server_reload (main, on SIGHUP).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "http/auth.h"
#include "http/http_int.h"
#include "http/server.h"
#include "http/server_int.h"

/* True for an address only this machine can reach: localhost, 127/8, ::1. */
static bool listen_is_loopback(const char *listen)
{
    char host[256];
    uint16_t port = 0;
    bool v6 = false;
    unsigned char a[16];
    if (pulse_server_listen_split(listen, host, sizeof host, &port, &v6) != PULSE_OK)
        return false;
    if (!v6 && strcmp(host, "localhost") == 0)
        return true;
    if (!v6)
        return inet_pton(AF_INET, host, a) == 1 && a[0] == 127;
    static const unsigned char loop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return inet_pton(AF_INET6, host, a) == 1 && memcmp(a, loop6, sizeof loop6) == 0;
}

pulse_status_t pulse_server_auth_start(struct pulse_server *srv, char *errbuf, size_t errlen)
{
    const struct pulse_config *cfg = srv->cfg;
    bool insecure = strcmp(cfg->server.allow_insecure, "on") == 0;
    if (cfg->auth.token_file[0] != '\0') {
        pulse_status_t st = pulse_auth_create(cfg->auth.token_file, &srv->auth, errbuf, errlen);
        if (st != PULSE_OK)
            return st == PULSE_NOMEM ? st : PULSE_INVALID;
        PULSE_INFO("auth: %zu token(s) from %s; public without a token: %s", pulse_auth_count(srv->auth),
                   cfg->auth.token_file, cfg->auth.public_routes[0] ? cfg->auth.public_routes : "(nothing)");
    }
    if (srv->auth == NULL && !listen_is_loopback(cfg->server.listen)) {
        if (!insecure) {
            pulse_errbuf_set(errbuf, errlen,
                             "refusing to listen on %s without authentication: anyone who can reach it could read, "
                             "write and delete every topic. Set auth.token-file (docs/Security.md; make entries with "
                             "pulsed --hash-token), listen on a loopback address (127.0.0.1:PORT), or, if the "
                             "network itself protects the port, set server.allow-insecure=on",
                             cfg->server.listen);
            return PULSE_INVALID;
        }
        PULSE_WARN("server.allow-insecure=on: serving %s WITHOUT AUTHENTICATION; anyone who can reach it can read, "
                   "write and delete every topic (set auth.token-file to require tokens)",
                   cfg->server.listen);
    } else if (insecure) {
        PULSE_WARN("server.allow-insecure=on is set; it has no effect here (%s), but would let a non-loopback "
                   "address serve without tokens",
                   srv->auth != NULL ? "a token file is configured" : "the address is loopback");
    }
    return PULSE_OK;
}

void pulse_server_auth_stop(struct pulse_server *srv)
{
    pulse_auth_destroy(srv->auth);
    srv->auth = NULL;
}

pulse_status_t pulse_server_reload(struct pulse_server *srv)
{
    char err[512] = "";
    size_t n = 0;
    if (srv->auth == NULL)
        return PULSE_OK; /* no auth.token-file: nothing to reload */
    pulse_status_t st = pulse_auth_reload(srv->auth, &n, err, sizeof err);
    if (st != PULSE_OK)
        PULSE_ERROR("SIGHUP: keeping the previous %zu token(s): %s", n, err);
    else
        PULSE_INFO("SIGHUP: reloaded %zu token(s) from %s", n, srv->cfg->auth.token_file);
    return st;
}

void pulse_server_auth_done(struct pulse_hreq *r)
{
    pulse_auth_tokens_release(r->auth_tab);
    r->auth_tab = NULL;
    r->token = NULL;
}

const char *pulse_server_token_name(const struct pulse_hreq *r)
{
    return r->token != NULL ? pulse_auth_token_name(r->token) : NULL;
}

bool pulse_server_may(const struct pulse_hreq *r, enum pulse_grant_kind kind, const char *name)
{
    if (r->srv->auth == NULL)
        return true;
    return r->token != NULL && pulse_auth_token_allows(r->token, kind, name);
}

bool pulse_server_authorize(struct pulse_hreq *r, enum pulse_grant_kind kind, const char *name)
{
    if (pulse_server_may(r, kind, name))
        return true;
    const char *token = pulse_server_token_name(r);
    const char *method = pulse_router_method_name(r->method);
    const char *route = pulse_router_template(r->match.route);
    const char *grant = pulse_router_grant_name(kind);
    /* The name is in the body, not read yet: no grant of the kind at all. */
    if (name == NULL && kind != PULSE_GRANT_BROKER && kind != PULSE_GRANT_UNSET)
        pulse_server_reply_error(r, 403, "forbidden",
                                 "token \"%s\" holds no %s grant; %s %s needs %s on the name the body gives", token,
                                 grant, method, route, grant);
    else
        pulse_server_reply_error(r, 403, "forbidden", "token \"%s\" lacks the grant %s%s%s, which %s %s needs", token,
                                 grant, name != NULL ? ":" : "", name != NULL ? name : "", method, route);
    return false;
}

/* 401 with WWW-Authenticate (RFC 6750): no token, or one not in the file. */
static void reply_unauthorized(struct pulse_hreq *r, bool missing)
{
    r->www_authenticate = missing ? "Bearer realm=\"pulse\"" : "Bearer realm=\"pulse\", error=\"invalid_token\"";
    if (missing)
        pulse_server_reply_error(r, 401, "unauthorized",
                                 "%s %s needs a bearer token: send \"Authorization: Bearer TOKEN\" "
                                 "(docs/Security.md)",
                                 pulse_router_method_name(r->method), pulse_router_template(r->match.route));
    else
        pulse_server_reply_error(r, 401, "unauthorized",
                                 "the bearer token is not known: auth.token-file has no entry with its hash");
}

/* The name the route's grant is about, from the path, into out; false
 * after answering 400 when it cannot be a name. */
static bool subject_name(struct pulse_hreq *r, enum pulse_grant_subject subject, char *out, size_t len,
                         const char **name)
{
    const struct pulse_route_param *p = NULL;
    *name = NULL;
    if (subject == PULSE_SUBJECT_TOPIC)
        p = &r->match.topic;
    else if (subject == PULSE_SUBJECT_CONSUMER)
        p = &r->match.consumer;
    else if (subject == PULSE_SUBJECT_GROUP)
        p = &r->match.group;
    if (p == NULL)
        return true;
    if (p->len >= len) {
        pulse_server_reply_error(r, 400, "invalid_name", "a name in the path is longer than %d bytes", PULSE_NAME_MAX);
        return false;
    }
    memcpy(out, p->p, p->len);
    out[p->len] = '\0';
    *name = out;
    return true;
}

bool pulse_server_refuse_auth(struct pulse_hreq *r)
{
    struct pulse_server *srv = r->srv;
    const struct pulse_route_grant *g = pulse_router_grant(r->match.route, r->method);
    if (srv->auth == NULL || g->kind == PULSE_GRANT_NONE)
        return false;
    if (g->kind == PULSE_GRANT_PUBLIC && pulse_auth_settings_is_public(srv->cfg->auth.public_routes, r->match.route))
        return false;
    bool missing = true;
    const char *header = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (pulse_auth_lookup(srv->auth, header, &r->auth_tab, &r->token, &missing) != PULSE_OK) {
        reply_unauthorized(r, missing);
        return true;
    }
    char buf[PULSE_NAME_MAX + 1];
    const char *name = NULL;
    if (!subject_name(r, g->subject, buf, sizeof buf, &name))
        return true;
    /* BODY: the name is in the body; here the token must at least hold a
     * grant of the kind (the handler checks the name itself). */
    return !pulse_server_authorize(r, g->kind, name);
}
