# SPDX-License-Identifier: MIT
"""A campaign of power cuts against the whole broker (issue 15, item 3).

Each round mounts the power-loss file system (tests/powerloss/plfs) over a
backing directory, starts the real pulsed with its data directory on the
mount, checks everything the earlier rounds were promised, runs a concurrent
workload for a random short time, then SIGKILLs pulsed and cuts the power
(SIGUSR1 to plfs: every write and directory change not made durable is
dropped, with a torn prefix of unsynced pages kept, chosen from the round's
seed).  The next round remounts and restarts on what the cut left; a share
of rounds (--start-cuts) first cuts the power while pulsed starts, so that
recovery itself is interrupted.

The workload, all of it over HTTP:
  - publishers on a plain 3-partition topic, a compacted topic (a small set
    of keys, so compaction removes superseded records) and a retention topic
    (small segments, a byte and a time limit, so retention trims); keyed and
    unkeyed records, explicit partitions or not;
  - cursor commits (single PUTs and multi-cursor POSTs) that only move
    forward;
  - topic creates and deletes of a small pool of names (names are reused,
    so a create after a delete crosses cuts too), with a few records each.
pulsed runs with small segments, a short retention and compaction interval
and frequent checkpoints, so rotation, retention, compaction and snapshots
all happen during rounds.

After each restart the campaign checks:
  - pulsed starts (a refusal is a failure; its stderr is printed);
  - every acknowledged record is at its acknowledged offset with its bytes
    (key and value), except records below the log start of the retention
    topic (retention removes whole segments) and records of the compacted
    topic whose key has a later record in the log;
  - no fetch reports damaged or missing offsets, no record appears twice;
  - each partition's high watermark is above every offset ever acknowledged
    on it, and every new acknowledgement gets an offset nobody got before
    (no offset is handed out twice);
  - every acknowledged cursor commit holds (the stored cursor is at least
    the acknowledged value and at most the highest value ever sent);
  - every acknowledged create and delete holds; a create or delete the cut
    interrupted may have happened or not, and what the restart shows is
    then taken as the truth.
Records a fetch served after a restart are durable (recovery syncs what it
keeps), so they join the acknowledged ones for the later rounds.

Rounds are grouped into lives of --rounds-per-life rounds that share one
data directory; each life starts from an empty one.  Everything random
(workload, cut moment, torn pages) comes from --seed; thread scheduling
does not, so a seed reproduces the same choices but not the same
interleaving.  A failure prints the seed and round, keeps the life's
directory (backing store, pulsed's stderr of every start) and the campaign
exits 1.

Without plfs (--fs plain) the data directory is a plain directory and the
"cut" drops nothing: kill -9 only.

Exit codes: 0 pass, 1 fail, 77 skip (plfs not built, no /dev/fuse, not
root), 2 usage.
"""

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import plfstest  # noqa: E402
import pulsetest  # noqa: E402
from pulsetest import (SKIP, Failure, Server, b64, json_key_bytes,  # noqa: E402
                       json_value_bytes, quote_path, raw_request)

REQ_TIMEOUT = 20

# The stable topics: name -> (create body, kind).  kind decides which
# removals the contract allows: "ret" (retention trims whole segments
# below the log start), "compact" (a keyed record may go once its key has a
# later record), anything else none.
BASE_TOPICS = {
    "plain": ({"partitions": 3, "segment_bytes": 2048, "retention_ms": 0}, "plain"),
    "compacted": ({"partitions": 2, "cleanup": "compact", "segment_bytes": 1024,
                   "retention_ms": 0}, "compact"),
    "ret": ({"partitions": 2, "segment_bytes": 1024, "retention_bytes": 6144,
             "retention_ms": 1500}, "ret"),
}
CHURN_NAMES = ["churn%d" % i for i in range(5)]
CONSUMERS = ["c0", "c1", "c2"]
COMPACT_KEYS = ["k%d" % i for i in range(6)]

PULSED_ARGS = [
    "-o", "storage.retention-interval=200ms",
    "-o", "storage.compaction-interval=250ms",
    "-o", "storage.compaction-min-gain-ratio=0",
    "-o", "storage.index-interval-bytes=256",
    "-o", "storage.segment-max-bytes=4KiB",
    "-o", "topic-defaults.segment-bytes=2KiB",
]


class RoundFailure(Exception):
    """What a round found broken; the message says what was expected."""


