/* SPDX-License-Identifier: MIT */
/*
 * auth.c - see auth.h. The file is read whole (at most
 * PULSE_AUTH_FILE_MAX bytes) into a new table; any bad line refuses the
 * whole file, so a typo can never silently drop a grant or a token. A
 * table is immutable once built: reload builds another and swaps the
 * pointer, and the last reference frees the old one.
 *
 * No cryptography is written here: SHA-256 is gnutls_hash_fast, the
 * comparison gnutls_memcmp.
 */
#include "http/auth.h"

#include <ctype.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "broker/broker.h"
#include "common/alloc.h"
#include "common/settings.h"

#define HASH_LEN 32
#define HASH_PREFIX "sha256:"
#define MAX_GRANTS 64
#define MAX_TOKENS 100000
#define MAX_RPS 1000000                        /* as limits.requests-per-second */
#define MAX_BPS (1024ull * 1024 * 1024 * 1024) /* as limits.bytes-per-second */

struct grant {
    enum pulse_grant_kind kind; /* READ, WRITE, ADMIN or COMMIT */
    bool prefix;                /* the pattern ended in '*' (not kept in pattern) */
    size_t len;
    char pattern[PULSE_NAME_MAX + 1];
};

struct pulse_auth_token {
    char name[PULSE_AUTH_NAME_MAX + 1];
    unsigned char hash[HASH_LEN];
    struct pulse_auth_limits limits;
    size_t n_grants;
    struct grant grants[MAX_GRANTS];
};

struct pulse_auth_tokens {
    atomic_long refs;
    size_t n;
    struct pulse_auth_token *tokens;
};

struct pulse_auth {
    char *path;
    pthread_mutex_t lock; /* guards cur and the taking of a reference to it */
    struct pulse_auth_tokens *cur;
};

/* ---- names, grants and hashes ------------------------------------------ */

static bool name_ok(const char *s, size_t len)
{
    if (len == 0 || len > PULSE_AUTH_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
            return false;
    return true;
}

/* "read:orders*" -> g. false with why set when it is not a grant. */
static bool parse_grant(const char *s, size_t len, struct grant *g, const char **why)
{
    static const struct {
        const char *word;
        enum pulse_grant_kind kind;
    } kinds[] = {{"read:", PULSE_GRANT_READ},
                 {"write:", PULSE_GRANT_WRITE},
                 {"admin:", PULSE_GRANT_ADMIN},
                 {"commit:", PULSE_GRANT_COMMIT}};
    memset(g, 0, sizeof *g);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t wl = strlen(kinds[i].word);
        if (len < wl || strncmp(s, kinds[i].word, wl) != 0)
            continue;
        const char *p = s + wl;
        size_t pl = len - wl;
        g->kind = kinds[i].kind;
        if (pl > 0 && p[pl - 1] == '*') {
            g->prefix = true;
            pl--;
        }
        /* A prefix may be empty ("*") or the start of a name (the
         * characters of the name rule); an exact name must follow the
         * broker's name rule (pulse_broker_name_valid). */
        bool ok = pl <= PULSE_NAME_MAX && (g->prefix || pulse_broker_name_valid(p, pl));
        for (size_t k = 0; ok && k < pl; k++)
            ok = isalnum((unsigned char)p[k]) || p[k] == '.' || p[k] == '_' || p[k] == '-';
        if (!ok) {
            *why = "its pattern is not a topic, consumer or group name, or a prefix of one ending in '*'";
            return false;
        }
        memcpy(g->pattern, p, pl);
        g->pattern[pl] = '\0';
        g->len = pl;
        return true;
    }
    *why = "a grant is read:PATTERN, write:PATTERN, admin:PATTERN or commit:PATTERN";
    return false;
}

/* "rps=N" or "bps=SIZE" into lim. 0: not such a field; 1: parsed; -1:
 * bad, why set. */
