# SPDX-License-Identifier: MIT
"""Publish: the three body types (JSON, octet-stream, NDJSON), gzip bodies,
how values and keys are stored, partition routing (explicit, Kafka murmur2
for keys, round-robin for keyless requests), offsets in request order, and
X-Request-Id handling.  Every stored record is read back through fetch."""

import base64
import http.client
import json
import os
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (Response, b64, check, eq, expect_error, expect_json, expect_keys, gz, json_value_bytes,  # noqa: E402
                       kafka_partition, main, uniq, BACKEND)


def publish_raw(srv, topic, body, headers, query=""):
    return srv.req("POST", "/v1/topics/%s/records%s" % (topic, query), body, headers=headers)


def records_of(srv, topic, partition=0):
    recs, _ = srv.fetch_all(topic, partition)
    return recs


def test_spec_example_body_is_stored_as_described(ctx):
    srv = ctx.srv
    t = uniq("example")
    srv.create_topic(t, partitions=2)
    body = {"records": [
        {"key": "user-42", "value": {"sku": "a1"}, "partition": 0},
        {"value": "plain text", "partition": 0},
        {"key": "k", "value_base64": "AAEC/w==", "partition": 0},
        {"key": "user-42", "value": None, "partition": 0},
        {"key": "k2", "value": "x", "headers": {"trace": "abc"}, "partition": 1,
         "timestamp": 1764400000000},
    ]}
    doc = expect_json(srv.req("POST", "/v1/topics/%s/records" % t, body), 200, "publish")
    expect_keys(doc, ["offsets"], "publish answer")
    for o in doc["offsets"]:
        expect_keys(o, ["partition", "offset"], "offset entry")
    eq([(o["partition"], o["offset"]) for o in doc["offsets"]],
       [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)], "offsets in request order")
    recs = records_of(srv, t, 0)
    eq(len(recs), 4, "records in partition 0")
    r0, r1, r2, r3 = recs
    expect_keys(r0, ["offset", "timestamp", "key", "value", "headers"], "record 0")
    eq((r0["offset"], r0["key"], r0["value"], r0["headers"]), (0, "user-42", '{"sku":"a1"}', {}),
       "object value stored as compact JSON text")
    eq((r1["key"], r1["value"]), (None, "plain text"), "string value, null key")
    expect_keys(r2, ["offset", "timestamp", "key", "value_base64", "headers"], "binary record")
    eq(base64.b64decode(r2["value_base64"]), b"\x00\x01\x02\xff", "value_base64 bytes")
    eq((r3["key"], r3["value"]), ("user-42", None), "tombstone")
    recs1 = records_of(srv, t, 1)
    eq(len(recs1), 1, "records in partition 1")
    eq((recs1[0]["key"], recs1[0]["value"], recs1[0]["headers"], recs1[0]["timestamp"]),
       ("k2", "x", {"trace": "abc"}, 1764400000000), "headers and explicit timestamp")


def test_spec_example_body_verbatim_is_accepted(ctx):
    # The publish example of the API contract, byte for byte, on a topic
    # where "user-42" and the explicit partition 1 share a partition: the
    # explicit 2025 timestamp and the broker's clock then sit in one batch.
    srv = ctx.srv
    t = uniq("verbatim")
    srv.create_topic(t, partitions=3)
    body = (b'{"records": [\n'
            b'  {"key": "user-42", "value": {"sku": "a1"}},\n'
            b'  {"value": "plain text"},\n'
            b'  {"key": "k", "value_base64": "AAEC/w=="},\n'
            b'  {"key": "user-42", "value": null},\n'
            b'  {"key": "k2", "value": "x", "headers": {"trace": "abc"}, "partition": 1,\n'
            b'   "timestamp": 1764400000000}\n'
            b']}')
    doc = expect_json(publish_raw(srv, t, body, {"Content-Type": "application/json"}), 200,
                      "spec example body")
    parts = [o["partition"] for o in doc["offsets"]]
    eq((parts[0], parts[2], parts[3], parts[4]),
       (kafka_partition(b"user-42", 3), kafka_partition(b"k", 3), kafka_partition(b"user-42", 3), 1),
       "partitions of the keyed and explicit records")
    recs = {r["key"]: r for r in records_of(srv, t, 1) if r.get("key") == "k2"}
    eq(recs["k2"]["timestamp"], 1764400000000, "explicit timestamp kept")


