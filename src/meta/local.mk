# SPDX-License-Identifier: MIT
# src/meta: the LevelDB metadata store (the only includer of leveldb/c.h).
noinst_LIBRARIES += libpulsemeta.a
libpulsemeta_a_SOURCES = src/meta/meta.c src/meta/meta.h src/meta/meta_int.h \
	src/meta/dirfile.c src/meta/dirfile.h
libpulsemeta_a_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)

check_PROGRAMS += tests/unit/check_meta
TESTS += tests/unit/check_meta
tests_unit_check_meta_SOURCES = tests/unit/meta/check_meta.c
tests_unit_check_meta_CFLAGS = $(TEST_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_check_meta_LDADD = libpulsemeta.a libpulsecommon.a $(LEVELDB_LIBS) $(JANSSON_LIBS) $(CHECK_LDADD)
