/* SPDX-License-Identifier: MIT */
/*
 * encode.c - see encode.h. zlib allocates through pulse_malloc, so its
 * state counts where ours does and a failure is NOMEM, never an abort.
 */
#include "http/encode.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "common/alloc.h"

/* gzip framing (16 + 14: a 16 KiB window), level 6, memLevel 6. */
#define GZ_WBITS (16 + 14)
#define GZ_LEVEL 6
#define GZ_MEMLEVEL 6
/* Plain text a stream reads from its source at a time. */
#define GZ_IN_BLOCK (8u * 1024)

static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    return pulse_calloc(items, size);
}

static void z_free(voidpf opaque, voidpf p)
{
    (void)opaque;
    pulse_free(p);
}

static bool deflate_begin(z_stream *z)
{
    memset(z, 0, sizeof *z);
    z->zalloc = z_alloc;
    z->zfree = z_free;
    return deflateInit2(z, GZ_LEVEL, Z_DEFLATED, GZ_WBITS, GZ_MEMLEVEL, Z_DEFAULT_STRATEGY) == Z_OK;
}

/* The q-value of one Accept-Encoding element's parameters (";q=0.5");
 * 1 when absent. */
static double qvalue(const char *params, size_t len)
{
    const char *q = NULL;
    for (size_t i = 0; i + 1 < len; i++) {
        if ((params[i] == 'q' || params[i] == 'Q') && params[i + 1] == '=') {
            q = params + i + 2;
            break;
        }
    }
    return q != NULL ? strtod(q, NULL) : 1.0;
}

bool pulse_encode_accepts_gzip(const char *ae)
{
    if (ae == NULL)
        return false;
    const char *p = ae;
    while (*p != '\0') {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        size_t n = strcspn(p, ",");
        size_t name = strcspn(p, ",; \t");
        bool match = (name == 4 && strncasecmp(p, "gzip", 4) == 0) || (name == 6 && strncasecmp(p, "x-gzip", 6) == 0) ||
                     (name == 1 && p[0] == '*');
        if (match && qvalue(p + name, n - name) > 0)
            return true;
        p += n;
    }
    return false;
}

pulse_status_t pulse_encode_gzip(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len)
{
    pulse_status_t st = PULSE_NOMEM;
    z_stream z;
    uint8_t *buf = NULL;
    if (!deflate_begin(&z))
        return PULSE_NOMEM;
    size_t cap = deflateBound(&z, (uLong)len) + 32;
    buf = pulse_malloc(cap);
    if (buf == NULL)
        goto out;
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)len;
    z.next_out = buf;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END)
        goto out; /* (never: deflateBound covers it) */
    *out = buf;
    *out_len = cap - z.avail_out;
    buf = NULL;
    st = PULSE_OK;
out:
    deflateEnd(&z);
    pulse_free(buf);
    return st;
}

struct pulse_gzip_stream {
    z_stream z;
    pulse_encode_read_fn read;
    void *arg;
    bool eof;  /* the source is exhausted: finish the member */
    bool done; /* Z_STREAM_END given out */
    uint8_t in[GZ_IN_BLOCK];
};

struct pulse_gzip_stream *pulse_gzip_stream_create(pulse_encode_read_fn read, void *arg)
{
    struct pulse_gzip_stream *gz = pulse_calloc(1, sizeof *gz);
    if (gz == NULL)
        return NULL;
    if (!deflate_begin(&gz->z)) {
        pulse_free(gz);
        return NULL;
    }
    gz->read = read;
    gz->arg = arg;
    return gz;
}

ssize_t pulse_gzip_stream_read(struct pulse_gzip_stream *gz, uint8_t *out, size_t max)
{
    if (gz->done)
        return -1;
    gz->z.next_out = out;
    gz->z.avail_out = (uInt)(max > UINT32_MAX ? UINT32_MAX : max);
    /* deflate may take input without giving output (it fills its window
     * first): keep feeding it until it gives some, or the member ends. */
    while (gz->z.avail_out == max) {
        if (gz->z.avail_in == 0 && !gz->eof) {
            ssize_t n = gz->read(gz->arg, gz->in, sizeof gz->in);
            if (n == -1)
                gz->eof = true;
            else if (n <= 0)
                return -2; /* a source gives at least one byte until its end */
            gz->z.next_in = gz->in;
            gz->z.avail_in = n > 0 ? (uInt)n : 0;
        }
        int zr = deflate(&gz->z, gz->eof ? Z_FINISH : Z_NO_FLUSH);
        if (zr == Z_STREAM_END) {
            gz->done = true;
            break;
        }
        if (zr != Z_OK && zr != Z_BUF_ERROR)
            return -2;
    }
    size_t n = max - gz->z.avail_out;
    return n > 0 ? (ssize_t)n : -1;
}

void pulse_gzip_stream_destroy(struct pulse_gzip_stream *gz)
{
    if (gz == NULL)
        return;
    deflateEnd(&gz->z);
    pulse_free(gz);
}
