/* SPDX-License-Identifier: MIT */
/*
 * budget.c - see budget.h. A compare-and-swap loop, so a reservation never
 * passes the limit even for a moment, whatever the number of workers.
 */
#include "http/budget.h"

#include "common/debug.h"

void pulse_budget_init(struct pulse_budget *b, uint64_t limit)
{
    b->limit = limit;
    atomic_init(&b->used, 0);
    atomic_init(&b->refusals, 0);
}

bool pulse_budget_reserve(struct pulse_budget *b, uint64_t n)
{
    uint64_t cur = atomic_load(&b->used);
    do {
        if (n > b->limit || cur > b->limit - n) {
            atomic_fetch_add(&b->refusals, 1);
            return false;
        }
    } while (!atomic_compare_exchange_weak(&b->used, &cur, cur + n));
    return true;
}

void pulse_budget_release(struct pulse_budget *b, uint64_t n)
{
    uint64_t before = atomic_fetch_sub(&b->used, n);
    PULSE_ASSERT(before >= n); /* never more released than reserved */
}

uint64_t pulse_budget_used(const struct pulse_budget *b)
{
    return atomic_load(&((struct pulse_budget *)b)->used);
}

uint64_t pulse_budget_refusals(const struct pulse_budget *b)
{
    return atomic_load(&((struct pulse_budget *)b)->refusals);
}
