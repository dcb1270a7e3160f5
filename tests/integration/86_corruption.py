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
import pulsetest  # noqa: E402

pulsetest.exit_unless_local("damages the local backend's segment files")

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


def check_served(srv, topic, bad_bytes, extra=0, one_segment=True):
    """Everything but offsets 10 and 11 (plus `extra` records published
    after the damage), with the skip reported. (A raw fetch from 0 stops at
    the end of the first segment when there are several.)"""
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
    if one_segment:
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


def flip(path, pos, mask):
    with open(path, "r+b") as f:
        f.seek(pos)
        c = f.read(1)
        f.seek(pos)
        f.write(bytes([c[0] ^ mask]))


def test_a_damaged_base_offset_never_stalls_a_reader(ctx):
    """The base offset of the 6th batch damaged: pointing far past the high
    watermark, with the snapshot kept (the fast path does not read that
    batch), and, in a topic of 1 KiB segments while pulsed runs, pointing
    below the batch before it. Neither is taken for the end of the data
    (readers used to stop at offset 10 for good) or stepped over without a
    word (offsets 10 and 11 used to vanish): the first fetch that meets it
    learns it, and every fetch, JSON or raw, steps over it saying so."""
    srv = ctx.new_server()
    srv.start()
    fill(srv, "high")
    srv.create_topic("low", segment_bytes=1024)
    for b in range(BATCHES):
        srv.publish("low", [{"key": "k%d" % (2 * b + j), "value_base64": b64(value(2 * b + j))} for j in range(2)])
    srv.stop()
    seg = segment_files(srv.data_dir, "high", 0)[-1]
    batch = decode_batches(read_file(seg))[BAD]
    flip(seg, batch["pos"] + 10, 0xFF)
    srv.start()
    r = raw(srv, "high", 10)
    eq(r.header("Pulse-Skipped"), "10-12;reason=corrupt", "high: raw fetch at 10 skips the damaged batch")
    eq(decode_batches(r.body)[0]["base"], 12, "high: raw fetch at 10 goes on at 12")
    check_served(srv, "high", batch["bytes"])
    low = [(f, b) for f in segment_files(srv.data_dir, "low", 0) for b in decode_batches(read_file(f))]
    f, b = low[BAD]
    eq(b["base"], 10, "low: the 6th batch")
    flip(f, b["pos"] + 15, 0x08)  # base offset 10 -> 2
    check_served(srv, "low", b["bytes"], one_segment=False)
    for t in ("high", "low"):
        eq(srv.publish(t, [{"value": "after"}]), [(0, 100)], "%s: the next offset" % t)
    eq(metric(srv, "pulse_storage_corrupt_ranges"), 2.0, "corrupt ranges metric")
    check("CORRUPT" in srv.stderr_tail(200), "an error line names the corruption")
    srv.stop()
    srv.start()
    for t, bad in (("high", batch["bytes"]), ("low", b["bytes"])):
        check_served(srv, t, bad, extra=1, one_segment=t == "high")
        eq(len(forensic_copies(srv, t)), 1, "%s: a forensic copy at the next start" % t)
    srv.stop()


def missing_offsets(srv, topic, want_skipped, end):
    """Every offset below end but the skipped ones is served with its value,
    and the ranges are reported as missing."""
    recs, skipped, headers = fetch_everything(srv, topic)
    lost = {o for k in want_skipped for o in range(k[0], k[1])}
    eq([x["offset"] for x in recs], [o for o in range(end) if o not in lost], "%s: offsets served" % topic)
    for x in recs:
        eq(json_value_bytes(x), value(x["offset"]), "%s: value of %d" % (topic, x["offset"]))
    eq(skipped, [{"from": a, "to": z, "reason": "missing"} for a, z in want_skipped], "%s: skipped" % topic)


