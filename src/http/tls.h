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
 * Reload: MHD loads the PEM text into its GnuTLS credentials once, in
 * MHD_start_daemon, and has no call to replace them on a running daemon,
 * so new files take a restart (docs/Operations.md "Certificates").
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
 * mTLS: why conn's client is refused - no certificate, or one that does
 * not verify against tls.client-ca-file (signature, validity dates,
 * issuer) - written to why (whylen bytes), and 1; 0 when its certificate
 * verifies. Call only on a daemon started with a trust list.
 */
int pulse_tls_client_problem(struct MHD_Connection *conn, char *why, size_t whylen);

#endif
