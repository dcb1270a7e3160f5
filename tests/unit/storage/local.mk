# SPDX-License-Identifier: MIT
# tests/unit/storage: every unit test of src/storage, in one list.
#
# To add a test: write tests/unit/storage/check_<module>.c (a Check suite
# with its own main; plogtest.h and compacttest.h have the shared helpers),
# then add a block below: the binary goes into check_PROGRAMS and TESTS as
# tests/unit/check_<module>, with its _SOURCES (list the helper headers it
# includes), _CFLAGS ($(TEST_CFLAGS)), _CPPFLAGS (add -I$(srcdir)/tests/lib
# for faultio.h) and _LDADD ($(STORE_TEST_LDADD), or without libpulsetest.a
# when it needs no faulty io): tests link the *_hooks libraries
# (tests/lib/local.mk), never the release ones. A binary made of several files (one per
# concern) lists them all in _SOURCES; its check_<module>.c holds main.

# The storage tests' libraries: tests/lib (the faulty io), the engine, common
# (with the test hooks).
STORE_TEST_LDADD = libpulsetest.a libpulsestore_hooks.a libpulsecommon_hooks.a $(CHECK_LDADD)

# The batch codec (storage contract section 3).
check_PROGRAMS += tests/unit/check_batch
TESTS += tests/unit/check_batch
tests_unit_check_batch_SOURCES = tests/unit/storage/check_batch.c
tests_unit_check_batch_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_batch_LDADD = libpulsestore_hooks.a libpulsecommon_hooks.a $(CHECK_LDADD)

# The partition log engine: index, snapshot, the log, recovery, faults, a
# model test, the descriptor cache, the appender-led sync.
check_PROGRAMS += tests/unit/check_index tests/unit/check_snapshot tests/unit/check_plog \
	tests/unit/check_recovery tests/unit/check_fault tests/unit/check_model tests/unit/check_fdcache \
	tests/unit/check_synclead tests/unit/check_readcrc tests/unit/check_readcost
TESTS += tests/unit/check_index tests/unit/check_snapshot tests/unit/check_plog \
	tests/unit/check_recovery tests/unit/check_fault tests/unit/check_model tests/unit/check_fdcache \
	tests/unit/check_synclead tests/unit/check_readcrc tests/unit/check_readcost
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
# Recovery: one file per concern (tail, snapshot, damage); main in check_recovery.c.
tests_unit_check_recovery_SOURCES = tests/unit/storage/check_recovery.c tests/unit/storage/recoverytest.c \
	tests/unit/storage/recoverytest.h tests/unit/storage/recovery_tail.c tests/unit/storage/recovery_snapshot.c \
	tests/unit/storage/recovery_damage.c tests/unit/storage/plogtest.h
tests_unit_check_recovery_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_recovery_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_recovery_LDADD = $(STORE_TEST_LDADD)
tests_unit_check_fault_SOURCES = tests/unit/storage/check_fault.c tests/unit/storage/plogtest.h
tests_unit_check_fault_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_fault_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_fault_LDADD = $(STORE_TEST_LDADD)
tests_unit_check_synclead_SOURCES = tests/unit/storage/check_synclead.c tests/unit/storage/plogtest.h
tests_unit_check_synclead_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_synclead_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_synclead_LDADD = $(STORE_TEST_LDADD)
tests_unit_check_readcrc_SOURCES = tests/unit/storage/check_readcrc.c tests/unit/storage/plogtest.h
tests_unit_check_readcrc_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_readcrc_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_readcrc_LDADD = $(STORE_TEST_LDADD)
tests_unit_check_model_SOURCES = tests/unit/storage/check_model.c tests/unit/storage/plogtest.h
tests_unit_check_model_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_model_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_model_LDADD = $(STORE_TEST_LDADD)
tests_unit_check_fdcache_SOURCES = tests/unit/storage/check_fdcache.c
tests_unit_check_fdcache_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_fdcache_LDADD = $(STORE_TEST_LDADD)
tests_unit_check_readcost_SOURCES = tests/unit/storage/check_readcost.c tests/unit/storage/plogtest.h
tests_unit_check_readcost_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_readcost_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_readcost_LDADD = $(STORE_TEST_LDADD)

