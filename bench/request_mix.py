#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A fixed mix of requests against a running pulsed, for instruction counts
(valgrind --tool=callgrind on the server): the same work every run, so two
builds can be compared on a busy machine (docs/Performance.md "Before and
after the structure change").

    python3 bench/request_mix.py PORT [N]

Creates topic "b" (4 partitions), then N JSON publishes of 10 records
(256-byte value, a key, one header), N JSON fetches of up to 20 records,
N/4 raw fetches and N/4 cursor commits, all on one kept-alive connection.
"""
import http.client
import json
import sys
import time


def main():
    port = int(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def req(method, path, body=None, headers=None):
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read()

    for _ in range(200):
        try:
            if req("GET", "/readyz")[0] == 200:
                break
        except OSError:
            time.sleep(0.2)
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    json_h = {"Content-Type": "application/json"}
    req("POST", "/v1/topics", json.dumps({"name": "b", "partitions": 4}), json_h)
    val = "v" * 256
    for i in range(n):
        body = json.dumps({"records": [{"key": "k%d" % (i * 10 + j), "value": val, "headers": {"h": "x"}}
                                       for j in range(10)]})
        st, _ = req("POST", "/v1/topics/b/records", body, json_h)
        assert st == 200, st
    for i in range(n):
        st, _ = req("GET", "/v1/topics/b/partitions/%d/records?offset=%d&max_records=20" % (i % 4, (i * 7) % (n * 2)))
        assert st == 200, st
    for i in range(n // 4):
        st, _ = req("GET", "/v1/topics/b/partitions/%d/records?offset=%d&format=raw" % (i % 4, (i * 7) % (n * 2)))
        assert st == 200, st
    for i in range(n // 4):
        st, _ = req("PUT", "/v1/consumers/c/cursors/b/%d" % (i % 4), json.dumps({"offset": i}), json_h)
        assert st in (200, 204), st
    print("done")


if __name__ == "__main__":
    main()
