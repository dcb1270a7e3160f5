# SPDX-License-Identifier: MIT
# src/common: status, allocation, buffers, logging, clocks, CRC32C.
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
	src/common/fsio.c src/common/fsio.h

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
