# SPDX-License-Identifier: MIT
"""Consumers and cursors: single commits (PUT), atomic batch commits (POST,
all or none), reading one cursor or a consumer's list with high watermark and
lag, the consumer list, deleting a consumer, and the cursor cleanup that
deleting a topic implies.  Every rejected commit leaves the cursors as they
were."""

import os
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (check, eq, expect_error, expect_json, expect_keys, expect_status,  # noqa: E402
                       main, uniq, BACKEND, local_only)


def cursor_path(c, t, p):
    return "/v1/consumers/%s/cursors/%s/%s" % (c, t, p)


def put(srv, c, t, p, body):
    return srv.req("PUT", cursor_path(c, t, p), body)


def topic_with(srv, counts):
    t = uniq("ct")
    srv.create_topic(t, partitions=len(counts))
    for p, n in enumerate(counts):
        if n:
            srv.publish(t, [{"value": "v%d" % i, "partition": p} for i in range(n)])
    return t


def test_put_commits_and_get_reports_lag(ctx):
    srv = ctx.srv
    t = topic_with(srv, [10, 4])
    c = uniq("c")
    doc = expect_json(put(srv, c, t, 0, {"offset": 7}), 200, "PUT")
    eq(doc, {"consumer": c, "topic": t, "partition": 0, "offset": 7}, "PUT answer")
    doc = expect_json(srv.get(cursor_path(c, t, 0)), 200, "GET one")
    eq(doc, {"consumer": c, "topic": t, "partition": 0, "offset": 7, "high_watermark": 10, "lag": 3},
       "GET one answer")
    # Moving the cursor backwards is allowed; the last commit wins.
    expect_json(put(srv, c, t, 0, {"offset": 2}), 200, "PUT back")
    eq(expect_json(srv.get(cursor_path(c, t, 0)), 200, "GET")["offset"], 2, "cursor moved back")
    # Lag follows the high watermark.
    srv.publish(t, [{"value": "more", "partition": 0}])
    eq(expect_json(srv.get(cursor_path(c, t, 0)), 200, "GET")["lag"], 9, "lag after a publish")


def test_offset_bounds_are_zero_and_high_watermark_inclusive(ctx):
    srv = ctx.srv
    t = topic_with(srv, [5, 0])
    c = uniq("bounds")
    expect_json(put(srv, c, t, 0, {"offset": 0}), 200, "offset 0")
    expect_json(put(srv, c, t, 0, {"offset": 5}), 200, "offset = HW")
    expect_json(put(srv, c, t, 1, {"offset": 0}), 200, "offset 0 on an empty partition")
    doc = expect_json(srv.get(cursor_path(c, t, 1)), 200, "GET")
    eq((doc["offset"], doc["high_watermark"], doc["lag"]), (0, 0, 0), "empty partition cursor")
    for off in (6, 1000):
        err = expect_error(put(srv, c, t, 0, {"offset": off}), 416, "offset_out_of_range", "offset %d" % off)
        eq((err.get("offset"), err.get("log_start_offset"), err.get("high_watermark")), (off, 0, 5),
           "416 positions")
        eq(err["message"], "offset %d is beyond the high watermark 5" % off, "416 wording (no batch index)")
    # A negative offset is malformed, not out of range: 400, as on fetch.
    err = expect_error(put(srv, c, t, 0, {"offset": -1}), 400, "invalid_request", "offset -1")
    eq(err["message"], "offset -1 is negative; offsets start at 0", "negative offset wording")
    eq(expect_json(srv.get(cursor_path(c, t, 0)), 200, "GET")["offset"], 5, "cursor unchanged by 416")


