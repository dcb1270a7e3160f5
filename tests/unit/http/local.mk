# SPDX-License-Identifier: MIT
# tests/unit/http: every unit test of src/http, in one list. (pulsed over
# real HTTP is tested by tests/integration, which has its own list.)
#
# To add a test: write tests/unit/http/check_<module>.c (a Check suite with
# its own main), then add a block below: the binary goes into
# check_PROGRAMS and TESTS as tests/unit/check_<module>, with its _SOURCES,
# _CPPFLAGS ($(AM_CPPFLAGS) plus the -I flags of what it includes), _CFLAGS
# ($(TEST_CFLAGS)) and _LDADD (libpulsehttp.a and the libraries below it it
# needs, lowest last, then $(CHECK_LDADD)). Tests link the *_hooks
# libraries of common, storage and broker (tests/lib/local.mk), never the
# release ones.

check_PROGRAMS += tests/unit/check_http
TESTS += tests/unit/check_http
tests_unit_check_http_SOURCES = tests/unit/http/check_http.c
tests_unit_check_http_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS) $(ZLIB_CFLAGS)
tests_unit_check_http_CFLAGS = $(TEST_CFLAGS)
# libpulsekafka.a and libpulsebroker_hooks.a for their settings tables only (no
# LevelDB or librdkafka is linked in).
tests_unit_check_http_LDADD = libpulsehttp.a libpulsekafka.a libpulsebroker_hooks.a libpulsestore_hooks.a libpulsecommon_hooks.a $(JANSSON_LIBS) \
	$(ZLIB_LIBS) $(CHECK_LDADD)

check_PROGRAMS += tests/unit/check_fastpub
TESTS += tests/unit/check_fastpub
tests_unit_check_fastpub_SOURCES = tests/unit/http/check_fastpub.c
tests_unit_check_fastpub_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
tests_unit_check_fastpub_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_fastpub_LDADD = libpulsehttp.a libpulsekafka.a libpulsestore_hooks.a libpulsecommon_hooks.a $(JANSSON_LIBS) $(CHECK_LDADD)

check_PROGRAMS += tests/unit/check_fetch_json
TESTS += tests/unit/check_fetch_json
tests_unit_check_fetch_json_SOURCES = tests/unit/http/check_fetch_json.c
tests_unit_check_fetch_json_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
tests_unit_check_fetch_json_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_fetch_json_LDADD = libpulsehttp.a libpulsekafka.a libpulsestore_hooks.a libpulsecommon_hooks.a $(JANSSON_LIBS) $(CHECK_LDADD)

# The layers' settings tables against conf/pulse.conf and docs/Configuration.md
# (read from $(srcdir) through PULSE_SRCDIR).
check_PROGRAMS += tests/unit/check_settings
TESTS += tests/unit/check_settings
tests_unit_check_settings_SOURCES = tests/unit/http/check_settings.c
tests_unit_check_settings_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
tests_unit_check_settings_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_settings_LDADD = libpulsehttp.a libpulsekafka.a libpulsebroker_hooks.a libpulsestore_hooks.a libpulsecommon_hooks.a $(JANSSON_LIBS) \
	$(CHECK_LDADD)

# CORS origins and gzip'ed answers (cors.h, encode.h).
check_PROGRAMS += tests/unit/check_browser
TESTS += tests/unit/check_browser
tests_unit_check_browser_SOURCES = tests/unit/http/check_browser.c
tests_unit_check_browser_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS)
tests_unit_check_browser_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_browser_LDADD = libpulsehttp.a libpulsecommon_hooks.a $(ZLIB_LIBS) $(CHECK_LDADD)

# The compiled-in files and their routes (embed.h, router.h).
check_PROGRAMS += tests/unit/check_embed
TESTS += tests/unit/check_embed
tests_unit_check_embed_SOURCES = tests/unit/http/check_embed.c
tests_unit_check_embed_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_embed_LDADD = libpulsehttp.a libpulsecommon_hooks.a $(CHECK_LDADD)

# Per-record publish results over a fake backend (the real HTTP server).
check_PROGRAMS += tests/unit/check_publish_results
TESTS += tests/unit/check_publish_results
tests_unit_check_publish_results_SOURCES = tests/unit/http/check_publish_results.c
tests_unit_check_publish_results_CPPFLAGS = $(AM_CPPFLAGS) $(MHD_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_check_publish_results_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_publish_results_LDADD = $(PULSE_HTTP_HOOKS_LIBS) $(CHECK_LDADD)

# The open connections the server tells its broker (broker.h
# pulse_broker_note_clients), over a fake backend.
check_PROGRAMS += tests/unit/check_note_clients
TESTS += tests/unit/check_note_clients
tests_unit_check_note_clients_SOURCES = tests/unit/http/check_note_clients.c
tests_unit_check_note_clients_CPPFLAGS = $(AM_CPPFLAGS) $(MHD_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_check_note_clients_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_note_clients_LDADD = $(PULSE_HTTP_HOOKS_LIBS) $(CHECK_LDADD)

# The slow-client registry's wake-ups (conns.h).
check_PROGRAMS += tests/unit/check_conns
TESTS += tests/unit/check_conns
tests_unit_check_conns_SOURCES = tests/unit/http/check_conns.c
tests_unit_check_conns_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_conns_LDADD = libpulsehttp.a libpulsecommon_hooks.a $(CHECK_LDADD)

# The token buckets of [limits] (ratelimit.h).
check_PROGRAMS += tests/unit/check_ratelimit
TESTS += tests/unit/check_ratelimit
tests_unit_check_ratelimit_SOURCES = tests/unit/http/check_ratelimit.c
tests_unit_check_ratelimit_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_ratelimit_LDADD = libpulsehttp.a libpulsecommon_hooks.a $(CHECK_LDADD)

# Positions by name and time (positions.h).
check_PROGRAMS += tests/unit/check_positions
TESTS += tests/unit/check_positions
tests_unit_check_positions_SOURCES = tests/unit/http/check_positions.c
tests_unit_check_positions_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
tests_unit_check_positions_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_positions_LDADD = libpulsehttp.a libpulsekafka.a libpulsebroker_hooks.a libpulsestore_hooks.a \
	libpulsecommon_hooks.a $(JANSSON_LIBS) $(CHECK_LDADD)

# Bearer tokens, grants and the route table's grants (auth.h, router.h).
check_PROGRAMS += tests/unit/check_auth
TESTS += tests/unit/check_auth
tests_unit_check_auth_SOURCES = tests/unit/http/check_auth.c
tests_unit_check_auth_CPPFLAGS = $(AM_CPPFLAGS) $(GNUTLS_CFLAGS)
tests_unit_check_auth_CFLAGS = $(TEST_CFLAGS)
# (The broker's name rule checks grant patterns: the whole stack links in.)
tests_unit_check_auth_LDADD = $(PULSE_HTTP_HOOKS_LIBS) $(CHECK_LDADD)
