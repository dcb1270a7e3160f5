# SPDX-License-Identifier: MIT
# bench/: benchmarks. They are programs, not tests: nothing here runs in
# `make check`; a plain `make` builds them (so a change that breaks them
# fails the build) but only `make bench*` runs them.
#
#   make bench                      storage engine vs the disk's own limits
#   make bench BENCH_ARGS=--quick   the same with small sizes (~15 s)
#   make bench-http                 pulsed over HTTP vs nginx, Redis, webdis
#   make bench-compact              compaction and a retention pass
#   make bench-streams              event streams: delivery latency, idle
#                                   streams with RSS (BENCH_STREAM_ARGS)
#   make bench-scale                many partitions: start, stop, idle cost,
#                                   /metrics and /v1/topics (BENCH_SCALE_ARGS)
#   make bench-compress             stored compression (zlib) against none
#                                   on JSON events (BENCH_COMPRESS_ARGS)
#
# BENCH_DIR is where the scratch data goes (a mkdtemp() directory below it,
# removed at the end). Keep it off the source tree.
noinst_PROGRAMS += bench/bench_storage
bench_bench_storage_SOURCES = bench/bench_storage.c
bench_bench_storage_LDADD = libpulsestore.a libpulsecommon.a -lm

EXTRA_DIST += bench/http_bench.sh bench/wrk_bench.lua bench/publish_ab.sh bench/group_bench.py bench/group_calls.py bench/kafka_bench.sh bench/tls_bench.py bench/stream_bench.py \
	bench/request_mix.py bench/scale_bench.py bench/compress_bench.py
EXTRA_DIST += bench/json_mix.py
EXTRA_DIST += bench/publish_cg.py bench/benchlib.py bench/publish_tail.py

# Compaction throughput and memory, and one retention pass over 10,000
# segments (JSON lines; see docs/Performance.md).
noinst_PROGRAMS += bench/bench_compact
bench_bench_compact_SOURCES = bench/bench_compact.c
bench_bench_compact_LDADD = libpulsestore.a libpulsecommon.a

BENCH_DIR = /tmp
BENCH_ARGS =
BENCH_HTTP_ARGS =
BENCH_STREAM_ARGS =
BENCH_SCALE_ARGS =

bench: bench/bench_storage$(EXEEXT)
	./bench/bench_storage --dir "$(BENCH_DIR)" $(BENCH_ARGS)

# Builds nothing beyond the broker and bench_storage (for the bare disk
# loops); the script installs wrk, nginx, Redis and webdis when missing.
bench-http: bench/bench_storage$(EXEEXT) $(bin_PROGRAMS)
	BENCH_DIR="$(BENCH_DIR)" PULSE_BUILDDIR="$(abs_top_builddir)" \
	  $(SHELL) $(srcdir)/bench/http_bench.sh $(BENCH_HTTP_ARGS)

bench-compact: bench/bench_compact$(EXEEXT)
	./bench/bench_compact --dir "$(BENCH_DIR)"

bench-streams: $(bin_PROGRAMS)
	PULSE_BUILDDIR="$(abs_top_builddir)" python3 $(srcdir)/bench/stream_bench.py --dir "$(BENCH_DIR)" \
	  $(BENCH_STREAM_ARGS)

# 4,000 and 10,000 partitions by default (a few minutes; docs/Performance.md
# "Many partitions").
bench-scale: $(bin_PROGRAMS)
	PULSE_BUILDDIR="$(abs_top_builddir)" python3 $(srcdir)/bench/scale_bench.py --dir "$(BENCH_DIR)" \
	  $(BENCH_SCALE_ARGS)

.PHONY: bench bench-http bench-compact bench-streams bench-scale

# Stored compression: bytes on disk, publish and fetch CPU per request with
# and without it (docs/Performance.md "Stored compression").
BENCH_COMPRESS_ARGS =
.PHONY: bench-compress
bench-compress: $(bin_PROGRAMS)
	python3 $(srcdir)/bench/compress_bench.py --builddir "$(abs_top_builddir)" --dir "$(BENCH_DIR)" \
	  $(BENCH_COMPRESS_ARGS)
