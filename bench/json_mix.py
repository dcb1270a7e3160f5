#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Instruction counts per request of the JSON paths, one workload at a time,
against a pulsed running under valgrind --tool=callgrind (docs/Performance.md
"JSON encode and parse"). The same work every run, so two builds compare
on a busy machine.

    valgrind --tool=callgrind --callgrind-out-file=cg.%p ./pulsed ... &
    python3 bench/json_mix.py PORT PID [N]

PID is the valgrind process; before each workload its counters are zeroed
(callgrind_control -z) and after it they are dumped (callgrind_control -d
NAME), so every dump holds exactly the N requests of one workload:

  fetch100   GET of 100 JSON records of 256 B at random offsets (the
             records bench/http_bench.sh fetches)
  pub100     POST of 100 records of 256 B ({"value": ...}, the fast path)
  pubhdr     POST of 10 records with a key and a header (jansson path)
  pubreal    POST of 10 records whose value is a JSON object with reals

All on one kept-alive connection to 127.0.0.1 only.
"""
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import VALUE, Client, callgrind_phase  # noqa: E402


def main():
    port = int(sys.argv[1])
    pid = sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    c = Client(port)
    req = c.req
    c.wait_ready()
    c.create_topics(["j", "p"])
    pub100 = json.dumps({"records": [{"value": VALUE}] * 100}, separators=(",", ":"))
    for _ in range(60):  # 6,000 records to fetch from
        assert req("POST", "/v1/topics/j/records", pub100)[0] == 200
    # Interval sync: the records become visible once synced.
    for _ in range(600):
        if json.loads(req("GET", "/v1/topics/j")[1])["partition_stats"][0]["high_watermark"] >= 6000:
            break
        time.sleep(0.1)
    rnd = random.Random(14)
    hdr = json.dumps({"records": [{"key": "k%d" % i, "value": VALUE, "headers": {"h": "x"}} for i in range(10)]})
    real = json.dumps({"records": [{"key": "k%d" % i, "value": {"temp": 21.5 + i / 10, "lat": 52.520008,
                                                                   "lon": 13.404954, "ok": True, "n": 1234567,
                                                                   "tags": ["a", "b"], "name": "sensor-%d" % i}}
                                   for i in range(10)]})

    def fetch(i):
        st, body = req("GET", "/v1/topics/j/partitions/0/records?max_records=100&offset=%d" % rnd.randrange(5900))
        assert st == 200 and body.count(b'"offset"') == 100, st

    callgrind_phase(pid, "fetch100", n, fetch)
    callgrind_phase(pid, "pub100", n, lambda i: req("POST", "/v1/topics/p/records", pub100))
    callgrind_phase(pid, "pubhdr", n, lambda i: req("POST", "/v1/topics/p/records", hdr))
    callgrind_phase(pid, "pubreal", n, lambda i: req("POST", "/v1/topics/p/records", real))


if __name__ == "__main__":
    main()
