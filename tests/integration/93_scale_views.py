# SPDX-License-Identifier: MIT
"""Small answers with many partitions: GET /metrics?per=topic sums every
family labelled by partition by topic (partition gauges, fenced partitions,
consumer lag) and GET /v1/topics?partition_stats=false leaves each topic's
partition_stats out; the defaults stay as the API contract has them, and a
bad value of either parameter is a 400 that changes nothing. And a clean
stop of more partitions than one closer takes (they close on several
threads) keeps every record, as does the start after it that trusts the
snapshots and syncs nothing."""

import os
import re
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (check, eq, expect_error, expect_json, expect_status, local_only, main,  # noqa: E402
                       uniq)

LABELS = r'\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*\}'
METRIC_LINE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(' + LABELS + r')? [-+0-9.eEInfNa]+( -?[0-9]+)?$')


def samples(text, topic):
    """{(name, frozenset of label pairs without topic): value} of the lines of topic."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        check(METRIC_LINE.match(line), "not a Prometheus sample line: %r" % line)
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} (\S+)$', line)
        if not m:
            continue
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"', m.group(2)))
        if labels.pop("topic", None) != topic:
            continue
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(3))
    return out


def setup_topic(srv):
    """A topic of 3 partitions: 2 records in partition 0, 1 in partition 2;
    a consumer 1 behind on partition 0 and on partition 2."""
    t, c = uniq("scale"), uniq("scaler")
    srv.create_topic(t, partitions=3)
    srv.publish(t, [{"value": "a", "partition": 0}, {"value": "b", "partition": 0}, {"value": "c", "partition": 2}])
    body = {"cursors": [{"topic": t, "partition": 0, "offset": 1}, {"topic": t, "partition": 2, "offset": 0}]}
    expect_json(srv.req("POST", "/v1/consumers/%s/cursors" % c, body), 200, "commit")
    return t, c


@local_only("the Kafka backend has no per-partition families of its own to sum")
def test_metrics_per_topic_sums_the_partition_families(ctx):
    srv = ctx.srv
    t, c = setup_topic(srv)
    full_r = srv.get("/metrics")
    expect_status(full_r, 200, "metrics")
    full = samples(full_r.body.decode(), t)
    eq(full[("pulse_partition_high_watermark", frozenset({("partition", "0")}))], 2.0, "hw of partition 0")
    eq(full[("pulse_consumer_lag", frozenset({("consumer", c), ("partition", "2")}))], 1.0, "lag on partition 2")
    size = sum(v for (name, _), v in full.items() if name == "pulse_partition_size_bytes")
    check(size > 0, "the partitions hold bytes")

    r = srv.get("/metrics?per=topic")
    expect_status(r, 200, "metrics?per=topic")
    ct = (r.header("Content-Type") or "").replace(" ", "").lower()
    check(ct.startswith("text/plain") and "version=0.0.4" in ct, "Content-Type %r" % r.header("Content-Type"))
    text = r.body.decode()
    agg = samples(text, t)
    none = frozenset()
    eq(agg.get(("pulse_topic_partitions", none)), 3.0, "partitions of the topic")
    eq(agg.get(("pulse_topic_high_watermark_sum", none)), 3.0, "sum of the high watermarks")
    eq(agg.get(("pulse_topic_log_start_offset_sum", none)), 0.0, "sum of the log starts")
    eq(agg.get(("pulse_topic_size_bytes", none)), size, "bytes of the topic = sum of its partitions'")
    eq(agg.get(("pulse_topic_fenced_partitions", none)), 0.0, "fenced partitions")
    eq(agg.get(("pulse_consumer_lag", frozenset({("consumer", c)}))), 2.0, "lag summed over the topic")
    eq(agg.get(("pulse_published_records_total", none)), 3.0, "per-topic counters are kept")
    labelled = [k for k in agg if any(name == "partition" for name, _ in k[1])]
    eq(labelled, [], "no sample of the topic labelled by partition")
    check("partition=" not in text, "no partition label anywhere in the per-topic scrape")
    check(re.search(r"^pulse_build_info\{", text, re.M), "the gateway's own metrics are still there")
    check(len(agg) < len(full), "fewer samples of the topic (%d vs %d)" % (len(agg), len(full)))


def test_metrics_per_partition_is_the_default_and_a_bad_per_is_refused(ctx):
    srv = ctx.srv
    expect_status(srv.get("/metrics?per=partition"), 200, "metrics?per=partition")
    for bad in ("topics", "", "TOPIC"):
        expect_error(srv.get("/metrics?per=" + bad), 400, ["invalid_request"], "per=%r" % bad)
    expect_error(srv.get("/metrics?pre=topic"), 400, ["invalid_request"], "unknown parameter")


def test_topic_list_without_partition_stats(ctx):
    srv = ctx.srv
    t, _ = setup_topic(srv)

    def find(doc):
        mine = [x for x in doc["topics"] if x["name"] == t]
        eq(len(mine), 1, "topic %s listed once" % t)
        return mine[0]

    full = find(expect_json(srv.get("/v1/topics"), 200, "list"))
    eq(len(full["partition_stats"]), 3, "default: partition_stats of every partition")
    eq(find(expect_json(srv.get("/v1/topics?partition_stats=true"), 200, "list"))["partition_stats"],
       full["partition_stats"], "partition_stats=true is the default")
    doc = expect_json(srv.get("/v1/topics?partition_stats=false"), 200, "list without stats")
    for x in doc["topics"]:
        check("partition_stats" not in x, "partition_stats left out: %r" % x)
    lean = find(doc)
    eq(lean, {k: v for k, v in full.items() if k != "partition_stats"}, "every other field as in the full list")
    for bad in ("no", "0", "", "False"):
        expect_error(srv.get("/v1/topics?partition_stats=" + bad), 400, ["invalid_request"],
                     "partition_stats=%r" % bad)
    # One topic keeps its stats: the parameter belongs to the list only.
    expect_error(srv.get("/v1/topics/%s?partition_stats=false" % t), 400, ["invalid_request"], "on one topic")


@local_only("partition logs and their closers are the local backend's")
def test_a_stop_of_many_written_partitions_keeps_every_record(ctx):
    srv = ctx.new_server()
    srv.start()
    topics = [uniq("many"), uniq("many")]
    for t in topics:
        srv.create_topic(t, partitions=200)
        srv.publish(t, [{"value": "v%d" % p, "partition": p} for p in range(200)])
        srv.publish(t, [{"value": "w%d" % p, "partition": p} for p in range(0, 200, 3)])
    for _ in range(2):  # the second stop is of idle partitions
        srv.restart()
        for t in topics:
            stats = srv.topic(t)["partition_stats"]
            eq([ps["high_watermark"] for ps in stats], [2 if p % 3 == 0 else 1 for p in range(200)],
               "high watermarks of %s after a clean stop" % t)
    doc = srv.fetch_json(topics[1], 198)
    eq([r["value"] for r in doc["records"]], ["v198", "w198"], "records of the last partition in the third")


if __name__ == "__main__":
    sys.exit(main(globals()))
