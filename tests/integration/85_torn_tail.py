# SPDX-License-Identifier: MIT
"""Torn and garbled tails of the active segment, made by hand while pulsed
is stopped (storage contract section 7): after a restart every earlier
record is served unchanged, nothing of the damaged tail is served, and the
next publish gets the offset right after the last intact batch, unless the
snapshot proves the damaged batch was durable: then its offsets are never
handed out again.  Each case runs with the partition snapshot present and
with it removed (full scan).  The seed for the random cut points is
printed."""

import os
import random
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pulsetest  # noqa: E402

pulsetest.exit_unless_local("damages the local backend's segment files")

from pulsetest import (b64, check, decode_batches, eq, expect_status, main, note, read_file,  # noqa: E402
                       seed_from_env, segment_dir, segment_files)

TOPIC = "torn"


def prepare(ctx, segment_bytes=None, batches=3):
    srv = ctx.new_server()
    srv.start()
    if segment_bytes:
        srv.create_topic(TOPIC, segment_bytes=segment_bytes)
    else:
        srv.create_topic(TOPIC)
    for i in range(batches):
        srv.publish(TOPIC, [{"key": "k%d-%d" % (i, j), "value_base64": b64(bytes([i, j]) * 50)}
                            for j in range(i + 2)])
    return srv


def served(srv):
    recs, doc = srv.fetch_all(TOPIC, 0)
    r = srv.fetch(TOPIC, 0, format="raw", max_bytes=67108864)
    expect_status(r, 200, "raw")
    return recs, doc["high_watermark"], r.body


def served_all_raw(srv):
    """Raw bytes of every segment, fetched segment by segment."""
    out, off = [], 0
    while True:
        r = srv.fetch(TOPIC, 0, offset=off, format="raw", max_bytes=67108864)
        expect_status(r, 200, "raw")
        if not r.body:
            return out
        out.append(r.body)
        off = int(r.header("Pulse-Next-Offset"))


def run_case(ctx, label, damage, drop_snapshot, expect_lost_last, segment_bytes=None, batches=3,
             durable_lost=False):
    """durable_lost: the damage hit bytes the snapshot proves were durable
    (acknowledged and visible), so they are not a torn tail: the bytes stay
    in the file as a damaged range and their offsets are never handed out
    again (docs/Storage.md "Corruption")."""
    srv = prepare(ctx, segment_bytes, batches)
    recs, hw, _ = served(srv)
    raw = served_all_raw(srv)[-1]
    srv.stop()
    segs = segment_files(srv.data_dir, TOPIC, 0)
    seg = segs[-1]
    sealed = [read_file(f) for f in segs[:-1]]
    disk = read_file(seg)
    if not disk:
        raise AssertionError("%s: the active segment is empty; the case needs data in it" % label)
    check(raw.endswith(disk) or disk == raw, "%s: raw fetch of the last segment equals the file" % label)
    batches = decode_batches(disk)
    last = batches[-1]
    with open(seg, "r+b") as f:
        damage(f, disk, last)
    if drop_snapshot:
        snap = os.path.join(segment_dir(srv.data_dir, TOPIC, 0), "snapshot")
        if os.path.exists(snap):
            os.unlink(snap)
    damaged = read_file(seg)
    srv.start()
    keep_recs = last["base"] if expect_lost_last else hw
    keep_hw = hw if durable_lost else keep_recs
    keep_bytes = damaged if durable_lost else disk[:last["pos"]] if expect_lost_last else disk
    recs2, hw2, _ = served(srv)
    eq(hw2, keep_hw, "%s: high watermark after recovery" % label)
    eq(recs2, recs[:keep_recs], "%s: records served after recovery" % label)
    eq([read_file(f) for f in segment_files(srv.data_dir, TOPIC, 0)[:len(sealed)]], sealed,
       "%s: sealed segments untouched" % label)
    raw2 = read_file(seg)
    eq(raw2, keep_bytes, "%s: active segment bytes after recovery" % label)
    offs = srv.publish(TOPIC, [{"value": "after-1"}, {"value": "after-2"}])
    eq(offs, [(0, keep_hw), (0, keep_hw + 1)], "%s: offsets of the next publish" % label)
    recs3, hw3, _ = served(srv)
    eq(hw3, keep_hw + 2, "%s: HW after the next publish" % label)
    eq([r["value"] for r in recs3[keep_recs:]], ["after-1", "after-2"], "%s: new records" % label)
    eq(recs3[:keep_recs], recs[:keep_recs], "%s: old records unchanged" % label)
    for body in served_all_raw(srv):
        decode_batches(body)  # every served batch is CRC-valid
    check(read_file(seg).startswith(keep_bytes), "%s: old bytes untouched by the new batch" % label)
    srv.stop()
    srv.start()
    eq(served(srv)[1], keep_hw + 2, "%s: HW after one more clean restart" % label)
    srv.stop()


