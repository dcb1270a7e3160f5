# SPDX-License-Identifier: MIT
"""Request framing and request-target attacks, sent as raw bytes on a socket.

Each case produces the attack for real and checks three things: the status
(400, 501 or 413 with the JSON error body), that nothing stored changed (the
full topic list with every high watermark, compared before and after), and,
for framing errors, that the server closed the connection after its answer
without reading the bytes that followed as a second request (RFC 9112 6.3).

Also here: percent-encoded control characters in the path or a query value
(400, never a silently cut name or key) and unknown or repeated query
parameters (400 naming the parameter)."""

import os
import socket
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import check, eq, expect_error, main, Response, uniq  # noqa: E402

OCTETS = {"Content-Type": "application/octet-stream"}


class Victim:
    topic = None


def victim(srv):
    """A topic holding one record: what the smuggled requests try to hit."""
    if Victim.topic is None:
        Victim.topic = uniq("victim")
        srv.create_topic(Victim.topic)
        srv.publish(Victim.topic, [{"value": "keep me"}])
    return Victim.topic


def read_answer(sock, timeout=10.0):
    """Reads one HTTP answer (status line, headers, Content-Length body).
    Returns (Response, time it took)."""
    sock.settimeout(timeout)
    t0 = time.monotonic()
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError("connection closed before an answer; got %r" % data[:300])
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    status = int(parts[1])
    headers = []
    for line in lines[1:]:
        k, v = line.split(":", 1)
        headers.append((k.strip(), v.strip()))
    r = Response(status, parts[2] if len(parts) > 2 else "", headers, b"")
    n = int(r.header("Content-Length", "0"))
    while len(rest) < n:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    r.body = rest[:n]
    r.extra = rest[n:]
    return r, time.monotonic() - t0


def rest_until_eof(sock, r, timeout=5.0):
    """Whatever the server sends after the answer, until it closes. Fails if
    it keeps the connection open past the timeout."""
    sock.settimeout(timeout)
    out = r.extra
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return out
            out += chunk
    except ConnectionResetError:
        return out
    except socket.timeout:
        raise AssertionError("the connection stayed open %.0f s after the answer (got %r)" % (timeout, out[:200]))


def attack(srv, raw, want_status, want_code, what, by_library=False):
    """Sends raw bytes; checks status, error code, that the connection was
    closed with nothing after the first answer, and that nothing changed.
    by_library: libmicrohttpd itself refuses this one before the broker
    sees it, with its own short HTML body (same status, same close)."""
    before = srv.topics()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    try:
        s.sendall(raw)
        r, _ = read_answer(s)
        if by_library:
            eq(r.status, want_status, "%s: status (%r)" % (what, r.body[:200]))
        else:
            expect_error(r, want_status, want_code, what)
        eq(r.header("Connection", "").lower(), "close", "%s: Connection header" % what)
        extra = rest_until_eof(s, r)
        if by_library:
            # Its answer may be close-delimited: the rest of its body.
            check(b"HTTP/1." not in extra, "%s: a second answer followed: %r" % (what, extra[:300]))
        else:
            eq(extra, b"", "%s: bytes after the refused request must not be answered" % what)
    finally:
        s.close()
    eq(srv.topics(), before, "stored state after %s" % what)
    return r


def smuggled_delete(topic):
    return ("DELETE /v1/topics/%s HTTP/1.1\r\nHost: x\r\n\r\n" % topic).encode()


