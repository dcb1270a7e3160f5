# SPDX-License-Identifier: MIT
# src/storage: the storage engine library (knows common only). Its tests are
# listed in tests/unit/storage/local.mk.
noinst_LIBRARIES += libpulsestore.a
libpulsestore_a_SOURCES = \
	src/storage/batch.h src/storage/batch.c \
	src/storage/index.h src/storage/index.c \
	src/storage/fdcache.h src/storage/fdcache.c \
	src/storage/segscan.h src/storage/segscan.c \
	src/storage/damage.h src/storage/damage.c \
	src/storage/segment.h src/storage/segment.c \
	src/storage/snapshot.h src/storage/snapshot.c \
	src/storage/recover.h src/storage/recover.c \
	src/storage/plog_int.h src/storage/plog.h src/storage/plog.c src/storage/plog_time.c \
	src/storage/plog_edit.h src/storage/plog_edit.c \
	src/storage/store_settings.h src/storage/store_settings.c \
	src/storage/compact.c src/storage/compact.h \
	src/storage/retention.c src/storage/retention.h
