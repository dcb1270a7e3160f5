# SPDX-License-Identifier: MIT
"""Hostile and broken input: malformed JSON, wrong types, duplicate keys,
oversized bodies (Content-Length, chunked, gzip bombs), too many records,
unsupported media types and encodings, invalid names, bad query parameters,
garbage on the socket.  Each must get its JSON error and change nothing: the
test compares the full topic list (with high watermarks) before and after.

The server runs with small caps (64 KiB bodies, 100 records per request) so
the limits are cheap to hit."""

import http.client
import json
import os
import random
import socket
import sys
import zlib

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (Response, check, eq, expect_error, expect_json, gz, main, note, seed_from_env,  # noqa: E402
                       uniq, BACKEND)

CAP = 65536
MAX_RECORDS = 100
SERVER_ARGS = ["-o", "server.max-body-bytes=%d" % CAP, "-o", "server.max-records-per-request=%d" % MAX_RECORDS]

JSON = {"Content-Type": "application/json"}


class Fixture:
    topic = None


def fixture(srv):
    if Fixture.topic is None:
        Fixture.topic = uniq("victim")
        srv.create_topic(Fixture.topic, partitions=2)
        srv.publish(Fixture.topic, [{"value": "seed", "partition": 0}])
    return Fixture.topic


def unchanged(srv, before, what):
    eq(srv.topics(), before, "stored state after %s" % what)


def send_raw_socket(port, data, read_timeout=5.0):
    """Write bytes on a fresh socket and return whatever comes back."""
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout)
    try:
        s.sendall(data)
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def test_malformed_json_bodies_are_400_invalid_request(ctx):
    srv = ctx.srv
    t = fixture(srv)
    before = srv.topics()
    bodies = [b"", b"{", b"{\"name\":", b"nul", b"{\"name\": 'x'}", b"{\"name\": \"x\",}",
              b"[]", b"\"str\"", b"null", b"42", b"{\"name\":\"a\"} trailing", b"\xff\xfe{}",
              b"{\"name\": \"\xc3\x28\"}", b"{\"name\":\"a\",\"name\":\"b\"}",
              b"[" * 5000 + b"]" * 5000, b"{\"a\":" * 3000 + b"1" + b"}" * 3000,
              b"{\"name\":\"x\\u0000y\"}", b"\x00", b"{\"name\":\"a\"}\x00"]
    for b in bodies:
        r = srv.req("POST", "/v1/topics", b, headers=JSON)
        codes = ("invalid_request", "invalid_name") if b"\\u0000" in b else "invalid_request"
        expect_error(r, 400, codes, "create body %r" % b[:40])
    for b in bodies:
        expect_error(srv.req("POST", "/v1/topics/%s/records" % t, b, headers=JSON), 400,
                     "invalid_request", "publish body %r" % b[:40])
        expect_error(srv.req("PUT", "/v1/consumers/c/cursors/%s/0" % t, b, headers=JSON), 400,
                     "invalid_request", "cursor body %r" % b[:40])
    unchanged(srv, before, "malformed bodies")
    if BACKEND == "local":  # Kafka: no consumer list on the mock
        eq(srv.get("/v1/consumers").json()["consumers"], [], "no consumer created")


