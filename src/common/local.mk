# SPDX-License-Identifier: MIT
# src/common: status, allocation, buffers, logging, clocks, CRC32C, text
# encodings (UTF-8, base64, JSON strings) and the record's JSON text. Its
# tests are listed in tests/unit/common/local.mk.
noinst_LIBRARIES += libpulsecommon.a
libpulsecommon_a_SOURCES = \
	src/common/status.c src/common/status.h \
	src/common/alloc.c src/common/alloc.h \
	src/common/buf.c src/common/buf.h \
	src/common/endian.h \
	src/common/log.c src/common/log.h \
	src/common/clock.c src/common/clock.h \
	src/common/crc32c.c src/common/crc32c.h \
	src/common/debug.c src/common/debug.h \
	src/common/failpoint.c src/common/failpoint.h \
	src/common/settings.c src/common/settings.h \
	src/common/fsio.c src/common/fsio.h \
	src/common/text.c src/common/text.h \
	src/common/record.c src/common/record.h
