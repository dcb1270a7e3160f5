#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The cost of single group calls against a running pulsed on loopback
(standard library only), one client connection, calls one after another:
join, heartbeat, group fetch of 10 records (no resume: from the group's
cursors) and group fetch + commit. Prints the client's p50/p99 and
pulsed's CPU (utime+stime from /proc/PID/stat) per call. Made for the
Kafka backend's group log (docs/Performance.md "Consumer groups through
the Kafka backend"); works against either backend.

    pulsed --data-dir /tmp/gc --listen 127.0.0.1:8090 -o broker.backend=kafka -o kafka.mock-brokers=3 &
    python3 bench/group_calls.py --port 8090 --pid $! --calls 300
"""

import argparse
import http.client
import json
import os
import statistics
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True, help="pulsed's pid, for its CPU time")
    ap.add_argument("--calls", type=int, default=300)
    a = ap.parse_args()
    conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=30)  # loopback only

    def req(method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        r = conn.getresponse()
        raw = r.read()
        return r.status, (json.loads(raw) if raw else None)

    def cpu():
        with open("/proc/%d/stat" % a.pid) as f:
            x = f.read().split(")")[1].split()
        return (int(x[11]) + int(x[12])) / os.sysconf("SC_CLK_TCK")

    def timed(fn, k):
        lat, c0 = [], cpu()
        for _ in range(k):
            t0 = time.perf_counter()
            fn()
            lat.append((time.perf_counter() - t0) * 1000)
        return statistics.median(lat), sorted(lat)[max(0, int(len(lat) * 0.99) - 1)], (cpu() - c0) / k * 1e6

    t = "gc%d" % int(time.time())
    g = "g" + t
    assert req("POST", "/v1/topics", {"name": t, "partitions": 4})[0] == 201
    for p in range(4):
        req("POST", "/v1/topics/%s/records" % t, {"records": [{"value": "x" * 100, "partition": p}] * 500})
    time.sleep(1.5)  # the gateways' metadata caches
    members = []

    def join():
        s, d = req("POST", "/v1/groups/%s/members" % g, {"topics": [t], "lease_ms": 60000})
        assert s == 201, d
        members.append(d["member_id"])

    rows = [("join", timed(join, 20))]
    m = members[0]
    for x in members[1:]:
        req("DELETE", "/v1/groups/%s/members/%s" % (g, x))

    def heartbeat():
        s, d = req("POST", "/v1/groups/%s/members/%s/heartbeat" % (g, m))
        assert s == 200, d

    def fetch():
        s, d = req("GET", "/v1/groups/%s/members/%s/records?max_records=10" % (g, m))
        assert s == 200, d
        return d

    def fetch_commit():
        d = fetch()
        s, c = req("POST", "/v1/groups/%s/members/%s/commit" % (g, m),
                   {"generation": d["generation"], "offsets": d["positions"]})
        assert s == 200, c

    rows += [("heartbeat", timed(heartbeat, a.calls)), ("group fetch of 10 records", timed(fetch, a.calls)),
             ("group fetch + commit", timed(fetch_commit, a.calls // 3))]
    for name, (p50, p99, us) in rows:
        print("%-28s p50 %7.2f ms  p99 %7.2f ms  server CPU %7.0f us/call" % (name, p50, p99, us))


if __name__ == "__main__":
    main()
