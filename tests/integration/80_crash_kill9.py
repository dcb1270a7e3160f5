# SPDX-License-Identifier: MIT
"""kill -9 during concurrent publishes, repeated at many random kill points.

Several client threads publish small batches to a 3-partition topic and log
every acknowledged record (partition, offset, key, value, headers).  The
harness SIGKILLs pulsed after a random delay, restarts it on the same data
directory and checks, over all rounds so far:

  - every acknowledged record is present at its acknowledged offset, byte
    for byte;
  - each partition's offsets run from 0 to the high watermark without holes;
  - each request's records in one partition are all present or all absent,
    and contiguous (one batch);
  - a record that was once served keeps its offset in later rounds (offsets
    are never renumbered), and high watermarks never go backwards.

The seed is printed; PULSE_TEST_SEED reproduces a run, PULSE_CRASH_ROUNDS
changes the number of rounds (default 10)."""

import base64
import os
import random
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pulsetest  # noqa: E402

pulsetest.exit_unless_local("kills pulsed, and the mock cluster dies with it (durability is the cluster's: acks=all)")

from pulsetest import (Threads, b64, check, eq, fail, main, note, raw_request,  # noqa: E402
                       seed_from_env)

PARTITIONS = 3
THREADS = 4


class Ledger:
    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}      # id -> (partition, offset, value, headers)
        self.requests = {}   # request id -> list of (record id, partition)
        self.seen = {}       # record id -> (partition, offset) once served after a restart
        self.max_hw = [0] * PARTITIONS


def client(port, rnd_seed, round_no, tid, stop, ledger, errors):
    rnd = random.Random(rnd_seed)
    seq = 0
    while not stop.is_set():
        seq += 1
        req_id = "r%d-t%d-s%d" % (round_no, tid, seq)
        n = rnd.randint(1, 4)
        recs = []
        meta = []
        for i in range(n):
            rid = "%s-i%d" % (req_id, i)
            value = rid.encode() + b"|" + bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 120)))
            part = rnd.randrange(PARTITIONS)
            recs.append({"key": rid, "value_base64": b64(value), "partition": part,
                         "headers": {"req": req_id}})
            meta.append((rid, part, value))
        with ledger.lock:
            ledger.requests[req_id] = [(rid, part) for rid, part, _ in meta]
        try:
            r = raw_request(port, "POST", "/v1/topics/crash/records", {"records": recs}, timeout=30)
        except Exception:  # noqa: BLE001 - the server was killed under us
            return
        if r.status != 200:
            if not stop.is_set():
                errors.append("publish %s answered %d: %r" % (req_id, r.status, r.body[:200]))
            return
        try:
            offs = r.json()["offsets"]
        except Exception as e:  # noqa: BLE001
            errors.append("publish %s: bad answer %r (%s)" % (req_id, r.body[:200], e))
            return
        if len(offs) != n:
            errors.append("publish %s: %d offsets for %d records" % (req_id, len(offs), n))
            return
        with ledger.lock:
            for (rid, part, value), o in zip(meta, offs):
                if o["partition"] != part:
                    errors.append("%s: sent to partition %d, acked on %d" % (rid, part, o["partition"]))
                ledger.acked[rid] = (part, o["offset"], value, req_id)


def verify(srv, ledger, round_no):
    found = {}
    for p in range(PARTITIONS):
        recs, doc = srv.fetch_all("crash", p)
        hw = doc["high_watermark"]
        eq(doc["log_start_offset"], 0, "round %d partition %d log start" % (round_no, p))
        eq([r["offset"] for r in recs], list(range(hw)),
           "round %d partition %d: offsets 0..HW-1 without holes" % (round_no, p))
        check(hw >= ledger.max_hw[p], "round %d partition %d: HW went back from %d to %d"
              % (round_no, p, ledger.max_hw[p], hw))
        ledger.max_hw[p] = hw
        for r in recs:
            rid = r["key"]
            val = base64.b64decode(r["value_base64"]) if "value_base64" in r else r["value"].encode()
            check(val.startswith(rid.encode() + b"|"), "record %r at %d/%d has a foreign value" % (rid, p, r["offset"]))
            check(rid not in found, "record %s appears twice" % rid)
            found[rid] = (p, r["offset"], val, r["headers"].get("req"))
    with ledger.lock:
        acked = dict(ledger.acked)
        requests = dict(ledger.requests)
    for rid, (p, off, val, req) in acked.items():
        if rid not in found:
            fail("round %d: acknowledged record %s (%d/%d) is missing after kill -9" % (round_no, rid, p, off))
        fp, foff, fval, freq = found[rid]
        eq((fp, foff), (p, off), "round %d: position of acknowledged %s" % (round_no, rid))
        eq(fval, val, "round %d: bytes of acknowledged %s" % (round_no, rid))
        eq(freq, req, "round %d: headers of acknowledged %s" % (round_no, rid))
    for req, members in requests.items():
        by_part = {}
        for rid, p in members:
            by_part.setdefault(p, []).append(rid)
        for p, rids in by_part.items():
            present = [rid in found for rid in rids]
            if any(present) and not all(present):
                fail("round %d: request %s partition %d is partly stored: %r" % (round_no, req, p,
                                                                                 list(zip(rids, present))))
            if all(present):
                offs = [found[rid][1] for rid in rids]
                eq(offs, list(range(offs[0], offs[0] + len(offs))),
                   "round %d: request %s partition %d offsets contiguous" % (round_no, req, p))
    for rid, pos in ledger.seen.items():
        check(rid in found, "round %d: record %s served earlier has vanished" % (round_no, rid))
        eq(found[rid][:2], pos, "round %d: record %s moved" % (round_no, rid))
    for rid, v in found.items():
        ledger.seen[rid] = v[:2]
    return len(acked), len(found)


def test_acknowledged_records_survive_kill_9_at_random_points(ctx):
    seed = seed_from_env()
    rounds = int(os.environ.get("PULSE_CRASH_ROUNDS", "10"))
    note("crash seed: %d, rounds: %d (rerun with PULSE_TEST_SEED=%d)" % (seed, rounds, seed))
    rnd = random.Random(seed)
    srv = ctx.new_server()
    srv.start()
    # Small segments so that kills also land around segment rotation.
    srv.create_topic("crash", partitions=PARTITIONS, segment_bytes=16384)
    ledger = Ledger()
    for rn in range(rounds):
        stop = threading.Event()
        errors = []
        th = Threads()
        for tid in range(THREADS):
            th.start(client, srv.port, rnd.randrange(1 << 30), rn, tid, stop, ledger, errors)
        delay = rnd.uniform(0.05, 1.0)
        time.sleep(delay)
        srv.kill()
        stop.set()
        check(th.join(40), "client threads did not finish after the kill")
        check(not errors, "round %d: %s" % (rn, "; ".join(errors[:5])))
        srv.start()
        n_acked, n_found = verify(srv, ledger, rn)
        note("round %d: killed after %.3f s; %d acknowledged, %d stored records verified"
             % (rn, delay, n_acked, n_found))
    check(len(ledger.acked) > 0, "no publish was ever acknowledged: the test proved nothing")
    srv.stop()


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
