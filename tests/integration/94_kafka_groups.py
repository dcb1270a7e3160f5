#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Consumer groups on the Kafka backend across several gateways
(docs/Scaling.md "Consumer groups on Kafka"): two pulsed processes over the
same cluster agree on membership, generation and assignment whichever
gateway a member's calls land on; commits are fenced the same way through
either and land in the group's consumer-group offsets; a gateway that
restarts rebuilds every group from the group log and knows the members.

Gateway A runs librdkafka's mock cluster inside it (kafka.mock-brokers=3);
gateway B runs no mock and points kafka.bootstrap-servers at A's mock
brokers, which listen on loopback ports (A logs them at start). Whatever
PULSE_TEST_BACKEND says, both run the Kafka backend."""

import os
import re
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grouptest import commit, fetch, group_path, heartbeat, join, owned  # noqa: E402
from pulsetest import (KAFKA_ARGS, check, eq, expect_error, expect_json, main, uniq,  # noqa: E402
                       wait_until)


def gateways(ctx, b_args=()):
    """A (with the mock, logging its address) and B (over A's mock)."""
    a = ctx.new_server(args=KAFKA_ARGS + ["-o", "log.level=info"]).start()
    boot = None
    with open(a.stderr_path, "rb") as f:
        m = re.search(rb"mock cluster of \d+ broker\(s\) at (\S+)", f.read())
        check(m is not None, "gateway A logs its mock brokers' address")
        boot = m.group(1).decode()
    b = ctx.new_server(args=["-o", "broker.backend=kafka", "-o", "kafka.mock-brokers=0",
                             "-o", "kafka.bootstrap-servers=" + boot] + list(b_args)).start()
    return a, b


def topic_on_both(a, b, partitions):
    t = uniq("kg")
    a.create_topic(t, partitions=partitions)  # on the mock: only A can create
    check(wait_until(lambda: b.get("/v1/topics/" + t).status == 200, 10), "B sees the topic")
    return t


def shape(doc):
    """A description without the parts that depend on the reader's clock."""
    members = [(m["member_id"], m["generation"], m["partitions"], m["joined_at_ms"], tuple(m["topics"]))
               for m in doc["members"]]
    parts = [(p["topic"], p["partition"], p["owner"], p["assigned_to"], p["committed"]) for p in doc["partitions"]]
    return (doc["generation"], members, parts)


def agree(a, b, g, what):
    """Both gateways describe g alike (B's reader may be a few events behind)."""
    last = {}

    def same():
        ra, rb = a.get(group_path(g)), b.get(group_path(g))
        # 503 while a gateway that just started still reads the log
        if ra.status != 200 or rb.status != 200:
            last["a"], last["b"] = ra.status, rb.status
            return False
        last["a"], last["b"] = shape(ra.json()), shape(rb.json())
        return last["a"] == last["b"]
    check(wait_until(same, 10), "%s: the gateways disagree: A %r, B %r" % (what, last.get("a"), last.get("b")))
    return last["a"]


def test_two_gateways_agree_on_membership_assignment_and_commits(ctx):
    a, b = gateways(ctx)
    # A cursor list on a cluster without topics: empty (it once passed a
    # NULL array to qsort, which aborts a sanitizer build).
    eq(expect_json(b.get("/v1/consumers/nobody/cursors"), 200, "cursor list")["cursors"], [], "no cursors")
    t = topic_on_both(a, b, 4)
    for p in range(4):
        a.publish(t, [{"value": "r%d-%d" % (p, i), "partition": p} for i in range(3)])
    g = uniq("g")
    m1 = join(a, g, [t], lease_ms=20000)["member_id"]
    m2 = join(b, g, [t], lease_ms=20000)["member_id"]
    # Each member calls through the other gateway: the hand-over completes.
    for _ in range(20):
        v1 = expect_json(heartbeat(b, g, m1), 200, "m1 through B")
        v2 = expect_json(heartbeat(a, g, m2), 200, "m2 through A")
        if v1["pending_partitions"] == 0 and v2["pending_partitions"] == 0 and v1["generation"] == v2["generation"]:
            break
    eq(len(owned(v1)) + len(owned(v2)), 4, "every partition owned")
    eq(set(owned(v1)) & set(owned(v2)), set(), "no partition owned twice")
    eq(len(owned(v1)), 2, "an even share")
    gen, members, parts = agree(a, b, g, "after the joins")
    eq(sorted(m[0] for m in members), sorted([m1, m2]), "both members, on both gateways")
    eq(gen, v1["generation"], "the generation the members were told")
    # m1 fetches through B and commits through A; the cursors are the
    # group's consumer-group offsets, seen through either gateway.
    d = expect_json(fetch(b, g, m1, max_records=100), 200, "m1 fetches through B")
    eq(len(d["records"]), 6, "three records of each of m1's partitions")
    expect_json(commit(a, g, m1, d["generation"], d["positions"]), 200, "m1 commits through A")
    for srv in (a, b):
        cur = expect_json(srv.get("/v1/consumers/%s/cursors" % g), 200, "the group's cursors")
        eq(sorted((c["partition"], c["offset"]) for c in cur["cursors"]),
           sorted((p["partition"], 3) for p in d["positions"]), "the committed positions")
    agree(a, b, g, "after the commit")
    # A third member joins through B: a new generation, and a commit of
    # the old one is refused through either gateway, storing nothing.
    m3 = join(b, g, [t], lease_ms=20000)["member_id"]
    for srv in (b, a):
        err = expect_error(commit(srv, g, m1, d["generation"], d["positions"]), 409, "commit_fenced",
                           "a commit of the old generation")
        check("nothing was committed" in err["message"], "the 409 says nothing was stored: %r" % err)
    expect_json(heartbeat(a, g, m3), 200, "m3 through A")
    # m2 leaves through A: B no longer knows it either.
    eq(a.req("DELETE", "/v1/groups/%s/members/%s" % (g, m2)).status, 204, "m2 leaves through A")
    expect_error(heartbeat(b, g, m2), 409, "rejoin", "m2 through B after leaving")
    gen, members, parts = agree(a, b, g, "after the leave")
    eq(sorted(m[0] for m in members), sorted([m1, m3]), "m1 and m3 are left")
    b.stop()
    a.stop()


def test_a_restarted_gateway_rebuilds_the_groups_from_the_log(ctx):
    a, b = gateways(ctx)
    t = topic_on_both(a, b, 2)
    g = uniq("g")
    m1 = join(b, g, [t], lease_ms=30000)["member_id"]
    m2 = join(a, g, [t], lease_ms=30000)["member_id"]
    v = expect_json(heartbeat(b, g, m1), 200, "m1")
    a.publish(t, [{"value": "x", "partition": p["partition"]} for p in v["partitions"]])
    d = expect_json(fetch(b, g, m1), 200, "fetch")
    expect_json(commit(b, g, m1, d["generation"], d["positions"]), 200, "commit")
    before = agree(a, b, g, "before the restart")
    b.stop()
    b.start()
    # B read the whole log again: same members, generation, owners and
    # committed positions, and it answers the members (no rejoin).
    after = agree(a, b, g, "after B restarted")
    eq(after, before, "B rebuilt the group as it was")
    expect_json(heartbeat(b, g, m1), 200, "m1 through the restarted B")
    expect_json(heartbeat(b, g, m2), 200, "m2 through the restarted B")
    metrics = b.get("/metrics").body.decode()
    n = re.search(r"^pulse_kafka_group_log_events_total (\d+)$", metrics, re.M)
    check(n is not None and int(n.group(1)) >= 5, "B applied the log's events after its restart: %r" % n)
    check('pulse_group_members{group="%s"} 2' % g in metrics, "the member gauge of the rebuilt group")
    b.stop()
    a.stop()


def test_group_calls_are_bounded_when_the_cluster_goes_away(ctx):
    a, b = gateways(ctx, ["-o", "kafka.request-timeout=1s"])
    t = topic_on_both(a, b, 1)
    g = uniq("g")
    m = join(b, g, [t], lease_ms=30000)["member_id"]
    a.stop()  # B's cluster is gone: its group calls fail in time, never hang
    t0 = time.monotonic()
    r = heartbeat(b, g, m)
    eq(r.status, 503, "a heartbeat without the cluster")
    check(time.monotonic() - t0 < 5, "answered within the request timeout (and a second)")
    b.stop()


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
