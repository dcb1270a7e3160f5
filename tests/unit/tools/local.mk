# SPDX-License-Identifier: MIT
# tests/unit/tools: every test of the offline tools (src/tools), in one list.
#
# To add a test: write tests/unit/tools/check_<tool>.c (a Check suite with its
# own main), then add a block below like check_pulse_log's. A test of a tool
# runs the real binary from $PULSE_BUILDDIR, so the tool must be built first
# (bin_PROGRAMS are, before check_PROGRAMS run). Link the *_hooks libraries
# (tests/lib/local.mk).

# Builds segments with the codec and runs the real pulse-log binary.
check_PROGRAMS += tests/unit/check_pulse_log
TESTS += tests/unit/check_pulse_log
tests_unit_check_pulse_log_SOURCES = tests/unit/tools/check_pulse_log.c
tests_unit_check_pulse_log_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_pulse_log_LDADD = libpulsestore_hooks.a libpulsecommon_hooks.a $(CHECK_LDADD)
