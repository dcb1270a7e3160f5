# SPDX-License-Identifier: MIT
# src/common: status, allocation, buffers, logging, clocks, CRC32C, text
# encodings (UTF-8, base64, JSON strings) and the record's JSON text.
noinst_LIBRARIES += libpulsecommon.a
libpulsecommon_a_SOURCES = \
	src/common/status.c src/common/status.h \
	src/common/alloc.c src/common/alloc.h \
	src/common/buf.c src/common/buf.h \
	src/common/endian.h \
	src/common/log.c src/common/log.h \
	src/common/clock.c src/common/clock.h \
	src/common/crc32c.c src/common/crc32c.h \
	src/common/failpoint.c src/common/failpoint.h \
	src/common/settings.c src/common/settings.h \
	src/common/fsio.c src/common/fsio.h \
	src/common/text.c src/common/text.h \
	src/common/record.c src/common/record.h

check_PROGRAMS += tests/unit/check_common
TESTS += tests/unit/check_common
tests_unit_check_common_SOURCES = tests/unit/common/check_common.c
tests_unit_check_common_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_common_LDADD = libpulsecommon.a $(CHECK_LDADD)

# The I/O seam's file-system helpers (tree removal, mkdir -p, ...), with the
# faulty io of tests/lib.
check_PROGRAMS += tests/unit/check_fsio
TESTS += tests/unit/check_fsio
tests_unit_check_fsio_SOURCES = tests/unit/common/check_fsio.c
tests_unit_check_fsio_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_fsio_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_fsio_LDADD = libpulsetest.a libpulsecommon.a $(CHECK_LDADD)

# text.c and record.c; jansson is linked only as the reference the record
# text is compared with (the library itself does not use it).
check_PROGRAMS += tests/unit/check_text
TESTS += tests/unit/check_text
tests_unit_check_text_SOURCES = tests/unit/common/check_text.c
tests_unit_check_text_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
tests_unit_check_text_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_text_LDADD = libpulsecommon.a $(JANSSON_LIBS) $(CHECK_LDADD)
