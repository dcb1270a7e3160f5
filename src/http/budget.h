/* SPDX-License-Identifier: MIT */
/*
 * budget.h - one budget for the memory that HTTP requests and answers hold
 * while in flight (server.memory-budget): request bodies, their gzip-inflated
 * copies and the buffers of streamed JSON fetch answers.
 *
 * Ownership: the server owns the one struct pulse_budget. Every request
 * reserves what it is about to allocate (before allocating it) and keeps the
 * sum in its context; the server's request-completed callback gives the sum
 * back in one call, so a reservation is released exactly once, however the
 * request ended (answered, refused, client gone). A request that cannot
 * reserve answers 503 with Retry-After instead of allocating.
 *
 * The budget bounds what is reserved, not what the allocator keeps: freed
 * memory may stay in the process (see docs/Operations.md for the RSS bound).
 *
 * Thread: any. Locks: none (one atomic counter).
 */
#ifndef PULSE_HTTP_BUDGET_H
#define PULSE_HTTP_BUDGET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct pulse_budget {
    uint64_t limit;
    _Atomic uint64_t used;
    _Atomic uint64_t refusals; /* reservations refused since start */
};

/* An empty budget of limit bytes. */
void pulse_budget_init(struct pulse_budget *b, uint64_t limit);

/* Takes n bytes if used + n stays within the limit; false (nothing taken,
 * the refusal counted) otherwise. n == 0 always succeeds. */
bool pulse_budget_reserve(struct pulse_budget *b, uint64_t n);

/* Gives back n bytes taken by pulse_budget_reserve. Giving back more than
 * was taken is a programming error (asserted). */
void pulse_budget_release(struct pulse_budget *b, uint64_t n);

/* Bytes reserved right now / refusals so far (for metrics and tests). */
uint64_t pulse_budget_used(const struct pulse_budget *b);
uint64_t pulse_budget_refusals(const struct pulse_budget *b);

#endif
