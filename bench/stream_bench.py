#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""stream_bench.py - event streams of one pulsed, measured on loopback.

What it measures (everything on 127.0.0.1, pulsed started here on a free
port with its data in a temporary directory under --dir, stopped at the end):

  latency   one stream on a partition; N publishes of one record, one at a
            time; for each, the time from sending the publish to the
            record's event arriving on the stream, and from the publish's
            answer (durable) to the event. Percentiles of both.
  idle      opens streams in steps up to --streams (each one a partition
            stream parked in the broker, no records flowing) and reports,
            at each step, pulsed's resident memory (VmRSS) and thread count
            from /proc, the CPU pulsed uses while they sit idle (heartbeats
            only) for --idle-seconds, then publishes one record and times
            how long until every open stream has its event (fan-out).

pulsed is $PULSE_BUILDDIR/pulsed (default: the current directory). Build it
without sanitizers for memory figures (ASan multiplies RSS). Python 3
standard library only; the client raises its own descriptor limit to the
hard limit, and pulsed inherits it.

    python3 bench/stream_bench.py --streams 5000 --samples 300
"""

import argparse
import http.client
import json
import os
import resource
import selectors
import shutil
import signal
import socket
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


def request(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    hdrs = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=hdrs)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


def open_stream(port, path):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n" % path).encode())
    buf = b""
    while b"retry:" not in buf:  # head and the stream's start
        data = s.recv(65536)
        if not data:
            raise RuntimeError("stream closed at start: %r" % buf)
        buf += data
    if b" 200 " not in buf.split(b"\r\n", 1)[0]:
        raise RuntimeError("stream refused: %r" % buf[:200])
    return s


def wait_for(sock, needle, timeout=30):
    sock.settimeout(timeout)
    buf = b""
    while needle not in buf:
        data = sock.recv(65536)
        if not data:
            raise RuntimeError("stream closed")
        buf += data
    return time.monotonic()


def proc_status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return int(out["VmRSS"].split()[0]), int(out["Threads"])


def cpu_seconds(pid):
    """User + system CPU time of pid so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def bench_latency(port, samples):
    request(port, "POST", "/v1/topics", {"name": "lat", "partitions": 1})
    s = open_stream(port, "/v1/topics/lat/partitions/0/records")
    from_send, from_ack = [], []
    for i in range(samples):
        marker = ("m%06d" % i).encode()
        t0 = time.monotonic()
        st, _ = request(port, "POST", "/v1/topics/lat/records", {"records": [{"value": marker.decode()}]})
        t1 = time.monotonic()
        assert st == 200, st
        t2 = wait_for(s, marker)
        from_send.append((t2 - t0) * 1000)
        from_ack.append((t2 - t1) * 1000)
    s.close()
    for name, xs in (("publish sent -> event", from_send), ("publish answered -> event", from_ack)):
        print("latency  %-26s p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  max %.3f ms  (n=%d)"
              % (name, pct(xs, 50), pct(xs, 90), pct(xs, 99), max(xs), len(xs)))


def bench_idle(port, pid, total, step, idle_seconds):
    request(port, "POST", "/v1/topics", {"name": "idle", "partitions": 8})
    rss0, thr0 = proc_status(pid)
    print("idle     streams %6d  rss %8d KiB  threads %d" % (0, rss0, thr0))
    socks = []
    while len(socks) < total:
        for _ in range(min(step, total - len(socks))):
            socks.append(open_stream(port, "/v1/topics/idle/partitions/%d/records" % (len(socks) % 8)))
        time.sleep(0.5)
        rss, thr = proc_status(pid)
        print("idle     streams %6d  rss %8d KiB  threads %d  (+%.1f KiB per stream)"
              % (len(socks), rss, thr, (rss - rss0) / len(socks)))
    # What the parked streams cost while nothing happens (heartbeats only).
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(idle_seconds)
    c1, t1 = cpu_seconds(pid), time.monotonic()
    print("idle     %d streams for %.0f s: pulsed used %.2f s of CPU (%.1f%% of one core)"
          % (len(socks), t1 - t0, c1 - c0, 100 * (c1 - c0) / (t1 - t0)))
    # Every stream is alive: one record to each partition reaches all.
    sel = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, b"")
    t0 = time.monotonic()
    request(port, "POST", "/v1/topics/idle/records",
            {"records": [{"value": "fanout", "partition": p} for p in range(8)]})
    left = len(socks)
    while left > 0:
        for key, _ in sel.select(timeout=30):
            data = key.fileobj.recv(65536)
            buf = key.data + data
            if b"fanout" in buf:
                sel.unregister(key.fileobj)
                left -= 1
            else:
                sel.modify(key.fileobj, selectors.EVENT_READ, buf)
        if time.monotonic() - t0 > 60:
            raise RuntimeError("%d streams did not get the record" % left)
    print("idle     fan-out of one publish to %d streams: all delivered in %.1f ms"
          % (len(socks), (time.monotonic() - t0) * 1000))
    for s in socks:
        s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/tmp", help="where the scratch data directory goes")
    ap.add_argument("--streams", type=int, default=2000, help="idle streams to open")
    ap.add_argument("--step", type=int, default=500, help="streams per measurement step")
    ap.add_argument("--samples", type=int, default=200, help="latency samples")
    ap.add_argument("--idle-seconds", type=float, default=20, help="how long to watch the idle streams' CPU")
    ap.add_argument("--heartbeat", default="15s", help="server.stream-heartbeat")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.streams + 256
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 2 * need), hard))
    pulsed = os.path.join(os.environ.get("PULSE_BUILDDIR", os.getcwd()), "pulsed")
    tmp = tempfile.mkdtemp(prefix="pulse-stream-bench-", dir=args.dir)
    port = free_port()
    cmd = [pulsed, "--data-dir", os.path.join(tmp, "data"), "--listen", "127.0.0.1:%d" % port,
           "-o", "log.level=warn", "-o", "server.stream-max=%d" % (args.streams + 10),
           "-o", "server.max-connections=%d" % (args.streams + 100), "-o", "server.max-connections-per-ip=0",
           "-o", "server.stream-heartbeat=" + args.heartbeat]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                if request(port, "GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        print("pulsed pid %d on 127.0.0.1:%d, %s" % (proc.pid, port, " ".join(cmd[3:])))
        bench_latency(port, args.samples)
        bench_idle(port, proc.pid, args.streams, args.step, args.idle_seconds)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