def derive(seed, *parts):
    """A 31-bit seed derived from seed and parts, stable across Python runs."""
    h = seed & 0xFFFFFFFF
    for p in parts:
        h = (h * 1000003 + 0x9E3779B1 + p) & 0xFFFFFFFFFFFF
        h ^= h >> 17
    return h & 0x7FFFFFFF


# --------------------------------------------------------------------------
# The file system under pulsed: plfs, or a plain directory

def plfs_unusable():
    """Why plfs cannot be used here, or None."""
    return plfstest.skip_reason()


class PlainFs:
    """A plain directory behind the plfs interface: a cut drops nothing
    (what kill -9 leaves is what the next round gets)."""

    name = "plain"

    def __init__(self, backing, sabotage=False):
        self.backing = backing
        self.sabotage = sabotage

    @property
    def root(self):
        return self.backing

    def mount(self, seed):
        del seed

    def cut(self):
        if self.sabotage:
            self.lose_acknowledged()

    def stop(self):
        pass

    def abort(self):
        pass

    def lose_acknowledged(self):
        """The self-check's sabotage: a "cut" that loses acknowledged data
        (half of the newest non-empty segment of topic plain), which the
        checks must catch."""
        base = os.path.join(self.backing, "data", "topics", "plain")
        for p in sorted(os.listdir(base)):
            if not p.isdigit():
                continue
            logs = sorted(f for f in os.listdir(os.path.join(base, p)) if f.endswith(".log"))
            for name in reversed(logs):
                path = os.path.join(base, p, name)
                size = os.path.getsize(path)
                if size > 0:
                    os.truncate(path, size // 2)
                    return


class Plfs:
    """tests/powerloss/plfs over <life>/backing at <life>/mnt, driven by the
    self-tests' plfstest.Case (which also checks plfs's exit status and
    sanitizer reports at each cut and stop). What plfs says at each cut
    and stop is appended to <life>/plfs.stderr."""

    name = "plfs"

    def __init__(self, life_dir, torn=True):
        self.case = plfstest.Case(life_dir)
        self.backing = self.case.backing
        self.torn = torn
        self.log = os.path.join(life_dir, "plfs.stderr")

    @property
    def root(self):
        return self.case.mnt

    @property
    def mounted(self):
        return self.case.proc is not None

    def mount(self, seed):
        try:
            self.case.mount(seed=seed, torn=self.torn)
        except (AssertionError, plfstest.Skip) as e:
            self.abort()
            raise RoundFailure("plfs did not mount: %s" % e)

    def _finish(self, fn, what):
        try:
            text = fn()
        except AssertionError as e:
            self.abort()
            raise RoundFailure("plfs after the %s: %s" % (what, e))
        with open(self.log, "a") as f:
            f.write(text)

    def cut(self):
        self._finish(self.case.cut, "power cut")

    def stop(self):
        self._finish(self.case.stop, "clean stop")

    def abort(self):
        """Kills plfs and unmounts (after a failure: no cut, no clean stop)."""
        if self.case.err:
            with open(self.log, "ab") as f:
                f.write(self.case.err)
        self.case.cleanup()
        self.case.proc = None


# --------------------------------------------------------------------------
# What the broker promised

class Ledger:
    """Everything acknowledged so far in one life, shared by the workload
    threads (under lock) and read by the checks between rounds."""

    def __init__(self):
        self.lock = threading.Lock()
        self.topics = {}     # name -> {"state", "partitions", "kind"}
        self.records = {}    # (topic, p) -> {offset: (rid, key, value)}
        self.cursors = {}    # (consumer, topic, p) -> [acked or None, highest sent]
        self.floor = {}      # (topic, p) -> highest offset known when the round began
        # Retention changes of topic "ret": the values sent, in order, and
        # how many of them (a prefix) are known to hold: the stored value
        # is the last acknowledged one or one sent after it.
        self.patches = [BASE_TOPICS["ret"][0]["retention_bytes"]]
        self.patches_held = 1
        self.errors = []     # failures seen by the workload threads
        self.acks = 0
        # What the rounds exercised, for the summary line.
        self.stats = {"creates": 0, "deletes": 0, "commits": 0, "retention_gone": 0,
                      "compaction_gone": 0, "served_unacked": 0, "retention_changes": 0,
                      "cuts_in_start": 0}

    def max_offset(self, topic, p):
        offs = self.records.get((topic, p))
        return max(offs) if offs else -1

    def ack_record(self, topic, p, offset, rid, key, value):
        """Called with the lock held."""
        offs = self.records.setdefault((topic, p), {})
        old = offs.get(offset)
        if old is not None and old[0] != rid:
            self.errors.append("offset %s/%d/%d handed out twice: to %s and to %s"
                               % (topic, p, offset, old[0], rid))
            return
        if old is None and offset <= self.floor.get((topic, p), -1):
            # At or below an offset known before the cut: the log end went
            # back, so offsets are being handed out a second time.
            self.errors.append("offset %s/%d/%d acknowledged for %s, at or below %d, the highest "
                               "offset known before the last cut" % (topic, p, offset, rid,
                                                                     self.floor[(topic, p)]))
        offs[offset] = (rid, key, value)
        self.acks += 1

    def set_floors(self):
        """At the start of a round: every offset known so far is taken."""
        self.floor = {k: max(v) for k, v in self.records.items() if v}

    def drop_topic(self, topic):
        for k in [k for k in self.records if k[0] == topic]:
            del self.records[k]
        for k in [k for k in self.floor if k[0] == topic]:
            del self.floor[k]
        for k in [k for k in self.cursors if k[1] == topic]:
            del self.cursors[k]


# --------------------------------------------------------------------------
# The workload

class Workload:
    """The client threads of one round; stop() ends them (the server is
    killed right after, so whatever is in flight then is unacknowledged)."""

    def __init__(self, port, ledger, rnd_seed, round_no):
        self.port = port
        self.ledger = ledger
        self.seed = rnd_seed
        self.round_no = round_no
        self.stopping = threading.Event()
        self.threads = []

    def start(self):
        jobs = [(self.publisher, i) for i in range(3)] + [(self.committer, 10), (self.churner, 20)]
        for fn, tid in jobs:
            t = threading.Thread(target=self._run, args=(fn, tid), daemon=True)
            t.start()
            self.threads.append(t)

    def stop(self):
        self.stopping.set()

    def join(self):
        for t in self.threads:
            t.join(timeout=REQ_TIMEOUT + 10)
            if t.is_alive():
                self.ledger.errors.append("a workload thread did not finish")

    def _run(self, fn, tid):
        try:
            fn(random.Random(derive(self.seed, tid)), tid)
        except Exception:  # noqa: BLE001 - a bug in the campaign itself
            with self.ledger.lock:
                self.ledger.errors.append("workload thread %d crashed:\n%s"
                                          % (tid, traceback.format_exc()))

    def request(self, method, path, body=None):
        """(status, decoded JSON or None), or None when the server went away
        (or any transport error once the round is stopping)."""
        try:
            r = raw_request(self.port, method, path, body, timeout=REQ_TIMEOUT)
        except Exception as e:  # noqa: BLE001 - killed under us
            if self.stopping.is_set():
                return None
            raise RoundFailure("%s %s: %s" % (method, path, e))
        doc = None
        if r.body:
            try:
                doc = json.loads(r.body.decode("utf-8"))
            except ValueError:
                doc = None
        return r.status, doc, r.body

    def unexpected(self, what, res):
        if res is None or self.stopping.is_set() or res[0] == 503:
            return
        with self.ledger.lock:
            self.ledger.errors.append("round %d: %s answered %d: %r"
                                      % (self.round_no, what, res[0], res[2][:300]))

    # -- publishers ---------------------------------------------------------

    def make_records(self, rnd, tid, seq, topic, kind, partitions):
        recs, meta = [], []
        for i in range(rnd.randint(1, 4)):
            rid = "r%d-t%d-s%d-i%d" % (self.round_no, tid, seq, i)
            value = (rid + "|").encode() + bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 160)))
            rec = {"value_base64": b64(value)}
            key = None
            if kind == "compact" or rnd.random() < 0.5:
                key = rnd.choice(COMPACT_KEYS) if kind == "compact" else "key-%d" % rnd.randrange(40)
                rec["key"] = key
            if rnd.random() < 0.3:
                rec["partition"] = rnd.randrange(partitions)
            recs.append(rec)
            meta.append((rid, key.encode() if key is not None else None, value))
        return recs, meta

    def publish(self, rnd, tid, seq, topic):
        with self.ledger.lock:
            t = self.ledger.topics.get(topic)
            if t is None or t["state"] != "exists":
                return
            kind, partitions = t["kind"], t["partitions"]
        recs, meta = self.make_records(rnd, tid, seq, topic, kind, partitions)
        res = self.request("POST", "/v1/topics/%s/records" % quote_path(topic), {"records": recs})
        if res is None or res[0] != 200:
            self.unexpected("publish to %s" % topic, res)
            return
        offs = (res[1] or {}).get("offsets")
        if not isinstance(offs, list) or len(offs) != len(recs):
            with self.ledger.lock:
                self.ledger.errors.append("publish to %s: bad answer %r" % (topic, res[2][:300]))
            return
        with self.ledger.lock:
            for (rid, key, value), o in zip(meta, offs):
                self.ledger.ack_record(topic, o["partition"], o["offset"], rid, key, value)

    def publisher(self, rnd, tid):
        seq = 0
        while not self.stopping.is_set():
            seq += 1
            self.publish(rnd, tid, seq, rnd.choice(["plain", "plain", "compacted", "ret"]))

    # -- cursor commits -----------------------------------------------------

    def cursor_targets(self, rnd):
        """[(consumer, topic, p, offset)] moving forward only; the offset is
        one past an acknowledged record, so within the high watermark."""
        out = []
        with self.ledger.lock:
            consumer = rnd.choice(CONSUMERS)
            for p in rnd.sample(range(3), rnd.randint(1, 3)):
                top = self.ledger.max_offset("plain", p) + 1
                cur = self.ledger.cursors.setdefault((consumer, "plain", p), [None, -1])
                if top > cur[1]:
                    off = rnd.randint(cur[1] + 1, top)
                    cur[1] = off
                    out.append((consumer, "plain", p, off))
        return out

    def committer(self, rnd, tid):
        del tid
        while not self.stopping.is_set():
            targets = self.cursor_targets(rnd)
            if not targets:
                time.sleep(0.01)
                continue
            consumer = targets[0][0]
            if len(targets) == 1 and rnd.random() < 0.5:
                _, topic, p, off = targets[0]
                res = self.request("PUT", "/v1/consumers/%s/cursors/%s/%d" % (consumer, topic, p),
                                   {"offset": off})
            else:
                res = self.request("POST", "/v1/consumers/%s/cursors" % consumer,
                                   {"cursors": [{"topic": t, "partition": p, "offset": o}
                                                for _, t, p, o in targets]})
            if res is None or res[0] != 200:
                self.unexpected("cursor commit %r" % targets, res)
                continue
            with self.ledger.lock:
                self.ledger.stats["commits"] += 1
                for c, t, p, o in targets:
                    cur = self.ledger.cursors[(c, t, p)]
                    if cur[0] is None or o > cur[0]:
                        cur[0] = o
            time.sleep(rnd.random() * 0.02)

    # -- topic creates and deletes -------------------------------------------

    def churn_create(self, rnd, name):
        parts = rnd.randint(1, 2)
        body = {"name": name, "partitions": parts, "segment_bytes": 1024, "retention_ms": 0}
        with self.ledger.lock:
            self.ledger.topics[name] = {"state": "creating", "partitions": parts, "kind": "plain"}
        res = self.request("POST", "/v1/topics", body)
        if res is not None and res[0] == 201:
            with self.ledger.lock:
                self.ledger.topics[name]["state"] = "exists"
                self.ledger.stats["creates"] += 1
        else:
            self.unexpected("create %s" % name, res)

    def churn_delete(self, name):
        with self.ledger.lock:
            self.ledger.topics[name]["state"] = "deleting"
        res = self.request("DELETE", "/v1/topics/%s" % quote_path(name))
        if res is not None and res[0] == 204:
            with self.ledger.lock:
                self.ledger.topics[name]["state"] = "gone"
                self.ledger.stats["deletes"] += 1
                self.ledger.drop_topic(name)
        else:
            self.unexpected("delete %s" % name, res)

    def change_retention(self, rnd):
        value = rnd.choice([4096, 6144, 8192, 12288])
        with self.ledger.lock:
            self.ledger.patches.append(value)
            n = len(self.ledger.patches)
        res = self.request("PATCH", "/v1/topics/ret", {"retention_bytes": value})
        if res is None or res[0] != 200:
            self.unexpected("retention change of ret", res)
            return
        with self.ledger.lock:
            self.ledger.patches_held = max(self.ledger.patches_held, n)
            self.ledger.stats["retention_changes"] += 1

    def churner(self, rnd, tid):
        seq = 0
        while not self.stopping.is_set():
            seq += 1
            if rnd.random() < 0.1:
                self.change_retention(rnd)
                continue
            name = rnd.choice(CHURN_NAMES)
            with self.ledger.lock:
                state = self.ledger.topics.get(name, {"state": "gone"})["state"]
            if state == "gone":
                self.churn_create(rnd, name)
            elif state == "exists":
                if rnd.random() < 0.35:
                    self.churn_delete(name)
                else:
                    self.publish(rnd, tid, seq, name)
            time.sleep(rnd.random() * 0.03)


