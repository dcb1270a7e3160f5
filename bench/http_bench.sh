#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# http_bench.sh - pulsed over HTTP next to the servers it should be judged
# against, all measured in one run on this machine.
#
# What runs (everything on 127.0.0.1 only, every server started here with
# its data in a mktemp directory under $BENCH_DIR and stopped by the EXIT
# trap; every load loop is bounded by wrk -d or by timeout):
#   disk      bench/bench_storage --only fdatasync / --only seqwrite: the
#             bare write+fdatasync rate and the bare sequential bandwidth
#   nginx     POST answered by "return 204" (the HTTP ceiling), and Range
#             requests of 1 MiB over a hard link to pulsed's own segment
#             file with sendfile on (the raw-fetch ceiling on the same bytes)
#   redis     redis-server with appendonly yes + appendfsync always:
#             redis-benchmark XADD (native peer) and XRANGE COUNT 100
#   webdis    the same Redis behind webdis: GET /XADD/s/*/f/<256 B>
#             (the HTTP-gateway peer)
#   pulsed    every-write sync; publish 1 and 100 records of 256 B per
#             request at 1/8/32 connections; publish into a topic of 64
#             partitions (one record a request at 64 connections, and 64
#             records a request, one per partition, at 8 connections); raw
#             fetch of 1 MiB and of one ~32 KiB batch at random offsets of a
#             >= 64 MiB log at 1/8 connections (nginx serves the same
#             number of bytes by Range); JSON fetch of 100 records at 1/8
#             connections
#
# Server CPU: every row also carries the CPU seconds the server under test
# used during its run (utime + stime of the process and its threads, from
# /proc/<pid>/stat, before and after; nginx: master and workers; webdis:
# webdis alone, not the Redis behind it) divided by the requests it
# answered: server_cpu_us_per_req. On a shared machine it is steadier
# than the rate.
#
# Each pulsed figure is measured next to the limit it is divided by: the
# bare fdatasync loop right before and after the one-connection publish,
# webdis / Redis / nginx right around the 32-connection publish, the bare
# sequential write around the 100-record publish, nginx before each raw
# fetch and XRANGE before each JSON fetch. The disk of a shared VM drifts by
# several times within minutes, so a limit measured once at the start would
# make the ratios meaningless.
#
# Output: one JSON object per line (bench, workload, mb_s, ops_s, ratio_to,
# ratio, target, ...) and a markdown table at the end. Publish rows count
# records in ops_s and payload bytes in mb_s; everything else counts HTTP
# requests (redis-benchmark: commands) and response bytes.
#
# usage: http_bench.sh [--quick] [--seconds N] [--no-pulsed]
#   env: PULSE_BUILDDIR (where pulsed and bench/bench_storage are; default .)
#        BENCH_DIR (parent of the scratch directory; default $TMPDIR or /tmp)
set -u

quick=0
dur=10
no_pulsed=0
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=1; dur=3 ;;
    --seconds) shift; dur=${1:?--seconds needs a value} ;;
    --no-pulsed) no_pulsed=1 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "http_bench: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
case "$dur" in ''|*[!0-9]*) echo "http_bench: --seconds takes whole seconds" >&2; exit 2 ;; esac

here=$(cd "$(dirname "$0")" && pwd)
builddir=${PULSE_BUILDDIR:-$(pwd)}
pulsed=${PULSED:-$builddir/pulsed}
bench_storage=$builddir/bench/bench_storage
lua=$here/wrk_bench.lua
root=${BENCH_DIR:-${TMPDIR:-/tmp}}
prefill_bytes=$((64 * 1024 * 1024))
[ "$quick" = 1 ] && prefill_bytes=$((16 * 1024 * 1024))
value=$(printf 'abcdefghijklmnop%.0s' $(seq 1 16)) # 256 bytes, as in wrk_bench.lua

log() { echo "http_bench: $*" >&2; }

