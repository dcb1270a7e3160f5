# SPDX-License-Identifier: MIT
"""Consumer-group helpers shared by the group tests (45_groups.py,
46_group_workers.py): a member client that speaks the group routes, and a
worker thread that joins, fetches, processes and commits like an
application would, logging every record it processed.  Standard library
only; HTTP through pulsetest.raw_request."""

import threading
import time
import urllib.parse

from pulsetest import eq, expect_json, quote_path


def group_path(group, *rest):
    return "/v1/groups/" + quote_path(group) + "".join("/" + quote_path(r) for r in rest)


def join(srv, group, topics, lease_ms=None, start=None, status=201):
    body = {"topics": list(topics)}
    if lease_ms is not None:
        body["lease_ms"] = lease_ms
    if start is not None:
        body["start"] = start
    return expect_json(srv.req("POST", group_path(group, "members"), body), status, "join %s" % group)


def heartbeat(srv, group, member):
    return srv.req("POST", group_path(group, "members", member, "heartbeat"))


def fetch(srv, group, member, timeout=None, **params):
    """A group fetch; resume=<an earlier answer's "resume"> reads on from
    where that answer left off (without it: from the committed cursors)."""
    q = "&".join("%s=%s" % (k, urllib.parse.quote(str(v), safe=":,")) for k, v in params.items() if v is not None)
    return srv.req("GET", group_path(group, "members", member, "records") + ("?" + q if q else ""), timeout=timeout)


def commit(srv, group, member, generation, offsets):
    return srv.req("POST", group_path(group, "members", member, "commit"),
                   {"generation": generation, "offsets": offsets})


def owned(doc):
    return sorted((p["topic"], p["partition"]) for p in doc["partitions"])


def describe(srv, group):
    return expect_json(srv.get(group_path(group)), 200, "describe %s" % group)


def settle(srv, group, members, rounds=20):
    """Heartbeats every member in turn until every partition assigned is
    owned (no hand-over pending); returns {member: view}."""
    views = {}
    for _ in range(rounds):
        for m in members:
            views[m] = expect_json(heartbeat(srv, group, m), 200, "heartbeat")
        if all(v["pending_partitions"] == 0 for v in views.values()) and \
                len(set(v["generation"] for v in views.values())) == 1:
            return views
    raise AssertionError("the group did not settle: %r" % views)


class Log:
    """Every record processed: (worker, topic, partition, offset, value), in
    processing order, under a lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.entries = []

    def add(self, *entry):
        with self.lock:
            self.entries.append(entry)

    def positions(self):
        with self.lock:
            return [(e[1], e[2], e[3]) for e in self.entries]


class Worker:
    """A group member in a thread: fetch, process each record (optionally
    slowly), commit the answer's positions with its generation.  stop()
    leaves the group; kill() stops making calls at once (no commit, no
    leave), as a dead process would; pause_s makes the next batch take that
    long before its commit."""

    def __init__(self, srv, group, topics, log, name, lease_ms=2000, max_records=50, wait_ms=200,
                 process_s=0.0, retry_unavailable=False):
        self.srv, self.group, self.topics, self.log, self.name = srv, group, topics, log, name
        self.lease_ms, self.max_records, self.wait_ms, self.process_s = lease_ms, max_records, wait_ms, process_s
        self.retry_unavailable = retry_unavailable
        self.member = None
        self.generation = None
        self.stopping = threading.Event()
        self.dead = threading.Event()
        self.pause_s = 0.0
        self.commit_statuses = []
        self.rejoins = 0
        self.error = None
        self.thread = None

    # -- calls that survive a broker restart when retry_unavailable ---------

    def _req(self, fn):
        while True:
            try:
                r = fn()
            except OSError:
                if not self.retry_unavailable or self.stopping.is_set():
                    raise
                time.sleep(0.05)
                continue
            if r.status == 503 and self.retry_unavailable and not self.stopping.is_set():
                time.sleep(0.05)
                continue
            return r

    def join(self):
        r = self._req(lambda: self.srv.req("POST", group_path(self.group, "members"),
                                           {"topics": self.topics, "lease_ms": self.lease_ms}))
        eq(r.status, 201, "%s join: %r" % (self.name, r.body[:300]))
        self.member = r.json()["member_id"]

    def start(self):
        self.join()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self):
        try:
            while not self.stopping.is_set() and not self.dead.is_set():
                self._one_batch()
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e
        finally:
            if not self.dead.is_set() and self.member is not None:
                try:
                    self.srv.req("DELETE", group_path(self.group, "members", self.member), timeout=5)
                except OSError:
                    pass

    def _one_batch(self):
        r = self._req(lambda: fetch(self.srv, self.group, self.member, max_records=self.max_records,
                                    max_wait_ms=self.wait_ms))
        if self.dead.is_set():
            return
        if r.status == 409 and r.json()["error"]["code"] == "rejoin":
            self.rejoins += 1
            self.join()
            return
        eq(r.status, 200, "%s fetch: %r" % (self.name, r.body[:300]))
        doc = r.json()
        self.generation = doc["generation"]
        for rec in doc["records"]:
            if self.dead.is_set():
                return  # killed mid-batch: the rest is never processed or committed
            if self.process_s:
                time.sleep(self.process_s)
            self.log.add(self.name, rec["topic"], rec["partition"], rec["offset"], rec.get("value"))
        if not doc["records"]:
            return
        if self.pause_s:
            time.sleep(self.pause_s)
            self.pause_s = 0.0
        if self.dead.is_set():
            return
        c = self._req(lambda: commit(self.srv, self.group, self.member, doc["generation"], doc["positions"]))
        code = c.json().get("error", {}).get("code") if c.status != 200 else None
        self.commit_statuses.append((c.status, code))
        if code == "rejoin":
            self.rejoins += 1
            self.join()

    def stop(self, timeout=20):
        self.stopping.set()
        self.thread.join(timeout)
        if self.error:
            raise self.error

    def kill(self):
        self.dead.set()


def processed_exactly(log_positions):
    """{position: times processed}."""
    counts = {}
    for p in log_positions:
        counts[p] = counts.get(p, 0) + 1
    return counts


def wait_lag_zero(srv, group, topic, partitions, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = srv.get("/v1/consumers/%s/cursors" % quote_path(group))
        if r.status == 200:
            cur = r.json()["cursors"]
            mine = [c for c in cur if c["topic"] == topic]
            if len(mine) == partitions and all(c["lag"] == 0 for c in mine):
                return
        time.sleep(0.05)
    raise AssertionError("group %s did not catch up on %s: %r" % (group, topic, r.body[:600]))


__all__ = [n for n in dir() if not n.startswith("_")]
