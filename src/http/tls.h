/* SPDX-License-Identifier: MIT */
/*
 * tls.h - HTTPS for the server: the PEM files of [tls] (tls_settings.h)
 * read and checked at start, and the client-certificate check of mTLS.
 *
 * libmicrohttpd does the TLS itself (GnuTLS, MHD_USE_TLS) from the PEM
 * text in memory: MHD_OPTION_HTTPS_MEM_CERT, _MEM_KEY and, for mTLS,
 * _MEM_TRUST. With a trust list, MHD 0.9.75 asks every client for a
 * certificate (GNUTLS_CERT_REQUEST) but neither requires nor checks it;
 * pulse_tls_client_problem does, before any handler runs.
 *
 * Reload: the server's certificate and key are not given to MHD as PEM
 * text (which it would load into its credentials once, for the daemon's
 * life) but served by pulse_tls_retrieve, MHD's certificate callback
 * (MHD_OPTION_HTTPS_CERT_CALLBACK), from a key pair pulse_tls_keys_set
 * replaces: a reload takes effect at the next handshake, and the listener
 * and open connections are untouched. The client CA list is loaded by MHD
 * (MHD_OPTION_HTTPS_MEM_TRUST) at start only: changing it takes a restart
 * (docs/Operations.md "Certificates").
 *
 * The callback has no argument of its own, so the key pair is one per
 * process: one HTTPS server per process.
 *
 * Thread: pulse_tls_load on the starting thread; pulse_tls_client_problem
 * on the MHD worker that owns the connection. Locks: none.
 */
#ifndef PULSE_HTTP_TLS_H
#define PULSE_HTTP_TLS_H

#include <stddef.h>

#include "common/status.h"

struct MHD_Connection;
struct pulse_tls_settings;

/* The PEM text of the configured files, NUL-terminated, owned (pulse_free
 * through pulse_tls_pem_fini). ca is NULL without tls.client-ca-file. */
struct pulse_tls_pem {
    char *cert;
    char *key;
    char *ca;
};

/*
 * Reads the files of s and checks them with GnuTLS: the certificate chain
 * parses, the key parses and belongs to the chain's first certificate, the
 * CA file holds at least one certificate. PULSE_INVALID (or PULSE_NOMEM)
 * with errbuf naming the setting, the file and the reason; pem is then
 * empty. On success the caller owns pem (pulse_tls_pem_fini).
 */
pulse_status_t pulse_tls_load(const struct pulse_tls_settings *s, struct pulse_tls_pem *pem, char *errbuf,
                              size_t errlen);

/* Frees the text (the key's bytes are zeroed first). Safe on a zeroed or
 * finalised struct. */
void pulse_tls_pem_fini(struct pulse_tls_pem *pem);

/*
 * Makes pem's certificate chain and key the ones served from the next
 * handshake on. The pair they replace is kept until pulse_tls_keys_clear
 * (a handshake on another thread may still be using it; a reload keeps a
 * few KiB). PULSE_INVALID or PULSE_NOMEM with errbuf; the served pair is
 * unchanged then. Thread: any. Locks: the key pair's mutex.
 */
pulse_status_t pulse_tls_keys_set(const struct pulse_tls_pem *pem, char *errbuf, size_t errlen);

/* Frees every key pair; only once no handshake can run (the daemon is
 * stopped). */
void pulse_tls_keys_clear(void);

/* MHD_OPTION_HTTPS_CERT_CALLBACK: the served key pair. A
 * gnutls_certificate_retrieve_function2, typed loosely here so that this
 * header needs no GnuTLS include. */
void *pulse_tls_retrieve_fn(void);

/*
 * mTLS: why conn's client is refused - no certificate, or one that does
 * not verify against tls.client-ca-file (signature, validity dates,
 * issuer) - written to why (whylen bytes), and 1; 0 when its certificate
 * verifies. Call only on a daemon started with a trust list.
 */
int pulse_tls_client_problem(struct MHD_Connection *conn, char *why, size_t whylen);

#endif
