# SPDX-License-Identifier: MIT
"""What a new user trips over: error messages that say what to do and carry
the numbers, one wording and one status per situation, the partitions'
state under /v1/topics/{t}/partitions, a tolerated trailing slash, and a
start-up log that reads well (docs/API.md "Errors")."""

import os
import re
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import BACKEND, check, eq, expect_error, expect_json, local_only, main, uniq  # noqa: E402


def test_415_says_what_content_type_to_send(ctx):
    srv = ctx.srv
    t = uniq("form")
    srv.create_topic(t)
    # What curl -d sends without -H.
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    err = expect_error(srv.req("POST", "/v1/topics/%s/records" % t, "records=1", headers=form), 415,
                       "unsupported_media_type", "publish as a form")
    check("-H 'Content-Type: application/json'" in err["message"], "says what to send: %r" % err["message"])
    check("application/x-ndjson" in err["message"] and "application/octet-stream" in err["message"],
          "publish also names its other types: %r" % err["message"])
    err = expect_error(srv.req("POST", "/v1/topics", "name=x", headers=form), 415, "unsupported_media_type",
                       "create as a form")
    check("-H 'Content-Type: application/json'" in err["message"] and "ndjson" not in err["message"],
          "create names JSON only: %r" % err["message"])


def test_416_carries_the_numbers_in_its_message_and_fields(ctx):
    srv = ctx.srv
    t = uniq("range")
    srv.create_topic(t)
    srv.publish(t, [{"value": "a"}, {"value": "b"}])
    err = expect_error(srv.fetch(t, 0, offset=1000), 416, "offset_out_of_range", "fetch past the end")
    eq(err["message"], "offset 1000 is beyond the high watermark 2", "fetch 416 wording")
    eq((err["offset"], err["log_start_offset"], err["high_watermark"]), (1000, 0, 2), "fetch 416 fields")
    c = uniq("rc")
    err = expect_error(srv.req("PUT", "/v1/consumers/%s/cursors/%s/0" % (c, t), {"offset": 1000}), 416,
                       "offset_out_of_range", "commit past the end")
    eq(err["message"], "offset 1000 is beyond the high watermark 2", "single PUT: same wording, no 'cursor 0:'")
    eq((err["offset"], err["log_start_offset"], err["high_watermark"]), (1000, 0, 2), "commit 416 fields")
    body = {"cursors": [{"topic": t, "partition": 0, "offset": 1}, {"topic": t, "partition": 0, "offset": 7}]}
    err = expect_error(srv.req("POST", "/v1/consumers/%s/cursors" % c, body), 416, "offset_out_of_range",
                       "batch commit past the end")
    eq(err["message"], "cursors[1]: offset 7 is beyond the high watermark 2", "a batch names the item it was sent")


def test_a_negative_offset_is_400_with_one_wording_everywhere(ctx):
    srv = ctx.srv
    t = uniq("neg")
    srv.create_topic(t)
    c = uniq("negc")
    want = "offset -3 is negative; offsets start at 0"
    err = expect_error(srv.fetch(t, 0, offset=-3), 400, "invalid_request", "fetch")
    eq(err["message"], want, "fetch")
    err = expect_error(srv.req("PUT", "/v1/consumers/%s/cursors/%s/0" % (c, t), {"offset": -3}), 400,
                       "invalid_request", "PUT")
    eq(err["message"], want, "PUT")
    err = expect_error(srv.req("POST", "/v1/consumers/%s/cursors" % c,
                               {"cursors": [{"topic": t, "partition": 0, "offset": -3}]}), 400, "invalid_request",
                       "batch")
    eq(err["message"], "cursors[0]: " + want, "batch")


def test_partition_not_found_has_one_wording_on_every_route(ctx):
    srv = ctx.srv
    t = uniq("parts")
    srv.create_topic(t, partitions=3)
    one = uniq("one")
    srv.create_topic(one)
    c = uniq("pc")
    want = 'topic "%s" has no partition 7; its partitions are 0 to 2' % t
    cases = [("fetch", srv.fetch(t, 7)),
             ("partition", srv.get("/v1/topics/%s/partitions/7" % t)),
             ("cursor GET", srv.get("/v1/consumers/%s/cursors/%s/7" % (c, t))),
             ("cursor PUT", srv.req("PUT", "/v1/consumers/%s/cursors/%s/7" % (c, t), {"offset": 0}))]
    for what, r in cases:
        err = expect_error(r, 404, "partition_not_found", what)
        eq(err["message"], want, what)
    err = expect_error(srv.req("POST", "/v1/topics/%s/records" % t, {"records": [{"value": "x", "partition": 7}]}),
                       404, "partition_not_found", "publish")
    eq(err["message"], "records[0]: " + want, "publish names the record")
    err = expect_error(srv.req("POST", "/v1/consumers/%s/cursors" % c,
                               {"cursors": [{"topic": t, "partition": 7, "offset": 0}]}), 404,
                       "partition_not_found", "batch commit")
    eq(err["message"], "cursors[0]: " + want, "batch commit names the cursor")
    err = expect_error(srv.fetch(one, 1), 404, "partition_not_found", "one partition")
    eq(err["message"], 'topic "%s" has no partition 1; its only partition is 0' % one, "singular wording")


