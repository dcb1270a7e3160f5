# SPDX-License-Identifier: MIT
"""Losing or damaging the metadata store never costs event data.

Each test fills a broker (three topics: small segments, a compacted one, a
retention change, binary values, headers, a cursor), stops it with SIGTERM,
damages the LevelDB store for real while pulsed is down, and starts it again:

  - meta/ removed;
  - one bit flipped in the middle of LevelDB's log;
  - garbage written over a table file (LevelDB refuses: pulsed must exit 1
    naming --repair-metadata; the repair must exit 0);
  - CURRENT truncated (the same, and the repair keeps the cursors);
  - the store of another data directory copied in (refused, naming both ids);
  - a topic directory of an older version (no topic.json) after a lost store
    (refused, naming --adopt-topic; the command makes the next start work);
  - topics/ empty or missing (a volume not mounted), and one topic directory
    gone (refused, naming --forget-topic, changing nothing; the directory's
    return, or the command, makes the next start work);
  - one partition directory gone or emptied (refused, naming
    --recreate-partition, changing nothing; the directory's return, or the
    command, makes the next start work, and the partition's offsets go on
    after its cursors or the given offset, never over again).

After each, every topic's records must be byte-identical at the same offsets,
read over HTTP both as JSON and as raw batches, and the cluster id the same.
Cursors that only the lost store held must be reported lost, not made up."""

import glob
import json
import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pulsetest  # noqa: E402

pulsetest.exit_unless_local("damages the local backend's metadata store")

from pulsetest import (b64, check, crc32c, eq, expect_json, expect_status, free_port, main,  # noqa: E402
                       pulsed_path, read_file)

TOPICS = ("orders", "latest", "plain")


def populate(srv):
    srv.create_topic("orders", partitions=3, segment_bytes=1024, retention_ms=3600000)
    srv.create_topic("latest", cleanup="compact", segment_bytes=2048)
    srv.create_topic("plain")
    expect_json(srv.req("PATCH", "/v1/topics/orders", {"retention_bytes": 1 << 30}), 200, "patch")
    for i in range(40):
        srv.publish("orders", [{"key": "k%d" % (i % 5), "value": {"i": i, "pad": "x" * (i * 7)},
                                "headers": {"n": str(i)}},
                               {"value_base64": b64(bytes([i, 0, 255, 10]) * 9), "partition": i % 3}])
        srv.publish("latest", [{"key": "key-%d" % (i % 4), "value": "v%d" % i}])
    srv.publish("plain", [{"value": "only"}, {"value": None}])
    expect_json(srv.req("POST", "/v1/consumers/reader/cursors",
                        {"cursors": [{"topic": "orders", "partition": 1, "offset": 3}]}), 200, "commit")


def raw_partition(srv, topic, p):
    """Every stored batch byte of a partition, segment after segment."""
    out = b""
    offset = 0
    while True:
        r = srv.fetch(topic, p, format="raw", offset=offset, max_bytes=1 << 20)
        expect_status(r, 200, "raw fetch %s/%d" % (topic, p))
        out += r.body
        nxt = int(r.header("Pulse-Next-Offset"))
        hw = int(r.header("Pulse-High-Watermark"))
        if not r.body or nxt >= hw:
            return out
        offset = nxt


def snapshot(srv):
    state = {"topics": srv.topics(), "records": {}, "raw": {}}
    for t in TOPICS:
        for p in range(srv.topic(t)["partitions"]):
            recs, _ = srv.fetch_all(t, p)
            state["records"][(t, p)] = recs
            state["raw"][(t, p)] = raw_partition(srv, t, p)
    broker = expect_json(srv.get("/v1/broker"), 200, "broker")
    state["ids"] = (broker["cluster_id"], broker["broker_id"])
    state["cursors"] = expect_json(srv.get("/v1/consumers/reader/cursors"), 200, "cursors")
    return state


def compare(a, b, what, topics_too=True):
    if topics_too:
        eq(b["topics"], a["topics"], "%s: topic definitions and partition stats" % what)
    check(sum(len(v) for v in a["raw"].values()) > 5000, "%s: the comparison covers real data" % what)
    for k in a["records"]:
        eq(b["records"][k], a["records"][k], "%s: records of %s/%d" % (what, k[0], k[1]))
        eq(b["raw"][k], a["raw"][k], "%s: raw bytes of %s/%d" % (what, k[0], k[1]))
    eq(b["ids"], a["ids"], "%s: cluster and broker ids" % what)


