# SPDX-License-Identifier: MIT
# src/storage: the storage engine library (knows common only).
noinst_LIBRARIES += libpulsestore.a
libpulsestore_a_SOURCES = \
	src/storage/index.h src/storage/index.c \
	src/storage/fdcache.h src/storage/fdcache.c \
	src/storage/segscan.h src/storage/segscan.c \
	src/storage/damage.h src/storage/damage.c \
	src/storage/segment.h src/storage/segment.c \
	src/storage/snapshot.h src/storage/snapshot.c \
	src/storage/recover.h src/storage/recover.c \
	src/storage/plog_int.h src/storage/plog.h src/storage/plog.c \
	src/storage/plog_edit.h src/storage/plog_edit.c \
	src/storage/store_settings.h src/storage/store_settings.c

# The batch codec lives in its own fragment.
include src/storage/codec.mk

# Partition log engine tests (tests/lib/faultio provides the faulty io).
STORE_TEST_LDADD = libpulsetest.a libpulsestore.a libpulsecommon.a $(CHECK_LDADD)

check_PROGRAMS += tests/unit/check_index tests/unit/check_snapshot tests/unit/check_plog \
	tests/unit/check_recovery tests/unit/check_fault tests/unit/check_model tests/unit/check_fdcache
TESTS += tests/unit/check_index tests/unit/check_snapshot tests/unit/check_plog \
	tests/unit/check_recovery tests/unit/check_fault tests/unit/check_model tests/unit/check_fdcache
tests_unit_check_index_SOURCES = tests/unit/storage/check_index.c
tests_unit_check_index_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_index_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_index_LDADD = $(STORE_TEST_LDADD)
tests_unit_check_snapshot_SOURCES = tests/unit/storage/check_snapshot.c
tests_unit_check_snapshot_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_snapshot_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_snapshot_LDADD = $(STORE_TEST_LDADD)
tests_unit_check_plog_SOURCES = tests/unit/storage/check_plog.c tests/unit/storage/plogtest.h
tests_unit_check_plog_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_plog_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_plog_LDADD = $(STORE_TEST_LDADD)
tests_unit_check_recovery_SOURCES = tests/unit/storage/check_recovery.c tests/unit/storage/recoverytest.c tests/unit/storage/recoverytest.h \
	tests/unit/storage/recovery_tail.c tests/unit/storage/recovery_snapshot.c tests/unit/storage/recovery_damage.c \
	tests/unit/storage/plogtest.h
tests_unit_check_recovery_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_recovery_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_recovery_LDADD = $(STORE_TEST_LDADD)
tests_unit_check_fault_SOURCES = tests/unit/storage/check_fault.c tests/unit/storage/plogtest.h
tests_unit_check_fault_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_fault_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_fault_LDADD = $(STORE_TEST_LDADD)
tests_unit_check_model_SOURCES = tests/unit/storage/check_model.c tests/unit/storage/plogtest.h
tests_unit_check_model_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_model_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_model_LDADD = $(STORE_TEST_LDADD)
tests_unit_check_fdcache_SOURCES = tests/unit/storage/check_fdcache.c
tests_unit_check_fdcache_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_fdcache_LDADD = $(STORE_TEST_LDADD)
include src/storage/maint.mk

# Retention (maintenance).
include src/storage/retention.mk

# Lost data and headers that cannot be right: missing ranges, the index
# files of lost segments, pulse_plog_raise_end, damage a read meets.
check_PROGRAMS += tests/unit/check_lost
TESTS += tests/unit/check_lost
tests_unit_check_lost_SOURCES = tests/unit/storage/check_lost.c tests/unit/storage/plogtest.h
tests_unit_check_lost_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_lost_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_lost_LDADD = $(STORE_TEST_LDADD)
