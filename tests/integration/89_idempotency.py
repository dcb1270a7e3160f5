# SPDX-License-Identifier: MIT
"""Publishes with an Idempotency-Key (docs/API.md "Retrying a publish").

A retry with the same key and records stores nothing and answers the first
offsets with "duplicate": true; other records under the key are refused with
422; concurrent twins wait for the first; keyless records follow the key; the
window survives a restart (it is rebuilt from the batches' producer fields);
a publish cut between partitions by a crash is completed by its retry; and,
over many rounds of kill -9 at random points around the append (and at a
failpoint between two partitions' appends), retried publishes never store a
record twice and never lose one that was acknowledged.

The seed is printed; PULSE_TEST_SEED reproduces a run, PULSE_IDEM_ROUNDS
changes the number of kill rounds (default 12)."""

import os
import random
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (Threads, builddir, check, crc32c, eq, expect_error, expect_json, fail, main,  # noqa: E402
                       murmur2, note, raw_request, seed_from_env, segment_files)
import pulsetest  # noqa: E402

pulsetest.exit_unless_local("the Kafka backend answers Idempotency-Key with 406 (docs/Scaling.md: exactness across "
                            "gateway replicas needs a per-key claim order that is not built)")


def post(srv, topic, records, key, timeout=None):
    headers = {"Idempotency-Key": key} if key is not None else None
    return srv.req("POST", "/v1/topics/%s/records" % topic, {"records": records}, headers=headers,
                   timeout=timeout)


def offsets(doc):
    return [(o["partition"], o["offset"]) for o in doc["offsets"]]


def all_values(srv, topic, nparts):
    """partition -> list of (offset, value) for the whole topic."""
    out = {}
    for p in range(nparts):
        recs, _ = srv.fetch_all(topic, p)
        out[p] = [(r["offset"], r.get("value")) for r in recs]
    return out


def test_retry_answers_the_first_offsets(ctx):
    srv = ctx.srv
    srv.create_topic("once", partitions=3)
    recs = [{"value": "a"}, {"key": "k1", "value": "b"}, {"value": "c", "partition": 2}]
    first = expect_json(post(srv, "once", recs, "req-1"), 200, "first publish")
    eq(first.get("duplicate"), False, "first publish: duplicate")
    hws = [srv.hw("once", p) for p in range(3)]
    again = expect_json(post(srv, "once", recs, "req-1"), 200, "retry")
    eq(again.get("duplicate"), True, "retry: duplicate")
    eq(offsets(again), offsets(first), "retry: offsets")
    eq([srv.hw("once", p) for p in range(3)], hws, "high watermarks after the retry")
    # Without the header nothing changes: no duplicate field, stored again.
    plain = expect_json(post(srv, "once", recs, None), 200, "publish without a key")
    check("duplicate" not in plain, "a publish without a key has no duplicate field: %r" % plain)


def test_same_key_other_records_is_422(ctx):
    srv = ctx.srv
    srv.create_topic("reuse", partitions=1)
    expect_json(post(srv, "reuse", [{"value": "one"}], "k"), 200, "first")
    r = post(srv, "reuse", [{"value": "two"}], "k")
    expect_error(r, 422, ["idempotency_key_reused"], "other records, same key")
    eq(srv.hw("reuse"), 1, "nothing stored by the refused publish")
    # Other topics have their own keys.
    srv.create_topic("reuse2", partitions=1)
    expect_json(post(srv, "reuse2", [{"value": "two"}], "k"), 200, "same key on another topic")


def test_bad_keys_are_400(ctx):
    srv = ctx.srv
    srv.create_topic("badkey", partitions=1)
    for key in ["x" * 256, "has space", "caf\u00e9".encode("utf-8").decode("latin-1")]:
        r = post(srv, "badkey", [{"value": "v"}], key)
        expect_error(r, 400, ["invalid_request"], "key %r" % key[:20])
    eq(srv.hw("badkey"), 0, "nothing stored")


def test_keyless_records_follow_the_key(ctx):
    srv = ctx.srv
    n = 8
    srv.create_topic("route", partitions=n)
    for i in range(20):
        key = "route-%d" % i
        want = (murmur2(key.encode()) & 0x7fffffff) % n
        doc = expect_json(post(srv, "route", [{"value": "a"}, {"value": "b"}], key), 200, key)
        eq([p for p, _ in offsets(doc)], [want, want], "%s: partitions of keyless records" % key)


def test_concurrent_twins_wait_for_the_first(ctx):
    # The first holds its key for 400 ms (a delay failpoint); the others
    # arrive meanwhile and are answered when it completes.
    srv = ctx.new_server(env={"PULSE_FAILPOINT_DELAY": "publish_idem_run:400"})
    srv.start()
    srv.create_topic("twins", partitions=2)
    recs = [{"value": "x%d" % i} for i in range(3)]
    answers = []
    lock = threading.Lock()

    def one():
        r = post(srv, "twins", recs, "same", timeout=30)
        with lock:
            answers.append(r)

    th = Threads()
    for _ in range(5):
        th.start(one)
    check(th.join(60), "the twins did not finish")
    docs = [expect_json(r, 200, "twin") for r in answers]
    eq(sorted(d["duplicate"] for d in docs), [False, True, True, True, True], "one stored, four replays")
    eq(len({tuple(offsets(d)) for d in docs}), 1, "every twin got the same offsets")
    eq(sum(srv.hw("twins", p) for p in range(2)), 3, "records stored once")
    srv.stop()


