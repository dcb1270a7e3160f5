#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A Pulse consumer-group member: start it twice and the two split the work.

It joins the group (POST /v1/groups/GROUP/members), then loops: fetch a
batch from any of its partitions (one long-poll over all of them), handle
the records, commit the batch's positions with the batch's generation.
While it handles a long batch it sends heartbeats so that its lease does
not run out.  On Ctrl-C it leaves the group, so the others take over its
partitions at once.

Delivery is at least once: records handled after the last commit are
delivered again (to this member or another) after a rebalance, a crash or a
broker restart.  A commit answered 409 "commit_fenced" means the batch's
partitions moved meanwhile: its records will be delivered again from the
committed cursor, so the handler must be idempotent (see `handle`).  A 409
"rejoin" means the group no longer knows this member: it joins again and
resumes from the committed cursors.  It commits after every batch, so each
fetch starts at the committed cursors; a member that fetches again before
committing passes the last answer's "resume" instead.  Right after a broker
restart the partitions come only after groups.lease-max (the answers say
"pending_partitions" and "hold_ms"), while leases of the last run may run.

    python3 examples/consumer.py --topic orders --group billing
    python3 examples/consumer.py --topic orders --group billing --limit 10 --exit-when-idle

The broker address comes from --url, else $PULSE_URL, else
http://127.0.0.1:8080.
"""

import argparse
import json
import os
import sys
import time
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


def error_code(doc):
    return (doc or {}).get("error", {}).get("code")


def show(rec):
    """Render a fetched record's key or value for printing."""
    value = "base64:" + rec["value_base64"] if "value_base64" in rec else rec.get("value")
    key = "base64:" + rec["key_base64"] if "key_base64" in rec else rec.get("key")
    return key, value


def handle(rec, seen, process_ms):
    """The application's work goes here; this example prints the record.

    Idempotent processing: a record can come again after a rebalance or a
    restart, so the work is keyed by the record's position (topic,
    partition, offset), which never changes.  A real application keeps the
    position with its result in the same transaction (a database row's
    unique key, an upsert) so that a redelivered record changes nothing;
    this example keeps the positions it has handled in memory and says when
    one comes back.
    """
    pos = (rec["topic"], rec["partition"], rec["offset"])
    key, value = show(rec)
    again = " (again)" if pos in seen else ""
    seen.add(pos)
    if process_ms:
        time.sleep(process_ms / 1000.0)
    print("%s/%d@%d key=%s value=%s%s" % (rec["topic"], rec["partition"], rec["offset"], key, value, again))
    sys.stdout.flush()


class Member:
    """One membership: join, fetch, heartbeat, commit, leave."""

    def __init__(self, url, group, topics, lease_ms):
        self.url, self.group, self.topics, self.lease_ms = url, group, topics, lease_ms
        self.base = "/v1/groups/" + urllib.parse.quote(group, safe="")
        self.id = None
        self.last_call = 0.0

    def join(self):
        status, doc = call(self.url, "POST", self.base + "/members",
                           {"topics": self.topics, "lease_ms": self.lease_ms})
        if status != 201:
            sys.exit("join %s: HTTP %d %s" % (self.group, status, doc))
        self.id = doc["member_id"]
        self.last_call = time.monotonic()
        print("joined %s as %s (generation %d, partitions %s)"
              % (self.group, self.id, doc["generation"], self.parts(doc)), file=sys.stderr)

    @staticmethod
    def parts(doc):
        return ",".join("%s/%d" % (p["topic"], p["partition"]) for p in doc["partitions"]) or "none yet"

    def member_path(self, suffix=""):
        return "%s/members/%s%s" % (self.base, self.id, suffix)

    def fetch(self, max_records, wait_ms):
        q = urllib.parse.urlencode({"max_records": max_records, "max_wait_ms": wait_ms})
        status, doc = call(self.url, "GET", self.member_path("/records?" + q))
        self.last_call = time.monotonic()
        if status == 409 and error_code(doc) == "rejoin":
            self.join()
            return None
        if status != 200:
            sys.exit("fetch: HTTP %d %s" % (status, doc))
        return doc

    def heartbeat_if_due(self):
        """Called between records: keeps the lease while a batch takes long."""
        if time.monotonic() - self.last_call < self.lease_ms / 3000.0:
            return
        status, doc = call(self.url, "POST", self.member_path("/heartbeat"))
        self.last_call = time.monotonic()
        if status == 409:
            print("heartbeat: %s" % error_code(doc), file=sys.stderr)

    def commit(self, generation, positions):
        status, doc = call(self.url, "POST", self.member_path("/commit"),
                           {"generation": generation, "offsets": positions})
        self.last_call = time.monotonic()
        if status == 200:
            return True
        code = error_code(doc)
        if status == 409 and code == "commit_fenced":
            print("commit refused (partitions moved); the batch will be delivered again", file=sys.stderr)
            return False
        if status == 409 and code == "rejoin":
            self.join()
            return False
        sys.exit("commit: HTTP %d %s" % (status, doc))

    def leave(self):
        if self.id is not None:
            call(self.url, "DELETE", self.member_path(), timeout=5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=os.environ.get("PULSE_URL", "http://127.0.0.1:8080"))
    ap.add_argument("--topic", default="orders", help="topic to consume (comma-separated for several)")
    ap.add_argument("--group", default="example-consumer", help="consumer group (owns the cursors)")
    ap.add_argument("--wait-ms", type=int, default=1000, help="long-poll time per fetch")
    ap.add_argument("--max-records", type=int, default=100, help="records per fetch")
    ap.add_argument("--lease-ms", type=int, default=10000, help="the member's lease")
    ap.add_argument("--process-ms", type=int, default=0, help="simulated work per record")
    ap.add_argument("--limit", type=int, default=0, help="stop after this many records (0: never)")
    ap.add_argument("--exit-when-idle", action="store_true",
                    help="stop once a fetch returned nothing and the member's partitions did not change")
    args = ap.parse_args()
    member = Member(args.url.rstrip("/"), args.group, args.topic.split(","), args.lease_ms)
    member.join()
    handled = 0
    seen = set()
    last_parts = None
    try:
        while True:
            room = args.max_records
            if args.limit:
                room = min(room, args.limit - handled)
            doc = member.fetch(room, args.wait_ms)
            if doc is None:
                continue
            parts = Member.parts(doc)
            if not doc["records"]:
                # Idle: nothing came and nothing changed (an empty answer
                # may also mean a rebalance gave this member new partitions).
                if args.exit_when_idle and doc["pending_partitions"] == 0 and parts == last_parts:
                    print("handled %d records; nothing more to read" % handled)
                    return
                last_parts = parts
                continue
            last_parts = parts
            for rec in doc["records"]:
                handle(rec, seen, args.process_ms)
                handled += 1
                member.heartbeat_if_due()
            # Commit only after the records are handled: a crash in between
            # delivers them again instead of losing them.
            member.commit(doc["generation"], doc["positions"])
            if args.limit and handled >= args.limit:
                print("handled %d records; stopping (limit)" % handled)
                return
    finally:
        member.leave()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
