#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Stored compression (topic `compression: zlib`) against none, on realistic
JSON event values: bytes on disk per record, publish and fetch throughput,
and the server's CPU seconds per request (docs/Performance.md
"Compression").

    python3 bench/compress_bench.py [--builddir DIR] [--dir DIR] [--seconds S]
                                    [--rounds R] [--conns C] [--batch N]

Starts one pulsed (the release build in --builddir, default the current
directory) on a free loopback port with a private data directory under
--dir, and runs R rounds; each round measures both codecs, in alternating
order, on a fresh topic each:

  publish   C kept-alive connections POST batches of N events (pre-encoded
            request bodies) for S seconds; every publish is durable
            (storage.sync-mode every-write, the default);
  disk      the bytes of the topic's segment files per record published;
  fetch     C connections GET ?max_records=N (JSON) at random offsets for S
            seconds, reading the whole answer;
  raw       the same with format=raw, max_bytes 1 MiB.

Server CPU comes from /proc/PID/stat (utime + stime) around each phase, so
`cpu_us_per_req` counts what pulsed spent, whatever the clients cost on the
same two cores. One JSON line per measurement, then the medians of the
rounds and the ratio zlib / none of each. Standard library only.
"""

import argparse
import http.client
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

EVENT_TYPES = ["page_view", "add_to_cart", "checkout_started", "purchase", "login", "search"]
PATHS = ["/", "/products/%d", "/category/%s", "/cart", "/checkout", "/search", "/account/orders"]
CATEGORIES = ["shoes", "jackets", "bags", "watches", "outdoor", "kids", "sale"]
AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
    "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1",
]
COUNTRIES = [("DE", "Berlin"), ("FR", "Paris"), ("US", "Austin"), ("GB", "Leeds"), ("NL", "Utrecht"), ("PL", "Gdansk")]


def event_value(rng, seq):
    """One realistic JSON event (about 400-700 bytes): ids that do not
    repeat, timestamps, nested objects, numbers, a user agent."""
    kind = rng.choice(EVENT_TYPES)
    user = rng.randrange(1, 200000)
    country, city = rng.choice(COUNTRIES)
    path = rng.choice(PATHS)
    if "%d" in path:
        path = path % rng.randrange(1, 5000)
    elif "%s" in path:
        path = path % rng.choice(CATEGORIES)
    ev = {
        "event_id": "%032x" % rng.getrandbits(128),
        "type": kind,
        "ts": "2026-12-01T%02d:%02d:%02d.%03dZ" % (seq // 3600000 % 24, seq // 60000 % 60, seq // 1000 % 60,
                                                  seq % 1000),
        "user": {"id": user, "session": "s-%016x" % rng.getrandbits(64), "logged_in": rng.random() < 0.6},
        "page": {"path": path, "referrer": rng.choice(["", "https://www.google.com/", "https://news.example.org/"])},
        "client": {"ua": rng.choice(AGENTS), "ip": "%d.%d.%d.%d" % (rng.randrange(1, 224), rng.randrange(256),
                                                                     rng.randrange(256), rng.randrange(1, 255)),
                   "country": country, "city": city},
    }
    if kind in ("add_to_cart", "purchase", "checkout_started"):
        items = []
        for _ in range(rng.randrange(1, 4)):
            items.append({"sku": "SKU-%06d" % rng.randrange(1000000), "qty": rng.randrange(1, 4),
                          "price": round(rng.uniform(4.99, 249.0), 2), "category": rng.choice(CATEGORIES)})
        ev["cart"] = {"items": items, "currency": "EUR", "total": round(sum(i["price"] * i["qty"] for i in items), 2)}
    if kind == "search":
        ev["query"] = {"q": rng.choice(["running shoes", "rain jacket", "leather bag", "kids boots"]),
                       "results": rng.randrange(0, 400)}
    return json.dumps(ev, separators=(",", ":"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def request(conn, method, path, body=None):
    conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
    r = conn.getresponse()
    data = r.read()
    return r.status, data


def run_clients(port, conns, seconds, work):
    """Runs work(conn, rng) in conns threads for seconds; returns (requests,
    units) summed over the threads."""
    stop = time.monotonic() + seconds
    totals = []
    lock = threading.Lock()

    def client(i):
        rng = random.Random(i)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        n = units = 0
        while time.monotonic() < stop:
            units += work(conn, rng)
            n += 1
        conn.close()
        with lock:
            totals.append((n, units))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(n for n, _ in totals), sum(u for _, u in totals)


def phase(pid, port, conns, seconds, work):
    c0, t0 = cpu_seconds(pid), time.monotonic()
    reqs, units = run_clients(port, conns, seconds, work)
    cpu, wall = cpu_seconds(pid) - c0, time.monotonic() - t0
    return {"requests": reqs, "req_s": round(reqs / wall, 1), "units_s": round(units / wall, 1),
            "cpu_us_per_req": round(cpu / max(reqs, 1) * 1e6, 1), "server_cores": round(cpu / wall, 2)}


def topic_bytes(data_dir, topic):
    total = 0
    for root, _, files in os.walk(os.path.join(data_dir, "topics", topic)):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(".log"))
    return total


def measure(args, pid, port, data_dir, codec, rnd, bodies, raw_per_batch):
    topic = "c-%s-%d" % (codec, rnd)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    st, _ = request(c, "POST", "/v1/topics", json.dumps({"name": topic, "compression": codec}))
    assert st == 201, st
    path = "/v1/topics/%s/records" % topic

    def publish(conn, rng):
        st, data = request(conn, "POST", path, bodies[rng.randrange(len(bodies))])
        assert st == 200, (st, data[:200])
        return args.batch

    out = []
    pub = phase(pid, port, args.conns, args.seconds, publish)
    st, data = request(c, "GET", "/v1/topics/" + topic)
    hw = json.loads(data)["partition_stats"][0]["high_watermark"]
    disk = topic_bytes(data_dir, topic)
    out.append(dict(pub, bench="compress", workload="publish", codec=codec, round=rnd, records=hw,
                    disk_bytes=disk, disk_bytes_per_record=round(disk / max(hw, 1), 1),
                    value_bytes_per_record=raw_per_batch))

    fpath = "/v1/topics/%s/partitions/0/records?max_records=%d&offset=" % (topic, args.batch)

    def fetch(conn, rng):
        st, data = request(conn, "GET", fpath + str(rng.randrange(max(hw - args.batch, 1))))
        assert st == 200, st
        return args.batch

    out.append(dict(phase(pid, port, args.conns, args.seconds, fetch), bench="compress", workload="fetch_json",
                    codec=codec, round=rnd))
    rpath = "/v1/topics/%s/partitions/0/records?format=raw&max_bytes=1048576&offset=" % topic

    def raw(conn, rng):
        st, data = request(conn, "GET", rpath + str(rng.randrange(max(hw - args.batch, 1))))
        assert st == 200, st
        return len(data)

    out.append(dict(phase(pid, port, args.conns, args.seconds, raw), bench="compress", workload="fetch_raw",
                    codec=codec, round=rnd))
    request(c, "DELETE", "/v1/topics/" + topic)
    c.close()
    return out


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def summarize(results):
    keys = {"publish": ["units_s", "cpu_us_per_req", "disk_bytes_per_record"],
            "fetch_json": ["units_s", "cpu_us_per_req"], "fetch_raw": ["req_s", "units_s", "cpu_us_per_req"]}
    for wl, ks in keys.items():
        row = {"bench": "compress", "workload": wl, "summary": "median"}
        for codec in ("none", "zlib"):
            for k in ks:
                row["%s_%s" % (codec, k)] = median([r[k] for r in results if r["workload"] == wl
                                                    and r["codec"] == codec])
        for k in ks:
            row["ratio_" + k] = round(row["zlib_" + k] / row["none_" + k], 3) if row["none_" + k] else None
        print(json.dumps(row), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--builddir", default=os.environ.get("PULSE_BUILDDIR", "."))
    ap.add_argument("--dir", default=os.environ.get("BENCH_DIR", tempfile.gettempdir()))
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--batch", type=int, default=100, help="events per publish and per fetch")
    args = ap.parse_args()

    rng = random.Random(14)
    bodies, value_bytes, seq = [], 0, 0
    for _ in range(64):
        vals = []
        for _ in range(args.batch):
            vals.append(event_value(rng, seq))
            seq += 1
        value_bytes += sum(len(v) for v in vals)
        bodies.append(json.dumps({"records": [{"key": "u%d" % rng.randrange(200000), "value": v}
                                              for v in vals]}).encode())
    per_record = round(value_bytes / (64 * args.batch), 1)
    tmp = tempfile.mkdtemp(prefix="pulse-compress-", dir=args.dir)
    data_dir = os.path.join(tmp, "data")
    port = free_port()
    err = open(os.path.join(tmp, "pulsed.stderr"), "wb")
    proc = subprocess.Popen([os.path.join(args.builddir, "pulsed"), "--data-dir", data_dir,
                             "--listen", "127.0.0.1:%d" % port, "-o", "log.level=warn"],
                            stdout=subprocess.DEVNULL, stderr=err)
    try:
        for _ in range(200):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                if request(c, "GET", "/readyz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.05)
        print(json.dumps({"bench": "compress", "workload": "setup", "conns": args.conns, "seconds": args.seconds,
                          "batch": args.batch, "value_bytes_per_record": per_record,
                          "body_bytes": sum(len(b) for b in bodies) // len(bodies)}), flush=True)
        results = []
        for rnd in range(args.rounds):
            for codec in (("none", "zlib") if rnd % 2 == 0 else ("zlib", "none")):
                for row in measure(args, proc.pid, port, data_dir, codec, rnd, bodies, per_record):
                    print(json.dumps(row), flush=True)
                    results.append(row)
        summarize(results)
    finally:
        proc.terminate()
        proc.wait(60)
        err.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