def test_window_expires_and_is_bounded(ctx):
    srv = ctx.new_server(args=["-o", "publish.idempotency-window=2s", "-o", "publish.idempotency-max-keys=2"])
    srv.start()
    srv.create_topic("win", partitions=1)
    recs = [{"value": "v"}]
    expect_json(post(srv, "win", recs, "a"), 200, "a")
    time.sleep(2.2)
    doc = expect_json(post(srv, "win", recs, "a"), 200, "a after the window")
    eq(doc["duplicate"], False, "a key past the window is new again")
    expect_json(post(srv, "win", recs, "b"), 200, "b")
    expect_json(post(srv, "win", recs, "c"), 200, "c")  # the window holds two: a goes
    eq(expect_json(post(srv, "win", recs, "c"), 200, "c again")["duplicate"], True, "c remembered")
    eq(expect_json(post(srv, "win", recs, "a"), 200, "a again")["duplicate"], False, "a was forgotten")
    eq(srv.hw("win"), 5, "records stored")
    srv.stop()


def test_window_survives_a_restart(ctx):
    srv = ctx.new_server()
    srv.start()
    srv.create_topic("restart", partitions=3)
    recs = [{"value": "r%d" % i} for i in range(5)] + [{"key": "kk", "value": "keyed"}]
    first = expect_json(post(srv, "restart", recs, "survivor"), 200, "first")
    for how in ("stop", "kill"):
        if how == "stop":
            srv.stop()
        else:
            srv.kill()
        srv.start()
        doc = expect_json(post(srv, "restart", recs, "survivor"), 200, "retry after %s" % how)
        eq(doc["duplicate"], True, "after %s: duplicate" % how)
        eq(offsets(doc), offsets(first), "after %s: offsets" % how)
        expect_error(post(srv, "restart", recs[:1], "survivor"), 422, ["idempotency_key_reused"],
                     "other records after %s" % how)
    eq(sum(srv.hw("restart", p) for p in range(3)), len(recs), "stored once")
    srv.stop()


def test_crash_between_partitions_is_completed_by_the_retry(ctx):
    srv = ctx.new_server(env={"PULSE_FAILPOINT": "publish_idem_after_partition"})
    srv.start()
    srv.create_topic("split", partitions=3)
    recs = [{"value": "p%d" % p, "partition": p} for p in range(3)]
    try:
        r = post(srv, "split", recs, "cut", timeout=10)
        fail("the failpoint did not stop pulsed: %r" % r)
    except Exception as e:  # noqa: BLE001 - the connection dies with the server
        if "failpoint" in str(e):
            raise
    srv.proc.wait(timeout=30)
    eq(srv.proc.returncode, 99, "pulsed left at the failpoint")
    srv.proc = None
    srv.env = {}
    srv.start()
    eq([srv.hw("split", p) for p in range(3)], [1, 0, 0], "only partition 0 was appended before the crash")
    doc = expect_json(post(srv, "split", recs, "cut"), 200, "retry")
    eq(doc["duplicate"], False, "the retry stored the missing partitions")
    eq(offsets(doc), [(0, 0), (1, 0), (2, 0)], "offsets of the whole publish")
    eq([srv.hw("split", p) for p in range(3)], [1, 1, 1], "each record once")
    again = expect_json(post(srv, "split", recs, "cut"), 200, "second retry")
    eq((again["duplicate"], offsets(again)), (True, [(0, 0), (1, 0), (2, 0)]), "second retry")
    srv.stop()


def test_pulse_log_shows_and_verifies_the_producer_fields(ctx):
    srv = ctx.new_server()
    srv.start()
    srv.create_topic("dumped", partitions=1)
    expect_json(post(srv, "dumped", [{"value": "v"}], "dump-key"), 200, "idempotent publish")
    expect_json(post(srv, "dumped", [{"value": "w"}], None), 200, "plain publish")
    srv.stop()
    # docs/Format.md: producerID = murmur2(key) (never 0), producerEpoch =
    # CRC32C(key), baseSequence = a fingerprint of the records (never 0).
    pid = murmur2(b"dump-key") & 0xffffffff or 1
    want = "producer_id=0x%08x producer_epoch=0x%08x base_sequence=" % (pid, crc32c(b"dump-key"))
    tool = os.path.join(builddir(), "pulse-log")
    seg = [f for f in segment_files(srv.data_dir, "dumped") if f.endswith(".log")][0]
    out = subprocess.run([tool, "dump", seg], capture_output=True, text=True, timeout=30)
    eq(out.returncode, 0, "pulse-log dump: %s" % out.stderr)
    lines = out.stdout.splitlines()
    check(len(lines) == 5 and lines[1].strip().startswith(want) and "producer" not in lines[3] + lines[4],
          "dump shows the fields of the idempotent batch only:\n%s" % out.stdout)
    out = subprocess.run([tool, "verify", os.path.dirname(seg)], capture_output=True, text=True, timeout=30)
    eq(out.returncode, 0, "pulse-log verify: %s %s" % (out.stdout, out.stderr))