# ---- tools -----------------------------------------------------------------
need_install=
for c in wrk:wrk nginx:nginx-light redis-server:redis-server redis-benchmark:redis-tools \
         webdis:webdis curl:curl; do
    command -v "${c%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${c%%:*}" ] || need_install="$need_install ${c#*:}"
done
if [ -n "$need_install" ]; then
    if [ "$(id -u)" = 0 ]; then
        log "installing$need_install"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y --no-install-recommends $need_install >&2 ||
            { apt-get update >&2 && apt-get install -y --no-install-recommends $need_install >&2; } ||
            { log "cannot install$need_install"; exit 1; }
    else
        log "missing$need_install (run as root to install them)"; exit 1
    fi
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$bench_storage" ] || log "$bench_storage not built (make bench/bench_storage): no disk anchors"
if [ "$no_pulsed" = 0 ] && [ ! -x "$pulsed" ]; then
    log "$pulsed not built; measuring the anchors only"; no_pulsed=1
fi

work=$(mktemp -d "$root/pulse-httpbench-XXXXXX") || exit 1
pids=
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null; done
    for p in $pids; do
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A port below the kernel's ephemeral range (32768 and up by default): a
# port there may be the local end of someone's outgoing connection, and
# servers without SO_REUSEADDR then fail to bind it.
free_port() {
    local p
    for _ in $(seq 1 100); do
        p=$((12000 + RANDOM % 20000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
    done
    return 1
}

# wait_http URL: until the URL answers 2xx (bounded: 20 s).
wait_http() {
    for _ in $(seq 1 200); do
        case "$(curl -s -o /dev/null -w '%{http_code}' "$1")" in 2*) return 0 ;; esac
        sleep 0.1
    done
    log "no answer from $1"; return 1
}

wait_port() {
    for _ in $(seq 1 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    log "nothing listens on port $1"; return 1
}

# ---- results ---------------------------------------------------------------
rows=()
# emit WORKLOAD OPS_S MB_S RATIO_TO RATIO TARGET EXTRA_JSON
# (empty strings become null; RATIO is computed by the caller)
emit() {
    local w=$1 ops=$2 mb=$3 rto=$4 r=$5 tgt=$6 extra=${7:-}
    local j="{\"bench\":\"http\",\"workload\":\"$w\""
    j="$j,\"mb_s\":${mb:-null},\"ops_s\":${ops:-null}"
    if [ -n "$rto" ] && [ -n "$r" ]; then j="$j,\"ratio_to\":\"$rto\",\"ratio\":$r"; else j="$j,\"ratio_to\":null,\"ratio\":null"; fi
    [ -n "$tgt" ] && j="$j,\"target\":$tgt"
    echo "$j$extra}"
    local cpu
    cpu=$(echo "$extra" | jnum server_cpu_us_per_req)
    rows+=("$w|${ops:--}|${mb:--}|${rto:--}|${r:--}|${tgt:--}|${cpu:--}")
}

calc() { awk "BEGIN { printf \"%.3f\", $* }"; }
# ratio A B: A/B or empty when B is missing or zero
ratio() {
    [ -n "${1:-}" ] && [ -n "${2:-}" ] || return 0
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b }'
}
jnum() { sed -n "s/.*\"$1\":\\([-0-9.e+]*\\).*/\\1/p" | head -1; }

# cpu_ticks PID...: utime + stime (clock ticks) of the processes, all their
# threads included (fields 14 and 15 of /proc/<pid>/stat; the command name
# in field 2 may hold spaces, so count from after its closing parenthesis).
clk_tck=$(getconf CLK_TCK 2>/dev/null || echo 100)
cpu_ticks() {
    local t=0 p v
    for p in "$@"; do
        v=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{ print $12 + $13 }')
        t=$((t + ${v:-0}))
    done
    echo "$t"
}
# The processes whose CPU a row counts (set by the caller as CPU_PIDS="..."):
# nginx_pids gives the master and its workers.
nginx_pids() { echo "$nginx_pid $(pgrep -P "$nginx_pid" 2>/dev/null | tr '\n' ' ')"; }
# cpu_extra TICKS_BEFORE TICKS_AFTER REQUESTS: the JSON fields of a row.
cpu_extra() {
    local s
    [ -n "${CPU_PIDS:-}" ] && [ -n "${3:-}" ] || return 0
    s=$(calc "($2 - $1) / $clk_tck")
    echo ",\"server_cpu_s\":$s,\"server_cpu_us_per_req\":$(awk -v s="$s" -v n="$3" 'BEGIN { if (n > 0) printf "%.1f", s * 1e6 / n; else printf "null" }'),\"server_cores\":$(calc "$s / $dur")"
}

# run_wrk NAME CONNS URL [VAR=VALUE...]: sets W_REQ_S, W_MB_S, W_EXTRA.
run_wrk() {
    local name=$1 conns=$2 url=$3 threads=2 out line
    shift 3
    [ "$conns" -lt 2 ] && threads=1
    local c0 c1
    c0=$(cpu_ticks ${CPU_PIDS:-})
    out=$(env "$@" timeout $((dur + 30)) wrk -t"$threads" -c"$conns" -d"${dur}s" --timeout 10s -s "$lua" "$url" 2>&1)
    c1=$(cpu_ticks ${CPU_PIDS:-})
    line=$(printf '%s\n' "$out" | grep '^{"requests"' | tail -1)
    if [ -z "$line" ]; then
        log "wrk $name failed:"; printf '%s\n' "$out" >&2
        W_REQ_S=; W_MB_S=; W_EXTRA=",\"error\":\"wrk failed\""; return 1
    fi
    local req bytes us errs p50 p99
    req=$(echo "$line" | jnum requests); bytes=$(echo "$line" | jnum bytes)
    us=$(echo "$line" | jnum duration_us)
    errs=$(echo "$line" | awk -F'[:,}]' '{ s = 0; for (i = 1; i < NF; i++) if ($i ~ /"err_/) s += $(i + 1); print s }')
    p50=$(echo "$line" | jnum p50_us); p99=$(echo "$line" | jnum p99_us)
    W_REQ_S=$(calc "$req / ($us / 1e6)")
    W_MB_S=$(calc "$bytes / 1e6 / ($us / 1e6)")
    W_EXTRA=",\"connections\":$conns,\"wrk_threads\":$threads,\"seconds\":$dur,\"requests\":$req,\"errors\":$errs,\"p50_us\":$p50,\"p99_us\":$p99$(cpu_extra "$c0" "$c1" "$req")"
    [ "$errs" = 0 ] || log "wrk $name: $errs errors (non-2xx or socket)"
    return 0
}

# redis_bench NAME CONNS CMD...: sets R_OPS_S. Calibrates -n so that the
# run lasts about $dur seconds; timeout bounds it anyway.
redis_bench() {
    local name=$1 conns=$2 rps n
    shift 2
    rps=$(timeout 60 redis-benchmark -h 127.0.0.1 -p "$redis_port" -c "$conns" -n 2000 --csv "$@" 2>/dev/null |
          tail -1 | awk -F'","' '{ gsub(/"/, "", $2); print $2 }')
    n=$(awk -v r="${rps:-0}" -v d="$dur" 'BEGIN { n = int(r * d); if (n < 2000) n = 2000; if (n > 5000000) n = 5000000; print n }')
    local c0 c1
    c0=$(cpu_ticks "$redis_pid")
    R_OPS_S=$(timeout $((dur * 3 + 30)) redis-benchmark -h 127.0.0.1 -p "$redis_port" -c "$conns" -n "$n" --csv "$@" 2>/dev/null |
          tail -1 | awk -F'","' '{ gsub(/"/, "", $2); print $2 }')
    c1=$(cpu_ticks "$redis_pid")
    case "$R_OPS_S" in ''|*[!0-9.]*) log "redis-benchmark $name failed"; R_OPS_S= ;; esac
    R_N=$n
    R_CPU=$(CPU_PIDS=$redis_pid cpu_extra "$c0" "$c1" "$n")
}

