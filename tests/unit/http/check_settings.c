/* SPDX-License-Identifier: MIT */
/*
 * check_settings.c - the settings tables of the layers (common/settings.h)
 * are the truth about pulsed's configuration, and the two documents that
 * describe it are held to them: conf/pulse.conf must list every key with
 * its default (a key without one as a comment) and change nothing as
 * shipped; docs/Configuration.md must have a row for every key, in its
 * section, with the same default, and no row for a key that does not
 * exist. A key added to a table and not to the documents, or a default
 * changed in one place only, fails make check here.
 *
 * The documents are read from $PULSE_SRCDIR (set by make check).
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/settings.h"
#include "http/config.h"

#define MAX_ROWS 128

struct doc_row {
    char name[128];  /* "section.key" */
    char value[128]; /* the default as written */
    bool commented;  /* pulse.conf: "# key = value" */
    bool follows;    /* Configuration.md: "follows `other.key`" (value = other.key) */
};

static const char *srcdir(void)
{
    const char *d = getenv("PULSE_SRCDIR");
    return d != NULL && d[0] != '\0' ? d : ".";
}

static FILE *open_doc(const char *rel)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", srcdir(), rel);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    return f;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* The key called name in any layer's table (*t_out: that table), or NULL. */
static const struct pulse_setting *find_any(const char *name, const struct pulse_settings_table **t_out)
{
    for (size_t i = 0; pulse_config_table(i) != NULL; i++) {
        const struct pulse_setting *s = pulse_settings_find(pulse_config_table(i), name);
        if (s != NULL) {
            if (t_out != NULL)
                *t_out = pulse_config_table(i);
            return s;
        }
    }
    return NULL;
}

static bool is_key_text(const char *k)
{
    if (*k == '\0')
        return false;
    for (; *k != '\0'; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '-'))
            return false;
    return true;
}

/* conf/pulse.conf: "[section]", "key = value" and "# key = value" lines
 * whose key is a known key of the section. */
static size_t read_conf(struct doc_row *rows)
{
    FILE *f = open_doc("conf/pulse.conf");
    char line[1024];
    char section[64] = "";
    size_t n = 0;

    while (fgets(line, sizeof line, f) != NULL) {
        char *s = trim(line);
        bool commented = false;
        if (*s == '[') {
            char *end = strchr(s, ']');
            ck_assert_ptr_nonnull(end);
            ck_assert_uint_lt((size_t)(end - (s + 1)), sizeof section);
            memcpy(section, s + 1, (size_t)(end - (s + 1)));
            section[end - (s + 1)] = '\0';
            continue;
        }
        if (*s == '#') {
            commented = true;
            s = trim(s + 1);
        }
        char *eq = strchr(s, '=');
        if (eq == NULL || section[0] == '\0')
            continue;
        *eq = '\0';
        char *k = trim(s);
        char *v = trim(eq + 1);
        if (!is_key_text(k))
            continue;
        char name[128];
        snprintf(name, sizeof name, "%s.%s", section, k);
        if (commented && find_any(name, NULL) == NULL)
            continue; /* prose that happens to hold an '=' */
        ck_assert_uint_lt(n, MAX_ROWS);
        size_t vlen = strlen(v);
        if (vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"') {
            v[vlen - 1] = '\0';
            v++;
        }
        snprintf(rows[n].name, sizeof rows[n].name, "%s", name);
        snprintf(rows[n].value, sizeof rows[n].value, "%s", v);
        rows[n].commented = commented;
        rows[n].follows = false;
        n++;
    }
    fclose(f);
    return n;
}

/* The text between the first pair of backticks of cell, or NULL. */
static char *ticked(char *cell)
{
    char *a = strchr(cell, '`');
    char *b = a != NULL ? strchr(a + 1, '`') : NULL;
    if (b == NULL)
        return NULL;
    *b = '\0';
    return a + 1;
}

/* docs/Configuration.md: the rows of the key tables under "### [section]"
 * headings ("| `key` | `default` | range | meaning |"). */