def test_partial_copy_of_last_batch_appended_is_dropped(ctx):
    seed = seed_from_env()
    note("torn-tail seed: %d (rerun with PULSE_TEST_SEED=%d)" % (seed, seed))
    rnd = random.Random(seed)
    for drop in (False, True):
        for cut_kind in ("header", "body"):
            def damage(f, disk, last, cut_kind=cut_kind):
                if cut_kind == "header":
                    n = rnd.randint(1, 51)
                else:
                    n = rnd.randint(52, last["size"] - 1)
                f.seek(0, 2)
                f.write(last["bytes"][:n])
            run_case(ctx, "partial copy (%s, snapshot %s)" % (cut_kind, "removed" if drop else "kept"),
                     damage, drop, False)


def test_garbage_appended_is_dropped(ctx):
    rnd = random.Random(seed_from_env(12345))
    for drop in (False, True):
        def damage(f, disk, last):
            f.seek(0, 2)
            f.write(bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 300))))
        run_case(ctx, "random garbage (snapshot %s)" % ("removed" if drop else "kept"), damage, drop, False)


def test_full_batch_with_bad_crc_appended_is_dropped(ctx):
    for drop in (False, True):
        def damage(f, disk, last):
            b = bytearray(last["bytes"])
            # A well-formed next batch (right base offset and length) whose
            # records were garbled: the CRC must reject it.
            base = last["base"] + last["count"]
            b[8:16] = base.to_bytes(8, "big")
            b[-1] ^= 0x5A
            f.seek(0, 2)
            f.write(bytes(b))
        run_case(ctx, "bad-CRC batch (snapshot %s)" % ("removed" if drop else "kept"), damage, drop, False)


def test_cut_inside_the_last_batch_drops_only_that_batch(ctx):
    rnd = random.Random(seed_from_env(777))

    def damage(f, disk, last):
        cut = last["pos"] + rnd.randint(1, last["size"] - 1)
        f.truncate(cut)
    # Without the snapshot nothing proves the cut batch was ever durable: a
    # torn tail, cut off, and its offsets are free again (nobody saw them).
    # With it, the snapshot proves the batch was durable and visible: the
    # remains stay as a damaged range and its offsets are never reused.
    run_case(ctx, "truncated last batch (snapshot removed)", damage, True, True)
    run_case(ctx, "truncated last batch (snapshot kept)", damage, False, True, durable_lost=True)


def test_torn_tail_after_rotation_keeps_sealed_segments(ctx):
    rnd = random.Random(seed_from_env(4242))
    for drop in (False, True):
        def damage(f, disk, last):
            f.seek(0, 2)
            f.write(last["bytes"][:rnd.randint(1, last["size"] - 1)])
        # 1024-byte segments and ~250-byte batches: several sealed segments.
        run_case(ctx, "torn tail after rotation (snapshot %s)" % ("removed" if drop else "kept"), damage,
                 drop, False, segment_bytes=1024, batches=9)


def test_zero_filled_tail_is_dropped(ctx):
    # Filesystems can leave a zero-filled extent after a crash mid-append.
    def damage(f, disk, last):
        f.seek(0, 2)
        f.write(b"\x00" * 4096)
    run_case(ctx, "zero-filled tail", damage, True, False)


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
