# SPDX-License-Identifier: MIT
# src/kafka: the Kafka backend behind the broker seam (broker.backend =
# kafka), through librdkafka. Its settings table (kafka_settings.c) needs no
# librdkafka, so programs that only read the configuration link it alone.
noinst_LIBRARIES += libpulsekafka.a
libpulsekafka_a_SOURCES = src/kafka/kafka.h src/kafka/kafka_int.h src/kafka/kafka.c src/kafka/kmeta.c \
	src/kafka/kpublish.c src/kafka/kfetch.c src/kafka/kwait.c src/kafka/kadmin.c \
	src/kafka/kafka_settings.c src/kafka/kafka_settings.h
libpulsekafka_a_CPPFLAGS = $(AM_CPPFLAGS) $(RDKAFKA_CFLAGS) $(JANSSON_CFLAGS)

check_PROGRAMS += tests/unit/check_kafka
TESTS += tests/unit/check_kafka
tests_unit_check_kafka_SOURCES = tests/unit/kafka/check_kafka.c
tests_unit_check_kafka_CFLAGS = $(TEST_CFLAGS) $(RDKAFKA_CFLAGS)
tests_unit_check_kafka_LDADD = libpulsekafka.a libpulsebroker.a libpulsemeta.a libpulsestore.a libpulsecommon.a \
	$(LEVELDB_LIBS) $(JANSSON_LIBS) $(RDKAFKA_LIBS) $(CHECK_LDADD)
