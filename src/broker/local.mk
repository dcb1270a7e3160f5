# SPDX-License-Identifier: MIT
# src/broker: the broker seam (broker.h, backend.h, backend.c) and the local
# backend behind it (local.h, local.c and the rest): topics, routing,
# publish, fetch, cursors, syncer (storage + meta). Its tests are listed in
# tests/unit/broker/local.mk.
noinst_LIBRARIES += libpulsebroker.a
libpulsebroker_a_SOURCES = src/broker/broker.h src/broker/backend.h src/broker/backend.c \
	src/broker/local.h src/broker/local.c src/broker/broker_int.h \
	src/broker/broker.c src/broker/topic.c src/broker/publish.c src/broker/fetch.c src/broker/cursor.c \
	src/broker/maint.c src/broker/maint.h src/broker/admin.c src/broker/admin.h src/broker/datadir.c \
	src/broker/heal.c src/broker/heal.h src/broker/broker_settings.c src/broker/broker_settings.h \
	src/broker/groups.c src/broker/groups.h \
	src/broker/idem.c src/broker/idem.h src/broker/opener.c src/broker/syncpool.c src/broker/syncpool.h
