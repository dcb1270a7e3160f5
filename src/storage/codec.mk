# SPDX-License-Identifier: MIT
# The batch codec (storage contract section 3) and its unit tests.
libpulsestore_a_SOURCES += src/storage/batch.h src/storage/batch.c

check_PROGRAMS += tests/unit/check_batch
TESTS += tests/unit/check_batch
tests_unit_check_batch_SOURCES = tests/unit/storage/check_batch.c
tests_unit_check_batch_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_batch_LDADD = libpulsestore.a libpulsecommon.a $(CHECK_LDADD)
