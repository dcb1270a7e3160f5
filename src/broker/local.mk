# SPDX-License-Identifier: MIT
# src/broker: the broker seam (broker.h, backend.h, backend.c) and the local
# backend behind it (local.h, local.c and the rest): topics, routing,
# publish, fetch, cursors, syncer (storage + meta).
noinst_LIBRARIES += libpulsebroker.a
libpulsebroker_a_SOURCES = src/broker/broker.h src/broker/backend.h src/broker/backend.c \
	src/broker/local.h src/broker/local.c src/broker/broker_int.h \
	src/broker/broker.c src/broker/topic.c src/broker/publish.c src/broker/fetch.c src/broker/cursor.c \
	src/broker/maint.c src/broker/maint.h src/broker/admin.c src/broker/admin.h src/broker/datadir.c \
	src/broker/heal.c src/broker/heal.h src/broker/broker_settings.c src/broker/broker_settings.h

check_PROGRAMS += tests/unit/check_broker
TESTS += tests/unit/check_broker
tests_unit_check_broker_SOURCES = tests/unit/broker/check_broker.c tests/unit/broker/brokertest.c tests/unit/broker/brokertest.h \
	tests/unit/broker/broker_topics.c tests/unit/broker/broker_publish.c tests/unit/broker/broker_fetch.c \
	tests/unit/broker/broker_cursors.c tests/unit/broker/broker_health.c
tests_unit_check_broker_CFLAGS = $(TEST_CFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_broker_LDADD = libpulsetest.a libpulsebroker.a libpulsemeta.a libpulsestore.a libpulsecommon.a \
	$(LEVELDB_LIBS) $(JANSSON_LIBS) $(CHECK_LDADD)

check_PROGRAMS += tests/unit/check_maint
TESTS += tests/unit/check_maint
tests_unit_check_maint_SOURCES = tests/unit/broker/check_maint.c
tests_unit_check_maint_CFLAGS = $(TEST_CFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_maint_LDADD = libpulsetest.a libpulsebroker.a libpulsemeta.a libpulsestore.a libpulsecommon.a \
	$(LEVELDB_LIBS) $(JANSSON_LIBS) $(CHECK_LDADD)

check_PROGRAMS += tests/unit/check_datadir
TESTS += tests/unit/check_datadir
tests_unit_check_datadir_SOURCES = tests/unit/broker/check_datadir.c tests/unit/broker/datadirtest.c tests/unit/broker/datadirtest.h \
	tests/unit/broker/datadir_store.c tests/unit/broker/datadir_topics.c tests/unit/broker/datadir_failures.c
tests_unit_check_datadir_CFLAGS = $(TEST_CFLAGS) -I$(srcdir)/tests/lib
tests_unit_check_datadir_LDADD = libpulsetest.a libpulsebroker.a libpulsemeta.a libpulsestore.a libpulsecommon.a \
	$(LEVELDB_LIBS) $(JANSSON_LIBS) $(CHECK_LDADD)
