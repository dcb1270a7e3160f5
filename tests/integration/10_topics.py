# SPDX-License-Identifier: MIT
"""Topics: create, list, get, patch, delete, and every validation rule of the
create and patch bodies (spec "Topics" plus the shared decisions on the topic
object).  A rejected request must leave the topic list untouched."""

import os
import re
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (eq, check, expect_json, expect_error, expect_keys, expect_status,  # noqa: E402
                       is_int, main, quote_path, uniq, BACKEND, local_only)

TOPIC_KEYS = ["name", "partitions", "cleanup", "retention_ms", "retention_bytes",
              "segment_bytes", "created_at", "partition_stats", "compression"]
STAT_KEYS = ["partition", "log_start_offset", "high_watermark", "size_bytes", "segments"]
RFC3339_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def check_topic_object(t, name, partitions, what):
    expect_keys(t, TOPIC_KEYS, what)
    eq(t["name"], name, what + " name")
    eq(t["partitions"], partitions, what + " partitions")
    check(t["cleanup"] in ("delete", "compact"), "%s cleanup %r" % (what, t["cleanup"]))
    # The Kafka backend does not read topic configs or creation times:
    # null there (docs/Scaling.md).
    unknown_ok = BACKEND == "kafka"
    for k in ("retention_ms", "retention_bytes", "segment_bytes"):
        check((unknown_ok and t[k] is None) or (is_int(t[k]) and t[k] >= 0),
              "%s %s must be a non-negative integer: %r" % (what, k, t[k]))
    check((unknown_ok and t["created_at"] is None)
          or (isinstance(t["created_at"], str) and RFC3339_MS.match(t["created_at"])),
          "%s created_at must be RFC 3339 UTC with milliseconds: %r" % (what, t["created_at"]))
    eq(len(t["partition_stats"]), partitions, what + " number of partition_stats")
    for i, ps in enumerate(t["partition_stats"]):
        expect_keys(ps, STAT_KEYS, "%s partition_stats[%d]" % (what, i))
        eq(ps["partition"], i, "%s partition_stats[%d].partition" % (what, i))
        for k in STAT_KEYS:
            check(is_int(ps[k]) and ps[k] >= 0, "%s partition_stats[%d].%s: %r" % (what, i, k, ps[k]))
        check(ps["log_start_offset"] <= ps["high_watermark"], "%s log start above HW" % what)


def test_create_with_only_a_name_uses_the_defaults(ctx):
    srv = ctx.srv
    name = uniq("defaults")
    r = srv.req("POST", "/v1/topics", {"name": name})
    t = expect_json(r, 201, "create")
    check_topic_object(t, name, 1, "created topic")
    eq(t["cleanup"], "delete", "default cleanup")
    if BACKEND == "local":  # Kafka: configs are not read back (null)
        eq(t["retention_ms"], 7 * 24 * 3600 * 1000, "default retention_ms (7d)")
        eq(t["retention_bytes"], 0, "default retention_bytes")
        eq(t["segment_bytes"], 512 * 1024 * 1024, "default segment_bytes (512 MiB)")
    ps = t["partition_stats"][0]
    eq((ps["log_start_offset"], ps["high_watermark"]), (0, 0), "new partition offsets")


@local_only("topic configs (cleanup, retention, segment size) are not read back from Kafka")
def test_create_echoes_every_given_field(ctx):
    srv = ctx.srv
    name = uniq("full")
    body = {"name": name, "partitions": 3, "cleanup": "compact", "retention_ms": 1234,
            "retention_bytes": 99999, "segment_bytes": 1024}
    t = expect_json(srv.req("POST", "/v1/topics", body), 201, "create")
    check_topic_object(t, name, 3, "created topic")
    for k in ("cleanup", "retention_ms", "retention_bytes", "segment_bytes"):
        eq(t[k], body[k], k)
    got = srv.topic(name)
    check_topic_object(got, name, 3, "GET topic")
    for k in ("name", "partitions", "cleanup", "retention_ms", "retention_bytes",
              "segment_bytes", "created_at"):
        eq(got[k], t[k], "GET %s equals the create answer" % k)


@local_only("topic configs (cleanup, retention, segment size) are not read back from Kafka")
def test_zero_retention_disables_the_axis_and_is_accepted(ctx):
    t = ctx.srv.create_topic(uniq("zero"), retention_ms=0, retention_bytes=0)
    eq((t["retention_ms"], t["retention_bytes"]), (0, 0), "zero retention")


