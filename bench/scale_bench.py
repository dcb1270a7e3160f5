#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scale_bench.py - what many partitions cost pulsed at start, stop and idle.

For each --partitions count (default 4000 and 10000) it builds a data
directory of that many partitions (topics of --per-topic partitions each,
one 256-byte record published to every partition so each log has a
segment with data, a snapshot and dirty bytes), then measures on loopback:

  stop_after_load_s  SIGTERM to exit right after the loading publishes
                     (every partition has just been written)
  ready_clean_s      start to the first 200 from /readyz after that clean stop
  rss_kib, fds       pulsed's VmRSS and open descriptors, idle, after the
                     clean start, and per partition against an empty data
                     directory measured the same way (rss/fds_per_partition)
  metrics_ms, topics_ms, ...
                     the median and the largest of --samples GETs of
                     /metrics, GET /v1/topics and their aggregated forms
                     (/metrics?per=topic, GET /v1/topics?partition_stats=false)
                     with their answer sizes; a query the server refuses
                     prints its status instead
  stop_idle_s        SIGTERM to exit of the idle server
  *_cpu_s            the CPU seconds (user + system) pulsed spent on the same
                     start or stop: steadier than wall time on a shared
                     machine
  ready_after_kill_s start after a kill -9 of an idle server (the slow path:
                     no clean-stop marker to trust)

Each timing of a start or stop is the median of --rounds runs. Output: one
JSON object per line. pulsed is $PULSE_BUILDDIR/pulsed (default: the current
directory); build it without sanitizers (see docs/Performance.md). Python 3
standard library only.

    python3 bench/scale_bench.py --dir /tmp --partitions 4000,10000
