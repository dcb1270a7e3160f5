/* SPDX-License-Identifier: MIT */
/*
 * server.c - the HTTP server's lifecycle: the listening socket, the
 * libmicrohttpd daemon and its options, attach and readiness, and the
 * graceful stop.
 *
 * The server is one module in several files, split by concern
 * (server_int.h has the map): a request's life in server_access.c, the
 * refusals from its head in server_checks.c, MHD's connection callbacks in
 * server_hooks.c, reading input in server_input.c, request memory in
 * server_mem.c, metrics in server_metrics.c, answers in server_reply.c.
 * This file only starts and stops the daemon that calls them.
 */
#include "http/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "http/conns.h"
#include "http/http_int.h"
#include "http/server_int.h"
#include "http/tls.h"

#define CONNECTION_MEMORY_LIMIT (16u * 1024)

/* Binds and listens ourselves so a busy port is reported with its errno,
 * then hands the socket to MHD. */
static pulse_status_t open_listener(const char *listen_addr, int *fd_out, bool *v6_out, uint16_t *port_out,
                                    char *errbuf, size_t errlen)
{
    pulse_status_t st = PULSE_OK;
    char host[256];
    uint16_t port = 0;
    bool v6 = false;
    int fd = -1;
    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    memset(&ss, 0, sizeof ss);

    if (pulse_server_listen_split(listen_addr, host, sizeof host, &port, &v6) != PULSE_OK) {
        st = PULSE_INVALID;
        pulse_errbuf_set(errbuf, errlen, "server.listen: \"%s\" is not HOST:PORT", listen_addr);
        goto out;
    }
    if (!v6 && strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    if (v6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(port);
        if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
            st = PULSE_INVALID;
        sslen = sizeof *a6;
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
        a4->sin_family = AF_INET;
        a4->sin_port = htons(port);
        if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
            st = PULSE_INVALID;
        sslen = sizeof *a4;
    }
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "server.listen: \"%s\" is not an IP address", host);
        goto out;
    }
    fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        int err = errno;
        st = PULSE_IO;
        pulse_errbuf_set(errbuf, errlen, "socket: %s", strerror(err));
        goto out;
    }
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sslen) != 0 || listen(fd, 511) != 0) {
        int err = errno;
        st = PULSE_IO;
        pulse_errbuf_set(errbuf, errlen, "cannot listen on %s: %s", listen_addr, strerror(err));
        goto out;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
        port = ntohs(v6 ? ((struct sockaddr_in6 *)&bound)->sin6_port : ((struct sockaddr_in *)&bound)->sin_port);
    *fd_out = fd;
    *v6_out = v6;
    *port_out = port;
    fd = -1;
out:
    if (fd >= 0)
        close(fd);
    return st;
}

/* Accept policy: once the server is stopping, a new connection is closed
 * as soon as it is accepted (see pulse_server_shutdown). Thread: an MHD
 * worker. */
static enum MHD_Result on_accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    struct pulse_server *srv = cls;

    (void)addr;
    (void)addrlen;
    return atomic_load(&srv->stopping) ? MHD_NO : MHD_YES;
}

/* HTTPS, when tls.cert-file is set: reads and checks the PEM files and
 * hands the pair to tls.h's certificate callback (srv->tls_pem keeps them;
 * the caller frees them on failure). A key or client CA without a
 * certificate is refused: PULSE_INVALID with the message in errbuf. */
static pulse_status_t load_tls(struct pulse_server *srv, const struct pulse_config *cfg, char *errbuf, size_t errlen)
{
    pulse_status_t st = PULSE_OK;

    if (pulse_tls_settings_on(&cfg->tls)) {
        st = pulse_tls_load(&cfg->tls, &srv->tls_pem, errbuf, errlen);
        if (st == PULSE_OK)
            st = pulse_tls_keys_set(&srv->tls_pem, errbuf, errlen);
        if (st == PULSE_OK)
            srv->mtls = srv->tls_pem.ca != NULL;
        return st;
    }
    if (pulse_tls_settings_mtls(&cfg->tls) || (cfg->tls.key_file != NULL && cfg->tls.key_file[0] != '\0')) {
        pulse_errbuf_set(errbuf, errlen,
                         "%s is set but tls.cert-file is not: HTTPS needs tls.cert-file and tls.key-file",
                         pulse_tls_settings_mtls(&cfg->tls) ? "tls.client-ca-file" : "tls.key-file");
        return PULSE_INVALID;
    }
    return PULSE_OK;
}