def test_non_string_json_values_are_stored_as_compact_text_in_order(ctx):
    srv = ctx.srv
    t = uniq("jsonvals")
    srv.create_topic(t)
    raw = (b'{"records":[{"value":{"z":1, "a":[1, 2, {"k":"v"}], "m":null}},'
           b'{"value":42},{"value":-1.5},{"value":true},{"value":false},'
           b'{"value":[ ]},{"value":{}},{"value":""},{"value":"h\\u00e9llo \\u2713"}]}')
    doc = expect_json(publish_raw(srv, t, raw, {"Content-Type": "application/json"}), 200, "publish")
    eq(len(doc["offsets"]), 9, "offsets")
    vals = [r["value"] for r in records_of(srv, t)]
    eq(vals, ['{"z":1,"a":[1,2,{"k":"v"}],"m":null}', "42", "-1.5", "true", "false", "[]", "{}",
              "", "h\u00e9llo \u2713"], "stored values")


def test_base64_key_and_value_round_trip_exactly(ctx):
    srv = ctx.srv
    t = uniq("b64")
    srv.create_topic(t)
    blob = bytes(range(256))
    srv.publish(t, [{"key_base64": b64(b"\xff\xfekey"), "value_base64": b64(blob)},
                    {"key_base64": b64(b"text-key"), "value_base64": b64(b"text value")},
                    {"key": "", "value_base64": ""},
                    {"key": None, "value": "explicit null key"}])
    r0, r1, r2, r3 = records_of(srv, t)
    eq((r3["key"], r3["value"]), (None, "explicit null key"), "key: null is a null key")
    expect_keys(r0, ["offset", "timestamp", "key_base64", "value_base64", "headers"], "binary record")
    eq(base64.b64decode(r0["key_base64"]), b"\xff\xfekey", "binary key")
    eq(base64.b64decode(r0["value_base64"]), blob, "binary value")
    eq((r1["key"], r1["value"]), ("text-key", "text value"), "UTF-8 bytes come back as strings")
    eq((r2["key"], r2["value"]), ("", ""), "empty key and value are not null")


def test_default_timestamp_is_the_broker_clock(ctx):
    srv = ctx.srv
    t = uniq("ts")
    srv.create_topic(t)
    before = int(time.time() * 1000)
    srv.publish(t, [{"value": "now"}])
    # A separate request: one batch stores int32 timestamp deltas, so the
    # records of one request cannot span more than 2^31 ms.
    srv.publish(t, [{"value": "then", "timestamp": 0}])
    after = int(time.time() * 1000)
    r0, r1 = records_of(srv, t)
    check(before - 5000 <= r0["timestamp"] <= after + 5000,
          "default timestamp %d not near [%d, %d]" % (r0["timestamp"], before, after))
    if BACKEND == "local":  # librdkafka takes timestamp 0 as "now" (docs/Scaling.md)
        eq(r1["timestamp"], 0, "explicit timestamp 0")


def test_offsets_continue_across_requests_without_holes(ctx):
    srv = ctx.srv
    t = uniq("cont")
    srv.create_topic(t)
    got = []
    for i in range(5):
        got += srv.publish(t, [{"value": "r%d-%d" % (i, j)} for j in range(i + 1)])
    eq([o for _, o in got], list(range(15)), "offsets")
    eq(srv.hw(t), 15, "high watermark")
    eq([r["value"] for r in records_of(srv, t)],
       ["r%d-%d" % (i, j) for i in range(5) for j in range(i + 1)], "values in order")


def test_keyed_records_go_to_kafka_murmur2_partition(ctx):
    srv = ctx.srv
    t = uniq("murmur")
    parts = 5
    srv.create_topic(t, partitions=parts)
    keys = ["user-%d" % i for i in range(40)] + ["21", "foobar", "abc", "\u00e9t\u00e9"]
    offs = srv.publish(t, [{"key": k, "value": k} for k in keys])
    for k, (p, _) in zip(keys, offs):
        eq(p, kafka_partition(k.encode("utf-8"), parts), "partition of key %r" % k)
    # key_base64 hashes the raw bytes the same way
    (p, _), = srv.publish(t, [{"key_base64": b64(b"\x00\xff\x10"), "value": "v"}])
    eq(p, kafka_partition(b"\x00\xff\x10", parts), "partition of binary key")
    # And the records are really there.
    for p in range(parts):
        for r in records_of(srv, t, p):
            if r.get("key") in keys:
                eq(kafka_partition(r["key"].encode("utf-8"), parts), p, "stored partition")


