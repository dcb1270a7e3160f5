# SPDX-License-Identifier: MIT
"""Publish: nothing of one request reaches the next. A publish's record and
offset arrays come from memory that is not cleared first (every parser fills
each record whole), and the broker's per-publish state is cleared only for
the partitions a publish uses; so a request without a key, headers, a
partition or a timestamp that follows, on the same kept-alive connection,
one that had them all must be stored without them, in each body form (the
fast JSON parser, the jansson path, NDJSON, raw octets), and its answer must
hold its own offsets only."""

import http.client
import json
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import check, eq, main, uniq  # noqa: E402

STAMP = 1764400000000


def post(conn, topic, body, ctype="application/json", query=""):
    conn.request("POST", "/v1/topics/%s/records%s" % (topic, query), body=body,
                 headers={"Content-Type": ctype})
    r = conn.getresponse()
    data = r.read()
    eq(r.status, 200, "publish: %s" % data[:200])
    return json.loads(data)["offsets"]


def stored(srv, topic, at):
    """The record at offset at.offset of partition at.partition."""
    recs, _ = srv.fetch_all(topic, at["partition"], start=at["offset"])
    check(len(recs) >= 1 and recs[0]["offset"] == at["offset"], "record %r is there" % (at,))
    return recs[0]


def bare(srv, topic, at, value, what):
    rec = stored(srv, topic, at)
    eq((rec.get("key"), rec.get("headers"), rec.get("value")), (None, {}, value), what)
    check(rec["timestamp"] != STAMP, "%s: the broker's clock, not the earlier request's timestamp" % what)


def test_a_bare_record_after_a_full_one_keeps_nothing_of_it(ctx):
    srv = ctx.srv
    t = uniq("after")
    srv.create_topic(t, partitions=4)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    heads = {"h%d" % i: "v%d" % i for i in range(8)}
    full = {"key": "kk", "value": "full", "headers": heads, "partition": 3, "timestamp": STAMP}
    # The fast parser (plain strings), then the jansson path (an object value).
    forms = [
        ("fast", json.dumps({"records": [full] * 20}), json.dumps({"records": [{"value": "bare"}]}), "bare"),
        ("jansson", json.dumps({"records": [dict(full, value={"a": 1})] * 20}),
         json.dumps({"records": [{"value": {"b": 2}}]}), '{"b":2}'),
    ]
    for name, first, second, value in forms:
        for _ in range(3):
            offs = post(conn, t, first)
            eq(len(offs), 20, "%s: the full publish's answer" % name)
            eq({o["partition"] for o in offs}, {3}, "%s: explicit partition" % name)
            rec = stored(srv, t, offs[0])
            eq((rec["key"], rec["headers"], rec["timestamp"]), ("kk", heads, STAMP), "%s: full record" % name)
            offs = post(conn, t, second)
            eq(len(offs), 1, "%s: the bare publish answers its one record only" % name)
            bare(srv, t, offs[0], value, "%s: bare record after a full one" % name)
    # NDJSON, then raw octets with their query key and partition.
    nd_full = "\n".join(json.dumps(full) for _ in range(5)) + "\n"
    offs = post(conn, t, nd_full, "application/x-ndjson")
    eq(len(offs), 5, "ndjson: full")
    offs = post(conn, t, '{"value":"nd"}\n', "application/x-ndjson")
    eq(len(offs), 1, "ndjson: bare")
    bare(srv, t, offs[0], "nd", "ndjson: bare record after a full one")
    offs = post(conn, t, b"raw-full", "application/octet-stream", "?key=rk&partition=2")
    eq(offs[0]["partition"], 2, "octets: query partition")
    offs = post(conn, t, b"raw", "application/octet-stream")
    eq(len(offs), 1, "octets: bare")
    rec = stored(srv, t, offs[0])
    eq(rec.get("key"), None, "octets: no key after a keyed one")
    eq(rec.get("headers"), {}, "octets: no headers")
    conn.close()


if __name__ == "__main__":
    sys.exit(main(globals()))