def test_two_content_lengths_are_400_and_close_the_connection(ctx):
    srv = ctx.srv
    t = victim(srv)
    inner = smuggled_delete(t)
    for method, path in (("GET", "/v1/topics"), ("POST", "/v1/topics/%s/records" % t)):
        for cls in (("0", str(len(inner))), (str(len(inner)), "0"), ("5", "5")):
            raw = ("%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                   "Content-Length: %s\r\nContent-Length: %s\r\n\r\n" % (method, path, cls[0], cls[1])).encode()
            attack(srv, raw + inner, 400, "invalid_request", "%s with Content-Length %s" % (method, cls))
    # One header holding a list is no better than two headers.
    raw = ("POST /v1/topics/%s/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
           "Content-Length: 0, %d\r\n\r\n" % (t, len(inner))).encode()
    attack(srv, raw + inner, 400, "invalid_request", "Content-Length list")
    eq(srv.topic(t)["partition_stats"][0]["high_watermark"], 1, "the victim still has its record")


def test_content_length_with_transfer_encoding_is_400_and_closes(ctx):
    srv = ctx.srv
    t = victim(srv)
    inner = smuggled_delete(t)
    body = b'{"records":[{"value":"smuggled"}]}'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    for order in ((b"Content-Length: 4\r\n", b"Transfer-Encoding: chunked\r\n"),
                  (b"Transfer-Encoding: chunked\r\n", b"Content-Length: 4\r\n")):
        raw = (b"POST /v1/topics/%s/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               % t.encode()) + order[0] + order[1] + b"\r\n" + chunked + inner
        attack(srv, raw, 400, "invalid_request", "Content-Length with Transfer-Encoding %r" % (order,))


def test_transfer_encoding_other_than_chunked_is_501(ctx):
    srv = ctx.srv
    t = victim(srv)
    # libmicrohttpd takes a body as chunked only when the value is exactly
    # "chunked": with a blank kept after it, it waited for a body of unknown
    # length until the connection timed out.
    for te in ("gzip", "gzip, chunked", "chunked, gzip", "identity", "x-custom", "chunked ", "chunked\t"):
        raw = ("POST /v1/topics/%s/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
               "Transfer-Encoding: %s\r\n\r\n5\r\nhello\r\n0\r\n\r\n" % (t, te)).encode()
        t0 = time.monotonic()
        attack(srv, raw + smuggled_delete(t), 501, "not_implemented", "Transfer-Encoding: %r" % te)
        check(time.monotonic() - t0 < 5, "501 for Transfer-Encoding %r took %.1f s" % (te, time.monotonic() - t0))
    # Two Transfer-Encoding lines are a list, not "chunked".
    raw = ("POST /v1/topics/%s/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
           "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" % t).encode()
    attack(srv, raw, 501, "not_implemented", "two Transfer-Encoding lines")
    # Plain chunked keeps working.
    raw = ("POST /v1/topics/%s/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
           "Transfer-Encoding: Chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n" % t).encode()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    try:
        s.sendall(raw)
        r, _ = read_answer(s)
    finally:
        s.close()
    eq(r.status, 200, "chunked publish: %r" % r.body)
    doc = srv.fetch_json(t, 0, offset=1)
    eq([x["value"] for x in doc["records"]], ["hello"], "the chunked record")
    Victim.topic = None  # its contents changed; later cases use a fresh one


def test_content_length_beyond_int64_is_413_at_once(ctx):
    srv = ctx.srv
    t = victim(srv)
    # Past int64 but within uint64 reached the broker, which waited for the
    # body until the connection timeout; past uint64 libmicrohttpd refuses.
    for cl, lib in (("9223372036854775808", False), ("18446744073709551615", False),
                    ("99999999999999999999999999", False)):
        raw = ("POST /v1/topics/%s/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
               "Content-Length: %s\r\n\r\nhello" % (t, cl)).encode()
        t0 = time.monotonic()
        attack(srv, raw, 413, "payload_too_large", "Content-Length %s" % cl, by_library=lib)
        check(time.monotonic() - t0 < 5, "413 for Content-Length %s took %.1f s" % (cl, time.monotonic() - t0))
    for cl in ("-1", "+5", "0x10", "5 5", "abc"):
        raw = ("POST /v1/topics/%s/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
               "Content-Length: %s\r\n\r\nhello" % (t, cl)).encode()
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        try:
            s.sendall(raw)
            r, took = read_answer(s)
        finally:
            s.close()
        eq(r.status, 400, "Content-Length %r" % cl)
        check(took < 5, "400 for Content-Length %r took %.1f s" % (cl, took))
    eq(srv.topic(t)["partition_stats"][0]["high_watermark"], 1, "nothing stored")


def test_encoded_control_characters_in_path_or_query_are_400(ctx):
    srv = ctx.srv
    t = victim(srv)
    before = srv.topics()
    # The path is cut at the NUL today: this would delete the victim.
    for path in ("/v1/topics/%s%%00.archive" % t, "/v1/topics/%s%%00" % t, "/v1/topics/%s%%0a" % t,
                 "/v1/topics/%s%%1f" % t, "/v1/topics/%s%%7f" % t):
        expect_error(srv.req("DELETE", path), 400, "invalid_request", "DELETE %s" % path)
    eq(srv.topics(), before, "nothing deleted")
    for q in ("key=a%00b", "key=%00", "key=a%0db", "key=a%09", "partition=0%00"):
        expect_error(srv.req("POST", "/v1/topics/%s/records?%s" % (t, q), b"v", headers=OCTETS), 400,
                     "invalid_request", "publish ?%s" % q)
    for q in ("offset=0%00", "consumer=c%00x", "format=raw%00"):
        expect_error(srv.get("/v1/topics/%s/partitions/0/records?%s" % (t, q)), 400, "invalid_request",
                     "fetch ?%s" % q)
    eq(srv.topics(), before, "nothing stored")
    # Ordinary escapes still work: %41 is "A", and UTF-8 stays allowed in a key.
    r = srv.req("POST", "/v1/topics/%s/records?key=%%41%%C3%%A9" % t, b"ok", headers=OCTETS)
    eq(r.status, 200, "escaped key: %r" % r.body)
    doc = srv.fetch_json(t, 0, offset=1)
    eq(doc["records"][0]["key"], "A\u00e9", "decoded key")
    Victim.topic = None


def test_raw_nul_or_control_bytes_in_the_request_line_are_400_and_close(ctx):
    srv = ctx.srv
    t = victim(srv)
    inner = smuggled_delete(t)
    tb = t.encode()
    pub = b"/v1/topics/" + tb + b"/records?key="
    fetch = b"/v1/topics/" + tb + b"/partitions/0/records?offset="
    # libmicrohttpd hands every string over cut at a raw NUL: the first two
    # deleted the victim, the third stored the key "a".
    cases = [(b"DELETE", b"/v1/topics/" + tb + b"\x00.archive"),
             (b"DELETE", b"/v1/topics/" + tb + b"\x00"),
             (b"POST", pub + b"a\x00b"),
             (b"POST", pub + b"a\x00"),
             (b"GET", fetch + b"0\x00junk"),
             (b"DELETE\x00x", b"/v1/topics/" + tb),
             (b"DELETE\x00", b"/v1/topics/" + tb),
             # Raw control bytes, blanks and DEL are never part of a target.
             (b"POST", pub + b"a\x01b"),
             (b"POST", pub + b"a\x7fb"),
             (b"POST", pub + b"a\rb"),
             (b"POST", pub + b"a\tb"),
             (b"POST", pub + b"a b"),
             (b"DELETE", b"/v1/topics/" + tb + b"\t"),
             (b"DELETE", b"/v1/topics/" + tb + b" ")]
    for method, target in cases:
        raw = (method + b" " + target + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
               b"Content-Length: 1\r\n\r\nv")
        attack(srv, raw + inner, 400, "invalid_request", "request line %r %r" % (method, target))
    eq(srv.topic(t)["partition_stats"][0]["high_watermark"], 1, "the victim keeps its one record")
    # The same requests without the bad bytes still work on a fresh socket.
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    try:
        s.sendall(b"POST " + pub + b"a%20b HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                  b"Content-Length: 1\r\nConnection: close\r\n\r\nv")
        r, _ = read_answer(s)
    finally:
        s.close()
    eq(r.status, 200, "percent-encoded blank in a key: %r" % r.body)
    eq(srv.fetch_json(t, 0, offset=1)["records"][0]["key"], "a b", "the key")
    Victim.topic = None


def test_blank_or_control_byte_in_a_header_is_400_and_closes(ctx):
    srv = ctx.srv
    t = victim(srv)
    inner = smuggled_delete(t)
    head = b"POST /v1/topics/" + t.encode() + b"/records HTTP/1.1\r\nHost: x\r\n"
    octets = b"Content-Type: application/octet-stream\r\n"
    # "Content-Length : N" was stored under "Content-Length " by libmicrohttpd,
    # which then read no body: the DELETE behind it ran as a second request.
    for line in (b"Content-Length : %d" % len(inner), b"Content-Length\t: %d" % len(inner),
                 b" Content-Length: %d" % len(inner), b"Transfer-Encoding : chunked"):
        attack(srv, head + octets + line + b"\r\n\r\n" + inner, 400, "invalid_request", "header line %r" % line)
    for line in (b"Content-Type: application/octet-stream\x01", b"X-Request-Id: a\x7fb", b"X-Trace: a\x1bb",
                 b"Transfer-Encoding: chunked\x0b"):
        raw = head + line + b"\r\nContent-Length: 1\r\n\r\nv"
        attack(srv, raw + inner, 400, "invalid_request", "header line %r" % line)
    eq(srv.topic(t)["partition_stats"][0]["high_watermark"], 1, "nothing stored")
    # A tab inside a value and bytes past ASCII stay allowed (RFC 9110 5.5).
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    try:
        s.sendall(head + octets + b"X-Note: a\tb \xe9\r\nContent-Length: 1\r\nConnection: close\r\n\r\nv")
        r, _ = read_answer(s)
    finally:
        s.close()
    eq(r.status, 200, "tab and obs-text in a value: %r" % r.body)
    Victim.topic = None


def test_folded_or_underscored_framing_fields_are_400_and_close(ctx):
    srv = ctx.srv
    t = victim(srv)
    inner = smuggled_delete(t)
    tb = t.encode()
    pub = b"POST /v1/topics/" + tb + b"/records HTTP/1.1\r\nHost: x\r\n"
    body = b'{"records":[{"value":"smuggled"}]}'
    # A Content-Length continued on a folded line: libmicrohttpd appended the
    # continuation to the field NAME ("Content-Length27"), read no length
    # and kept the connection, so the body ran as a second request.
    for fold in (b" ", b"\t", b"  \t"):
        raw = (pub + b"Content-Type: application/json\r\nContent-Length: 0\r\n" + fold +
               b"%d\r\n\r\n" % len(body) + body + inner)
        r = attack(srv, raw, 400, "invalid_request", "folded Content-Length %r" % fold)
        check("folded" in r.json()["error"]["message"], "the message names the fold: %r" % r.body)
    # Any folded field is refused, not just the framing ones.
    raw = pub + b"Content-Type: application/octet-stream\r\nX-Note: a\r\n b\r\nContent-Length: 1\r\n\r\nv"
    attack(srv, raw + inner, 400, "invalid_request", "folded X-Note")
    # The TE.CL desync of the black-box test: a blank before the colon of
    # Transfer-Encoding, with a Content-Length that covers only the chunk
    # size line; the DELETE inside the chunk ran as a second request.
    chunk = b"%x\r\n" % len(inner) + inner + b"\r\n0\r\n\r\n"
    for te in (b"Transfer-Encoding : chunked", b"Transfer-Encoding\t: chunked", b"Transfer_Encoding: chunked",
               b"transfer_encoding: chunked"):
        raw = (pub + b"Content-Type: application/octet-stream\r\n" + te +
               b"\r\nContent-Length: %d\r\n\r\n" % len(b"%x\r\n" % len(inner)) + chunk)
        attack(srv, raw, 400, "invalid_request", "header line %r" % te)
    # Content_Length is refused the same way.
    for line in (b"Content_Length: %d" % len(inner), b"content_length: 0"):
        raw = pub + b"Content-Type: application/octet-stream\r\n" + line + b"\r\n\r\n"
        attack(srv, raw + inner, 400, "invalid_request", "header line %r" % line)
    eq(srv.topic(t)["partition_stats"][0]["high_watermark"], 1, "nothing stored, nothing deleted")
    # An underscore elsewhere in a name is an ordinary token.
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    try:
        s.sendall(pub + b"Content-Type: application/octet-stream\r\nX_Trace_Id: 7\r\nContent-Length: 1\r\n"
                  b"Connection: close\r\n\r\nv")
        r, _ = read_answer(s)
    finally:
        s.close()
    eq(r.status, 200, "X_Trace_Id: %r" % r.body)
    Victim.topic = None


def test_host_is_required_once_and_bare_cr_is_refused(ctx):
    srv = ctx.srv
    t = victim(srv)
    inner = smuggled_delete(t)
    # RFC 9112 3.2: exactly one Host in HTTP/1.1, never two.
    for head in (b"GET /v1/topics HTTP/1.1\r\n", b"GET /v1/topics HTTP/1.1\r\nHost: a\r\nHost: b\r\n",
                 b"GET /v1/topics HTTP/1.0\r\nHost: a\r\nhost: a\r\n",
                 b"DELETE /v1/topics/" + t.encode() + b" HTTP/1.1\r\nAccept: */*\r\n"):
        r = attack(srv, head + b"\r\n" + inner, 400, "invalid_request", "head %r" % head)
        check("Host" in r.json()["error"]["message"], "the message names Host: %r" % r.body)
    # A bare CR inside a field (RFC 9112 2.2) is a control character there.
    for head in (b"GET /v1/topics HTTP/1.1\r\nHost: x\rX-Evil: y\r\n",
                 b"GET /v1/topics HTTP/1.1\r\nHost: x\r\nX-A\rB: y\r\n"):
        attack(srv, head + b"\r\n" + inner, 400, "invalid_request", "head %r" % head)
    eq(srv.topic(t)["partition_stats"][0]["high_watermark"], 1, "the victim is still there")
    # HTTP/1.0 may leave Host out.
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    try:
        s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        r, _ = read_answer(s)
    finally:
        s.close()
    eq(r.status, 200, "HTTP/1.0 without Host: %r" % r.body)


def test_malformed_content_length_gets_one_answer(ctx):
    srv = ctx.srv
    t = victim(srv)
    inner = smuggled_delete(t)
    # libmicrohttpd 0.9.75 refuses these itself and sent its status line and
    # header block twice (the second copy as the start of the "body").
    for cl, status, code in (("-1", 400, "invalid_request"), ("+27", 400, "invalid_request"),
                             ("0x1b", 400, "invalid_request"), ("0, 27", 400, "invalid_request"),
                             ("5 5", 400, "invalid_request"),
                             ("99999999999999999999999", 413, "payload_too_large")):
        raw = ("POST /v1/topics/%s/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               "Content-Length: %s\r\n\r\n" % (t, cl)).encode() + inner
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        try:
            s.sendall(raw)
            r, _ = read_answer(s)
            everything = r.body + rest_until_eof(s, r)
        finally:
            s.close()
        check(b"HTTP/1." not in everything, "Content-Length %r: a second status line followed: %r" % (cl, everything))
        expect_error(r, status, code, "Content-Length %r" % cl)
        eq(r.header("Connection", "").lower(), "close", "Content-Length %r: Connection header" % cl)
        eq(everything, r.body, "Content-Length %r: nothing after the one answer" % cl)
    eq(srv.topic(t)["partition_stats"][0]["high_watermark"], 1, "the victim is still there")


def test_unknown_or_repeated_query_parameters_are_400_naming_them(ctx):
    srv = ctx.srv
    t = victim(srv)
    before = srv.topics()
    fetch = "/v1/topics/%s/partitions/0/records" % t
    for q, name in (("ofset=3", "ofset"), ("offset=0&Offset=1", "Offset"), ("max_record=1", "max_record"),
                    ("offset=0&offset=1", "offset"), ("wait", "wait"), ("offset", "offset")):
        err = expect_error(srv.get(fetch + "?" + q), 400, "invalid_request", "fetch ?%s" % q)
        check('"%s"' % name in err["message"], "fetch ?%s: message must name %s: %r" % (q, name, err))
    for q, name in (("kee=x", "kee"), ("key=a&key=b", "key"), ("partitions=0", "partitions")):
        err = expect_error(srv.req("POST", "/v1/topics/%s/records?%s" % (t, q), b"v", headers=OCTETS), 400,
                           "invalid_request", "publish ?%s" % q)
        check('"%s"' % name in err["message"], "publish ?%s: message must name %s: %r" % (q, name, err))
    # key and partition only mean something for raw bodies.
    expect_error(srv.req("POST", "/v1/topics/%s/records?key=x" % t, {"records": [{"value": "v"}]}), 400,
                 "invalid_request", "?key on a JSON publish")
    for path in ("/v1/topics?limit=5", "/v1/topics/%s?force=1" % t, "/healthz?x=1", "/v1/consumers?all"):
        expect_error(srv.get(path), 400, "invalid_request", "GET %s" % path)
    expect_error(srv.req("DELETE", "/v1/topics/%s?force=true" % t), 400, "invalid_request", "DELETE ?force")
    eq(srv.topics(), before, "nothing stored or deleted")
    # Known parameters still work.
    doc = srv.fetch_json(t, 0, offset=0, max_records=1, max_bytes=100, wait_ms=0, format="json")
    eq(len(doc["records"]), 1, "known parameters")


if __name__ == "__main__":
    sys.exit(main(globals()))
