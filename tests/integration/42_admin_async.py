# SPDX-License-Identifier: MIT
"""Admin requests never tie up an HTTP worker. On a server with ONE worker
thread, cursor commits, topic creates and deletes suspend their connection
while the broker's committer and admin threads do the work, so every other
request is answered meanwhile:

- concurrent cursor commits share synced metadata writes, and a health check
  sent while they wait for the (slow) write is answered first;
- a topic delete that must wait for a long compaction step on its topic
  holds up no commit, create or health check;
- SIGTERM answers the commits still queued and exits 0;
- reads of cursors and consumers that the broker answers later (as a remote
  backend would; here the test hook makes the local one do so) suspend
  their connection too and come back with the same answers.

The slow parts are made slow on purpose with the PULSE_FAILPOINT_DELAY test
hook (each group write of cursor commits, each partition step of a
maintenance pass, or each cursor read, which the hook also moves off the
request's thread). The time checks are orderings with wide margins, not
performance measurements."""

import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (Threads, check, eq, expect_json, expect_status, main, raw_request,  # noqa: E402
                       uniq, exit_unless_local)

exit_unless_local("these tests drive the local backend's committer and admin thread (failpoints, "
                  "metadata sync metrics, compaction, restart)")

ONE_WORKER = ["-o", "server.threads=1"]


def metric(srv, name):
    r = srv.get("/metrics")
    expect_status(r, 200, "metrics")
    for line in r.body.decode("utf-8").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("metric %s missing" % name)


def timed(port, method, path, out, key, body=None):
    """Runs one request and stores (response or exception, monotonic end)."""
    try:
        r = raw_request(port, method, path, body=body, timeout=60)
    except Exception as e:  # noqa: BLE001
        r = e
    out[key] = (r, time.monotonic())


