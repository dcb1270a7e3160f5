# SPDX-License-Identifier: MIT
"""Every way of reading says which offsets it stepped over, not only the
partition fetch (docs/API.md "Damaged data").

A topic-wide read (GET /v1/topics/{t}/records), an event stream and a
consumer group's fetch read the same broker reads as a fetch, which report
a damaged or missing range in front of their first record. They used to
move their positions over such a range without a word. Now:

  - a topic-wide read lists "skipped" in the partition's object;
  - an event stream sends an event named "skipped" (data: partition, from,
    to, reason) whose id resumes after the range, before the records after
    it; it also sends one (reason "retention") when retention removed
    records at its position before it read them;
  - a group fetch lists "skipped" (with topic and partition) in its answer,
    and ends in front of a trim that overtook it between two reads of a
    partition, as the partition fetch does.

The damage is made as in 86_corruption.py: one byte flipped inside the 6th
batch (offsets 10 and 11) of 50 batches of 2 records, while pulsed is
stopped."""

import json
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pulsetest  # noqa: E402

pulsetest.exit_unless_local("damages the local backend's segment files")

import grouptest  # noqa: E402
from pulsetest import (SseClient, b64, check, decode_batches, eq, expect_json, main, read_file,  # noqa: E402
                       segment_files, wait_until)

BATCHES = 50
BAD = 5  # the 6th batch: offsets 10 and 11
SKIP = {"from": 10, "to": 12, "reason": "corrupt"}


def damaged_topic(srv, topic):
    """Stops srv, flips a byte of offsets 10-11 of topic, starts srv again."""
    srv.create_topic(topic)
    for b in range(BATCHES):
        srv.publish(topic, [{"key": "k%d" % (2 * b + j), "value_base64": b64(b"v%03d" % (2 * b + j))}
                            for j in range(2)])
    srv.stop()
    seg = segment_files(srv.data_dir, topic, 0)[-1]
    batch = decode_batches(read_file(seg))[BAD]
    eq(batch["base"], 10, "the 6th batch")
    with open(seg, "r+b") as f:
        f.seek(batch["pos"] + 60)
        c = f.read(1)
        f.seek(batch["pos"] + 60)
        f.write(bytes([c[0] ^ 0x20]))
    srv.start()


def test_a_topic_wide_read_lists_what_it_stepped_over(ctx):
    srv = ctx.new_server()
    srv.start()
    damaged_topic(srv, "t")
    offs, skipped, pos = [], [], "0:0"
    for _ in range(100):
        doc = expect_json(srv.get("/v1/topics/t/records?max_records=7&positions=" + pos), 200, "topic read")
        part = doc["partitions"][0]
        offs.extend(r["offset"] for r in part["records"])
        skipped.extend(part.get("skipped", []))
        pos = doc["positions"]
        if part["next_offset"] >= part["high_watermark"]:
            break
    eq(offs, [o for o in range(2 * BATCHES) if o not in (10, 11)], "offsets read")
    eq(skipped, [SKIP], "skipped ranges listed by the topic-wide reads")
    # From inside the damage: the range from there.
    doc = expect_json(srv.get("/v1/topics/t/records?positions=0:11&max_records=1"), 200, "topic read at 11")
    eq(doc["partitions"][0].get("skipped"), [{"from": 11, "to": 12, "reason": "corrupt"}], "skipped from 11")
    eq([r["offset"] for r in doc["partitions"][0]["records"]], [12], "first record after the damage")
    srv.stop()


def stream_events(srv, path, want_records):
    c = SseClient(srv.port, path)
    eq(c.status, 200, "stream status")
    evs = []
    while sum(1 for e in evs if e.get("event") is None) < want_records:
        ev = c.next_event(timeout=10)
        check(ev is not None, "the stream ended early: %r" % evs[-3:])
        if "data" in ev:
            evs.append(ev)
    c.close()
    return evs


def test_an_event_stream_sends_a_skipped_event_before_the_records_after_it(ctx):
    srv = ctx.new_server()
    srv.start()
    damaged_topic(srv, "t")
    evs = stream_events(srv, "/v1/topics/t/partitions/0/records?from=earliest", 2 * BATCHES - 2)
    kinds = [(e.get("event"), json.loads(e["data"])) for e in evs]
    skips = [(i, d) for i, (k, d) in enumerate(kinds) if k == "skipped"]
    eq([d for _, d in skips], [dict(SKIP, partition=0)], "skipped events")
    i = skips[0][0]
    eq(evs[i]["id"], "0:12", "the skipped event resumes after the range")
    eq([d["offset"] for k, d in kinds[:i]], list(range(10)), "records before the skipped event")
    eq(kinds[i + 1][1]["offset"], 12, "the record after the skipped event")
    # A topic-wide stream, resumed from inside the damage.
    evs = stream_events(srv, "/v1/topics/t/events?positions=0:11", 1)
    eq(evs[0].get("event"), "skipped", "first event from 11")
    eq(json.loads(evs[0]["data"]), {"partition": 0, "from": 11, "to": 12, "reason": "corrupt"}, "its data")
    eq(json.loads(evs[1]["data"])["offset"], 12, "then offset 12")
    srv.stop()


