# SPDX-License-Identifier: MIT
"""Topic-wide reads (GET /v1/topics/{t}/records) and positions by name and
time: one request reads several partitions from their own positions
(?positions=P:POS,...), or from a consumer's committed cursors, and
long-polls until any of them has data (one waiter for all of them, woken
by a publish to any); its "positions" is the list to send next; max_records
is shared fairly. offset=earliest|latest and timestamp=<ms> work on fetch,
on topic-wide reads and on cursor commits (PUT and POST)."""

import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (BACKEND, check, eq, expect_error, expect_json, local_only, main, raw_request,  # noqa: E402
                       uniq)

TIME = ("the mock cluster has no time index (it answers every ListOffsets by time with none), so positions by "
        "time are 406 on the Kafka backend there (92_kafka.py)")


def tpath(t, **q):
    return "/v1/topics/%s/records%s" % (t, "?" + "&".join("%s=%s" % kv for kv in q.items()) if q else "")


def recs(doc):
    return [(p["partition"], r["offset"], r["value"]) for p in doc["partitions"] for r in p["records"]]


def test_positions_read_several_partitions_from_their_own_offsets(ctx):
    srv = ctx.srv
    t = uniq("tr")
    srv.create_topic(t, partitions=3)
    for i in range(9):
        srv.publish(t, [{"value": "v%d" % i, "partition": i % 3}])
    doc = expect_json(srv.get(tpath(t, positions="0:1,2:2")), 200, "read")
    eq([p["partition"] for p in doc["partitions"]], [0, 2], "only the partitions named")
    eq(recs(doc), [(0, 1, "v3"), (0, 2, "v6"), (2, 2, "v8")], "records")
    eq([p["next_offset"] for p in doc["partitions"]], [3, 3], "next offsets")
    eq(doc["positions"], "0:3,2:3", "positions to send next")
    p0 = doc["partitions"][0]
    eq((p0["log_start_offset"], p0["high_watermark"]), (0, 3), "bounds")
    # Without positions: every partition from the earliest.
    doc = expect_json(srv.get(tpath(t)), 200, "all partitions")
    eq(len(recs(doc)), 9, "every record")
    eq(doc["positions"], "0:3,1:3,2:3", "positions")
    eq(srv.get(tpath(t)).header("Pulse-Positions"), "0:3,1:3,2:3", "Pulse-Positions header")


def test_long_poll_wakes_when_any_partition_gets_data(ctx):
    srv = ctx.srv
    t = uniq("trwait")
    srv.create_topic(t, partitions=4)
    out = [None]

    def reader():
        t0 = time.monotonic()
        out[0] = (raw_request(srv.port, "GET", tpath(t, positions="0:0,1:0,2:0,3:0", wait_ms=20000), timeout=40),
                  time.monotonic() - t0)

    th = threading.Thread(target=reader)
    th.start()
    time.sleep(0.4)
    check(out[0] is None, "a read with no data must wait: %r" % (out[0],))
    srv.publish(t, [{"value": "late", "partition": 3}])
    th.join(30)
    r, elapsed = out[0]
    doc = expect_json(r, 200, "woken read")
    eq(recs(doc), [(3, 0, "late")], "the record of the partition that got data")
    eq(doc["positions"], "0:0,1:0,2:0,3:1", "positions")
    check(elapsed < 10, "woke after %.2f s" % elapsed)
    # An expired wait answers with nothing.
    t0 = time.monotonic()
    doc = expect_json(srv.get(tpath(t, positions=doc["positions"], wait_ms=300)), 200, "expired")
    eq(recs(doc), [], "no records")
    check(time.monotonic() - t0 >= 0.25, "answered before wait_ms")


def test_consumer_cursors_drive_the_read(ctx):
    srv = ctx.srv
    t, c = uniq("trcur"), uniq("trc")
    srv.create_topic(t, partitions=2)
    for i in range(6):
        srv.publish(t, [{"value": "v%d" % i, "partition": i % 2}])
    expect_json(srv.req("PUT", "/v1/consumers/%s/cursors/%s/0" % (c, t), {"offset": 2}), 200, "commit p0")
    doc = expect_json(srv.get(tpath(t, consumer=c)), 200, "cursor read")
    # Partition 1 has no cursor: the default start (earliest).
    eq(recs(doc), [(0, 2, "v4"), (1, 0, "v1"), (1, 1, "v3"), (1, 2, "v5")], "from the cursors")
    doc = expect_json(srv.get(tpath(t, consumer=c, offset="latest")), 200, "cursor read, latest default")
    eq(recs(doc), [(0, 2, "v4")], "partition 1 starts at latest")


def test_max_records_is_shared_fairly(ctx):
    srv = ctx.srv
    t = uniq("trfair")
    srv.create_topic(t, partitions=2)
    srv.publish(t, [{"value": "a%d" % i, "partition": 0} for i in range(50)])
    srv.publish(t, [{"value": "b%d" % i, "partition": 1} for i in range(5)])
    doc = expect_json(srv.get(tpath(t, max_records=10)), 200, "read")
    eq([len(p["records"]) for p in doc["partitions"]], [5, 5], "each partition's share")
    eq(doc["positions"], "0:5,1:5", "positions")


