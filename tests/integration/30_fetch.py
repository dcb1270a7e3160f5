# SPDX-License-Identifier: MIT
"""Fetch: the exact JSON answer, the Pulse-* headers, position rules (default
offset, consumer cursor, high watermark, 416 above it, log start after
retention), max_records / max_bytes, raw batches that are byte-identical to
the segment file, content negotiation, and bad query parameters."""

import base64
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (Skip, check, decode_batches, eq, expect_error, expect_json,  # noqa: E402
                       expect_keys, expect_status, main, note, read_file, segment_files, uniq,
                       wait_until, BACKEND, local_only)

FETCH_KEYS = ["topic", "partition", "log_start_offset", "high_watermark", "next_offset", "records"]
RAW_CT = "application/vnd.pulse.batches"


def pulse_headers(r):
    vals = []
    for h in ("Pulse-Next-Offset", "Pulse-High-Watermark", "Pulse-Log-Start-Offset"):
        v = r.header(h)
        check(v is not None and v.isdigit(), "fetch answer header %s missing or not a number: %r" % (h, v))
        vals.append(int(v))
    return tuple(vals)


def filled_topic(srv, n=10, partitions=1, **kw):
    t = uniq("fetch")
    srv.create_topic(t, partitions=partitions, **kw)
    srv.publish(t, [{"key": "k%d" % i, "value": "value-%d" % i, "headers": {"i": str(i)}}
                    for i in range(n)])
    return t


def test_json_answer_has_exactly_the_documented_fields(ctx):
    srv = ctx.srv
    t = filled_topic(srv, 10)
    r = srv.fetch(t, 0)
    doc = expect_json(r, 200, "fetch")
    expect_keys(doc, FETCH_KEYS, "fetch answer")
    eq((doc["topic"], doc["partition"], doc["log_start_offset"], doc["high_watermark"],
        doc["next_offset"]), (t, 0, 0, 10, 10), "fetch positions")
    eq([x["offset"] for x in doc["records"]], list(range(10)), "offsets from log start")
    for i, rec in enumerate(doc["records"]):
        expect_keys(rec, ["offset", "timestamp", "key", "value", "headers"], "record %d" % i)
        eq((rec["key"], rec["value"], rec["headers"]), ("k%d" % i, "value-%d" % i, {"i": str(i)}),
           "record %d" % i)
    eq(pulse_headers(r), (10, 10, 0), "Pulse-Next-Offset/High-Watermark/Log-Start-Offset")


def test_offset_and_max_records_select_a_window(ctx):
    srv = ctx.srv
    t = filled_topic(srv, 10)
    r = srv.fetch(t, 0, offset=3, max_records=4)
    doc = expect_json(r, 200, "fetch")
    eq([x["offset"] for x in doc["records"]], [3, 4, 5, 6], "offsets")
    eq(doc["next_offset"], 7, "next_offset")
    eq(pulse_headers(r), (7, 10, 0), "headers")
    doc = srv.fetch_json(t, 0, offset=9, max_records=10000)
    eq([x["offset"] for x in doc["records"]], [9], "last record")


def test_fetch_at_high_watermark_is_empty_with_next_offset_there(ctx):
    srv = ctx.srv
    t = filled_topic(srv, 3)
    r = srv.fetch(t, 0, offset=3)
    doc = expect_json(r, 200, "fetch at HW")
    eq((doc["records"], doc["next_offset"], doc["high_watermark"]), ([], 3, 3), "empty answer")
    eq(pulse_headers(r), (3, 3, 0), "headers")
    t2 = uniq("empty")
    srv.create_topic(t2)
    doc = srv.fetch_json(t2, 0)
    eq((doc["records"], doc["next_offset"], doc["high_watermark"], doc["log_start_offset"]),
       ([], 0, 0, 0), "empty topic")


def test_offset_above_high_watermark_is_416_with_positions(ctx):
    srv = ctx.srv
    t = filled_topic(srv, 3)
    for off in (4, 1000, 2 ** 62):
        err = expect_error(srv.fetch(t, 0, offset=off), 416, "offset_out_of_range", "offset %d" % off)
        eq((err.get("log_start_offset"), err.get("high_watermark")), (0, 3),
           "416 error object carries log_start_offset and high_watermark")
    if BACKEND == "local":  # Kafka: raw fetch is 406 (92_kafka.py)
        err = expect_error(srv.fetch(t, 0, offset=4, format="raw"), 416, "offset_out_of_range", "raw 416")
        eq((err.get("log_start_offset"), err.get("high_watermark")), (0, 3), "raw 416 positions")


