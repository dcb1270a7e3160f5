/* SPDX-License-Identifier: MIT */
/*
 * skips.c - the skipped ranges of an answer (skips.h).
 */
#include "http/skips.h"

#include <stdio.h>

bool pulse_skips_fit(const struct pulse_skips *k, const struct pulse_fetch_pos *s)
{
    if (s->skip_to <= s->skip_from || k->n < PULSE_SKIPS_MAX)
        return true;
    return k->r[k->n - 1].to == s->skip_from;
}

void pulse_skips_add(struct pulse_skips *k, const struct pulse_fetch_pos *s)
{
    if (s->skip_to <= s->skip_from)
        return;
    if (k->n > 0 && k->r[k->n - 1].to == s->skip_from) {
        k->r[k->n - 1].to = s->skip_to;
        k->r[k->n - 1].damaged = k->r[k->n - 1].damaged || s->skip_reason == PULSE_SKIP_CORRUPT;
        return;
    }
    if (k->n == PULSE_SKIPS_MAX)
        return; /* (never: callers check pulse_skips_fit first) */
    k->r[k->n].from = s->skip_from;
    k->r[k->n].to = s->skip_to;
    k->r[k->n].damaged = s->skip_reason == PULSE_SKIP_CORRUPT;
    k->n++;
}

void pulse_skips_clip(struct pulse_skips *k, int64_t next)
{
    size_t keep = 0;
    while (keep < k->n && k->r[keep].from < next) {
        if (k->r[keep].to > next)
            k->r[keep].to = next;
        keep++;
    }
    k->n = keep;
}

const char *pulse_skips_reason(const struct pulse_skips *k, size_t i)
{
    return k->r[i].damaged ? "corrupt" : "missing";
}

void pulse_skips_json(const struct pulse_skips *k, char *v, size_t cap)
{
    size_t used = 0;
    v[0] = '\0';
    for (size_t i = 0; i < k->n && used < cap; i++)
        used += (size_t)snprintf(v + used, cap - used, "%s{\"from\":%lld,\"to\":%lld,\"reason\":\"%s\"}%s",
                                 i == 0 ? ",\"skipped\":[" : ",", (long long)k->r[i].from, (long long)k->r[i].to,
                                 pulse_skips_reason(k, i), i + 1 == k->n ? "]" : "");
}

void pulse_skips_header(struct MHD_Response *resp, const struct pulse_skips *k)
{
    char v[PULSE_SKIPS_MAX * 64];
    size_t used = 0;
    for (size_t i = 0; i < k->n && used < sizeof v; i++)
        used += (size_t)snprintf(v + used, sizeof v - used, "%s%lld-%lld;reason=%s", i > 0 ? ", " : "",
                                 (long long)k->r[i].from, (long long)k->r[i].to, pulse_skips_reason(k, i));
    if (k->n > 0)
        MHD_add_response_header(resp, "Pulse-Skipped", v);
}
