# SPDX-License-Identifier: MIT
"""Restart persistence: after SIGTERM (exit 0) and a restart on the same data
directory, topics (with their settings and created_at), every record (byte
for byte, raw and JSON), cursors and consumers, and the broker identity are
all as they were, and new publishes continue at the next offset."""

import os
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pulsetest  # noqa: E402

pulsetest.exit_unless_local("restarts pulsed, and the mock cluster lives and dies inside it (a real cluster keeps the data)")

from pulsetest import (Threads, b64, check, eq, expect_error, expect_json, expect_status, main,  # noqa: E402
                       raw_request, uniq)


def snapshot(srv, topics, consumers):
    state = {"topics": srv.topics(), "records": {}, "raw": {}, "cursors": {}}
    for t in topics:
        for p in range(srv.topic(t)["partitions"]):
            recs, _ = srv.fetch_all(t, p)
            state["records"][(t, p)] = recs
            r = srv.fetch(t, p, format="raw", max_bytes=67108864)
            expect_status(r, 200, "raw fetch")
            state["raw"][(t, p)] = r.body
    for c in consumers:
        state["cursors"][c] = expect_json(srv.get("/v1/consumers/%s/cursors" % c), 200, "cursors")
    state["consumers"] = expect_json(srv.get("/v1/consumers"), 200, "consumers")
    broker = expect_json(srv.get("/v1/broker"), 200, "broker")
    state["ids"] = (broker["cluster_id"], broker["broker_id"])
    return state


def compare(a, b, what):
    eq(b["topics"], a["topics"], "%s: topics" % what)
    for k in a["records"]:
        eq(b["records"][k], a["records"][k], "%s: records of %s/%d" % (what, k[0], k[1]))
        eq(b["raw"][k], a["raw"][k], "%s: raw bytes of %s/%d" % (what, k[0], k[1]))
    eq(b["cursors"], a["cursors"], "%s: cursors" % what)
    eq(b["consumers"], a["consumers"], "%s: consumer list" % what)
    eq(b["ids"], a["ids"], "%s: cluster and broker ids" % what)


def test_state_survives_sigterm_and_restart(ctx):
    srv = ctx.new_server()
    srv.start()
    t1, t2, gone = uniq("orders"), uniq("compacted"), uniq("gone")
    srv.create_topic(t1, partitions=3, retention_ms=3600000, segment_bytes=2048)
    srv.create_topic(t2, cleanup="compact", retention_bytes=123456)
    srv.create_topic(gone)
    expect_json(srv.req("PATCH", "/v1/topics/" + t1, {"retention_bytes": 1 << 30}), 200, "patch")
    for i in range(30):
        srv.publish(t1, [{"key": "k%d" % (i % 7), "value": {"i": i}, "headers": {"n": str(i)}},
                         {"value_base64": b64(bytes([i, 0, 255])), "partition": i % 3}])
    srv.publish(t2, [{"key": "a", "value": "1"}, {"key": "a", "value": None},
                     {"key_base64": b64(b"\xff"), "value": "bin-key"}])
    srv.publish(gone, [{"value": "bye"}])
    c1, c2 = uniq("reader"), uniq("other")
    expect_json(srv.req("PUT", "/v1/consumers/%s/cursors/%s/1" % (c1, t1), {"offset": 5}), 200, "cursor")
    expect_json(srv.req("POST", "/v1/consumers/%s/cursors" % c2,
                        {"cursors": [{"topic": t1, "partition": 0, "offset": 3},
                                     {"topic": t2, "partition": 0, "offset": 2}]}), 200, "batch cursor")
    expect_status(srv.req("DELETE", "/v1/topics/" + gone), 204, "delete topic")
    before = snapshot(srv, [t1, t2], [c1, c2])

    srv.stop()  # requires exit 0
    srv.start()
    after = snapshot(srv, [t1, t2], [c1, c2])
    compare(before, after, "after first restart")
    expect_error(srv.get("/v1/topics/" + gone), 404, "topic_not_found", "deleted topic stays deleted")

    # New publishes continue at the next offset of each partition.
    hws = {p: srv.hw(t1, p) for p in range(3)}
    offs = srv.publish(t1, [{"value": "after", "partition": p} for p in range(3)])
    eq(offs, [(p, hws[p]) for p in range(3)], "offsets after restart")
    c3 = uniq("late")
    expect_json(srv.req("PUT", "/v1/consumers/%s/cursors/%s/0" % (c3, t2), {"offset": 1}), 200, "cursor")
    before2 = snapshot(srv, [t1, t2], [c1, c2, c3])

    srv.stop()
    srv.start()
    compare(before2, snapshot(srv, [t1, t2], [c1, c2, c3]), "after second restart")
    srv.stop()


def test_restart_of_an_empty_broker_keeps_its_identity(ctx):
    srv = ctx.new_server()
    srv.start()
    b1 = expect_json(srv.get("/v1/broker"), 200, "broker")
    eq(srv.topics(), {"topics": []}, "fresh broker has no topics")
    srv.stop()
    srv.start()
    b2 = expect_json(srv.get("/v1/broker"), 200, "broker")
    eq((b2["cluster_id"], b2["broker_id"]), (b1["cluster_id"], b1["broker_id"]), "ids across restart")
    eq(srv.topics(), {"topics": []}, "still no topics")
    srv.stop()


