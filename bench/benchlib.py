# SPDX-License-Identifier: MIT
"""What the callgrind request benchmarks (json_mix.py, publish_cg.py) share:
one kept-alive HTTP connection to a pulsed on 127.0.0.1, waiting for it to
be ready, creating topics, and measuring one workload at a time in a
pulsed running under valgrind --tool=callgrind. Standard library only.
"""
import http.client
import json
import subprocess
import time

VALUE = "abcdefghijklmnop" * 16  # 256 bytes, as in wrk_bench.lua


class Client:
    """One kept-alive connection to 127.0.0.1:port (loopback only)."""

    def __init__(self, port, timeout=120):
        self.port = port
        self.timeout = timeout
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def req(self, method, path, body=None):
        """(status, body bytes) of one request; a body is sent as JSON."""
        self.c.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
        r = self.c.getresponse()
        return r.status, r.read()

    def wait_ready(self, tries=600):
        """Polls /readyz (a starting pulsed under valgrind is slow)."""
        for _ in range(tries):
            try:
                if self.req("GET", "/readyz")[0] == 200:
                    return
            except OSError:
                self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            time.sleep(0.2)
        raise SystemExit("pulsed on port %d was not ready after %d tries" % (self.port, tries))

    def create_topics(self, names, partitions=1):
        """Creates each topic (one that exists already is left alone)."""
        for name in names:
            self.req("POST", "/v1/topics", json.dumps({"name": name, "partitions": partitions}))


def callgrind_phase(pid, name, n, fn):
    """Zeroes the counters of callgrind process pid, calls fn(i) for i in
    range(n), and dumps the counters as NAME: the dump then holds exactly
    that workload's n requests."""
    subprocess.run(["callgrind_control", "-z", str(pid)], check=True, stdout=subprocess.DEVNULL)
    for i in range(n):
        fn(i)
    subprocess.run(["callgrind_control", "-d", name, str(pid)], check=True, stdout=subprocess.DEVNULL)
    print(name, n, flush=True)