# ---- 1. the machine and the disk's own limits --------------------------------
cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -1 | tr -d '"\\')
echo "{\"bench\":\"http\",\"workload\":\"machine\",\"mb_s\":null,\"ops_s\":null,\"ratio_to\":null,\"ratio\":null,\"nproc\":$(nproc),\"cpu_model\":\"$cpu\",\"kernel\":\"$(uname -r)\",\"data_fs\":\"$(df --output=fstype "$work" | tail -1)\",\"seconds_per_run\":$dur,\"wrk\":\"$(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)\",\"nginx\":\"$("$nginx_bin" -v 2>&1 | sed 's/.*\///')\",\"redis\":\"$(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')\"}"

# disk_limit WHICH: runs bench_storage --only WHICH (fdatasync or seqwrite)
# for one round and prints its ops_s (fdatasync) or mb_s (seqwrite). The
# limits are measured right before and after the pulsed run they are
# compared with, because this disk's rate drifts within minutes.
disk_limit() {
    local line args="--only $1 --rounds 1 --seconds 3"
    [ -x "$bench_storage" ] || return 0
    [ "$quick" = 1 ] && args="$args --quick"
    line=$("$bench_storage" --dir "$root" $args | grep "\"bare_") || { log "bench_storage $1 failed"; return 0; }
    if [ "$1" = fdatasync ]; then echo "$(echo "$line" | jnum ops_s) $(echo "$line" | jnum p99_us)"; else echo "$line" | jnum mb_s; fi
}
mean2() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { n = (a > 0) + (b > 0); if (n) printf "%.3f", (a + b) / n }'; }

