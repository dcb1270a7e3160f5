/* SPDX-License-Identifier: MIT */
/*
 * alloc.c - wrappers over the C allocator with a fail-after-N test hook.
 * The counter is atomic so threaded tests can use the hook too. The hook
 * exists in debug and test builds only (alloc.h); in a release build
 * should_fail is a constant 0 the compiler removes.
 */
#include "common/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#ifdef PULSE_HOOKS
static atomic_ulong fail_countdown; /* 0 = never fail */

void pulse_alloc_fail_after(unsigned long n)
{
    atomic_store(&fail_countdown, n);
}

static int should_fail(void)
{
    unsigned long cur = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    while (cur != 0) {
        if (cur == 1)
            return 1; /* stays at 1: every later allocation fails too */
        if (atomic_compare_exchange_weak(&fail_countdown, &cur, cur - 1))
            return 0;
    }
    return 0;
}
#else
static inline int should_fail(void)
{
    return 0;
}
#endif

void *pulse_malloc(size_t n)
{
    if (should_fail())
        return NULL;
    return malloc(n == 0 ? 1 : n);
}

void *pulse_calloc(size_t count, size_t size)
{
    if (should_fail())
        return NULL;
    if (count == 0 || size == 0)
        return calloc(1, 1);
    return calloc(count, size);
}

void *pulse_realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    return realloc(p, n == 0 ? 1 : n);
}

char *pulse_strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *d = pulse_malloc(len + 1);
    if (d == NULL)
        return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *pulse_strdup(const char *s)
{
    return pulse_strndup(s, strlen(s));
}

void pulse_free(void *p)
{
    free(p);
}
