#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# kafka_bench.sh - publish and fetch through the Kafka backend next to the
# local backend, same pulsed binary, same machine, same wrk script.
#
# The Kafka backend runs over librdkafka's in-process MOCK cluster
# (-o kafka.mock-brokers=3): its brokers live inside pulsed, keep records in
# memory, and never write to disk, and its sockets lack TCP_NODELAY. The
# numbers show the gateway's own cost (HTTP, librdkafka, delivery reports,
# the fetch pool); they are not what a real cluster gives (docs/Scaling.md).
# The local backend runs with storage.sync-mode=every-write (an fdatasync
# per acknowledged publish) as in bench/http_bench.sh.
#
# What runs, for each backend (everything on 127.0.0.1, stopped by the EXIT
# trap, every load bounded by wrk -d):
#   publish 1 x 256 B per request at 1 and 8 connections
#   publish 100 x 256 B per request at 8 connections
#   JSON fetch of 100 records at random offsets at 1 and 8 connections
#     (topic prefilled with 10,000 records of 256 B: 2.5 MB, under the
#     mock's retention of about 5 MB per partition)
#
# usage: kafka_bench.sh [--seconds N]      (default 5)
#   env: PULSE_BUILDDIR (where pulsed is; default .), BENCH_DIR (default /tmp)
set -u
dur=5
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) shift; dur=${1:?--seconds needs a value} ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "kafka_bench: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
here=$(cd "$(dirname "$0")" && pwd)
lua=$here/wrk_bench.lua
pulsed=${PULSE_BUILDDIR:-.}/pulsed
command -v wrk >/dev/null || { echo "kafka_bench: wrk is needed" >&2; exit 2; }
[ -x "$pulsed" ] || { echo "kafka_bench: $pulsed is not built" >&2; exit 2; }
work=$(mktemp -d "${BENCH_DIR:-/tmp}/kafka-bench.XXXXXX")
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# run NAME CONNS URL VAR=VALUE...: prints "requests/s p50_us p99_us errors"
run() {
    local conns=$2 url=$3 threads=2 line
    shift 3
    [ "$conns" -lt 2 ] && threads=1
    line=$(env "$@" timeout $((dur + 30)) wrk -t"$threads" -c"$conns" -d"${dur}s" --timeout 10s -s "$lua" "$url" 2>&1 |
           grep '^{"requests"' | tail -1)
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); e=sum(v for k,v in d.items() if k.startswith("err_"));
print("%.0f %d %d %d" % (d["requests"] / (d["duration_us"] / 1e6), d["p50_us"], d["p99_us"], e))' "$line"
}

start() {
    port=$(free_port)
    "$pulsed" --data-dir "$work/data-$1" --listen "127.0.0.1:$port" -o log.level=error "${@:2}" 2>"$work/$1.stderr" &
    pid=$!
    for _ in $(seq 1 100); do
        curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return 0
        sleep 0.1
    done
    echo "kafka_bench: pulsed ($1) did not become ready" >&2; cat "$work/$1.stderr" >&2; exit 1
}

echo "| backend | workload | requests/s | records/s | p50 ms | p99 ms | errors |"
echo "|---|---|---:|---:|---:|---:|---:|"
for backend in local kafka-mock; do
    if [ "$backend" = local ]; then
        start local -o storage.sync-mode=every-write
    else
        start kafka -o broker.backend=kafka -o kafka.mock-brokers=3
    fi
    base="http://127.0.0.1:$port"
    for t in bench fetch; do
        curl -sf -X POST "$base/v1/topics" -H 'Content-Type: application/json' -d "{\"name\":\"$t\"}" >/dev/null
    done
    row() { # WORKLOAD RECORDS_PER_REQUEST CONNS VAR=VALUE...
        local w=$1 n=$2 c=$3 r
        shift 3
        r=$(run "$w" "$c" "$base" "$@")
        set -- $r
        printf '| %s | %s | %s | %s | %.2f | %.2f | %s |\n' "$backend" "$w" "$1" "$(( $1 * n ))" \
            "$(echo "$2 / 1000" | bc -l)" "$(echo "$3 / 1000" | bc -l)" "$4"
    }
    row publish_1x256_c1 1 1 BENCH_MODE=post BENCH_PATH=/v1/topics/bench/records BENCH_RECORDS=1
    row publish_1x256_c8 1 8 BENCH_MODE=post BENCH_PATH=/v1/topics/bench/records BENCH_RECORDS=1
    row publish_100x256_c8 100 8 BENCH_MODE=post BENCH_PATH=/v1/topics/bench/records BENCH_RECORDS=100
    python3 -c 'print("{\"records\":[" + ",".join(["{\"value\":\"" + "abcdefghijklmnop" * 16 + "\"}"] * 1000) + "]}")' \
        > "$work/body.json"
    for _ in $(seq 1 10); do
        curl -sf -X POST "$base/v1/topics/fetch/records" -H 'Content-Type: application/json' \
            --data-binary @"$work/body.json" >/dev/null || { echo "kafka_bench: prefill failed" >&2; exit 1; }
    done
    row fetch_json_100_c1 100 1 BENCH_MODE=fetch BENCH_OFFSETS=9900 \
        "BENCH_PATH=/v1/topics/fetch/partitions/0/records?max_records=100&offset="
    row fetch_json_100_c8 100 8 BENCH_MODE=fetch BENCH_OFFSETS=9900 \
        "BENCH_PATH=/v1/topics/fetch/partitions/0/records?max_records=100&offset="
    kill "$pid"; wait "$pid" 2>/dev/null; pid=
done
