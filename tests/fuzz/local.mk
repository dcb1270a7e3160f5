# SPDX-License-Identifier: MIT
# tests/fuzz: libFuzzer drivers and their seed corpora.
#
# Each driver is built twice: as a libFuzzer target when configured with
# --enable-fuzzing (CC=clang), and always as <driver>_replay, a plain
# program (with fuzz_replay.c's main) that make check runs over the
# committed corpus. fuzz_segscan walks the batch corpus as segment files.

FUZZ_BATCH_CORPUS = \
	tests/fuzz/corpus/batch/valid-one-record \
	tests/fuzz/corpus/batch/valid-mixed \
	tests/fuzz/corpus/batch/valid-two-batches \
	tests/fuzz/corpus/batch/valid-sparse \
	tests/fuzz/corpus/batch/torn-tail \
	tests/fuzz/corpus/batch/bad-crc \
	tests/fuzz/corpus/batch/bad-record-length \
	tests/fuzz/corpus/batch/damaged-then-valid \
	tests/fuzz/corpus/batch/garbage-between \
	tests/fuzz/corpus/batch/valid-zlib \
	tests/fuzz/corpus/batch/zlib-trailing-bytes \
	tests/fuzz/corpus/batch/zlib-truncated
EXTRA_DIST += $(FUZZ_BATCH_CORPUS)

check_PROGRAMS += tests/fuzz/fuzz_batch_replay tests/fuzz/fuzz_segscan_replay
TESTS += tests/fuzz/fuzz_batch_replay tests/fuzz/fuzz_segscan_replay
tests_fuzz_fuzz_batch_replay_SOURCES = tests/fuzz/fuzz_batch.c tests/fuzz/fuzz_replay.c
tests_fuzz_fuzz_batch_replay_CFLAGS = $(AM_CFLAGS)
tests_fuzz_fuzz_batch_replay_LDADD = libpulsestore.a libpulsecommon.a
tests_fuzz_fuzz_segscan_replay_SOURCES = tests/fuzz/fuzz_segscan.c tests/fuzz/fuzz_replay.c
tests_fuzz_fuzz_segscan_replay_CFLAGS = $(AM_CFLAGS)
tests_fuzz_fuzz_segscan_replay_LDADD = libpulsestore.a libpulsecommon.a

if FUZZING
# batch.c is compiled into the target itself, not taken from
# libpulsestore.a, so it carries libFuzzer's coverage instrumentation: without
# it the fuzzer would be blind inside the decoder it is meant to explore.
noinst_PROGRAMS += tests/fuzz/fuzz_batch
tests_fuzz_fuzz_batch_SOURCES = tests/fuzz/fuzz_batch.c src/storage/batch.c
tests_fuzz_fuzz_batch_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_batch_LDFLAGS = -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_batch_LDADD = libpulsestore.a libpulsecommon.a
noinst_PROGRAMS += tests/fuzz/fuzz_segscan
tests_fuzz_fuzz_segscan_SOURCES = tests/fuzz/fuzz_segscan.c src/storage/segscan.c src/storage/damage.c
tests_fuzz_fuzz_segscan_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_segscan_LDFLAGS = -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_segscan_LDADD = libpulsestore.a libpulsecommon.a
endif
