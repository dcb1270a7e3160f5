# SPDX-License-Identifier: MIT
"""A full disk is survivable without a restart (docs/Operations.md "When the
disk fills up").

pulsed runs with its data directory on a real 2 MiB tmpfs.  Publishing fills
it; from then on every publish is refused with 507 storage_full and a
Retry-After header (never 500, never a fenced partition), and cursor commits
and topic creation answer 507 or succeed, never 500.  The tmpfs is then grown
with mount -o remount, and publishing succeeds again in the same process.
Every acknowledged record is fetched back byte for byte at its offset, no
offset was acknowledged twice, and a restart agrees; so do a cursor commit
and a topic created after the metadata store had failed a write (LevelDB's
log is reopened after a failed write, or those would be lost).

A start after kill -9 on a disk that is still full cannot succeed (LevelDB
writes at every open): it must exit 1 naming the full file system and what
to do, and start once space is freed, with every record and cursor.

Needs root (mount); skipped otherwise."""

import os
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pulsetest  # noqa: E402

pulsetest.exit_unless_local("fills the local backend's disk")

from pulsetest import (Skip, check, eq, expect_json, fail, free_port, main, pulsed_path,  # noqa: E402
                       quote_path, uniq)

VALUE_BYTES = 3000


def mount_tmpfs(path, size):
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s" % size, "tmpfs", path],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise Skip("cannot mount a tmpfs (needs root): %s" % r.stdout.decode("utf-8", "replace").strip())


