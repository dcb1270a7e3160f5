#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Copy a topic from one Pulse broker to another through the API, for
instance from a local-backend pulsed to gateways in front of Kafka
(docs/Scaling.md "Moving existing data").

Each record keeps its partition number, key, value bytes, headers and
timestamp; its offset is the destination's. The destination topic is
created with the source's partition count unless it exists (then the counts
must match). Consumers' cursors on the topic are translated (a cursor at
source offset X becomes the destination offset of the first copied record
at or after X) and committed on the destination, unless --no-cursors.

    python3 examples/replay_topic.py --from http://old:8080 --to http://gw:8080 --topic orders

Stop the topic's writers first, or run it twice (the second run copies
nothing new only if nothing was written in between: it copies everything
again otherwise; use a fresh destination topic).  Prints one line per
partition and per cursor.  Python 3 standard library only.
"""

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request


def call(url, method, path, body=None, timeout=60):
    data = None
    headers = {"Accept": "application/json"}
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, {"error": {"message": raw.decode("utf-8", "replace")}}


def must(status_body, ok, what):
    status, body = status_body
    if status not in ok:
        sys.exit("replay_topic: %s: HTTP %d %s" % (what, status, json.dumps(body)))
    return body


def republished(rec, partition):
    """The publish form of a fetched record: same bytes, same partition."""
    out = {"partition": partition, "timestamp": rec["timestamp"]}
    for field in ("key", "key_base64", "value", "value_base64"):
        if field in rec:
            out[field] = rec[field]
    if "value" not in out and "value_base64" not in out:
        out["value"] = None
    if rec.get("headers"):
        out["headers"] = rec["headers"]
    return out


def copy_partition(src, dst, topic, p, batch):
    """Copies partition p; returns [(source offset, destination offset)]."""
    path = "/v1/topics/%s/partitions/%d/records" % (urllib.parse.quote(topic), p)
    offset, pairs = 0, []
    while True:
        doc = must(call(src, "GET", path + "?offset=%d&max_records=%d" % (offset, batch)), (200,), "fetch")
        recs = doc["records"]
        if recs:
            body = {"records": [republished(r, p) for r in recs]}
            got = must(call(dst, "POST", "/v1/topics/%s/records" % urllib.parse.quote(topic), body), (200,),
                       "publish")
            for r, o in zip(recs, got["offsets"]):
                if o["partition"] != p:
                    sys.exit("replay_topic: record landed in partition %d, not %d" % (o["partition"], p))
                pairs.append((r["offset"], o["offset"]))
        if doc["next_offset"] >= doc["high_watermark"] or (not recs and doc["next_offset"] == offset):
            return pairs, doc["high_watermark"]
        offset = doc["next_offset"]


def translate(cursor, pairs, dst_hw):
    """The destination offset of the first copied record at or after cursor."""
    for old, new in pairs:
        if old >= cursor and new is not None:
            return new
    return dst_hw


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="src", required=True, help="source broker URL")
    ap.add_argument("--to", dest="dst", required=True, help="destination broker URL")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--batch", type=int, default=500, help="records per fetch and publish")
    ap.add_argument("--no-cursors", action="store_true", help="do not translate consumers' cursors")
    args = ap.parse_args()
    t = urllib.parse.quote(args.topic)
    info = must(call(args.src, "GET", "/v1/topics/" + t), (200,), "source topic")
    status, dinfo = call(args.dst, "POST", "/v1/topics", {"name": args.topic, "partitions": info["partitions"]})
    if status == 409:
        dinfo = must(call(args.dst, "GET", "/v1/topics/" + t), (200,), "destination topic")
    elif status != 201:
        sys.exit("replay_topic: create on the destination: HTTP %d %s" % (status, json.dumps(dinfo)))
    if dinfo["partitions"] != info["partitions"]:
        sys.exit("replay_topic: the destination has %d partitions, the source %d"
                 % (dinfo["partitions"], info["partitions"]))
    mapping = {}
    for p in range(info["partitions"]):
        pairs, hw = copy_partition(args.src, args.dst, args.topic, p, args.batch)
        dhw = must(call(args.dst, "GET", "/v1/topics/" + t), (200,), "destination")["partition_stats"][p]
        mapping[p] = (pairs, dhw["high_watermark"])
        print("partition %d: %d records copied (source high watermark %d, destination %d)"
              % (p, len(pairs), hw, dhw["high_watermark"]))
    if args.no_cursors:
        return 0
    for consumer in must(call(args.src, "GET", "/v1/consumers"), (200,), "consumers")["consumers"]:
        c = urllib.parse.quote(consumer)
        for cur in must(call(args.src, "GET", "/v1/consumers/%s/cursors" % c), (200,), "cursors")["cursors"]:
            if cur["topic"] != args.topic:
                continue
            pairs, dhw = mapping[cur["partition"]]
            new = translate(cur["offset"], pairs, dhw)
            must(call(args.dst, "PUT", "/v1/consumers/%s/cursors/%s/%d" % (c, t, cur["partition"]),
                      {"offset": new}), (200,), "commit")
            print("cursor %s %s/%d: %d -> %d" % (consumer, args.topic, cur["partition"], cur["offset"], new))
    return 0


if __name__ == "__main__":
    sys.exit(main())