def test_publish_record_validation_rejects_the_whole_request(ctx):
    srv = ctx.srv
    t = fixture(srv)
    before = srv.topics()
    good = {"value": "ok", "partition": 0}
    bad_records = [
        {},
        {"key": "k"},
        {"value": "a", "value_base64": "YQ=="},
        {"key": "k", "key_base64": "aw==", "value": "v"},
        {"key": 5, "value": "v"},
        {"key": ["k"], "value": "v"},
        {"key_base64": 5, "value": "v"},
        {"value_base64": 5},
        {"value_base64": None},
        {"value_base64": "!!!not base64!!!"},
        {"value_base64": "YQ"},
        {"key_base64": "%%%", "value": "v"},
        {"value": "v", "headers": {"h": 1}},
        {"value": "v", "headers": {"h": None}},
        {"value": "v", "headers": ["h", "v"]},
        {"value": "v", "headers": "h=v"},
        {"value": "v", "partition": -1},
        {"value": "v", "partition": "0"},
        {"value": "v", "partition": 1.5},
        {"value": "v", "partition": True},
        {"value": "v", "timestamp": -1},
        {"value": "v", "timestamp": "now"},
        {"value": "v", "timestamp": 1.5},
        {"value": "v", "offset": 3},
        {"value": "v", "Key": "k"},
        "just a string",
        None,
        ["value", "v"],
    ]
    for rec in bad_records:
        for records in ([rec], [good, good, rec]):
            expect_error(srv.req("POST", "/v1/topics/%s/records" % t, {"records": records}), 400,
                         "invalid_request", "records %r" % records)
    for body in ({}, {"records": None}, {"records": {}}, {"records": "x"}, {"records": []},
                 {"records": [good], "extra": True}, {"record": [good]}):
        expect_error(srv.req("POST", "/v1/topics/%s/records" % t, body), 400, "invalid_request",
                     "publish body %r" % body)
    unchanged(srv, before, "invalid records")


def test_unknown_topic_or_partition_on_publish_stores_nothing(ctx):
    srv = ctx.srv
    t = fixture(srv)
    before = srv.topics()
    expect_error(srv.req("POST", "/v1/topics/%s/records" % t,
                         {"records": [{"value": "a", "partition": 0}, {"value": "b", "partition": 2}]}),
                 404, "partition_not_found", "partition 2 of 2")
    expect_error(srv.req("POST", "/v1/topics/no-such-topic-xyz/records", {"records": [{"value": "a"}]}),
                 404, "topic_not_found", "unknown topic")
    expect_error(srv.req("POST", "/v1/topics/%s/records?partition=7" % t, b"x",
                         headers={"Content-Type": "application/octet-stream"}),
                 404, "partition_not_found", "octet partition 7")
    unchanged(srv, before, "404 publishes")


def test_too_many_records_is_413(ctx):
    srv = ctx.srv
    t = fixture(srv)
    before = srv.topics()
    expect_error(srv.req("POST", "/v1/topics/%s/records" % t,
                         {"records": [{"value": "r"}] * (MAX_RECORDS + 1)}), 413, "payload_too_large",
                 "%d records" % (MAX_RECORDS + 1))
    nd = "\n".join(['{"value":"n"}'] * (MAX_RECORDS + 1))
    expect_error(srv.req("POST", "/v1/topics/%s/records" % t, nd,
                         headers={"Content-Type": "application/x-ndjson"}), 413, "payload_too_large",
                 "ndjson over the record cap")
    unchanged(srv, before, "too many records")
    doc = expect_json(srv.req("POST", "/v1/topics/%s/records" % t,
                              {"records": [{"value": "r", "partition": 1}] * MAX_RECORDS}), 200,
                      "exactly the cap")
    eq(len(doc["offsets"]), MAX_RECORDS, "offsets at the cap")


def test_content_length_over_the_cap_is_413_before_the_body(ctx):
    srv = ctx.srv
    t = fixture(srv)
    before = srv.topics()
    for path in ("/v1/topics/%s/records" % t, "/v1/topics"):
        # Only the headers are sent: the answer must come without the body.
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        try:
            conn.putrequest("POST", path)
            conn.putheader("Content-Type", "application/json")
            conn.putheader("Content-Length", str(CAP + 1))
            conn.endheaders()
            resp = conn.getresponse()
            r = Response(resp.status, resp.reason, resp.getheaders(), resp.read())
        finally:
            conn.close()
        expect_error(r, 413, "payload_too_large", "Content-Length over the cap on %s" % path)
    r = srv.req("POST", "/v1/topics/%s/records" % t, b"x" * (CAP + 1), headers=JSON)
    expect_error(r, 413, "payload_too_large", "body one byte over the cap")
    unchanged(srv, before, "oversized bodies")