# ---- 2. servers ------------------------------------------------------------
mkdir -p "$work/nginx/tmp" "$work/www" "$work/redis" "$work/pulse"
nginx_port=$(free_port)
# Started as root, nginx workers would switch to "nobody", who can read
# neither the 0700 scratch directory nor pulsed's segment file.
nginx_user=
[ "$(id -u)" = 0 ] && nginx_user="user root;"
cat >"$work/nginx/nginx.conf" <<EOF
$nginx_user
worker_processes 2;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000000;
    keepalive_timeout 65;
    client_body_temp_path $work/nginx/tmp/body;
    proxy_temp_path $work/nginx/tmp/proxy;
    fastcgi_temp_path $work/nginx/tmp/fastcgi;
    uwsgi_temp_path $work/nginx/tmp/uwsgi;
    scgi_temp_path $work/nginx/tmp/scgi;
    server {
        listen 127.0.0.1:$nginx_port;
        root $work/www;
        location = /post { client_max_body_size 64m; return 204; }
        location / { }
    }
}
EOF
"$nginx_bin" -e "$work/nginx/error.log" -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' >>"$work/nginx/error.log" 2>&1 &
nginx_pid=$!
pids="$pids $!"

redis_port=$(free_port)
redis-server --bind 127.0.0.1 --port "$redis_port" --dir "$work/redis" --appendonly yes \
    --appendfsync always --save '' --daemonize no --logfile "$work/redis/redis.log" &
redis_pid=$!
pids="$pids $!"
wait_port "$redis_port" || exit 1

webdis_port=$(free_port)
cat >"$work/webdis.json" <<EOF
{ "redis_host": "127.0.0.1", "redis_port": $redis_port, "redis_auth": null,
  "http_host": "127.0.0.1", "http_port": $webdis_port, "threads": 2, "pool_size": 32,
  "daemonize": false, "websockets": false, "database": 0,
  "acl": [ { "disabled": ["DEBUG", "FLUSHALL", "FLUSHDB"] } ],
  "verbosity": 1, "logfile": "$work/webdis.log" }