def test_concurrent_commits_suspend_and_share_metadata_writes(ctx):
    srv = ctx.new_server(args=ONE_WORKER, env={"PULSE_FAILPOINT_DELAY": "cursor_commit_write:800"})
    srv.start()
    t = uniq("g")
    srv.create_topic(t)
    srv.publish(t, [{"value": "x"}])
    writes0 = metric(srv, "pulse_meta_sync_writes_total")
    commits0 = metric(srv, "pulse_cursor_commits_total")
    n = 16
    out = {}
    th = Threads()
    for i in range(n):
        th.start(timed, srv.port, "PUT", "/v1/consumers/g%d/cursors/%s/0" % (i, t), out, i, {"offset": 1})
    time.sleep(0.2)
    timed(srv.port, "GET", "/healthz", out, "health")
    check(th.join(60), "the commits did not all finish")
    health, health_end = out["health"]
    check(not isinstance(health, Exception), "health check failed: %r" % (health,))
    expect_status(health, 200, "health check")
    ends = []
    for i in range(n):
        r, end = out[i]
        check(not isinstance(r, Exception), "commit %d failed: %r" % (i, r))
        doc = expect_json(r, 200, "commit %d" % i)
        eq(doc, {"consumer": "g%d" % i, "topic": t, "partition": 0, "offset": 1}, "commit %d answer" % i)
        ends.append(end)
    # The one worker was free while the commits waited for their write.
    check(health_end < min(ends),
          "the health check was answered %.3f s after the first commit: the worker was blocked"
          % (health_end - min(ends)))
    eq(metric(srv, "pulse_cursor_commits_total") - commits0, n, "commits stored")
    writes = metric(srv, "pulse_meta_sync_writes_total") - writes0
    check(1 <= writes <= n // 4, "%d commits took %d synced metadata writes" % (n, writes))
    for i in range(n):
        doc = expect_json(srv.get("/v1/consumers/g%d/cursors/%s/0" % (i, t)), 200, "cursor %d" % i)
        eq(doc["offset"], 1, "cursor %d" % i)


def test_a_delete_waiting_behind_a_long_compaction_holds_up_nobody(ctx):
    srv = ctx.new_server(args=ONE_WORKER + ["-o", "storage.compaction-interval=100ms",
                                            "-o", "storage.retention-interval=0"],
                         env={"PULSE_FAILPOINT_DELAY": "maint_partition:3000"})
    srv.start()
    other = uniq("o")
    srv.create_topic(other)
    srv.publish(other, [{"value": "x"}])
    cmp = uniq("cmp")
    srv.create_topic(cmp, cleanup="compact")
    # The next compaction pass (every 100 ms) takes "cmp" and spends 3 s
    # on its partition.
    time.sleep(0.6)
    out = {}
    sent = time.monotonic()
    deleter = threading.Thread(target=timed, args=(srv.port, "DELETE", "/v1/topics/" + cmp, out, "delete"))
    deleter.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    timed(srv.port, "PUT", "/v1/consumers/r/cursors/%s/0" % other, out, "commit", {"offset": 1})
    fresh = uniq("fresh")
    timed(srv.port, "POST", "/v1/topics", out, "create", {"name": fresh})
    timed(srv.port, "GET", "/healthz", out, "health")
    deleter.join(60)
    check(not deleter.is_alive(), "the delete never answered")
    r, delete_end = out["delete"]
    check(not isinstance(r, Exception), "delete failed: %r" % (r,))
    expect_status(r, 204, "delete behind the pass")
    # The premise: the pass really held the topic, so the delete waited.
    check(delete_end - sent > 1.0, "the delete answered after %.3f s; the pass did not hold the topic"
          % (delete_end - sent))
    for key, status in (("commit", 200), ("create", 201), ("health", 200)):
        r, end = out[key]
        check(not isinstance(r, Exception), "%s failed: %r" % (key, r))
        expect_status(r, status, key)
        check(end < delete_end, "the %s was answered %.3f s after the delete: it waited behind it"
              % (key, end - delete_end))
    elapsed = out["health"][1] - t0
    check(elapsed * 2 < delete_end - t0,
          "commit, create and health check took %.3f s; the delete %.3f s" % (elapsed, delete_end - t0))
    expect_status(srv.get("/v1/topics/" + cmp), 404, "deleted topic")
    expect_json(srv.get("/v1/topics/" + fresh), 200, "created topic")


def test_sigterm_answers_the_commits_still_queued_and_exits_0(ctx):
    srv = ctx.new_server(args=ONE_WORKER, env={"PULSE_FAILPOINT_DELAY": "cursor_commit_write:800"})
    srv.start()
    t = uniq("q")
    srv.create_topic(t)
    out = {}
    th = Threads()
    for i in range(8):
        th.start(timed, srv.port, "PUT", "/v1/consumers/q%d/cursors/%s/0" % (i, t), out, i, {"offset": 0})
    time.sleep(0.3)
    srv.stop()  # SIGTERM; requires exit status 0
    check(th.join(30), "a commit was never answered")
    ok = 0
    for i in range(8):
        r, _ = out[i]
        check(not isinstance(r, Exception), "commit %d got no answer: %r" % (i, r))
        check(r.status in (200, 503), "commit %d answered %d" % (i, r.status))
        ok += r.status == 200
    check(ok >= 1, "no queued commit was completed before the exit")
    srv.start()
    for i in range(8):
        if out[i][0].status == 200:
            expect_json(srv.get("/v1/consumers/q%d/cursors/%s/0" % (i, t)), 200, "commit %d after restart" % i)


def test_cursor_reads_answered_later_suspend_and_answer_the_same(ctx):
    srv = ctx.new_server(args=ONE_WORKER, env={"PULSE_FAILPOINT_DELAY": "cursor_read:700"})
    srv.start()
    t = uniq("r")
    srv.create_topic(t, partitions=1)
    srv.publish(t, [{"value": "a"}, {"value": "b"}, {"value": "c"}])
    expect_json(raw_request(srv.port, "PUT", "/v1/consumers/reader/cursors/%s/0" % t, body={"offset": 1}), 200,
                "commit")
    paths = {
        "cursor": "/v1/consumers/reader/cursors/%s/0" % t,
        "cursors": "/v1/consumers/reader/cursors",
        "consumers": "/v1/consumers",
        "fetch": "/v1/topics/%s/partitions/0/records?consumer=reader" % t,
        "missing": "/v1/consumers/nobody/cursors/%s/0" % t,
    }
    out = {}
    th = Threads()
    for key, path in paths.items():
        th.start(timed, srv.port, "GET", path, out, key)
    time.sleep(0.2)
    timed(srv.port, "GET", "/healthz", out, "health")
    check(th.join(60), "the reads did not all finish")
    health, health_end = out["health"]
    check(not isinstance(health, Exception), "health check failed: %r" % (health,))
    expect_status(health, 200, "health check")
    for key in paths:
        check(not isinstance(out[key][0], Exception), "%s failed: %r" % (key, out[key][0]))
    # The one worker was free while the reads waited for the broker.
    first = min(out[key][1] for key in paths)
    check(health_end < first, "the health check was answered %.3f s after the first read: the worker was blocked"
          % (health_end - first))
    eq(expect_json(out["cursor"][0], 200, "cursor"),
       {"consumer": "reader", "topic": t, "partition": 0, "offset": 1, "high_watermark": 3, "lag": 2}, "cursor")
    eq(expect_json(out["cursors"][0], 200, "cursors"),
       {"consumer": "reader", "cursors": [{"topic": t, "partition": 0, "offset": 1, "high_watermark": 3,
                                           "lag": 2}]}, "cursor list")
    eq(expect_json(out["consumers"][0], 200, "consumers"), {"consumers": ["reader"]}, "consumer list")
    doc = expect_json(out["fetch"][0], 200, "fetch from the cursor")
    eq([r["value"] for r in doc["records"]], ["b", "c"], "records from the cursor")
    eq(expect_json(out["missing"][0], 404, "no cursor")["error"]["code"], "cursor_not_found", "missing cursor")


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
