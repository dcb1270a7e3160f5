/* SPDX-License-Identifier: MIT */
/*
 * check_auth.c - bearer tokens (http/auth.h) and the router's grant table
 * (http/router.h): every route and method has a grant; the token file's
 * format, its refusals and reload; grant patterns; the --hash-token line.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/auth.h"
#include "http/auth_settings.h"
#include "http/router.h"

/* SHA-256 of "secret-1" and "adm" (sha256sum). */
#define H_SECRET1 "f7e7c36e458e80e6b6a2c67d0a9ec09bd718dadd7bfa8d6bf6e7ad526e46c2f7"
#define H_ADM "86f65e28a754e1a71b2df9403615a6c436c32c42a75a10d02813961b86f1e428"

static char path[64];

static void write_file(const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void setup(void)
{
    snprintf(path, sizeof path, "/tmp/check_auth.XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
}

static void teardown(void)
{
    unlink(path);
}

/* The token for header, or NULL; the table reference is given back
 * after the name is copied into name. */
static bool lookup(struct pulse_auth *auth, const char *header, char *name, bool *missing)
{
    struct pulse_auth_tokens *tab = NULL;
    const struct pulse_auth_token *tok = NULL;
    if (pulse_auth_lookup(auth, header, &tab, &tok, missing) != PULSE_OK)
        return false;
    snprintf(name, PULSE_AUTH_NAME_MAX + 1, "%s", pulse_auth_token_name(tok));
    pulse_auth_tokens_release(tab);
    return true;
}

START_TEST(test_every_route_and_method_has_a_grant)
{
    for (int r = 0; r < PULSE_ROUTE_NONE; r++) {
        for (int m = 0; m < PULSE_METHOD_OTHER; m++) {
            if (!pulse_router_allows((enum pulse_route)r, (enum pulse_method)m))
                continue;
            const struct pulse_route_grant *g = pulse_router_grant((enum pulse_route)r, (enum pulse_method)m);
            ck_assert_msg(g->kind != PULSE_GRANT_UNSET, "%s %s has no grant in router.c's route_grants",
                          pulse_router_method_name((enum pulse_method)m), pulse_router_template((enum pulse_route)r));
            /* A grant on a name needs the name. */
            if (g->kind >= PULSE_GRANT_READ && g->kind <= PULSE_GRANT_COMMIT)
                ck_assert_msg(g->subject != PULSE_SUBJECT_NONE, "%s %s: a grant on no name",
                              pulse_router_method_name((enum pulse_method)m),
                              pulse_router_template((enum pulse_route)r));
        }
    }
    /* Only the probes go without a token; OPTIONS (a preflight) too. */
    ck_assert_int_eq(pulse_router_grant(PULSE_ROUTE_HEALTHZ, PULSE_METHOD_GET)->kind, PULSE_GRANT_NONE);
    ck_assert_int_eq(pulse_router_grant(PULSE_ROUTE_TOPIC, PULSE_METHOD_OPTIONS)->kind, PULSE_GRANT_NONE);
    ck_assert_int_eq(pulse_router_grant(PULSE_ROUTE_TOPIC, PULSE_METHOD_HEAD)->kind, PULSE_GRANT_READ);
    ck_assert_int_eq(pulse_router_grant(PULSE_ROUTE_GROUP_COMMIT, PULSE_METHOD_POST)->subject, PULSE_SUBJECT_GROUP);
    ck_assert_int_eq(pulse_router_grant(PULSE_ROUTE_NONE, PULSE_METHOD_GET)->kind, PULSE_GRANT_UNSET);
}
END_TEST

START_TEST(test_file_lines_give_names_hashes_and_grants)
{
    write_file("# tokens\n\n  alice sha256:" H_SECRET1 " read:orders* write:orders commit:svc-\t\n"
               "root sha256:" H_ADM " admin:*\r\n");
    struct pulse_auth *auth = NULL;
    char err[256] = "";
    ck_assert_int_eq(pulse_auth_create(path, &auth, err, sizeof err), PULSE_OK);
    ck_assert_uint_eq(pulse_auth_count(auth), 2);
    char name[PULSE_AUTH_NAME_MAX + 1];
    bool missing = false;
    ck_assert(lookup(auth, "Bearer secret-1", name, &missing));
    ck_assert_str_eq(name, "alice");
    ck_assert(lookup(auth, "  bearer   adm  ", name, &missing));
    ck_assert_str_eq(name, "root");
    /* Unknown, another scheme, nothing. */
    ck_assert(!lookup(auth, "Bearer secret-2", name, &missing));
    ck_assert(!missing);
    ck_assert(!lookup(auth, "Basic c2VjcmV0LTE=", name, &missing));
    ck_assert(missing);
    ck_assert(!lookup(auth, NULL, name, &missing));
    ck_assert(missing);
    ck_assert(!lookup(auth, "Bearer ", name, &missing));
    ck_assert(missing);
    /* The hash itself is not a token. */
    ck_assert(!lookup(auth, "Bearer " H_SECRET1, name, &missing));
    pulse_auth_destroy(auth);
}
END_TEST

START_TEST(test_patterns_are_exact_names_or_prefixes)
{
    write_file("alice sha256:" H_SECRET1 " read:orders* write:orders commit:svc-*\n"
               "root sha256:" H_ADM " admin:* read:*\n");
    struct pulse_auth *auth = NULL;
    char err[256] = "";
    ck_assert_int_eq(pulse_auth_create(path, &auth, err, sizeof err), PULSE_OK);
    struct pulse_auth_tokens *tab = NULL;
    const struct pulse_auth_token *alice = NULL;
    const struct pulse_auth_token *root = NULL;
    bool missing = false;
    ck_assert_int_eq(pulse_auth_lookup(auth, "Bearer secret-1", &tab, &alice, &missing), PULSE_OK);
    struct pulse_auth_tokens *tab2 = NULL;
    ck_assert_int_eq(pulse_auth_lookup(auth, "Bearer adm", &tab2, &root, &missing), PULSE_OK);

    ck_assert(pulse_auth_token_allows(alice, PULSE_GRANT_READ, "orders"));
    ck_assert(pulse_auth_token_allows(alice, PULSE_GRANT_READ, "orders.eu"));
    ck_assert(!pulse_auth_token_allows(alice, PULSE_GRANT_READ, "order"));
    ck_assert(pulse_auth_token_allows(alice, PULSE_GRANT_WRITE, "orders"));
    ck_assert(!pulse_auth_token_allows(alice, PULSE_GRANT_WRITE, "orders.eu")); /* exact */
    ck_assert(!pulse_auth_token_allows(alice, PULSE_GRANT_ADMIN, "orders"));
    ck_assert(pulse_auth_token_allows(alice, PULSE_GRANT_COMMIT, "svc-billing"));
    ck_assert(!pulse_auth_token_allows(alice, PULSE_GRANT_COMMIT, "billing"));
    /* The kinds do not stand in for each other. */
    ck_assert(!pulse_auth_token_allows(alice, PULSE_GRANT_READ, "svc-billing"));
    /* A list asks for any grant of the kind. */
    ck_assert(pulse_auth_token_allows(alice, PULSE_GRANT_READ, NULL));
    ck_assert(!pulse_auth_token_allows(alice, PULSE_GRANT_ADMIN, NULL));
    /* Broker-wide administration (and a route left UNSET) is admin:*. */
    ck_assert(!pulse_auth_token_allows(alice, PULSE_GRANT_BROKER, NULL));
    ck_assert(!pulse_auth_token_allows(alice, PULSE_GRANT_UNSET, NULL));
    ck_assert(pulse_auth_token_allows(root, PULSE_GRANT_BROKER, NULL));
    ck_assert(pulse_auth_token_allows(root, PULSE_GRANT_UNSET, NULL));
    ck_assert(pulse_auth_token_allows(root, PULSE_GRANT_ADMIN, "anything"));
    ck_assert(!pulse_auth_token_allows(root, PULSE_GRANT_WRITE, "anything"));
    ck_assert(!pulse_auth_token_allows(root, PULSE_GRANT_COMMIT, "anything"));
    ck_assert(pulse_auth_token_allows(alice, PULSE_GRANT_TOKEN, NULL));
    pulse_auth_tokens_release(tab);
    pulse_auth_tokens_release(tab2);
    pulse_auth_destroy(auth);
}
END_TEST

START_TEST(test_bad_lines_refuse_the_file_naming_the_line)
{
    static const struct {
        const char *text;
        const char *needle;
    } cases[] = {
        {"alice sha256:" H_SECRET1 " reed:x\n", "line 1: a grant is read:PATTERN"},
        {"# c\nalice sha256:" H_SECRET1 " read:a*b\n", "line 2: its pattern"},
        {"alice sha256:" H_SECRET1 " read:\n", "line 1: its pattern"},
        {"alice sha256:abc read:x\n", "line 1: the name is followed by the token's hash"},
        {"alice " H_SECRET1 "\n", "line 1: the name is followed"},
        {"al/ice sha256:" H_SECRET1 "\n", "line 1: a line starts with the token's name"},
        {"alice sha256:" H_SECRET1 "\nalice sha256:" H_ADM "\n", "line 2: this name is already used"},
        {"alice sha256:" H_SECRET1 "\nbob sha256:" H_SECRET1 "\n", "line 2: this hash is already"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(cases[i].text);
        struct pulse_auth *auth = NULL;
        char err[256] = "";
        ck_assert_int_eq(pulse_auth_create(path, &auth, err, sizeof err), PULSE_INVALID);
        ck_assert_ptr_null(auth);
        ck_assert_msg(strstr(err, cases[i].needle) != NULL, "case %zu: %s", i, err);
        ck_assert_msg(strstr(err, path) != NULL, "case %zu: the message names the file: %s", i, err);
    }
    struct pulse_auth *auth = NULL;
    char err[256] = "";
    ck_assert_int_eq(pulse_auth_create("/nonexistent/tokens", &auth, err, sizeof err), PULSE_IO);
    ck_assert(strstr(err, "No such file") != NULL);
}
END_TEST

START_TEST(test_reload_swaps_tables_and_keeps_the_old_on_a_bad_file)
{
    write_file("alice sha256:" H_SECRET1 " read:*\n");
    struct pulse_auth *auth = NULL;
    char err[256] = "";
    char name[PULSE_AUTH_NAME_MAX + 1];
    bool missing = false;
    size_t n = 0;
    ck_assert_int_eq(pulse_auth_create(path, &auth, err, sizeof err), PULSE_OK);
    /* A request holding the old table keeps its token across a reload. */
    struct pulse_auth_tokens *held = NULL;
    const struct pulse_auth_token *tok = NULL;
    ck_assert_int_eq(pulse_auth_lookup(auth, "Bearer secret-1", &held, &tok, &missing), PULSE_OK);

    write_file("root sha256:" H_ADM " admin:*\n");
    ck_assert_int_eq(pulse_auth_reload(auth, &n, err, sizeof err), PULSE_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert(!lookup(auth, "Bearer secret-1", name, &missing));
    ck_assert(lookup(auth, "Bearer adm", name, &missing));
    ck_assert_str_eq(pulse_auth_token_name(tok), "alice");
    ck_assert(pulse_auth_token_allows(tok, PULSE_GRANT_READ, "x"));
    pulse_auth_tokens_release(held);

    write_file("root sha256:" H_ADM " admin:*\nbroken\n");
    ck_assert_int_eq(pulse_auth_reload(auth, &n, err, sizeof err), PULSE_INVALID);
    ck_assert(strstr(err, "line 2") != NULL);
    ck_assert_uint_eq(n, 1);
    ck_assert(lookup(auth, "Bearer adm", name, &missing));
    unlink(path);
    ck_assert_int_eq(pulse_auth_reload(auth, &n, err, sizeof err), PULSE_IO);
    ck_assert(lookup(auth, "Bearer adm", name, &missing));
    pulse_auth_destroy(auth);
}
END_TEST

/* Readers (MHD workers) look tokens up while the main thread reloads. */
struct racer {
    struct pulse_auth *auth;
    atomic_bool stop;
    atomic_long found;
    atomic_long wrong;
};

static void *race_lookups(void *arg)
{
    struct racer *rc = arg;
    while (!atomic_load(&rc->stop)) {
        struct pulse_auth_tokens *tab = NULL;
        const struct pulse_auth_token *tok = NULL;
        bool missing = false;
        /* "adm" is in both files under the name root; secret-1 in one. */
        if (pulse_auth_lookup(rc->auth, "Bearer adm", &tab, &tok, &missing) == PULSE_OK) {
            if (strcmp(pulse_auth_token_name(tok), "root") != 0 ||
                !pulse_auth_token_allows(tok, PULSE_GRANT_BROKER, NULL))
                atomic_fetch_add(&rc->wrong, 1);
            atomic_fetch_add(&rc->found, 1);
            pulse_auth_tokens_release(tab);
        } else {
            atomic_fetch_add(&rc->wrong, 1);
        }
        if (pulse_auth_lookup(rc->auth, "Bearer secret-1", &tab, &tok, &missing) == PULSE_OK) {
            if (strcmp(pulse_auth_token_name(tok), "alice") != 0)
                atomic_fetch_add(&rc->wrong, 1);
            pulse_auth_tokens_release(tab);
        }
    }
    return NULL;
}

START_TEST(test_lookups_race_reloads_safely)
{
    static const char *const files[2] = {
        "root sha256:" H_ADM " admin:*\n",
        "alice sha256:" H_SECRET1 " read:*\nroot sha256:" H_ADM " admin:*\n",
    };
    write_file(files[0]);
    struct racer rc;
    char err[256] = "";
    size_t n = 0;
    ck_assert_int_eq(pulse_auth_create(path, &rc.auth, err, sizeof err), PULSE_OK);
    atomic_init(&rc.stop, false);
    atomic_init(&rc.found, 0);
    atomic_init(&rc.wrong, 0);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, race_lookups, &rc), 0);
    for (int i = 0; i < 200; i++) {
        write_file(files[i % 2]);
        ck_assert_int_eq(pulse_auth_reload(rc.auth, &n, err, sizeof err), PULSE_OK);
    }
    atomic_store(&rc.stop, true);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_gt(atomic_load(&rc.found), 0);
    ck_assert_int_eq(atomic_load(&rc.wrong), 0);
    pulse_auth_destroy(rc.auth);
}
END_TEST

START_TEST(test_hash_line_is_a_line_the_file_takes)
{
    char line[PULSE_AUTH_LINE_MAX + 1];
    char err[256] = "";
    const char *grants[] = {"read:orders*", "commit:svc-*"};
    ck_assert_int_eq(pulse_auth_hash_line("alice", grants, 2, "secret-1", 8, line, sizeof line, err, sizeof err),
                     PULSE_OK);
    ck_assert_str_eq(line, "alice sha256:" H_SECRET1 " read:orders* commit:svc-*\n");
    ck_assert(strstr(line, "secret-1") == NULL);
    write_file(line);
    struct pulse_auth *auth = NULL;
    ck_assert_int_eq(pulse_auth_create(path, &auth, err, sizeof err), PULSE_OK);
    char name[PULSE_AUTH_NAME_MAX + 1];
    bool missing = false;
    ck_assert(lookup(auth, "Bearer secret-1", name, &missing));
    ck_assert_str_eq(name, "alice");
    pulse_auth_destroy(auth);
    /* Refusals name the argument. */
    const char *bad[] = {"write:"};
    ck_assert_int_eq(pulse_auth_hash_line("alice", bad, 1, "t", 1, line, sizeof line, err, sizeof err), PULSE_INVALID);
    ck_assert(strstr(err, "grant \"write:\"") != NULL);
    ck_assert_int_eq(pulse_auth_hash_line("a b", NULL, 0, "t", 1, line, sizeof line, err, sizeof err), PULSE_INVALID);
    ck_assert_int_eq(pulse_auth_hash_line("a", NULL, 0, "", 0, line, sizeof line, err, sizeof err), PULSE_INVALID);
    ck_assert_int_eq(pulse_auth_hash_line("a", NULL, 0, "t t", 3, line, sizeof line, err, sizeof err), PULSE_INVALID);
}
END_TEST

/* The rates of the token of header (which must be known). */
static struct pulse_auth_limits limits_of(struct pulse_auth *auth, const char *header)
{
    struct pulse_auth_tokens *tab = NULL;
    const struct pulse_auth_token *tok = NULL;
    struct pulse_auth_limits lim;
    bool missing = false;
    ck_assert_int_eq(pulse_auth_lookup(auth, header, &tab, &tok, &missing), PULSE_OK);
    pulse_auth_token_limits(tok, &lim);
    pulse_auth_tokens_release(tab);
    return lim;
}

START_TEST(test_lines_may_give_a_token_its_own_rates)
{
    write_file("alice sha256:" H_SECRET1 " read:* rps=5 bps=2KiB write:x\n"
               "root sha256:" H_ADM " rps=0 admin:*\n");
    struct pulse_auth *auth = NULL;
    char err[256] = "";
    ck_assert_int_eq(pulse_auth_create(path, &auth, err, sizeof err), PULSE_OK);
    struct pulse_auth_limits a = limits_of(auth, "Bearer secret-1");
    ck_assert(a.rps_set && a.bps_set);
    ck_assert_int_eq(a.rps, 5);
    ck_assert_uint_eq(a.bps, 2048);
    struct pulse_auth_tokens *tab = NULL;
    const struct pulse_auth_token *tok = NULL;
    bool missing = false;
    ck_assert_int_eq(pulse_auth_lookup(auth, "Bearer secret-1", &tab, &tok, &missing), PULSE_OK);
    /* The fields are not grants and do not hide the grants around them. */
    ck_assert(pulse_auth_token_allows(tok, PULSE_GRANT_WRITE, "x"));
    ck_assert(pulse_auth_token_allows(tok, PULSE_GRANT_READ, "y"));
    pulse_auth_tokens_release(tab);
    /* 0 is set (unlimited), an absent field is not (the default). */
    struct pulse_auth_limits r = limits_of(auth, "Bearer adm");
    ck_assert(r.rps_set && !r.bps_set);
    ck_assert_int_eq(r.rps, 0);
    /* A reload brings new rates. */
    write_file("alice sha256:" H_SECRET1 " read:*\nroot sha256:" H_ADM " bps=100\n");
    size_t n = 0;
    ck_assert_int_eq(pulse_auth_reload(auth, &n, err, sizeof err), PULSE_OK);
    a = limits_of(auth, "Bearer secret-1");
    ck_assert(!a.rps_set && !a.bps_set);
    r = limits_of(auth, "Bearer adm");
    ck_assert(!r.rps_set && r.bps_set);
    ck_assert_uint_eq(r.bps, 100);
    pulse_auth_destroy(auth);
}
END_TEST

START_TEST(test_bad_rates_refuse_the_file_naming_the_line)
{
    static const struct {
        const char *text;
        const char *needle;
    } cases[] = {
        {"alice sha256:" H_SECRET1 " rps=\n", "line 1: rps= takes"},
        {"alice sha256:" H_SECRET1 " rps=-1\n", "line 1: rps= takes"},
        {"alice sha256:" H_SECRET1 " rps=1.5\n", "line 1: rps= takes"},
        {"alice sha256:" H_SECRET1 " rps=1000001\n", "line 1: rps= takes"},
        {"# c\nalice sha256:" H_SECRET1 " bps=10XB\n", "line 2: bps= takes"},
        {"alice sha256:" H_SECRET1 " bps=2TiB\n", "line 1: bps= takes"},
        {"alice sha256:" H_SECRET1 " rps=1 rps=2\n", "line 1: rps= is given twice"},
        {"alice sha256:" H_SECRET1 "\nbob sha256:" H_ADM " bps=1 bps=1\n", "line 2: bps= is given twice"},
        {"alice sha256:" H_SECRET1 " RPS=1\n", "line 1: a grant is read:PATTERN"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(cases[i].text);
        struct pulse_auth *auth = NULL;
        char err[256] = "";
        ck_assert_int_eq(pulse_auth_create(path, &auth, err, sizeof err), PULSE_INVALID);
        ck_assert_ptr_null(auth);
        ck_assert_msg(strstr(err, cases[i].needle) != NULL, "case %zu: %s", i, err);
        ck_assert_msg(strstr(err, path) != NULL, "case %zu: the message names the file: %s", i, err);
    }
    /* --hash-token takes the fields too, checked the same way. */
    char line[PULSE_AUTH_LINE_MAX + 1];
    char err[256] = "";
    const char *args[] = {"read:*", "rps=3", "bps=1MiB"};
    ck_assert_int_eq(pulse_auth_hash_line("alice", args, 3, "secret-1", 8, line, sizeof line, err, sizeof err),
                     PULSE_OK);
    ck_assert_str_eq(line, "alice sha256:" H_SECRET1 " read:* rps=3 bps=1MiB\n");
    const char *bad[] = {"rps=x"};
    ck_assert_int_eq(pulse_auth_hash_line("alice", bad, 1, "t", 1, line, sizeof line, err, sizeof err), PULSE_INVALID);
    ck_assert_msg(strstr(err, "\"rps=x\": rps= takes") != NULL, "%s", err);
}
END_TEST

START_TEST(test_public_setting_names_the_file_routes)
{
    ck_assert(pulse_auth_settings_is_public("dashboard,openapi", PULSE_ROUTE_DASHBOARD));
    ck_assert(pulse_auth_settings_is_public("dashboard,openapi", PULSE_ROUTE_ASSET));
    ck_assert(pulse_auth_settings_is_public("dashboard, openapi", PULSE_ROUTE_OPENAPI));
    ck_assert(!pulse_auth_settings_is_public("dashboard,openapi", PULSE_ROUTE_METRICS));
    ck_assert(pulse_auth_settings_is_public("metrics", PULSE_ROUTE_METRICS));
    ck_assert(!pulse_auth_settings_is_public("", PULSE_ROUTE_DASHBOARD));
    ck_assert(!pulse_auth_settings_is_public("metricsx", PULSE_ROUTE_METRICS));
    ck_assert(!pulse_auth_settings_is_public("dashboard,openapi,metrics", PULSE_ROUTE_TOPICS));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("auth");
    TCase *tc = tcase_create("auth");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_every_route_and_method_has_a_grant);
    tcase_add_test(tc, test_file_lines_give_names_hashes_and_grants);
    tcase_add_test(tc, test_patterns_are_exact_names_or_prefixes);
    tcase_add_test(tc, test_bad_lines_refuse_the_file_naming_the_line);
    tcase_add_test(tc, test_reload_swaps_tables_and_keeps_the_old_on_a_bad_file);
    tcase_add_test(tc, test_lookups_race_reloads_safely);
    tcase_add_test(tc, test_hash_line_is_a_line_the_file_takes);
    tcase_add_test(tc, test_lines_may_give_a_token_its_own_rates);
    tcase_add_test(tc, test_bad_rates_refuse_the_file_naming_the_line);
    tcase_add_test(tc, test_public_setting_names_the_file_routes);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