pulse_status_t pulse_server_create(const struct pulse_config *cfg, struct pulse_broker *broker,
                                   struct pulse_server **out, char *errbuf, size_t errlen)
{
    pulse_status_t st = PULSE_OK;
    struct pulse_server *srv = NULL;
    int fd = -1;
    bool v6 = false;
    uint16_t port = 0;

    srv = pulse_calloc(1, sizeof *srv);
    if (srv == NULL) {
        st = PULSE_NOMEM;
        pulse_errbuf_set(errbuf, errlen, "out of memory");
        goto out;
    }
    srv->cfg = cfg;
    pthread_mutex_init(&srv->mlock, NULL);
    /* Tokens first: an exposed address without them is refused before
     * anything is bound (server_auth.c). */
    st = pulse_server_auth_start(srv, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    st = open_listener(cfg->server.listen, &fd, &v6, &port, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    srv->broker = broker;
    srv->port = port;
    srv->started_mono_us = pulse_clock_mono_us();
    pulse_budget_init(&srv->budget, cfg->server.memory_budget);
    st = pulse_ratelimit_create(&cfg->limits, &srv->ratelimit);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "out of memory");
        goto out;
    }
    st = load_tls(srv, cfg, errbuf, errlen);
    if (st != PULSE_OK)
        goto out;
    struct pulse_conns_limits limits = {cfg->server.header_timeout_ms, cfg->server.body_timeout_ms,
                                        cfg->server.body_min_rate, (uint64_t)cfg->server.max_connections};
    st = pulse_conns_create(&limits, &srv->conns);
    if (st != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "cannot start the connection registry: %s", pulse_status_message(st));
        goto out;
    }

    unsigned threads = (unsigned)cfg->server.threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    /* One worker means MHD's single internal thread: the pool option is
     * passed only for two or more (MHD warns about a pool of 0 or 1). */
    struct MHD_OptionItem pool[2] = {{MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}};
    if (threads > 1)
        pool[0] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)threads, NULL};
    /* MHD's timeout is whole seconds; 0 would mean "never", so round up. */
    unsigned timeout_s = (unsigned)((cfg->server.connection_timeout_ms + 999) / 1000);
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (v6)
        flags |= MHD_USE_IPv6;
    /* HTTPS: MHD does the TLS (GnuTLS). The certificate and key come from
     * tls.h's callback, so that SIGHUP can replace them; with a client CA
     * MHD asks each client for a certificate, which server_access.c
     * checks (tls.h). Unused entries stay MHD_OPTION_END. */
    struct MHD_OptionItem tls[3] = {{MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}};
    if (srv->tls_pem.cert != NULL) {
        flags |= MHD_USE_TLS;
        tls[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0, pulse_tls_retrieve_fn()};
        if (srv->tls_pem.ca != NULL)
            tls[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, srv->tls_pem.ca};
    }
    /* The options in pairs, one per line, by hand. */
    /* clang-format off */
    srv->daemon = MHD_start_daemon(
        flags, 0, on_accept_policy, srv, pulse_server_on_access, srv,
        MHD_OPTION_EXTERNAL_LOGGER, pulse_server_mhd_log, srv,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
        MHD_OPTION_ARRAY, pool, MHD_OPTION_ARRAY, tls, MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->server.max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->server.max_connections_per_ip,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY_LIMIT,
        MHD_OPTION_NOTIFY_COMPLETED, pulse_server_on_completed, srv,
        MHD_OPTION_NOTIFY_CONNECTION, pulse_server_on_connection, srv,
        MHD_OPTION_UNESCAPE_CALLBACK, pulse_server_on_unescape, srv,
        MHD_OPTION_URI_LOG_CALLBACK, pulse_server_on_uri, srv, MHD_OPTION_END);
    /* clang-format on */
    if (srv->daemon == NULL) {
        st = PULSE_IO;
        pulse_errbuf_set(errbuf, errlen, "cannot start the HTTP server on %s (see the libmicrohttpd message above)",
                         cfg->server.listen);
        goto out;
    }
    fd = -1; /* the daemon owns it now */
    *out = srv;
    srv = NULL;
out:
    if (fd >= 0)
        close(fd);
    if (srv != NULL) {
        pulse_ratelimit_destroy(srv->ratelimit);
        if (srv->tls_pem.cert != NULL)
            pulse_tls_keys_clear();
        pulse_tls_pem_fini(&srv->tls_pem);
        pulse_conns_destroy(srv->conns);
        pthread_mutex_destroy(&srv->mlock);
        pulse_server_auth_stop(srv);
        pulse_free(srv);
    }
    return st;
}

