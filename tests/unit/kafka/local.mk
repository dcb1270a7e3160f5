# SPDX-License-Identifier: MIT
# tests/unit/kafka: every unit test of src/kafka, in one list.
#
# To add a test: write tests/unit/kafka/check_<module>.c (a Check suite with
# its own main), then add a block below: the binary goes into
# check_PROGRAMS and TESTS as tests/unit/check_<module>, with its _SOURCES,
# _CFLAGS ($(TEST_CFLAGS) $(RDKAFKA_CFLAGS)) and _LDADD (libpulsekafka.a,
# then the *_hooks libraries of tests/lib/local.mk below it, never the
# release ones, then librdkafka and $(CHECK_LDADD)).
check_PROGRAMS += tests/unit/check_kafka
TESTS += tests/unit/check_kafka
tests_unit_check_kafka_SOURCES = tests/unit/kafka/check_kafka.c tests/unit/kafka/c11threads.c \
	tests/unit/kafka/sanitizer_opts.c
tests_unit_check_kafka_CFLAGS = $(TEST_CFLAGS) $(RDKAFKA_CFLAGS)
tests_unit_check_kafka_LDADD = libpulsekafka.a libpulsebroker_hooks.a libpulsemeta.a libpulsestore_hooks.a \
	libpulsecommon_hooks.a $(LEVELDB_LIBS) $(JANSSON_LIBS) $(RDKAFKA_LIBS) $(CHECK_LDADD)
EXTRA_DIST += tests/unit/kafka/tsan.supp
check_PROGRAMS += tests/unit/check_kgroupsm
TESTS += tests/unit/check_kgroupsm
tests_unit_check_kgroupsm_SOURCES = tests/unit/kafka/check_kgroupsm.c
tests_unit_check_kgroupsm_CFLAGS = $(TEST_CFLAGS) $(RDKAFKA_CFLAGS)
tests_unit_check_kgroupsm_LDADD = libpulsekafka.a libpulsebroker_hooks.a libpulsemeta.a libpulsestore_hooks.a \
	libpulsecommon_hooks.a $(LEVELDB_LIBS) $(JANSSON_LIBS) $(RDKAFKA_LIBS) $(CHECK_LDADD)
check_PROGRAMS += tests/unit/check_kgroups
TESTS += tests/unit/check_kgroups
tests_unit_check_kgroups_SOURCES = tests/unit/kafka/check_kgroups.c tests/unit/kafka/c11threads.c \
	tests/unit/kafka/sanitizer_opts.c
tests_unit_check_kgroups_CFLAGS = $(TEST_CFLAGS) $(RDKAFKA_CFLAGS)
tests_unit_check_kgroups_LDADD = libpulsekafka.a libpulsebroker_hooks.a libpulsemeta.a libpulsestore_hooks.a \
	libpulsecommon_hooks.a $(LEVELDB_LIBS) $(JANSSON_LIBS) $(RDKAFKA_LIBS) $(CHECK_LDADD)