def test_sigint_also_shuts_down_cleanly(ctx):
    import signal
    srv = ctx.new_server()
    srv.start()
    t = uniq("int")
    srv.create_topic(t)
    srv.publish(t, [{"value": "x"}])
    srv.proc.send_signal(signal.SIGINT)
    eq(srv.proc.wait(timeout=60), 0, "exit status after SIGINT")
    srv.proc = None
    srv.start()
    eq(srv.hw(t), 1, "record kept")
    srv.stop()


def test_sigterm_during_concurrent_publishes_keeps_every_ack(ctx):
    # Draining: publishes in flight complete, new ones get 503 (or find the
    # listener closed); every acknowledged record is there after the restart.
    srv = ctx.new_server()
    srv.start()
    t = uniq("drain")
    srv.create_topic(t, partitions=2)
    acked, bad = [], []
    lock = threading.Lock()
    stop = threading.Event()

    def publisher(n):
        i = 0
        while not stop.is_set():
            i += 1
            v = "p%d-%d" % (n, i)
            try:
                r = raw_request(srv.port, "POST", "/v1/topics/%s/records" % t,
                                {"records": [{"value": v, "partition": n % 2}]}, timeout=30)
            except Exception:  # noqa: BLE001 - listener closed while draining
                return
            if r.status == 200:
                with lock:
                    acked.append((n % 2, r.json()["offsets"][0]["offset"], v))
            elif r.status == 503:
                err = r.json().get("error", {})
                if err.get("code") != "unavailable":
                    bad.append("503 with code %r" % err.get("code"))
                return
            else:
                bad.append("HTTP %d: %r" % (r.status, r.body[:200]))
                return

    th = Threads()
    for n in range(4):
        th.start(publisher, n)
    time.sleep(0.5)
    srv.stop()  # SIGTERM while publishing; requires exit 0
    stop.set()
    check(th.join(30), "publishers did not finish")
    check(not bad, "unexpected answers while draining: %r" % bad[:5])
    check(acked, "nothing was acknowledged before the SIGTERM")
    srv.start()
    for p in range(2):
        recs, _ = srv.fetch_all(t, p)
        stored = {r["offset"]: r["value"] for r in recs}
        for part, off, v in acked:
            if part == p:
                eq(stored.get(off), v, "acknowledged record at %d/%d after drain and restart" % (p, off))
    srv.stop()


def test_abandoned_partial_request_does_not_stall_shutdown(ctx):
    # A client that sends headers and part of a body, half-closes and goes
    # away has nothing in flight: SIGTERM must not wait for it.  The race
    # does not show every time, hence several rounds.
    for i in range(5):
        srv = ctx.new_server()
        srv.start()
        c = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        c.sendall(b"POST /v1/topics HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 50\r\n\r\n{\"name\"")
        c.shutdown(socket.SHUT_WR)
        time.sleep(0.3)
        c.close()
        time.sleep(0.2)
        expect_json(srv.get("/healthz"), 200, "healthz")
        t0 = time.monotonic()
        srv.stop(timeout=30)
        took = time.monotonic() - t0
        check(took < 5, "round %d: SIGTERM took %.1f s after a client abandoned a partial request\n%s"
              % (i, took, srv.stderr_tail(5)))


def start_lines(srv):
    """The lines this start logged up to "listening"."""
    with open(srv.stderr_path, "rb") as f:
        lines = f.read().decode("utf-8", "replace").splitlines()
    for i, line in enumerate(lines):
        if " listening on " in line:
            return lines[:i]
    return lines


def test_a_start_logs_one_summary_line_not_one_per_partition(ctx):
    srv = ctx.new_server(args=["-o", "log.level=info"])
    srv.start()
    for t in ("loga", "logb"):
        srv.create_topic(t, partitions=8)
        srv.publish(t, [{"value": "v%d" % p, "partition": p} for p in range(8)])
    with open(srv.stderr_path, "rb") as f:
        created = f.read().decode("utf-8", "replace")
    check("/topics/log" not in created, "new partitions log nothing of their recovery at info: %r" % created[-1500:])
    srv.stop()

    srv.start()
    lines = start_lines(srv)
    eq([line for line in lines if "/topics/" in line], [], "partition lines of a clean start")
    summaries = [line for line in lines if "recovered 2 topics, 16 partitions" in line]
    eq(len(summaries), 1, "summary lines in %r" % lines)
    check("0 partitions repaired" in summaries[0], "the summary: %r" % summaries[0])
    check(len(lines) <= 3, "a clean start of 16 partitions logs a few lines, not one per partition: %r" % lines)
    srv.stop()

    # A torn tail in one partition: that partition is named, the summary
    # counts it, the others stay quiet.
    part = os.path.join(srv.data_dir, "topics", "loga", "3")
    seg = sorted(f for f in os.listdir(part) if f.endswith(".log"))[-1]
    with open(os.path.join(part, seg), "ab") as f:
        f.write(b"\x01\x02\x03\x04\x05")
    srv.start()
    lines = start_lines(srv)
    named = [line for line in lines if "/topics/" in line or "topic loga partition" in line]
    check(named, "the repaired partition is named: %r" % lines)
    check(all("loga/3" in line or "topic loga partition 3" in line for line in named),
          "only the repaired partition is named: %r" % named)
    summaries = [line for line in lines if "recovered 2 topics, 16 partitions" in line]
    eq(len(summaries), 1, "summary lines in %r" % lines)
    check("1 partition repaired" in summaries[0] and "truncated 5 torn bytes" in summaries[0],
          "the summary: %r" % summaries[0])
    srv.stop()


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