static size_t read_doc(struct doc_row *rows)
{
    FILE *f = open_doc("docs/Configuration.md");
    char line[8192];
    char section[64] = "";
    size_t n = 0;

    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "### [", 5) == 0) {
            char *end = strchr(line + 5, ']');
            ck_assert_ptr_nonnull(end);
            ck_assert_uint_lt((size_t)(end - (line + 5)), sizeof section);
            memcpy(section, line + 5, (size_t)(end - (line + 5)));
            section[end - (line + 5)] = '\0';
            continue;
        }
        if (strncmp(line, "## ", 3) == 0) {
            section[0] = '\0';
            continue;
        }
        if (section[0] == '\0' || strncmp(line, "| `", 3) != 0)
            continue;
        char *cell1 = line + 1;
        char *bar = strchr(cell1, '|');
        ck_assert_ptr_nonnull(bar);
        *bar = '\0';
        char *cell2 = bar + 1;
        bar = strchr(cell2, '|');
        ck_assert_ptr_nonnull(bar);
        *bar = '\0';
        char *key = ticked(cell1);
        ck_assert_ptr_nonnull(key);
        ck_assert_uint_lt(n, MAX_ROWS);
        snprintf(rows[n].name, sizeof rows[n].name, "%s.%s", section, key);
        rows[n].commented = false;
        rows[n].follows = strstr(cell2, "follows") != NULL;
        char *def = ticked(cell2);
        ck_assert_msg(def != NULL, "docs/Configuration.md: %s has no default in backticks", rows[n].name);
        snprintf(rows[n].value, sizeof rows[n].value, "%s", def);
        n++;
    }
    fclose(f);
    return n;
}

static const struct doc_row *find_row(const struct doc_row *rows, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(rows[i].name, name) == 0)
            return &rows[i];
    return NULL;
}

/* Whether text, parsed as key s, gives the value its default gives. */
static bool same_as_default(const struct pulse_settings_table *t, const struct pulse_setting *s, const char *text)
{
    _Alignas(max_align_t) unsigned char a[512];
    _Alignas(max_align_t) unsigned char b[512];
    bool same;

    ck_assert_uint_le(t->size, sizeof a);
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    ck_assert_int_eq(pulse_settings_apply(s, a, s->def, NULL, 0), PULSE_OK);
    if (pulse_settings_apply(s, b, text, NULL, 0) != PULSE_OK)
        return false;
    if (s->type == PULSE_SETTING_STRING || s->type == PULSE_SETTING_LIST) {
        char *x = NULL;
        char *y = NULL;
        memcpy(&x, a + s->off, sizeof x);
        memcpy(&y, b + s->off, sizeof y);
        same = strcmp(x, y) == 0;
    } else {
        same = memcmp(a + s->off, b + s->off, 8) == 0;
    }
    pulse_settings_fini(t, a);
    pulse_settings_fini(t, b);
    return same;
}

START_TEST(test_every_key_is_declared_once_with_a_description_and_a_default_that_parses)
{
    struct pulse_config cfg;
    size_t total = 0;

    ck_assert_int_eq(pulse_config_init(&cfg), PULSE_OK);
    for (size_t i = 0; pulse_config_table(i) != NULL; i++) {
        const struct pulse_settings_table *t = pulse_config_table(i);
        for (size_t k = 0; k < t->n; k++) {
            const struct pulse_setting *s = &t->keys[k];
            const struct pulse_settings_table *owner = NULL;
            ck_assert_ptr_eq(find_any(s->name, &owner), s);
            ck_assert_msg(s->doc != NULL && strlen(s->doc) > 10, "%s has no description", s->name);
            ck_assert_msg(strchr(s->name, '.') != NULL, "%s is not section.key", s->name);
            /* A key without a default follows another one. */
            ck_assert_msg(s->def != NULL || (s->follows != NULL && find_any(s->follows, NULL) != NULL),
                          "%s has neither a default nor a key it follows", s->name);
            total++;
        }
    }
    /* The same count /v1/broker shows (one member per key). */
    json_t *j = pulse_config_to_json(&cfg);
    ck_assert_ptr_nonnull(j);
    ck_assert_uint_eq(json_object_size(j), total);
    json_decref(j);
    pulse_config_fini(&cfg);
}
END_TEST

