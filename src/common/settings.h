/* SPDX-License-Identifier: MIT */
/*
 * settings.h - how a layer declares its settings: a table of keys, each
 * with its name ("section.key"), type, default, bounds and a one-line
 * description, over a plain struct of the layer's own values.
 *
 * Each layer owns its table and its struct (storage/store_settings.h,
 * broker/broker_settings.h, http/server_settings.h, common/log.h);
 * http/config.c only reads files, the environment and the command line
 * and hands every "section.key = value" to the table that declares the
 * key. Defaults are text parsed by the same code as user input, so a
 * default can never be a value a user could not write. make check holds
 * conf/pulse.conf and docs/Configuration.md to these tables
 * (tests/unit/http/check_settings.c).
 *
 * Value syntax: sizes are bytes, or a number with B, KiB, MiB or GiB;
 * durations are milliseconds, or a number with ms, s, m, h or d; integers
 * are plain decimal; ratios are decimal fractions.
 *
 * Thread: any (pure functions over the caller's struct). Locks: none.
 */
#ifndef PULSE_COMMON_SETTINGS_H
#define PULSE_COMMON_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

enum pulse_setting_type {
    PULSE_SETTING_STRING,   /* char *, owned by the struct; never empty */
    PULSE_SETTING_SIZE,     /* uint64_t bytes */
    PULSE_SETTING_DURATION, /* int64_t milliseconds */
    PULSE_SETTING_INT,      /* int64_t */
    PULSE_SETTING_RATIO,    /* double */
    PULSE_SETTING_LIST      /* char *, owned by the struct; comma-separated, may be empty ("") */
};

/* A STRING key's own rule: PULSE_OK, or PULSE_INVALID with errbuf
 * (nullable) naming the key. */
typedef pulse_status_t (*pulse_setting_check_fn)(const char *name, const char *value, char *errbuf, size_t errlen);

struct pulse_setting {
    const char *name; /* "section.key" */
    enum pulse_setting_type type;
    size_t off;      /* of the value in the layer's struct */
    const char *def; /* default, as a user would write it; NULL: unset (0) */
    /* unset (def NULL, still 0): the key takes the value of this one */
    const char *follows;
    int64_t min; /* numeric bounds, inclusive */
    int64_t max;
    pulse_setting_check_fn check; /* STRING only; NULL = any non-empty text */
    const char *doc;              /* one line */
};

/* Pass-through pairs of a prefix key ("kafka.property.NAME = VALUE"): the
 * NAME and VALUE of each, in the order set (a NAME set again replaces its
 * value in place). Owned by the layer's struct; freed by
 * pulse_settings_fini. */
struct pulse_setting_pairs {
    size_t n;
    char **names;
    char **values;
};

/* A layer's keys over its struct. */
struct pulse_settings_table {
    const char *layer; /* "storage", "broker", "server", "log" */
    const struct pulse_setting *keys;
    size_t n;
    size_t size; /* of the layer's struct */
};

/* A pass-through prefix ("kafka.property.") of a layer: its keys are not
 * declared one by one but handed on as pairs (a library's own
 * properties); off is the offset of a struct pulse_setting_pairs in the
 * layer's struct. */
struct pulse_settings_prefix {
    const char *prefix;
    size_t off;
};

/* The key called name in t, or NULL. */
const struct pulse_setting *pulse_settings_find(const struct pulse_settings_table *t, const char *name);

/*
 * Parses value for key s and stores it in the struct at base, the old
 * string (if any) freed. PULSE_INVALID (out of range, malformed, empty,
 * refused by s->check) or PULSE_NOMEM, with errbuf (nullable) naming the
 * key; the struct is unchanged then.
 */
pulse_status_t pulse_settings_apply(const struct pulse_setting *s, void *base, const char *value, char *errbuf,
                                    size_t errlen);

/*
 * Whether name is a key of prefix p (the prefix followed by at least one
 * character); then stores (name minus the prefix, value) in the pairs at
 * base, replacing an earlier value of the same name. PULSE_NOT_FOUND when
 * name is not under the prefix (nothing changed), PULSE_INVALID for an
 * empty value (errbuf), PULSE_NOMEM.
 */
pulse_status_t pulse_settings_apply_prefixed(const struct pulse_settings_prefix *p, void *base, const char *name,
                                             const char *value, char *errbuf, size_t errlen);

/* Frees the pairs of prefix p in the struct at base (zeroed after). */
void pulse_settings_prefix_fini(const struct pulse_settings_prefix *p, void *base);

/* Zeroes the struct at base and applies every default of t. PULSE_NOMEM
 * (base is then finalised already). */
pulse_status_t pulse_settings_init(const struct pulse_settings_table *t, void *base);

/* Frees the strings of the struct at base. Safe on a zeroed or finalised
 * struct. */
void pulse_settings_fini(const struct pulse_settings_table *t, void *base);

/* The parsers behind SIZE and DURATION values: PULSE_INVALID (malformed,
 * or a unit not listed above) or PULSE_RANGE (too large for 64 bits). */
pulse_status_t pulse_settings_parse_size(const char *text, uint64_t *out);
pulse_status_t pulse_settings_parse_duration_ms(const char *text, int64_t *out);
/* A non-negative decimal integer prefix, trailing blanks skipped; *end
 * gets what follows. */
pulse_status_t pulse_settings_parse_u64_prefix(const char *text, uint64_t *out, const char **end);

#endif