EOF
webdis "$work/webdis.json" >>"$work/webdis.log" 2>&1 &
webdis_pid=$!
pids="$pids $!"
wait_port "$nginx_port" || { cat "$work/nginx/error.log" >&2; exit 1; }
wait_port "$webdis_port" || { tail -5 "$work/webdis.log" >&2; exit 1; }

# ---- 3. pulsed ----------------------------------------------------------------
if [ "$no_pulsed" = 0 ]; then
    pulse_port=$(free_port)
    "$pulsed" --data-dir "$work/pulse" --listen "127.0.0.1:$pulse_port" \
        -o storage.sync-mode=every-write -o log.level=warn ${PULSED_OPTS:-} >"$work/pulsed.log" 2>&1 &
    pulse_pid=$!
    pids="$pids $!"
    base="http://127.0.0.1:$pulse_port"
    if ! wait_http "$base/readyz"; then
        tail -20 "$work/pulsed.log" >&2; exit 1
    fi
    for t in bench raw wide:64; do
        np=${t#*:}; [ "$np" = "$t" ] && np=1
        code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
            -d "{\"name\":\"${t%%:*}\",\"partitions\":$np}" "$base/v1/topics")
        [ "$code" = 201 ] || log "creating topic ${t%%:*} answered $code"
    done
fi

# pulsed_publish N CONNS: one publish run into topic bench; sets P_REQ_S,
# P_REC_S, P_MB_S (payload) and P_EXTRA.
pulsed_publish() {
    P_REQ_S= ; P_REC_S= ; P_MB_S= ; P_EXTRA=
    [ "$no_pulsed" = 0 ] || return 0
    CPU_PIDS=$pulse_pid run_wrk "pulsed_publish_${1}_c$2" "$2" "$base" BENCH_MODE=post \
        BENCH_PATH=/v1/topics/${3:-bench}/records BENCH_RECORDS="$1" BENCH_PARTITIONS="${4:-0}"
    P_REQ_S=$W_REQ_S
    [ -n "$W_REQ_S" ] && P_REC_S=$(calc "$W_REQ_S * $1") && P_MB_S=$(calc "$P_REC_S * 256 / 1e6")
    P_EXTRA="$W_EXTRA,\"requests_s\":${W_REQ_S:-null},\"records_per_request\":$1,\"mb_s_is\":\"payload\""
}

# ---- 4. publish of one record at one connection vs the bare fdatasync loop ------
read -r f1 f1_p99 <<<"$(disk_limit fdatasync)"
pulsed_publish 1 1
read -r f2 f2_p99 <<<"$(disk_limit fdatasync)"
fsync_ops=$(mean2 "$f1" "$f2")
fsync_p99=$(mean2 "$f1_p99" "$f2_p99")
emit disk_bare_fdatasync_loop "$fsync_ops" "" "" "" "" ",\"before\":${f1:-null},\"after\":${f2:-null},\"p99_us\":${fsync_p99:-null},\"p99_us_before\":${f1_p99:-null},\"p99_us_after\":${f2_p99:-null},\"source\":\"bench_storage --only fdatasync\""
if [ "$no_pulsed" = 0 ]; then
    emit pulsed_publish_1x256_c1 "$P_REC_S" "$P_MB_S" disk_bare_fdatasync_loop \
        "$(ratio "$P_REQ_S" "$fsync_ops")" 0.8 "$P_EXTRA"
    # The tail: p99 of the publish over the mean p99 of the two loops.
    emit pulsed_publish_1x256_c1_p99 "" "" disk_bare_fdatasync_loop_p99 \
        "$(ratio "$(echo "$P_EXTRA" | jnum p99_us)" "$fsync_p99")" "" ",\"target_max\":2.0"
