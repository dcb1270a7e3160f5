# SPDX-License-Identifier: MIT
# src/kafka: the Kafka backend behind the broker seam (broker.backend =
# kafka), through librdkafka. Its settings table (kafka_settings.c) needs no
# librdkafka, so programs that only read the configuration link it alone.
# Its tests are listed in tests/unit/kafka/local.mk.
noinst_LIBRARIES += libpulsekafka.a
libpulsekafka_a_SOURCES = src/kafka/kafka.h src/kafka/kafka_int.h src/kafka/kafka.c src/kafka/kmeta.c \
	src/kafka/kpublish.c src/kafka/kfetch.c src/kafka/kwait.c src/kafka/kadmin.c src/kafka/kconfig.c src/kafka/kconsumers.c \
	src/kafka/kgroupsm.c src/kafka/kgroupsm.h src/kafka/kgroups.c src/kafka/kgroups.h src/kafka/kgcalls.c \
	src/kafka/kafka_settings.c src/kafka/kafka_settings.h
libpulsekafka_a_CPPFLAGS = $(AM_CPPFLAGS) $(RDKAFKA_CFLAGS) $(JANSSON_CFLAGS)