START_TEST(test_pulse_conf_lists_every_key_with_its_default)
{
    static struct doc_row rows[MAX_ROWS];
    size_t n = read_conf(rows);

    for (size_t i = 0; pulse_config_table(i) != NULL; i++) {
        const struct pulse_settings_table *t = pulse_config_table(i);
        for (size_t k = 0; k < t->n; k++) {
            const struct pulse_setting *s = &t->keys[k];
            const struct doc_row *row = find_row(rows, n, s->name);
            ck_assert_msg(row != NULL, "conf/pulse.conf does not list %s", s->name);
            if (s->def == NULL) {
                /* Setting it would change what an unset key means. */
                ck_assert_msg(row->commented, "conf/pulse.conf sets %s, which has no default; show it commented",
                              s->name);
                continue;
            }
            ck_assert_msg(!row->commented, "conf/pulse.conf shows %s only as a comment", s->name);
            ck_assert_msg(same_as_default(t, s, row->value), "conf/pulse.conf gives %s = %s, but its default is %s",
                          s->name, row->value, s->def);
        }
    }
}
END_TEST

START_TEST(test_pulse_conf_as_shipped_changes_nothing)
{
    struct pulse_config defaults;
    struct pulse_config loaded;
    char path[1024];
    char err[512] = "";

    snprintf(path, sizeof path, "%s/conf/pulse.conf", srcdir());
    ck_assert_int_eq(pulse_config_init(&defaults), PULSE_OK);
    ck_assert_int_eq(pulse_config_init(&loaded), PULSE_OK);
    /* Unknown keys and bad values are refused here too. */
    ck_assert_msg(pulse_config_load_file(&loaded, path, err, sizeof err) == PULSE_OK, "%s", err);
    json_t *a = pulse_config_to_json(&defaults);
    json_t *b = pulse_config_to_json(&loaded);
    ck_assert(json_equal(a, b));
    json_decref(a);
    json_decref(b);
    pulse_config_fini(&defaults);
    pulse_config_fini(&loaded);
}
END_TEST

START_TEST(test_configuration_md_has_a_row_with_the_default_of_every_key)
{
    static struct doc_row rows[MAX_ROWS];
    size_t n = read_doc(rows);

    for (size_t i = 0; pulse_config_table(i) != NULL; i++) {
        const struct pulse_settings_table *t = pulse_config_table(i);
        for (size_t k = 0; k < t->n; k++) {
            const struct pulse_setting *s = &t->keys[k];
            const struct doc_row *row = find_row(rows, n, s->name);
            ck_assert_msg(row != NULL, "docs/Configuration.md has no row for %s", s->name);
            if (s->def == NULL) {
                ck_assert_msg(row->follows && strcmp(row->value, s->follows) == 0,
                              "docs/Configuration.md: %s should say it follows `%s`", s->name, s->follows);
                continue;
            }
            ck_assert_msg(!row->follows && same_as_default(t, s, row->value),
                          "docs/Configuration.md gives %s the default %s, but it is %s", s->name, row->value, s->def);
        }
    }
}
END_TEST

START_TEST(test_the_documents_name_no_key_that_does_not_exist)
{
    static struct doc_row rows[MAX_ROWS];
    size_t n = read_doc(rows);

    ck_assert_uint_gt(n, 20);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(find_any(rows[i].name, NULL) != NULL, "docs/Configuration.md describes %s, which is no key",
                      rows[i].name);
    n = read_conf(rows);
    ck_assert_uint_gt(n, 20);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(find_any(rows[i].name, NULL) != NULL, "conf/pulse.conf sets %s, which is no key", rows[i].name);
}
END_TEST

static Suite *settings_suite(void)
{
    Suite *s = suite_create("settings");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_every_key_is_declared_once_with_a_description_and_a_default_that_parses);
    tcase_add_test(tc, test_pulse_conf_lists_every_key_with_its_default);
    tcase_add_test(tc, test_pulse_conf_as_shipped_changes_nothing);
    tcase_add_test(tc, test_configuration_md_has_a_row_with_the_default_of_every_key);
    tcase_add_test(tc, test_the_documents_name_no_key_that_does_not_exist);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(settings_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
