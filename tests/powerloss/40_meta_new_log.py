# SPDX-License-Identifier: MIT
"""A power cut right after LevelDB started a new log file keeps the cursor
commits acknowledged into it.

LevelDB 1.23 starts a new log file when its memtable fills (4 MiB) and
writes the next batches there, fdatasynced, but makes the new file's name
durable only when the background flush of the old memtable syncs the
MANIFEST (which syncs the directory). A cut in between lost every write
acknowledged into the new log. pulsed's metadata store now fsyncs the
directory before acknowledging a write that went to a log newer than the
last one it made durable (src/meta/meta.c, sync_new_log).

The test commits cursors (256 per request, each request under a new
consumer with a long name, so that the memtable fills in a few dozen
requests) to pulsed on plfs, watches meta/ for a new log file, and SIGKILLs
pulsed and cuts the power as soon as an acknowledged commit went into it.
After a remount and restart every acknowledged consumer must have all its
cursors.

Exit codes: 0 pass, 1 fail, 77 skip (plfs not built, no /dev/fuse, not
root).
"""

import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from campaign import Plfs, RoundFailure, plfs_unusable  # noqa: E402
from pulsetest import SKIP, Failure, Server, pulsed_path  # noqa: E402

PARTITIONS = 256
PAD = "x" * 200
MAX_REQUESTS = 400


def logs(meta_dir):
    return sorted(int(n[:-4]) for n in os.listdir(meta_dir) if n.endswith(".log") and n[:-4].isdigit())


def consumer(i):
    return "c%04d-%s" % (i, PAD)


def commit_until_new_log(srv, meta_dir):
    """Commits until meta/ has a log newer than at the start; returns the
    consumers whose commits were acknowledged."""
    first = logs(meta_dir)
    body = {"cursors": [{"topic": "t", "partition": p, "offset": 0} for p in range(PARTITIONS)]}
    acked = []
    for i in range(MAX_REQUESTS):
        r = srv.req("POST", "/v1/consumers/%s/cursors" % consumer(i), body, timeout=60)
        if r.status != 200:
            raise Failure("commit %d answered %d: %r" % (i, r.status, r.body[:300]))
        acked.append(consumer(i))
        now = logs(meta_dir)
        if now and (not first or now[-1] > first[-1]):
            return acked
    raise Failure("LevelDB started no new log in %d commits" % MAX_REQUESTS)


def run(tmp):
    fs = Plfs(tmp, torn=False)
    srv = Server(tmp)
    srv.data_dir = os.path.join(fs.root, "data")
    try:
        fs.mount(1)
        srv.start()
        srv.create_topic("t", partitions=PARTITIONS)
        acked = commit_until_new_log(srv, os.path.join(srv.data_dir, "meta"))
        srv.kill()
        fs.cut()
        fs.mount(2)
        srv.start()
        for name in reversed(acked):
            r = srv.req("GET", "/v1/consumers/%s/cursors" % name)
            n = len(r.json()["cursors"]) if r.status == 200 else -1
            if n != PARTITIONS:
                raise Failure("consumer %s... (commit %d of %d, acknowledged before the cut) has %d "
                              "cursors after it, expected %d" % (name[:5], acked.index(name) + 1,
                                                                 len(acked), n, PARTITIONS))
        print("PASS %d acknowledged commits survived a cut right after LevelDB's log switch" % len(acked))
        srv.stop()
        fs.stop()
    finally:
        srv.cleanup()
        if fs.mounted:
            fs.abort()


def main():
    if not os.access(pulsed_path(), os.X_OK):
        print("SKIP: %s is not built" % pulsed_path())
        return SKIP
    why = plfs_unusable()
    if why:
        print("SKIP: %s" % why)
        return SKIP
    tmp = tempfile.mkdtemp(prefix="pulse-powerloss-")
    try:
        run(tmp)
    except (Failure, RoundFailure) as e:
        print("FAIL: %s\n  kept for forensics: %s" % (e, tmp))
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
