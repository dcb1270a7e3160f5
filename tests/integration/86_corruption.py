# SPDX-License-Identifier: MIT
"""Corruption is not a torn tail (docs/Storage.md "Corruption").

50 batches of 2 records are published to a topic, pulsed is stopped, one
byte inside the 6th batch (offsets 10 and 11) of the active segment is
flipped, and pulsed is started again.  Whether the partition snapshot was
removed (recovery's full scan finds the damage) or kept (the fast path does
not read that far back, and the first fetch that meets the damage learns
it), the answer is the same:

  - every other record is served, byte for byte, at its old offset;
  - a JSON fetch steps over offsets 10..12 and lists them in "skipped" and
    in the Pulse-Skipped header; a raw fetch never contains a byte of the
    damaged batch: one from offset 0 stops before it, one from inside it
    starts at the next valid batch and says what it skipped;
  - the next publish gets offset 100, never 10 again;
  - `pulse-log verify` names the damaged byte range and offsets;
  - a forensic copy of the segment file exists, /metrics counts the range,
    and an error line was logged;
  - another restart reaches the same state (nothing is copied twice)."""

import glob
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (b64, builddir, check, decode_batches, eq, expect_status, json_value_bytes, main,  # noqa: E402
                       read_file, segment_dir, segment_files)

BATCHES = 50
BAD = 5  # the 6th batch: offsets 10 and 11


def value(i):
    return ("record-%03d|" % i).encode() + bytes((i * 7 + j) % 256 for j in range(40))


def fill(srv, topic):
    srv.create_topic(topic)
    for b in range(BATCHES):
        offs = srv.publish(topic, [{"key": "k%d" % (2 * b + j), "value_base64": b64(value(2 * b + j))}
                                   for j in range(2)])
        eq(offs, [(0, 2 * b), (0, 2 * b + 1)], "%s: offsets of batch %d" % (topic, b))


def fetch_everything(srv, topic):
    """Follows next_offset from 0 to the high watermark; returns the records
    and the skipped ranges and Pulse-Skipped headers seen on the way."""
    recs, skipped, headers, off = [], [], [], 0
    while True:
        r = srv.fetch(topic, offset=off, max_records=7)
        expect_status(r, 200, "%s: fetch at %d" % (topic, off))
        doc = r.json()
        recs.extend(doc["records"])
        skipped.extend(doc.get("skipped", []))
        if r.header("Pulse-Skipped"):
            headers.append(r.header("Pulse-Skipped"))
        check(doc["next_offset"] > off or doc["next_offset"] == doc["high_watermark"],
              "%s: fetch at %d made no progress: %r" % (topic, off, doc))
        if doc["next_offset"] >= doc["high_watermark"]:
            return recs, skipped, headers
        off = doc["next_offset"]


def raw(srv, topic, offset):
    r = srv.fetch(topic, offset=offset, format="raw", max_bytes=67108864)
    expect_status(r, 200, "%s: raw fetch at %d" % (topic, offset))
    return r


def metric(srv, name):
    r = srv.get("/metrics")
    expect_status(r, 200, "metrics")
    for line in r.body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("metric %s missing" % name)


def check_served(srv, topic, bad_bytes, extra=0):
    """Everything but offsets 10 and 11 (plus `extra` records published
    after the damage), with the skip reported."""
    recs, skipped, headers = fetch_everything(srv, topic)
    want = [o for o in range(2 * BATCHES + extra) if o not in (10, 11)]
    eq([x["offset"] for x in recs], want, "%s: offsets served" % topic)
    for x in recs:
        if x["offset"] < 2 * BATCHES:
            eq(json_value_bytes(x), value(x["offset"]), "%s: value of %d" % (topic, x["offset"]))
    eq(skipped, [{"from": 10, "to": 12, "reason": "corrupt"}], "%s: skipped ranges" % topic)
    eq(headers, ["10-12;reason=corrupt"], "%s: Pulse-Skipped headers" % topic)
    doc = srv.fetch_json(topic, offset=10, max_records=1)
    eq([x["offset"] for x in doc["records"]], [12], "%s: fetch from inside the damage" % topic)
    eq(doc["skipped"], [{"from": 10, "to": 12, "reason": "corrupt"}], "%s: skipped from 10" % topic)
    r0 = raw(srv, topic, 0)
    eq(r0.header("Pulse-Next-Offset"), "10", "%s: raw fetch from 0 stops before the damage" % topic)
    eq([b["base"] for b in decode_batches(r0.body)], list(range(0, 10, 2)), "%s: raw batches from 0" % topic)
    r11 = raw(srv, topic, 11)
    eq(r11.header("Pulse-Skipped"), "11-12;reason=corrupt", "%s: raw skip header" % topic)
    eq(decode_batches(r11.body)[0]["base"], 12, "%s: raw fetch from 11 starts at 12" % topic)
    for body in (r0.body, r11.body):
        check(bad_bytes not in body, "%s: a raw answer holds the damaged batch" % topic)


