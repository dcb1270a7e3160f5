/* SPDX-License-Identifier: MIT */
/*
 * tls.c - the PEM files of HTTPS and the client-certificate check (tls.h).
 *
 * Method: every file is read whole (capped at PEM_MAX) and handed to
 * GnuTLS before the daemon starts, so a bad file stops pulsed at start with
 * a message naming the setting and the file, rather than failing every
 * handshake later. The key is checked against the certificate by loading
 * both into a scratch credentials object, as MHD will do (GnuTLS refuses
 * a pair that does not match).
 */
#include "http/tls.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <gnutls/abstract.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "http/tls_settings.h"

#define PEM_MAX (1024 * 1024) /* a PEM file larger than this is not one */

/* Reads path (named setting in messages) into a new NUL-terminated
 * buffer. */
static pulse_status_t read_pem(const char *setting, const char *path, char **out, char *errbuf, size_t errlen)
{
    pulse_status_t st = PULSE_OK;
    char *text = NULL;
    size_t len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        pulse_errbuf_set(errbuf, errlen, "%s: cannot open %s: %s", setting, path, strerror(err));
        return PULSE_INVALID;
    }
    text = pulse_malloc(PEM_MAX + 1);
    if (text == NULL) {
        st = PULSE_NOMEM;
        pulse_errbuf_set(errbuf, errlen, "%s: out of memory reading %s", setting, path);
        goto out;
    }
    for (;;) {
        ssize_t n = read(fd, text + len, PEM_MAX + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int err = errno;
            st = PULSE_INVALID;
            pulse_errbuf_set(errbuf, errlen, "%s: cannot read %s: %s", setting, path, strerror(err));
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > PEM_MAX) {
            st = PULSE_INVALID;
            pulse_errbuf_set(errbuf, errlen, "%s: %s is larger than %d bytes: not a PEM file", setting, path, PEM_MAX);
            goto out;
        }
    }
    text[len] = '\0';
    if (strstr(text, "-----BEGIN ") == NULL) {
        st = PULSE_INVALID;
        pulse_errbuf_set(errbuf, errlen, "%s: %s holds no PEM block (\"-----BEGIN ...\")", setting, path);
        goto out;
    }
    *out = text;
    text = NULL;
out:
    if (text != NULL) {
        memset(text, 0, len);
        pulse_free(text);
    }
    close(fd);
    return st;
}

/* The number of certificates in PEM text; 0 after writing why. */
static unsigned count_certs(const char *setting, const char *path, const char *pem, char *errbuf, size_t errlen)
{
    gnutls_datum_t d = {(unsigned char *)(uintptr_t)pem, (unsigned)strlen(pem)};
    gnutls_x509_crt_t *list = NULL;
    unsigned n = 0;
    int rc = gnutls_x509_crt_list_import2(&list, &n, &d, GNUTLS_X509_FMT_PEM, 0);
    if (rc < 0) {
        pulse_errbuf_set(errbuf, errlen, "%s: %s: not a PEM certificate list: %s", setting, path, gnutls_strerror(rc));
        return 0;
    }
    for (unsigned i = 0; i < n; i++)
        gnutls_x509_crt_deinit(list[i]);
    gnutls_free(list);
    if (n == 0)
        pulse_errbuf_set(errbuf, errlen, "%s: %s holds no certificate", setting, path);
    return n;
}