# --------------------------------------------------------------------------
# The checks after a restart

def get_json(srv, path, ok=(200,)):
    r = srv.req("GET", path, timeout=REQ_TIMEOUT)
    if r.status not in ok:
        raise RoundFailure("GET %s answered %d: %r" % (path, r.status, r.body[:300]))
    return r.status, (r.json() if r.status == 200 else None)


def fetch_partition(srv, topic, p):
    """Every record from the log start: ({offset: (key, value)}, lso, hw,
    [skipped ranges])."""
    got, skipped = {}, []
    offset = None
    while True:
        params = "?max_records=10000" + ("&offset=%d" % offset if offset is not None else "")
        _, doc = get_json(srv, "/v1/topics/%s/partitions/%d/records%s" % (quote_path(topic), p, params))
        for rec in doc["records"]:
            if rec["offset"] in got:
                raise RoundFailure("%s/%d: offset %d served twice" % (topic, p, rec["offset"]))
            got[rec["offset"]] = (json_key_bytes(rec), json_value_bytes(rec))
        skipped.extend(doc.get("skipped", []))
        if doc["next_offset"] >= doc["high_watermark"]:
            return got, doc["log_start_offset"], doc["high_watermark"], skipped
        if offset is not None and doc["next_offset"] <= offset:
            raise RoundFailure("%s/%d: fetch at %d does not move forward: %r" % (topic, p, offset, doc))
        offset = doc["next_offset"]