"""

import argparse
import http.client
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def request(port, method, path, body=None, timeout=120):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    hdrs = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=hdrs)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


class Pulsed:
    """One pulsed on a free loopback port over a given data directory."""

    def __init__(self, binary, data_dir, log_path):
        self.binary = binary
        self.data_dir = data_dir
        self.log_path = log_path
        self.proc = None
        self.port = None

    def start(self):
        """Starts pulsed and returns the seconds until /readyz answered 200."""
        self.port = free_port()
        log = open(self.log_path, "ab")
        t0 = time.monotonic()
        self.proc = subprocess.Popen([self.binary, "--data-dir", self.data_dir,
                                      "--listen", "127.0.0.1:%d" % self.port, "-o", "log.level=warn"],
                                     stdout=log, stderr=log)
        log.close()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("pulsed exited with %d at start; see %s" % (self.proc.returncode, self.log_path))
            try:
                st, _ = request(self.port, "GET", "/readyz", timeout=5)
                if st == 200:
                    took = time.monotonic() - t0
                    self.start_cpu = self.cpu_seconds()
                    return took
            except OSError:
                pass
            time.sleep(0.002)

    def cpu_seconds(self):
        """User + system CPU seconds pulsed has used so far."""
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        """SIGTERM; returns the seconds until the process exited (status 0)
        and sets stop_cpu to the CPU seconds the stop took."""
        before = self.cpu_seconds()
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        _, status, ru = os.wait4(self.proc.pid, 0)
        took = time.monotonic() - t0
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        rc = self.proc.returncode
        self.stop_cpu = ru.ru_utime + ru.ru_stime - before
        if rc != 0:
            raise RuntimeError("pulsed exited with %d on SIGTERM; see %s" % (rc, self.log_path))
        self.proc = None
        return took

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def idle_cost(self):
        """(VmRSS in KiB, open descriptors) of the running pulsed."""
        pid = self.proc.pid
        rss = 0
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        return rss, len(os.listdir("/proc/%d/fd" % pid))


def load(srv, partitions, per_topic):
    """Creates the topics and publishes one record to every partition."""
    value = "v" * 256
    left, i = partitions, 0
    while left > 0:
        n = min(per_topic, left)
        name = "scale-%05d" % i
        st, body = request(srv.port, "POST", "/v1/topics", {"name": name, "partitions": n})
        if st != 201:
            raise RuntimeError("create %s: %d %s" % (name, st, body[:200]))
        recs = [{"value": value, "partition": p} for p in range(n)]
        st, body = request(srv.port, "POST", "/v1/topics/%s/records" % name, {"records": recs})
        if st != 200:
            raise RuntimeError("publish %s: %d %s" % (name, st, body[:200]))
        left -= n
        i += 1


def get_latency(port, path, samples):
    times, size, status = [], 0, 0
    for _ in range(samples):
        t0 = time.monotonic()
        status, body = request(port, "GET", path)
        times.append((time.monotonic() - t0) * 1000.0)
        size = len(body)
        if status != 200:
            break
    return {"status": status, "median_ms": round(statistics.median(times), 2),
            "max_ms": round(max(times), 2), "bytes": size}


def measure(binary, base, partitions, per_topic, rounds, samples, empty_cost):
    d = tempfile.mkdtemp(prefix="scale-%d-" % partitions, dir=base)
    data = os.path.join(d, "data")
    srv = Pulsed(binary, data, os.path.join(d, "pulsed.log"))
    out = {"bench": "scale", "partitions": partitions, "per_topic": per_topic, "rounds": rounds}
    try:
        srv.start()
        t0 = time.monotonic()
        load(srv, partitions, per_topic)
        out["load_s"] = round(time.monotonic() - t0, 2)
        stops, readies = [srv.stop()], []
        stop_cpu, ready_cpu = [srv.stop_cpu], []
        for r in range(rounds):
            readies.append(srv.start())
            ready_cpu.append(srv.start_cpu)
            if r + 1 < rounds:
                # dirty every partition again so each stop has work to do
                load_again(srv, partitions, per_topic)
                stops.append(srv.stop())
                stop_cpu.append(srv.stop_cpu)
        out["stop_after_load_cpu_s"] = round(statistics.median(stop_cpu), 3)
        out["ready_clean_cpu_s"] = round(statistics.median(ready_cpu), 3)
        out["stop_after_load_s"] = round(statistics.median(stops), 3)
        out["ready_clean_s"] = round(statistics.median(readies), 3)
        out["ready_clean_all"] = [round(x, 3) for x in readies]
        out["stop_after_load_all"] = [round(x, 3) for x in stops]
        time.sleep(1.0)
        rss, fds = srv.idle_cost()
        out["rss_kib"], out["fds"] = rss, fds
        if empty_cost:
            out["rss_per_partition_kib"] = round((rss - empty_cost[0]) / partitions, 2)
            out["fds_per_partition"] = round((fds - empty_cost[1]) / partitions, 3)
        for key, path in (("metrics", "/metrics"), ("metrics_per_topic", "/metrics?per=topic"),
                          ("topics", "/v1/topics"), ("topics_no_stats", "/v1/topics?partition_stats=false")):
            out[key] = get_latency(srv.port, path, samples)
        idle_stops = [srv.stop()]
        idle_cpu = [srv.stop_cpu]
        kills = []
        for r in range(rounds):
            srv.start()
            if r + 1 < rounds:
                idle_stops.append(srv.stop())
                idle_cpu.append(srv.stop_cpu)
        out["stop_idle_s"] = round(statistics.median(idle_stops), 3)
        out["stop_idle_cpu_s"] = round(statistics.median(idle_cpu), 3)
        for r in range(rounds):
            srv.kill()
            kills.append(srv.start())
        out["ready_after_kill_s"] = round(statistics.median(kills), 3)
        srv.stop()
    finally:
        if srv.proc is not None:
            srv.kill()
        shutil.rmtree(d, ignore_errors=True)
    return out


def load_again(srv, partitions, per_topic):
    value = "w" * 256
    left, i = partitions, 0
    while left > 0:
        n = min(per_topic, left)
        recs = [{"value": value, "partition": p} for p in range(n)]
        st, body = request(srv.port, "POST", "/v1/topics/scale-%05d/records" % i, {"records": recs})
        if st != 200:
            raise RuntimeError("publish: %d %s" % (st, body[:200]))
        left -= n
        i += 1


def empty_idle_cost(binary, base):
    d = tempfile.mkdtemp(prefix="scale-empty-", dir=base)
    srv = Pulsed(binary, os.path.join(d, "data"), os.path.join(d, "pulsed.log"))
    try:
        srv.start()
        time.sleep(1.0)
        cost = srv.idle_cost()
        srv.stop()
    finally:
        if srv.proc is not None:
            srv.kill()
        shutil.rmtree(d, ignore_errors=True)
    return cost


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp", help="where the scratch data directories go")
    ap.add_argument("--partitions", default="4000,10000", help="comma-separated partition counts")
    ap.add_argument("--per-topic", type=int, default=100, help="partitions per topic (1..256)")
    ap.add_argument("--rounds", type=int, default=3, help="starts and stops per figure (median)")
    ap.add_argument("--samples", type=int, default=20, help="GETs per endpoint")
    args = ap.parse_args()
    builddir = os.environ.get("PULSE_BUILDDIR", ".")
    binary = os.path.join(builddir, "pulsed")
    if not os.access(binary, os.X_OK):
        sys.exit("scale_bench: no pulsed at %s (set PULSE_BUILDDIR)" % binary)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(json.dumps({"bench": "scale", "environment": {"pulsed": os.path.abspath(binary),
                                                         "nofile": hard, "cpus": os.cpu_count()}}))
    empty = empty_idle_cost(binary, args.dir)
    print(json.dumps({"bench": "scale", "partitions": 0, "rss_kib": empty[0], "fds": empty[1]}), flush=True)
    for n in [int(x) for x in args.partitions.split(",") if x]:
        print(json.dumps(measure(binary, args.dir, n, args.per_topic, args.rounds, args.samples, empty)),
              flush=True)


if __name__ == "__main__":
    main()
