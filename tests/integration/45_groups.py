# SPDX-License-Identifier: MIT
"""Consumer groups, call by call: join answers member_id, generation and
partitions; partitions are spread evenly and stickily and move only after
their previous owner acknowledged losing them (or left); a member that
misses its lease is removed and told to rejoin; commits are fenced (a
partition not owned or an old generation: 409, nothing stored) and land in
the ordinary consumer cursors; the group fetch long-polls across all of a
member's partitions, starts at the committed cursors and carries topic,
partition, offset and the positions to commit; GET /v1/groups, GET
/v1/groups/{group} and the metrics show the groups; bad input is refused."""

import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pulsetest  # noqa: E402


from grouptest import (commit, describe, fetch, group_path, heartbeat, join, owned, settle)  # noqa: E402
from pulsetest import (check, eq, expect_error, expect_json, expect_keys, expect_status, main,  # noqa: E402
                       uniq)

SERVER_ARGS = ["-o", "groups.lease-min=100ms"]


def topic_with(srv, partitions, per_partition=0):
    t = uniq("gt")
    srv.create_topic(t, partitions=partitions)
    for p in range(partitions):
        if per_partition:
            srv.publish(t, [{"value": "p%d-%d" % (p, i), "partition": p} for i in range(per_partition)])
    return t


def test_join_answers_member_id_generation_and_partitions(ctx):
    srv = ctx.srv
    t = topic_with(srv, 6)
    g = uniq("g")
    doc = join(srv, g, [t], lease_ms=5000)
    expect_keys(doc, ["group", "member_id", "generation", "lease_ms", "partitions", "pending_partitions"], "join")
    check(isinstance(doc["member_id"], str) and doc["member_id"], "member_id is a string")
    check(doc["generation"] >= 1, "generation starts at 1 or above")
    eq(doc["lease_ms"], 5000, "lease_ms as asked")
    eq(owned(doc), [(t, p) for p in range(6)], "a lone member owns every partition")
    for p in doc["partitions"]:
        expect_keys(p, ["topic", "partition"], "partition entry")


def test_partitions_move_only_after_the_old_owner_acknowledged(ctx):
    srv = ctx.srv
    t = topic_with(srv, 6)
    g = uniq("g")
    a = join(srv, g, [t], lease_ms=5000)
    b = join(srv, g, [t], lease_ms=5000)
    check(b["generation"] > a["generation"], "a join starts a new generation")
    eq(b["partitions"], [], "B owns nothing while A still holds every partition")
    eq(b["pending_partitions"], 3, "B waits for three partitions")
    # B asking again changes nothing: A has not been told yet.
    eq(expect_json(heartbeat(srv, g, b["member_id"]), 200, "B heartbeat")["partitions"], [], "still nothing")
    # A's next call is its acknowledgement: it is told it keeps three.
    a2 = expect_json(heartbeat(srv, g, a["member_id"]), 200, "A heartbeat")
    eq(a2["generation"], b["generation"], "A learns the new generation from an ordinary answer")
    eq(len(a2["partitions"]), 3, "A keeps three")
    b2 = expect_json(heartbeat(srv, g, b["member_id"]), 200, "B heartbeat")
    eq(len(b2["partitions"]), 3, "B now owns three")
    eq(set(owned(a2)) | set(owned(b2)), set((t, p) for p in range(6)), "together they own all six")
    eq(set(owned(a2)) & set(owned(b2)), set(), "and never one twice")
    # A third member: each gives up one (sticky: nobody trades the rest).
    c = join(srv, g, [t], lease_ms=5000)
    views = settle(srv, g, [a["member_id"], b["member_id"], c["member_id"]])
    a3, b3, c3 = (set(owned(views[m])) for m in (a["member_id"], b["member_id"], c["member_id"]))
    eq((len(a3), len(b3), len(c3)), (2, 2, 2), "an even spread")
    check(a3 <= set(owned(a2)) and b3 <= set(owned(b2)), "A and B kept partitions they had (sticky)")
    eq(a3 | b3 | c3, set((t, p) for p in range(6)), "every partition owned once")


def test_leave_frees_partitions_at_once(ctx):
    srv = ctx.srv
    t = topic_with(srv, 4)
    g = uniq("g")
    a = join(srv, g, [t], lease_ms=5000)
    b = join(srv, g, [t], lease_ms=5000)
    settle(srv, g, [a["member_id"], b["member_id"]])
    expect_status(srv.req("DELETE", group_path(g, "members", b["member_id"])), 204, "leave")
    a2 = expect_json(heartbeat(srv, g, a["member_id"]), 200, "A heartbeat")
    eq(len(a2["partitions"]), 4, "A owns all four right after B left")
    expect_error(heartbeat(srv, g, b["member_id"]), 409, "rejoin", "B after leaving")
    expect_status(srv.req("DELETE", group_path(g, "members", b["member_id"])), 204, "leaving twice is fine")


