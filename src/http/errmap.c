/* SPDX-License-Identifier: MIT */
/*
 * errmap.c - status -> (HTTP status, API code). One row per status, built
 * with designated initialisers so a status added to common/status.h without
 * a row here shows up as a zero entry, which the errmap unit test catches.
 *
 * Choices: PULSE_INVALID and PULSE_CORRUPT-in-a-request never reach a user
 * as 500 unless the fault is ours; CORRUPT, IO and NOMEM are server faults
 * (500 storage_error), and so is ACCESS (a file of the data directory this
 * process may not open: the message says "permission denied"); NOSPACE is
 * 507 storage_full (retry once space is freed); FENCED is 503
 * partition_fenced (the partition is reopened in process; retry later);
 * BUSY, NOFILE (the descriptor limit; the message names it) and SHUTDOWN
 * are 503 unavailable (retry later); RANGE is 416 offset_out_of_range (the
 * only range the API reports);
 * NOT_SUPPORTED is what a broker backend answers for a form it cannot
 * produce (raw batches from a backend without a stored batch format):
 * 406 not_acceptable, as for an Accept header nothing matches.
 * REJOIN (a group member the group does not know) and GROUP_FENCED (a
 * commit by a member that does not own the partition in that generation)
 * are 409: the request conflicts with the group's state, and the client
 * acts on the code (join again; drop the batch, it is delivered again).
 * UNAVAILABLE (a remote backend's cluster cannot be reached, or did not
 * answer within its bound) is 503 unavailable: retry later.
 * EOF never leaves the engine, but maps to 500 so nothing can slip through
 * unmapped. Every 503 and 507 carries Retry-After (server.c).
 */
#include "http/errmap.h"

#include <stddef.h>

static const struct pulse_errmap_entry table[PULSE_STATUS_COUNT] = {
    [PULSE_OK] = {200, "ok"},
    [PULSE_NOMEM] = {500, "storage_error"},
    [PULSE_IO] = {500, "storage_error"},
    [PULSE_NOSPACE] = {507, "storage_full"},
    [PULSE_CORRUPT] = {500, "storage_error"},
    [PULSE_INVALID] = {400, "invalid_request"},
    [PULSE_INVALID_NAME] = {400, "invalid_name"},
    [PULSE_NOT_FOUND] = {404, "not_found"},
    [PULSE_TOPIC_NOT_FOUND] = {404, "topic_not_found"},
    [PULSE_PARTITION_NOT_FOUND] = {404, "partition_not_found"},
    [PULSE_CURSOR_NOT_FOUND] = {404, "cursor_not_found"},
    [PULSE_EXISTS] = {409, "topic_exists"},
    [PULSE_RANGE] = {416, "offset_out_of_range"},
    [PULSE_TOO_LARGE] = {413, "payload_too_large"},
    [PULSE_BUSY] = {503, "unavailable"},
    [PULSE_NOFILE] = {503, "unavailable"},
    [PULSE_FENCED] = {503, "partition_fenced"},
    [PULSE_SHUTDOWN] = {503, "unavailable"},
    [PULSE_EOF] = {500, "storage_error"},
    [PULSE_ACCESS] = {500, "storage_error"},
    [PULSE_NOT_SUPPORTED] = {406, "not_acceptable"},
    [PULSE_REJOIN] = {409, "rejoin"},
    [PULSE_GROUP_FENCED] = {409, "commit_fenced"},
    [PULSE_UNAVAILABLE] = {503, "unavailable"},
    [PULSE_KEY_REUSED] = {422, "idempotency_key_reused"},
};

static const struct pulse_errmap_entry fallback = {500, "storage_error"};

const struct pulse_errmap_entry *pulse_errmap_lookup(pulse_status_t st)
{
    if ((int)st < 0 || st >= PULSE_STATUS_COUNT || table[st].code == NULL)
        return &fallback;
    return &table[st];
}