pulse_status_t pulse_server_reload_tls(struct pulse_server *srv, char *errbuf, size_t errlen)
{
    if (srv->tls_pem.cert == NULL) {
        pulse_errbuf_set(errbuf, errlen, "HTTPS is off (tls.cert-file is not set): nothing to reload");
        return PULSE_OK;
    }
    struct pulse_tls_pem pem;
    pulse_status_t st = pulse_tls_load(&srv->cfg->tls, &pem, errbuf, errlen);
    if (st != PULSE_OK)
        return st;
    st = pulse_tls_keys_set(&pem, errbuf, errlen);
    if (st == PULSE_OK) {
        /* MHD holds the CA list it was started with. */
        bool ca_changed = (pem.ca == NULL) != (srv->tls_pem.ca == NULL) ||
                          (pem.ca != NULL && strcmp(pem.ca, srv->tls_pem.ca) != 0);
        pulse_errbuf_set(errbuf, errlen, "reloaded tls.cert-file %s and tls.key-file %s%s", srv->cfg->tls.cert_file,
                         srv->cfg->tls.key_file,
                         ca_changed ? "; tls.client-ca-file changed too, which takes a restart: the CAs "
                                      "loaded at start still apply"
                                    : "");
    }
    pulse_tls_pem_fini(&pem);
    return st;
}

uint16_t pulse_server_port(const struct pulse_server *srv)
{
    return srv->port;
}

void pulse_server_attach(struct pulse_server *srv, struct pulse_broker *broker)
{
    srv->broker = broker;
    /* The connections opened before it. */
    pulse_server_note_clients(srv);
}

void pulse_server_set_ready(struct pulse_server *srv, bool ready)
{
    atomic_store(&srv->ready, ready);
}

pulse_status_t pulse_server_shutdown(struct pulse_server *srv, int64_t deadline_ms)
{
    if (srv->daemon == NULL)
        return PULSE_OK;
    atomic_store(&srv->ready, false);
    /* From here new connections are refused at accept (on_accept_policy),
     * and handlers answer 503 and never suspend. Not MHD_quiesce_daemon:
     * in libmicrohttpd 0.9.75 it races with the epoll workers, which
     * remove the listen socket from their epoll sets themselves once they
     * see the daemon quiesced, and the loser of that race aborts the
     * process ("Failed to remove listen FD from epoll set"). */
    atomic_store(&srv->stopping, true);
    /* Parked long-polls are completed (their connections resume and
     * answer); publishes already written reach durability and answer. */
    if (srv->broker != NULL)
        pulse_broker_drain(srv->broker);
    /* Wait for every request that has fully arrived to be answered. A
     * request whose body is still coming in is not waited for: its client
     * may have gone away without MHD noticing (a suspended-free idle
     * upload), and MHD_stop_daemon closes it; it was never acted on. */
    int64_t until = pulse_clock_mono_us() + deadline_ms * 1000;
    while (atomic_load(&srv->inflight) - atomic_load(&srv->receiving) > 0 && pulse_clock_mono_us() < until) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    long left = atomic_load(&srv->inflight) - atomic_load(&srv->receiving);
    if (left > 0)
        PULSE_WARN("shutdown: %ld request(s) still in flight after %lld ms", left, (long long)deadline_ms);
    if (atomic_load(&srv->receiving) > 0)
        PULSE_INFO("shutdown: closing %ld connection(s) whose request body never finished arriving",
                   atomic_load(&srv->receiving));
    if (atomic_load(&srv->suspended) > 0) {
        /* MHD_stop_daemon aborts the process with a suspended connection. */
        PULSE_ERROR("shutdown: %ld connection(s) still suspended; not stopping the HTTP server cleanly",
                    atomic_load(&srv->suspended));
        return PULSE_BUSY;
    }
    MHD_stop_daemon(srv->daemon); /* closes the listen socket too */
    srv->daemon = NULL;
    return PULSE_OK;
}

void pulse_server_destroy(struct pulse_server *srv)
{
    if (srv == NULL)
        return;
    if (srv->daemon != NULL && atomic_load(&srv->suspended) == 0) {
        MHD_stop_daemon(srv->daemon);
        srv->daemon = NULL;
    }
    /* With the daemon still running (a suspended connection kept it), its
     * workers may still call into the registry: leave it to the exit. */
    if (srv->daemon == NULL) {
        pulse_conns_destroy(srv->conns);
        pulse_ratelimit_destroy(srv->ratelimit);
        if (srv->tls_pem.cert != NULL)
            pulse_tls_keys_clear();
        pulse_tls_pem_fini(&srv->tls_pem);
        pulse_server_auth_stop(srv);
    }
    pthread_mutex_destroy(&srv->mlock);
    pulse_free(srv->rows);
    pulse_free(srv);
}