def test_partition_and_segment_bounds_are_inclusive(ctx):
    srv = ctx.srv
    t = srv.create_topic(uniq("p256"), partitions=256)
    check_topic_object(t, t["name"], 256, "256 partitions")
    t = srv.create_topic(uniq("seg"), segment_bytes=2147483647)
    if BACKEND == "local":  # Kafka: configs are not read back (null)
        eq(t["segment_bytes"], 2147483647, "max segment_bytes")


def test_name_rule_accepts_every_allowed_character_and_249_chars(ctx):
    srv = ctx.srv
    for name in ("AZaz09._-" + uniq("x"), "a", "x" * 249, "a..b", "_single", "-dash"):
        r = srv.req("POST", "/v1/topics", {"name": name})
        t = expect_json(r, 201, "create %r" % name[:40])
        eq(t["name"], name, "name")
        expect_json(srv.get("/v1/topics/" + quote_path(name)), 200, "GET %r" % name[:40])


def test_duplicate_name_is_409_and_keeps_the_original(ctx):
    srv = ctx.srv
    name = uniq("dup")
    srv.create_topic(name, partitions=2)
    expect_error(srv.req("POST", "/v1/topics", {"name": name, "partitions": 5}), 409,
                 "topic_exists", "second create")
    eq(srv.topic(name)["partitions"], 2, "partitions after the rejected create")


def test_invalid_names_are_400_invalid_name(ctx):
    srv = ctx.srv
    before = srv.topics()
    for bad in ("", ".", "..", "__internal", "__", "a/b", "a b", "a\\b", "x" * 250,
                "caf\u00e9", "a:b", "a%2Fb", "a\nb", "*"):
        r = srv.req("POST", "/v1/topics", {"name": bad})
        expect_error(r, 400, "invalid_name", "create %r" % bad[:40])
    eq(srv.topics(), before, "topic list after rejected names")


def test_create_validation_rejects_bad_fields_with_400(ctx):
    srv = ctx.srv
    n = uniq("val")
    cases = [
        {},
        {"name": 5},
        {"name": None},
        {"name": ["a"]},
        {"name": n, "partitions": 0},
        {"name": n, "partitions": 257},
        {"name": n, "partitions": -1},
        {"name": n, "partitions": "3"},
        {"name": n, "partitions": 1.5},
        {"name": n, "partitions": True},
        {"name": n, "partitions": None},
        {"name": n, "cleanup": "archive"},
        {"name": n, "cleanup": 1},
        {"name": n, "retention_ms": -1},
        {"name": n, "retention_ms": "1d"},
        {"name": n, "retention_bytes": -1},
        {"name": n, "retention_bytes": 1.0},
        {"name": n, "segment_bytes": 1023},
        {"name": n, "segment_bytes": 2147483648},
        {"name": n, "segment_bytes": 0},
        {"name": n, "unknown_field": 1},
        {"name": n, "Partitions": 2},
    ]
    before = srv.topics()
    for body in cases:
        expect_error(srv.req("POST", "/v1/topics", body), 400, "invalid_request", "create %r" % body)
    eq(srv.topics(), before, "topic list after rejected creates")
    expect_error(srv.get("/v1/topics/" + n), 404, "topic_not_found", "none of them created")


def test_list_is_sorted_by_name_and_holds_topic_objects(ctx):
    srv = ctx.srv
    names = [uniq("list-c"), uniq("list-a"), uniq("list-b")]
    for nm in names:
        srv.create_topic(nm, partitions=2)
    doc = srv.topics()
    expect_keys(doc, ["topics"], "list")
    got = [t["name"] for t in doc["topics"]]
    eq(got, sorted(got), "topic names sorted")
    for nm in names:
        check(nm in got, "list contains %s" % nm)
    for t in doc["topics"]:
        check_topic_object(t, t["name"], t["partitions"], "list item %s" % t["name"])


def test_get_unknown_topic_is_404_topic_not_found(ctx):
    expect_error(ctx.srv.get("/v1/topics/no-such-topic-here"), 404, "topic_not_found", "GET")


