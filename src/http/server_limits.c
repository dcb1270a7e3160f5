/* SPDX-License-Identifier: MIT */
/*
 * server_limits.c - the server's side of [limits] (ratelimit.h): which
 * client a request belongs to, its admission before the body is read, the
 * 429 answer, and the bytes charged as they become known.
 *
 * A client is named by limit_key, the one place that decides it: with
 * bearer tokens on (auth.token-file), the SHA-256 of the verified token's
 * name, so a token has one set of buckets wherever it comes from; without
 * them, the SHA-256 of the client's IP address (port left out, so one host
 * shares its buckets across connections). Never the Authorization header
 * as sent: a client could send a new one with each request and never be
 * limited. With tokens on, the check runs after the token is verified
 * (server_access.c): a request without a valid token is answered 401
 * before it, at the cost of one hash.
 *
 * A token's line may give it its own rates (rps=, bps=; auth.h): those
 * replace the [limits] defaults for its buckets, 0 lifting the limit, and
 * may limit a token while the defaults are off. A reload (SIGHUP) applies
 * to the token's next request.
 */
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "http/auth.h"
#include "http/http_int.h"
#include "http/server_int.h"

/* The bucket key of r's client (PULSE_RATELIMIT_KEY_LEN bytes). false
 * when its address is not known. */
static bool limit_key(struct pulse_hreq *r, unsigned char *key)
{
    unsigned char buf[2 + 16];
    size_t len = 0;
    const char *token = pulse_server_token_name(r);
    if (token != NULL) {
        /* "t:" + the name, hashed in two steps to keep names of any length. */
        gnutls_hash_hd_t h;
        if (gnutls_hash_init(&h, GNUTLS_DIG_SHA256) != 0)
            return false;
        int rc = gnutls_hash(h, "t:", 2);
        if (rc == 0)
            rc = gnutls_hash(h, token, strlen(token));
        gnutls_hash_deinit(h, key);
        return rc == 0;
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;
    if (sa == NULL)
        return false;
    memcpy(buf, "i:", 2);
    if (sa->sa_family == AF_INET6) {
        memcpy(buf + 2, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
        len = 2 + 16;
    } else if (sa->sa_family == AF_INET) {
        memcpy(buf + 2, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        len = 2 + 4;
    } else {
        return false;
    }
    return gnutls_hash_fast(GNUTLS_DIG_SHA256, buf, len, key) == 0;
}

/* The declared body size of r, or 0 (none, or chunked: charged as it
 * arrives, at completion). */
static uint64_t declared_body(struct pulse_hreq *r)
{
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    int64_t len = 0;
    if (cl == NULL || pulse_request_parse_i64(cl, 0, INT64_MAX, &len) != PULSE_OK)
        return 0;
    return (uint64_t)len;
}

/* The rates of r's client: [limits], or what its token's line says
 * instead (*own: which of them it says). false when neither limits it. */
static bool limit_rates(struct pulse_hreq *r, int64_t *rps, uint64_t *bps, struct pulse_auth_limits *own)
{
    const struct pulse_limits_settings *d = &r->srv->cfg->limits;
    memset(own, 0, sizeof *own);
    if (r->token != NULL)
        pulse_auth_token_limits(r->token, own);
    *rps = own->rps_set ? own->rps : d->requests_per_second;
    *bps = own->bps_set ? own->bps : d->bytes_per_second;
    return *rps > 0 || *bps > 0;
}

bool pulse_server_refuse_rate(struct pulse_hreq *r)
{
    struct pulse_ratelimit *rl = r->srv->ratelimit;
    enum pulse_route route = r->match.route;
    int64_t rps = 0;
    uint64_t bps = 0;
    struct pulse_auth_limits own;
    if (rl == NULL || route == PULSE_ROUTE_HEALTHZ || route == PULSE_ROUTE_READYZ || !limit_rates(r, &rps, &bps, &own))
        return false;
    if (!limit_key(r, r->limit_key))
        return false;
    uint64_t in = declared_body(r);
    const char *which = NULL;
    unsigned wait = pulse_ratelimit_admit_rates(rl, r->limit_key, rps, bps, in, pulse_clock_mono_us(), &which);
    if (wait == 0) {
        r->limit_keyed = true;
        r->bytes_in_charged = in;
        return false;
    }
    /* Its body (if any) is never read: MHD closes the connection after
     * an answer queued before the body. */
    r->retry_after = wait;
    bool req = strcmp(which, "limits.requests-per-second") == 0;
    if (req && own.rps_set)
        which = "its token's rps";
    else if (!req && own.bps_set)
        which = "its token's bps";
    pulse_server_reply_error(r, 429, "too_many_requests",
                             "rate limit: this client is over %s (with limits.burst); retry in %u s", which, wait);
    return true;
}

void pulse_server_limit_charge(struct pulse_hreq *r, uint64_t bytes)
{
    if (!r->limit_keyed)
        return;
    pulse_ratelimit_charge(r->srv->ratelimit, r->limit_key, bytes, pulse_clock_mono_us());
}

void pulse_server_limit_done(struct pulse_hreq *r)
{
    if (r->bytes_in > r->bytes_in_charged) {
        pulse_server_limit_charge(r, r->bytes_in - r->bytes_in_charged);
        r->bytes_in_charged = r->bytes_in;
    }
}
