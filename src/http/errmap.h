/* SPDX-License-Identifier: MIT */
/*
 * errmap.h - the one table from a pulse_status_t to an HTTP status and the
 * API error code of the HTTP contract (spec "General rules").
 *
 * Thread: any (read-only table). Locks: none.
 */
#ifndef PULSE_HTTP_ERRMAP_H
#define PULSE_HTTP_ERRMAP_H

#include "common/status.h"

struct pulse_errmap_entry {
    unsigned http_status; /* e.g. 404 */
    const char *code;     /* e.g. "topic_not_found"; static storage */
};

/*
 * The HTTP status and code for st. Every status of the enum has an entry;
 * values outside the enum map to 500 storage_error. Never NULL.
 */
const struct pulse_errmap_entry *pulse_errmap_lookup(pulse_status_t st);

#endif
