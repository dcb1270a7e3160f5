/* SPDX-License-Identifier: MIT */
/*
 * alloc.h - the only allocation entry points of Pulse.
 *
 * Raw malloc/calloc/realloc/strdup/free are banned outside alloc.c
 * (scripts/check-layers.sh greps for them). Going through one place lets
 * tests fail the Nth allocation and prove that out-of-memory returns
 * PULSE_NOMEM instead of crashing. pulse_free(NULL) is a no-op.
 */
#ifndef PULSE_COMMON_ALLOC_H
#define PULSE_COMMON_ALLOC_H

#include <stddef.h>

#include "common/debug.h"

void *pulse_malloc(size_t n);
void *pulse_calloc(size_t count, size_t size);
void *pulse_realloc(void *p, size_t n);
char *pulse_strdup(const char *s);
char *pulse_strndup(const char *s, size_t n);
void pulse_free(void *p);

#ifdef PULSE_HOOKS
/* Test hook: make the nth allocation from now (1-based) and every one after it
 * fail; 0 disables. Thread: any. Process-wide. Debug and test builds only
 * (common/debug.h): a release build has no such function and no counter on
 * the allocation path. */
void pulse_alloc_fail_after(unsigned long n);
#endif

#endif
