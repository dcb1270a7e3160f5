# SPDX-License-Identifier: MIT
# src/tools: offline utilities. pulse-log reads segment files through the
# batch codec only (common + storage), and a topic's topic.json through the
# metadata layer's file codec (meta/dirfile.h), never through the running
# broker.
bin_PROGRAMS += pulse-log
pulse_log_SOURCES = src/tools/pulse-log.c
pulse_log_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
pulse_log_LDADD = libpulsestore.a libpulsemeta.a libpulsecommon.a $(LEVELDB_LIBS) $(JANSSON_LIBS)

# Integration test: builds segments with the codec and runs the real binary.
check_PROGRAMS += tests/unit/check_pulse_log
TESTS += tests/unit/check_pulse_log
tests_unit_check_pulse_log_SOURCES = tests/unit/storage/check_pulse_log.c
tests_unit_check_pulse_log_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_pulse_log_LDADD = libpulsestore.a libpulsecommon.a $(CHECK_LDADD)

# The format and tool documentation written alongside this code.
EXTRA_DIST += docs/Format.md docs/Tools.md
