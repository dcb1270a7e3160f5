/* SPDX-License-Identifier: MIT */
/*
 * json.c - see json.h.
 */
#include "http/json.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"

void pulse_json_rfc3339_ms(int64_t ms, char out[32])
{
    int64_t secs = ms / 1000;
    int64_t frac = ms % 1000;
    if (frac < 0) {
        frac += 1000;
        secs -= 1;
    }
    time_t t = (time_t)secs;
    struct tm tm;
    char when[24] = "1970-01-01T00:00:00";
    if (gmtime_r(&t, &tm) != NULL)
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, 32, "%s.%03dZ", when, (int)frac);
}

struct json_t *pulse_json_error(const char *code, const char *message)
{
    return json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", message);
}

size_t pulse_json_dump_size(const struct json_t *v, size_t extra_flags)
{
    return json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY | extra_flags);
}

bool pulse_json_dump_into(const struct json_t *v, size_t extra_flags, char *out, size_t n)
{
    return n > 0 && json_dumpb(v, out, n, JSON_COMPACT | JSON_ENCODE_ANY | extra_flags) == n;
}

pulse_status_t pulse_json_dump(const struct json_t *v, size_t extra_flags, char **out, size_t *out_len)
{
    size_t need = pulse_json_dump_size(v, extra_flags);
    if (need == 0)
        return PULSE_INVALID;
    char *buf = pulse_malloc(need);
    if (buf == NULL)
        return PULSE_NOMEM;
    if (!pulse_json_dump_into(v, extra_flags, buf, need)) {
        pulse_free(buf);
        return PULSE_INVALID;
    }
    *out = buf;
    *out_len = need;
    return PULSE_OK;
}