def test_a_member_that_misses_its_lease_is_removed(ctx):
    srv = ctx.srv
    t = topic_with(srv, 2)
    g = uniq("g")
    a = join(srv, g, [t], lease_ms=300)
    b = join(srv, g, [t], lease_ms=5000)
    settle(srv, g, [a["member_id"], b["member_id"]])
    time.sleep(0.5)
    # A's lease ran out: it is gone (every group call removes the expired
    # members of its group first; check_groups shows the syncer doing it
    # with nobody calling).
    d = describe(srv, g)
    eq([m["member_id"] for m in d["members"]], [b["member_id"]], "only B is left")
    err = expect_error(heartbeat(srv, g, a["member_id"]), 409, "rejoin", "A after its lease")
    check("join again" in err["message"], "the message says what to do: %r" % err["message"])
    b2 = expect_json(heartbeat(srv, g, b["member_id"]), 200, "B heartbeat")
    eq(len(b2["partitions"]), 2, "B took over A's partition")


def test_heartbeats_keep_an_idle_member(ctx):
    srv = ctx.srv
    t = topic_with(srv, 1)
    g = uniq("g")
    a = join(srv, g, [t], lease_ms=1000)
    for _ in range(6):
        time.sleep(0.25)
        expect_json(heartbeat(srv, g, a["member_id"]), 200, "heartbeat within the lease")
    eq(len(describe(srv, g)["members"]), 1, "still a member after 1.5 times its lease")


def test_commits_are_fenced_and_land_in_the_consumer_cursors(ctx):
    srv = ctx.srv
    t = topic_with(srv, 2, per_partition=5)
    g = uniq("g")
    a = join(srv, g, [t], lease_ms=5000)
    b = join(srv, g, [t], lease_ms=5000)
    views = settle(srv, g, [a["member_id"], b["member_id"]])
    mine = views[a["member_id"]]["partitions"][0]["partition"]
    theirs = views[b["member_id"]]["partitions"][0]["partition"]
    gen = views[a["member_id"]]["generation"]
    # Not owned: 409 and nothing stored, not even the owned one next to it.
    err = expect_error(commit(srv, g, a["member_id"], gen, [{"topic": t, "partition": mine, "offset": 2},
                                                            {"topic": t, "partition": theirs, "offset": 3}]),
                       409, "commit_fenced", "commit of a partition not owned")
    check("does not own" in err["message"], "message names the cause: %r" % err["message"])
    expect_error(srv.get("/v1/consumers/%s/cursors/%s/%d" % (g, t, mine)), 404, "cursor_not_found", "nothing stored")
    # An old generation: 409.
    expect_error(commit(srv, g, a["member_id"], gen - 1, [{"topic": t, "partition": mine, "offset": 2}]),
                 409, "commit_fenced", "commit with an old generation")
    # Unknown member: 409 rejoin.
    expect_error(commit(srv, g, "m-unknown-1", gen, [{"topic": t, "partition": mine, "offset": 2}]),
                 409, "rejoin", "commit by an unknown member")
    # The owner with its generation: stored as the group's consumer cursor.
    doc = expect_json(commit(srv, g, a["member_id"], gen, [{"topic": t, "partition": mine, "offset": 2}]), 200,
                      "commit")
    eq(doc["committed"], [{"topic": t, "partition": mine, "offset": 2}], "committed offsets echoed")
    eq(doc["generation"], gen, "the view comes with it")
    cur = expect_json(srv.get("/v1/consumers/%s/cursors/%s/%d" % (g, t, mine)), 200, "cursor route")
    eq((cur["offset"], cur["lag"]), (2, 3), "cursor and lag through the consumer routes")
    # Beyond the high watermark: 416, like a cursor commit.
    expect_error(commit(srv, g, a["member_id"], gen, [{"topic": t, "partition": mine, "offset": 99}]), 416,
                 "offset_out_of_range", "commit past the end")


