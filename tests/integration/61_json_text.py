# SPDX-License-Identifier: MIT
"""JSON text in and out, byte for byte: hostile strings (every control byte,
quotes and backslashes around the sixteen-byte steps of the scanners, NUL,
U+2028, emoji) published through both parsers and fetched back as the same
text; bytes that are not UTF-8 (lone surrogates, overlong forms, truncated
sequences) fetched as base64; headers through the fast parser in their
order; reals stored in their shortest exact text; and what JSON cannot hold
refused with 400 and nothing stored (NaN, Infinity, numbers past a double,
integers past 64 bits, repeated header names)."""

import base64
import json
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import check, eq, expect_error, expect_json, main, uniq  # noqa: E402

JSON = {"Content-Type": "application/json"}


def post_raw(srv, t, body):
    return srv.req("POST", "/v1/topics/%s/records" % t, body, headers=JSON)


def fetch_raw(srv, t, offset, n):
    r = srv.fetch(t, offset=offset, max_records=n)
    eq(r.status, 200, "fetch status")
    return r.body


def hostile_strings():
    specials = ['"', "\\", "\x00", "\x01", "\x1f", "\b", "\t", "\n", "\f", "\r", "\x7f", "\u2028", "\u00e9",
                "\U0001F600", "/"]
    out = []
    for i, s in enumerate(specials):
        for before in (0, 7, 15, 16, 17, 31, 40):
            out.append("x" * before + s + "y" * (i % 5) * 7)
    out.append("".join(chr(c) for c in range(0x20)))
    return out


def test_hostile_strings_come_back_as_the_same_text(ctx):
    srv = ctx.srv
    t = uniq("jt")
    srv.create_topic(t, partitions=1)
    strs = hostile_strings()
    # ensure_ascii=False keeps plain UTF-8 unescaped (the fast parser takes
    # such records); the escapes of the rest go through jansson.
    body = json.dumps({"records": [{"key": s, "value": s, "headers": {"h": s}} for s in strs]},
                      ensure_ascii=False).encode()
    expect_json(post_raw(srv, t, body), 200, "publish hostile strings")
    raw = fetch_raw(srv, t, 0, len(strs))
    doc = json.loads(raw)
    eq(len(doc["records"]), len(strs), "records")
    for rec, s in zip(doc["records"], strs):
        eq((rec["key"], rec["value"], rec["headers"]), (s, s, {"h": s}), "round trip of %r" % s)
    # jansson's compact escapes, exactly: \u00XX in upper case for the
    # control bytes without a short form, the short forms, nothing else.
    want = json.dumps("".join(chr(c) for c in range(0x20)), ensure_ascii=False, separators=(",", ":"))
    want = want.replace("\\u001f", "\\u001F").replace("\\u001e", "\\u001E").replace("\\u001d", "\\u001D")
    want = want.replace("\\u001c", "\\u001C").replace("\\u001b", "\\u001B").replace("\\u001a", "\\u001A")
    want = want.replace("\\u000b", "\\u000B").replace("\\u000e", "\\u000E").replace("\\u000f", "\\u000F")
    check(('"value":' + want).encode() in raw, "control bytes escaped as jansson does: %r not in answer" % want)
    check("\u2028".encode() in raw and "\U0001F600".encode() in raw, "UTF-8 passes through unescaped")


def test_bytes_that_are_not_utf8_come_back_as_base64(ctx):
    srv = ctx.srv
    t = uniq("jb")
    srv.create_topic(t, partitions=1)
    bad = [b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xff",
           b"a" * 15 + b"\xc3", b"a" * 16 + b"\xe2\x82", b"a" * 40 + b"\x80" + b"b" * 20]
    good = [b"a" * 15 + "\u00e9".encode(), "\U0001F600".encode() * 5, b"\x00" * 17]
    recs = [{"key_base64": base64.b64encode(b).decode(), "value_base64": base64.b64encode(b).decode(),
             "headers": {"h": "x"}} for b in bad + good]
    srv.publish(t, recs)
    doc = srv.fetch_json(t, offset=0, max_records=len(recs))
    for rec, b in zip(doc["records"], bad):
        eq((base64.b64decode(rec["key_base64"]), base64.b64decode(rec["value_base64"])), (b, b),
           "bytes %r as base64" % b)
        check("value" not in rec and "key" not in rec, "no text member for %r" % b)
    for rec, b in zip(doc["records"][len(bad):], good):
        eq((rec["key"], rec["value"]), (b.decode(), b.decode()), "valid UTF-8 %r as text" % b)


