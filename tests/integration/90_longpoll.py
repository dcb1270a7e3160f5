# SPDX-License-Identifier: MIT
"""Long-poll fetches (wait_ms): a parked fetch wakes on publish, long before
its deadline, and returns the new record; an expired wait answers empty;
many parked waiters do not hold up other requests; and SIGTERM answers the
parked waiters and still exits 0.

The time bounds here are functional and generous (a wake-up must come well
before the wait deadline), not performance measurements."""

import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (Threads, check, eq, expect_json, expect_status, main, raw_request,  # noqa: E402
                       uniq, decode_batches, local_only)


def fetch_path(t, p=0, **params):
    q = "&".join("%s=%s" % kv for kv in params.items())
    return "/v1/topics/%s/partitions/%d/records?%s" % (t, p, q)


def parked(port, path, out, idx, timeout=40, headers=None):
    t0 = time.monotonic()
    try:
        r = raw_request(port, "GET", path, timeout=timeout, headers=headers)
        out[idx] = (r, time.monotonic() - t0)
    except Exception as e:  # noqa: BLE001
        out[idx] = (e, time.monotonic() - t0)


def test_waiter_wakes_on_publish_and_returns_the_record(ctx):
    srv = ctx.srv
    t = uniq("lp")
    srv.create_topic(t)
    srv.publish(t, [{"value": "old"}])
    out = [None]
    th = threading.Thread(target=parked, args=(srv.port, fetch_path(t, offset=1, wait_ms=20000), out, 0))
    th.start()
    time.sleep(0.3)
    check(out[0] is None, "the fetch at the high watermark must wait, it answered %r" % (out[0],))
    srv.publish(t, [{"value": "new"}])
    th.join(25)
    r, elapsed = out[0]
    check(not isinstance(r, Exception), "waiter failed: %r" % r)
    doc = expect_json(r, 200, "woken fetch")
    eq([(x["offset"], x["value"]) for x in doc["records"]], [(1, "new")], "woken fetch records")
    eq(doc["next_offset"], 2, "next_offset")
    check(elapsed < 10, "waiter woke after %.2f s, long after the publish (wait_ms was 20000)" % elapsed)


@local_only("raw fetch: the Kafka backend answers 406")
def test_raw_waiter_wakes_too(ctx):
    srv = ctx.srv
    t = uniq("lpraw")
    srv.create_topic(t)
    out = [None]
    th = threading.Thread(target=parked, args=(srv.port, fetch_path(t, offset=0, wait_ms=20000, format="raw"),
                                               out, 0))
    th.start()
    time.sleep(0.3)
    srv.publish(t, [{"value": "raw-new"}])
    th.join(25)
    r, elapsed = out[0]
    check(not isinstance(r, Exception), "raw waiter failed: %r" % r)
    expect_status(r, 200, "raw woken")
    b = decode_batches(r.body)
    eq([x["value"] for x in b[0]["records"]], [b"raw-new"], "raw woken records")
    check(elapsed < 10, "raw waiter woke after %.2f s" % elapsed)


def test_expired_wait_answers_empty(ctx):
    srv = ctx.srv
    t = uniq("lpexp")
    srv.create_topic(t)
    t0 = time.monotonic()
    r = srv.get(fetch_path(t, offset=0, wait_ms=400))
    elapsed = time.monotonic() - t0
    doc = expect_json(r, 200, "expired wait")
    eq((doc["records"], doc["next_offset"]), ([], 0), "empty answer")
    check(elapsed >= 0.35, "answered after %.3f s, before wait_ms=400 expired" % elapsed)
    check(elapsed < 10, "answered only after %.1f s" % elapsed)


def test_wait_is_skipped_when_data_is_there(ctx):
    srv = ctx.srv
    t = uniq("lpnow")
    srv.create_topic(t)
    srv.publish(t, [{"value": "here"}])
    t0 = time.monotonic()
    doc = expect_json(srv.get(fetch_path(t, offset=0, wait_ms=30000)), 200, "fetch")
    eq([x["value"] for x in doc["records"]], ["here"], "records")
    check(time.monotonic() - t0 < 10, "a fetch with data waited for wait_ms")


