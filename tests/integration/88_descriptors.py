# SPDX-License-Identifier: MIT
"""Descriptors are bounded, not proportional to data (docs/Operations.md
"Descriptor budget").

pulsed runs under a descriptor limit of 512 (prlimit --nofile=512:512).  A
topic of 4 partitions with 1 KiB segments gets 1,600 segments; pulsed is
restarted on them and serves every record (JSON and raw, bytes checked, from
several threads), takes more publishes and creates a topic.  No answer is
ever a 500 and the process never holds more descriptors than its budget.
Then 600 clients connect at once, more than the limit: pulsed neither spins
nor floods its log, and serves again once they leave."""

import os
import shutil
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pulsetest  # noqa: E402

pulsetest.exit_unless_local("counts the local backend's segment descriptors")

from pulsetest import (Skip, check, decode_batches, eq, expect_json, fail, main, quote_path, raw_request,  # noqa: E402
                       uniq)

LIMIT = 512
PARTITIONS = 4
SEGMENTS_PER_PARTITION = 400
VALUE_BYTES = 900  # one record per 1 KiB segment: every append rolls


def value_of(p, i):
    head = "p%d-r%05d-" % (p, i)
    return head + chr(ord("a") + (p * 7 + i) % 26) * (VALUE_BYTES - len(head))


class Answers:
    """Counts every status code; a 500 is never acceptable."""

    def __init__(self):
        self.lock = threading.Lock()
        self.codes = {}

    def note(self, r, what):
        with self.lock:
            self.codes[r.status] = self.codes.get(r.status, 0) + 1
        check(r.status != 500, "%s answered 500: %r" % (what, r))
        return r


def run_all(fns, timeout=300):
    """Runs the callables in threads; re-raises the first failure."""
    errors = []

    def wrap(fn):
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(fn,), daemon=True) for fn in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        check(not t.is_alive(), "a worker thread did not finish in %d s" % timeout)
    if errors:
        raise errors[0]


def fd_limit(pid):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    fail("no descriptor limit in /proc/%d/limits" % pid)


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def metric(srv, name):
    r = srv.get("/metrics")
    eq(r.status, 200, "metrics")
    for line in r.body.decode("utf-8").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    fail("metric %s missing" % name)


def publish_partition(srv, topic, p, answers, first, count):
    for i in range(first, first + count):
        r = answers.note(srv.req("POST", "/v1/topics/%s/records" % quote_path(topic),
                                 {"records": [{"value": value_of(p, i), "partition": p}]}),
                         "publish %d/%d" % (p, i))
        eq(r.status, 200, "publish %d/%d" % (p, i))
        eq(r.json()["offsets"][0]["offset"], i, "offset of %d/%d" % (p, i))


def check_partition(srv, topic, p, count, answers):
    # JSON, every record.
    recs, _ = srv.fetch_all(topic, p)
    eq(len(recs), count, "records of partition %d" % p)
    for i, rec in enumerate(recs):
        if rec["offset"] != i or rec["value"] != value_of(p, i):
            fail("partition %d offset %d: got %r" % (p, i, (rec["offset"], rec["value"][:20])))
    # Raw: one segment per answer, so this walks every segment file.
    off, n = 0, 0
    while off < count:
        r = answers.note(srv.fetch(topic, p, format="raw", offset=off, max_bytes=1 << 20), "raw fetch")
        eq(r.status, 200, "raw fetch %d/%d" % (p, off))
        for b in decode_batches(r.body):
            for rec in b["records"]:
                if rec["offset"] < off:
                    continue
                check(rec["value"] == value_of(p, rec["offset"]).encode("ascii"),
                      "raw bytes of %d/%d" % (p, rec["offset"]))
                n += 1
                off = rec["offset"] + 1
    eq(n, count, "raw records of partition %d" % p)


def stderr_lines(srv):
    with open(srv.stderr_path, "rb") as f:
        return len(f.read().splitlines())


def connection_flood(srv, n):
    """n clients connect at once and stay a while; returns the log lines
    pulsed wrote meanwhile."""
    before = stderr_lines(srv)
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(("127.0.0.1", srv.port))
            socks.append(s)
        time.sleep(2)
    finally:
        for s in socks:
            s.close()
    return stderr_lines(srv) - before


def test_many_segments_under_512_descriptors(ctx):
    if shutil.which("prlimit") is None:
        raise Skip("prlimit (util-linux) is not installed")
    answers = Answers()
    srv = ctx.new_server(args=["-o", "storage.segment-fd-cache=64"],
                         wrapper=["prlimit", "--nofile=%d:%d" % (LIMIT, LIMIT), "--"])
    srv.start()
    pid = srv.server_pid()
    eq(fd_limit(pid), LIMIT, "pulsed's descriptor limit")
    topic = uniq("many")
    srv.create_topic(topic, partitions=PARTITIONS, segment_bytes=1024)
    run_all([(lambda p=p: publish_partition(srv, topic, p, answers, 0, SEGMENTS_PER_PARTITION))
             for p in range(PARTITIONS)])
    doc = srv.topic(topic)
    segments = sum(ps["segments"] for ps in doc["partition_stats"])
    check(segments >= PARTITIONS * SEGMENTS_PER_PARTITION, "only %d segments" % segments)
    check(fd_count(pid) < 200, "pulsed holds %d descriptors with %d segments" % (fd_count(pid), segments))
    check(metric(srv, "pulse_segment_fds_open") <= 64 + PARTITIONS,
          "segment descriptors open: %s" % metric(srv, "pulse_segment_fds_open"))

    # A restart recovers every segment within the limit, and serves them.
    srv.restart()
    pid = srv.server_pid()
    eq(fd_limit(pid), LIMIT, "pulsed's descriptor limit after the restart")
    for p in range(PARTITIONS):
        check_partition(srv, topic, p, SEGMENTS_PER_PARTITION, answers)
    check(metric(srv, "pulse_segment_fd_cache_evictions_total") > 0, "the cache evicted nothing")
    check(fd_count(pid) < 200, "pulsed holds %d descriptors after reading everything" % fd_count(pid))
    # Concurrent readers of many segments at once.
    run_all([(lambda p=p: check_partition(srv, topic, p, SEGMENTS_PER_PARTITION, answers))
             for p in range(PARTITIONS)])
    # Still takes writes and admin work.
    run_all([(lambda p=p: publish_partition(srv, topic, p, answers, SEGMENTS_PER_PARTITION, 20))
             for p in range(PARTITIONS)])
    other = uniq("other")
    answers.note(srv.req("POST", "/v1/topics", {"name": other, "partitions": 8, "segment_bytes": 1024}),
                 "create topic")
    srv.publish(other, [{"value": "x", "partition": p} for p in range(8)])
    expect_json(srv.get("/readyz"), 200, "readyz")
    eq(answers.codes.get(500, 0), 0, "500 answers")

    # More clients than descriptors: the connection limit was fitted below
    # the descriptor limit, so accept() never fails and nothing floods.
    lines = connection_flood(srv, 600)
    check(lines < 20, "pulsed logged %d lines while 600 clients connected" % lines)
    deadline = time.monotonic() + 20
    while True:
        try:
            r = raw_request(srv.port, "GET", "/readyz", timeout=2)
            if r.status == 200:
                break
        except OSError:
            pass
        check(time.monotonic() < deadline, "pulsed does not serve after the clients left")
        time.sleep(0.1)
    srv.stop()


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
