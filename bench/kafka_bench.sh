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
# Both pulsed processes run side by side; each workload runs against the
# local one, then the Kafka one (so both rows of a pair see the same machine
# load), and each row has pulsed's own CPU per request (utime + stime from
# /proc). The load average is printed before and after.
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
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
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
pids=
cleanup() {
    for p in $pids; do
        kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
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

# start NAME ARGS...: starts pulsed, sets its port and pid into port_NAME, pid_NAME
start() {
    local name=$1 port p
    shift
    port=$(free_port)
    "$pulsed" --data-dir "$work/data-$name" --listen "127.0.0.1:$port" -o log.level=error "$@" \
        2>"$work/$name.stderr" &
    p=$!
    pids="$pids $p"
    eval "port_$name=$port pid_$name=$p"
    for _ in $(seq 1 100); do
        curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return 0
        sleep 0.1
    done
    echo "kafka_bench: pulsed ($name) did not become ready" >&2; cat "$work/$name.stderr" >&2; exit 1
}

# CPU seconds (user + system) pulsed PID used so far, in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# Both servers run side by side and every workload runs on one, then on the
# other, so both see the same machine load; CPU us/req is pulsed's own
# (utime + stime over the requests wrk counted).
start local -o storage.sync-mode=every-write
start kafka -o broker.backend=kafka -o kafka.mock-brokers=3
hz=$(getconf CLK_TCK)
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| workload | backend | requests/s | records/s | p50 ms | p99 ms | server CPU us/req | errors |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
python3 -c 'print("{\"records\":[" + ",".join(["{\"value\":\"" + "abcdefghijklmnop" * 16 + "\"}"] * 1000) + "]}")' \
    > "$work/body.json"
for name in local kafka; do
    eval "base=http://127.0.0.1:\$port_$name"
    for t in bench fetch; do
        curl -sf -X POST "$base/v1/topics" -H 'Content-Type: application/json' -d "{\"name\":\"$t\"}" >/dev/null
    done
    for _ in $(seq 1 10); do
        curl -sf -X POST "$base/v1/topics/fetch/records" -H 'Content-Type: application/json' \
            --data-binary @"$work/body.json" >/dev/null || { echo "kafka_bench: prefill failed" >&2; exit 1; }
    done
done
row() { # WORKLOAD RECORDS_PER_REQUEST CONNS VAR=VALUE...
    local w=$1 n=$2 c=$3 name label base p t0 t1 r
    shift 3
    for name in local kafka; do
        label=$name
        [ "$name" = kafka ] && label=kafka-mock
        eval "base=http://127.0.0.1:\$port_$name p=\$pid_$name"
        t0=$(ticks "$p")
        r=$(run "$w" "$c" "$base" "$@")
        t1=$(ticks "$p")
        printf '| %s | %s | %s | %s | %.2f | %.2f | %.0f | %s |\n' "$w" "$label" \
            $(echo "$r" | awk -v n="$n" -v t0="$t0" -v t1="$t1" -v hz="$hz" -v d="$dur" \
                '{printf "%s %d %f %f %f %s", $1, $1 * n, $2 / 1000, $3 / 1000, ($1 > 0 ? (t1 - t0) / hz * 1e6 / ($1 * d) : 0), $4}')
    done
}
row publish_1x256_c1 1 1 BENCH_MODE=post BENCH_PATH=/v1/topics/bench/records BENCH_RECORDS=1
row publish_1x256_c8 1 8 BENCH_MODE=post BENCH_PATH=/v1/topics/bench/records BENCH_RECORDS=1
row publish_100x256_c8 100 8 BENCH_MODE=post BENCH_PATH=/v1/topics/bench/records BENCH_RECORDS=100
row fetch_json_100_c1 100 1 BENCH_MODE=fetch BENCH_OFFSETS=9900 \
    "BENCH_PATH=/v1/topics/fetch/partitions/0/records?max_records=100&offset="
row fetch_json_100_c8 100 8 BENCH_MODE=fetch BENCH_OFFSETS=9900 \
    "BENCH_PATH=/v1/topics/fetch/partitions/0/records?max_records=100&offset="
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