def test_waiter_at_the_consumer_cursor_wakes_on_publish(ctx):
    srv = ctx.srv
    t, c = uniq("lpcur"), uniq("lpc")
    srv.create_topic(t)
    srv.publish(t, [{"value": "a"}, {"value": "b"}])
    expect_json(srv.req("PUT", "/v1/consumers/%s/cursors/%s/0" % (c, t), {"offset": 2}), 200, "commit")
    out = [None]
    th = threading.Thread(target=parked, args=(srv.port, fetch_path(t, consumer=c, wait_ms=20000), out, 0))
    th.start()
    time.sleep(0.3)
    check(out[0] is None, "fetch at the cursor (= high watermark) must wait: %r" % (out[0],))
    srv.publish(t, [{"value": "c"}])
    th.join(25)
    r, elapsed = out[0]
    check(not isinstance(r, Exception), "waiter failed: %r" % r)
    doc = expect_json(r, 200, "woken fetch")
    eq([(x["offset"], x["value"]) for x in doc["records"]], [(2, "c")], "records from the cursor")
    check(elapsed < 10, "woke after %.2f s" % elapsed)


def test_publish_to_another_partition_does_not_answer_the_waiter(ctx):
    srv = ctx.srv
    t = uniq("lppart")
    srv.create_topic(t, partitions=2)
    out = [None]
    th = threading.Thread(target=parked, args=(srv.port, fetch_path(t, 0, offset=0, wait_ms=1500), out, 0))
    th.start()
    time.sleep(0.2)
    srv.publish(t, [{"value": "elsewhere", "partition": 1}])
    th.join(25)
    r, elapsed = out[0]
    check(not isinstance(r, Exception), "waiter failed: %r" % r)
    doc = expect_json(r, 200, "waiter on partition 0")
    eq(doc["records"], [], "no records for partition 0")
    check(elapsed >= 1.4, "the waiter on partition 0 answered after %.2f s, before wait_ms" % elapsed)


def test_offset_above_high_watermark_is_416_at_once_even_with_wait(ctx):
    srv = ctx.srv
    t = uniq("lp416")
    srv.create_topic(t)
    t0 = time.monotonic()
    r = srv.get(fetch_path(t, offset=5, wait_ms=20000))
    eq(r.status, 416, "status")
    check(time.monotonic() - t0 < 10, "416 must not wait for wait_ms")


def test_many_parked_waiters_do_not_block_other_requests(ctx):
    srv = ctx.srv
    t, other = uniq("lpmany"), uniq("lpother")
    srv.create_topic(t)
    srv.create_topic(other)
    n = 50
    out = [None] * n
    th = Threads()
    for i in range(n):
        th.start(parked, srv.port, fetch_path(t, offset=0, wait_ms=5000), out, i)
    time.sleep(0.5)
    check(all(o is None for o in out), "some waiters answered before any publish: %r"
          % [o for o in out if o is not None][:3])
    t0 = time.monotonic()
    srv.publish(other, [{"value": "meanwhile"}])
    doc = srv.fetch_json(other, 0)
    expect_json(srv.get("/healthz"), 200, "healthz")
    elapsed = time.monotonic() - t0
    eq([x["value"] for x in doc["records"]], ["meanwhile"], "other topic")
    check(elapsed < 1.0, "publish+fetch+healthz took %.2f s with %d parked waiters" % (elapsed, n))
    srv.publish(t, [{"value": "wake-all"}])
    check(th.join(30), "waiters did not all return")
    for i, (r, el) in enumerate(out):
        check(not isinstance(r, Exception), "waiter %d failed: %r" % (i, r))
        doc = expect_json(r, 200, "waiter %d" % i)
        eq([x["value"] for x in doc["records"]], ["wake-all"], "waiter %d records" % i)
        check(el < 5.0 + 5.0, "waiter %d took %.2f s" % (i, el))


def test_sigterm_answers_parked_waiters_and_exits_0(ctx):
    srv = ctx.new_server()
    srv.start()
    t = uniq("lpterm")
    srv.create_topic(t)
    srv.publish(t, [{"value": "x"}])
    n = 5
    out = [None] * n
    th = Threads()
    for i in range(n):
        th.start(parked, srv.port, fetch_path(t, offset=1, wait_ms=30000), out, i)
    time.sleep(0.5)
    t0 = time.monotonic()
    srv.stop()  # SIGTERM; requires exit 0
    check(th.join(20), "parked waiters were not answered at shutdown")
    for i, (r, el) in enumerate(out):
        check(not isinstance(r, Exception), "waiter %d got no answer at shutdown: %r" % (i, r))
        check(r.status in (200, 503), "waiter %d answered %d at shutdown" % (i, r.status))
        if r.status == 200:
            eq(r.json()["records"], [], "waiter %d records at shutdown" % i)
    check(time.monotonic() - t0 < 20, "shutdown waited for the 30 s long-polls")


if __name__ == "__main__":
    sys.exit(main(globals()))