def test_max_bytes_still_returns_at_least_one_record(ctx):
    srv = ctx.srv
    t = uniq("big")
    srv.create_topic(t)
    srv.publish(t, [{"value": "A" * 5000}])
    srv.publish(t, [{"value": "B" * 5000}])
    doc = srv.fetch_json(t, 0, max_bytes=1)
    check(len(doc["records"]) >= 1, "max_bytes=1 must still return one record: %r" % doc)
    eq(doc["records"][0]["value"], "A" * 5000, "first record")
    eq(doc["next_offset"], doc["records"][-1]["offset"] + 1, "next_offset follows the last record")
    if BACKEND != "local":  # Kafka: raw fetch is 406 (92_kafka.py)
        return
    body = srv.fetch(t, 0, max_bytes=1, format="raw").body
    batches = decode_batches(body)
    check(len(batches) >= 1, "raw max_bytes=1 must still return one batch")


def test_max_bytes_limits_a_large_answer(ctx):
    srv = ctx.srv
    t = uniq("maxbytes")
    srv.create_topic(t)
    for i in range(20):
        srv.publish(t, [{"value": "%02d" % i + "x" * 998}])
    doc = srv.fetch_json(t, 0, max_bytes=4096)
    n = len(doc["records"])
    check(1 <= n < 20, "max_bytes=4096 over 20 x 1000-byte records returned %d records" % n)
    eq(doc["next_offset"], n, "next_offset")
    # Paging with next_offset yields every record exactly once.
    seen, off = [], 0
    while off < 20:
        d = srv.fetch_json(t, 0, offset=off, max_bytes=4096)
        check(d["records"], "progress at offset %d" % off)
        seen += [x["offset"] for x in d["records"]]
        off = d["next_offset"]
    eq(seen, list(range(20)), "paged offsets")
    # Raw answers hold whole batches within max_bytes (one batch at least).
    if BACKEND != "local":  # Kafka: raw fetch is 406 (92_kafka.py)
        return
    r = srv.fetch(t, 0, max_bytes=4096, format="raw")
    expect_status(r, 200, "raw with max_bytes")
    batches = decode_batches(r.body)
    check(len(batches) >= 1, "raw max_bytes=4096 returned no batch")
    check(len(batches) == 1 or len(r.body) <= 4096,
          "raw answer of %d bytes in %d batches exceeds max_bytes=4096" % (len(r.body), len(batches)))


def test_consumer_cursor_is_the_default_offset(ctx):
    srv = ctx.srv
    t = filled_topic(srv, 6)
    c = uniq("reader")
    expect_json(srv.req("PUT", "/v1/consumers/%s/cursors/%s/0" % (c, t), {"offset": 4}), 200, "commit")
    doc = srv.fetch_json(t, 0, consumer=c)
    eq([x["offset"] for x in doc["records"]], [4, 5], "starts at the cursor")
    doc = srv.fetch_json(t, 0, consumer=c, offset=1, max_records=2)
    eq([x["offset"] for x in doc["records"]], [1, 2], "explicit offset wins over the cursor")
    doc = srv.fetch_json(t, 0, consumer=uniq("nocursor"))
    eq(doc["records"][0]["offset"], 0, "consumer without cursor starts at log start")


