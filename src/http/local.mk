# SPDX-License-Identifier: MIT
# src/http: the HTTP gateway (libpulsehttp.a) and the pulsed program (its unit
# tests are listed in tests/unit/http/local.mk). api/openapi.yaml and the
# dashboard under web/ are compiled into the library as byte arrays
# (scripts/embed.sh), so GET /openapi.yaml and GET / serve exactly the files
# of the build.
noinst_LIBRARIES += libpulsehttp.a
libpulsehttp_a_SOURCES = \
	src/http/async.c \
	src/http/auth.c src/http/auth.h src/http/auth_settings.c src/http/auth_settings.h \
	src/http/server_auth.c \
	src/http/budget.c src/http/budget.h \
	src/http/config.c src/http/config.h \
	src/http/conns.c src/http/conns.h \
	src/http/cors.c src/http/cors.h \
	src/http/encode.c src/http/encode.h \
	src/http/errmap.c src/http/errmap.h \
	src/http/fetch_json.c src/http/fetch_json.h \
	src/http/skips.c src/http/skips.h \
	src/http/json.c src/http/json.h \
	src/http/mhdfix.c src/http/mhdfix.h \
	src/http/request.c src/http/request.h \
	src/http/router.c src/http/router.h \
	src/http/server.c src/http/server.h src/http/server_int.h \
	src/http/server_access.c src/http/server_checks.c src/http/server_hooks.c \
	src/http/server_input.c src/http/server_mem.c src/http/server_metrics.c \
	src/http/server_reply.c src/http/server_settings.c src/http/server_settings.h \
	src/http/h_topics.c src/http/h_publish.c src/http/h_fetch.c \
	src/http/h_consumers.c src/http/h_ops.c src/http/h_static.c \
	src/http/embed.c src/http/embed.h \
	src/http/h_groups.c src/http/h_group_fetch.c \
	src/http/fastpub.c src/http/fastpub.h \
	src/http/positions.c src/http/positions.h \
	src/http/h_stream.c src/http/h_topicread.c \
	src/http/http_int.h \
	src/http/tls.c src/http/tls.h src/http/tls_settings.c src/http/tls_settings.h \
	src/http/ratelimit.c src/http/ratelimit.h src/http/server_limits.c
nodist_libpulsehttp_a_SOURCES = src/http/openapi_data.c src/http/web_data.c
libpulsehttp_a_CPPFLAGS = $(AM_CPPFLAGS) $(MHD_CFLAGS) $(JANSSON_CFLAGS) $(ZLIB_CFLAGS) $(GNUTLS_CFLAGS)
CLEANFILES += src/http/openapi_data.c src/http/web_data.c

# The dashboard: plain HTML, CSS and JavaScript, no build step. Every file
# here is served at /ui/<name> (index.html also at /); add new ones here.
PULSE_WEB_FILES = web/index.html web/app.js web/style.css web/favicon.svg
EXTRA_DIST += api/openapi.yaml $(PULSE_WEB_FILES) scripts/embed.sh

src/http/openapi_data.c: $(srcdir)/api/openapi.yaml $(srcdir)/scripts/embed.sh
	$(AM_V_GEN)$(MKDIR_P) src/http && \
	  $(SHELL) $(srcdir)/scripts/embed.sh pulse_openapi_files /openapi.yaml=$(srcdir)/api/openapi.yaml > $@-t && \
	  mv $@-t $@

# (Prerequisites found through VPATH in an out-of-tree build.)
src/http/web_data.c: $(PULSE_WEB_FILES) $(srcdir)/scripts/embed.sh
	$(AM_V_GEN)$(MKDIR_P) src/http && \
	  $(SHELL) $(srcdir)/scripts/embed.sh pulse_web_files \
	    `for f in $(PULSE_WEB_FILES); do echo "/ui/$${f#web/}=$(srcdir)/$$f"; done` > $@-t && \
	  mv $@-t $@

PULSE_HTTP_LIBS = libpulsehttp.a libpulsekafka.a libpulsebroker.a libpulsemeta.a libpulsestore.a libpulsecommon.a \
	$(MHD_LIBS) $(JANSSON_LIBS) $(LEVELDB_LIBS) $(ZLIB_LIBS) $(RDKAFKA_LIBS) $(GNUTLS_LIBS)

bin_PROGRAMS += pulsed
pulsed_SOURCES = src/main.c
pulsed_CPPFLAGS = $(AM_CPPFLAGS) $(MHD_CFLAGS) $(JANSSON_CFLAGS) $(RDKAFKA_CFLAGS) $(GNUTLS_CFLAGS)
pulsed_LDADD = $(PULSE_HTTP_LIBS)

# `make run`: build and serve in the foreground, on LISTEN (default
# 127.0.0.1:8080) with DATA_DIR (default ./data); PULSED_ARGS adds options:
#   make run LISTEN=127.0.0.1:9090 PULSED_ARGS='-c conf/pulse.conf'
# (Variables set on make's command line reach the recipe's environment.)
run: pulsed
	./pulsed --data-dir "$${DATA_DIR:-./data}" --listen "$${LISTEN:-127.0.0.1:8080}" $${PULSED_ARGS:-}
.PHONY: run