fi
for c in 1; do
    CPU_PIDS=$webdis_pid run_wrk webdis_xadd_c$c "$c" "http://127.0.0.1:$webdis_port" BENCH_MODE=get BENCH_PATH="/XADD/s/*/f/$value"
    emit "webdis_redis_xadd_256_c$c" "$W_REQ_S" "" "" "" "" "$W_EXTRA,\"redis\":\"appendfsync always\""
    redis_bench xadd_c$c "$c" XADD s '*' f "$value"
    emit "redis_native_xadd_256_c$c" "$R_OPS_S" "" "" "" "" ",\"connections\":$c,\"requests\":$R_N$R_CPU,\"redis\":\"appendfsync always\""
    CPU_PIDS=$(nginx_pids) run_wrk nginx_post204_c$c "$c" "http://127.0.0.1:$nginx_port" BENCH_MODE=post BENCH_PATH=/post BENCH_RECORDS=1
    emit "nginx_post204_1x256_c$c" "$W_REQ_S" "" "" "" "" "$W_EXTRA"
done

# ---- 5. one record at 32 connections vs the gateway peer, Redis and nginx --------
CPU_PIDS=$webdis_pid run_wrk webdis_xadd_c32 32 "http://127.0.0.1:$webdis_port" BENCH_MODE=get BENCH_PATH="/XADD/s/*/f/$value"
webdis_c32=$W_REQ_S
emit webdis_redis_xadd_256_c32 "$W_REQ_S" "" "" "" "" "$W_EXTRA,\"redis\":\"appendfsync always\""
redis_bench xadd_c32 32 XADD s '*' f "$value"
redis_xadd_c32=$R_OPS_S
emit redis_native_xadd_256_c32 "$R_OPS_S" "" "" "" "" ",\"connections\":32,\"requests\":$R_N$R_CPU,\"redis\":\"appendfsync always\""
pulsed_publish 1 32
CPU_PIDS=$(nginx_pids) run_wrk nginx_post204_c32 32 "http://127.0.0.1:$nginx_port" BENCH_MODE=post BENCH_PATH=/post BENCH_RECORDS=1
nginx_post_c32=$W_REQ_S
emit nginx_post204_1x256_c32 "$W_REQ_S" "" "" "" "" "$W_EXTRA"
if [ "$no_pulsed" = 0 ]; then
    emit pulsed_publish_1x256_c32 "$P_REC_S" "$P_MB_S" webdis_redis_xadd_256_c32 \
        "$(ratio "$P_REQ_S" "$webdis_c32")" 2.5 "$P_EXTRA"
    emit pulsed_publish_1x256_c32_vs_redis "$P_REC_S" "" redis_native_xadd_256_c32 \
        "$(ratio "$P_REQ_S" "$redis_xadd_c32")" 1.0 ""
    emit pulsed_publish_1x256_c32_vs_nginx "$P_REC_S" "" nginx_post204_1x256_c32 \
        "$(ratio "$P_REQ_S" "$nginx_post_c32")" 0.45 ""
    pulsed_publish 1 8
    emit pulsed_publish_1x256_c8 "$P_REC_S" "$P_MB_S" "" "" "" "$P_EXTRA"
fi

# ---- 5b. a topic of 64 partitions ---------------------------------------------------
# One record a request at 64 connections (keyless: each publish goes to the
# next partition, so the connections keep most partitions dirty at once),
# and 64 records a request, one for each partition, at 8 connections. Both
# need 64 partitions' fdatasyncs to run side by side; the ratios are to the
# one-partition publish of the same record count measured here too.
if [ "$no_pulsed" = 0 ]; then
    pulsed_publish 1 64
    one_c64=$P_REQ_S
    emit pulsed_publish_1x256_c64 "$P_REC_S" "$P_MB_S" "" "" "" "$P_EXTRA"
    pulsed_publish 1 64 wide
    emit pulsed_publish_1x256_p64_c64 "$P_REC_S" "$P_MB_S" pulsed_publish_1x256_c64 \
        "$(ratio "$P_REQ_S" "$one_c64")" "" "$P_EXTRA,\"partitions\":64"
    pulsed_publish 64 8
    one_64x=$P_REQ_S
    emit pulsed_publish_64x256_c8 "$P_REC_S" "$P_MB_S" "" "" "" "$P_EXTRA"
    pulsed_publish 64 8 wide 64
    emit pulsed_publish_64x256_p64_c8 "$P_REC_S" "$P_MB_S" pulsed_publish_64x256_c8 \
        "$(ratio "$P_REQ_S" "$one_64x")" "" "$P_EXTRA,\"partitions\":64,\"records_per_partition\":1"
