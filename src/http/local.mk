# SPDX-License-Identifier: MIT
# src/http: the HTTP gateway (libpulsehttp.a) and the pulsed program (its unit
# tests are listed in tests/unit/http/local.mk). api/openapi.yaml is compiled into the library as a byte array
# so GET /openapi.yaml serves exactly the file of the build.
noinst_LIBRARIES += libpulsehttp.a
libpulsehttp_a_SOURCES = \
	src/http/async.c \
	src/http/budget.c src/http/budget.h \
	src/http/config.c src/http/config.h \
	src/http/conns.c src/http/conns.h \
	src/http/errmap.c src/http/errmap.h \
	src/http/fetch_json.c src/http/fetch_json.h \
	src/http/json.c src/http/json.h \
	src/http/mhdfix.c src/http/mhdfix.h \
	src/http/request.c src/http/request.h \
	src/http/router.c src/http/router.h \
	src/http/server.c src/http/server.h src/http/server_int.h \
	src/http/server_access.c src/http/server_checks.c src/http/server_hooks.c \
	src/http/server_input.c src/http/server_mem.c src/http/server_metrics.c \
	src/http/server_reply.c src/http/server_settings.c src/http/server_settings.h \
	src/http/h_topics.c src/http/h_publish.c src/http/h_fetch.c \
	src/http/h_consumers.c src/http/h_ops.c \
	src/http/fastpub.c src/http/fastpub.h \
	src/http/http_int.h src/http/openapi.h
nodist_libpulsehttp_a_SOURCES = src/http/openapi_data.c
libpulsehttp_a_CPPFLAGS = $(AM_CPPFLAGS) $(MHD_CFLAGS) $(JANSSON_CFLAGS) $(ZLIB_CFLAGS)
CLEANFILES += src/http/openapi_data.c
EXTRA_DIST += api/openapi.yaml

# od and sed only (no xxd on the build hosts). The array gets one extra NUL
# so it is never empty; the length excludes it.
src/http/openapi_data.c: $(srcdir)/api/openapi.yaml
	$(AM_V_GEN)$(MKDIR_P) src/http && { \
	  echo '/* Generated from api/openapi.yaml by src/http/local.mk. Do not edit. */'; \
	  echo '#include "http/openapi.h"'; \
	  echo 'const unsigned char pulse_openapi_yaml[] = {'; \
	  od -An -v -tx1 $(srcdir)/api/openapi.yaml | sed -e 's/[0-9a-f][0-9a-f]/0x&,/g'; \
	  echo '0x00};'; \
	  echo "const size_t pulse_openapi_yaml_len = `wc -c < $(srcdir)/api/openapi.yaml`;"; \
	} > $@-t && mv $@-t $@

PULSE_HTTP_LIBS = libpulsehttp.a libpulsebroker.a libpulsemeta.a libpulsestore.a libpulsecommon.a \
	$(MHD_LIBS) $(JANSSON_LIBS) $(LEVELDB_LIBS) $(ZLIB_LIBS)

bin_PROGRAMS += pulsed
pulsed_SOURCES = src/main.c
pulsed_CPPFLAGS = $(AM_CPPFLAGS) $(MHD_CFLAGS) $(JANSSON_CFLAGS)
pulsed_LDADD = $(PULSE_HTTP_LIBS)

# `make run`: build and serve on 127.0.0.1:8080 with ./data, in the foreground.
run: pulsed
	./pulsed --data-dir ./data --listen 127.0.0.1:8080
.PHONY: run