# The snapshot's version 2 records and the recovery that trusts them.
check_PROGRAMS += tests/unit/check_snapshot_v2
TESTS += tests/unit/check_snapshot_v2
tests_unit_check_snapshot_v2_SOURCES = tests/unit/storage/check_snapshot_v2.c tests/unit/storage/compacttest.h \
	tests/unit/storage/plogtest.h
tests_unit_check_snapshot_v2_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_snapshot_v2_LDADD = libpulsestore_hooks.a libpulsecommon_hooks.a $(CHECK_LDADD)

# Log compaction (storage contract section 8, "Compaction"): one file per
# concern (survivors, segments, readers, merge, edits; main in
# check_compact.c), and crashes at each failpoint of a commit.
check_PROGRAMS += tests/unit/check_compact tests/unit/check_compact_crash
TESTS += tests/unit/check_compact tests/unit/check_compact_crash
tests_unit_check_compact_SOURCES = tests/unit/storage/check_compact.c tests/unit/storage/compactcases.h \
	tests/unit/storage/compact_survivors.c tests/unit/storage/compact_segments.c tests/unit/storage/compact_readers.c \
	tests/unit/storage/compact_merge.c tests/unit/storage/compact_edits.c \
	tests/unit/storage/compacttest.h tests/unit/storage/plogtest.h
tests_unit_check_compact_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_compact_LDADD = libpulsestore_hooks.a libpulsecommon_hooks.a $(CHECK_LDADD)
tests_unit_check_compact_crash_SOURCES = tests/unit/storage/check_compact_crash.c tests/unit/storage/compacttest.h \
	tests/unit/storage/plogtest.h
tests_unit_check_compact_crash_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_compact_crash_LDADD = libpulsestore_hooks.a libpulsecommon_hooks.a $(CHECK_LDADD)

# Time/size retention (storage contract section 8).
check_PROGRAMS += tests/unit/check_retention
TESTS += tests/unit/check_retention
tests_unit_check_retention_SOURCES = tests/unit/storage/check_retention.c
tests_unit_check_retention_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_retention_LDADD = libpulsestore_hooks.a libpulsecommon_hooks.a $(CHECK_LDADD)

# Lost data and headers that cannot be right: missing ranges, the index
# files of lost segments, pulse_plog_raise_end, damage a read meets.
check_PROGRAMS += tests/unit/check_lost
TESTS += tests/unit/check_lost
tests_unit_check_lost_SOURCES = tests/unit/storage/check_lost.c tests/unit/storage/plogtest.h
tests_unit_check_lost_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_lost_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_lost_LDADD = $(STORE_TEST_LDADD)

# Positions by time (pulse_plog_offset_for_time).
check_PROGRAMS += tests/unit/check_plogtime
TESTS += tests/unit/check_plogtime
tests_unit_check_plogtime_SOURCES = tests/unit/storage/check_plogtime.c tests/unit/storage/plogtest.h
tests_unit_check_plogtime_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_plogtime_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_plogtime_LDADD = $(STORE_TEST_LDADD)

# What an open and a close cost in syncs and snapshot writes: none after a
# clean close, the full set after a crash past the checkpoint.
check_PROGRAMS += tests/unit/check_cleanopen
TESTS += tests/unit/check_cleanopen
tests_unit_check_cleanopen_SOURCES = tests/unit/storage/check_cleanopen.c tests/unit/storage/plogtest.h
tests_unit_check_cleanopen_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_cleanopen_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_cleanopen_LDADD = $(STORE_TEST_LDADD)

# Compressed batches (codec 1, zlib): round trips and hostile streams.
check_PROGRAMS += tests/unit/check_batch_zlib
TESTS += tests/unit/check_batch_zlib
tests_unit_check_batch_zlib_SOURCES = tests/unit/storage/check_batch_zlib.c
tests_unit_check_batch_zlib_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_batch_zlib_LDADD = libpulsestore_hooks.a libpulsecommon_hooks.a $(CHECK_LDADD)

# The partition log with compressed batches: append, read, recovery, damage.
check_PROGRAMS += tests/unit/check_plog_zlib
TESTS += tests/unit/check_plog_zlib
tests_unit_check_plog_zlib_SOURCES = tests/unit/storage/check_plog_zlib.c tests/unit/storage/plogtest.h
tests_unit_check_plog_zlib_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_plog_zlib_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_plog_zlib_LDADD = $(STORE_TEST_LDADD)
