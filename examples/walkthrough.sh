#!/bin/sh
# SPDX-License-Identifier: MIT
#
# A tour of the Pulse HTTP API with nothing but curl: create a topic, publish
# JSON and binary records, fetch them as JSON and as raw batches, commit a
# consumer cursor and read the consumer's lag.
#
#   make run                      # in another terminal: pulsed on 127.0.0.1:8080
#   sh examples/walkthrough.sh
#
# PULSE_URL (default http://127.0.0.1:8080), PULSE_TOPIC and PULSE_CONSUMER
# override the address and the names.  Running it twice is fine: an existing
# topic is reused.
set -eu

PULSE_URL=${PULSE_URL:-http://127.0.0.1:8080}
TOPIC=${PULSE_TOPIC:-walkthrough}
CONSUMER=${PULSE_CONSUMER:-walkthrough-reader}

step() {
    printf '\n== %s\n' "$*"
}

# call EXPECTED_CODES CURL_ARGS...: run curl, print the body, and stop the
# script unless the HTTP status is one of EXPECTED_CODES (e.g. "200" or
# "201 409").
call() {
    expected=$1
    shift
    out=$(curl -sS -w '\n%{http_code}' "$@")
    code=$(printf '%s\n' "$out" | tail -n 1)
    body=$(printf '%s\n' "$out" | sed '$d')
    [ -n "$body" ] && printf '%s\n' "$body"
    for c in $expected; do
        [ "$code" = "$c" ] && return 0
    done
    echo "unexpected HTTP status $code (wanted $expected)" >&2
    exit 1
}

step "is the broker up?"
call 200 "$PULSE_URL/readyz"

step "create topic $TOPIC with 2 partitions (409 if it already exists)"
call "201 409" -X POST "$PULSE_URL/v1/topics" \
    -H 'Content-Type: application/json' \
    -d "{\"name\": \"$TOPIC\", \"partitions\": 2}"

step "publish three JSON records to partition 0"
call 200 -X POST "$PULSE_URL/v1/topics/$TOPIC/records" \
    -H 'Content-Type: application/json' \
    -d '{"records": [
          {"key": "user-42", "value": {"sku": "a1", "qty": 2}, "partition": 0},
          {"value": "plain text", "headers": {"source": "walkthrough"}, "partition": 0},
          {"key": "user-42", "value_base64": "AAEC/w==", "partition": 0}
        ]}'

step "publish raw bytes (octet-stream) with a key"
printf 'hello from printf\n' | call 200 -X POST \
    "$PULSE_URL/v1/topics/$TOPIC/records?key=greeting&partition=0" \
    -H 'Content-Type: application/octet-stream' --data-binary @-

step "fetch partition 0 as JSON"
call 200 "$PULSE_URL/v1/topics/$TOPIC/partitions/0/records?offset=0&max_records=10"

step "fetch partition 0 as raw batches (hex dump of the first bytes)"
curl -sS "$PULSE_URL/v1/topics/$TOPIC/partitions/0/records?offset=0&format=raw" | od -A d -t x1 | head -n 4

step "where does the next fetch start? (Pulse-Next-Offset header)"
next=$(curl -sS -D - -o /dev/null "$PULSE_URL/v1/topics/$TOPIC/partitions/0/records?max_records=2" |
    tr -d '\r' | sed -n 's/^[Pp]ulse-[Nn]ext-[Oo]ffset: *//p')
echo "next offset after two records: $next"

step "commit cursor of $CONSUMER to $next"
call 200 -X PUT "$PULSE_URL/v1/consumers/$CONSUMER/cursors/$TOPIC/0" \
    -H 'Content-Type: application/json' -d "{\"offset\": $next}"

step "consumer lag on partition 0"
call 200 "$PULSE_URL/v1/consumers/$CONSUMER/cursors/$TOPIC/0"

step "fetch again, starting at the consumer's cursor"
call 200 "$PULSE_URL/v1/topics/$TOPIC/partitions/0/records?consumer=$CONSUMER"

step "all cursors of $CONSUMER"
call 200 "$PULSE_URL/v1/consumers/$CONSUMER/cursors"

step "topic statistics"
call 200 "$PULSE_URL/v1/topics/$TOPIC"

echo
echo "walkthrough done"
