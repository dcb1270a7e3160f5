/* SPDX-License-Identifier: MIT */
/*
 * embed.c - see embed.h. The tables themselves are generated
 * (openapi_data.c, web_data.c); this file only looks them up.
 */
#include "http/embed.h"

#include <string.h>

const struct pulse_embed_file *pulse_embed_find(const struct pulse_embed_file *table, const char *path)
{
    for (const struct pulse_embed_file *f = table; f->path != NULL; f++)
        if (strcmp(f->path, path) == 0)
            return f;
    return NULL;
}

/* Only the kinds of file web/ and api/ hold; a new kind needs a line. */
static const struct {
    const char *ext;
    const char *type;
} media_types[] = {
    {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},   {".svg", "image/svg+xml"},
    {".yaml", "application/yaml"},
};

const char *pulse_embed_media_type(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (dot != NULL && strchr(dot, '/') == NULL)
        for (size_t i = 0; i < sizeof media_types / sizeof media_types[0]; i++)
            if (strcmp(dot, media_types[i].ext) == 0)
                return media_types[i].type;
    return "application/octet-stream";
}