def test_an_event_stream_says_when_retention_removed_records_at_its_position(ctx):
    srv = ctx.new_server(args=["-o", "storage.retention-interval=50ms"])
    srv.start()
    srv.create_topic("r", segment_bytes=4096, retention_ms=0)
    for i in range(40):
        srv.publish("r", [{"value_base64": b64(b"%04d|" % i + b"x" * 2000)}])
    expect_json(srv.req("PATCH", "/v1/topics/r", {"retention_bytes": 8192}), 200, "lower retention")
    check(wait_until(lambda: srv.topic("r")["partition_stats"][0]["log_start_offset"] >= 30, 5),
          "retention did not trim the log within 5 s")
    start = srv.topic("r")["partition_stats"][0]["log_start_offset"]
    evs = stream_events(srv, "/v1/topics/r/partitions/0/records?offset=3", 1)
    eq(evs[0].get("event"), "skipped", "first event")
    eq(json.loads(evs[0]["data"]), {"partition": 0, "from": 3, "to": start, "reason": "retention"}, "its data")
    eq(evs[0]["id"], "0:%d" % start, "its id")
    eq(json.loads(evs[1]["data"])["offset"], start, "then the log start")
    srv.stop()


def test_a_group_fetch_lists_what_it_stepped_over(ctx):
    srv = ctx.new_server(args=["-o", "groups.lease-max=2s"])
    srv.start()
    damaged_topic(srv, "t")
    time.sleep(2.1)  # the hold after a restart (groups.lease-max)
    m = grouptest.join(srv, "g", ["t"], start="earliest")
    offs, skipped, resume = [], [], None
    for _ in range(100):
        doc = expect_json(grouptest.fetch(srv, "g", m["member_id"], max_records=7, resume=resume), 200, "group fetch")
        offs.extend(r["offset"] for r in doc["records"])
        skipped.extend(doc.get("skipped", []))
        resume = doc["resume"]
        if resume.endswith(":%d" % (2 * BATCHES)):
            break
    eq(offs, [o for o in range(2 * BATCHES) if o not in (10, 11)], "offsets read")
    eq(skipped, [dict(SKIP, topic="t", partition=0)], "skipped ranges listed by the group fetches")
    srv.stop()


def test_a_group_fetch_overtaken_by_retention_ends_at_the_trim(ctx):
    delay_ms = 1500
    srv = ctx.new_server(args=["-o", "storage.retention-interval=50ms"],
                         env={"PULSE_FAILPOINT_DELAY": "fetch_read_more:%d" % delay_ms})
    srv.start()
    srv.create_topic("r", segment_bytes=4096, retention_ms=0)
    for i in range(40):
        srv.publish("r", [{"value_base64": b64(b"%04d|" % i + b"x" * 2000)}])
    m = grouptest.join(srv, "g", ["r"], start="earliest")
    answer = {}

    def fetch():
        answer["doc"] = expect_json(grouptest.fetch(srv, "g", m["member_id"], max_records=10000, timeout=30), 200,
                                    "group fetch")

    t = threading.Thread(target=fetch)
    t.start()
    time.sleep(0.5)
    expect_json(srv.req("PATCH", "/v1/topics/r", {"retention_bytes": 8192}), 200, "lower retention")
    check(wait_until(lambda: srv.topic("r")["partition_stats"][0]["log_start_offset"] >= 34, 5),
          "retention did not trim the log within 5 s")
    t.join(timeout=delay_ms / 1000.0 * 4 + 20)
    check(not t.is_alive(), "the group fetch did not return")
    doc = answer["doc"]
    offs = [r["offset"] for r in doc["records"]]
    check(offs and offs[0] == 0, "the answer starts at 0: %r" % offs[:3])
    eq(offs, list(range(len(offs))), "the answer has no gap")
    eq(doc["resume"].split(",")[1], "r:0:%d" % len(offs), "resume at the end of what was answered")
    # The next fetch from there says what retention removed.
    start = srv.topic("r")["partition_stats"][0]["log_start_offset"]
    doc = expect_json(grouptest.fetch(srv, "g", m["member_id"], resume=doc["resume"]), 200, "next group fetch")
    eq(doc.get("skipped"), [{"topic": "r", "partition": 0, "from": len(offs), "to": start, "reason": "retention"}],
       "the next answer lists the trimmed offsets")
    eq(doc["records"][0]["offset"], start, "and starts at the log start")
    srv.stop()


if __name__ == "__main__":
    main(globals())
