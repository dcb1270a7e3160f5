#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Consumer-group figures against a running pulsed on loopback (standard
library only):

  rebalance  time for a group of N members (default 10) to settle after the
             N-th member joins, and after one member leaves: from the call
             until every partition is owned by the member the assignment
             gives it to and every member was told the new generation. The
             members run the usual loop (group fetch with max_wait_ms, no
             records to process), each in its own thread.
  throughput records per second read by one client from a P-partition topic
             (a) with single-partition fetches, partition after partition,
             (b) with group fetches of one member owning every partition,
             with and without a commit after each batch.

    pulsed --data-dir /tmp/bench-data --listen 127.0.0.1:8090 &
    python3 bench/group_bench.py --url http://127.0.0.1:8090

Only loopback addresses are accepted.
"""

import argparse
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse


class Client:
    """One keep-alive connection."""

    def __init__(self, url):
        u = urllib.parse.urlparse(url)
        if u.hostname not in ("127.0.0.1", "localhost", "::1"):
            sys.exit("loopback addresses only")
        self.host, self.port = u.hostname, u.port or 80
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)

    def req(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                raw = r.read()
                return r.status, (json.loads(raw) if raw else None)
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
                if attempt:
                    raise
        return None


def make_topic(c, name, partitions):
    st, doc = c.req("POST", "/v1/topics", {"name": name, "partitions": partitions})
    if st != 201:
        sys.exit("create %s: %d %s" % (name, st, doc))


# ---- rebalance -----------------------------------------------------------------

class Member(threading.Thread):
    def __init__(self, url, group, topic, wait_ms, lease_ms):
        super().__init__(daemon=True)
        self.c = Client(url)
        self.url, self.group, self.wait_ms = url, group, wait_ms
        st, doc = self.c.req("POST", "/v1/groups/%s/members" % group, {"topics": [topic], "lease_ms": lease_ms})
        if st != 201:
            sys.exit("join: %d %s" % (st, doc))
        self.id = doc["member_id"]
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.c.req("GET", "/v1/groups/%s/members/%s/records?max_wait_ms=%d" % (self.group, self.id, self.wait_ms))

    def leave(self):
        """From another thread than the member's: its own connection."""
        self.stop.set()
        Client(self.url).req("DELETE", "/v1/groups/%s/members/%s" % (self.group, self.id))


def settled(c, group, members):
    st, d = c.req("GET", "/v1/groups/%s" % group)
    if st != 200 or len(d["members"]) != members:
        return False
    return all(p["owner"] == p["assigned_to"] and p["owner"] for p in d["partitions"]) and \
        all(m["generation"] == d["generation"] for m in d["members"])


def wait_settled(c, group, members, t0, timeout=30):
    while time.monotonic() - t0 < timeout:
        if settled(c, group, members):
            return time.monotonic() - t0
        time.sleep(0.001)
    sys.exit("group %s did not settle in %ds" % (group, timeout))


def bench_rebalance(url, members, partitions, wait_ms, rounds):
    c = Client(url)
    joins, leaves = [], []
    for r in range(rounds):
        topic, group = "rb-%d-%d" % (int(time.time()), r), "rbg-%d-%d" % (int(time.time()), r)
        make_topic(c, topic, partitions)
        ms = []
        for _ in range(members - 1):
            m = Member(url, group, topic, wait_ms, 30000)
            m.start()
            ms.append(m)
        wait_settled(c, group, members - 1, time.monotonic())
        t0 = time.monotonic()
        last = Member(url, group, topic, wait_ms, 30000)
        last.start()
        ms.append(last)
        joins.append(wait_settled(c, group, members, t0))
        t0 = time.monotonic()
        ms[0].leave()
        leaves.append(wait_settled(c, group, members - 1, t0))
        for m in ms[1:]:
            m.leave()
        for m in ms:
            m.join(5)
        c.req("DELETE", "/v1/topics/" + topic)
    return joins, leaves


# ---- throughput ----------------------------------------------------------------

