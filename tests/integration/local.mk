# SPDX-License-Identifier: MIT
# tests/integration: black-box tests of the real pulsed binary over HTTP.
# Each script starts its own pulsed from $(abs_top_builddir) on a free port
# with a private mkdtemp() data directory (pulsetest.py), exits 0/1/77, and
# runs through PY_LOG_COMPILER.  They need pulsed built first.
#
# To add a test: write tests/integration/NN_<what>.py on pulsetest.py (its
# main() runs every test_* function) and add it to INTEGRATION_TESTS below in
# number order.
INTEGRATION_TESTS = \
	tests/integration/01_no_test_hooks.sh \
	tests/integration/10_topics.py \
	tests/integration/20_publish.py \
	tests/integration/21_publish_after.py \
	tests/integration/30_fetch.py \
	tests/integration/40_cursors.py \
	tests/integration/42_admin_async.py \
	tests/integration/45_groups.py \
	tests/integration/46_group_workers.py \
	tests/integration/47_group_examples.py \
	tests/integration/48_group_review.py \
	tests/integration/49_group_gaps.py \
	tests/integration/50_ops.py \
	tests/integration/55_start_errors.py \
	tests/integration/57_cors.py \
	tests/integration/58_responses.py \
	tests/integration/59_new_user.py \
	tests/integration/57_dashboard_files.py \
	tests/integration/60_bad_input.py \
	tests/integration/61_json_text.py \
	tests/integration/62_http_smuggling.py \
	tests/integration/63_auth.py \
	tests/integration/64_slow_clients.py \
	tests/integration/66_memory_budget.py \
	tests/integration/67_tls.py \
	tests/integration/68_rate_limits.py \
	tests/integration/70_restart.py \
	tests/integration/72_meta_loss.py \
	tests/integration/80_crash_kill9.py \
	tests/integration/85_torn_tail.py \
	tests/integration/86_corruption.py \
	tests/integration/87_disk_full.py \
	tests/integration/89_idempotency.py \
	tests/integration/88_descriptors.py \
	tests/integration/90_longpoll.py \
	tests/integration/91_kafka_suite.sh \
	tests/integration/92_kafka.py \
	tests/integration/91_streams.py \
	tests/integration/92_topic_reads.py \
	tests/integration/93_fetch_vs_retention.py \
	tests/integration/94_skipped_everywhere.py \
	tests/integration/93_scale_views.py \
	tests/integration/93_compression.py \
	tests/integration/94_kafka_groups.py \
	tests/integration/95_sendfile.py \
	tests/integration/96_examples.py \
	tests/integration/99_openapi_routes.py

TESTS += $(INTEGRATION_TESTS)

# pulsed with the test hooks (src/common/debug.h): pulsetest.py runs it
# instead of ./pulsed for a server whose environment sets a PULSE_FAILPOINT*
# variable; every other test runs the release ./pulsed. 01_no_test_hooks.sh
# proves the release binary has none.
check_PROGRAMS += tests/pulsed-hooks
tests_pulsed_hooks_SOURCES = src/main.c
tests_pulsed_hooks_CPPFLAGS = $(AM_CPPFLAGS) $(MHD_CFLAGS) $(JANSSON_CFLAGS) $(RDKAFKA_CFLAGS) $(HOOKS_CPPFLAGS)
tests_pulsed_hooks_LDADD = $(PULSE_HTTP_HOOKS_LIBS)
EXTRA_DIST += $(INTEGRATION_TESTS) tests/integration/pulsetest.py tests/integration/grouptest.py \
	docs/API.md \
	examples/walkthrough.sh examples/producer.py examples/consumer.py examples/decode_raw.py \
	examples/group_consumer.mjs examples/replay_topic.py