def test_chunked_body_over_the_cap_is_413(ctx):
    srv = ctx.srv
    t = fixture(srv)
    before = srv.topics()
    payload = json.dumps({"records": [{"value": "x" * 1000}] * 80}).encode()
    check(len(payload) > CAP, "payload is over the cap")
    chunks = [payload[i:i + 4096] for i in range(0, len(payload), 4096)]
    r = srv.req("POST", "/v1/topics/%s/records" % t, iter(chunks), headers=JSON, chunked=True)
    expect_error(r, 413, "payload_too_large", "chunked over the cap")
    unchanged(srv, before, "chunked oversized body")


def test_gzip_bomb_and_corrupt_gzip(ctx):
    srv = ctx.srv
    t = fixture(srv)
    before = srv.topics()
    inner = b'{"records":[{"value":"' + b"A" * (4 * CAP) + b'"}]}'
    bomb = gz(inner)
    check(len(bomb) < CAP, "the compressed bomb itself is under the cap")
    hdr = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    expect_error(srv.req("POST", "/v1/topics/%s/records" % t, bomb, headers=hdr), 413,
                 "payload_too_large", "gzip expanding past the cap")
    good = gz(b'{"records":[{"value":"fine"}]}')
    for bad in (b"not gzip at all", good[:len(good) // 2], good[:10] + b"\x00" * 20 + good[30:],
                good + b"trailing garbage", zlib.compress(b'{"records":[{"value":"z"}]}')):
        expect_error(srv.req("POST", "/v1/topics/%s/records" % t, bad, headers=hdr), 400,
                     "invalid_request", "corrupt gzip %r" % bad[:16])
    for enc in ("br", "deflate", "compress", "x-gzip2"):
        expect_error(srv.req("POST", "/v1/topics/%s/records" % t, good,
                             headers={"Content-Type": "application/json", "Content-Encoding": enc}),
                     415, "unsupported_media_type", "Content-Encoding %s" % enc)
    unchanged(srv, before, "bad gzip bodies")


def test_unsupported_media_types_are_415(ctx):
    srv = ctx.srv
    t = fixture(srv)
    before = srv.topics()
    body = json.dumps({"records": [{"value": "v"}]})
    for ct in ("text/plain", "application/xml", "application/x-www-form-urlencoded",
               "multipart/form-data; boundary=x", "application/jsonx", "text/json"):
        expect_error(srv.req("POST", "/v1/topics/%s/records" % t, body, headers={"Content-Type": ct}),
                     415, "unsupported_media_type", "publish as %s" % ct)
    for ct in ("text/plain", "application/octet-stream", "application/x-ndjson"):
        expect_error(srv.req("POST", "/v1/topics", json.dumps({"name": uniq("mt")}),
                             headers={"Content-Type": ct}), 415, "unsupported_media_type",
                     "create as %s" % ct)
        expect_error(srv.req("PUT", "/v1/consumers/c/cursors/%s/0" % t, '{"offset":0}',
                             headers={"Content-Type": ct}), 415, "unsupported_media_type",
                     "cursor as %s" % ct)
        expect_error(srv.req("PATCH", "/v1/topics/" + t, '{"retention_ms":1}',
                             headers={"Content-Type": ct}), 415, "unsupported_media_type",
                     "patch as %s" % ct)
    unchanged(srv, before, "unsupported media types")


def test_bad_octet_stream_and_ndjson_publishes(ctx):
    srv = ctx.srv
    t = fixture(srv)
    before = srv.topics()
    octet = {"Content-Type": "application/octet-stream"}
    for q in ("?partition=abc", "?partition=-1", "?partition=", "?partition=1.0"):
        expect_error(srv.req("POST", "/v1/topics/%s/records%s" % (t, q), b"x", headers=octet), 400,
                     "invalid_request", "octet %s" % q)
    nd = {"Content-Type": "application/x-ndjson"}
    for body in ("", "\n\n  \n", '{"value":"a"}\n{"value":', '{"value":"a"}\n[1]\n',
                 '{"value":"a"}\n{"nope":1}\n', '{"value":"a"} {"value":"b"}\n', '{"value":"a"}\nnull'):
        expect_error(srv.req("POST", "/v1/topics/%s/records" % t, body, headers=nd), 400,
                     "invalid_request", "ndjson %r" % body)
    unchanged(srv, before, "bad octet/ndjson publishes")


def test_not_acceptable_on_json_routes(ctx):
    srv = ctx.srv
    t = fixture(srv)
    before = srv.topics()
    expect_error(srv.get("/v1/topics", headers={"Accept": "text/html"}), 406, "not_acceptable", "list")
    expect_error(srv.req("POST", "/v1/topics/%s/records" % t, {"records": [{"value": "v"}]},
                         headers={"Accept": "image/png"}), 406, "not_acceptable", "publish")
    unchanged(srv, before, "406 publish")


def test_garbage_on_the_socket_does_not_hurt_the_server(ctx):
    srv = ctx.srv
    seed = seed_from_env()
    note("garbage seed: %d (rerun with PULSE_TEST_SEED=%d)" % (seed, seed))
    rnd = random.Random(seed)
    blobs = [b"GARBAGE\r\n\r\n", b"\x00" * 100, b"GET / HTTP/9.9\r\n\r\n",
             b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
             b"POST /v1/topics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n",
             b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
             b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 70000 + b"\r\n\r\n",
             b"POST /v1/topics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{"]
    blobs += [bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 300))) for _ in range(12)]
    for b in blobs:
        try:
            # The server may answer 400 and close, or wait for the rest of a
            # request that never comes; either is fine, crashing is not.
            send_raw_socket(srv.port, b, read_timeout=0.5)
        except OSError:
            pass
        check(srv.alive(), "server died after %r" % b[:40])
    eq(expect_json(srv.get("/healthz"), 200, "healthz after garbage"), {"status": "ok"}, "healthz")


