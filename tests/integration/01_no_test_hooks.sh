#!/bin/sh
# SPDX-License-Identifier: MIT
# A release pulsed (configured without --enable-debug) carries no test
# hooks: no failpoint or allocation-hook code (nm), and neither the
# environment variable names that would arm them nor a failpoint's name
# (the bytes of the file). tests/pulsed-hooks, built from the same sources
# with PULSE_TEST_HOOKS, has all of them: that proves the checks below can
# see a hook when there is one. In a debug build pulsed has the hooks by
# design, and the test is skipped (77).
b=${PULSE_BUILDDIR:-.}
rel=$b/pulsed
hooked=$b/tests/pulsed-hooks

if grep -q '^#define PULSE_DEBUG 1' "$b/config.h"; then
    echo "skip: a debug build (--enable-debug) compiles the hooks into pulsed"
    exit 77
fi
command -v nm >/dev/null 2>&1 || { echo "skip: no nm"; exit 77; }
for f in "$rel" "$hooked"; do
    [ -x "$f" ] || { echo "FAIL: $f not built"; exit 1; }
done

# Symbols of failpoint.c and alloc.c's hook; strings the hooks would carry.
syms='pulse_failpoint|pulse_failpoint_delay|pulse_failpoint_delay_armed|pulse_alloc_fail_after|fail_countdown'
strs='PULSE_FAILPOINT PULSE_FAILPOINT_DELAY topic_create_after_dirs cursor_commit_write exiting.abruptly'

status=0
found=$(nm "$rel" | grep -Ew "$syms")
if [ -n "$found" ]; then
    echo "FAIL: the release pulsed has hook symbols:"; echo "$found"; status=1
fi
for s in $strs; do
    if grep -aq "$s" "$rel"; then
        echo "FAIL: the release pulsed contains the string '$s'"; status=1
    fi
done

n=$(nm "$hooked" | grep -Ewc "$syms")
if [ "$n" -lt 4 ]; then
    echo "FAIL: tests/pulsed-hooks has $n hook symbols, expected at least 4"; status=1
fi
for s in $strs; do
    if ! grep -aq "$s" "$hooked"; then
        echo "FAIL: tests/pulsed-hooks lacks the string '$s'"; status=1
    fi
done
[ $status -eq 0 ] && echo "ok: release pulsed has no test hooks; tests/pulsed-hooks has them"
exit $status
