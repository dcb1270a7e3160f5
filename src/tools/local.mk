# SPDX-License-Identifier: MIT
# src/tools: offline utilities. pulse-log reads segment files through the
# batch codec only (common + storage), and a topic's topic.json through the
# metadata layer's file codec (meta/dirfile.h), never through the running
# broker. Their tests are listed in tests/unit/tools/local.mk.
bin_PROGRAMS += pulse-log
pulse_log_SOURCES = src/tools/pulse-log.c
pulse_log_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
pulse_log_LDADD = libpulsestore.a libpulsemeta.a libpulsecommon.a $(LEVELDB_LIBS) $(JANSSON_LIBS)

# The format and tool documentation written alongside this code.
EXTRA_DIST += docs/Format.md docs/Tools.md
