/* SPDX-License-Identifier: MIT */
/*
 * tls_settings.c - the [tls] keys (tls_settings.h).
 *
 * The keys are of the LIST type only because that type may be empty: an
 * empty path means "unset". The value is one path, never split at commas.
 */
#include "http/tls_settings.h"

#include <stddef.h>

#include "common/settings.h"

#define F(field) offsetof(struct pulse_tls_settings, field)

static const struct pulse_setting keys[] = {
    {"tls.cert-file", PULSE_SETTING_LIST, F(cert_file), "", NULL, 0, 0, NULL,
     "PEM certificate chain (server certificate first); set: serve HTTPS only; empty = plain HTTP"},
    {"tls.key-file", PULSE_SETTING_LIST, F(key_file), "", NULL, 0, 0, NULL,
     "PEM private key of tls.cert-file (unencrypted); required with it"},
    {"tls.client-ca-file", PULSE_SETTING_LIST, F(client_ca_file), "", NULL, 0, 0, NULL,
     "PEM CA certificates; set: every client must present a certificate they signed (mTLS)"},
};

static const struct pulse_settings_table table = {"tls", keys, sizeof keys / sizeof keys[0],
                                                  sizeof(struct pulse_tls_settings)};

const struct pulse_settings_table *pulse_tls_settings(void)
{
    return &table;
}

bool pulse_tls_settings_on(const struct pulse_tls_settings *s)
{
    return s->cert_file != NULL && s->cert_file[0] != '\0';
}

bool pulse_tls_settings_mtls(const struct pulse_tls_settings *s)
{
    return s->client_ca_file != NULL && s->client_ca_file[0] != '\0';
}