@local_only("raw fetch sends Pulse segment bytes; a Kafka cluster has none, the Kafka backend answers 406 (tests/integration/92_kafka.py)")
def test_raw_body_equals_the_segment_file_bytes_and_decodes(ctx):
    srv = ctx.srv
    t = uniq("raw")
    srv.create_topic(t)
    sent = []
    for i in range(4):
        recs = [{"key": "k%d" % i, "value_base64": base64.b64encode(bytes([i, j, 255])).decode(),
                 "headers": {"h": "%d" % j}} for j in range(i + 1)]
        srv.publish(t, recs)
        sent.append(recs)
    r = srv.fetch(t, 0, format="raw")
    expect_status(r, 200, "raw fetch")
    eq((r.header("Content-Type") or "").split(";")[0].strip(), RAW_CT, "raw Content-Type")
    nxt, hw, ls = pulse_headers(r)
    eq((hw, ls), (10, 0), "raw headers")
    seg = segment_files(srv.data_dir, t, 0)
    eq(len(seg), 1, "one segment file")
    disk = read_file(seg[0])
    eq(r.body, disk, "raw body is exactly the stored batches")
    batches = decode_batches(r.body)
    eq([b["base"] for b in batches], [0, 1, 3, 6], "batch base offsets (one batch per request)")
    eq([b["count"] for b in batches], [1, 2, 3, 4], "batch record counts")
    eq(nxt, 10, "Pulse-Next-Offset after the last raw batch")
    i = 0
    for b, recs in zip(batches, sent):
        for rec, want in zip(b["records"], recs):
            eq(rec["offset"], i, "record offset")
            eq(rec["key"], want["key"].encode(), "raw key")
            eq(rec["value"], base64.b64decode(want["value_base64"]), "raw value")
            eq(rec["headers"], [(b"h", want["headers"]["h"].encode())], "raw headers")
            i += 1
    # Accept header selects raw too.
    r2 = srv.fetch(t, 0, headers={"Accept": RAW_CT})
    expect_status(r2, 200, "raw via Accept")
    eq(r2.body, disk, "raw via Accept")
    # ?format=json forces JSON even when raw is accepted.
    r3 = srv.fetch(t, 0, format="json", headers={"Accept": RAW_CT + ", application/json"})
    expect_json(r3, 200, "format=json")


@local_only("raw fetch sends Pulse segment bytes; a Kafka cluster has none, the Kafka backend answers 406 (tests/integration/92_kafka.py)")
def test_raw_fetch_mid_batch_starts_with_the_containing_batch(ctx):
    srv = ctx.srv
    t = uniq("rawmid")
    srv.create_topic(t)
    srv.publish(t, [{"value": "a%d" % i} for i in range(5)])
    srv.publish(t, [{"value": "b%d" % i} for i in range(5)])
    r = srv.fetch(t, 0, offset=7, format="raw")
    expect_status(r, 200, "raw")
    batches = decode_batches(r.body)
    check(batches and batches[0]["base"] <= 7 < batches[0]["base"] + batches[0]["count"],
          "first batch must contain offset 7: %r" % [(b["base"], b["count"]) for b in batches])
    eq(pulse_headers(r)[0], 10, "Pulse-Next-Offset")


@local_only("raw fetch sends Pulse segment bytes; a Kafka cluster has none, the Kafka backend answers 406 (tests/integration/92_kafka.py)")
def test_raw_fetch_at_high_watermark_is_empty(ctx):
    srv = ctx.srv
    t = filled_topic(srv, 2)
    r = srv.fetch(t, 0, offset=2, format="raw")
    expect_status(r, 200, "raw at HW")
    eq(r.body, b"", "empty raw body")
    eq(pulse_headers(r), (2, 2, 0), "headers")


@local_only("raw fetch sends Pulse segment bytes; a Kafka cluster has none, the Kafka backend answers 406 (tests/integration/92_kafka.py)")
def test_raw_answers_cover_one_segment_and_page_through_all(ctx):
    srv = ctx.srv
    t = uniq("segs")
    srv.create_topic(t, segment_bytes=1024)
    for i in range(24):
        srv.publish(t, [{"value": "%03d" % i + "y" * 200}])
    files = segment_files(srv.data_dir, t, 0)
    check(len(files) >= 3, "segment_bytes=1024 with 24 x 250 B must roll segments (got %d)" % len(files))
    contents = [read_file(f) for f in files]
    off, seen = 0, []
    while off < 24:
        r = srv.fetch(t, 0, offset=off, format="raw")
        expect_status(r, 200, "raw at %d" % off)
        check(r.body, "raw fetch at %d below HW returned nothing" % off)
        check(any(r.body in c for c in contents),
              "raw answer at offset %d is not a slice of a single segment file" % off)
        for b in decode_batches(r.body):
            seen += [x["offset"] for x in b["records"] if x["offset"] >= off]
        nxt = pulse_headers(r)[0]
        check(nxt > off, "Pulse-Next-Offset must advance (%d -> %d)" % (off, nxt))
        off = nxt
    eq(seen, list(range(24)), "all offsets exactly once across segments")
    recs, doc = srv.fetch_all(t, 0)
    eq([x["value"][:3] for x in recs], ["%03d" % i for i in range(24)], "JSON across segments")
    stats = srv.topic(t)["partition_stats"][0]
    eq(stats["segments"], len(files), "partition_stats.segments matches the files on disk")


