#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Instruction counts per durable publish, one workload at a time, against a
pulsed running under valgrind --tool=callgrind in every-write mode
(docs/Performance.md "Durable publish: CPU per request"). The same work
every run, so two builds compare on a busy machine.

    valgrind --tool=callgrind --callgrind-out-file=cg.%p ./pulsed \\
        -o storage.sync-mode=every-write ... &
    python3 bench/publish_cg.py PORT PID [N]

PID is the valgrind process; before each workload its counters are zeroed
(callgrind_control -z) and after it they are dumped (callgrind_control -d
NAME), so every dump holds exactly the N requests of one workload:

  pub1       POST of one record of 256 B ({"value": ...}), what
             bench-http's 32-connection publish sends
  pub100     POST of 100 records of 256 B, its 8-connection bulk publish
  pubhdr     POST of 10 records with a key and a header each

All on one kept-alive connection to 127.0.0.1 only; each answer waits for
its fdatasync, which the publisher leads itself at one connection.
"""
import http.client
import json
import subprocess
import sys
import time

VALUE = "abcdefghijklmnop" * 16  # 256 bytes, as in wrk_bench.lua


def main():
    port = int(sys.argv[1])
    pid = sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def req(method, path, body=None):
        c.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
        r = c.getresponse()
        return r.status, r.read()

    for _ in range(600):
        try:
            if req("GET", "/readyz")[0] == 200:
                break
        except OSError:
            time.sleep(0.2)
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    req("POST", "/v1/topics", json.dumps({"name": "p", "partitions": 1}))
    pub1 = json.dumps({"records": [{"value": VALUE}]}, separators=(",", ":"))
    pub100 = json.dumps({"records": [{"value": VALUE}] * 100}, separators=(",", ":"))
    hdr = json.dumps({"records": [{"key": "k%d" % i, "value": VALUE, "headers": {"h": "x"}} for i in range(10)]})
    for _ in range(20):  # warm: the first requests grow pools and caches
        assert req("POST", "/v1/topics/p/records", pub1)[0] == 200

    def phase(name, body):
        subprocess.run(["callgrind_control", "-z", pid], check=True, stdout=subprocess.DEVNULL)
        for _ in range(n):
            st, answer = req("POST", "/v1/topics/p/records", body)
            assert st == 200, (st, answer)
        subprocess.run(["callgrind_control", "-d", name, pid], check=True, stdout=subprocess.DEVNULL)
        print(name, n, flush=True)

    phase("pub1", pub1)
    phase("pub100", pub100)
    phase("pubhdr", hdr)


if __name__ == "__main__":
    main()
