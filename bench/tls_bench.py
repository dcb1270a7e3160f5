#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tls_bench.py - what HTTPS costs next to plain HTTP, on loopback.

Two pulsed processes from the same build run side by side on 127.0.0.1,
one plain and one with tls.cert-file/tls.key-file (a P-256 certificate made
here with openssl), each with its data in a temporary directory and
storage.sync-mode=interval (so the disk's fsync does not hide what the
protocol costs). Each workload runs on the plain one, then the TLS one,
for --rounds rounds; the line per workload gives the medians and the ratio
https/http of requests per second:

  raw_1mib     GET a 1 MiB raw range (format=raw, offset 0) over one
               kept-alive connection (wrk -c1): sendfile on HTTP; on HTTPS
               libmicrohttpd preads the file and encrypts it
  raw_1mib_c4  the same on 4 connections
  json_100     GET 100 records of 256 B as JSON (wrk -c1)
  publish_1    POST one 256 B record (wrk -c1)
  new_conn     GET /healthz on a new connection each time (Python's
               http.client / ssl, N requests): the TLS handshake's cost

Output: one JSON object per line (workload, http_req_s, https_req_s,
ratio, and MB/s for the raw fetches).

usage: tls_bench.py [--seconds N] [--rounds N] [--conns N]
  env: PULSE_BUILDDIR (where pulsed is; default .), BENCH_DIR (default /tmp)
Build without sanitizers first (see docs/Performance.md "How to run")."""

import argparse
import base64
import http.client
import json
import os
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RAW = "/v1/topics/b/partitions/0/records?format=raw&offset=0&max_bytes=1048576"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def make_cert(d):
    key, pem = os.path.join(d, "k.pem"), os.path.join(d, "c.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", pem, "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return pem, key


class Pulsed:
    def __init__(self, pulsed, d, tls):
        self.port = free_port()
        self.tls = tls
        args = [pulsed, "--data-dir", os.path.join(d, "data"), "--listen", "127.0.0.1:%d" % self.port,
                "-o", "log.level=warn", "-o", "storage.sync-mode=interval"]
        if tls:
            args += ["-o", "tls.cert-file=" + tls[0], "-o", "tls.key-file=" + tls[1]]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL)
        self.base = ("https" if tls else "http") + "://127.0.0.1:%d" % self.port
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if self.req("GET", "/readyz")[0] == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("pulsed did not start")

    def conn(self):
        if self.tls:
            ctx = ssl.create_default_context(cafile=self.tls[0])
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=30, context=ctx)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def req(self, method, path, body=None):
        c = self.conn()
        try:
            hdrs = {"Content-Type": "application/json"} if body is not None else {}
            c.request(method, path, body=json.dumps(body) if body is not None else None, headers=hdrs)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def fill(srv):
    srv.req("POST", "/v1/topics", {"name": "b"})
    blob = base64.b64encode(os.urandom(64 * 1024)).decode()
    for _ in range(8):  # 4 MiB in 64 KiB records, 8 per batch
        assert srv.req("POST", "/v1/topics/b/records", {"records": [{"value_base64": blob}] * 8})[0] == 200
    small = "x" * 256
    srv.req("POST", "/v1/topics", {"name": "s"})
    for _ in range(2):
        srv.req("POST", "/v1/topics/s/records", {"records": [{"value": small}] * 100})
    # Readers see synced records only: wait for the interval sync.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        st, body = srv.req("GET", "/v1/topics/s/partitions/0/records?offset=0&max_records=100")
        if st == 200 and len(json.loads(body)["records"]) == 100 and \
                len(srv.req("GET", RAW)[1]) > 512 * 1024:
            return
        time.sleep(0.1)
    raise SystemExit("the published records did not become readable")


def wrk(url, conns, secs, env):
    e = dict(os.environ)
    e.update(env)
    p = subprocess.run(["wrk", "-t1" if conns == 1 else "-t2", "-c%d" % conns, "-d%ds" % secs,
                        "-s", os.path.join(HERE, "wrk_bench.lua"), url], capture_output=True, env=e, timeout=secs + 60)
    line = [ln for ln in p.stdout.decode().splitlines() if ln.startswith("{")][-1]
    j = json.loads(line)
    errs = j["err_connect"] + j["err_read"] + j["err_write"] + j["err_status"] + j["err_timeout"]
    if errs:
        raise SystemExit("wrk errors on %s: %r" % (url, j))
    secs_run = j["duration_us"] / 1e6
    return j["requests"] / secs_run, j["bytes"] / secs_run / 1e6


def new_conns(srv, n):
    t0 = time.perf_counter()
    for _ in range(n):
        assert srv.req("GET", "/healthz")[0] == 200
    return n / (time.perf_counter() - t0), 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--new-conns", type=int, default=300)
    a = ap.parse_args()
    for tool in ("wrk", "openssl"):
        if not shutil.which(tool):
            raise SystemExit("tls_bench: %s is needed" % tool)
    pulsed = os.path.join(os.environ.get("PULSE_BUILDDIR", "."), "pulsed")
    top = tempfile.mkdtemp(prefix="pulse-tls-bench-", dir=os.environ.get("BENCH_DIR", "/tmp"))
    servers = []
    try:
        cert = make_cert(top)
        for name, tls in (("http", None), ("https", cert)):
            d = os.path.join(top, name)
            os.makedirs(d)
            servers.append(Pulsed(pulsed, d, tls))
        for s in servers:
            fill(s)
        raw = RAW
        work = [
            ("raw_1mib", lambda s: wrk(s.base, 1, a.seconds, {"BENCH_MODE": "get", "BENCH_PATH": raw})),
            ("raw_1mib_c4", lambda s: wrk(s.base, 4, a.seconds, {"BENCH_MODE": "get", "BENCH_PATH": raw})),
            ("json_100", lambda s: wrk(s.base, 1, a.seconds, {
                "BENCH_MODE": "get", "BENCH_PATH": "/v1/topics/s/partitions/0/records?offset=0&max_records=100"})),
            ("publish_1", lambda s: wrk(s.base, 1, a.seconds, {
                "BENCH_MODE": "post", "BENCH_PATH": "/v1/topics/s/records", "BENCH_RECORDS": "1"})),
            ("new_conn", lambda s: new_conns(s, a.new_conns)),
        ]
        for name, fn in work:
            res = {"http": [], "https": []}
            for _ in range(a.rounds):
                for s, key in zip(servers, ("http", "https")):
                    res[key].append(fn(s))
            h = statistics.median(r[0] for r in res["http"])
            t = statistics.median(r[0] for r in res["https"])
            out = {"bench": "tls", "workload": name, "http_req_s": round(h, 1), "https_req_s": round(t, 1),
                   "ratio": round(t / h, 3), "http_us_per_req": round(1e6 / h, 1),
                   "https_us_per_req": round(1e6 / t, 1)}
            if name.startswith("raw"):
                out["http_mb_s"] = round(statistics.median(r[1] for r in res["http"]), 1)
                out["https_mb_s"] = round(statistics.median(r[1] for r in res["https"]), 1)
            print(json.dumps(out), flush=True)
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