def test_content_negotiation(ctx):
    srv = ctx.srv
    t = filled_topic(srv, 1)
    for acc in ("*/*", "application/json", "application/*",
                "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"):
        expect_json(srv.fetch(t, 0, headers={"Accept": acc}), 200, "Accept %r" % acc)
    expect_error(srv.fetch(t, 0, headers={"Accept": "text/html"}), 406, "not_acceptable", "Accept text/html")
    expect_error(srv.fetch(t, 0, headers={"Accept": "image/png"}), 406, "not_acceptable", "Accept image/png")


def test_bad_query_parameters_are_400(ctx):
    srv = ctx.srv
    t = filled_topic(srv, 2)
    bad = [{"offset": -1}, {"offset": "abc"}, {"offset": "1e3"}, {"offset": ""},
           {"offset": "9223372036854775808"}, {"offset": "1.0"},
           {"max_records": 0}, {"max_records": 10001}, {"max_records": "x"},
           {"max_bytes": 0}, {"max_bytes": 67108865}, {"max_bytes": -1},
           {"wait_ms": -1}, {"wait_ms": 30001}, {"wait_ms": "soon"},
           {"format": "xml"}, {"format": ""}]
    for params in bad:
        expect_error(srv.fetch(t, 0, **params), 400, "invalid_request", "fetch %r" % params)
    for p in ("x", "-1", "1.5", "0x1", "99999999999999999999"):
        expect_error(srv.get("/v1/topics/%s/partitions/%s/records" % (t, p)), 400,
                     "invalid_request", "partition %r" % p)
    expect_error(srv.fetch(t, 0, consumer="__bad"), 400, ("invalid_name", "invalid_request"),
                 "invalid consumer name")
    # Boundary values are accepted.
    for params in ({"max_records": 1}, {"max_records": 10000}, {"max_bytes": 1},
                   {"max_bytes": 67108864}, {"wait_ms": 0}, {"offset": 0}):
        expect_json(srv.fetch(t, 0, **params), 200, "fetch %r" % params)


def test_unknown_topic_and_partition_are_404(ctx):
    srv = ctx.srv
    t = filled_topic(srv, 1, partitions=2)
    expect_error(srv.fetch(t, 2), 404, "partition_not_found", "partition 2 of 2")
    expect_error(srv.fetch(t, 256), 404, "partition_not_found", "partition 256")
    expect_error(srv.fetch("no-such-topic-xyz", 0), 404, "topic_not_found", "unknown topic")


@local_only("retention is the cluster's own (the mock cluster trims only past about 5 MB per partition)")
def test_offset_below_log_start_starts_at_log_start(ctx):
    srv = ctx.new_server(args=["-o", "storage.retention-interval=100ms"])
    srv.start()
    t = uniq("trim")
    srv.create_topic(t, segment_bytes=1024, retention_bytes=1500)
    for i in range(30):
        srv.publish(t, [{"value": "%03d" % i + "z" * 150}])
    ok = wait_until(lambda: srv.topic(t)["partition_stats"][0]["log_start_offset"] > 0, 10, 0.1)
    if not ok:
        raise Skip("retention did not trim within 10 s (is the maintenance thread implemented?)")
    ls = srv.topic(t)["partition_stats"][0]["log_start_offset"]
    note("log start after retention: %d" % ls)
    r = srv.fetch(t, 0, offset=0)
    doc = expect_json(r, 200, "fetch below log start")
    check(doc["log_start_offset"] >= ls, "answer log_start_offset %d >= %d" % (doc["log_start_offset"], ls))
    eq(doc["records"][0]["offset"], doc["log_start_offset"], "first record is at the log start")
    eq(pulse_headers(r)[2], doc["log_start_offset"], "Pulse-Log-Start-Offset")
    eq(doc["records"][0]["value"][:3], "%03d" % doc["log_start_offset"], "offsets are never renumbered")
    r = srv.fetch(t, 0, offset=0, format="raw")
    expect_status(r, 200, "raw below log start")
    b = decode_batches(r.body)
    check(b and b[0]["base"] >= ls, "raw starts at the log start")
    # Cursors below the log start are still in [0, HW], so a commit is accepted;
    # a fetch through it starts at the log start.
    c = uniq("slow")
    expect_json(srv.req("PUT", "/v1/consumers/%s/cursors/%s/0" % (c, t), {"offset": 0}), 200, "commit 0")
    doc = srv.fetch_json(t, 0, consumer=c)
    eq(doc["records"][0]["offset"], doc["log_start_offset"], "consumer behind the log start")
    srv.stop()


if __name__ == "__main__":
    sys.exit(main(globals()))
