# SPDX-License-Identifier: MIT
"""Answer bodies (docs/API.md "Compression"): every JSON body ends with a
newline, and JSON answers of 1 KiB or more are gzip'ed when Accept-Encoding
allows it - the streamed JSON fetch included, which then goes out chunked.
Raw (sendfile) fetches are never compressed. The compressed bytes are
inflated here and compared with the plain answer to the same request."""

import gzip
import json
import os
import socket
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import BACKEND, check, eq, expect_status, main, uniq, wait_until  # noqa: E402

GZ = {"Accept-Encoding": "gzip"}


def test_every_json_body_ends_with_one_newline(ctx):
    srv = ctx.srv
    t = uniq("nl")
    srv.create_topic(t)
    srv.publish(t, [{"value": "a"}])
    c = uniq("nlc")
    answers = [
        srv.get("/healthz"), srv.get("/readyz"), srv.get("/v1/broker"), srv.get("/v1/topics"),
        srv.get("/v1/topics/" + t), srv.get("/v1/topics/%s/partitions" % t), srv.get("/v1/topics/%s/partitions/0" % t),
        srv.req("POST", "/v1/topics/%s/records" % t, {"records": [{"value": "b"}]}),
        srv.fetch(t, 0), srv.fetch(t, 0, offset=2), srv.fetch(t, 0, offset=2, wait_ms=10),
        srv.req("PUT", "/v1/consumers/%s/cursors/%s/0" % (c, t), {"offset": 1}),
        srv.get("/v1/consumers/%s/cursors" % c), srv.get("/v1/consumers/%s/cursors/%s/0" % (c, t)),
        srv.get("/v1/consumers"),
        # errors, from the router, the checks and the handlers
        srv.get("/nowhere"), srv.req("DELETE", "/v1/broker"), srv.req("POST", "/v1/topics", "x=1",
                                                                      headers={"Content-Type": "text/plain"}),
        srv.get("/v1/topics", headers={"Accept": "text/html"}), srv.fetch(t, 0, offset=99),
        srv.get("/v1/topics/" + uniq("missing")), srv.req("POST", "/v1/topics", "{"),
    ]
    for r in answers:
        check((r.header("Content-Type") or "").startswith("application/json"), "JSON answer: %r" % r)
        check(r.body.endswith(b"}\n") and not r.body.endswith(b"\n\n"), "ends with one newline: %r" % r)
        json.loads(r.body)  # the newline is whitespace, still one JSON value


def test_large_json_answers_are_gzipped_when_accepted(ctx):
    srv = ctx.srv
    for i in range(12):
        srv.create_topic(uniq("many"))
    plain = srv.get("/v1/topics")
    expect_status(plain, 200, "plain list")
    check(len(plain.body) >= 1024, "the list is over the threshold (%d bytes)" % len(plain.body))
    eq(plain.header("Content-Encoding"), None, "no gzip without Accept-Encoding")
    r = srv.get("/v1/topics", headers=GZ)
    eq(r.header("Content-Encoding"), "gzip", "gzip'ed")
    check("Accept-Encoding" in ",".join(r.header_all("Vary")), "Vary: Accept-Encoding")
    check(len(r.body) < len(plain.body) / 2, "smaller: %d of %d" % (len(r.body), len(plain.body)))
    eq(gzip.decompress(r.body), plain.body, "inflates to the plain answer")
    eq(int(r.header("Content-Length")), len(r.body), "Content-Length of the compressed body")
    for refused in ("identity", "gzip;q=0", "br, deflate"):
        r = srv.get("/v1/topics", headers={"Accept-Encoding": refused})
        eq((r.header("Content-Encoding"), r.body), (None, plain.body), "Accept-Encoding: %s" % refused)
    # Small answers stay plain: gzip's frame would outweigh the savings.
    r = srv.get("/healthz", headers=GZ)
    eq((r.header("Content-Encoding"), r.body), (None, b'{"status":"ok"}\n'), "small answer")


