#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# publish_ab.sh - two builds of pulsed side by side on the publish path,
# interleaved in rounds so that both meet the same disk and the same
# neighbours: the bare write+fdatasync loop (bench_storage), then build A,
# then build B, each a one-record publish at CONNS connections into a
# fresh data directory under DIR (127.0.0.1 only; every pulsed is stopped
# before the next starts). Per run it prints requests/s, p50/p99 (wrk),
# the server's CPU per request (utime+stime from /proc/<pid>/stat), its
# context switches per request (all threads, /proc/<pid>/task/*/status)
# and the fdatasyncs per request (pulse_fsync_total from /metrics).
#
# usage: publish_ab.sh BUILD_A BUILD_B [ROUNDS] [SECONDS] [CONNS] [TOPIC_PARTITIONS] [RECORDS] [PARTITION_FIELD]
#   env: DIR (default /tmp; /dev/shm takes the disk out and leaves the
#        software path), PULSED_OPTS_A / PULSED_OPTS_B (extra -o options)
set -u
a=${1:?build A}; b=${2:?build B}; rounds=${3:-3}; secs=${4:-3}; conns=${5:-1}
parts=${6:-1}; nrec=${7:-1}; pfield=${8:-0}
dir=${DIR:-/tmp}
lua=$(cd "$(dirname "$0")" && pwd)/wrk_bench.lua

run() { # BUILD OPTS
    local d port pid t0 t1 x0 x1 f0 f1 out req us th=2
    d=$(mktemp -d "$dir/pulse-ab-XXXXXX") || return 1
    port=$((20000 + RANDOM % 10000))
    # shellcheck disable=SC2086
    "$1/pulsed" --data-dir "$d/data" --listen "127.0.0.1:$port" -o storage.sync-mode=every-write \
        -o log.level=warn $2 >"$d/log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" && break; sleep 0.1; done
    curl -s -o /dev/null -H 'Content-Type: application/json' \
        -d "{\"name\":\"ab\",\"partitions\":$parts}" "http://127.0.0.1:$port/v1/topics"
    ctx() { cat /proc/"$pid"/task/*/status 2>/dev/null | awk '/^(non)?voluntary_ctxt_switches/ { s += $2 } END { print s }'; }
    cpu() { sed 's/^.*) //' /proc/"$pid"/stat | awk '{ print $12 + $13 }'; }
    fsy() { curl -s "http://127.0.0.1:$port/metrics" | awk '/^pulse_fsync_total / { print $2 }'; }
    x0=$(ctx); t0=$(cpu); f0=$(fsy)
    [ "$conns" -lt 2 ] && th=1
    out=$(BENCH_MODE=post BENCH_PATH=/v1/topics/ab/records BENCH_RECORDS=$nrec BENCH_PARTITIONS=$pfield \
        timeout $((secs + 30)) wrk -t$th -c"$conns" -d"${secs}s" --timeout 10s -s "$lua" "http://127.0.0.1:$port" 2>&1 |
        grep '^{"requests"')
    x1=$(ctx); t1=$(cpu); f1=$(fsy)
    kill "$pid"; wait "$pid" 2>/dev/null
    rm -rf "$d"
    req=$(echo "$out" | sed 's/.*"requests":\([0-9]*\).*/\1/'); us=$(echo "$out" | sed 's/.*"duration_us":\([0-9]*\).*/\1/')
    awk -v r="$req" -v u="$us" -v c0="$t0" -v c1="$t1" -v x0="$x0" -v x1="$x1" -v f0="${f0:-0}" -v f1="${f1:-0}" \
        -v tck="$(getconf CLK_TCK)" -v p50="$(echo "$out" | sed 's/.*"p50_us":\([0-9]*\).*/\1/')" \
        -v p99="$(echo "$out" | sed 's/.*"p99_us":\([0-9]*\).*/\1/')" 'BEGIN {
        if (r == 0) { print "no requests"; exit }
        printf "req_s=%.0f p50_us=%s p99_us=%s cpu_us_per_req=%.1f ctxsw_per_req=%.2f fsyncs_per_req=%.2f\n",
            r / (u / 1e6), p50, p99, (c1 - c0) / tck * 1e6 / r, (x1 - x0) / r, (f1 - f0) / r }'
}

loop() {
    "$a/bench/bench_storage" --dir "$dir" --only fdatasync --rounds 1 --seconds 2 2>/dev/null | grep '"bare_' |
        sed 's/.*"ops_s":\([0-9.]*\).*"p99_us":\([0-9]*\).*/ops_s=\1 p99_us=\2/'
}

for r in $(seq 1 "$rounds"); do
    echo "round $r $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    [ -x "$a/bench/bench_storage" ] && echo "  loop $(loop)"
    echo "  A    $(run "$a" "${PULSED_OPTS_A:-}")"
    echo "  B    $(run "$b" "${PULSED_OPTS_B:-}")"
done