def fill(c, topic, partitions, records, size):
    value = "x" * size
    batch = 500
    for i in range(0, records, batch):
        recs = [{"value": value, "partition": (i + j) % partitions} for j in range(min(batch, records - i))]
        st, doc = c.req("POST", "/v1/topics/%s/records" % topic, {"records": recs})
        if st != 200:
            sys.exit("publish: %d %s" % (st, doc))


def single_partition_fetch(c, topic, partitions, max_records):
    n = 0
    t0 = time.monotonic()
    for p in range(partitions):
        off = 0
        while True:
            st, doc = c.req("GET", "/v1/topics/%s/partitions/%d/records?offset=%d&max_records=%d"
                            % (topic, p, off, max_records))
            if not doc["records"]:
                break
            n += len(doc["records"])
            off = doc["next_offset"]
    return n, time.monotonic() - t0


def group_fetch(c, topic, max_records, commit):
    group_fetch.runs += 1
    group = "tp-%s-%d-%d" % (topic, int(commit), group_fetch.runs)
    st, doc = c.req("POST", "/v1/groups/%s/members" % group, {"topics": [topic], "lease_ms": 60000})
    m = doc["member_id"]
    n = 0
    resume = ""
    t0 = time.monotonic()
    while True:
        # Without a commit after each batch, the member reads on by giving
        # back the last answer's resume (the broker keeps no read position).
        st, doc = c.req("GET", "/v1/groups/%s/members/%s/records?max_records=%d%s"
                        % (group, m, max_records, "" if commit else resume))
        if not doc["records"]:
            break
        resume = "&resume=" + urllib.parse.quote(doc["resume"])
        n += len(doc["records"])
        if commit:
            st, _ = c.req("POST", "/v1/groups/%s/members/%s/commit" % (group, m),
                          {"generation": doc["generation"], "offsets": doc["positions"]})
            if st != 200:
                sys.exit("commit: %d" % st)
    dt = time.monotonic() - t0
    c.req("DELETE", "/v1/groups/%s/members/%s" % (group, m))
    return n, dt


group_fetch.runs = 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8090")
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--rebalance-partitions", type=int, default=60)
    ap.add_argument("--wait-ms", type=int, default=200, help="members' max_wait_ms")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--records", type=int, default=120000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--max-records", type=int, default=1000)
    args = ap.parse_args()

    joins, leaves = bench_rebalance(args.url, args.members, args.rebalance_partitions, args.wait_ms, args.rounds)
    print("rebalance, %d members, %d partitions, members long-poll %d ms, %d rounds:"
          % (args.members, args.rebalance_partitions, args.wait_ms, args.rounds))
    for what, xs in (("join of the last member", joins), ("leave of one member", leaves)):
        print("  %-24s median %6.1f ms  min %6.1f  max %6.1f" % (what, statistics.median(xs) * 1e3, min(xs) * 1e3,
                                                                  max(xs) * 1e3))
    c = Client(args.url)
    topic = "tp-%d" % int(time.time())
    make_topic(c, topic, args.partitions)
    fill(c, topic, args.partitions, args.records, args.value_bytes)
    print("throughput, %d records of %d bytes over %d partitions, max_records=%d, one client:"
          % (args.records, args.value_bytes, args.partitions, args.max_records))
    for name, fn in (("single-partition fetch", lambda: single_partition_fetch(c, topic, args.partitions,
                                                                               args.max_records)),
                     ("group fetch", lambda: group_fetch(c, topic, args.max_records, False)),
                     ("group fetch + commit", lambda: group_fetch(c, topic, args.max_records, True))):
        best = None
        for _ in range(3):
            n, dt = fn()
            if n != args.records:
                sys.exit("%s read %d records, expected %d" % (name, n, args.records))
            best = dt if best is None or dt < best else best
        print("  %-24s %9.0f records/s  (best of 3: %.3f s)" % (name, args.records / best, best))
    c.req("DELETE", "/v1/topics/" + topic)


if __name__ == "__main__":
    main()
