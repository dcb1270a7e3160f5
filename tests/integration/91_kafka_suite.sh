#!/bin/sh
# SPDX-License-Identifier: MIT
# The black-box suite against the Kafka backend: the scripts below run again
# with PULSE_TEST_BACKEND=kafka, which makes pulsetest.py start every pulsed
# with -o broker.backend=kafka -o kafka.mock-brokers=3 (librdkafka's mock
# cluster inside pulsed). Tests the mock or the backend cannot serve skip
# themselves with the reason (local_only / exit_unless_local in the
# scripts; docs/Scaling.md "Tests"). The rest of the suite (crash, restart,
# damaged files, full disk) is about the local backend's storage and skips
# as a whole; run any of it by hand with PULSE_TEST_BACKEND=kafka. The
# table "What the shared suite checks on Kafka" in docs/Scaling.md lists
# every script and every test skipped here, with the reason.
# Exit 0 when every script passed (or skipped), 1 otherwise.
dir=$(dirname "$0")
PULSE_TEST_BACKEND=kafka
export PULSE_TEST_BACKEND
rc=0
for t in 10_topics 20_publish 30_fetch 40_cursors 45_groups 46_group_workers 47_group_examples 48_group_review \
         49_group_gaps 50_ops 57_cors 57_dashboard_files 58_responses 59_new_user \
         60_bad_input 61_json_text 62_http_smuggling 63_auth 64_slow_clients 66_memory_budget 67_tls \
         68_rate_limits 90_longpoll 91_streams 92_topic_reads 93_scale_views 96_examples 99_openapi_routes; do
    python3 "$dir/$t.py"
    st=$?
    if [ $st -ne 0 ] && [ $st -ne 77 ]; then
        echo "FAIL $t.py against the Kafka backend (exit $st)"
        rc=1
    else
        echo "PASS $t.py against the Kafka backend (exit $st)"
    fi
done
exit $rc