def rid_of(value):
    if value is None or b"|" not in value:
        return None
    return value.split(b"|", 1)[0].decode("ascii", "replace")


def check_partition(srv, ledger, topic, p, kind):
    got, lso, hw, skipped = fetch_partition(srv, topic, p)
    where = "%s/%d" % (topic, p)
    if skipped:
        raise RoundFailure("%s: a fetch reports damaged or missing offsets %r (log start %d, HW %d)"
                           % (where, skipped, lso, hw))
    acked = ledger.records.get((topic, p), {})
    top = max(acked) if acked else -1
    if hw <= top:
        raise RoundFailure("%s: high watermark %d is not above the acknowledged offset %d: "
                           "the log end went back, offsets would be handed out twice" % (where, hw, top))
    latest_key = {}
    for off, (key, _) in got.items():
        if key is not None and off > latest_key.get(key, -1):
            latest_key[key] = off
    for off, (rid, key, value) in sorted(acked.items()):  # a copy: entries may go
        if off in got:
            if got[off] != (key, value):
                raise RoundFailure("%s: offset %d holds %r/%r, but %s was acknowledged there (%r/%r)"
                                   % (where, off, got[off][0], got[off][1][:60] if got[off][1] else None,
                                      rid, key, value[:60]))
            continue
        if kind == "ret" and off < lso:
            ledger.stats["retention_gone"] += 1
            del acked[off]
            continue
        if kind == "compact" and key is not None and latest_key.get(key, -1) > off:
            ledger.stats["compaction_gone"] += 1
            del acked[off]
            continue
        raise RoundFailure("%s: acknowledged record %s at offset %d is missing (log start %d, HW %d, "
                           "%d records served)" % (where, rid, off, lso, hw, len(got)))
    seen = {}
    for off, (key, value) in sorted(got.items()):
        rid = rid_of(value)
        if rid is None:
            raise RoundFailure("%s: offset %d holds a value nobody published: %r" % (where, off, value[:80]))
        if rid in seen:
            raise RoundFailure("%s: record %s is stored twice, at %d and %d" % (where, rid, seen[rid], off))
        seen[rid] = off
        # Served after a restart: durable, so it holds from now on like an
        # acknowledged record.
        if off not in acked:
            ledger.stats["served_unacked"] += 1
        ledger.records.setdefault((topic, p), {})[off] = (rid, key, value)