def filled(ctx):
    srv = ctx.new_server()
    srv.start()
    populate(srv)
    before = snapshot(srv)
    eq(len(before["cursors"]["cursors"]), 1, "the cursor was committed")
    srv.stop()
    return srv, before


def meta_dir(srv):
    return os.path.join(srv.data_dir, "meta")


def run_pulsed(srv, extra, expect_rc, what):
    """pulsed on srv's data directory, not as a server: a start that must
    fail, or an offline mode. Returns stdout + stderr as text."""
    args = [pulsed_path(), "--data-dir", srv.data_dir, "--listen", "127.0.0.1:%d" % free_port(),
            "-o", "log.level=warn"] + extra
    try:
        p = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError("%s: pulsed %s did not exit (it should not serve here)" % (what, extra))
    text = (p.stdout + p.stderr).decode("utf-8", "replace")
    for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
        check(marker not in text, "%s: sanitizer report:\n%s" % (what, text))
    eq(p.returncode, expect_rc, "%s: exit status (output %r)" % (what, text[-800:]))
    return text


def stderr_of(srv):
    with open(srv.stderr_path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def check_dirfile(path, what):
    """docs/Format.md section 4, implemented again from the text."""
    text = read_file(path).decode("utf-8")
    check(text.endswith("\n") and text.count("\n") == 1, "%s: one line" % what)
    doc = json.loads(text)
    stored = doc.pop("crc32c")
    eq(doc.get("format"), 1, "%s: format" % what)
    body = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")
    eq(stored, "%08x" % crc32c(body), "%s: crc32c" % what)
    eq(text, json.dumps(dict(doc, crc32c=stored), sort_keys=True, separators=(",", ":")) + "\n",
       "%s: compact, sorted" % what)
    return doc


def test_meta_directory_removed(ctx):
    srv, before = filled(ctx)
    ident = check_dirfile(os.path.join(srv.data_dir, "cluster.json"), "cluster.json")
    eq((ident["cluster_id"], ident["broker_id"]), before["ids"], "cluster.json holds the identity")
    orders = check_dirfile(os.path.join(srv.data_dir, "topics", "orders", "topic.json"), "topic.json")
    eq((orders["name"], orders["partitions"], orders["retention_bytes"]), ("orders", 3, 1 << 30),
       "topic.json holds the definition, retention change included")
    shutil.rmtree(meta_dir(srv))
    srv.start()
    compare(before, snapshot(srv), "after meta/ was removed")
    log = stderr_of(srv)
    for t in TOPICS:
        check("adopted topic %s" % t in log, "adoption of %s is logged at warn: %s" % (t, log[-1500:]))
    check("cursors lost with the store cannot be recovered" in log, "lost cursors are reported: %s" % log[-1500:])
    eq(expect_json(srv.get("/v1/consumers"), 200, "consumers")["consumers"], [],
       "no cursor is made up")
    # Offsets go on where they were.
    eq(srv.publish("plain", [{"value": "after"}]), [(0, 2)], "next offset after the rebuild")
    srv.stop()


def test_bit_flipped_in_the_leveldb_log(ctx):
    srv, before = filled(ctx)
    logs = glob.glob(os.path.join(meta_dir(srv), "*.log"))
    eq(len(logs), 1, "one LevelDB log")
    pristine = os.path.join(ctx.tmp, "pristine")
    shutil.copytree(srv.data_dir, pristine)
    size = os.path.getsize(logs[0])
    check(size > 800, "the log holds this run's records (%d bytes)" % size)
    # LevelDB opens anyway (paranoid checks are off) and drops what follows
    # the flip in its block: the store lacks topics, a retention change and
    # the cursor. Several places, each on a fresh copy.
    for where in (size // 3, size // 2, 2 * size // 3):
        shutil.rmtree(srv.data_dir)
        shutil.copytree(pristine, srv.data_dir)
        data = bytearray(read_file(logs[0]))
        data[where] ^= 0x10
        with open(logs[0], "wb") as f:
            f.write(data)
        srv.start()
        compare(before, snapshot(srv), "after a bit flip at byte %d of %d of the LevelDB log" % (where, size))
        log = stderr_of(srv)
        check("LevelDB dropped damaged records" in log or "adopted topic" in log,
              "the damage is reported (flip at %d): %s" % (where, log[-1500:]))
        srv.stop()


def test_garbage_over_a_table_file_is_refused_then_repaired(ctx):
    srv, before = filled(ctx)
    srv.start()  # one more open turns LevelDB's log into a table
    srv.stop()
    tables = glob.glob(os.path.join(meta_dir(srv), "*.ldb"))
    check(tables, "LevelDB wrote a table")
    biggest = max(tables, key=os.path.getsize)
    with open(biggest, "r+b") as f:
        f.write(b"\xde\xad\xbe\xef" * (os.path.getsize(biggest) // 4 + 1))
    out = run_pulsed(srv, [], 1, "start on a damaged table")
    check("--repair-metadata" in out and "damaged" in out, "the refusal names the repair: %r" % out[-600:])
    out = run_pulsed(srv, ["--repair-metadata"], 0, "repair")
    check("set aside" in out and "repair done" in out, "the repair says what it did: %r" % out[-1500:])
    srv.start()
    compare(before, snapshot(srv), "after garbage over a table file and --repair-metadata")
    srv.stop()


def test_truncated_current_is_refused_then_repaired_keeping_cursors(ctx):
    srv, before = filled(ctx)
    with open(os.path.join(meta_dir(srv), "CURRENT"), "wb"):
        pass
    out = run_pulsed(srv, [], 1, "start with CURRENT truncated")
    check("--repair-metadata" in out, "the refusal names the repair: %r" % out[-600:])
    out = run_pulsed(srv, ["--repair-metadata"], 0, "repair")
    check("1 consumer cursor(s) kept" in out, "the repair reports the cursors it kept: %r" % out[-1500:])
    srv.start()
    after = snapshot(srv)
    compare(before, after, "after CURRENT was truncated and --repair-metadata")
    eq(after["cursors"], before["cursors"], "LevelDB's repair kept the cursor")
    srv.stop()


def test_store_of_another_data_directory_is_refused(ctx):
    srv, before = filled(ctx)
    other = ctx.new_server()
    other.start()
    other_id = expect_json(other.get("/v1/broker"), 200, "broker")["cluster_id"]
    other.stop()
    shutil.rmtree(meta_dir(srv))
    shutil.copytree(meta_dir(other), meta_dir(srv))
    out = run_pulsed(srv, [], 1, "start with a foreign store")
    check(before["ids"][0] in out and other_id in out, "both cluster ids are named: %r" % out[-800:])
    check("cluster.json" in out and "another data directory" in out, "the cause is named: %r" % out[-800:])
    check(os.path.isdir(os.path.join(srv.data_dir, "topics", "orders", "0")), "the data is untouched")


def test_older_topic_directory_needs_adopt_topic(ctx):
    srv, before = filled(ctx)
    # As an older pulsed left it: no topic.json; then the store is lost.
    os.unlink(os.path.join(srv.data_dir, "topics", "orders", "topic.json"))
    shutil.rmtree(meta_dir(srv))
    out = run_pulsed(srv, [], 1, "start with an undecidable directory")
    check("topics/orders" in out and "--adopt-topic orders" in out,
          "the refusal names the directory and the command: %r" % out[-800:])
    check(os.path.isdir(os.path.join(srv.data_dir, "topics", "orders", "2")), "nothing was removed")
    run_pulsed(srv, ["--adopt-topic", "orders", "--partitions", "2"], 1, "adopt with the wrong count")
    out = run_pulsed(srv, ["--adopt-topic", "orders", "--partitions", "3", "-o",
                           "topic-defaults.segment-bytes=1024"], 0, "adopt")
    check("partitions=3" in out, "adopt says what it wrote: %r" % out)
    srv.start()
    # The definition came from the command, not the lost store; the data
    # is the same.
    compare(before, snapshot(srv), "after --adopt-topic", topics_too=False)
    eq(srv.topic("orders")["partitions"], 3, "partitions from the directories")
    srv.stop()



def test_missing_topic_directories_refuse_the_start_until_back_or_forgotten(ctx):
    srv, before = filled(ctx)
    topics = os.path.join(srv.data_dir, "topics")
    offline = os.path.join(ctx.tmp, "topics.offline")
    shutil.move(topics, offline)
    os.mkdir(topics)  # the mount point of a volume that is not mounted
    out = run_pulsed(srv, [], 1, "start with topics/ empty")
    check("3 topic(s)" in out and "latest, orders, plain" in out and "--forget-topic latest" in out,
          "the refusal names the topics and the command: %r" % out[-1200:])
    os.rmdir(topics)
    out = run_pulsed(srv, [], 1, "start without topics/")
    check("does not exist" in out, "the refusal says topics/ is missing: %r" % out[-1200:])
    check(not os.path.exists(topics), "topics/ is not made while the store names topics")
    shutil.move(offline, topics)
    srv.start()
    after = snapshot(srv)
    compare(before, after, "after the topics volume came back")
    eq(after["cursors"], before["cursors"], "the committed cursor survived")
    srv.stop()

    # One topic gone for good: refused until it is forgotten.
    shutil.rmtree(os.path.join(topics, "plain"))
    out = run_pulsed(srv, [], 1, "start without topics/plain")
    check("1 topic(s)" in out and "--forget-topic plain" in out, "the refusal names plain: %r" % out[-1200:])
    run_pulsed(srv, ["--forget-topic", "orders"], 1, "forget a topic whose directory is there")
    run_pulsed(srv, ["--forget-topic", "nosuch"], 1, "forget a topic the store does not have")
    out = run_pulsed(srv, ["--forget-topic", "plain"], 0, "forget plain")
    check("forgot topic plain" in out, "the command says what it did: %r" % out)
    srv.start()
    eq(sorted(t["name"] for t in srv.topics()["topics"]), ["latest", "orders"], "plain is forgotten, the rest kept")
    for p in range(3):
        recs, _ = srv.fetch_all("orders", p)
        eq(recs, before["records"][("orders", p)], "records of orders/%d" % p)
    eq(expect_json(srv.get("/v1/consumers/reader/cursors"), 200, "cursors"), before["cursors"],
       "the cursor on orders is kept")
    srv.stop()


def test_missing_partition_directory_refuses_the_start_until_back_or_recreated(ctx):
    srv, before = filled(ctx)
    part = os.path.join(srv.data_dir, "topics", "orders", "1")
    aside = os.path.join(ctx.tmp, "orders-1.offline")
    old = before["records"][("orders", 1)]
    check(len(old) > 5, "orders/1 holds records: %d" % len(old))
    old_hw = old[-1]["offset"] + 1
    # Not there now (a move, a volume): refused, naming it; nothing made.
    shutil.move(part, aside)
    out = run_pulsed(srv, [], 1, "start without topics/orders/1")
    check("topics/orders/1 is missing" in out and "--recreate-partition orders/1" in out and
          "Nothing was changed" in out, "the refusal names the partition and the command: %r" % out[-1200:])
    check(not os.path.exists(part), "the partition directory is not made again")
    os.mkdir(part)
    out = run_pulsed(srv, [], 1, "start with topics/orders/1 empty")
    check("topics/orders/1 is empty" in out, "the refusal says the directory is empty: %r" % out[-1200:])
    os.rmdir(part)
    shutil.move(aside, part)
    srv.start()
    compare(before, snapshot(srv), "after topics/orders/1 came back")
    srv.stop()

    # Gone for good: the command makes it again, after every cursor on it,
    # or from a given offset (the old high watermark, known to the operator).
    shutil.rmtree(part)
    run_pulsed(srv, ["--recreate-partition", "orders"], 2, "--recreate-partition without a partition")
    run_pulsed(srv, ["--start-offset", "5"], 2, "--start-offset alone")
    run_pulsed(srv, ["--recreate-partition", "orders/0"], 1, "recreate a partition that holds files")
    out = run_pulsed(srv, ["--recreate-partition", "orders/1"], 0, "recreate orders/1 from its cursor")
    check("new records get offsets from 3 on" in out and "handed out again" in out,
          "the command says where offsets go on and what that risks: %r" % out)
    shutil.rmtree(part)
    out = run_pulsed(srv, ["--recreate-partition", "orders/1", "--start-offset", str(old_hw)], 0,
                     "recreate orders/1 at its old high watermark")
    check("new records get offsets from %d on" % old_hw in out and "handed out again" not in out,
          "the given offset is taken: %r" % out)
    srv.start()
    eq(srv.hw("orders", 1), old_hw, "the recreated partition's high watermark")
    eq(srv.fetch_all("orders", 1)[0], [], "no record survives in the recreated partition")
    eq(srv.publish("orders", [{"value": "after", "partition": 1}]), [(1, old_hw)],
       "the next record goes after every offset handed out before")
    for p in (0, 2):
        recs, _ = srv.fetch_all("orders", p)
        eq(recs, before["records"][("orders", p)], "records of orders/%d" % p)
    cur = expect_json(srv.get("/v1/consumers/reader/cursors"), 200, "cursors")["cursors"]
    eq([(c["topic"], c["partition"], c["offset"]) for c in cur], [("orders", 1, 3)], "the cursor on orders/1 is kept")
    srv.stop()


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