fi

# ---- 6. 100 records a request vs the bare sequential write -------------------------
s1=$(disk_limit seqwrite)
pulsed_publish 100 8
s2=$(disk_limit seqwrite)
seq_mb=$(mean2 "$s1" "$s2")
emit disk_bare_sequential_write "" "$seq_mb" "" "" "" ",\"before\":${s1:-null},\"after\":${s2:-null},\"source\":\"bench_storage --only seqwrite\""
if [ "$no_pulsed" = 0 ]; then
    emit pulsed_publish_100x256_c8 "$P_REC_S" "$P_MB_S" disk_bare_sequential_write \
        "$(ratio "$P_MB_S" "$seq_mb")" 0.6 "$P_EXTRA"
    for c in 1 32; do
        pulsed_publish 100 "$c"
        emit "pulsed_publish_100x256_c$c" "$P_REC_S" "$P_MB_S" "" "" "" "$P_EXTRA"
    done
fi

# ---- 7. fetch ---------------------------------------------------------------------
if [ "$no_pulsed" = 0 ]; then
    # Pre-fill the raw topic with 100-record batches until the log holds
    # prefill_bytes (bounded: at most 20 rounds of wrk).
    size=0
    for _ in $(seq 1 20); do
        size=$(curl -s "$base/v1/topics/raw" | sed -n 's/.*"size_bytes": *\([0-9]*\).*/\1/p' | head -1)
        [ "${size:-0}" -ge "$prefill_bytes" ] && break
        env BENCH_MODE=post BENCH_PATH=/v1/topics/raw/records BENCH_RECORDS=100 \
            timeout 60 wrk -t2 -c16 -d3s -s "$lua" "$base" >/dev/null 2>&1
    done
    hw=$(curl -s "$base/v1/topics/raw" | sed -n 's/.*"high_watermark": *\([0-9]*\).*/\1/p' | head -1)
    seg=$(find "$work/pulse/topics/raw/0" -name '*.log' -printf '%s %p\n' 2>/dev/null | sort -n | tail -1 | cut -d' ' -f2-)
    log "raw topic: size_bytes=$size high_watermark=$hw segment=$seg"

    # nginx serves the very same bytes: a hard link to pulsed's segment.
    seg_size=0
    if [ -n "$seg" ] && ln "$seg" "$work/www/segment.log" 2>/dev/null; then
        seg_size=$(stat -c %s "$work/www/segment.log")
    fi
    for c in 1 8; do
        nginx_mb=
        if [ "$seg_size" -gt 1048576 ]; then
            CPU_PIDS=$(nginx_pids) run_wrk nginx_range_c$c "$c" "http://127.0.0.1:$nginx_port" BENCH_MODE=range \
                BENCH_PATH=/segment.log BENCH_SIZE="$seg_size" BENCH_RANGE=1048576
            nginx_mb=$W_MB_S
            emit "nginx_range_1MiB_c$c" "$W_REQ_S" "$W_MB_S" "" "" "" "$W_EXTRA,\"file_bytes\":$seg_size"
        fi
        CPU_PIDS=$pulse_pid run_wrk pulsed_raw_c$c "$c" "$base" BENCH_MODE=fetch BENCH_OFFSETS="${hw:-1}" \
            BENCH_PATH="/v1/topics/raw/partitions/0/records?format=raw&max_bytes=1048576&offset="
        emit "pulsed_fetch_raw_1MiB_c$c" "$W_REQ_S" "$W_MB_S" nginx_range_1MiB_c$c \
            "$(ratio "$W_MB_S" "$nginx_mb")" 0.9 "$W_EXTRA,\"high_watermark\":${hw:-null}"
    done

    # Small reads, where the cost per request shows: max_bytes=32768 gives
    # one 100-record batch (about 28 KB); nginx serves Ranges of exactly as
    # many bytes as pulsed's answer at offset 0 carries.
    small=$(curl -s -o /dev/null -w '%{size_download}' \
        "$base/v1/topics/raw/partitions/0/records?format=raw&max_bytes=32768&offset=0")
    for c in 1 8; do
        nginx_rs=
        if [ "$seg_size" -gt 1048576 ] && [ "${small:-0}" -gt 0 ]; then
            CPU_PIDS=$(nginx_pids) run_wrk nginx_range32k_c$c "$c" "http://127.0.0.1:$nginx_port" BENCH_MODE=range \
                BENCH_PATH=/segment.log BENCH_SIZE="$seg_size" BENCH_RANGE="$small"
            nginx_rs=$W_REQ_S
            emit "nginx_range_32KiB_c$c" "$W_REQ_S" "$W_MB_S" "" "" "" "$W_EXTRA,\"range_bytes\":$small"
        fi
        CPU_PIDS=$pulse_pid run_wrk pulsed_raw32k_c$c "$c" "$base" BENCH_MODE=fetch BENCH_OFFSETS="${hw:-1}" \
            BENCH_PATH="/v1/topics/raw/partitions/0/records?format=raw&max_bytes=32768&offset="
        emit "pulsed_fetch_raw_32KiB_c$c" "$W_REQ_S" "$W_MB_S" nginx_range_32KiB_c$c \
            "$(ratio "$W_REQ_S" "$nginx_rs")" 1.0 "$W_EXTRA,\"bytes_at_offset_0\":${small:-null}"
    done

    for c in 1 8; do
        redis_bench xrange_c$c "$c" XRANGE s - + COUNT 100
        emit "redis_native_xrange_100_c$c" "$R_OPS_S" "" "" "" "" ",\"connections\":$c,\"requests\":$R_N$R_CPU,\"records_per_request\":100"
        CPU_PIDS=$pulse_pid run_wrk pulsed_json_c$c "$c" "$base" BENCH_MODE=fetch BENCH_OFFSETS=$(( ${hw:-101} > 100 ? ${hw:-101} - 100 : 1 )) \
            BENCH_PATH="/v1/topics/raw/partitions/0/records?max_records=100&offset="
        rec_s=
        [ -n "$W_REQ_S" ] && rec_s=$(calc "$W_REQ_S * 100")
        emit "pulsed_fetch_json_100_c$c" "$W_REQ_S" "$W_MB_S" redis_native_xrange_100_c$c \
            "$(ratio "$W_REQ_S" "$R_OPS_S")" 1.0 "$W_EXTRA,\"records_s\":${rec_s:-null}"
    done
else
    for c in 1 8; do
        redis_bench xrange_c$c "$c" XRANGE s - + COUNT 100
        emit "redis_native_xrange_100_c$c" "$R_OPS_S" "" "" "" "" ",\"connections\":$c,\"requests\":$R_N$R_CPU,\"records_per_request\":100"
    done
fi

# ---- 8. the table ------------------------------------------------------------
{
    echo
    echo "| workload | ops/s | MB/s | ratio to | ratio | target | server CPU µs/req |"
    echo "|---|---:|---:|---|---:|---:|---:|"
    for r in "${rows[@]}"; do
        echo "| ${r//|/ | } |"
    done
}
