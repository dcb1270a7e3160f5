# SPDX-License-Identifier: MIT
"""Event streams (Server-Sent Events): a partition's records with Accept:
text/event-stream and GET /v1/topics/{t}/events over every partition.
Events carry the position to resume from; a client that reconnects with
Last-Event-ID (header or ?last_event_id=) sees every record exactly once;
heartbeats come at server.stream-heartbeat; a live client that falls more
than server.stream-buffer-bytes behind is sent a final "cut" event and
closed; past server.stream-max a stream is 503; a topic delete and SIGTERM
end streams with a final event (and pulsed still exits 0); from= and
offset=/timestamp= pick the start.  Each stream is read over a raw socket
as a browser would (pulsetest.SseClient)."""

import json
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (BACKEND, SseClient, check, eq, expect_error, local_only, main, raw_request,  # noqa: E402
                       uniq)

HEARTBEAT = "200ms"


def part_path(t, p=0, **q):
    return "/v1/topics/%s/partitions/%d/records%s" % (t, p, "?" + "&".join("%s=%s" % kv for kv in q.items())
                                                     if q else "")


def events_path(t, **q):
    return "/v1/topics/%s/events%s" % (t, "?" + "&".join("%s=%s" % kv for kv in q.items()) if q else "")


def ready(c):
    """Reads the stream's start (retry: and the opening comment)."""
    ev = c.next_event(timeout=10)
    check(ev is not None and ev.get("retry") == "2000", "stream start: %r" % (ev,))
    return c


def open_stream(srv, path, headers=None, **kw):
    c = SseClient(srv.port, path, headers=headers, **kw)
    eq(c.status, 200, "stream status for %s" % path)
    check(c.headers.get("content-type", "").startswith("text/event-stream"), "content type %r" % c.headers)
    return ready(c)


def records_of(evs):
    out = []
    for ev in evs:
        d = json.loads(ev["data"])
        out.append((d["partition"], d["offset"], d["value"]))
    return out


def test_partition_stream_sends_new_records_with_their_resume_ids(ctx):
    srv = ctx.srv
    t = uniq("sse1")
    srv.create_topic(t, partitions=2)
    srv.publish(t, [{"value": "old", "partition": 0}])
    c = open_stream(srv, part_path(t, 0))  # latest by default: "old" is not sent
    srv.publish(t, [{"value": "a", "partition": 0}, {"value": "other", "partition": 1}])
    srv.publish(t, [{"value": "b", "partition": 0, "key": "k"}])
    evs = c.events(2, timeout=10)
    eq(records_of(evs), [(0, 1, "a"), (0, 2, "b")], "records")
    eq([ev["id"] for ev in evs], ["0:2", "0:3"], "ids are partition:next-offset")
    d = json.loads(evs[1]["data"])
    eq((d["key"], d["headers"]), ("k", {}), "the record object of a fetch")
    c.close()


def test_resume_with_last_event_id_has_no_gap_and_no_duplicate(ctx):
    srv = ctx.srv
    t = uniq("sseresume")
    srv.create_topic(t, partitions=3)
    sent = []
    for i in range(30):
        srv.publish(t, [{"value": "v%d" % i, "partition": i % 3}])
        sent.append(i)
    got = []
    c = open_stream(srv, events_path(t, **{"from": "earliest"}))
    evs = c.events(10, timeout=10)
    got += records_of(evs)
    last = evs[-1]["id"]
    c.close()
    check(len(last.split(",")) == 3, "a topic-wide id names every partition: %r" % last)
    for i in range(30, 45):
        srv.publish(t, [{"value": "v%d" % i, "partition": i % 3}])
    # Reconnect as EventSource does: the header (from= is ignored then).
    c = open_stream(srv, events_path(t, **{"from": "latest"}), headers={"Last-Event-ID": last})
    evs = c.events(20, timeout=10)
    got += records_of(evs)
    last = evs[-1]["id"]
    c.close()
    for i in range(45, 60):
        srv.publish(t, [{"value": "v%d" % i, "partition": i % 3}])
    # A manual reconnect cannot set headers: the query parameter.
    c = open_stream(srv, events_path(t, last_event_id=last))
    got += records_of(c.events(60 - len(got), timeout=10))
    c.close()
    eq(len(got), 60, "records received")
    eq(len(set(got)), 60, "no record twice")
    eq(sorted(int(v[1:]) for _, _, v in got), list(range(60)), "every record once")
    for p in range(3):
        offs = [o for q, o, _ in got if q == p]
        eq(offs, list(range(20)), "partition %d in order without a gap" % p)


