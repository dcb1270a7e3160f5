# SPDX-License-Identifier: MIT
# tests/lib: helpers shared by test binaries (never installed).
check_LIBRARIES += libpulsetest.a
libpulsetest_a_SOURCES = tests/lib/faultio.c tests/lib/faultio.h
libpulsetest_a_CFLAGS = $(TEST_CFLAGS)