def test_json_fetch_is_gzipped_as_it_streams_and_raw_fetch_never(ctx):
    srv = ctx.srv
    t = uniq("gzfetch")
    srv.create_topic(t)
    srv.publish(t, [{"key": "k%d" % i, "value": {"n": i, "text": "record number %d" % i}} for i in range(300)])
    plain = srv.fetch(t, 0, max_records=300)
    expect_status(plain, 200, "plain fetch")
    r = srv.fetch(t, 0, headers=GZ, max_records=300)
    expect_status(r, 200, "gzip fetch")
    eq(r.header("Content-Encoding"), "gzip", "the JSON fetch is gzip'ed")
    eq(r.header("Transfer-Encoding"), "chunked", "streamed: its compressed length is not known up front")
    for h in ("Pulse-Next-Offset", "Pulse-High-Watermark", "Pulse-Log-Start-Offset"):
        eq(r.header(h), plain.header(h), h)
    eq(gzip.decompress(r.body), plain.body, "inflates to the plain fetch")
    check(len(r.body) < len(plain.body) / 3, "compressed %d of %d" % (len(r.body), len(plain.body)))
    # An HTTP/1.0 client gets no chunks: the end of the body is the close.
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(("GET /v1/topics/%s/partitions/0/records?max_records=300 HTTP/1.0\r\n"
               "Accept-Encoding: gzip\r\n\r\n" % t).encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    check(b"content-encoding: gzip" in head.lower(), "HTTP/1.0 answer gzip'ed: %r" % head)
    eq(gzip.decompress(body), plain.body, "HTTP/1.0 body inflates to the plain fetch")
    # A small fetch stays plain.
    r = srv.fetch(t, 0, headers=GZ, max_records=1)
    eq(r.header("Content-Encoding"), None, "a fetch under 1 KiB is not compressed")
    # Raw batches go out by sendfile, as stored.
    if BACKEND != "local":  # Kafka: raw fetch is 406 (92_kafka.py)
        return
    raw_plain = srv.fetch(t, 0, format="raw")
    raw_gz = srv.fetch(t, 0, format="raw", headers=GZ)
    eq((raw_gz.status, raw_gz.header("Content-Encoding")), (200, None), "raw fetch is never compressed")
    eq(raw_gz.body, raw_plain.body, "raw bytes identical")
    check(len(raw_gz.body) >= 1024, "the raw answer is over the threshold too")


def test_gzip_fetch_under_a_small_memory_budget_still_answers(ctx):
    # The compressor's state is taken from the budget first; a budget that
    # cannot also cover it answers plain rather than refusing.
    srv = ctx.new_server(args=["-o", "server.memory-budget=1MiB", "-o", "server.max-body-bytes=64KiB"])
    srv.start()
    t = uniq("tight")
    srv.create_topic(t)
    for _ in range(50):
        srv.publish(t, [{"value": "v" * 3000} for _ in range(4)])
    def reserved():
        text = srv.get("/metrics").body.decode()
        line = [x for x in text.splitlines() if x.startswith("pulse_http_memory_reserved_bytes ")]
        return int(line[0].split()[1]) if line else -1

    def fetch(headers):
        # A request's memory is given back when it completes, which may be
        # a moment after its client read the answer: a 503 here is the
        # budget doing its job; retry as its Retry-After says. How much an
        # answer holds follows the budget that is free, so both fetches
        # start from an idle budget to be comparable.
        check(wait_until(lambda: reserved() == 0, 10), "the budget is idle before the fetch")
        for _ in range(50):
            r = srv.fetch(t, 0, headers=headers, max_bytes=900 * 1024, max_records=10000)
            if r.status != 503:
                return r
            time.sleep(0.1)
        return r
    plain = fetch(None)
    expect_status(plain, 200, "plain fetch under a 1 MiB budget")
    r = fetch(GZ)
    expect_status(r, 200, "gzip fetch under a 1 MiB budget")
    body = gzip.decompress(r.body) if r.header("Content-Encoding") == "gzip" else r.body
    eq(body, plain.body, "same answer, compressed or not")
    srv.stop()


if __name__ == "__main__":
    sys.exit(main(globals()))
