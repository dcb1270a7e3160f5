#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A Pulse consumer loop that commits its position and resumes after a restart.

For every partition of the topic it fetches from the consumer's committed
cursor (the broker's default when `consumer=` is given), handles the
records, and commits the cursor to the fetch's next_offset.  Stop it at any
time: the next run starts where the last commit left off, so each record is
handled at least once (exactly once if nothing dies between handling and
committing).

    python3 examples/consumer.py --topic orders --group billing
    python3 examples/consumer.py --topic orders --group billing --limit 10 --exit-when-idle

Fetches long-poll (--wait-ms) so an idle consumer does not spin.  The broker
address comes from --url, else $PULSE_URL, else http://127.0.0.1:8080.
"""

import argparse
import json
import os
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
            return e.code, None


def show(rec):
    """Render a fetched record's key or value for printing."""
    if "value_base64" in rec:
        value = "base64:" + rec["value_base64"]
    else:
        value = rec.get("value")
    if "key_base64" in rec:
        key = "base64:" + rec["key_base64"]
    else:
        key = rec.get("key")
    return key, value


def handle(topic, partition, rec):
    """The application's work goes here; this example prints the record."""
    key, value = show(rec)
    print("%s/%d@%d key=%s value=%s" % (topic, partition, rec["offset"], key, value))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=os.environ.get("PULSE_URL", "http://127.0.0.1:8080"))
    ap.add_argument("--topic", default="orders")
    ap.add_argument("--group", default="example-consumer", help="consumer name (owns the cursors)")
    ap.add_argument("--wait-ms", type=int, default=1000, help="long-poll time per fetch")
    ap.add_argument("--max-records", type=int, default=100, help="records per fetch")
    ap.add_argument("--limit", type=int, default=0, help="stop after this many records (0: never)")
    ap.add_argument("--exit-when-idle", action="store_true",
                    help="stop once a full round over the partitions returned nothing")
    args = ap.parse_args()
    url = args.url.rstrip("/")
    topic_q = urllib.parse.quote(args.topic, safe="")
    group_q = urllib.parse.quote(args.group, safe="")

    status, topic = call(url, "GET", "/v1/topics/" + topic_q)
    if status != 200:
        sys.exit("topic %s: HTTP %d %s" % (args.topic, status, topic))
    partitions = topic["partitions"]
    handled = 0
    while True:
        idle = True
        for p in range(partitions):
            room = args.max_records
            if args.limit:
                room = min(room, args.limit - handled)
            # Long-poll only when a single partition is watched; with several,
            # a short wait per partition keeps the round moving.
            wait = args.wait_ms if partitions == 1 else min(args.wait_ms, 200)
            q = urllib.parse.urlencode({"consumer": args.group, "max_records": room, "wait_ms": wait})
            status, doc = call(url, "GET", "/v1/topics/%s/partitions/%d/records?%s" % (topic_q, p, q))
            if status != 200:
                sys.exit("fetch %s/%d: HTTP %d %s" % (args.topic, p, status, doc))
            if not doc["records"]:
                continue
            idle = False
            for rec in doc["records"]:
                handle(args.topic, p, rec)
                handled += 1
            # Commit only after the records are handled: a crash in between
            # replays them instead of losing them.
            status, ans = call(url, "PUT", "/v1/consumers/%s/cursors/%s/%d" % (group_q, topic_q, p),
                               {"offset": doc["next_offset"]})
            if status != 200:
                sys.exit("commit %s/%d: HTTP %d %s" % (args.topic, p, status, ans))
            if args.limit and handled >= args.limit:
                print("handled %d records; stopping (limit)" % handled)
                return
        if idle and args.exit_when_idle:
            print("handled %d records; nothing more to read" % handled)
            return


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