def check_topics(srv, ledger):
    _, doc = get_json(srv, "/v1/topics")
    present = {t["name"]: t for t in doc["topics"]}
    for name in sorted(set(present) - set(ledger.topics)):
        raise RoundFailure("topic %s exists, but nobody created it" % name)
    for name, t in sorted(ledger.topics.items()):
        there = name in present
        if t["state"] == "exists" and not there:
            raise RoundFailure("topic %s: its create was acknowledged, but it is gone" % name)
        if t["state"] == "gone" and there:
            raise RoundFailure("topic %s: its delete was acknowledged, but it is back" % name)
        if there and present[name]["partitions"] != t["partitions"]:
            raise RoundFailure("topic %s has %d partitions, created with %d"
                               % (name, present[name]["partitions"], t["partitions"]))
        # An interrupted create or delete: what the restart shows is the truth.
        if t["state"] in ("creating", "deleting"):
            t["state"] = "exists" if there else "gone"
            if not there:
                ledger.drop_topic(name)
    if "ret" in present:
        got = present["ret"]["retention_bytes"]
        allowed = ledger.patches[ledger.patches_held - 1:]
        if got not in allowed:
            raise RoundFailure("topic ret: retention_bytes is %r; the last acknowledged change set %d "
                               "(values sent since: %r)" % (got, allowed[0], allowed[1:]))
        ledger.patches = [got]
        ledger.patches_held = 1
    return present


