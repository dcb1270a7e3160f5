/* SPDX-License-Identifier: MIT */
/*
 * auth.h - bearer tokens and their grants (docs/Security.md): the token
 * file (auth.token-file), its reload on SIGHUP, the look-up of a request's
 * token and the check of a grant against a name.
 *
 * The token file holds one token per line (conf/tokens.example):
 *
 *     NAME sha256:HEX64 [GRANT ...] [rps=N] [bps=SIZE]
 *
 * NAME is 1..64 of [A-Za-z0-9._-] (it is what logs and errors show); HEX64
 * is the SHA-256 of the token in lower- or upper-case hex (the token itself
 * is never stored); each GRANT is read:PATTERN, write:PATTERN,
 * admin:PATTERN (topics) or commit:PATTERN (consumers and groups), a
 * PATTERN being an exact name or a prefix ending in '*' ("*" alone: every
 * name). admin:* also covers broker-wide administration. rps= and bps=
 * (anywhere after the hash, each at most once) give the token its own
 * [limits] rates: requests per second (0 to 1000000) and bytes per second
 * (a size as in pulse.conf, up to 1TiB); 0 is unlimited for the token, and
 * a rate not given is the [limits] default. Blank lines and
 * lines starting with '#' are ignored. A file with any bad line is refused
 * whole, with the line number and why.
 *
 * Ownership: struct pulse_auth owns the current table. A request takes a
 * reference to the table its token came from (pulse_auth_lookup) and gives
 * it back with pulse_auth_tokens_release, so a reload never frees a token
 * a request still reads. The token and its table never hold the token
 * text, only its hash.
 *
 * Hashing is GnuTLS's SHA-256 (gnutls_hash_fast); hashes are compared with
 * gnutls_memcmp (constant time), against every entry of the table whatever
 * matches, so the time of a look-up says nothing about which bytes of a
 * guess were right.
 *
 * Thread: any. Locks: the table pointer is swapped and referenced under
 * struct pulse_auth's mutex (held for a few instructions, never across a
 * file read or a hash).
 */
#ifndef PULSE_HTTP_AUTH_H
#define PULSE_HTTP_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "http/router.h"

#define PULSE_AUTH_NAME_MAX 64
#define PULSE_AUTH_TOKEN_MAX 4096 /* longest token accepted in a header or on stdin */
#define PULSE_AUTH_LINE_MAX 4096  /* longest line of the token file */
#define PULSE_AUTH_FILE_MAX (1024 * 1024)

struct pulse_auth;
struct pulse_auth_tokens;
struct pulse_auth_token;

/*
 * Reads the token file at path into a new struct pulse_auth (*out, freed
 * with pulse_auth_destroy). PULSE_INVALID (a bad line: errbuf names the
 * file, the line and why), PULSE_IO (unreadable: errbuf says why),
 * PULSE_NOMEM. *out is untouched on failure. Thread: any.
 */
pulse_status_t pulse_auth_create(const char *path, struct pulse_auth **out, char *errbuf, size_t errlen);

/* NULL is a no-op. No request may hold a table reference any more. */
void pulse_auth_destroy(struct pulse_auth *auth);

/*
 * Reads the file again. On success the new table replaces the old one
 * (requests in flight keep the old until they complete); on failure the
 * old one stays and errbuf says why (as pulse_auth_create). *count gets
 * the number of tokens of the table in use afterwards. Thread: any (main,
 * on SIGHUP).
 */
pulse_status_t pulse_auth_reload(struct pulse_auth *auth, size_t *count, char *errbuf, size_t errlen);

/* Number of tokens in the current table. */
size_t pulse_auth_count(struct pulse_auth *auth);

/*
 * Finds the token of an Authorization header value ("Bearer TOKEN"; the
 * scheme is case-insensitive). PULSE_OK: *tab holds a reference (give it
 * back with pulse_auth_tokens_release) and *tok is borrowed from it.
 * PULSE_NOT_FOUND: no header, another scheme or an unknown token
 * (*tab and *tok NULL); *missing tells a header that carried no bearer
 * token from a token that is unknown.
 */
pulse_status_t pulse_auth_lookup(struct pulse_auth *auth, const char *header, struct pulse_auth_tokens **tab,
                                 const struct pulse_auth_token **tok, bool *missing);

/* Gives back a reference from pulse_auth_lookup; NULL is a no-op. */
void pulse_auth_tokens_release(struct pulse_auth_tokens *tab);

/* The token's name (borrowed from its table). */
const char *pulse_auth_token_name(const struct pulse_auth_token *tok);

/* A token's own [limits] rates (rps=, bps= on its line); a rate not set
 * there is the [limits] default. */
struct pulse_auth_limits {
    bool rps_set;
    int64_t rps; /* requests per second; 0 = unlimited */
    bool bps_set;
    uint64_t bps; /* bytes per second; 0 = unlimited */
};

/* Copies tok's rates into *out. */
void pulse_auth_token_limits(const struct pulse_auth_token *tok, struct pulse_auth_limits *out);

/*
 * True when tok's grants cover kind on name: READ, WRITE, ADMIN (topics)
 * and COMMIT (consumers, groups) match a grant of that kind whose pattern
 * covers name; BROKER needs admin:*; TOKEN, PUBLIC and NONE are always
 * true; UNSET is BROKER. name NULL (a list) asks whether any grant of the
 * kind exists.
 */
bool pulse_auth_token_allows(const struct pulse_auth_token *tok, enum pulse_grant_kind kind, const char *name);

/*
 * The token file line for a token (pulsed --hash-token): checks name and
 * each grant (or rps=, bps= field) as the file reader does, hashes
 * token[0..len) and writes "NAME sha256:HEX GRANT...\n" into out. PULSE_INVALID (errbuf says which
 * argument and why), PULSE_TOO_LARGE (out too small), PULSE_IO (GnuTLS
 * failed).
 */
pulse_status_t pulse_auth_hash_line(const char *name, const char *const *grants, size_t n_grants, const char *token,
                                    size_t len, char *out, size_t outlen, char *errbuf, size_t errlen);

#endif
