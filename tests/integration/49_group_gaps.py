#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Consumer groups: the gaps a review found in the first version, each
reproduced against pulsed over HTTP.

- An answer lost on the wire (the client never saw it) is delivered again:
  the broker keeps no read position; a fetch reads from the committed
  cursors unless the member gives back the "resume" of the last answer it
  did receive.
- start=latest: the end where the group begins on a partition is committed
  as its cursor, so after a rebalance the next owner starts there, not at
  a later end.
- After a restart of a broker that has topics, partitions are held for
  groups.lease-max, since members of the previous run may still be inside
  leases granted before it stopped.
- Member ids authorise a member's calls: GET /v1/groups/{group} shows them
  only to tokens with admin:* (others see them masked).

(The fourth gap, a wait's data waiter left parked, is inside the broker:
tests/unit/broker/check_group_gaps.c.)"""

import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from grouptest import commit, fetch, group_path, heartbeat, join  # noqa: E402
import pulsetest  # noqa: E402
from pulsetest import check, eq, expect_error, expect_json, expect_status, main, pulsed_path, uniq  # noqa: E402


def topic_with(srv, partitions, per_partition=0):
    t = uniq("gg")
    srv.create_topic(t, partitions=partitions)
    for p in range(partitions):
        if per_partition:
            srv.publish(t, [{"value": "p%d-%d" % (p, i), "partition": p} for i in range(per_partition)])
    return t


def offsets(doc):
    return [(r["partition"], r["offset"]) for r in doc["records"]]


def resume_positions(resume):
    """{partition: offset} of a resume "G,topic:P:OFF,..." (one topic)."""
    return {int(e.split(":")[1]): int(e.split(":")[2]) for e in resume.split(",")[1:]}


def cursor(srv, g, t, p):
    r = srv.get("/v1/consumers/%s/cursors/%s/%d" % (g, t, p))
    return r.json()["offset"] if r.status == 200 else None


# ---- 1. an answer lost on the wire ------------------------------------------


def test_an_answer_lost_on_the_wire_is_delivered_again(ctx):
    srv = ctx.srv
    t = topic_with(srv, 1, per_partition=10)
    g = uniq("g")
    m = join(srv, g, [t], lease_ms=10000)["member_id"]
    lost = expect_json(fetch(srv, g, m, max_records=3), 200, "an answer the client never sees")
    eq(offsets(lost), [(0, 0), (0, 1), (0, 2)], "the first three records")
    # The client timed out and asks again: nothing may be skipped.
    d = expect_json(fetch(srv, g, m, max_records=3), 200, "the retry")
    eq(offsets(d), [(0, 0), (0, 1), (0, 2)], "the records of the lost answer come again")
    expect_json(commit(srv, g, m, d["generation"], d["positions"]), 200, "commit what was processed")
    eq(cursor(srv, g, t, 0), 3, "the cursor is right after what the client processed")
    d = expect_json(fetch(srv, g, m, max_records=3), 200, "after the commit")
    eq(offsets(d), [(0, 3), (0, 4), (0, 5)], "reads on from the commit")


def test_resume_reads_on_from_the_last_answer_received(ctx):
    srv = ctx.srv
    t = topic_with(srv, 2, per_partition=6)
    g = uniq("g")
    m = join(srv, g, [t], lease_ms=10000)["member_id"]
    d1 = expect_json(fetch(srv, g, m, max_records=4), 200, "fetch 1")
    check(d1["resume"].startswith("%d," % d1["generation"]), "resume starts with the generation: %r" % d1["resume"])
    check(all("%s:%d:" % (t, p) in d1["resume"] for p in (0, 1)), "resume names every partition: %r" % d1["resume"])
    d2 = expect_json(fetch(srv, g, m, max_records=4, resume=d1["resume"]), 200, "fetch 2")
    eq(set(offsets(d1)) & set(offsets(d2)), set(), "fetch 2 reads on after fetch 1")
    # d2 is lost on the wire: the client gives back d1's resume again.
    d2b = expect_json(fetch(srv, g, m, max_records=4, resume=d1["resume"]), 200, "fetch 2 again")
    at = resume_positions(d1["resume"])
    for p in (0, 1):
        got = [o for q, o in offsets(d2b) if q == p]
        eq(got, list(range(at[p], at[p] + len(got))), "partition %d: again from d1's resume" % p)
    check(d2b["records"], "records again")
    seen = set(offsets(d1)) | set(offsets(d2b))
    resume = d2b["resume"]
    for _ in range(10):
        d = expect_json(fetch(srv, g, m, max_records=4, resume=resume), 200, "fetch")
        if not d["records"]:
            break
        seen |= set(offsets(d))
        resume = d["resume"]
    eq(sorted(seen), [(p, o) for p in (0, 1) for o in range(6)], "every record, none skipped")
    # A commit of all of it, then a fetch without resume: nothing left.
    d = expect_json(fetch(srv, g, m, max_records=100), 200, "from the cursors (none yet)")
    eq(len(d["records"]), 12, "without resume and cursor: from the log start")
    expect_json(commit(srv, g, m, d["generation"], d["positions"]), 200, "commit")
    d = expect_json(fetch(srv, g, m, max_records=100), 200, "after the commit")
    eq(d["records"], [], "nothing after the committed cursors")


def test_resume_of_a_partition_owned_since_by_someone_else_is_ignored(ctx):
    srv = ctx.srv
    t = topic_with(srv, 2, per_partition=5)
    g = uniq("g")
    a = join(srv, g, [t], lease_ms=10000)["member_id"]
    d1 = expect_json(fetch(srv, g, a, max_records=100), 200, "A reads everything")
    eq(len(d1["records"]), 10, "both partitions")
    b = join(srv, g, [t], lease_ms=10000)["member_id"]
    va = expect_json(heartbeat(srv, g, a), 200, "A hands one partition over")
    vb = expect_json(heartbeat(srv, g, b), 200, "B takes it")
    eq(len(va["partitions"]), 1, "A keeps one")
    eq(len(vb["partitions"]), 1, "B owns one")
    # B leaves; A gets the partition back. A's old resume is from before
    # B owned it: B may have read (and not committed) on from there, so the
    # partition goes back to the committed cursor (none: the log start).
    expect_status(srv.req("DELETE", group_path(g, "members", b)), 204, "B leaves")
    d = expect_json(fetch(srv, g, a, max_records=100, resume=d1["resume"]), 200, "A with its old resume")
    back = vb["partitions"][0]["partition"]
    kept = va["partitions"][0]["partition"]
    eq(sorted(o for p, o in offsets(d) if p == back), list(range(5)), "the partition that came back: from the start")
    eq([o for p, o in offsets(d) if p == kept], [], "the partition A kept: resumed after what it read")


@pulsetest.local_only("recreates a deleted topic's name, which the mock cluster cannot do (it only hides deleted topics)")
def test_a_resume_from_a_deleted_topic_means_nothing_in_its_successor(ctx):
    srv = ctx.srv
    t, g = uniq("gr"), uniq("g")
    srv.create_topic(t, partitions=1)
    srv.publish(t, [{"value": "old-%d" % i} for i in range(50)])
    m = join(srv, g, [t], lease_ms=30000)["member_id"]
    old = expect_json(fetch(srv, g, m, max_records=1000), 200, "fetch the old topic")
    eq(len(old["records"]), 50, "records of the old topic")
    expect_status(srv.req("DELETE", "/v1/topics/" + t), 204, "delete")
    srv.create_topic(t, partitions=1)
    srv.publish(t, [{"value": "new-%d" % i} for i in range(5)])
    got = []
    for _ in range(5):
        d = expect_json(fetch(srv, g, m, max_records=1000, max_wait_ms=200, resume=old["resume"]), 200,
                        "fetch the new topic with the old topic's resume")
        got += [r["value"] for r in d["records"]]
        if len(got) >= 5:
            break
    eq(got, ["new-%d" % i for i in range(5)], "the new topic's records, from its start")


def test_a_bad_resume_is_refused(ctx):
    srv = ctx.srv
    t = topic_with(srv, 1, per_partition=2)
    g = uniq("g")
    j = join(srv, g, [t], lease_ms=10000)
    m = j["member_id"]
    for bad in ("", "x", "1,%s" % t, "1,%s:0" % t, "1,%s:0:-1" % t, "1,%s:0:1,%s:0:1" % (t, t), "1,:0:1",
                "1,%s:0:1," % t, "99999999999999999999999"):
        expect_error(fetch(srv, g, m, resume=bad), 400, "invalid_request", "resume %r" % bad)
    r = fetch(srv, g, m, resume="%d,%s:0:5" % (j["generation"], t))
    eq(r.status, 416, "an offset beyond the high watermark: %r" % r.body[:200])
    check(b"beyond the high watermark" in r.body, "says why: %r" % r.body[:200])


# ---- 2. start=latest is pinned ---------------------------------------------


def test_start_latest_is_pinned_for_the_next_owner(ctx):
    srv = ctx.srv
    t = topic_with(srv, 1, per_partition=5)
    g = uniq("g")
    a = join(srv, g, [t], lease_ms=10000, start="latest")["member_id"]
    d = expect_json(fetch(srv, g, a, max_wait_ms=0), 200, "A's first fetch")
    eq(d["records"], [], "latest: nothing of what was there")
    eq(cursor(srv, g, t, 0), 5, "the group's start is committed as its cursor")
    srv.publish(t, [{"value": "new%d" % i, "partition": 0} for i in range(3)])
    # A leaves before it committed anything (or dies, or loses the
    # partition in a rebalance): its successor starts where the group began.
    expect_status(srv.req("DELETE", group_path(g, "members", a)), 204, "A leaves")
    b = join(srv, g, [t], lease_ms=10000, start="latest")["member_id"]
    d = expect_json(fetch(srv, g, b, max_records=100), 200, "B's fetch")
    eq(offsets(d), [(0, 5), (0, 6), (0, 7)], "what was published since the group began")


def test_start_latest_pin_survives_a_rebalance_between_members(ctx):
    srv = ctx.srv
    t = topic_with(srv, 2, per_partition=3)
    g = uniq("g")
    a = join(srv, g, [t], lease_ms=10000, start="latest")["member_id"]
    expect_json(fetch(srv, g, a, max_wait_ms=0), 200, "A begins on both partitions")
    srv.publish(t, [{"value": "n%d" % p, "partition": p} for p in (0, 1)])
    b = join(srv, g, [t], lease_ms=10000, start="latest")["member_id"]
    expect_json(heartbeat(srv, g, a), 200, "A hands one over")
    vb = expect_json(heartbeat(srv, g, b), 200, "B takes it")
    eq(len(vb["partitions"]), 1, "B owns one partition")
    d = expect_json(fetch(srv, g, b, max_records=100), 200, "B's fetch")
    p = vb["partitions"][0]["partition"]
    eq(offsets(d), [(p, 3)], "the record published after A began, not skipped")


# ---- 3. the hold after a restart -------------------------------------------

HOLD_ARGS = ["-o", "groups.lease-min=100ms", "-o", "groups.lease-max=1500ms"]


@pulsetest.local_only("restarts pulsed, whose mock cluster lives inside the process and starts empty; 94_kafka_groups.py restarts a gateway over another gateway's mock instead; on Kafka leases are in the group log, so a restart holds nothing back")
def test_after_a_restart_partitions_are_held_for_the_longest_lease(ctx):
    srv = ctx.new_server(args=HOLD_ARGS)
    srv.start()
    t = topic_with(srv, 2, per_partition=2)
    g = uniq("g")
    a = join(srv, g, [t], lease_ms=1500)
    eq(len(a["partitions"]), 2, "a fresh broker hands partitions out at once")
    check("hold_ms" not in a, "no hold on a fresh start: %r" % a)
    # A is inside its lease when the broker restarts; it is busy and will
    # not call before its lease ends, so only time tells the broker it is
    # safe to give A's partitions to someone else.
    srv.stop()
    srv.start()
    t0 = time.monotonic()
    b = join(srv, g, [t], lease_ms=1500)
    eq(b["partitions"], [], "nothing handed out while leases of the last run may be running")
    eq(b["pending_partitions"], 2, "B is assigned both, pending")
    check(0 < b["hold_ms"] <= 1500, "the answer says how long: %r" % b)
    expect_error(commit(srv, g, b["member_id"], b["generation"], [{"topic": t, "partition": 0, "offset": 1}]),
                 409, "commit_fenced", "B owns nothing to commit yet")
    # B keeps its lease with long-polls shorter than it (as a member
    # should) and gets its partitions once the hold is over.
    while True:
        d = expect_json(fetch(srv, g, b["member_id"], max_wait_ms=500), 200, "B's long-poll during the hold")
        waited = time.monotonic() - t0
        if d["partitions"] or waited > 10:
            break
        eq(d["pending_partitions"], 2, "still pending")
    check(waited >= b["hold_ms"] / 1000.0 - 0.1, "not before the hold was over (%.2fs)" % waited)
    eq(len(d["partitions"]), 2, "B owns both partitions now")
    check("hold_ms" not in d, "the hold is over: %r" % d)
    d = expect_json(fetch(srv, g, b["member_id"], max_records=100), 200, "B reads")
    eq(len(d["records"]), 4, "from the committed cursors (none: the log start)")
    srv.stop()


def test_a_restart_without_topics_holds_nothing(ctx):
    srv = ctx.new_server(args=HOLD_ARGS)
    srv.start()
    srv.stop()
    srv.start()
    t = topic_with(srv, 1)
    a = join(srv, uniq("g"), [t], lease_ms=1000)
    eq(len(a["partitions"]), 1, "no group can have had members: no hold")
    srv.stop()


# ---- 5. who sees member ids ----------------------------------------------


def token_line(name, token, grants):
    p = subprocess.run([pulsed_path(), "--hash-token", name] + grants, input=(token + "\n").encode(),
                       capture_output=True, timeout=30)
    eq(p.returncode, 0, "--hash-token (stderr %r)" % p.stderr)
    return p.stdout.decode()


def test_member_ids_are_shown_only_to_administrators(ctx):
    path = os.path.join(ctx.tmp, "group-tokens")
    with open(path, "w") as f:
        f.write(token_line("ops", "ops-token-0123456789", ["admin:*", "read:*", "commit:*"]))
        f.write(token_line("worker", "worker-token-0123456789", ["read:*", "write:*", "commit:*"]))
        f.write(token_line("peer", "peer-token-0123456789", ["admin:gg*", "read:*", "commit:*"]))
    srv = ctx.new_server(args=["-o", "auth.token-file=" + path])
    srv.start()
    ops = {"Authorization": "Bearer ops-token-0123456789"}
    worker = {"Authorization": "Bearer worker-token-0123456789"}
    peer = {"Authorization": "Bearer peer-token-0123456789"}
    t, g = uniq("gg"), uniq("g")
    expect_json(srv.req("POST", "/v1/topics", {"name": t, "partitions": 2}, headers=ops), 201, "create")
    j = expect_json(srv.req("POST", group_path(g, "members"), {"topics": [t]}, headers=worker), 201, "join")
    m = j["member_id"]
    for who, hdr in (("worker", worker), ("admin of topics only", peer)):
        d = expect_json(srv.req("GET", group_path(g), headers=hdr), 200, "describe as %s" % who)
        shown = d["members"][0]["member_id"]
        check(shown != m and "*" in shown, "%s sees a masked id: %r" % (who, shown))
        eq(len(shown), len(m), "same shape")
        eq(shown.rsplit("-", 1)[1], m.rsplit("-", 1)[1], "the public sequence part stays")
        eq({p["owner"] for p in d["partitions"]}, {shown}, "owners are masked the same way")
        eq({p["assigned_to"] for p in d["partitions"]}, {shown}, "and so are the assignees")
        check(m not in srv.req("GET", group_path(g), headers=hdr).body.decode(), "the id appears nowhere")
        r = srv.req("POST", group_path(g, "members", shown, "heartbeat"), headers=hdr)
        check(r.status in (400, 409), "a masked id authorises nothing: %d" % r.status)
    d = expect_json(srv.req("GET", group_path(g), headers=ops), 200, "describe as admin:*")
    eq(d["members"][0]["member_id"], m, "admin:* sees the id")
    eq({p["owner"] for p in d["partitions"]}, {m}, "and the owners' ids")
    srv.stop()


if __name__ == "__main__":
    sys.exit(main(globals()))
