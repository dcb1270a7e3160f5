# SPDX-License-Identifier: MIT
# tests/unit/common: every unit test of src/common, in one list.
#
# To add a test: write tests/unit/common/check_<module>.c (a Check suite
# with its own main), then add a block below: the binary goes into
# check_PROGRAMS and TESTS as tests/unit/check_<module>, with its _SOURCES,
# _CFLAGS (always $(TEST_CFLAGS)) and _LDADD (libpulsecommon_hooks.a, then
# $(CHECK_LDADD)). Tests link the *_hooks libraries (tests/lib/local.mk),
# built with the test hooks, never the release ones; tests of this layer
# link only common and tests/lib.
check_PROGRAMS += tests/unit/check_common
TESTS += tests/unit/check_common
tests_unit_check_common_SOURCES = tests/unit/common/check_common.c
tests_unit_check_common_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_common_LDADD = libpulsecommon_hooks.a $(CHECK_LDADD)

# The I/O seam's file-system helpers (tree removal, mkdir -p, ...), with the
# faulty io of tests/lib.
check_PROGRAMS += tests/unit/check_fsio
TESTS += tests/unit/check_fsio
tests_unit_check_fsio_SOURCES = tests/unit/common/check_fsio.c
tests_unit_check_fsio_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_fsio_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_fsio_LDADD = libpulsetest.a libpulsecommon_hooks.a $(CHECK_LDADD)

# text.c and record.c; jansson is linked only as the reference the record
# text is compared with (the library itself does not use it).
check_PROGRAMS += tests/unit/check_text
TESTS += tests/unit/check_text
tests_unit_check_text_SOURCES = tests/unit/common/check_text.c
tests_unit_check_text_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
tests_unit_check_text_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_text_LDADD = libpulsecommon_hooks.a $(JANSSON_LIBS) $(CHECK_LDADD)

# The fast scanners of text.c (sixteen bytes a step), the integer formatter
# and the shortest digits of reals, against the plain definitions and
# jansson on hostile input.
check_PROGRAMS += tests/unit/check_textscan
TESTS += tests/unit/check_textscan
tests_unit_check_textscan_SOURCES = tests/unit/common/check_textscan.c
tests_unit_check_textscan_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
tests_unit_check_textscan_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_textscan_LDADD = libpulsecommon_hooks.a $(JANSSON_LIBS) -lm $(CHECK_LDADD)
