# SPDX-License-Identifier: MIT
# Log compaction (storage contract section 8, "Compaction"), its tests and
# its benchmark. bench_compact is only built, never run, by `make`; run it
# by hand: ./bench/bench_compact --dir /tmp
libpulsestore_a_SOURCES += src/storage/compact.c src/storage/compact.h

check_PROGRAMS += tests/unit/check_compact tests/unit/check_compact_crash
TESTS += tests/unit/check_compact tests/unit/check_compact_crash
tests_unit_check_compact_SOURCES = tests/unit/storage/check_compact.c tests/unit/storage/compactcases.h \
	tests/unit/storage/compact_survivors.c tests/unit/storage/compact_segments.c tests/unit/storage/compact_readers.c \
	tests/unit/storage/compact_merge.c tests/unit/storage/compact_edits.c \
	tests/unit/storage/compacttest.h tests/unit/storage/plogtest.h
tests_unit_check_compact_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_compact_LDADD = libpulsestore.a libpulsecommon.a $(CHECK_LDADD)
tests_unit_check_compact_crash_SOURCES = tests/unit/storage/check_compact_crash.c tests/unit/storage/compacttest.h tests/unit/storage/plogtest.h
tests_unit_check_compact_crash_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_compact_crash_LDADD = libpulsestore.a libpulsecommon.a $(CHECK_LDADD)

noinst_PROGRAMS += bench/bench_compact
bench_bench_compact_SOURCES = bench/bench_compact.c
bench_bench_compact_LDADD = libpulsestore.a libpulsecommon.a

# `make bench-compact`: compaction throughput and memory, and one retention
# pass over 10,000 segments (JSON lines; see docs/Performance.md).
bench-compact: bench/bench_compact$(EXEEXT)
	./bench/bench_compact --dir "$(BENCH_DIR)"
.PHONY: bench-compact