def remount(path, size):
    r = subprocess.run(["mount", "-o", "remount,size=%s" % size, path],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        fail("remount %s: %s" % (path, r.stdout.decode("utf-8", "replace")))


def umount(path):
    subprocess.run(["umount", "-l", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def value_of(i):
    head = "rec-%06d-" % i
    return head + (chr(ord("a") + i % 26) * (VALUE_BYTES - len(head)))


class Tracker:
    """Every answer seen, and every acknowledged (partition, offset)."""

    def __init__(self):
        self.acked = {}
        self.statuses = {}
        self.next = 0

    def publish(self, srv, topic):
        i = self.next
        self.next += 2
        recs = [{"value": value_of(i), "partition": 0}, {"value": value_of(i + 1), "partition": 1}]
        r = srv.req("POST", "/v1/topics/%s/records" % quote_path(topic), {"records": recs})
        self.statuses[r.status] = self.statuses.get(r.status, 0) + 1
        if r.status == 200:
            for rec, o in zip(recs, r.json()["offsets"]):
                key = (o["partition"], o["offset"])
                check(key not in self.acked, "offset %r acknowledged twice" % (key,))
                self.acked[key] = rec["value"]
            return r
        check(r.status == 507, "a publish on a full disk answered %d (want 200 or 507): %r" % (r.status, r))
        err = r.json()["error"]
        eq(err["code"], "storage_full", "507 code")
        check(r.header("Retry-After") is not None, "507 without Retry-After")
        return r


def verify(srv, topic, acked, what):
    for p in (0, 1):
        recs, doc = srv.fetch_all(topic, p)
        got = {rec["offset"]: rec["value"] for rec in recs}
        eq(len(got), len(recs), "%s: partition %d offsets are unique" % (what, p))
        for (part, off), value in acked.items():
            if part != p:
                continue
            check(off in got, "%s: acknowledged %d/%d is missing" % (what, p, off))
            check(got[off] == value, "%s: %d/%d holds another value" % (what, p, off))


def test_full_disk_answers_507_and_recovers_without_restart(ctx):
    if os.geteuid() != 0:
        raise Skip("needs root to mount a tmpfs")
    srv = ctx.new_server()
    os.makedirs(srv.data_dir)
    mount_tmpfs(srv.data_dir, "2m")
    try:
        srv.start()
        topic = uniq("full")
        srv.create_topic(topic, partitions=2, segment_bytes=65536)
        tr = Tracker()
        # Fill the disk.
        for _ in range(2000):
            if tr.publish(srv, topic).status == 507:
                break
        else:
            fail("2000 publishes never filled a 2 MiB tmpfs")
        check(len(tr.acked) > 100, "only %d records fit before the disk was full" % len(tr.acked))
        # Keep publishing on the full disk: 507 every time, never a fence.
        for _ in range(40):
            tr.publish(srv, topic)
        eq(tr.statuses.get(500, 0), 0, "500 answers")
        ready = expect_json(srv.get("/readyz"), 200, "readyz on a full disk")
        eq(ready["fenced_partitions"], [], "no partition is fenced by a full disk")
        # Fill the last bytes too, so that even small writes fail.
        fd = os.open(os.path.join(srv.data_dir, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while os.write(fd, b"\0" * 512) > 0:
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        for _ in range(5):
            tr.publish(srv, topic)
        # Metadata writes: 507 or success, never 500.
        # Small records still fit the last page of a metadata file, so
        # commit until one does not.
        consumer = uniq("reader")
        meta = {}
        for i in range(1000):
            r = srv.req("POST", "/v1/consumers/%s/cursors" % consumer,
                        {"cursors": [{"topic": topic, "partition": 0, "offset": 1}]})
            meta[r.status] = meta.get(r.status, 0) + 1
            check(r.status in (200, 507), "cursor commit on a full disk answered %d: %r" % (r.status, r))
            if r.status == 507:
                check(r.header("Retry-After") is not None, "507 without Retry-After")
                break
        for i in range(100):
            r = srv.req("POST", "/v1/topics", {"name": uniq("late"), "partitions": 1})
            meta[r.status] = meta.get(r.status, 0) + 1
            check(r.status in (201, 507), "topic create on a full disk answered %d: %r" % (r.status, r))
            if r.status == 507:
                break
        print("metadata writes on the full disk: %r" % sorted(meta.items()))

        # Space comes back: publishes succeed again, same process.
        remount(srv.data_dir, "64m")
        before = len(tr.acked)
        ok = 0
        for _ in range(60):
            if tr.publish(srv, topic).status == 200:
                ok += 1
        eq(ok, 60, "publishes after the disk was grown")
        check(len(tr.acked) == before + 120, "acknowledged records after growing")
        eq(tr.statuses.get(500, 0), 0, "500 answers")
        r = srv.req("POST", "/v1/consumers/%s/cursors" % consumer,
                    {"cursors": [{"topic": topic, "partition": 0, "offset": 2}]})
        check(r.status in (200, 204), "cursor commit after growing answered %d: %r" % (r.status, r))
        after = uniq("after")
        srv.create_topic(after, partitions=1)
        srv.publish(after, [{"value": "kept"}])

        print("acknowledged %d records; answers %r" % (len(tr.acked), sorted(tr.statuses.items())))
        verify(srv, topic, tr.acked, "after growing")
        srv.restart()
        verify(srv, topic, tr.acked, "after a restart")
        cur = expect_json(srv.get("/v1/consumers/%s/cursors" % consumer), 200, "cursors after restart")
        eq([c["offset"] for c in cur["cursors"]], [2], "committed cursor after restart")
        recs, _ = srv.fetch_all(after)
        eq([r["value"] for r in recs], ["kept"], "topic created after the disk was grown, after restart")
        srv.stop()
    finally:
        srv.cleanup()
        umount(srv.data_dir)


def fill_to_the_last_byte(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while os.write(fd, b"\0" * 4096) > 0:
            pass
    except OSError:
        pass
    try:
        while os.write(fd, b"\0") > 0:
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def test_start_on_a_still_full_disk_after_a_crash_names_the_cause(ctx):
    if os.geteuid() != 0:
        raise Skip("needs root to mount a tmpfs")
    srv = ctx.new_server()
    os.makedirs(srv.data_dir)
    mount_tmpfs(srv.data_dir, "2m")
    try:
        srv.start()
        topic = uniq("crash")
        srv.create_topic(topic, partitions=1, segment_bytes=65536)
        acked = srv.publish(topic, [{"value": value_of(i)} for i in range(20)])
        expect_json(srv.req("POST", "/v1/consumers/reader/cursors",
                            {"cursors": [{"topic": topic, "partition": 0, "offset": 7}]}), 200, "commit")
        srv.kill()
        filler = os.path.join(srv.data_dir, "filler")
        fill_to_the_last_byte(filler)
        args = [pulsed_path(), "--data-dir", srv.data_dir, "--listen", "127.0.0.1:%d" % free_port(),
                "-o", "log.level=warn"]
        p = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        text = (p.stdout + p.stderr).decode("utf-8", "replace")
        eq(p.returncode, 1, "exit status of a start on a full disk (output %r)" % text[-1500:])
        check("is full" in text and "Free space on that file system" in text and srv.data_dir in text,
              "the start names the cause and what to do: %r" % text[-1500:])
        check("input/output error" not in text, "not an I/O error: %r" % text[-1500:])
        # Room again: everything acknowledged is there, the cursor too.
        os.unlink(filler)
        srv.start()
        recs, _ = srv.fetch_all(topic)
        eq([(0, r["offset"]) for r in recs], acked, "acknowledged offsets after the full start")
        eq([r["value"] for r in recs], [value_of(i) for i in range(20)], "acknowledged values")
        cur = expect_json(srv.get("/v1/consumers/reader/cursors"), 200, "cursors")
        eq([c["offset"] for c in cur["cursors"]], [7], "committed cursor")
        srv.stop()
    finally:
        srv.cleanup()
        umount(srv.data_dir)


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