def test_group_fetch_long_polls_across_all_partitions(ctx):
    srv = ctx.srv
    t = topic_with(srv, 6)
    g = uniq("g")
    a = join(srv, g, [t], lease_ms=5000)
    out = {}

    def poll():
        t0 = time.monotonic()
        out["r"] = fetch(srv, g, a["member_id"], max_wait_ms=8000)
        out["s"] = time.monotonic() - t0

    th = threading.Thread(target=poll)
    th.start()
    time.sleep(0.3)
    srv.publish(t, [{"key": "k", "value": "late", "partition": 5}])
    th.join(15)
    doc = expect_json(out["r"], 200, "group fetch")
    check(out["s"] < 5, "woken by the publish on partition 5, not the deadline (%.2fs)" % out["s"])
    eq(len(doc["records"]), 1, "one record")
    rec = doc["records"][0]
    eq((rec["topic"], rec["partition"], rec["offset"], rec["value"]), (t, 5, 0, "late"), "record fields")
    eq(doc["positions"], [{"topic": t, "partition": 5, "offset": 1}], "positions to commit")
    # An empty wait returns at its deadline with no records.
    t0 = time.monotonic()
    doc = expect_json(fetch(srv, g, a["member_id"], max_wait_ms=300, resume=doc["resume"]), 200, "idle fetch")
    check(0.25 <= time.monotonic() - t0 < 5, "waited about max_wait_ms")
    eq((doc["records"], doc["positions"]), ([], []), "nothing new")


def timed_fetch(srv, g, m, out, **params):
    t0 = time.monotonic()
    out["r"] = fetch(srv, g, m, **params)
    out["s"] = time.monotonic() - t0


def test_a_rebalance_ends_a_long_poll_at_once(ctx):
    srv = ctx.srv
    t = topic_with(srv, 4)
    g = uniq("g")
    a = join(srv, g, [t], lease_ms=20000)
    out = {}
    th = threading.Thread(target=timed_fetch, args=(srv, g, a["member_id"], out), kwargs={"max_wait_ms": 10000})
    th.start()
    time.sleep(0.3)
    b = join(srv, g, [t], lease_ms=20000)
    th.join(15)
    doc = expect_json(out["r"], 200, "A's long-poll")
    check(out["s"] < 3, "A's wait ended when B joined, not at its deadline (%.2fs)" % out["s"])
    eq(doc["generation"], b["generation"], "A's answer carries the new generation")
    eq(len(doc["partitions"]), 2, "and A's new partitions (it released two)")
    eq(doc["records"], [], "no records in a changed generation")


def test_a_member_without_partitions_waits_and_is_woken_by_a_handover(ctx):
    srv = ctx.srv
    t = topic_with(srv, 2)
    g = uniq("g")
    a = join(srv, g, [t], lease_ms=20000)
    b = join(srv, g, [t], lease_ms=20000)
    eq(b["partitions"], [], "B waits for A")
    # With nothing to read, B's fetch waits (it does not spin) ...
    t0 = time.monotonic()
    doc = expect_json(fetch(srv, g, b["member_id"], max_wait_ms=400), 200, "B's empty wait")
    check(0.3 <= time.monotonic() - t0 < 3, "B waited about max_wait_ms (%.2fs)" % (time.monotonic() - t0))
    eq(doc["partitions"], [], "still nothing: A has not called")
    # ... and is woken once A acknowledges the rebalance.
    out = {}
    th = threading.Thread(target=timed_fetch, args=(srv, g, b["member_id"], out), kwargs={"max_wait_ms": 10000})
    th.start()
    time.sleep(0.3)
    expect_json(heartbeat(srv, g, a["member_id"]), 200, "A acknowledges")
    th.join(15)
    doc = expect_json(out["r"], 200, "B's long-poll")
    check(out["s"] < 3, "B's wait ended when its partition was released (%.2fs)" % out["s"])
    eq(len(doc["partitions"]), 1, "B owns its partition now")