def test_put_rejects_bad_bodies_and_targets(ctx):
    srv = ctx.srv
    t = topic_with(srv, [3])
    c = uniq("badput")
    expect_json(put(srv, c, t, 0, {"offset": 1}), 200, "baseline")
    for body in ({}, {"offset": "2"}, {"offset": 1.5}, {"offset": None}, {"offset": True},
                 {"offset": 2, "extra": 1}, {"offset": 2, "topic": t}, [2]):
        expect_error(put(srv, c, t, 0, body), 400, "invalid_request", "PUT %r" % (body,))
    expect_error(srv.req("PUT", cursor_path(c, t, 0), b'{"offset": 2, "offset": 3}',
                         headers={"Content-Type": "application/json"}), 400, "invalid_request",
                 "duplicate key")
    expect_error(srv.req("PUT", cursor_path(c, t, 0), b"offset=2",
                         headers={"Content-Type": "application/x-www-form-urlencoded"}), 415,
                 "unsupported_media_type", "form body")
    expect_error(put(srv, c, "no-such-topic-xyz", 0, {"offset": 0}), 404, "topic_not_found", "unknown topic")
    expect_error(put(srv, c, t, 1, {"offset": 0}), 404, "partition_not_found", "partition 1 of 1")
    expect_error(put(srv, c, t, "x", {"offset": 0}), 400, "invalid_request", "partition 'x'")
    expect_error(put(srv, c, t, "-1", {"offset": 0}), 400, "invalid_request", "partition '-1'")
    for bad in ("__c", ".", "..", "a%20b", "x" * 250):
        expect_error(put(srv, bad, t, 0, {"offset": 0}), 400, "invalid_name", "consumer %r" % bad[:20])
    eq(expect_json(srv.get(cursor_path(c, t, 0)), 200, "GET")["offset"], 1, "cursor unchanged")
    if BACKEND == "local":  # Kafka: no consumer list on the mock (test_consumer_list_and_delete)
        check(all(not n.startswith("__") for n in srv.get("/v1/consumers").json()["consumers"]),
              "no rejected consumer was created")


def test_get_unknown_cursor_topic_or_partition(ctx):
    srv = ctx.srv
    t = topic_with(srv, [1])
    c = uniq("unk")
    expect_error(srv.get(cursor_path(c, t, 0)), 404, "cursor_not_found", "never committed")
    expect_error(srv.get(cursor_path(c, "no-such-topic-xyz", 0)), 404, "topic_not_found", "unknown topic")
    expect_error(srv.get(cursor_path(c, t, 3)), 404, "partition_not_found", "unknown partition")


def test_batch_commit_applies_all(ctx):
    srv = ctx.srv
    t1 = topic_with(srv, [5, 6])
    t2 = topic_with(srv, [2])
    c = uniq("batch")
    body = {"cursors": [{"topic": t1, "partition": 0, "offset": 5},
                        {"topic": t1, "partition": 1, "offset": 1},
                        {"topic": t2, "partition": 0, "offset": 2}]}
    doc = expect_json(srv.req("POST", "/v1/consumers/%s/cursors" % c, body), 200, "batch commit")
    expect_keys(doc, ["consumer", "cursors"], "batch answer")
    eq(doc["consumer"], c, "consumer")
    eq(doc["cursors"], body["cursors"], "batch answer cursors")
    lst = expect_json(srv.get("/v1/consumers/%s/cursors" % c), 200, "list")
    expect_keys(lst, ["consumer", "cursors"], "list")
    got = sorted((x["topic"], x["partition"], x["offset"], x["high_watermark"], x["lag"])
                 for x in lst["cursors"])
    for x in lst["cursors"]:
        expect_keys(x, ["topic", "partition", "offset", "high_watermark", "lag"], "list item")
    eq(got, sorted([(t1, 0, 5, 5, 0), (t1, 1, 1, 6, 5), (t2, 0, 2, 2, 0)]), "list entries")


