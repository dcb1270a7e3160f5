# SPDX-License-Identifier: MIT
"""Browsers and CORS (docs/API.md "Browsers and CORS"), HEAD and OPTIONS.

The shared server allows two origins (server.cors-origins); a second server
runs with the default (CORS off). Requests carry the headers a browser sends
(Origin, Access-Control-Request-Method), and headers are read from raw
socket answers where their exact bytes matter (HEAD must send no body).
A write from a disallowed origin is checked for what it did not do: nothing
is stored (topic list and high watermarks compared before and after)."""

import os
import socket
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (check, eq, expect_error, expect_json, expect_status, main, pulsed_path,  # noqa: E402
                       uniq, BACKEND)

APP = "http://app.example:5173"
OTHER = "https://ops.example"
EVIL = "http://evil.example"
ORIGINS = "%s, %s" % (APP, OTHER)
EXPOSED = {"pulse-next-offset", "pulse-high-watermark", "pulse-log-start-offset", "retry-after", "x-request-id"}


def raw(port, head, timeout=10.0):
    """Sends head (the request line and headers, no body) with Connection:
    close and returns (status, headers as a lower-cased dict of lists,
    every byte after the header block)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(head.encode("latin-1") + b"Connection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    top, _, rest = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    hdrs = {}
    for line in lines[1:]:
        k, v = line.split(":", 1)
        hdrs.setdefault(k.strip().lower(), []).append(v.strip())
    return int(lines[0].split(" ")[1]), hdrs, rest


def state(srv):
    """Every topic with its high watermarks: what a refused write must not change."""
    return sorted((t["name"], tuple(p["high_watermark"] for p in t["partition_stats"]))
                  for t in srv.topics()["topics"])


def test_preflight_from_an_allowed_origin_names_the_route_methods_and_headers(ctx):
    srv = ctx.srv
    t = uniq("pre")
    srv.create_topic(t)
    cases = [("/v1/topics", "POST", "GET, POST, HEAD, OPTIONS", "Content-Type"),
             ("/v1/topics/%s/records" % t, "POST", "GET, POST, HEAD, OPTIONS", "Content-Type"),
             ("/v1/topics/%s" % t, "DELETE", "GET, PATCH, DELETE, HEAD, OPTIONS", "Content-Type"),
             ("/v1/topics/%s/partitions/0/records" % t, "GET", "GET, HEAD, OPTIONS", None),
             ("/v1/consumers/c/cursors/%s/0" % t, "PUT", "GET, PUT, HEAD, OPTIONS", "Content-Type")]
    for path, want, allow, needs in cases:
        r = srv.req("OPTIONS", path, headers={"Origin": APP, "Access-Control-Request-Method": want,
                                              "Access-Control-Request-Headers": "content-type"})
        expect_status(r, 204, "preflight %s %s" % (want, path))
        eq(r.body, b"", "preflight body")
        eq(r.header("Access-Control-Allow-Origin"), APP, "allowed origin echoed")
        eq(r.header("Access-Control-Allow-Methods"), allow, "methods of %s" % path)
        eq(r.header("Allow"), allow, "Allow of %s" % path)
        check("Origin" in (r.header("Vary") or ""), "Vary: Origin on %s" % path)
        heads = [h.strip().lower() for h in (r.header("Access-Control-Allow-Headers") or "").split(",")]
        check("x-request-id" in heads and "authorization" in heads, "X-Request-Id and a token may be sent: %r" % heads)
        if needs:
            check(needs.lower() in heads and "content-encoding" in heads, "body headers allowed: %r" % heads)
        else:
            check("content-type" not in heads, "a GET route takes no body headers: %r" % heads)
        check(int(r.header("Access-Control-Max-Age")) > 0, "preflight may be cached")
        eq(r.header("Access-Control-Allow-Credentials"), None, "credentials are off by default")
    # The second listed origin too (blanks around the comma are trimmed).
    r = srv.req("OPTIONS", "/v1/topics", headers={"Origin": OTHER, "Access-Control-Request-Method": "POST"})
    eq((r.status, r.header("Access-Control-Allow-Origin")), (204, OTHER), "second listed origin")


def test_options_without_origin_is_204_with_allow_on_every_route(ctx):
    srv = ctx.srv
    t = uniq("opt")
    srv.create_topic(t)
    for path in ("/healthz", "/readyz", "/metrics", "/openapi.yaml", "/v1/broker", "/v1/topics",
                 "/v1/topics/" + t, "/v1/topics/%s/records" % t, "/v1/topics/%s/partitions" % t,
                 "/v1/topics/%s/partitions/0" % t, "/v1/topics/%s/partitions/0/records" % t, "/v1/consumers",
                 "/v1/consumers/c", "/v1/consumers/c/cursors", "/v1/consumers/c/cursors/%s/0" % t):
        status, hdrs, rest = raw(srv.port, "OPTIONS %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" % path)
        eq(status, 204, "OPTIONS %s" % path)
        check("OPTIONS" in hdrs["allow"][0], "Allow lists OPTIONS on %s: %r" % (path, hdrs["allow"]))
        check("access-control-allow-origin" not in hdrs and "access-control-allow-methods" not in hdrs,
              "no CORS headers without an Origin on %s" % path)
        eq(rest, b"", "OPTIONS %s sends no body" % path)
    expect_error(srv.req("OPTIONS", "/v1/nowhere"), 404, "not_found", "OPTIONS on an unknown path")


def test_answers_to_an_allowed_origin_expose_the_position_headers(ctx):
    srv = ctx.srv
    t = uniq("expose")
    srv.create_topic(t)
    srv.publish(t, [{"value": "a"}, {"value": "b"}])
    r = srv.fetch(t, 0, headers={"Origin": APP})
    expect_status(r, 200, "fetch from an allowed origin")
    eq(r.header("Access-Control-Allow-Origin"), APP, "Access-Control-Allow-Origin")
    exposed = {h.strip().lower() for h in (r.header("Access-Control-Expose-Headers") or "").split(",")}
    check(EXPOSED <= exposed, "exposed headers %r lack %r" % (exposed, EXPOSED - exposed))
    check("Origin" in ",".join(r.header_all("Vary")), "Vary: Origin")
    eq(r.header("Pulse-High-Watermark"), "2", "the position header itself")
    # Errors too: a page must be able to read why it was refused.
    r = srv.get("/v1/topics/%s/partitions/0/records?offset=99" % t, headers={"Origin": APP})
    expect_error(r, 416, "offset_out_of_range", "416 to an allowed origin")
    eq(r.header("Access-Control-Allow-Origin"), APP, "ACAO on an error answer")
    # A write from an allowed origin is executed.
    r = srv.req("POST", "/v1/topics/%s/records" % t, {"records": [{"value": "c"}]}, headers={"Origin": APP})
    expect_json(r, 200, "publish from an allowed origin")
    eq(srv.hw(t), 3, "the allowed write was stored")


def test_reads_from_a_disallowed_origin_get_no_cors_headers(ctx):
    srv = ctx.srv
    for origin in (EVIL, "null", APP + "/", "http://app.example"):
        r = srv.get("/v1/topics", headers={"Origin": origin})
        expect_status(r, 200, "a read from %s is answered" % origin)
        eq(r.header("Access-Control-Allow-Origin"), None, "no ACAO for %s" % origin)
        eq(r.header("Access-Control-Expose-Headers"), None, "no exposed headers for %s" % origin)
        check("Origin" in ",".join(r.header_all("Vary")), "Vary: Origin for %s" % origin)
    r = srv.req("OPTIONS", "/v1/topics", headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"})
    err = expect_error(r, 403, "forbidden", "preflight from a disallowed origin")
    check(EVIL in err["message"] and "server.cors-origins" in err["message"], "names origin and setting: %r" % err)
    eq(r.header("Access-Control-Allow-Origin"), None, "no ACAO on the refused preflight")


def test_writes_from_a_disallowed_origin_are_403_and_store_nothing(ctx):
    srv = ctx.srv
    t = uniq("guard")
    srv.create_topic(t)
    srv.publish(t, [{"value": "keep"}])
    c = uniq("guardc")
    expect_json(srv.req("PUT", "/v1/consumers/%s/cursors/%s/0" % (c, t), {"offset": 0}), 200, "cursor")
    before = state(srv)
    writes = [("POST", "/v1/topics", {"name": uniq("evil")}),
              ("POST", "/v1/topics/%s/records" % t, {"records": [{"value": "x"}]}),
              ("PATCH", "/v1/topics/" + t, {"retention_ms": 1000}),
              ("DELETE", "/v1/topics/" + t, None),
              ("PUT", "/v1/consumers/%s/cursors/%s/0" % (c, t), {"offset": 1}),
              ("POST", "/v1/consumers/%s/cursors" % c, {"cursors": [{"topic": t, "partition": 0, "offset": 1}]}),
              ("DELETE", "/v1/consumers/" + c, None)]
    for method, path, body in writes:
        r = srv.req(method, path, body, headers={"Origin": EVIL})
        err = expect_error(r, 403, "forbidden", "%s %s from %s" % (method, path, EVIL))
        check(EVIL in err["message"], "the refusal names the origin: %r" % err["message"])
        eq(r.header("Access-Control-Allow-Origin"), None, "no ACAO on the refusal")
    eq(state(srv), before, "no topic, record or retention change from the refused writes")
    if BACKEND == "local":  # Kafka: topic configs are not read back (null)
        eq(srv.topic(t)["retention_ms"], 604800000, "retention unchanged")
    cur = expect_json(srv.get("/v1/consumers/%s/cursors/%s/0" % (c, t)), 200, "cursor after")
    eq(cur["offset"], 0, "cursor unchanged")
    if BACKEND == "local":  # Kafka: no consumer list (406)
        check(c in srv.get("/v1/consumers").json()["consumers"], "consumer not deleted")
    # The same writes without an Origin (curl) or from the server's own
    # origin (its dashboard) are executed as always.
    own = "http://127.0.0.1:%d" % srv.port
    expect_json(srv.req("POST", "/v1/topics/%s/records" % t, {"records": [{"value": "y"}]},
                        headers={"Origin": own}), 200, "publish from the server's own origin")
    expect_json(srv.req("POST", "/v1/topics/%s/records" % t, {"records": [{"value": "z"}]}), 200, "no Origin")
    eq(srv.hw(t), 3, "both stored")


def test_head_answers_every_get_route_with_its_headers_and_no_body(ctx):
    srv = ctx.srv
    t = uniq("head")
    srv.create_topic(t)
    srv.publish(t, [{"value": "v%d" % i} for i in range(3)])
    for path in ("/healthz", "/readyz", "/metrics", "/openapi.yaml", "/v1/broker", "/v1/topics", "/v1/topics/" + t,
                 "/v1/topics/%s/records" % t, "/v1/topics/%s/partitions" % t, "/v1/topics/%s/partitions/0" % t,
                 "/v1/topics/%s/partitions/0/records?offset=1" % t,
                 "/v1/topics/%s/partitions/0/records?format=raw" % t, "/v1/consumers",
                 "/v1/consumers/x/cursors"):
        gstatus, ghdrs, gbody = raw(srv.port, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" % path)
        hstatus, hhdrs, hbody = raw(srv.port, "HEAD %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" % path)
        eq(hstatus, gstatus, "HEAD %s status" % path)
        eq(hbody, b"", "HEAD %s sends no body" % path)
        for h in ("content-type", "pulse-next-offset", "pulse-high-watermark", "pulse-log-start-offset"):
            eq(hhdrs.get(h), ghdrs.get(h), "HEAD %s header %s" % (path, h))
        if "content-length" in ghdrs and path != "/metrics" and path != "/v1/broker":
            eq(hhdrs.get("content-length"), ghdrs.get("content-length"), "HEAD %s Content-Length" % path)
    hs, hh, hb = raw(srv.port, "HEAD /v1/topics/%s/partitions/0/records?offset=1 HTTP/1.1\r\nHost: x\r\n" % t)
    eq(hh["pulse-next-offset"], ["3"], "HEAD fetch carries the positions")
    # HEAD is not a write and takes GET's query parameters; it is refused
    # where GET is not served.
    r = srv.req("HEAD", "/v1/consumers/c1")
    eq((r.status, r.header("Allow"), r.body), (405, "DELETE, OPTIONS", b""), "HEAD on a consumer (DELETE only)")


def test_cors_off_by_default_and_credentials_when_configured(ctx):
    off = ctx.new_server()
    off.start()
    r = off.req("OPTIONS", "/v1/topics", headers={"Origin": APP, "Access-Control-Request-Method": "POST"})
    expect_status(r, 403, "preflight with CORS off")
    r = off.get("/v1/topics", headers={"Origin": APP})
    eq((r.status, r.header("Access-Control-Allow-Origin"), r.header("Vary")), (200, None, None),
       "CORS off: no CORS headers, no Vary")
    before = state(off)
    expect_error(off.req("POST", "/v1/topics", {"name": uniq("x")}, headers={"Origin": APP}), 403, "forbidden",
                 "cross-origin write with CORS off")
    eq(state(off), before, "nothing created")
    off.stop()
    cred = ctx.new_server(args=["-o", "server.cors-origins=*", "-o", "server.cors-credentials=on"])
    cred.start()
    r = cred.req("OPTIONS", "/v1/topics", headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"})
    expect_status(r, 204, "any origin with *")
    # With credentials the origin is echoed, never "*" (browsers refuse that).
    eq(r.header("Access-Control-Allow-Origin"), EVIL, "echoed origin")
    eq(r.header("Access-Control-Allow-Credentials"), "true", "credentials on")
    expect_status(cred.req("POST", "/v1/topics", {"name": uniq("any")}, headers={"Origin": EVIL}), 201,
                  "a write from any origin with *")
    cred.stop()


def test_bad_origin_lists_are_refused_at_start(ctx):
    for value in ("app.example", "http://app.example/", "http://app.example/path", "ftp://x", "http://A.example",
                  "http://x:123456", "*, nope"):
        cmd = [pulsed_path(), "--data-dir", os.path.join(ctx.tmp, "never"), "--listen", "127.0.0.1:0",
               "-o", "server.cors-origins=" + value]
        p = subprocess.run(cmd, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
        err = p.stderr.decode("utf-8", "replace")
        eq(p.returncode, 2, "server.cors-origins=%r exits 2 (%s)" % (value, err[-300:]))
        check("server.cors-origins" in err, "the message names the key: %r" % err[-400:])
    p = subprocess.run([pulsed_path(), "--data-dir", os.path.join(ctx.tmp, "never"), "--listen", "127.0.0.1:0",
                        "-o", "server.cors-credentials=yes"], capture_output=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    eq(p.returncode, 2, "server.cors-credentials=yes exits 2")


if __name__ == "__main__":
    sys.exit(main(globals(), server_args=["-o", "server.cors-origins=" + ORIGINS]))