def test_headers_keep_their_order_through_the_fast_parser(ctx):
    srv = ctx.srv
    t = uniq("jh")
    srv.create_topic(t, partitions=1)
    body = b'{"records":[{"value":"v","headers":{"z":"1","a":"2","m":""}},{"value":"w","headers":{}},' \
           b'{"value":"x","headers":null}]}'
    expect_json(post_raw(srv, t, body), 200, "publish with headers")
    raw = fetch_raw(srv, t, 0, 3)
    check(b'"value":"v","headers":{"z":"1","a":"2","m":""}}' in raw, "header order kept: %r" % raw[:300])
    check(raw.count(b'"headers":{}') == 2, "empty and null headers answer {}")


def test_reals_are_stored_in_their_shortest_exact_text(ctx):
    srv = ctx.srv
    t = uniq("jr")
    srv.create_topic(t, partitions=1)
    cases = [(b'{"t":21.5,"n":[0.1,0.25]}', '{"t":21.5,"n":[0.1,0.25]}'),
             (b'{"lat":52.520008,"lon":13.404954}', '{"lat":52.520008,"lon":13.404954}'),
             (b'[0.1,0.3333333333333333]', '[0.1,0.3333333333333333]'),
             (b'[1e22,100.0,5e-324,-0.0]', None),
             (b'{"x":0.30000000000000004}', '{"x":0.30000000000000004}')]
    body = b'{"records":[' + b",".join(b'{"value":' + c + b"}" for c, _ in cases) + b"]}"
    expect_json(post_raw(srv, t, body), 200, "publish reals")
    doc = json.loads(fetch_raw(srv, t, 0, len(cases)))
    for rec, (sent, want) in zip(doc["records"], cases):
        eq(json.loads(rec["value"]), json.loads(sent), "value %r reads back as sent" % sent)
        if want is not None:
            eq(rec["value"], want, "shortest text of %r" % sent)


def test_what_json_cannot_hold_is_refused_and_nothing_stored(ctx):
    srv = ctx.srv
    t = uniq("jn")
    srv.create_topic(t, partitions=1)
    srv.publish(t, [{"value": "seed"}])
    before = srv.hw(t)
    bodies = [b'{"records":[{"value":NaN}]}', b'{"records":[{"value":Infinity}]}',
              b'{"records":[{"value":-Infinity}]}', b'{"records":[{"value":1e999}]}',
              b'{"records":[{"value":-1e999}]}', b'{"records":[{"value":[1,2,1e400]}]}',
              b'{"records":[{"value":123456789012345678901234567890}]}',
              b'{"records":[{"value":"ok","timestamp":99999999999999999999}]}',
              b'{"records":[{"value":"ok","partition":18446744073709551616}]}',
              b'{"records":[{"value":"ok","headers":{"h":"1","h":"2"}}]}',
              b'{"records":[{"value":"ok","headers":{"h":1}}]}',
              b'{"records":[{"value":"\xed\xa0\x80"}]}', b'{"records":[{"value":"\\ud800"}]}',
              b'{"records":[{"value":"a\x01b"}]}']
    for b in bodies:
        expect_error(post_raw(srv, t, b), 400, "invalid_request", "publish %r" % b[:60])
    eq(srv.hw(t), before, "nothing stored")


if __name__ == "__main__":
    main(globals())
