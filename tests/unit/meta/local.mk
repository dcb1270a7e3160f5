# SPDX-License-Identifier: MIT
# tests/unit/meta: every unit test of src/meta, in one list.
#
# To add a test: write tests/unit/meta/check_<module>.c (a Check suite with
# its own main), then add a block below: the binary goes into check_PROGRAMS
# and TESTS as tests/unit/check_<module>, with its _SOURCES, _CFLAGS
# ($(TEST_CFLAGS) and what it includes) and _LDADD (libpulsemeta.a
# libpulsecommon_hooks.a, LevelDB, then $(CHECK_LDADD)). Tests link the
# *_hooks libraries (tests/lib/local.mk), never the release ones.
check_PROGRAMS += tests/unit/check_meta
TESTS += tests/unit/check_meta
tests_unit_check_meta_SOURCES = tests/unit/meta/check_meta.c
tests_unit_check_meta_CFLAGS = $(TEST_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_check_meta_LDADD = libpulsemeta.a libpulsecommon_hooks.a $(LEVELDB_LIBS) $(JANSSON_LIBS) $(CHECK_LDADD)