def test_group_fetch_starts_at_the_cursor_then_continues_in_its_generation(ctx):
    srv = ctx.srv
    t = topic_with(srv, 1, per_partition=10)
    g = uniq("g")
    expect_json(srv.req("PUT", "/v1/consumers/%s/cursors/%s/0" % (g, t), {"offset": 4}), 200, "cursor before join")
    a = join(srv, g, [t], lease_ms=5000)
    d1 = expect_json(fetch(srv, g, a["member_id"], max_records=3), 200, "fetch 1")
    eq([r["offset"] for r in d1["records"]], [4, 5, 6], "starts at the committed cursor")
    d2 = expect_json(fetch(srv, g, a["member_id"], max_records=3, resume=d1["resume"]), 200, "fetch 2")
    eq([r["offset"] for r in d2["records"]], [7, 8, 9], "continues where the answer given back left off")
    # A new member starts a new generation; A keeps its partition (it is
    # A's since before d2's generation), so d2's resume still holds...
    b = join(srv, g, [t], lease_ms=5000)
    d3 = expect_json(fetch(srv, g, a["member_id"], max_records=3, resume=d1["resume"]), 200, "fetch 3")
    check(d3["generation"] > d2["generation"], "a new generation")
    eq([r["offset"] for r in d3["records"]], [7, 8, 9], "d2 lost on the wire: read again from d1's resume")
    # ... and without a resume the fetch starts at the committed cursor.
    d3 = expect_json(fetch(srv, g, a["member_id"], max_records=3), 200, "fetch 3 without resume")
    eq([r["offset"] for r in d3["records"]], [4, 5, 6], "uncommitted records come again (at least once)")
    expect_error(commit(srv, g, a["member_id"], d2["generation"], d2["positions"]), 409, "commit_fenced",
                 "commit of a batch of the old generation")
    expect_json(commit(srv, g, a["member_id"], d3["generation"], d3["positions"]), 200, "commit")
    eq(expect_json(srv.get("/v1/consumers/%s/cursors/%s/0" % (g, t)), 200, "cursor")["offset"], 7, "cursor")
    expect_status(srv.req("DELETE", group_path(g, "members", b["member_id"])), 204, "B leaves")


def test_group_fetch_bounds_records_and_bytes_but_always_progresses(ctx):
    srv = ctx.srv
    t = uniq("gt")
    srv.create_topic(t, partitions=2)
    big = "x" * 3000
    srv.publish(t, [{"value": big, "partition": 0} for _ in range(4)])
    srv.publish(t, [{"value": "s%d" % i, "partition": 1} for i in range(30)])
    g = uniq("g")
    a = join(srv, g, [t], lease_ms=5000)
    got = []
    resume = None
    for _ in range(100):
        doc = expect_json(fetch(srv, g, a["member_id"], max_bytes=200, max_records=7, resume=resume), 200, "fetch")
        resume = doc["resume"]
        check(len(doc["records"]) <= 7, "max_records holds")
        if not doc["records"]:
            break
        check(len(doc["records"]) == 1 or all(len(r["value"]) < 100 for r in doc["records"]),
              "a 3000-byte record comes alone under max_bytes=200")
        got.extend((r["partition"], r["offset"]) for r in doc["records"])
    eq(sorted(got), sorted([(0, o) for o in range(4)] + [(1, o) for o in range(30)]),
       "every record once, in small answers")
    for p in (0, 1):
        offs = [o for q, o in got if q == p]
        eq(offs, sorted(offs), "partition %d in order" % p)


def test_start_latest_skips_what_was_there(ctx):
    srv = ctx.srv
    t = topic_with(srv, 2, per_partition=3)
    g = uniq("g")
    a = join(srv, g, [t], lease_ms=5000, start="latest")
    eq(expect_json(fetch(srv, g, a["member_id"]), 200, "fetch")["records"], [], "nothing old")
    srv.publish(t, [{"value": "new", "partition": 1}])
    doc = expect_json(fetch(srv, g, a["member_id"]), 200, "fetch")
    eq([(r["partition"], r["offset"]) for r in doc["records"]], [(1, 3)], "only the new record")


def test_two_topics_and_a_deleted_topic(ctx):
    srv = ctx.srv
    t1 = topic_with(srv, 2, per_partition=1)
    t2 = topic_with(srv, 3, per_partition=1)
    g = uniq("g")
    a = join(srv, g, [t1, t2], lease_ms=5000)
    eq(len(a["partitions"]), 5, "partitions of both topics")
    doc = expect_json(fetch(srv, g, a["member_id"], max_records=100), 200, "fetch")
    eq(sorted((r["topic"], r["partition"]) for r in doc["records"]),
       sorted([(t1, 0), (t1, 1), (t2, 0), (t2, 1), (t2, 2)]), "one record from each partition")
    expect_status(srv.req("DELETE", "/v1/topics/" + t2), 204, "delete t2")
    deadline = time.monotonic() + 5
    while True:
        v = expect_json(heartbeat(srv, g, a["member_id"]), 200, "heartbeat")
        if len(v["partitions"]) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    eq(owned(v), [(t1, 0), (t1, 1)], "the deleted topic's partitions are gone")
    check(v["generation"] > a["generation"], "a partition change starts a new generation")