def check_cursors(srv, ledger):
    for (consumer, topic, p), (acked, sent) in sorted(ledger.cursors.items()):
        status, doc = get_json(srv, "/v1/consumers/%s/cursors/%s/%d" % (consumer, topic, p), ok=(200, 404))
        if status == 404:
            if acked is not None:
                raise RoundFailure("cursor %s %s/%d: commit of %d was acknowledged, now there is none"
                                   % (consumer, topic, p, acked))
            continue
        off = doc["offset"]
        if acked is not None and off < acked:
            raise RoundFailure("cursor %s %s/%d is %d, below the acknowledged %d"
                               % (consumer, topic, p, off, acked))
        if off > sent:
            raise RoundFailure("cursor %s %s/%d is %d, above anything committed (%d)"
                               % (consumer, topic, p, off, sent))
        ledger.cursors[(consumer, topic, p)] = [off, sent]


def check_all(srv, ledger):
    check_topics(srv, ledger)
    for name, t in sorted(ledger.topics.items()):
        if t["state"] != "exists":
            continue
        for p in range(t["partitions"]):
            check_partition(srv, ledger, name, p, t["kind"])
    check_cursors(srv, ledger)


# --------------------------------------------------------------------------
# Rounds and lives

class Campaign:
    def __init__(self, opts):
        self.opts = opts
        self.failures = []
        self.rounds_done = 0
        self.acks = 0
        self.stats = {}

    def log(self, msg):
        if self.opts.verbose:
            print(msg, flush=True)

    def new_fs(self, life_dir):
        if self.opts.fs == "plfs":
            return Plfs(life_dir, torn=not self.opts.no_torn)
        backing = os.path.join(life_dir, "backing")
        os.makedirs(backing)
        return PlainFs(backing, sabotage=self.opts.sabotage)

    def start_server(self, srv, fs, round_no):
        srv.data_dir = os.path.join(fs.root, "data")
        try:
            srv.start()
        except Failure as e:
            raise RoundFailure("round %d: pulsed did not start after the cut: %s" % (round_no, e))

    def create_base_topics(self, srv, ledger):
        for name, (body, kind) in BASE_TOPICS.items():
            b = dict(body)
            b["name"] = name
            r = srv.req("POST", "/v1/topics", b, timeout=REQ_TIMEOUT)
            if r.status != 201:
                raise RoundFailure("create %s answered %d: %r" % (name, r.status, r.body[:300]))
            ledger.topics[name] = {"state": "exists", "partitions": body["partitions"], "kind": kind}

    def cut_during_start(self, srv, fs, rnd, rs, round_no):
        """A cut while pulsed starts: recovery (torn tails cut, indexes
        rebuilt, merges finished, interrupted creates and deletes settled)
        is killed part way, and must leave a directory the next start
        recovers just the same. Then the power comes back."""
        delay = rnd.uniform(0.0, 0.25)
        srv.data_dir = os.path.join(fs.root, "data")
        if srv.port is None:
            srv.port = pulsetest.free_port()
        with open(os.path.join(srv.tmp, "pulsed.cut-in-start.stderr"), "ab") as err:
            proc = subprocess.Popen(srv.command(), stdout=subprocess.DEVNULL, stderr=err,
                                    stdin=subprocess.DEVNULL)
        time.sleep(delay)
        proc.kill()
        proc.wait()
        fs.cut()
        fs.mount(derive(rs, 4))
        self.log("round %d: cut %.3f s into a start" % (round_no, delay))

    def one_round(self, srv, fs, ledger, round_no, first):
        rs = derive(self.opts.seed, round_no)
        rnd = random.Random(rs)
        fs.mount(derive(rs, 1))
        if not first and rnd.random() < self.opts.start_cuts:
            self.cut_during_start(srv, fs, rnd, rs, round_no)
            ledger.stats["cuts_in_start"] += 1
        self.start_server(srv, fs, round_no)
        if first:
            self.create_base_topics(srv, ledger)
        else:
            check_all(srv, ledger)
        ledger.set_floors()
        run_for = rnd.uniform(self.opts.min_run, self.opts.max_run)
        wl = Workload(srv.port, ledger, derive(rs, 2), round_no)
        wl.start()
        time.sleep(run_for)
        wl.stop()
        srv.kill()
        fs.cut()
        wl.join()
        if ledger.errors:
            raise RoundFailure("round %d: %s" % (round_no, "\n".join(ledger.errors[:10])))
        self.log("round %d: ran %.2f s, %d acknowledgements so far in this life"
                 % (round_no, run_for, ledger.acks))

    def final_check(self, srv, fs, ledger, round_no):
        """After a life's last cut: remount, restart, check, stop cleanly."""
        fs.mount(derive(self.opts.seed, round_no, 3))
        self.start_server(srv, fs, round_no)
        check_all(srv, ledger)
        try:
            srv.stop()
        except Failure as e:
            raise RoundFailure("round %d: clean stop: %s" % (round_no, e))
        fs.stop()

    def life(self, first_round, last_round):
        life_dir = tempfile.mkdtemp(prefix="pulse-powerloss-")
        fs = self.new_fs(life_dir)
        srv = Server(life_dir, args=PULSED_ARGS)
        ledger = Ledger()
        round_no = first_round
        try:
            for round_no in range(first_round, last_round):
                self.one_round(srv, fs, ledger, round_no, round_no == first_round)
                self.rounds_done += 1
            self.final_check(srv, fs, ledger, round_no)
        except (RoundFailure, Failure) as e:
            srv.cleanup()
            fs.abort()  # the mount must go before the tree is kept
            self.fail(round_no, life_dir, e)
            return False
        except BaseException:
            srv.cleanup()
            fs.abort()
            raise
        self.acks += ledger.acks
        for k, v in ledger.stats.items():
            self.stats[k] = self.stats.get(k, 0) + v
        shutil.rmtree(life_dir, ignore_errors=True)
        return True

    def fail(self, round_no, life_dir, e):
        print("FAIL seed=%d round=%d: %s" % (self.opts.seed, round_no, e), flush=True)
        print("  reproduce: %s --seed %d --round %d --fs %s"
              % (sys.argv[0], self.opts.seed, round_no, self.opts.fs), flush=True)
        print("  kept for forensics: %s (backing/ is the data after the cuts, "
              "pulsed.N.stderr each start's log)" % life_dir, flush=True)
        for name in sorted(os.listdir(life_dir)):
            if name.endswith(".stderr"):
                path = os.path.join(life_dir, name)
                with open(path, "rb") as f:
                    tail = f.read()[-1500:].decode("utf-8", "replace")
                if tail.strip():
                    print("  --- %s (tail) ---\n%s" % (name, tail))
        self.failures.append((round_no, str(e).splitlines()[0]))

    def run(self):
        o = self.opts
        per = o.rounds_per_life
        if o.round is not None:
            first = o.round - o.round % per
            lives = [(first, o.round + 1)]
        else:
            lives = [(s, min(s + per, o.rounds)) for s in range(0, o.rounds, per)]
        t0 = time.monotonic()
        for first, last in lives:
            ok = self.life(first, last)
            if not o.verbose and len(lives) > 1:
                print("rounds %d-%d: %s (%.0f s so far)" % (first, last - 1, "ok" if ok else "FAILED",
                                                            time.monotonic() - t0), flush=True)
            if self.failures and not o.keep_going:
                break
            if o.time_limit and time.monotonic() - t0 > o.time_limit:
                print("time limit of %d s reached after %d rounds" % (o.time_limit, self.rounds_done))
                break
        took = time.monotonic() - t0
        print("campaign: fs=%s seed=%d rounds=%d acknowledgements=%d failures=%d time=%.0fs"
              % (o.fs, o.seed, self.rounds_done, self.acks, len(self.failures), took), flush=True)
        print("  exercised (passing lives): %s" % ", ".join("%s=%d" % kv for kv in sorted(self.stats.items())))
        for round_no, msg in self.failures:
            print("  failed: seed=%d round=%d: %s" % (o.seed, round_no, msg))
        return 1 if self.failures else 0


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Power cuts against pulsed (see the module docstring).")
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("PULSE_POWERLOSS_ROUNDS", "40")))
    ap.add_argument("--seed", type=int, default=None,
                    help="default: $PULSE_TEST_SEED, else 1 (make check is deterministic)")
    ap.add_argument("--round", type=int, default=None,
                    help="run only the life holding this round, up to it (reproduces a failure)")
    ap.add_argument("--rounds-per-life", type=int, default=8)
    ap.add_argument("--fs", choices=("plfs", "plain"), default="plfs")
    ap.add_argument("--no-torn", action="store_true", help="cuts keep no torn unsynced pages")
    ap.add_argument("--min-run", type=float, default=0.15, help="shortest workload before a cut (s)")
    ap.add_argument("--max-run", type=float, default=0.9, help="longest workload before a cut (s)")
    ap.add_argument("--start-cuts", type=float, default=0.2,
                    help="share of rounds that first cut the power while pulsed starts")
    ap.add_argument("--keep-going", action="store_true", help="after a failing life, go on with the next")
    ap.add_argument("--time-limit", type=int, default=0, help="stop after the life that passes N s")
    ap.add_argument("--no-self-check", action="store_true",
                    help="skip the self-check (a sabotaged run that must fail) before the campaign")
    ap.add_argument("--sabotage", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("-v", "--verbose", action="store_true")
    opts = ap.parse_args(argv)
    if opts.seed is None:
        opts.seed = pulsetest.seed_from_env(1)
    if opts.rounds < 1 or opts.rounds_per_life < 1:
        ap.error("--rounds and --rounds-per-life must be at least 1")
    return opts


def on_sigterm(signum, frame):
    """SIGTERM (a test harness's timeout) unwinds like ^C, so that the
    running life stops its pulsed and unmounts plfs on the way out."""
    del signum, frame
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: let the cleanup finish
    raise KeyboardInterrupt("SIGTERM")


def main(argv):
    signal.signal(signal.SIGTERM, on_sigterm)
    opts = parse_args(argv)
    if not os.access(pulsetest.pulsed_path(), os.X_OK):
        print("SKIP: %s is not built" % pulsetest.pulsed_path())
        return SKIP
    if pulsetest.BACKEND != "local":
        print("SKIP: power cuts need the local backend")
        return SKIP
    if opts.fs == "plfs":
        why = plfs_unusable()
        if why:
            print("SKIP: %s" % why)
            return SKIP
    if not opts.no_self_check and opts.round is None and not opts.sabotage:
        why = self_check(opts.seed)
        if why:
            print("FAIL self-check: %s" % why)
            return 1
    print("campaign: fs=%s seed=%d rounds=%d (reproduce with --seed %d)"
          % (opts.fs, opts.seed, opts.rounds, opts.seed), flush=True)
    return Campaign(opts).run()


def self_check(seed):
    """The checks must be able to fail: two rounds on a plain directory
    whose "cut" throws away half of an acknowledged segment must report
    the loss.  Returns why the self-check failed, or None."""
    opts = parse_args(["--fs", "plain", "--sabotage", "--rounds", "2", "--rounds-per-life", "2",
                       "--seed", str(seed), "--min-run", "0.3", "--max-run", "0.4"])
    camp = Campaign(opts)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = camp.run()
    text = out.getvalue()
    if rc == 0 or not camp.failures:
        return "a campaign that lost acknowledged records passed:\n" + text
    msg = camp.failures[0][1]
    if "plain/" not in msg and "did not start" not in msg:
        return "the sabotaged campaign failed for another reason: %s" % msg
    for line in text.splitlines():
        if line.startswith("  kept for forensics: "):
            shutil.rmtree(line.split(": ", 1)[1].split(" ")[0], ignore_errors=True)
    print("self-check: a cut that loses acknowledged data is caught (%s)" % msg, flush=True)
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