def test_batch_commit_is_all_or_none(ctx):
    srv = ctx.srv
    t = topic_with(srv, [5, 5])
    c = uniq("atomic")
    expect_json(srv.req("POST", "/v1/consumers/%s/cursors" % c,
                        {"cursors": [{"topic": t, "partition": 0, "offset": 1},
                                     {"topic": t, "partition": 1, "offset": 1}]}), 200, "baseline")

    def state():
        return expect_json(srv.get("/v1/consumers/%s/cursors" % c), 200, "list")

    before = state()
    bad_batches = [
        ([{"topic": t, "partition": 0, "offset": 3}, {"topic": t, "partition": 1, "offset": 99}],
         416, "offset_out_of_range"),
        ([{"topic": t, "partition": 0, "offset": 3}, {"topic": "no-such-topic-xyz", "partition": 0,
                                                       "offset": 0}], 404, "topic_not_found"),
        ([{"topic": t, "partition": 0, "offset": 3}, {"topic": t, "partition": 7, "offset": 0}],
         404, "partition_not_found"),
        ([{"topic": t, "partition": 0, "offset": 3}, {"topic": t, "partition": 1}], 400, "invalid_request"),
        ([{"topic": t, "partition": 0, "offset": 3}, {"topic": t, "partition": 1, "offset": 2,
                                                       "x": 1}], 400, "invalid_request"),
        ([{"topic": t, "partition": 0, "offset": 3}, {"topic": t, "partition": "1", "offset": 2}],
         400, "invalid_request"),
        ([{"topic": t, "partition": 0, "offset": 3}, {"topic": "__x", "partition": 0, "offset": 0}],
         400, ("invalid_name", "invalid_request")),
        ([], 400, "invalid_request"),
    ]
    for cursors, status, code in bad_batches:
        expect_error(srv.req("POST", "/v1/consumers/%s/cursors" % c, {"cursors": cursors}), status, code,
                     "batch %r" % cursors)
    for body in ({}, {"cursors": {}}, {"cursors": "x"}, {"cursors": [1]}, {"cursors": [], "more": 1}):
        expect_error(srv.req("POST", "/v1/consumers/%s/cursors" % c, body), 400, "invalid_request",
                     "batch body %r" % body)
    eq(state(), before, "cursors unchanged after every rejected batch")


@local_only("listing and deleting consumers needs ListGroups/DeleteGroups, which the mock cluster lacks; on the mock the Kafka backend answers 406")
def test_consumer_list_and_delete(ctx):
    srv = ctx.srv
    t = topic_with(srv, [2])
    a, b = uniq("list-b"), uniq("list-a")
    expect_json(put(srv, a, t, 0, {"offset": 1}), 200, "commit a")
    expect_json(put(srv, b, t, 0, {"offset": 2}), 200, "commit b")
    doc = expect_json(srv.get("/v1/consumers"), 200, "consumers")
    expect_keys(doc, ["consumers"], "consumers")
    names = doc["consumers"]
    eq(names, sorted(names), "consumer names sorted")
    check(a in names and b in names, "both consumers listed: %r" % names)
    r = srv.req("DELETE", "/v1/consumers/" + a)
    expect_status(r, 204, "delete consumer")
    eq(r.body, b"", "204 body")
    expect_error(srv.get(cursor_path(a, t, 0)), 404, "cursor_not_found", "cursor after delete")
    eq(expect_json(srv.get("/v1/consumers/%s/cursors" % a), 200, "list after delete"),
       {"consumer": a, "cursors": []}, "empty list after delete")
    check(a not in srv.get("/v1/consumers").json()["consumers"], "deleted consumer not listed")
    eq(expect_json(srv.get(cursor_path(b, t, 0)), 200, "other consumer")["offset"], 2,
       "other consumer untouched")
    expect_status(srv.req("DELETE", "/v1/consumers/" + a), 204, "delete again is idempotent")
    expect_status(srv.req("DELETE", "/v1/consumers/never-existed-xyz"), 204, "delete unknown")


def test_unknown_consumer_has_an_empty_cursor_list(ctx):
    c = uniq("ghost")
    eq(expect_json(ctx.srv.get("/v1/consumers/%s/cursors" % c), 200, "list"),
       {"consumer": c, "cursors": []}, "empty list")


@local_only("recreates a deleted topic's name, which the mock cluster cannot do (it only hides deleted topics)")
def test_deleting_a_topic_removes_its_cursors(ctx):
    srv = ctx.srv
    t = topic_with(srv, [3])
    keep = topic_with(srv, [3])
    c = uniq("deltopic")
    expect_json(put(srv, c, t, 0, {"offset": 2}), 200, "commit")
    expect_json(put(srv, c, keep, 0, {"offset": 1}), 200, "commit other")
    expect_status(srv.req("DELETE", "/v1/topics/" + t), 204, "delete topic")
    lst = expect_json(srv.get("/v1/consumers/%s/cursors" % c), 200, "list")
    eq([x["topic"] for x in lst["cursors"]], [keep], "only the surviving topic's cursor")
    srv.create_topic(t)
    expect_error(srv.get(cursor_path(c, t, 0)), 404, "cursor_not_found",
                 "a recreated topic does not inherit old cursors")


if __name__ == "__main__":
    sys.exit(main(globals()))