/* The key parses and matches the certificate: loaded as MHD will. */
static pulse_status_t check_pair(const struct pulse_tls_settings *s, const struct pulse_tls_pem *pem, char *errbuf,
                                 size_t errlen)
{
    gnutls_x509_privkey_t key = NULL;
    gnutls_datum_t kd = {(unsigned char *)pem->key, (unsigned)strlen(pem->key)};
    gnutls_datum_t cd = {(unsigned char *)pem->cert, (unsigned)strlen(pem->cert)};
    int rc = gnutls_x509_privkey_init(&key);
    if (rc >= 0)
        rc = gnutls_x509_privkey_import(key, &kd, GNUTLS_X509_FMT_PEM);
    if (key != NULL)
        gnutls_x509_privkey_deinit(key);
    if (rc < 0) {
        pulse_errbuf_set(errbuf, errlen, "tls.key-file: %s: not an unencrypted PEM private key: %s", s->key_file,
                         gnutls_strerror(rc));
        return PULSE_INVALID;
    }
    gnutls_certificate_credentials_t cred = NULL;
    rc = gnutls_certificate_allocate_credentials(&cred);
    if (rc < 0) {
        pulse_errbuf_set(errbuf, errlen, "tls: %s", gnutls_strerror(rc));
        return PULSE_NOMEM;
    }
    rc = gnutls_certificate_set_x509_key_mem(cred, &cd, &kd, GNUTLS_X509_FMT_PEM);
    gnutls_certificate_free_credentials(cred);
    if (rc < 0) {
        pulse_errbuf_set(errbuf, errlen, "tls.key-file: %s does not belong to the certificate of tls.cert-file %s: %s",
                         s->key_file, s->cert_file, gnutls_strerror(rc));
        return PULSE_INVALID;
    }
    return PULSE_OK;
}

pulse_status_t pulse_tls_load(const struct pulse_tls_settings *s, struct pulse_tls_pem *pem, char *errbuf,
                              size_t errlen)
{
    pulse_status_t st = PULSE_OK;
    memset(pem, 0, sizeof *pem);
    if (s->key_file == NULL || s->key_file[0] == '\0') {
        pulse_errbuf_set(errbuf, errlen, "tls.cert-file is set but tls.key-file is not: HTTPS needs both");
        return PULSE_INVALID;
    }
    st = read_pem("tls.cert-file", s->cert_file, &pem->cert, errbuf, errlen);
    if (st == PULSE_OK && count_certs("tls.cert-file", s->cert_file, pem->cert, errbuf, errlen) == 0)
        st = PULSE_INVALID;
    if (st == PULSE_OK)
        st = read_pem("tls.key-file", s->key_file, &pem->key, errbuf, errlen);
    if (st == PULSE_OK)
        st = check_pair(s, pem, errbuf, errlen);
    if (st == PULSE_OK && pulse_tls_settings_mtls(s)) {
        st = read_pem("tls.client-ca-file", s->client_ca_file, &pem->ca, errbuf, errlen);
        if (st == PULSE_OK && count_certs("tls.client-ca-file", s->client_ca_file, pem->ca, errbuf, errlen) == 0)
            st = PULSE_INVALID;
    }
    if (st != PULSE_OK)
        pulse_tls_pem_fini(pem);
    return st;
}

void pulse_tls_pem_fini(struct pulse_tls_pem *pem)
{
    if (pem->key != NULL)
        memset(pem->key, 0, strlen(pem->key));
    pulse_free(pem->cert);
    pulse_free(pem->key);
    pulse_free(pem->ca);
    memset(pem, 0, sizeof *pem);
}

/* ---- the served key pair --------------------------------------------- */

#define CHAIN_MAX 16 /* certificates in tls.cert-file */

struct keypair {
    gnutls_pcert_st certs[CHAIN_MAX];
    unsigned ncerts;
    gnutls_privkey_t key;
    struct keypair *older; /* replaced pairs, kept until pulse_tls_keys_clear */
};

static pthread_mutex_t keys_lock = PTHREAD_MUTEX_INITIALIZER;
static struct keypair *served; /* newest first; NULL until set */

static void keypair_free(struct keypair *kp)
{
    for (unsigned i = 0; i < kp->ncerts; i++)
        gnutls_pcert_deinit(&kp->certs[i]);
    if (kp->key != NULL)
        gnutls_privkey_deinit(kp->key);
    pulse_free(kp);
}