def test_keyless_request_goes_to_one_partition_round_robin(ctx):
    srv = ctx.srv
    t = uniq("rr")
    parts = 3
    srv.create_topic(t, partitions=parts)
    seen = []
    for i in range(parts):
        offs = srv.publish(t, [{"value": "v%d-%d" % (i, j)} for j in range(4)])
        ps = set(p for p, _ in offs)
        eq(len(ps), 1, "keyless records of one request share a partition (%r)" % offs)
        p = ps.pop()
        eq([o for _, o in offs], [0, 1, 2, 3], "contiguous offsets in a fresh partition %d" % p)
        seen.append(p)
    eq(sorted(seen), list(range(parts)), "consecutive keyless requests rotate over partitions")


def test_explicit_partition_wins_over_key(ctx):
    srv = ctx.srv
    t = uniq("explicit")
    srv.create_topic(t, partitions=4)
    key = "foobar"
    target = (kafka_partition(key.encode(), 4) + 1) % 4
    eq(srv.publish(t, [{"key": key, "value": "x", "partition": target}]), [(target, 0)], "offsets")


def test_mixed_partitions_in_one_request_keep_request_order_in_answer(ctx):
    srv = ctx.srv
    t = uniq("mixed")
    srv.create_topic(t, partitions=3)
    recs = [{"value": "a", "partition": 2}, {"value": "b", "partition": 0},
            {"value": "c", "partition": 2}, {"value": "d", "partition": 1},
            {"value": "e", "partition": 0}]
    eq(srv.publish(t, recs), [(2, 0), (0, 0), (2, 1), (1, 0), (0, 1)], "offsets")
    eq([r["value"] for r in records_of(srv, t, 2)], ["a", "c"], "partition 2")
    eq([r["value"] for r in records_of(srv, t, 0)], ["b", "e"], "partition 0")


def test_octet_stream_body_is_one_value_byte_for_byte(ctx):
    srv = ctx.srv
    t = uniq("octet")
    srv.create_topic(t, partitions=2)
    blob = bytes(range(256)) * 8 + b"\x00tail"
    doc = expect_json(publish_raw(srv, t, blob, {"Content-Type": "application/octet-stream"},
                                  "?key=k-1&partition=1"), 200, "octet publish")
    eq(doc, {"offsets": [{"partition": 1, "offset": 0}]}, "answer")
    doc = expect_json(publish_raw(srv, t, b"plain", {"Content-Type": "application/octet-stream"},
                                  "?partition=0"), 200, "octet publish without key")
    eq(doc["offsets"][0]["partition"], 0, "partition")
    (r,) = records_of(srv, t, 1)
    eq(r["key"], "k-1", "key from the query")
    eq(base64.b64decode(r["value_base64"]), blob, "value bytes")
    (r,) = records_of(srv, t, 0)
    eq((r["key"], r["value"]), (None, "plain"), "keyless octet record")
    doc = expect_json(publish_raw(srv, t, b"", {"Content-Type": "application/octet-stream"},
                                  "?partition=0"), 200, "empty octet body")
    r = records_of(srv, t, 0)[-1]
    eq(r["value"], "", "empty octet body stores an empty (not null) value")


def test_ndjson_one_record_per_line_blank_lines_ignored(ctx):
    srv = ctx.srv
    t = uniq("ndjson")
    srv.create_topic(t)
    body = ('{"key":"a","value":"1"}\n\n{"value":{"n":2}}\r\n   \n'
            '{"value_base64":"AP8=","headers":{"h":"v"}}')
    doc = expect_json(publish_raw(srv, t, body, {"Content-Type": "application/x-ndjson"}), 200, "ndjson")
    eq([o["offset"] for o in doc["offsets"]], [0, 1, 2], "offsets")
    r0, r1, r2 = records_of(srv, t)
    eq((r0["key"], r0["value"]), ("a", "1"), "line 1")
    eq(r1["value"], '{"n":2}', "line 2")
    eq((base64.b64decode(r2["value_base64"]), r2["headers"]), (b"\x00\xff", {"h": "v"}), "line 3")


