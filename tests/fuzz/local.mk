# SPDX-License-Identifier: MIT
# tests/fuzz: libFuzzer drivers and their seed corpora.
#
# fuzz_batch.c is built twice: as a libFuzzer target when configured with
# --enable-fuzzing (CC=clang), and always as fuzz_batch_replay, a plain
# program that make check runs over the committed corpus.

FUZZ_BATCH_CORPUS = \
	tests/fuzz/corpus/batch/valid-one-record \
	tests/fuzz/corpus/batch/valid-mixed \
	tests/fuzz/corpus/batch/valid-two-batches \
	tests/fuzz/corpus/batch/valid-sparse \
	tests/fuzz/corpus/batch/torn-tail \
	tests/fuzz/corpus/batch/bad-crc \
	tests/fuzz/corpus/batch/bad-record-length
EXTRA_DIST += $(FUZZ_BATCH_CORPUS)

check_PROGRAMS += tests/fuzz/fuzz_batch_replay
TESTS += tests/fuzz/fuzz_batch_replay
tests_fuzz_fuzz_batch_replay_SOURCES = tests/fuzz/fuzz_batch.c
tests_fuzz_fuzz_batch_replay_CPPFLAGS = $(AM_CPPFLAGS) -DPULSE_FUZZ_REPLAY
tests_fuzz_fuzz_batch_replay_CFLAGS = $(AM_CFLAGS)
tests_fuzz_fuzz_batch_replay_LDADD = libpulsestore.a libpulsecommon.a

if FUZZING
# batch.c is compiled into the target itself, not taken from
# libpulsestore.a, so it carries libFuzzer's coverage instrumentation: without
# it the fuzzer would be blind inside the decoder it is meant to explore.
noinst_PROGRAMS += tests/fuzz/fuzz_batch
tests_fuzz_fuzz_batch_SOURCES = tests/fuzz/fuzz_batch.c src/storage/batch.c
tests_fuzz_fuzz_batch_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_batch_LDFLAGS = -fsanitize=fuzzer,address,undefined
tests_fuzz_fuzz_batch_LDADD = libpulsestore.a libpulsecommon.a
endif
