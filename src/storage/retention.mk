# SPDX-License-Identifier: MIT
# Time/size retention (storage contract section 8).
libpulsestore_a_SOURCES += src/storage/retention.c src/storage/retention.h

check_PROGRAMS += tests/unit/check_retention
TESTS += tests/unit/check_retention
tests_unit_check_retention_SOURCES = tests/unit/storage/check_retention.c
tests_unit_check_retention_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_retention_LDADD = libpulsestore.a libpulsecommon.a $(CHECK_LDADD)