@local_only("retention changes need DescribeConfigs/AlterConfigs, which wait for a controller the mock cluster never names; on the mock the Kafka backend answers 406 (92_kafka.py)")
def test_patch_changes_retention_only(ctx):
    srv = ctx.srv
    name = uniq("patch")
    t0 = srv.create_topic(name, partitions=2, retention_ms=1000, retention_bytes=2000)
    r = srv.req("PATCH", "/v1/topics/" + name, {"retention_ms": 5000})
    t = expect_json(r, 200, "patch retention_ms")
    check_topic_object(t, name, 2, "patch answer")
    eq((t["retention_ms"], t["retention_bytes"]), (5000, 2000), "after patch 1")
    t = expect_json(srv.req("PATCH", "/v1/topics/" + name, {"retention_bytes": 0}), 200, "patch 2")
    eq((t["retention_ms"], t["retention_bytes"]), (5000, 0), "after patch 2")
    t = expect_json(srv.req("PATCH", "/v1/topics/" + name,
                            {"retention_ms": 0, "retention_bytes": 77}), 200, "patch 3")
    eq((t["retention_ms"], t["retention_bytes"]), (0, 77), "after patch 3")
    got = srv.topic(name)
    eq((got["retention_ms"], got["retention_bytes"]), (0, 77), "GET after patches")
    for k in ("created_at", "segment_bytes", "cleanup", "partitions"):
        eq(got[k], t0[k], "%s unchanged by patch" % k)


@local_only("retention changes need DescribeConfigs/AlterConfigs, which wait for a controller the mock cluster never names; on the mock the Kafka backend answers 406 (92_kafka.py)")
def test_patch_rejects_other_fields_and_bad_values(ctx):
    srv = ctx.srv
    name = uniq("patchbad")
    srv.create_topic(name, retention_ms=1000)
    before = srv.topic(name)
    for body in ({}, {"partitions": 2}, {"cleanup": "compact"}, {"segment_bytes": 4096},
                 {"name": "other"}, {"retention_ms": -1}, {"retention_bytes": -5},
                 {"retention_ms": "10"}, {"retention_ms": 10, "bogus": 1}, {"retention_ms": None}):
        expect_error(srv.req("PATCH", "/v1/topics/" + name, body), 400, "invalid_request",
                     "patch %r" % body)
    eq(srv.topic(name), before, "topic after rejected patches")
    expect_error(srv.req("PATCH", "/v1/topics/no-such-topic-here", {"retention_ms": 1}), 404,
                 "topic_not_found", "patch unknown topic")


@local_only("recreates a deleted topic's name, which the mock cluster cannot do (it only hides deleted topics; the delete itself is tested by 92_kafka.py)")
def test_delete_is_204_and_removes_topic_and_data(ctx):
    srv = ctx.srv
    name = uniq("del")
    srv.create_topic(name)
    srv.publish(name, [{"value": "a"}, {"value": "b"}])
    r = srv.req("DELETE", "/v1/topics/" + name)
    expect_status(r, 204, "delete")
    eq(r.body, b"", "204 body")
    expect_error(srv.get("/v1/topics/" + name), 404, "topic_not_found", "GET after delete")
    check(name not in [t["name"] for t in srv.topics()["topics"]], "deleted topic not listed")
    expect_error(srv.req("DELETE", "/v1/topics/" + name), 404, "topic_not_found", "second delete")
    expect_error(srv.fetch(name, 0), 404, "topic_not_found", "fetch after delete")
    # The name is free again and the new topic starts empty at offset 0.
    t = srv.create_topic(name)
    eq(t["partition_stats"][0]["high_watermark"], 0, "recreated topic HW")
    eq(srv.publish(name, [{"value": "c"}]), [(0, 0)], "first offset of recreated topic")
    doc = srv.fetch_json(name, 0)
    eq([r["value"] for r in doc["records"]], ["c"], "recreated topic holds only new data")


def test_delete_unknown_topic_is_404(ctx):
    expect_error(ctx.srv.req("DELETE", "/v1/topics/never-created-xyz"), 404, "topic_not_found", "delete")


def test_partition_stats_follow_publishes(ctx):
    srv = ctx.srv
    name = uniq("stats")
    srv.create_topic(name, partitions=2)
    srv.publish(name, [{"value": "x" * 100, "partition": 1}] * 3)
    t = srv.topic(name)
    ps = t["partition_stats"]
    eq((ps[0]["high_watermark"], ps[1]["high_watermark"]), (0, 3), "HW per partition")
    if BACKEND == "local":  # Kafka: log sizes and segments are not read (0)
        check(ps[1]["size_bytes"] >= 300, "size_bytes counts stored bytes: %r" % ps[1])
        check(ps[1]["segments"] >= 1, "segments >= 1 after a publish: %r" % ps[1])


if __name__ == "__main__":
    sys.exit(main(globals()))