def test_gzip_request_bodies_are_accepted(ctx):
    srv = ctx.srv
    t = uniq("gzip")
    srv.create_topic(t)
    body = json.dumps({"records": [{"value": "zipped-%d" % i} for i in range(50)]}).encode()
    doc = expect_json(publish_raw(srv, t, gz(body), {"Content-Type": "application/json",
                                                     "Content-Encoding": "gzip"}), 200, "gzip json")
    eq(len(doc["offsets"]), 50, "offsets")
    doc = expect_json(publish_raw(srv, t, gz(b"\x01\x02binary"),
                                  {"Content-Type": "application/octet-stream",
                                   "Content-Encoding": "gzip"}), 200, "gzip octet")
    doc = expect_json(publish_raw(srv, t, gz(b'{"value":"nd"}\n'),
                                  {"Content-Type": "application/x-ndjson",
                                   "Content-Encoding": "gzip"}), 200, "gzip ndjson")
    doc = expect_json(publish_raw(srv, t, json.dumps({"records": [{"value": "id"}]}),
                                  {"Content-Type": "application/json",
                                   "Content-Encoding": "identity"}), 200, "identity encoding")
    recs = records_of(srv, t)
    eq([r.get("value") for r in recs[:50]], ["zipped-%d" % i for i in range(50)], "gzip values")
    eq(json_value_bytes(recs[50]), b"\x01\x02binary", "gzip octet value")
    eq((recs[51]["value"], recs[52]["value"]), ("nd", "id"), "ndjson and identity values")
    # A gzip-encoded topic create works too (gzip applies to every body).
    t2 = uniq("gzcreate")
    r = srv.req("POST", "/v1/topics", gz(json.dumps({"name": t2}).encode()),
                headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    expect_json(r, 201, "gzip create")


def test_content_type_parameters_and_case_are_accepted(ctx):
    srv = ctx.srv
    t = uniq("ctype")
    srv.create_topic(t)
    for ct in ("application/json; charset=utf-8", "Application/JSON", "application/json;charset=UTF-8"):
        expect_json(publish_raw(srv, t, json.dumps({"records": [{"value": ct}]}),
                                {"Content-Type": ct}), 200, "Content-Type %r" % ct)
    # A missing Content-Type is treated as JSON.
    expect_json(publish_raw(srv, t, json.dumps({"records": [{"value": "none"}]}),
                            {"Content-Type": None}), 200, "no Content-Type")
    eq(srv.hw(t), 4, "all four stored")


def test_chunked_request_body_is_accepted(ctx):
    srv = ctx.srv
    t = uniq("chunked")
    srv.create_topic(t)
    body = json.dumps({"records": [{"value": "c%d" % i} for i in range(20)]}).encode()
    chunks = [body[i:i + 17] for i in range(0, len(body), 17)]
    r = srv.req("POST", "/v1/topics/%s/records" % t, iter(chunks),
                headers={"Content-Type": "application/json"}, chunked=True)
    doc = expect_json(r, 200, "chunked publish")
    eq(len(doc["offsets"]), 20, "offsets")


def test_default_body_cap_is_16_mib_and_checked_before_the_body(ctx):
    srv = ctx.srv
    t = uniq("cap")
    srv.create_topic(t)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
    try:
        # Headers only: the 413 must come without the 16 MiB being sent.
        conn.putrequest("POST", "/v1/topics/%s/records" % t)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(16 * 1024 * 1024 + 1))
        conn.endheaders()
        resp = conn.getresponse()
        r = Response(resp.status, resp.reason, resp.getheaders(), resp.read())
    finally:
        conn.close()
    expect_error(r, 413, "payload_too_large", "Content-Length 16 MiB + 1")
    eq(srv.hw(t), 0, "nothing stored")


def test_request_id_is_echoed_or_generated(ctx):
    srv = ctx.srv
    t = uniq("rid")
    srv.create_topic(t)
    r = srv.req("POST", "/v1/topics/%s/records" % t, {"records": [{"value": "x"}]},
                headers={"X-Request-Id": "my-req-0001"})
    expect_json(r, 200, "publish")
    eq(r.header("X-Request-Id"), "my-req-0001", "echoed X-Request-Id")
    r = srv.req("POST", "/v1/topics/%s/records" % t, {"records": [{"value": "y"}]})
    rid = r.header("X-Request-Id") or ""
    check(len(rid) == 16 and all(c in "0123456789abcdef" for c in rid.lower()),
          "generated X-Request-Id must be 16 hex chars: %r" % rid)


if __name__ == "__main__":
    sys.exit(main(globals()))