def test_lost_segments_of_a_delete_topic_are_reported_as_missing(ctx):
    """A topic with cleanup=delete has no gaps in its offsets: a sealed
    segment deleted, another cut at a batch boundary, or every segment file
    of a partition gone beside its snapshot, are reported (pulse-log verify
    before any start, then every fetch, /metrics and the error log), their
    offsets are never handed out again, and a restart says the same."""
    srv = ctx.new_server()
    srv.start()
    for t in ("segs", "gone"):
        srv.create_topic(t, segment_bytes=1024)
        for b in range(BATCHES):
            srv.publish(t, [{"key": "k%d" % (2 * b + j), "value_base64": b64(value(2 * b + j))} for j in range(2)])
    srv.stop()
    segs = segment_files(srv.data_dir, "segs", 0)
    check(len(segs) >= 8, "segs: several segments (%d)" % len(segs))
    bases = [decode_batches(read_file(f))[0]["base"] for f in segs]
    os.unlink(segs[3])
    os.unlink(segs[3][:-4] + ".index")
    first = decode_batches(read_file(segs[5]))[0]
    os.truncate(segs[5], first["size"])
    want = [(bases[3], bases[4]), (bases[5] + 2, bases[6])]
    tool = os.path.join(builddir(), "pulse-log")
    p = subprocess.run([tool, "verify", segment_dir(srv.data_dir, "segs", 0)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    out = p.stdout.decode()
    eq(p.returncode, 1, "segs: pulse-log verify exit status (%s)" % out)
    for a, z in want:
        check("offsets %d..%d are missing" % (a, z) in out, "segs: verify names %d..%d: %s" % (a, z, out))
    for f in segment_files(srv.data_dir, "gone", 0):
        os.unlink(f)
    srv.start()
    for rnd in range(2):
        missing_offsets(srv, "segs", want, 100 + rnd)
        missing_offsets(srv, "gone", [(0, 100)], 100 + rnd)
        eq(metric(srv, "pulse_storage_corrupt_ranges"), 3.0, "corrupt ranges metric")
        eq(srv.publish("segs", [{"value_base64": b64(value(100 + rnd))}]), [(0, 100 + rnd)], "segs: next offset")
        eq(srv.publish("gone", [{"value_base64": b64(value(100 + rnd))}]), [(0, 100 + rnd)], "gone: next offset")
        if rnd == 0:
            check("were handed out but their data is gone" in srv.stderr_tail(200), "an error line names them")
            srv.stop()
            srv.start()
    srv.stop()


def test_a_committed_cursor_keeps_the_offsets_of_a_lost_tail(ctx):
    """pulsed killed, the snapshot gone, the last batch damaged: nothing on
    disk proves it was durable, so recovery cuts it as a torn write. But a
    consumer committed its cursor at 100, which it can only do once the
    high watermark reached 100: offsets 98 and 99 were handed out and are
    recorded as missing, and the next publish gets 100, which the consumer
    reads next (it used to get 98, and the consumer never saw it)."""
    srv = ctx.new_server()
    srv.start()
    fill(srv, "tail")
    expect_status(srv.req("PUT", "/v1/consumers/c/cursors/tail/0", {"offset": 100}), 200, "commit cursor")
    srv.kill()
    pdir = segment_dir(srv.data_dir, "tail", 0)
    if os.path.exists(os.path.join(pdir, "snapshot")):
        os.unlink(os.path.join(pdir, "snapshot"))
    seg = segment_files(srv.data_dir, "tail", 0)[-1]
    last = decode_batches(read_file(seg))[-1]
    eq(last["base"], 98, "the last batch")
    flip(seg, last["pos"] + 60, 0x20)
    srv.start()
    eq(srv.publish("tail", [{"value_base64": b64(value(100))}]), [(0, 100)], "the next offset")
    doc = srv.fetch_json("tail", consumer="c")
    eq([x["offset"] for x in doc["records"]], [100], "the consumer reads the new record")
    missing_offsets(srv, "tail", [(98, 100)], 101)
    check("consumer's committed cursor at 100" in srv.stderr_tail(200), "an error line names the cursor")
    srv.stop()


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
