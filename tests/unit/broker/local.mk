# SPDX-License-Identifier: MIT
# tests/unit/broker: every unit test of src/broker, in one list.
#
# To add a test: write tests/unit/broker/check_<module>.c (a Check suite
# with its own main; localtest.h in tests/lib reaches the local backend's
# state), then add a block below: the binary goes into check_PROGRAMS and
# TESTS as tests/unit/check_<module>, with its _SOURCES, _CFLAGS
# ($(TEST_CFLAGS) -I$(srcdir)/tests/lib) and _LDADD ($(BROKER_TEST_LDADD):
# the *_hooks libraries of tests/lib/local.mk, never the release ones).
# To add a test to an existing binary made of several files, put it in the
# file of its concern and register it in that file's TCase function.

# The broker tests' libraries: tests/lib, the broker and everything below it.
BROKER_TEST_LDADD = libpulsetest.a libpulsebroker_hooks.a libpulsemeta.a libpulsestore_hooks.a libpulsecommon_hooks.a \
	$(LEVELDB_LIBS) $(JANSSON_LIBS) $(CHECK_LDADD)

# The broker core through its seam: one file per concern (topics, publish,
# fetch, cursors, health); main in check_broker.c, helpers in brokertest.c.
check_PROGRAMS += tests/unit/check_broker
TESTS += tests/unit/check_broker
tests_unit_check_broker_SOURCES = tests/unit/broker/check_broker.c tests/unit/broker/brokertest.c \
	tests/unit/broker/brokertest.h tests/unit/broker/broker_topics.c tests/unit/broker/broker_publish.c \
	tests/unit/broker/broker_fetch.c tests/unit/broker/broker_cursors.c tests/unit/broker/broker_health.c \
	tests/unit/broker/broker_synclead.c \
	tests/unit/broker/broker_scale.c
tests_unit_check_broker_CFLAGS = $(TEST_CFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_broker_LDADD = $(BROKER_TEST_LDADD)

# The maintenance thread: retention and compaction on their intervals.
check_PROGRAMS += tests/unit/check_maint
TESTS += tests/unit/check_maint
tests_unit_check_maint_SOURCES = tests/unit/broker/check_maint.c
tests_unit_check_maint_CFLAGS = $(TEST_CFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_maint_LDADD = $(BROKER_TEST_LDADD)

# The data directory's own metadata: one file per concern (store, topics,
# failures); main in check_datadir.c, helpers in datadirtest.c.
check_PROGRAMS += tests/unit/check_datadir
TESTS += tests/unit/check_datadir
tests_unit_check_datadir_SOURCES = tests/unit/broker/check_datadir.c tests/unit/broker/datadirtest.c \
	tests/unit/broker/datadirtest.h tests/unit/broker/datadir_store.c tests/unit/broker/datadir_topics.c \
	tests/unit/broker/datadir_failures.c
tests_unit_check_datadir_CFLAGS = $(TEST_CFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_datadir_LDADD = $(BROKER_TEST_LDADD)

# The broker's wait for any of several partitions to have data.
check_PROGRAMS += tests/unit/check_waitany
TESTS += tests/unit/check_waitany
tests_unit_check_waitany_SOURCES = tests/unit/broker/check_waitany.c tests/unit/broker/brokertest.c
tests_unit_check_waitany_CFLAGS = $(TEST_CFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_waitany_LDADD = $(BROKER_TEST_LDADD)

# Consumer groups (src/broker/groups.c).
check_PROGRAMS += tests/unit/check_groups
TESTS += tests/unit/check_groups
tests_unit_check_groups_SOURCES = tests/unit/broker/check_groups.c tests/unit/broker/brokertest.c
tests_unit_check_groups_CFLAGS = $(TEST_CFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_groups_LDADD = $(BROKER_TEST_LDADD)

# Consumer groups: waits, the hold after a start (src/broker/groups.c).
check_PROGRAMS += tests/unit/check_group_gaps
TESTS += tests/unit/check_group_gaps
tests_unit_check_group_gaps_SOURCES = tests/unit/broker/check_group_gaps.c tests/unit/broker/brokertest.c
tests_unit_check_group_gaps_CFLAGS = $(TEST_CFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_group_gaps_LDADD = $(BROKER_TEST_LDADD)

# Idempotency keys of publishes (src/broker/idem.c).
check_PROGRAMS += tests/unit/check_idem
TESTS += tests/unit/check_idem
tests_unit_check_idem_SOURCES = tests/unit/broker/check_idem.c tests/unit/broker/brokertest.c
tests_unit_check_idem_CFLAGS = $(TEST_CFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_idem_LDADD = $(BROKER_TEST_LDADD)

# A start of many partitions on the start pool (src/broker/opener.c).
check_PROGRAMS += tests/unit/check_startopen
TESTS += tests/unit/check_startopen
tests_unit_check_startopen_SOURCES = tests/unit/broker/check_startopen.c tests/unit/broker/brokertest.c
tests_unit_check_startopen_CFLAGS = $(TEST_CFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_startopen_LDADD = $(BROKER_TEST_LDADD)

# A stop of many partitions closes their logs on a pool (topic.c).
check_PROGRAMS += tests/unit/check_stopclose
TESTS += tests/unit/check_stopclose
tests_unit_check_stopclose_SOURCES = tests/unit/broker/check_stopclose.c tests/unit/broker/brokertest.c
tests_unit_check_stopclose_CFLAGS = $(TEST_CFLAGS) -I$(srcdir)/tests/lib -I$(srcdir)/tests/unit/storage
tests_unit_check_stopclose_LDADD = $(BROKER_TEST_LDADD)
