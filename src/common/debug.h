/* SPDX-License-Identifier: MIT */
/*
 * debug.h - what a debug build adds: assertions of invariants, and whether
 * the test hooks (failpoints, the allocation hook) are compiled in.
 *
 * Builds. A plain ./configure is a release build: PULSE_ASSERT compiles to
 * nothing and the test hooks are absent (pulse_failpoint* calls compile to
 * nothing; pulse_alloc_fail_after does not exist). --enable-debug defines
 * PULSE_DEBUG: assertions are checked and the hooks are in. The test
 * programs and tests/pulsed-hooks are built from the same sources with
 * PULSE_TEST_HOOKS (tests/lib/local.mk), which brings in the hooks only,
 * so `make check` has them in a release configuration too.
 *
 * PULSE_ASSERT(expr) guards programmer invariants only (a log always has a
 * segment, HW never passes the log end, a reference count is positive when
 * released). Bytes from disk or the network are validated and refused,
 * never asserted. In a debug build a false expr writes
 * "file:line: function: assertion failed: expr" to stderr and aborts. In a
 * release build expr is not evaluated (it sits in sizeof, so the variables
 * it names still count as used): it must have no side effects.
 */
#ifndef PULSE_COMMON_DEBUG_H
#define PULSE_COMMON_DEBUG_H

#if defined(PULSE_DEBUG) || defined(PULSE_TEST_HOOKS)
#define PULSE_HOOKS 1
#endif

#ifdef PULSE_DEBUG
#define PULSE_ASSERT(expr) ((expr) ? (void)0 : pulse_assert_fail(#expr, __FILE__, __LINE__, __func__))
#else
#define PULSE_ASSERT(expr) ((void)sizeof(!(expr)))
#endif

/* Reports a failed PULSE_ASSERT and aborts. Thread: any. Never returns. */
_Noreturn void pulse_assert_fail(const char *expr, const char *file, int line, const char *func);

#endif