def test_topic_read_refusals(ctx):
    srv = ctx.srv
    t = uniq("trbad")
    srv.create_topic(t, partitions=2)
    expect_error(srv.get(tpath(t, positions="0:1,0:2")), 400, "invalid_request", "a partition twice")
    expect_error(srv.get(tpath(t, positions="x")), 400, "invalid_request", "not P:POS")
    expect_error(srv.get(tpath(t, positions="5:0")), 404, "partition_not_found", "no such partition")
    expect_error(srv.get(tpath(t, positions="0:7")), 416, "offset_out_of_range", "past the end")
    expect_error(srv.get(tpath("nope-" + t)), 404, "topic_not_found", "missing topic")
    expect_error(srv.get(tpath(t, positions="0:0", consumer="c")), 400, "invalid_request", "both")


def test_fetch_takes_earliest_latest_and_timestamp(ctx):
    srv = ctx.srv
    t = uniq("pos")
    srv.create_topic(t)
    base = 1700000000000
    for i in range(6):
        srv.publish(t, [{"value": "v%d" % i, "timestamp": base + 1000 * i}])
    f = lambda **q: expect_json(srv.fetch(t, 0, **q), 200, repr(q))  # noqa: E731
    eq([r["offset"] for r in f(offset="earliest")["records"]], list(range(6)), "earliest")
    doc = f(offset="latest")
    eq((doc["records"], doc["next_offset"]), ([], 6), "latest")
    expect_error(srv.fetch(t, 0, offset="soon"), 400, "invalid_request", "offset=soon")
    expect_error(srv.fetch(t, 0, offset="1", timestamp="5"), 400, "invalid_request", "both")
    expect_error(srv.fetch(t, 0, timestamp="-1"), 400, "invalid_request", "a negative time")
    if BACKEND != "local":
        expect_error(srv.fetch(t, 0, timestamp=base), 406, "not_acceptable", TIME)
        return
    eq([r["offset"] for r in f(timestamp=base + 2000)["records"]], [2, 3, 4, 5], "at a record's time")
    eq([r["offset"] for r in f(timestamp=base + 2500)["records"]], [3, 4, 5], "between two records")
    eq([r["offset"] for r in f(timestamp=0)["records"]], list(range(6)), "before everything")
    doc = f(timestamp=base + 99000)
    eq((doc["records"], doc["next_offset"]), ([], 6), "after everything: the end")
    doc = expect_json(srv.get(tpath(t, timestamp=base + 4000)), 200, "topic-wide by time")
    eq([r[1] for r in recs(doc)], [4, 5], "topic-wide read from a time")


@local_only("positions by time across the local backend's segments; " + TIME)
def test_time_lookup_across_many_segments(ctx):
    srv = ctx.srv
    t = uniq("postime")
    srv.create_topic(t, segment_bytes=4096)
    base = 1710000000000
    for i in range(60):
        srv.publish(t, [{"value": "x" * 200, "timestamp": base + 10 * (2 * i + k)} for k in range(2)])
    segs = srv.topic(t)["partition_stats"][0]["segments"]
    check(segs >= 5, "only %d segments" % segs)
    for ts, want in [(base, 0), (base + 5, 1), (base + 10 * 77, 77), (base + 10 * 77 + 1, 78), (base + 1199, 120)]:
        doc = expect_json(srv.fetch(t, 0, timestamp=ts, max_records=1), 200, "ts %d" % ts)
        got = doc["records"][0]["offset"] if doc["records"] else doc["next_offset"]
        eq(got, want, "first record at or after %d" % ts)


def test_cursor_commit_by_name_and_time(ctx):
    srv = ctx.srv
    t, c = uniq("poscur"), uniq("pc")
    srv.create_topic(t, partitions=2)
    base = 1720000000000
    for i in range(4):
        srv.publish(t, [{"value": "v%d" % i, "partition": 0, "timestamp": base + 1000 * i}])
    cur = "/v1/consumers/%s/cursors/%s/0" % (c, t)
    eq(expect_json(srv.req("PUT", cur, {"offset": "latest"}), 200, "latest")["offset"], 4, "PUT latest")
    eq(expect_json(srv.req("PUT", cur, {"offset": "earliest"}), 200, "earliest")["offset"], 0, "PUT earliest")
    expect_error(srv.req("PUT", cur, {"offset": "soon"}), 400, "invalid_request", "PUT offset soon")
    expect_error(srv.req("PUT", cur, {"offset": 1, "timestamp": 5}), 400, "invalid_request", "PUT both")
    if BACKEND != "local":
        expect_error(srv.req("PUT", cur, {"timestamp": base + 1500}), 406, "not_acceptable", TIME)
        return
    eq(expect_json(srv.req("PUT", cur, {"timestamp": base + 1500}), 200, "time")["offset"], 2, "PUT timestamp")
    r = srv.req("POST", "/v1/consumers/%s/cursors" % c,
                {"cursors": [{"topic": t, "partition": 0, "offset": "latest"},
                             {"topic": t, "partition": 1, "timestamp": base}]})
    check(r.status in (200, 204), "POST cursors: %d %r" % (r.status, r.body))
    got = expect_json(srv.get("/v1/consumers/%s/cursors" % c), 200, "list")
    eq(sorted((x["partition"], x["offset"]) for x in got["cursors"]), [(0, 4), (1, 0)], "committed")


if __name__ == "__main__":
    sys.exit(main(globals()))