def test_publish_to_a_missing_topic_says_how_to_create_it(ctx):
    srv = ctx.srv
    name = uniq("nosuch")
    err = expect_error(srv.req("POST", "/v1/topics/%s/records" % name, {"records": [{"value": "x"}]}), 404,
                       "topic_not_found", "publish to a missing topic")
    check("POST /v1/topics" in err["message"] and '{"name": "%s"}' % name in err["message"],
          "says how to create it: %r" % err["message"])
    r = srv.req("POST", "/v1/topics/%s/records?partition=0" % name, b"raw",
                headers={"Content-Type": "application/octet-stream"})
    check("POST /v1/topics" in expect_error(r, 404, "topic_not_found", "octet-stream")["message"],
          "octet-stream publish too")


def test_get_on_the_publish_route_is_the_topic_wide_read(ctx):
    srv = ctx.srv
    t = uniq("get")
    srv.create_topic(t)
    r = srv.get("/v1/topics/%s/records" % t)
    doc = expect_json(r, 200, "GET records of a topic")
    eq([p["partition"] for p in doc["partitions"]], [0], "every partition of the topic")
    r = srv.req("PUT", "/v1/topics/%s/records" % t, {})
    expect_error(r, 405, "method_not_allowed", "PUT records of a topic")
    check({"GET", "POST"} <= {m.strip() for m in r.header("Allow").split(",")}, "Allow: %r" % r.header("Allow"))


def test_partitions_answer_with_their_state(ctx):
    srv = ctx.srv
    t = uniq("state")
    srv.create_topic(t, partitions=2)
    srv.publish(t, [{"value": "a", "partition": 1}, {"value": "b", "partition": 1}])
    doc = expect_json(srv.get("/v1/topics/%s/partitions" % t), 200, "partitions")
    eq(doc["topic"], t, "topic")
    eq([(p["partition"], p["high_watermark"], p["log_start_offset"]) for p in doc["partitions"]],
       [(0, 0, 0), (1, 2, 0)], "positions")
    eq(doc["partitions"], srv.topic(t)["partition_stats"], "the same state as the topic's partition_stats")
    one = expect_json(srv.get("/v1/topics/%s/partitions/1" % t), 200, "partition 1")
    eq(one, dict(doc["partitions"][1], topic=t), "one partition")
    if BACKEND == "local":  # Kafka: log sizes and segments are not read (0)
        check(one["size_bytes"] > 0 and one["segments"] == 1, "size and segments: %r" % one)
    expect_error(srv.get("/v1/topics/%s/partitions" % uniq("missing")), 404, "topic_not_found", "missing topic")
    expect_error(srv.get("/v1/topics/%s/partitions/x" % t), 400, "invalid_request", "bad partition number")


def test_a_trailing_slash_is_tolerated(ctx):
    srv = ctx.srv
    t = uniq("slash")
    expect_json(srv.req("POST", "/v1/topics/", {"name": t}), 201, "create with a trailing slash")
    eq(expect_json(srv.get("/v1/topics/%s/" % t), 200, "get")["name"], t, "topic with a trailing slash")
    srv.publish(t, [{"value": "x"}])
    doc = expect_json(srv.get("/v1/topics/%s/partitions/0/records/" % t), 200, "fetch")
    eq(len(doc["records"]), 1, "fetch with a trailing slash")
    expect_error(srv.get("/v1/topics//"), 404, "not_found", "a doubled slash is not a path")


@local_only("reads the local backend's recovery lines; the Kafka backend logs its own")
def test_start_up_log_reads_well(ctx):
    srv = ctx.new_server(args=["-o", "log.level=info"])
    srv.start()
    srv.create_topic(uniq("log"))
    srv.create_topic(uniq("logs"), partitions=3)
    srv.stop()
    srv.start()
    srv.stop()
    with open(srv.stderr_path, encoding="utf-8", errors="replace") as f:
        second = f.read()
    with open(os.path.join(srv.tmp, "pulsed.1.stderr"), encoding="utf-8", errors="replace") as f:
        first = f.read()
    check(re.search(r"created with 1 partition$", first, re.M), "singular at create: %s" % first[-800:])
    check(re.search(r"created with 3 partitions$", first, re.M), "plural at create")
    check("recovered 0 topics, 0 partitions" in first, "empty start: %s" % first[-800:])
    check("recovered 2 topics, 4 partitions" in second and "0 partitions repaired" in second,
          "restart summary: %s" % second[-800:])
    check("(s)" not in first + second, "no '(s)' in the log:\n%s" % (first + second)[-1500:])
    # Opening brand-new partitions is routine: their recovery lines are debug.
    check("recover:" not in first, "no recovery lines at info for new partitions:\n%s" % first[-1500:])


if __name__ == "__main__":
    sys.exit(main(globals()))
