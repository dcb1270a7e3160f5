# SPDX-License-Identifier: MIT
"""Consumer groups under the awkward timings of real deployments: a
consumed topic deleted and created again between two looks of the group
(the new topic's records must not be skipped because of where the old
topic's member had got to), and the like."""

import gzip
import json
import os
import sys
import threading
import time
import urllib.parse

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pulsetest  # noqa: E402


from grouptest import commit, describe, fetch, heartbeat, join  # noqa: E402
from pulsetest import check, eq, expect_error, expect_json, expect_status, main, uniq  # noqa: E402

SERVER_ARGS = ["-o", "groups.lease-min=100ms"]


@pulsetest.local_only("recreates a deleted topic's name, which the mock cluster cannot do (it only hides deleted topics)")
def test_recreated_topic_is_read_from_its_start(ctx):
    srv = ctx.srv
    t = uniq("gr")
    g = uniq("g")
    srv.create_topic(t, partitions=1)
    srv.publish(t, [{"value": "old-%d" % i} for i in range(50)])
    m = join(srv, g, [t], lease_ms=30000)["member_id"]
    doc = expect_json(fetch(srv, g, m, max_records=1000), 200, "fetch the old topic")
    eq(len(doc["records"]), 50, "records of the old topic")
    # Delete and create again at once (no group tick in between, usually),
    # then publish fewer records than the old topic had.
    expect_status(srv.req("DELETE", "/v1/topics/" + t), 204, "delete")
    srv.create_topic(t, partitions=1)
    srv.publish(t, [{"value": "new-%d" % i} for i in range(5)])
    got = []
    for _ in range(5):
        doc = expect_json(fetch(srv, g, m, max_records=1000, max_wait_ms=200), 200, "fetch the new topic")
        got += [r["value"] for r in doc["records"]]
        if len(got) >= 5:
            break
    eq(got, ["new-%d" % i for i in range(5)], "the new topic's records, from its start")


@pulsetest.local_only("holds a commit with the local backend's cursor_commit_write failpoint")
def test_a_member_that_left_during_its_commit_is_gone(ctx):
    # Its commit completes first (the hand-over waits for it), but the
    # member has left: a later call of it is told to rejoin and cannot keep
    # it in the group (renewing a lease it gave up, holding a member slot).
    srv = ctx.new_server(args=SERVER_ARGS, env={"PULSE_FAILPOINT_DELAY": "cursor_commit_write:1000"}).start()
    t = uniq("gl")
    g = uniq("g")
    srv.create_topic(t, partitions=2)
    srv.publish(t, [{"value": "x", "partition": 0}])
    j = join(srv, g, [t], lease_ms=2000)
    m = j["member_id"]
    done = {}
    th = threading.Thread(target=lambda: done.update(
        r=commit(srv, g, m, j["generation"], [{"topic": t, "partition": 0, "offset": 1}])))
    th.start()
    time.sleep(0.3)  # the commit is being written
    expect_status(srv.req("DELETE", "/v1/groups/%s/members/%s" % (g, m)), 204, "leave during the commit")
    expect_error(heartbeat(srv, g, m), 409, "rejoin", "a heartbeat after leaving")
    th.join()
    expect_json(done["r"], 200, "the commit made before leaving completes")
    expect_error(heartbeat(srv, g, m), 409, "rejoin", "a heartbeat after the commit")
    expect_error(fetch(srv, g, m), 409, "rejoin", "a fetch after leaving")
    n = join(srv, g, [t], lease_ms=2000)["member_id"]
    members = [x["member_id"] for x in describe(srv, g)["members"]]
    eq(members, [n], "only the new member is in the group")
    srv.stop()


def test_a_group_over_many_topics_assigns_every_partition(ctx):
    # Members may consume different topics: a group may span more topics
    # than one member may name. Every one of them must be assigned.
    srv = ctx.srv
    g = uniq("g")
    topics = ["gm%03d-%s" % (i, uniq("t")) for i in range(5 * 16)]
    for t in topics:
        srv.create_topic(t, partitions=1)
    members = [join(srv, g, topics[k * 16:(k + 1) * 16], lease_ms=30000) for k in range(5)]
    for k, j in enumerate(members):
        got = sorted(p["topic"] for p in expect_json(heartbeat(srv, g, j["member_id"]), 200, "heartbeat")["partitions"])
        eq(got, sorted(topics[k * 16:(k + 1) * 16]), "member %d owns the partitions of its 16 topics" % k)


def test_head_on_the_group_fetch_moves_no_position(ctx):
    # HEAD answers what GET would without a body: records it did not hand
    # out must still come with the member's next GET, or a commit of that
    # GET's positions would pass over them unprocessed.
    srv = ctx.srv
    t = uniq("gh")
    g = uniq("g")
    srv.create_topic(t, partitions=1)
    srv.publish(t, [{"value": "r%d" % i} for i in range(10)])
    m = join(srv, g, [t], lease_ms=30000)["member_id"]
    r = srv.req("HEAD", "/v1/groups/%s/members/%s/records?max_records=5" % (g, m))
    expect_status(r, 200, "HEAD on the group fetch")
    eq(r.body, b"", "HEAD has no body")
    doc = expect_json(fetch(srv, g, m, max_records=100), 200, "GET after HEAD")
    eq([x["value"] for x in doc["records"]], ["r%d" % i for i in range(10)], "every record, from the first")


def test_group_fetch_answers_like_every_json_answer(ctx):
    # docs/API.md "Responses": every JSON body ends with one newline, and
    # one of 1 KiB or more is gzip'ed when the client accepts it.
    srv = ctx.srv
    t = uniq("gz")
    g = uniq("g")
    srv.create_topic(t, partitions=1)
    srv.publish(t, [{"value": "v%d-" % i + "x" * 100} for i in range(40)])
    m = join(srv, g, [t], lease_ms=30000)["member_id"]
    path = "/v1/groups/%s/members/%s/records" % (g, m)
    r = srv.req("GET", path + "?max_records=1")
    expect_status(r, 200, "group fetch")
    check(r.body.endswith(b"}\n") and not r.body.endswith(b"\n\n"), "ends with one newline: %r" % r.body[-40:])
    resume = urllib.parse.quote(json.loads(r.body)["resume"])
    r = srv.req("GET", path + "?max_records=100&resume=" + resume, headers={"Accept-Encoding": "gzip"})
    expect_status(r, 200, "group fetch, gzip accepted")
    eq(r.header("Content-Encoding"), "gzip", "a 4 KiB answer is gzip'ed")
    doc = json.loads(gzip.decompress(r.body))
    eq(len(doc["records"]), 39, "the records after the first")
    r = srv.req("GET", path + "?max_wait_ms=0&resume=" + urllib.parse.quote(doc["resume"]))
    check(r.body.endswith(b"}\n"), "an answer without records ends with a newline too: %r" % r.body[-40:])


if __name__ == "__main__":
    sys.exit(main(globals(), server_args=SERVER_ARGS))