def test_visibility_list_describe_and_metrics(ctx):
    srv = ctx.srv
    t = topic_with(srv, 3, per_partition=4)
    g = uniq("g")
    a = join(srv, g, [t], lease_ms=5000)
    b = join(srv, g, [t], lease_ms=5000)
    views = settle(srv, g, [a["member_id"], b["member_id"]])
    va = views[a["member_id"]]
    p0 = va["partitions"][0]["partition"]
    expect_json(commit(srv, g, a["member_id"], va["generation"], [{"topic": t, "partition": p0, "offset": 1}]),
                200, "commit")
    check(g in expect_json(srv.get("/v1/groups"), 200, "list")["groups"], "the group is listed")
    d = describe(srv, g)
    expect_keys(d, ["group", "generation", "rebalances", "members", "partitions"], "describe")
    eq(len(d["members"]), 2, "two members")
    for m in d["members"]:
        expect_keys(m, ["member_id", "topics", "lease_ms", "lease_expires_in_ms", "generation", "partitions",
                        "joined_at_ms"], "member")
        check(0 < m["lease_expires_in_ms"] <= 5000, "lease expiry in the future")
    parts = {p["partition"]: p for p in d["partitions"]}
    eq(sorted(parts), [0, 1, 2], "every partition")
    eq((parts[p0]["committed"], parts[p0]["high_watermark"], parts[p0]["lag"]), (1, 4, 3), "cursor and lag")
    eq(parts[p0]["owner"], a["member_id"], "owner")
    eq(parts[p0]["assigned_to"], a["member_id"], "assignment")
    metrics = srv.get("/metrics").body.decode()
    check('pulse_group_members{group="%s"} 2' % g in metrics, "member gauge")
    check('pulse_group_rebalances_total{group="%s"}' % g in metrics, "rebalance counter")
    # The Kafka backend has no lag families in /metrics (they would ask the
    # cluster for every group's offsets); GET /v1/groups/{group} has it.
    if pulsetest.BACKEND == "local":
        check('pulse_group_lag{group="%s"} 3' % g in metrics, "group lag")
        check('pulse_consumer_lag{consumer="%s",topic="%s",partition="%d"} 3' % (g, t, p0) in metrics,
              "the group's cursors in the consumer lag")
    expect_error(srv.get(group_path(uniq("nobody"))), 404, "group_not_found", "a group without members")


def test_bad_requests_are_refused(ctx):
    srv = ctx.srv
    t = topic_with(srv, 1)
    g = uniq("g")
    members = group_path(g, "members")
    expect_error(srv.req("POST", members, {"topics": ["no-such-topic"]}), 404, "topic_not_found", "unknown topic")
    expect_error(srv.req("POST", members, {}), 400, "invalid_request", "no topics")
    expect_error(srv.req("POST", members, {"topics": [t, t]}), 400, "invalid_request", "a topic twice")
    expect_error(srv.req("POST", members, {"topics": [t], "lease_ms": 10}), 400, "invalid_request",
                 "lease below groups.lease-min")
    expect_error(srv.req("POST", members, {"topics": [t], "lease_ms": 3600000}), 400, "invalid_request",
                 "lease above groups.lease-max")
    expect_error(srv.req("POST", members, {"topics": [t], "start": "middle"}), 400, "invalid_request", "start")
    expect_error(srv.req("POST", members, {"topics": [t], "extra": 1}), 400, "invalid_request", "unknown field")
    expect_error(srv.req("POST", group_path("__x", "members"), {"topics": [t]}), 400, "invalid_name", "group name")
    a = join(srv, g, [t], lease_ms=5000)
    m = a["member_id"]
    expect_error(srv.req("POST", group_path(g, "members", "bad!id", "heartbeat")), 400, "invalid_request",
                 "member id")
    expect_error(srv.req("POST", group_path(g, "members", m, "commit"), {"offsets": []}), 400, "invalid_request",
                 "commit without generation")
    expect_error(srv.req("POST", group_path(g, "members", m, "commit"), {"generation": 1, "offsets": [{"topic": t}]}),
                 400, "invalid_request", "offset without partition")
    expect_error(fetch(srv, g, m, max_wait_ms=99999), 400, "invalid_request", "max_wait_ms too large")
    expect_error(fetch(srv, g, m, wait_ms=1), 400, "invalid_request", "a query parameter of another route")
    expect_error(fetch(srv, g, "m-nobody-1"), 409, "rejoin", "fetch by an unknown member")
    expect_error(srv.req("PUT", group_path(g)), 405, "method_not_allowed", "PUT on a group")


if __name__ == "__main__":
    sys.exit(main(globals(), server_args=SERVER_ARGS))