def test_bad_names_in_paths(ctx):
    srv = ctx.srv
    t = fixture(srv)
    before = srv.topics()
    for name in ("__hidden", "..", "a%20b", "x" * 250):
        r = srv.req("POST", "/v1/topics/%s/records" % name, {"records": [{"value": "v"}]})
        check(r.status in (400, 404), "publish to %r: expected 400 invalid_name or 404, got %d"
              % (name[:20], r.status))
        expect_error(r, r.status, ("invalid_name", "topic_not_found", "not_found"), "publish to bad name")
        r = srv.req("PUT", "/v1/consumers/%s/cursors/%s/0" % (name, t), {"offset": 0})
        expect_error(r, 400, "invalid_name", "cursor for consumer %r" % name[:20])
    unchanged(srv, before, "bad names in paths")


def test_integer_overflow_and_extreme_numbers(ctx):
    srv = ctx.srv
    t = fixture(srv)
    before = srv.topics()
    for raw in (b'{"name":"ovf","partitions":9223372036854775808}',
                b'{"name":"ovf","partitions":1e400}', b'{"name":"ovf","retention_ms":-9223372036854775809}',
                b'{"name":"ovf","segment_bytes":4294968320}'):
        expect_error(srv.req("POST", "/v1/topics", raw, headers=JSON), 400, "invalid_request", raw.decode())
    for raw in (b'{"records":[{"value":"v","partition":4294967296}]}',
                b'{"records":[{"value":"v","timestamp":9223372036854775808}]}'):
        r = srv.req("POST", "/v1/topics/%s/records" % t, raw, headers=JSON)
        check(r.status in (400, 404), "%s: expected 400/404, got %r" % (raw, r))
    expect_error(srv.req("PUT", "/v1/consumers/c/cursors/%s/0" % t, b'{"offset":9223372036854775808}',
                         headers=JSON), 400, "invalid_request", "cursor offset 2^63")
    unchanged(srv, before, "extreme numbers")


if __name__ == "__main__":
    sys.exit(main(globals(), server_args=SERVER_ARGS))
