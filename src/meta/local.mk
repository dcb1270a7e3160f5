# SPDX-License-Identifier: MIT
# src/meta: the LevelDB metadata store (the only includer of leveldb/c.h).
# Its tests are listed in tests/unit/meta/local.mk.
noinst_LIBRARIES += libpulsemeta.a
libpulsemeta_a_SOURCES = src/meta/meta.c src/meta/meta.h src/meta/meta_int.h \
	src/meta/dirfile.c src/meta/dirfile.h
libpulsemeta_a_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