# ---- kill -9 rounds ---------------------------------------------------------

PARTS = 3


class Book:
    def __init__(self):
        self.lock = threading.Lock()
        self.bodies = {}   # key -> records
        self.acked = {}    # key -> offsets
        self.open = set()  # keys sent but not answered 200
        self.retried = 0   # unanswered publishes retried after a kill
        self.replayed = 0  # ... of which the first try had been stored


def make_request(rnd, key):
    recs = []
    for i in range(rnd.randint(1, 5)):
        v = "%s/%d" % (key, i)
        kind = rnd.randrange(3)
        if kind == 0:
            recs.append({"value": v})
        elif kind == 1:
            recs.append({"key": "k%d" % rnd.randrange(50), "value": v})
        else:
            recs.append({"value": v, "partition": rnd.randrange(PARTS)})
    return recs


def settle(srv, book, key, errors, what):
    r = post(srv, "crash", book.bodies[key], key, timeout=30)
    if r.status != 200:
        errors.append("%s %s answered %d: %r" % (what, key, r.status, r.body[:300]))
        return
    doc = r.json()
    got = offsets(doc)
    with book.lock:
        if what == "retry":
            book.retried += 1
            book.replayed += 1 if doc["duplicate"] else 0
        elif not doc["duplicate"]:
            errors.append("replay %s: not answered as a duplicate" % key)
        if key in book.acked and book.acked[key] != got:
            errors.append("%s %s: offsets %r, first acknowledged %r" % (what, key, got, book.acked[key]))
        book.acked.setdefault(key, got)
        book.open.discard(key)


def client(port, seed, tag, stop, book, errors):
    rnd = random.Random(seed)
    seq = 0
    while not stop.is_set():
        seq += 1
        key = "%s-%d" % (tag, seq)
        recs = make_request(rnd, key)
        with book.lock:
            book.bodies[key] = recs
            book.open.add(key)
        try:
            r = raw_request(port, "POST", "/v1/topics/crash/records", {"records": recs},
                            headers={"Idempotency-Key": key}, timeout=30)
        except Exception:  # noqa: BLE001 - killed under us; settled after the restart
            return
        if r.status != 200:
            if not stop.is_set():
                errors.append("publish %s answered %d: %r" % (key, r.status, r.body[:200]))
            return
        with book.lock:
            book.acked[key] = offsets(r.json())
            book.open.discard(key)


def verify(srv, book, errors):
    stored = all_values(srv, "crash", PARTS)
    where = {}
    for p, recs in stored.items():
        for off, v in recs:
            if v in where:
                errors.append("record %s stored twice: %r and %r" % (v, where[v], (p, off)))
            where[v] = (p, off)
    for key, offs in book.acked.items():
        for i, po in enumerate(offs):
            v = "%s/%d" % (key, i)
            if where.get(v) != tuple(po):
                errors.append("acknowledged %s at %r, stored at %r" % (v, po, where.get(v)))
    eq(len(where), sum(len(book.bodies[k]) for k in book.acked), "records stored")


def test_kill9_rounds_never_store_twice_nor_lose(ctx):
    seed = seed_from_env()
    note("seed %d" % seed)
    rnd = random.Random(seed)
    rounds = int(os.environ.get("PULSE_IDEM_ROUNDS", "12"))
    srv = ctx.new_server()
    srv.start()
    srv.create_topic("crash", partitions=PARTS)
    book = Book()
    errors = []
    for rno in range(rounds):
        at_failpoint = rno % 4 == 3
        if at_failpoint:
            srv.stop()
            srv.env = {"PULSE_FAILPOINT": "publish_idem_after_partition"}
            srv.start()
        stop = threading.Event()
        th = Threads()
        for t in range(3):
            th.start(client, srv.port, rnd.randrange(1 << 30), "r%d-t%d" % (rno, t), stop, book, errors)
        time.sleep(rnd.uniform(0.05, 0.5))
        stop.set()
        srv.kill()
        check(th.join(60), "clients did not finish")
        srv.env = {}
        srv.start()
        # Every publish not answered is retried until answered; some
        # answered ones are retried too and must replay.
        for key in sorted(book.open):
            settle(srv, book, key, errors, "retry")
        for key in rnd.sample(sorted(book.acked), min(5, len(book.acked))):
            settle(srv, book, key, errors, "replay")
        if errors:
            break
    verify(srv, book, errors)
    if errors:
        fail("seed %d: %d problems:\n%s" % (seed, len(errors), "\n".join(errors[:20])))
    note("%d rounds, %d publishes acknowledged, %d retried after a kill (%d of them stored before it)"
         % (rounds, len(book.acked), book.retried, book.replayed))
    check(book.retried > 0, "no publish was cut by a kill: the rounds tested nothing")
    srv.stop()


if __name__ == "__main__":
    sys.exit(main(globals()))