pulse_status_t pulse_tls_keys_set(const struct pulse_tls_pem *pem, char *errbuf, size_t errlen)
{
    struct keypair *kp = pulse_calloc(1, sizeof *kp);
    if (kp == NULL) {
        pulse_errbuf_set(errbuf, errlen, "tls: out of memory");
        return PULSE_NOMEM;
    }
    gnutls_datum_t cd = {(unsigned char *)pem->cert, (unsigned)strlen(pem->cert)};
    gnutls_datum_t kd = {(unsigned char *)pem->key, (unsigned)strlen(pem->key)};
    unsigned n = CHAIN_MAX;
    int rc = gnutls_pcert_list_import_x509_raw(kp->certs, &n, &cd, GNUTLS_X509_FMT_PEM, 0);
    if (rc < 0) {
        pulse_errbuf_set(errbuf, errlen, "tls.cert-file: %s (at most %d certificates)", gnutls_strerror(rc), CHAIN_MAX);
        pulse_free(kp);
        return PULSE_INVALID;
    }
    kp->ncerts = n;
    rc = gnutls_privkey_init(&kp->key);
    if (rc >= 0)
        rc = gnutls_privkey_import_x509_raw(kp->key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (rc < 0) {
        pulse_errbuf_set(errbuf, errlen, "tls.key-file: %s", gnutls_strerror(rc));
        keypair_free(kp);
        return PULSE_INVALID;
    }
    pthread_mutex_lock(&keys_lock);
    kp->older = served;
    served = kp;
    pthread_mutex_unlock(&keys_lock);
    return PULSE_OK;
}

void pulse_tls_keys_clear(void)
{
    pthread_mutex_lock(&keys_lock);
    struct keypair *kp = served;
    served = NULL;
    pthread_mutex_unlock(&keys_lock);
    while (kp != NULL) {
        struct keypair *older = kp->older;
        keypair_free(kp);
        kp = older;
    }
}

/* gnutls_certificate_retrieve_function2: the newest pair, whatever the
 * client asked for (one certificate is configured). Thread: an MHD
 * worker, in a handshake. */
static int retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                    const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length, gnutls_pcert_st **pcert,
                    unsigned int *pcert_length, gnutls_privkey_t *pkey)
{
    (void)session;
    (void)req_ca_dn;
    (void)nreqs;
    (void)pk_algos;
    (void)pk_algos_length;
    pthread_mutex_lock(&keys_lock);
    struct keypair *kp = served;
    pthread_mutex_unlock(&keys_lock);
    if (kp == NULL)
        return -1; /* fails the handshake */
    *pcert = kp->certs;
    *pcert_length = kp->ncerts;
    *pkey = kp->key;
    return 0;
}

void *pulse_tls_retrieve_fn(void)
{
    gnutls_certificate_retrieve_function2 *fn = retrieve;
    return (void *)(uintptr_t)fn;
}

/* ---- mTLS ---------------------------------------------------------------- */

int pulse_tls_client_problem(struct MHD_Connection *conn, char *why, size_t whylen)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (ci == NULL || ci->tls_session == NULL) {
        snprintf(why, whylen, "no TLS session");
        return 1;
    }
    gnutls_session_t session = (gnutls_session_t)ci->tls_session;
    unsigned count = 0;
    if (gnutls_certificate_get_peers(session, &count) == NULL || count == 0) {
        snprintf(why, whylen, "the client sent no certificate");
        return 1;
    }
    /* Against the trust list MHD loaded from tls.client-ca-file: the
     * chain's signatures, each certificate's validity dates. */
    unsigned status = 0;
    int rc = gnutls_certificate_verify_peers2(session, &status);
    if (rc < 0) {
        snprintf(why, whylen, "its certificate could not be checked: %s", gnutls_strerror(rc));
        return 1;
    }
    if (status == 0)
        return 0;
    gnutls_datum_t text = {NULL, 0};
    if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &text, 0) == 0 && text.data != NULL)
        snprintf(why, whylen, "its certificate does not verify against tls.client-ca-file: %s",
                 (const char *)text.data);
    else
        snprintf(why, whylen, "its certificate does not verify against tls.client-ca-file");
    gnutls_free(text.data);
    size_t n = strlen(why);
    while (n > 0 && why[n - 1] == ' ')
        why[--n] = '\0';
    return 1;
}
