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
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import VALUE, Client, callgrind_phase  # noqa: E402


def main():
    port = int(sys.argv[1])
    pid = sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    c = Client(port)
    c.wait_ready()
    c.create_topics(["p"])
    pub1 = json.dumps({"records": [{"value": VALUE}]}, separators=(",", ":"))
    pub100 = json.dumps({"records": [{"value": VALUE}] * 100}, separators=(",", ":"))
    hdr = json.dumps({"records": [{"key": "k%d" % i, "value": VALUE, "headers": {"h": "x"}} for i in range(10)]})
    for _ in range(20):  # warm: the first requests grow pools and caches
        assert c.req("POST", "/v1/topics/p/records", pub1)[0] == 200

    def publish(body):
        def one(i):
            st, answer = c.req("POST", "/v1/topics/p/records", body)
            assert st == 200, (st, answer)
        return one

    callgrind_phase(pid, "pub1", n, publish(pub1))
    callgrind_phase(pid, "pub100", n, publish(pub100))
    callgrind_phase(pid, "pubhdr", n, publish(hdr))


if __name__ == "__main__":
    main()
