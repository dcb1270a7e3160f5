#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A minimal Pulse producer using only the Python standard library.

It makes sure the topic exists, then publishes COUNT records in requests of
BATCH records each and prints the partition and offset the broker gave every
record.  A publish is answered only once its records are durable, so a
printed offset is a record that survives a crash.

    python3 examples/producer.py --topic orders --count 100 --batch 10

The broker address comes from --url, else $PULSE_URL, else
http://127.0.0.1:8080.
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request


def call(url, method, path, body=None, timeout=30):
    """Send one JSON request; return (status, decoded JSON body or None)."""
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
            return e.code, {"error": {"code": "?", "message": raw.decode("utf-8", "replace")}}


def ensure_topic(url, topic, partitions):
    status, doc = call(url, "POST", "/v1/topics", {"name": topic, "partitions": partitions})
    if status == 201:
        print("created topic %s with %d partition(s)" % (topic, partitions))
    elif status == 409:
        print("topic %s already exists" % topic)
    else:
        sys.exit("cannot create topic %s: HTTP %d %s" % (topic, status, doc))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=os.environ.get("PULSE_URL", "http://127.0.0.1:8080"))
    ap.add_argument("--topic", default="orders")
    ap.add_argument("--partitions", type=int, default=2, help="used only when the topic is created")
    ap.add_argument("--count", type=int, default=20, help="records to publish")
    ap.add_argument("--batch", type=int, default=5, help="records per request")
    args = ap.parse_args()
    url = args.url.rstrip("/")

    ensure_topic(url, args.topic, args.partitions)
    sent = 0
    while sent < args.count:
        n = min(args.batch, args.count - sent)
        records = []
        for i in range(sent, sent + n):
            records.append({
                "key": "customer-%d" % (i % 7),           # same key, same partition
                "value": {"order": i, "amount_cents": 100 + i},
                "headers": {"producer": "examples/producer.py"},
                "timestamp": int(time.time() * 1000),
            })
        status, doc = call(url, "POST", "/v1/topics/%s/records" % args.topic, {"records": records})
        if status != 200:
            sys.exit("publish failed: HTTP %d %s" % (status, doc))
        for rec, off in zip(records, doc["offsets"]):
            print("order %d -> partition %d offset %d" % (rec["value"]["order"], off["partition"], off["offset"]))
        sent += n
    print("published %d records to %s" % (sent, args.topic))


if __name__ == "__main__":
    main()
