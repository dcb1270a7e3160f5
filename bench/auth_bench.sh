#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# auth_bench.sh - what bearer tokens cost per request: pulsed serving the
# same fixed request mix with and without auth.token-file.
#
#   callgrind  pulsed under valgrind --tool=callgrind serves N requests on one
#              kept-alive connection (GET /v1/topics/bench, GET a fetch of
#              partition 0 and POST a one-record publish, in turn); the
#              instructions of the whole process per request, and those of
#              the auth check itself (pulse_server_refuse_auth, inclusive:
#              header look-up, SHA-256, constant-time compares, grant match)
#   wrk        GET /v1/topics/bench for SECONDS at 2 threads x 16
#              connections, with and without the token (requests/s, p50/p99)
#
# Everything is on 127.0.0.1; pulsed's data goes to a mktemp directory
# under $BENCH_DIR, removed at the end. Build pulsed without sanitizers
# (./configure CFLAGS='-O2 -g') for figures worth quoting.
#
# usage: auth_bench.sh [N] [SECONDS]     (defaults 600 and 10)
#   env: PULSE_BUILDDIR (where pulsed is; default .), BENCH_DIR (default /tmp),
#        TOKENS (number of lines in the token file; default 10)
set -eu
N="${1:-600}"
SECONDS_RUN="${2:-10}"
BUILD="${PULSE_BUILDDIR:-.}"
PULSED="$BUILD/pulsed"
TOKENS="${TOKENS:-10}"
DIR="$(mktemp -d "${BENCH_DIR:-/tmp}/pulse-auth-bench.XXXXXX")"
PID=""
cleanup() {
    if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
    rm -rf "$DIR"
}
trap cleanup EXIT

TOKEN="bench-token-0123456789abcdef0123456789abcdef"
: > "$DIR/tokens"
i=1
while [ "$i" -lt "$TOKENS" ]; do
    echo "other-token-$i" | "$PULSED" --hash-token "other$i" "read:x$i*" >> "$DIR/tokens"
    i=$((i + 1))
done
echo "$TOKEN" | "$PULSED" --hash-token bench 'read:*' 'write:*' 'admin:*' >> "$DIR/tokens"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start WRAPPER... -- PULSED ARGS: starts pulsed, waits for /readyz.
start() {
    local p="$1"; shift
    "$@" --data-dir "$DIR/data-$p" --listen "127.0.0.1:$p" -o log.level=warn -o server.threads=1 \
        2> "$DIR/stderr-$p" &
    PID=$!
    for _ in $(seq 1 600); do
        curl -sf "http://127.0.0.1:$p/readyz" > /dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "pulsed did not start" >&2; cat "$DIR/stderr-$p" >&2; exit 1
}

stop() {
    kill -TERM "$PID"; wait "$PID" || true; PID=""
}

# The fixed mix on one connection; HDR is the Authorization value or "".
mix() {
    python3 - "$1" "$2" "$3" <<'EOF'
import http.client, json, sys
port, n, token = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
h = {"Authorization": "Bearer " + token} if token else {}
c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
def req(m, p, body=None):
    hh = dict(h)
    if body is not None:
        hh["Content-Type"] = "application/json"
    c.request(m, p, body=body, headers=hh)
    r = c.getresponse(); r.read()
    if r.status >= 300: raise SystemExit("%s %s: %d" % (m, p, r.status))
req("POST", "/v1/topics", json.dumps({"name": "bench"}))
for i in range(n):
    k = i % 3
    if k == 0: req("GET", "/v1/topics/bench")
    elif k == 1: req("GET", "/v1/topics/bench/partitions/0/records?offset=0&max_records=10")
    else: req("POST", "/v1/topics/bench/records", json.dumps({"records": [{"value": "x" * 100}]}))
EOF
}

callgrind_run() {
    local label="$1"; shift
    local p; p="$(port)"
    start "$p" valgrind --tool=callgrind --callgrind-out-file="$DIR/cg-$label.out" "$PULSED" "$@"
    mix "$p" "$N" "$TOKEN_ARG"
    stop
    local total auth hash
    total="$(callgrind_annotate "$DIR/cg-$label.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}')"
    auth="$(callgrind_annotate --inclusive=yes "$DIR/cg-$label.out" 2>/dev/null |
            awk '/pulse_server_refuse_auth/ {gsub(",","",$1); print $1; exit}')"
    hash="$(callgrind_annotate --inclusive=yes "$DIR/cg-$label.out" 2>/dev/null |
            awk '/gnutls_hash_fast/ {gsub(",","",$1); print $1; exit}')"
    echo "callgrind $label: total_Ir=$total requests=$((N + 1)) Ir_per_request=$((total / (N + 1)))" \
         "refuse_auth_Ir_per_request=$(( ${auth:-0} / (N + 1) )) of_which_sha256=$(( ${hash:-0} / (N + 1) ))"
}

TOKEN_ARG=""; callgrind_run noauth
TOKEN_ARG="$TOKEN"; callgrind_run auth -o "auth.token-file=$DIR/tokens"

wrk_run() {
    local label="$1"; shift
    local p; p="$(port)"
    start "$p" "$PULSED" "$@"
    curl -sf -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"name":"bench"}' \
        "http://127.0.0.1:$p/v1/topics" > /dev/null
    local hdr=()
    [ -n "$TOKEN_ARG" ] && hdr=(-H "Authorization: Bearer $TOKEN_ARG")
    echo "wrk $label:"
    wrk -t2 -c16 -d"${SECONDS_RUN}s" --latency "${hdr[@]}" "http://127.0.0.1:$p/v1/topics/bench" |
        grep -E 'Requests/sec|^ +50%|^ +99%'
    stop
}

TOKEN_ARG=""; wrk_run noauth
TOKEN_ARG="$TOKEN"; wrk_run auth -o "auth.token-file=$DIR/tokens"
