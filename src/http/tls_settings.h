/* SPDX-License-Identifier: MIT */
/*
 * tls_settings.h - the settings of HTTPS ([tls]): the server's certificate
 * chain and private key, and the authority that client certificates must
 * chain to (mTLS). All three are file paths; empty (the default) means
 * unset, and plain HTTP is served when tls.cert-file is unset.
 *
 * The files are read when the server starts (tls.h); SIGHUP reads the
 * certificate and key again, a changed CA file takes a restart
 * (docs/Operations.md "Certificates").
 *
 * Thread: any. Locks: none.
 */
#ifndef PULSE_HTTP_TLS_SETTINGS_H
#define PULSE_HTTP_TLS_SETTINGS_H

#include <stdbool.h>

struct pulse_settings_table;

struct pulse_tls_settings {
    char *cert_file;      /* PEM certificate chain, server's first; "" = HTTPS off */
    char *key_file;       /* PEM private key of cert_file's first certificate */
    char *client_ca_file; /* PEM CA certificates clients must chain to; "" = no client certificates */
};

/* The table of the keys above (static storage). */
const struct pulse_settings_table *pulse_tls_settings(void);

/* Whether HTTPS is configured (tls.cert-file is set). */
bool pulse_tls_settings_on(const struct pulse_tls_settings *s);

/* Whether client certificates are required (tls.client-ca-file is set). */
bool pulse_tls_settings_mtls(const struct pulse_tls_settings *s);

#endif