def verify(srv, topic):
    """Run after the damage and one more publish (offset 100)."""
    tool = os.path.join(builddir(), "pulse-log")
    p = subprocess.run([tool, "verify", segment_dir(srv.data_dir, topic, 0)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    out = p.stdout.decode()
    eq(p.returncode, 1, "%s: pulse-log verify exit status (%s)" % (topic, out))
    check("offsets 10..12 unreadable; valid batches follow" in out, "%s: verify names the range: %s" % (topic, out))
    check(": damaged: 1 segment, 50 batches, 99 records, offsets 0..100" in out,
          "%s: verify summary: %s" % (topic, out))


def forensic_copies(srv, topic):
    return glob.glob(os.path.join(segment_dir(srv.data_dir, topic, 0), "forensics", "*.log.corrupt-*"))


def test_a_flipped_byte_in_a_middle_batch_is_skipped_and_never_renumbered(ctx):
    srv = ctx.new_server()
    srv.start()
    topics = {"no-snapshot": True, "with-snapshot": False}
    for t in topics:
        fill(srv, t)
    srv.stop()
    bad = {}
    for t, drop in topics.items():
        seg = segment_files(srv.data_dir, t, 0)[-1]
        batch = decode_batches(read_file(seg))[BAD]
        eq(batch["base"], 10, "%s: the 6th batch" % t)
        bad[t] = batch["bytes"]
        with open(seg, "r+b") as f:
            f.seek(batch["pos"] + 60)
            c = f.read(1)
            f.seek(batch["pos"] + 60)
            f.write(bytes([c[0] ^ 0x20]))
        if drop:
            os.unlink(os.path.join(segment_dir(srv.data_dir, t, 0), "snapshot"))
    srv.start()
    for t in topics:
        check_served(srv, t, bad[t])
        eq(srv.publish(t, [{"value": "after"}]), [(0, 100)], "%s: the next offset" % t)
        verify(srv, t)
    eq(len(forensic_copies(srv, "no-snapshot")), 1, "forensic copy made by recovery")
    check("CORRUPT" in srv.stderr_tail(200), "an error line names the corruption")
    eq(metric(srv, "pulse_storage_corrupt_ranges"), 2.0, "corrupt ranges metric")
    check(metric(srv, "pulse_storage_corrupt_bytes") >= 2 * len(bad["no-snapshot"]), "corrupt bytes metric")
    # A restart: the damage learned at run time is now recorded and copied;
    # nothing is found (or copied) twice, and offsets go on.
    srv.stop()
    srv.start()
    for t in topics:
        eq(len(forensic_copies(srv, t)), 1, "%s: one forensic copy" % t)
        check_served(srv, t, bad[t], extra=1)
        eq(srv.publish(t, [{"value": "again"}]), [(0, 101)], "%s: the offset after a restart" % t)
    eq(metric(srv, "pulse_storage_corrupt_ranges"), 2.0, "corrupt ranges metric after a restart")
    srv.stop()


def parse_skipped_header(v):
    """Pulse-Skipped "F-T;reason=R, ..." as the JSON "skipped" list."""
    out = []
    for part in filter(None, (p.strip() for p in (v or "").split(","))):
        rng, reason = part.split(";reason=")
        f, t = rng.split("-")
        out.append({"from": int(f), "to": int(t), "reason": reason})
    return out


def test_more_damaged_ranges_than_one_answer_lists_are_never_dropped(ctx):
    """An answer lists at most 8 skipped ranges; one that meets a 9th ends
    before it (docs/API.md "Damaged data"). 12 damaged batches between
    valid ones: every answer accounts for each offset from where it starts
    to its next_offset (a record or a listed range), and following
    next_offset reports all 12 ranges exactly once."""
    srv = ctx.new_server()
    srv.start()
    srv.create_topic("many")
    for b in range(60):
        srv.publish("many", [{"value_base64": b64(bytes([b]) * 40)} for _ in range(2)])
    srv.stop()
    damaged = list(range(3, 60, 5))
    seg = segment_files(srv.data_dir, "many", 0)[-1]
    batches = decode_batches(read_file(seg))
    with open(seg, "r+b") as f:
        for i in damaged:
            f.seek(batches[i]["pos"] + 60)
            c = f.read(1)
            f.seek(batches[i]["pos"] + 60)
            f.write(bytes([c[0] ^ 0x20]))
    os.unlink(os.path.join(segment_dir(srv.data_dir, "many", 0), "snapshot"))
    srv.start()
    off, answers, all_skipped, served = 0, 0, [], []
    while off < 120:
        r = srv.fetch("many", offset=off, max_records=10000, max_bytes=1048576)
        expect_status(r, 200, "fetch at %d" % off)
        doc = r.json()
        skipped = doc.get("skipped", [])
        check(len(skipped) <= 8, "at most 8 ranges in one answer: %r" % skipped)
        eq(parse_skipped_header(r.header("Pulse-Skipped")), skipped, "Pulse-Skipped matches skipped at %d" % off)
        covered = [x["offset"] for x in doc["records"]]
        for k in skipped:
            covered.extend(range(k["from"], k["to"]))
        eq(sorted(covered), list(range(off, doc["next_offset"])),
           "fetch at %d: every offset up to next_offset is a record or a listed range" % off)
        check(doc["next_offset"] > off, "fetch at %d made progress" % off)
        all_skipped.extend(skipped)
        served.extend(x["offset"] for x in doc["records"])
        off = doc["next_offset"]
        answers += 1
    eq(all_skipped, [{"from": 2 * i, "to": 2 * i + 2, "reason": "corrupt"} for i in damaged], "every range, once")
    eq(served, [o for o in range(120) if o // 2 not in damaged], "every valid record, once")
    check(answers >= 2, "the 9th range ended the first answer (%d answers)" % answers)
    srv.stop()


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
