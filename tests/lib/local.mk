# SPDX-License-Identifier: MIT
# tests/lib: helpers shared by test binaries (never installed).
check_LIBRARIES += libpulsetest.a
libpulsetest_a_SOURCES = tests/lib/faultio.c tests/lib/faultio.h tests/lib/localtest.h
libpulsetest_a_CFLAGS = $(TEST_CFLAGS)

# The libraries that hold test hooks (failpoints, the allocation hook; see
# src/common/debug.h), built a second time from the same sources with
# PULSE_TEST_HOOKS. Every unit test links these instead of the release ones,
# and so does tests/pulsed-hooks (tests/integration/local.mk); pulsed and the
# tools link the release ones, which have no hooks. Built by `make check`
# only. (meta and http have no hooks: their one build serves both.)
check_LIBRARIES += libpulsecommon_hooks.a libpulsestore_hooks.a libpulsebroker_hooks.a
libpulsecommon_hooks_a_SOURCES = $(libpulsecommon_a_SOURCES)
libpulsecommon_hooks_a_CPPFLAGS = $(AM_CPPFLAGS) $(HOOKS_CPPFLAGS)
libpulsestore_hooks_a_SOURCES = $(libpulsestore_a_SOURCES)
libpulsestore_hooks_a_CPPFLAGS = $(AM_CPPFLAGS) $(HOOKS_CPPFLAGS)
libpulsebroker_hooks_a_SOURCES = $(libpulsebroker_a_SOURCES)
libpulsebroker_hooks_a_CPPFLAGS = $(AM_CPPFLAGS) $(HOOKS_CPPFLAGS)

# pulsed's libraries (PULSE_HTTP_LIBS in src/http/local.mk) with the hooked
# ones in place of the release ones: for tests/pulsed-hooks and the tests
# that run the whole server in process.
PULSE_HTTP_HOOKS_LIBS = libpulsehttp.a libpulsekafka.a libpulsebroker_hooks.a libpulsemeta.a libpulsestore_hooks.a \
	libpulsecommon_hooks.a $(MHD_LIBS) $(JANSSON_LIBS) $(LEVELDB_LIBS) $(ZLIB_LIBS) $(RDKAFKA_LIBS) $(GNUTLS_LIBS)
