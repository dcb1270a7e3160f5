/* SPDX-License-Identifier: MIT */
/*
 * check_embed.c - the files compiled into pulsed (http/embed.h) and the
 * routes that serve them: "/" and "/ui/{asset}" in the router, the tables
 * scripts/embed.sh generates, and the Content-Type by file kind.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/embed.h"
#include "http/router.h"

START_TEST(test_root_and_ui_paths_route_to_the_dashboard)
{
    struct pulse_route_match m;
    ck_assert_int_eq(pulse_router_match("/", &m), PULSE_OK);
    ck_assert_int_eq(m.route, PULSE_ROUTE_DASHBOARD);
    ck_assert_str_eq(pulse_router_template(m.route), "/");
    ck_assert_int_eq(pulse_router_match("/ui/app.js", &m), PULSE_OK);
    ck_assert_int_eq(m.route, PULSE_ROUTE_ASSET);
    ck_assert_uint_eq(m.asset.len, 6);
    ck_assert(memcmp(m.asset.p, "app.js", 6) == 0);
    ck_assert_str_eq(pulse_router_template(m.route), "/ui/{asset}");
    ck_assert(pulse_router_allows(PULSE_ROUTE_DASHBOARD, PULSE_METHOD_GET));
    ck_assert(!pulse_router_allows(PULSE_ROUTE_ASSET, PULSE_METHOD_POST));
    /* Nothing else is the root, and assets have no subdirectories. */
    ck_assert_int_eq(pulse_router_match("", &m), PULSE_NOT_FOUND);
    ck_assert_int_eq(pulse_router_match("//", &m), PULSE_NOT_FOUND);
    ck_assert_int_eq(pulse_router_match("/ui", &m), PULSE_NOT_FOUND);
    ck_assert_int_eq(pulse_router_match("/ui/a/b.js", &m), PULSE_NOT_FOUND);
}
END_TEST

START_TEST(test_generated_tables_hold_the_files_with_tags)
{
    const struct pulse_embed_file *f = pulse_embed_find(pulse_web_files, "/ui/index.html");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_gt(f->len, 100);
    ck_assert(memcmp(f->data, "<!doctype html>", 15) == 0);
    ck_assert_int_eq(f->data[f->len], 0); /* the extra NUL */
    ck_assert_ptr_nonnull(pulse_embed_find(pulse_web_files, "/ui/app.js"));
    ck_assert_ptr_nonnull(pulse_embed_find(pulse_web_files, "/ui/style.css"));
    ck_assert_ptr_null(pulse_embed_find(pulse_web_files, "/ui/"));
    ck_assert_ptr_null(pulse_embed_find(pulse_web_files, "/ui/index.htm"));
    /* Tags are quoted, distinct per file, and end with the length. */
    for (const struct pulse_embed_file *a = pulse_web_files; a->path != NULL; a++) {
        char tail[32];
        snprintf(tail, sizeof tail, "-%zu\"", a->len);
        ck_assert_int_eq(a->etag[0], '"');
        ck_assert(strstr(a->etag, tail) != NULL && strlen(strstr(a->etag, tail)) == strlen(tail));
        for (const struct pulse_embed_file *b = a + 1; b->path != NULL; b++)
            ck_assert_str_ne(a->etag, b->etag);
    }
    f = pulse_embed_find(pulse_openapi_files, "/openapi.yaml");
    ck_assert_ptr_nonnull(f);
    ck_assert(memcmp(f->data, "openapi: 3.1", 12) == 0);
}
END_TEST

START_TEST(test_media_type_follows_the_extension)
{
    ck_assert_str_eq(pulse_embed_media_type("/ui/index.html"), "text/html; charset=utf-8");
    ck_assert_str_eq(pulse_embed_media_type("/ui/app.js"), "text/javascript; charset=utf-8");
    ck_assert_str_eq(pulse_embed_media_type("/ui/style.css"), "text/css; charset=utf-8");
    ck_assert_str_eq(pulse_embed_media_type("/ui/favicon.svg"), "image/svg+xml");
    ck_assert_str_eq(pulse_embed_media_type("/openapi.yaml"), "application/yaml");
    ck_assert_str_eq(pulse_embed_media_type("/ui/data.bin"), "application/octet-stream");
    ck_assert_str_eq(pulse_embed_media_type("/ui/noext"), "application/octet-stream");
    ck_assert_str_eq(pulse_embed_media_type("/a.js/b"), "application/octet-stream");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("embed");
    TCase *tc = tcase_create("embed");
    tcase_add_test(tc, test_root_and_ui_paths_route_to_the_dashboard);
    tcase_add_test(tc, test_generated_tables_hold_the_files_with_tags);
    tcase_add_test(tc, test_media_type_follows_the_extension);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
