/* SPDX-License-Identifier: MIT */
/*
 * embed.h - files compiled into pulsed: api/openapi.yaml (served at
 * /openapi.yaml) and the dashboard under web/ (served at / and /ui/...).
 * scripts/embed.sh turns each file into a byte array at build time
 * (src/http/local.mk), so pulsed serves exactly the files of its build with
 * no file lookup at run time, and nothing to install beside the binary.
 *
 * Thread: any. Locks: none (constant tables).
 */
#ifndef PULSE_HTTP_EMBED_H
#define PULSE_HTTP_EMBED_H

#include <stddef.h>

struct pulse_embed_file {
    const char *path;          /* the URL path it is served at; NULL ends a table */
    const unsigned char *data; /* len bytes, then one NUL */
    size_t len;
    const char *etag; /* a quoted entity tag: "<cksum>-<len>" */
};

/* api/openapi.yaml: one entry (path "/openapi.yaml"). */
extern const struct pulse_embed_file pulse_openapi_files[];
/* The dashboard: "/ui/index.html" and the assets it loads. */
extern const struct pulse_embed_file pulse_web_files[];

/* The entry of table served at path, or NULL. */
const struct pulse_embed_file *pulse_embed_find(const struct pulse_embed_file *table, const char *path);

/* The Content-Type of a file by its name's extension (with a charset for
 * text); "application/octet-stream" for an unknown one. */
const char *pulse_embed_media_type(const char *path);

#endif