def test_heartbeat_comments_come_at_the_configured_interval(ctx):
    srv = ctx.srv
    t = uniq("ssebeat")
    srv.create_topic(t)
    c = open_stream(srv, part_path(t, 0))
    t0 = time.monotonic()
    beats = 0
    while time.monotonic() - t0 < 1.5:
        ev = c.next_event(timeout=5)
        check(ev is not None, "the stream ended")
        if ev.get("comment") == "heartbeat":
            beats += 1
    check(4 <= beats <= 9, "%d heartbeats in 1.5 s at %s" % (beats, HEARTBEAT))
    c.close()


def test_stream_start_from_earliest_offset_and_time(ctx):
    srv = ctx.srv
    t = uniq("ssefrom")
    srv.create_topic(t)
    for i in range(5):
        srv.publish(t, [{"value": "v%d" % i, "timestamp": 1700000000000 + 1000 * i}])
    starts = [({"from": "earliest"}, 0), ({"from": "3"}, 3), ({"from": "1700000002500ms"}, 3),
              ({"offset": "earliest"}, 0), ({"timestamp": "1700000001000"}, 1)]
    if BACKEND != "local":
        # The mock cluster has no time index: positions by time are 406 there.
        starts = [(q, w) for q, w in starts if "timestamp" not in q and not q.get("from", "").endswith("ms")]
    for q, want in starts:
        c = open_stream(srv, part_path(t, 0, **q))
        evs = c.events(5 - want, timeout=10)
        eq([json.loads(e["data"])["offset"] for e in evs], list(range(want, 5)), "start %r" % q)
        c.close()
    c = open_stream(srv, part_path(t, 0, offset="latest"))
    srv.publish(t, [{"value": "new"}])
    eq(records_of(c.events(1, timeout=10)), [(0, 5, "new")], "offset=latest")
    c.close()


def test_bad_starts_are_refused(ctx):
    srv = ctx.srv
    t = uniq("ssebad")
    srv.create_topic(t)
    h = {"Accept": "text/event-stream"}
    expect_error(raw_request(srv.port, "GET", part_path(t, 0, **{"from": "soon"}), headers=h), 400,
                 "invalid_request", "from=soon")
    expect_error(raw_request(srv.port, "GET", part_path(t, 0, **{"from": "1", "offset": "2"}), headers=h), 400,
                 "invalid_request", "from and offset")
    expect_error(raw_request(srv.port, "GET", part_path(t, 0, **{"from": "9"}), headers=h), 416,
                 "offset_out_of_range", "from past the end")
    expect_error(raw_request(srv.port, "GET", part_path(t, 0), headers=dict(h, **{"Last-Event-ID": "x"})), 400,
                 "invalid_request", "a bad Last-Event-ID")
    expect_error(raw_request(srv.port, "GET", events_path("nope-" + t), headers=h), 404, "topic_not_found",
                 "missing topic")
    expect_error(raw_request(srv.port, "GET", part_path(t, 3), headers=h), 404, "partition_not_found",
                 "missing partition")


def test_topic_delete_ends_streams_with_an_event(ctx):
    srv = ctx.srv
    t = uniq("ssedel")
    srv.create_topic(t, partitions=2)
    a = open_stream(srv, part_path(t, 1))
    b = open_stream(srv, events_path(t))
    r = srv.req("DELETE", "/v1/topics/%s" % t)
    check(r.status in (200, 202, 204), "delete: %d" % r.status)
    for c, what in ((a, "partition stream"), (b, "topic-wide stream")):
        evs = c.events(1, timeout=10)
        check(evs and evs[0].get("event") == "end", "%s: final event %r" % (what, evs))
        eq(json.loads(evs[0]["data"])["reason"], "topic_deleted", what)
        eq(c.next_event(timeout=10), None, "%s closed after its final event" % what)
        c.close()


def test_slow_client_is_cut_with_a_final_event(ctx):
    srv = ctx.new_server(args=["-o", "server.stream-buffer-bytes=16KiB", "-o", "server.stream-heartbeat=200ms"])
    srv.start()
    t = uniq("sseslow")
    srv.create_topic(t)
    c = open_stream(srv, part_path(t, 0), rcvbuf=4096)
    c.next_event(timeout=5)  # a heartbeat: the stream is caught up (live)
    value = "x" * 1000
    for i in range(40):  # 2000 records of 1 KB while the client does not read
        srv.publish(t, [{"value": value} for _ in range(50)])
    got, end = [], None
    while True:  # now a slow reader: small reads
        ev = c.next_event(timeout=20, recv_bytes=2048)
        if ev is None:
            break
        if ev.get("event") == "end":
            end = ev
        elif "data" in ev:
            got.append(json.loads(ev["data"])["offset"])
        if len(got) == 2000:
            break  # got everything: it was never cut
        time.sleep(0.002)
    check(end is not None, "no final event; %d records received" % len(got))
    eq(json.loads(end["data"])["reason"], "cut", "final event")
    check(len(got) < 2000, "the slow client was never cut (%d records)" % len(got))
    eq(got, list(range(len(got))), "records before the cut, without a gap")
    eq(end["id"], "0:%d" % len(got), "the cut's id is where to resume")
    c.close()
    # Resuming from it catches up on the rest, exactly once.
    c = open_stream(srv, part_path(t, 0), headers={"Last-Event-ID": end["id"]})
    rest = [json.loads(e["data"])["offset"] for e in c.events(2000 - len(got), timeout=20)]
    eq(rest, list(range(len(got), 2000)), "the rest after resuming")
    c.close()