static int parse_limit(const char *s, size_t len, struct pulse_auth_limits *lim, const char **why)
{
    char text[32];
    uint64_t v = 0;
    const char *end = NULL;
    bool rps = len >= 4 && strncmp(s, "rps=", 4) == 0;
    if (!rps && (len < 4 || strncmp(s, "bps=", 4) != 0))
        return 0;
    if ((rps && lim->rps_set) || (!rps && lim->bps_set)) {
        *why = rps ? "rps= is given twice" : "bps= is given twice";
        return -1;
    }
    bool ok = len - 4 > 0 && len - 4 < sizeof text;
    if (ok) {
        memcpy(text, s + 4, len - 4);
        text[len - 4] = '\0';
    }
    if (rps) {
        ok = ok && pulse_settings_parse_u64_prefix(text, &v, &end) == PULSE_OK && *end == '\0' && v <= MAX_RPS;
        *why = "rps= takes the token's requests per second, 0 (unlimited) to 1000000";
        lim->rps_set = ok;
        lim->rps = (int64_t)v;
    } else {
        ok = ok && pulse_settings_parse_size(text, &v) == PULSE_OK && v <= MAX_BPS;
        *why = "bps= takes the token's bytes per second, 0 (unlimited) to 1TiB (a size: 512KiB, 10MiB, ...)";
        lim->bps_set = ok;
        lim->bps = v;
    }
    return ok ? 1 : -1;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool parse_hash(const char *s, size_t len, unsigned char *out)
{
    size_t pl = strlen(HASH_PREFIX);
    if (len != pl + 2 * HASH_LEN || strncmp(s, HASH_PREFIX, pl) != 0)
        return false;
    for (size_t i = 0; i < HASH_LEN; i++) {
        int hi = hexval(s[pl + 2 * i]);
        int lo = hexval(s[pl + 2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return true;
}

static pulse_status_t sha256(const void *data, size_t len, unsigned char *out)
{
    return gnutls_hash_fast(GNUTLS_DIG_SHA256, data, len, out) == 0 ? PULSE_OK : PULSE_IO;
}

/* ---- the table ----------------------------------------------------------- */

static void tokens_free(struct pulse_auth_tokens *tab)
{
    if (tab == NULL)
        return;
    pulse_free(tab->tokens);
    pulse_free(tab);
}

void pulse_auth_tokens_release(struct pulse_auth_tokens *tab)
{
    if (tab != NULL && atomic_fetch_sub(&tab->refs, 1) == 1)
        tokens_free(tab);
}

/* Next whitespace-separated field of line at *pos; false at the end. */
static bool next_field(const char *line, size_t *pos, const char **f, size_t *flen)
{
    size_t i = *pos;
    while (line[i] == ' ' || line[i] == '\t')
        i++;
    if (line[i] == '\0')
        return false;
    size_t start = i;
    while (line[i] != '\0' && line[i] != ' ' && line[i] != '\t')
        i++;
    *f = line + start;
    *flen = i - start;
    *pos = i;
    return true;
}

/* One non-comment line into tok; why set on failure. */
static bool parse_line(const char *line, struct pulse_auth_token *tok, const char **why)
{
    size_t pos = 0;
    const char *f = NULL;
    size_t flen = 0;
    memset(tok, 0, sizeof *tok);
    if (!next_field(line, &pos, &f, &flen) || !name_ok(f, flen)) {
        *why = "a line starts with the token's name: 1 to 64 of A-Z a-z 0-9 . _ -";
        return false;
    }
    memcpy(tok->name, f, flen);
    if (!next_field(line, &pos, &f, &flen) || !parse_hash(f, flen, tok->hash)) {
        *why = "the name is followed by the token's hash, sha256: and 64 hex digits (pulsed --hash-token makes "
               "the line)";
        return false;
    }
    while (next_field(line, &pos, &f, &flen)) {
        int lim = parse_limit(f, flen, &tok->limits, why);
        if (lim != 0) {
            if (lim < 0)
                return false;
            continue;
        }
        if (tok->n_grants == MAX_GRANTS) {
            *why = "more than 64 grants";
            return false;
        }
        if (!parse_grant(f, flen, &tok->grants[tok->n_grants], why))
            return false;
        tok->n_grants++;
    }
    return true;
}

/* A name or hash seen on an earlier line: the file is ambiguous. */
static const char *duplicate(const struct pulse_auth_tokens *tab, const struct pulse_auth_token *tok)
{
    for (size_t i = 0; i < tab->n; i++) {
        if (strcmp(tab->tokens[i].name, tok->name) == 0)
            return "this name is already used by an earlier line";
        if (memcmp(tab->tokens[i].hash, tok->hash, HASH_LEN) == 0)
            return "this hash is already on an earlier line (one token, one name)";
    }
    return NULL;
}

static pulse_status_t add_token(struct pulse_auth_tokens *tab, size_t *cap, const struct pulse_auth_token *tok)
{
    if (tab->n == *cap) {
        size_t ncap = *cap == 0 ? 8 : *cap * 2;
        struct pulse_auth_token *nt = pulse_realloc(tab->tokens, ncap * sizeof *nt);
        if (nt == NULL)
            return PULSE_NOMEM;
        tab->tokens = nt;
        *cap = ncap;
    }
    tab->tokens[tab->n++] = *tok;
    return PULSE_OK;
}

/* Parses the lines of an open file into tab. */
static pulse_status_t read_lines(FILE *f, const char *path, struct pulse_auth_tokens *tab, char *errbuf, size_t errlen)
{
    char line[PULSE_AUTH_LINE_MAX + 2];
    struct pulse_auth_token tok;
    size_t cap = 0;
    size_t total = 0;
    unsigned lineno = 0;
    const char *why = NULL;
    while (fgets(line, sizeof line, f) != NULL) {
        lineno++;
        size_t n = strlen(line);
        total += n;
        if (total > PULSE_AUTH_FILE_MAX || (n == sizeof line - 1 && line[n - 1] != '\n')) {
            pulse_errbuf_set(errbuf, errlen, "auth.token-file %s: line %u: too long (or the file is over %d bytes)",
                             path, lineno, PULSE_AUTH_FILE_MAX);
            return PULSE_INVALID;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
            line[--n] = '\0';
        size_t lead = strspn(line, " \t");
        if (line[lead] == '\0' || line[lead] == '#')
            continue;
        if (!parse_line(line + lead, &tok, &why) || (why = duplicate(tab, &tok)) != NULL ||
            (tab->n == MAX_TOKENS && (why = "too many tokens") != NULL)) {
            pulse_errbuf_set(errbuf, errlen, "auth.token-file %s: line %u: %s", path, lineno, why);
            return PULSE_INVALID;
        }
        if (add_token(tab, &cap, &tok) != PULSE_OK)
            return PULSE_NOMEM;
    }
    return PULSE_OK;
}

/* Reads path into a new table with one reference (*out). */
static pulse_status_t load(const char *path, struct pulse_auth_tokens **out, char *errbuf, size_t errlen)
{
    pulse_status_t st = PULSE_OK;
    struct pulse_auth_tokens *tab = NULL;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        int err = errno;
        pulse_errbuf_set(errbuf, errlen, "auth.token-file %s: cannot open: %s", path, strerror(err));
        st = PULSE_IO;
        goto out;
    }
    tab = pulse_calloc(1, sizeof *tab);
    if (tab == NULL) {
        st = PULSE_NOMEM;
        goto out;
    }
    atomic_init(&tab->refs, 1);
    st = read_lines(f, path, tab, errbuf, errlen);
    if (st == PULSE_OK && ferror(f)) {
        pulse_errbuf_set(errbuf, errlen, "auth.token-file %s: read error", path);
        st = PULSE_IO;
    }
    if (st != PULSE_OK)
        goto out;
    *out = tab;
    tab = NULL;
out:
    if (st == PULSE_NOMEM)
        pulse_errbuf_set(errbuf, errlen, "auth.token-file %s: out of memory", path);
    if (f != NULL)
        fclose(f);
    tokens_free(tab);
    return st;
}

/* ---- the module ----------------------------------------------------------- */

pulse_status_t pulse_auth_create(const char *path, struct pulse_auth **out, char *errbuf, size_t errlen)
{
    pulse_status_t st = PULSE_OK;
    struct pulse_auth *auth = pulse_calloc(1, sizeof *auth);
    if (auth == NULL || (auth->path = pulse_strdup(path)) == NULL) {
        pulse_free(auth);
        pulse_errbuf_set(errbuf, errlen, "out of memory");
        return PULSE_NOMEM;
    }
    pthread_mutex_init(&auth->lock, NULL);
    st = load(path, &auth->cur, errbuf, errlen);
    if (st != PULSE_OK) {
        pulse_auth_destroy(auth);
        return st;
    }
    *out = auth;
    return PULSE_OK;
}

void pulse_auth_destroy(struct pulse_auth *auth)
{
    if (auth == NULL)
        return;
    pulse_auth_tokens_release(auth->cur);
    pthread_mutex_destroy(&auth->lock);
    pulse_free(auth->path);
    pulse_free(auth);
}

pulse_status_t pulse_auth_reload(struct pulse_auth *auth, size_t *count, char *errbuf, size_t errlen)
{
    struct pulse_auth_tokens *tab = NULL;
    pulse_status_t st = load(auth->path, &tab, errbuf, errlen);
    pthread_mutex_lock(&auth->lock);
    struct pulse_auth_tokens *old = NULL;
    if (st == PULSE_OK) {
        old = auth->cur;
        auth->cur = tab;
    }
    *count = auth->cur->n;
    pthread_mutex_unlock(&auth->lock);
    pulse_auth_tokens_release(old);
    return st;
}

size_t pulse_auth_count(struct pulse_auth *auth)
{
    pthread_mutex_lock(&auth->lock);
    size_t n = auth->cur->n;
    pthread_mutex_unlock(&auth->lock);
    return n;
}

/* The token of "Bearer TOKEN", or NULL. */
static const char *bearer(const char *header, size_t *len)
{
    if (header == NULL)
        return NULL;
    while (*header == ' ' || *header == '\t')
        header++;
    if (strncasecmp(header, "Bearer", 6) != 0 || (header[6] != ' ' && header[6] != '\t'))
        return NULL;
    const char *t = header + 7;
    while (*t == ' ' || *t == '\t')
        t++;
    size_t n = strlen(t);
    while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t'))
        n--;
    if (n == 0 || n > PULSE_AUTH_TOKEN_MAX)
        return NULL;
    *len = n;
    return t;
}

pulse_status_t pulse_auth_lookup(struct pulse_auth *auth, const char *header, struct pulse_auth_tokens **tab,
                                 const struct pulse_auth_token **tok, bool *missing)
{
    size_t len = 0;
    unsigned char hash[HASH_LEN];
    const char *token = bearer(header, &len);
    *tab = NULL;
    *tok = NULL;
    *missing = token == NULL;
    if (token == NULL || sha256(token, len, hash) != PULSE_OK)
        return PULSE_NOT_FOUND;
    pthread_mutex_lock(&auth->lock);
    struct pulse_auth_tokens *t = auth->cur;
    atomic_fetch_add(&t->refs, 1);
    pthread_mutex_unlock(&auth->lock);
    /* Every entry is compared, in constant time each, whatever matched. */
    const struct pulse_auth_token *found = NULL;
    for (size_t i = 0; i < t->n; i++) {
        int diff = gnutls_memcmp(hash, t->tokens[i].hash, HASH_LEN);
        if (diff == 0)
            found = &t->tokens[i];
    }
    if (found == NULL) {
        pulse_auth_tokens_release(t);
        return PULSE_NOT_FOUND;
    }
    *tab = t;
    *tok = found;
    return PULSE_OK;
}

const char *pulse_auth_token_name(const struct pulse_auth_token *tok)
{
    return tok->name;
}

void pulse_auth_token_limits(const struct pulse_auth_token *tok, struct pulse_auth_limits *out)
{
    *out = tok->limits;
}

static bool grant_covers(const struct grant *g, const char *name)
{
    if (name == NULL)
        return true;
    if (g->prefix)
        return strncmp(name, g->pattern, g->len) == 0;
    return strcmp(name, g->pattern) == 0;
}

bool pulse_auth_token_allows(const struct pulse_auth_token *tok, enum pulse_grant_kind kind, const char *name)
{
    switch (kind) {
    case PULSE_GRANT_NONE:
    case PULSE_GRANT_PUBLIC:
    case PULSE_GRANT_TOKEN:
        return true;
    case PULSE_GRANT_UNSET:
    case PULSE_GRANT_BROKER:
        for (size_t i = 0; i < tok->n_grants; i++)
            if (tok->grants[i].kind == PULSE_GRANT_ADMIN && tok->grants[i].prefix && tok->grants[i].len == 0)
                return true;
        return false;
    case PULSE_GRANT_READ:
    case PULSE_GRANT_WRITE:
    case PULSE_GRANT_ADMIN:
    case PULSE_GRANT_COMMIT:
        break;
    }
    for (size_t i = 0; i < tok->n_grants; i++)
        if (tok->grants[i].kind == kind && grant_covers(&tok->grants[i], name))
            return true;
    return false;
}

pulse_status_t pulse_auth_hash_line(const char *name, const char *const *grants, size_t n_grants, const char *token,
                                    size_t len, char *out, size_t outlen, char *errbuf, size_t errlen)
{
    struct grant g;
    struct pulse_auth_limits lim = {0};
    const char *why = NULL;
    unsigned char hash[HASH_LEN];
    if (!name_ok(name, strlen(name))) {
        pulse_errbuf_set(errbuf, errlen, "name \"%s\": 1 to 64 of A-Z a-z 0-9 . _ -", name);
        return PULSE_INVALID;
    }
    if (n_grants > MAX_GRANTS) {
        pulse_errbuf_set(errbuf, errlen, "more than %d grants", MAX_GRANTS);
        return PULSE_INVALID;
    }
    for (size_t i = 0; i < n_grants; i++) {
        int l = parse_limit(grants[i], strlen(grants[i]), &lim, &why);
        if (l < 0 || (l == 0 && !parse_grant(grants[i], strlen(grants[i]), &g, &why))) {
            pulse_errbuf_set(errbuf, errlen, "grant \"%s\": %s", grants[i], why);
            return PULSE_INVALID;
        }
    }
    if (len == 0 || len > PULSE_AUTH_TOKEN_MAX) {
        pulse_errbuf_set(errbuf, errlen, "the token (one line on standard input) must have 1 to %d bytes",
                         PULSE_AUTH_TOKEN_MAX);
        return PULSE_INVALID;
    }
    for (size_t i = 0; i < len; i++) {
        /* What a client can put after "Bearer " in a header field. */
        if ((unsigned char)token[i] <= 0x20 || (unsigned char)token[i] >= 0x7f) {
            pulse_errbuf_set(errbuf, errlen,
                             "the token has a blank, control or non-ASCII byte; use printable "
                             "ASCII (e.g. openssl rand -hex 32)");
            return PULSE_INVALID;
        }
    }
    if (sha256(token, len, hash) != PULSE_OK) {
        pulse_errbuf_set(errbuf, errlen, "GnuTLS could not compute SHA-256");
        return PULSE_IO;
    }
    size_t used = (size_t)snprintf(out, outlen, "%s %s", name, HASH_PREFIX);
    for (size_t i = 0; i < HASH_LEN && used < outlen; i++)
        used += (size_t)snprintf(out + used, outlen - used, "%02x", hash[i]);
    for (size_t i = 0; i < n_grants && used < outlen; i++)
        used += (size_t)snprintf(out + used, outlen - used, " %s", grants[i]);
    if (used < outlen)
        used += (size_t)snprintf(out + used, outlen - used, "\n");
    if (used >= outlen) {
        pulse_errbuf_set(errbuf, errlen, "the line is too long");
        return PULSE_TOO_LARGE;
    }
    return PULSE_OK;
}
