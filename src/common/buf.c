/* SPDX-License-Identifier: MIT */
#include "common/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/endian.h"

void pulse_buf_init(struct pulse_buf *buf, size_t max)
{
    buf->data = NULL;
    buf->len = 0;
    buf->cap = 0;
    buf->max = max;
}

void pulse_buf_fini(struct pulse_buf *buf)
{
    pulse_free(buf->data);
    buf->data = NULL;
    buf->len = 0;
    buf->cap = 0;
}

void pulse_buf_reset(struct pulse_buf *buf)
{
    buf->len = 0;
}

void pulse_buf_set_max(struct pulse_buf *buf, size_t max)
{
    buf->max = max < buf->len ? buf->len : max;
}

pulse_status_t pulse_buf_reserve(struct pulse_buf *buf, size_t n)
{
    if (n > buf->max || buf->len > buf->max - n)
        return PULSE_TOO_LARGE;
    size_t need = buf->len + n;
    if (need <= buf->cap)
        return PULSE_OK;
    size_t cap = buf->cap ? buf->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (cap > buf->max)
        cap = buf->max;
    uint8_t *p = pulse_realloc(buf->data, cap);
    if (p == NULL)
        return PULSE_NOMEM;
    buf->data = p;
    buf->cap = cap;
    return PULSE_OK;
}

pulse_status_t pulse_buf_append(struct pulse_buf *buf, const void *p, size_t n)
{
    pulse_status_t st = pulse_buf_reserve(buf, n);
    if (st != PULSE_OK)
        return st;
    if (n > 0)
        memcpy(buf->data + buf->len, p, n);
    buf->len += n;
    return PULSE_OK;
}

pulse_status_t pulse_buf_append_u8(struct pulse_buf *buf, uint8_t v)
{
    return pulse_buf_append(buf, &v, 1);
}

pulse_status_t pulse_buf_append_be16(struct pulse_buf *buf, uint16_t v)
{
    uint8_t b[2];
    pulse_put_be16(b, v);
    return pulse_buf_append(buf, b, sizeof b);
}

pulse_status_t pulse_buf_append_be32(struct pulse_buf *buf, uint32_t v)
{
    uint8_t b[4];
    pulse_put_be32(b, v);
    return pulse_buf_append(buf, b, sizeof b);
}

pulse_status_t pulse_buf_append_be64(struct pulse_buf *buf, uint64_t v)
{
    uint8_t b[8];
    pulse_put_be64(b, v);
    return pulse_buf_append(buf, b, sizeof b);
}

pulse_status_t pulse_buf_printf(struct pulse_buf *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return PULSE_INVALID;
    /* +1 for vsnprintf's NUL, which is not counted in len. */
    pulse_status_t st = pulse_buf_reserve(buf, (size_t)n + 1);
    if (st != PULSE_OK)
        return st;
    va_start(ap, fmt);
    vsnprintf((char *)buf->data + buf->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    buf->len += (size_t)n;
    return PULSE_OK;
}

uint8_t *pulse_buf_steal(struct pulse_buf *buf, size_t *len_out)
{
    uint8_t *p = buf->data;
    *len_out = buf->len;
    buf->data = NULL;
    buf->len = 0;
    buf->cap = 0;
    return p;
}