@local_only("on the Kafka backend each refill of a stream costs two ListOffsets round trips and a consumer start, "
            "so after a burst the stream stays behind for a heartbeat with its client's socket half full and is cut "
            "although the client reads (a known gap, docs/Scaling.md)")
def test_a_client_that_keeps_reading_is_not_cut_by_a_burst(ctx):
    # 100 publishers at once: past the default limit of connections per address.
    # A client is cut only after a whole heartbeat interval behind: 1 s, not
    # the 200 ms of the other tests, so that this reader (a thread sharing
    # its interpreter with 100 publishing threads, on a loaded machine) is
    # not cut for a scheduling stall it could not help.
    srv = ctx.new_server(args=["-o", "server.stream-buffer-bytes=16KiB", "-o", "server.stream-heartbeat=1s",
                               "-o", "server.max-connections-per-ip=0"])
    srv.start()
    t = uniq("sseburst")
    srv.create_topic(t)
    c = open_stream(srv, part_path(t, 0))
    c.next_event(timeout=5)  # caught up (live)
    got = []

    def read_all():
        while len(got) < 1000:
            ev = c.next_event(timeout=20)
            if ev is None or ev.get("event") == "end":
                got.append(ev)
                return
            if "data" in ev:
                got.append(json.loads(ev["data"])["offset"])

    th = threading.Thread(target=read_all)
    th.start()
    value = "y" * 2000
    errors = []

    def publish_one():
        try:
            srv.publish(t, [{"value": value}])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    for i in range(10):
        # 100 publishes at once: many batches made durable by one sync, so
        # the stream finds far more than its buffer waiting at once.
        pubs = [threading.Thread(target=publish_one) for _ in range(100)]
        for p in pubs:
            p.start()
        for p in pubs:
            p.join(30)
    check(not errors, "publishes failed: %r" % errors[:3])
    th.join(60)
    check(got == list(range(1000)), "every record in order and no cut: got %d, ending %r" % (len(got), got[-3:]))
    c.close()


def test_stream_cap_answers_503_past_stream_max(ctx):
    srv = ctx.new_server(args=["-o", "server.stream-max=2", "-o", "server.stream-heartbeat=100ms"])
    srv.start()
    t = uniq("ssecap")
    srv.create_topic(t)
    a = open_stream(srv, part_path(t, 0))
    b = open_stream(srv, events_path(t))
    r = raw_request(srv.port, "GET", events_path(t), headers={"Accept": "text/event-stream"}, timeout=10)
    expect_error(r, 503, "unavailable", "a third stream")
    eq(r.header("Retry-After"), "1", "Retry-After")
    check("stream-max" in r.json()["error"]["message"], "the message names the setting: %r" % r.body)
    a.close()
    # The server notices the closed stream at its next heartbeat.
    deadline = time.monotonic() + 10
    while True:
        c = SseClient(srv.port, part_path(t, 0))
        if c.status == 200 or time.monotonic() > deadline:
            break
        c.close()
        time.sleep(0.1)
    eq(c.status, 200, "a stream after one closed")
    c.close()
    b.close()


def test_sigterm_ends_streams_with_an_event_and_exits_0(ctx):
    srv = ctx.new_server(args=["-o", "server.stream-heartbeat=30s"])
    srv.start()
    t = uniq("sseterm")
    srv.create_topic(t, partitions=2)
    a = open_stream(srv, part_path(t, 0))
    b = open_stream(srv, events_path(t))
    t0 = time.monotonic()
    srv.stop()  # SIGTERM; requires exit status 0
    for c, what in ((a, "partition stream"), (b, "topic-wide stream")):
        evs = c.events(1, timeout=10)
        check(evs and evs[0].get("event") == "end", "%s: final event %r" % (what, evs))
        eq(json.loads(evs[0]["data"])["reason"], "shutdown", what)
        c.close()
    check(time.monotonic() - t0 < 20, "shutdown waited for the streams' heartbeat")


if __name__ == "__main__":
    sys.exit(main(globals(), server_args=["-o", "server.stream-heartbeat=" + HEARTBEAT]))
