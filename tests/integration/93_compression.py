# SPDX-License-Identifier: MIT
"""Compressed topics (`compression: zlib`, docs/Format.md 1.8): the setting
at create, in GET, in topic.json and through PATCH and a restart; records
published to a compressed topic come back exactly from a JSON fetch; a raw
fetch serves the batches as stored (codec 1), which examples/decode_raw.py
decodes; PATCHing compression off and on mid-stream leaves a log of mixed
batches that every reader reads; compaction rewrites a compressed topic into
compressed sparse batches; pulse-log dump and verify read them; and a
compressed batch whose CRC matches but whose stream is damaged is found and
reported, never served."""

import json
import os
import struct
import subprocess
import sys
import time
import zlib

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (builddir, check, crc32c, eq, expect_error, expect_json, expect_status,  # noqa: E402
                       exit_unless_local, main, segment_dir, segment_files, srcdir, uniq, wait_until)

exit_unless_local("compression is the local engine's batch format")

RAW_CT = "application/vnd.pulse.batches"
CODEC_MASK = 0x0007
SPARSE = 0x0008


def event(i):
    """A realistic JSON event value."""
    return json.dumps({"event": "page_view", "user_id": 1000 + i % 17, "session": "s-%08d" % (4242 + i // 5),
                       "path": "/products/%d" % (i % 23), "referrer": "https://example.com/search?q=shoes",
                       "ua": "Mozilla/5.0 (X11; Linux x86_64) Firefox/118.0", "ts": 1700000000 + i},
                      separators=(",", ":"))


def publish_events(srv, t, first, n, per=25, keys=17):
    for s in range(first, first + n, per):
        srv.publish(t, [{"key": "u%d" % (i % keys), "value": event(i)} for i in range(s, min(first + n, s + per))])


def stored_batches(data_dir, topic):
    """(flags, base, count) of every batch in the topic's segment files."""
    out = []
    for path in segment_files(data_dir, topic, 0):
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos + 52 <= len(data):
            flags, = struct.unpack_from(">H", data, pos + 2)
            base, blen = struct.unpack_from(">qI", data, pos + 8)
            count, = struct.unpack_from(">I", data, pos + 36)
            out.append((flags, base, count))
            pos += 52 + blen
    return out


def all_values(srv, t):
    got = []
    offset = 0
    while True:
        doc = expect_json(srv.fetch(t, 0, offset=offset, max_records=1000), 200, "fetch %s at %d" % (t, offset))
        got += [(r["offset"], r["key"], r["value"]) for r in doc["records"]]
        if doc["next_offset"] >= doc["high_watermark"]:
            return got
        offset = doc["next_offset"]


def decode_raw(body, start=0):
    tool = os.path.join(srcdir(), "examples", "decode_raw.py")
    p = subprocess.run([sys.executable, tool, "--from", str(start), "-"], input=body, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def test_setting_at_create_in_get_and_topic_json(ctx):
    srv = ctx.srv
    t = uniq("z")
    doc = srv.create_topic(t, compression="zlib")
    eq(doc["compression"], "zlib", "create answer")
    eq(expect_json(srv.get("/v1/topics/" + t), 200, "get")["compression"], "zlib", "GET")
    plain = uniq("p")
    eq(srv.create_topic(plain)["compression"], "none", "default compression")
    with open(os.path.join(srv.data_dir, "topics", t, "topic.json")) as f:
        eq(json.load(f).get("compression"), "zlib", "topic.json")
    with open(os.path.join(srv.data_dir, "topics", plain, "topic.json")) as f:
        eq(json.load(f).get("compression"), None, "topic.json of an uncompressed topic (member left out)")
    for bad in ("gzip", "ZLIB", 1, None, ""):
        expect_error(srv.req("POST", "/v1/topics", {"name": uniq("bad"), "compression": bad}), 400,
                     ["invalid_request"], "create with compression %r" % (bad,))
        expect_error(srv.req("PATCH", "/v1/topics/" + t, {"compression": bad}), 400, ["invalid_request"],
                     "PATCH compression %r" % (bad,))
    eq(srv.topic(t)["compression"], "zlib", "a refused PATCH changes nothing")


def test_publish_json_and_raw_fetch_of_a_compressed_topic(ctx):
    srv = ctx.srv
    t, plain = uniq("z"), uniq("p")
    srv.create_topic(t, compression="zlib")
    srv.create_topic(plain)
    publish_events(srv, t, 0, 200)
    publish_events(srv, plain, 0, 200)
    want = [(i, "u%d" % (i % 17), event(i)) for i in range(200)]
    eq(all_values(srv, t), want, "JSON fetch of the compressed topic")
    eq(all_values(srv, plain), want, "JSON fetch of the plain topic")
    # Stored compressed, and smaller on disk.
    batches = stored_batches(srv.data_dir, t)
    check(batches and all(f & CODEC_MASK == 1 for f, _, _ in batches), "codec of stored batches: %r" % batches)
    zsize = sum(os.path.getsize(p) for p in segment_files(srv.data_dir, t, 0))
    psize = sum(os.path.getsize(p) for p in segment_files(srv.data_dir, plain, 0))
    check(zsize * 2 < psize, "compressed topic takes %d bytes on disk, plain %d" % (zsize, psize))
    # Raw: the batches exactly as stored, which decode_raw.py inflates.
    r = srv.fetch(t, 0, headers={"Accept": RAW_CT}, offset=30, max_bytes=1 << 20)
    expect_status(r, 200, "raw fetch")
    eq(r.header("Content-Type"), RAW_CT, "raw content type")
    seg = open(segment_files(srv.data_dir, t, 0)[0], "rb").read()
    check(r.body in seg, "the raw answer is not a slice of the segment file")
    rc, out, err = decode_raw(r.body, 30)
    eq(rc, 0, "decode_raw exit status (%s)" % err)
    check("zlib(" in out, "decode_raw names the zlib batches: %s" % out[:300])
    lines = [ln for ln in out.splitlines() if ln.startswith("  offset=")]
    eq(len(lines), 170, "records decode_raw printed from offset 30")
    check(lines[0].startswith("  offset=30 ") and ("value=%r" % event(30)) in lines[0],
          "first decoded record: %s" % lines[0])


def test_patch_compression_off_and_on_mid_stream(ctx):
    srv = ctx.srv
    t = uniq("mix")
    srv.create_topic(t, compression="zlib")
    publish_events(srv, t, 0, 50)
    doc = expect_json(srv.req("PATCH", "/v1/topics/" + t, {"compression": "none"}), 200, "PATCH off")
    eq(doc["compression"], "none", "PATCH answer")
    publish_events(srv, t, 50, 50)
    doc = expect_json(srv.req("PATCH", "/v1/topics/" + t, {"compression": "zlib", "retention_ms": 0}), 200,
                      "PATCH on")
    eq((doc["compression"], doc["retention_ms"]), ("zlib", 0), "PATCH answer")
    publish_events(srv, t, 100, 50)
    codecs = [f & CODEC_MASK for f, _, _ in stored_batches(srv.data_dir, t)]
    eq(codecs, [1, 1, 0, 0, 1, 1], "codecs of the stored batches (zlib, plain, zlib)")
    want = [(i, "u%d" % (i % 17), event(i)) for i in range(150)]
    eq(all_values(srv, t), want, "JSON fetch across mixed batches")
    r = srv.fetch(t, 0, headers={"Accept": RAW_CT}, max_bytes=1 << 20)
    rc, out, err = decode_raw(r.body)
    eq(rc, 0, "decode_raw of mixed batches (%s)" % err)
    eq(sum(1 for ln in out.splitlines() if ln.startswith("  offset=")), 150, "records decoded")
    with open(os.path.join(srv.data_dir, "topics", t, "topic.json")) as f:
        eq(json.load(f).get("compression"), "zlib", "topic.json after the PATCHes")


def test_setting_and_records_survive_a_restart(ctx):
    srv = ctx.new_server()
    srv.start()
    t = uniq("r")
    srv.create_topic(t)
    publish_events(srv, t, 0, 30)
    expect_json(srv.req("PATCH", "/v1/topics/" + t, {"compression": "zlib"}), 200, "PATCH on")
    publish_events(srv, t, 30, 30)
    srv.restart()
    eq(srv.topic(t)["compression"], "zlib", "compression after a restart")
    publish_events(srv, t, 60, 30)
    eq(all_values(srv, t), [(i, "u%d" % (i % 17), event(i)) for i in range(90)], "records after a restart")
    eq([f & CODEC_MASK for f, _, _ in stored_batches(srv.data_dir, t)], [0, 0, 1, 1, 1, 1], "stored codecs")


def test_compaction_rewrites_into_compressed_batches(ctx):
    srv = ctx.new_server(args=["-o", "storage.compaction-interval=100ms", "-o", "storage.retention-interval=0"])
    srv.start()
    t = uniq("cz")
    srv.create_topic(t, cleanup="compact", compression="zlib", segment_bytes=4096)
    # 300 records on 200 keys: those of offsets 0..99 are superseded by
    # 200..299, those of 100..199 are the newest of their keys; a sealed
    # segment that holds both kinds is rewritten with what survives.
    publish_events(srv, t, 0, 300, keys=200)
    newest = {}
    for i in range(300):
        newest["u%d" % (i % 200)] = (i, event(i))

    # (A pass may first merge small segments, which rewrites batches
    # without dropping anything: wait until records are gone too.)
    def compacted():
        return (any(f & SPARSE for f, _, _ in stored_batches(srv.data_dir, t))
                and len(all_values(srv, t)) < 300)

    check(wait_until(compacted, 30), "no compaction: %r" % stored_batches(srv.data_dir, t))
    batches = stored_batches(srv.data_dir, t)
    sparse = [f for f, _, _ in batches if f & SPARSE]
    check(all(f & CODEC_MASK == 1 for f in sparse), "compacted batches are compressed: %r" % batches)
    got = all_values(srv, t)
    last = {}
    for off, key, value in got:
        check(value == event(off), "record %d has the value of another offset" % off)
        last[key] = (off, value)
    eq(last, newest, "the newest value of every key survives")
    # pulse-log reads the partition directory with its compressed batches.
    tool = os.path.join(builddir(), "pulse-log")
    d = segment_dir(srv.data_dir, t, 0)
    p = subprocess.run([tool, "verify", d], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    eq(p.returncode, 0, "pulse-log verify: %s %s" % (p.stdout.decode(), p.stderr.decode()))
    seg = segment_files(srv.data_dir, t, 0)[0]
    p = subprocess.run([tool, "dump", "--json", seg], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    eq(p.returncode, 0, "pulse-log dump: %s" % p.stderr.decode())
    recs = [json.loads(ln) for ln in p.stdout.decode().splitlines()]
    check(recs and all(r["value"] == event(r["offset"]) for r in recs), "pulse-log dump records: %r" % recs[:3])


def damage_stream_keep_crc(path, batch_index):
    """Rewrites the deflate stream of one compressed batch of a segment file so
    that it no longer inflates, then fixes the CRC: a CRC-valid but invalid
    batch. Returns that batch's base offset."""
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        pos = 0
        for _ in range(batch_index):
            pos += 52 + struct.unpack_from(">I", data, pos + 16)[0]
        flags, = struct.unpack_from(">H", data, pos + 2)
        check(flags & CODEC_MASK == 1, "batch %d is not compressed" % batch_index)
        base, blen = struct.unpack_from(">qI", data, pos + 8)
        plain_len, = struct.unpack_from(">I", data, pos + 52)
        z = zlib.compressobj(6, zlib.DEFLATED, -15)
        stream = z.compress(b"\x00" * plain_len) + z.flush()  # valid deflate, of records that cannot parse
        # Same length as before, so the file keeps its layout.
        stream = (stream + b"\x00" * blen)[:blen - 4]
        data[pos + 56:pos + 52 + blen] = stream
        struct.pack_into(">I", data, pos + 4, crc32c(bytes(data[pos + 8:pos + 52 + blen])))
        f.seek(0)
        f.write(data)
    return base


def test_crc_valid_but_invalid_compressed_batch_is_reported_not_served(ctx):
    srv = ctx.new_server()
    srv.start()
    t = uniq("dz")
    srv.create_topic(t, compression="zlib")
    for i in range(4):
        publish_events(srv, t, i * 25, 25)
    srv.stop()
    seg = segment_files(srv.data_dir, t, 0)[0]
    base = damage_stream_keep_crc(seg, 1)
    eq(base, 25, "damaged batch")
    tool = os.path.join(builddir(), "pulse-log")
    p = subprocess.run([tool, "verify", seg], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    out = p.stdout.decode() + p.stderr.decode()
    eq(p.returncode, 1, "pulse-log verify finds the batch: %s" % out)
    check("compressed" in out, "pulse-log verify says what is wrong: %s" % out)
    srv.start()
    got = all_values(srv, t)
    offsets = [o for o, _, _ in got]
    check(not any(25 <= o < 50 for o in offsets), "records of the damaged batch were served: %r" % offsets)
    eq([o for o in offsets if o < 25 or o >= 50], list(range(25)) + list(range(50, 100)), "the rest is served")
    for off, _, value in got:
        eq(value, event(off), "record %d" % off)


if __name__ == "__main__":
    sys.exit(main(globals()))
