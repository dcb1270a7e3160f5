#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What only the Kafka backend does (broker.backend = kafka), over HTTP:
raw fetch answers 406, lookups of unknown topics create nothing, a topic
deleted on the mock cluster is 404 everywhere after, retention changes and
consumer list/delete answer 406 on the mock (unknown topics 404),
librdkafka's statistics in /metrics, secrets of the pass-through hidden in
/v1/broker, and a cluster that cannot be reached: /readyz 503 and every
call 503 with Retry-After within kafka.request-timeout, never a hang;
publishes and fetches of topics the gateway's cache does not know wait
for a refresh without holding an HTTP worker (a second gateway in front
of another pulsed's mock cluster, which SIGSTOP silences); a fetch by time
on the mock is a 406 that says so.

Every server here runs the Kafka backend over librdkafka's mock cluster
(kafka.mock-brokers=3), whatever PULSE_TEST_BACKEND says."""

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (KAFKA_ARGS, check, eq, expect_error, expect_json, free_port, main,  # noqa: E402
                       pulsed_path, raw_request, srcdir, uniq, wait_until)

SECRET_ARGS = ["-o", "kafka.property.sasl.password=s3cret-value", "-o", "kafka.property.linger.ms=2"]


def test_raw_fetch_is_406_naming_json(ctx):
    srv = ctx.srv
    t = uniq("raw")
    srv.create_topic(t)
    srv.publish(t, [{"value": "a"}])
    for r in (srv.fetch(t, 0, format="raw"), srv.fetch(t, 0, headers={"Accept": "application/vnd.pulse.batches"})):
        err = expect_error(r, 406, "not_acceptable", "raw fetch")
        check("application/json" in err["message"], "the 406 names the JSON form: %r" % err)
    eq([x["value"] for x in srv.fetch_json(t, 0)["records"]], ["a"], "the JSON form serves the record")


def test_a_fetch_by_time_on_the_mock_is_406_naming_time_not_raw_batches(ctx):
    # The mock cluster has no time index (kfetch.c); the 406 must say what
    # cannot be served, not send the client to the JSON form it asked for.
    srv = ctx.srv
    t = uniq("bytime")
    srv.create_topic(t)
    srv.publish(t, [{"value": "a", "timestamp": 1700000000000}])
    err = expect_error(srv.fetch(t, 0, timestamp=1700000000000), 406, "not_acceptable", "fetch by time")
    check("time" in err["message"] and "raw" not in err["message"], "the 406 names time: %r" % err)


def test_lookups_of_unknown_topics_create_nothing(ctx):
    # On the mock (and on clusters with auto.create.topics.enable) a
    # metadata request naming a topic creates it: the gateway never names one
    # it does not know.
    srv = ctx.srv
    t = uniq("ghost")
    expect_error(srv.get("/v1/topics/" + t), 404, "topic_not_found", "GET")
    expect_error(srv.fetch(t, 0), 404, "topic_not_found", "fetch")
    expect_error(srv.req("POST", "/v1/topics/%s/records" % t, {"records": [{"value": "x"}]}), 404,
                 "topic_not_found", "publish")
    expect_error(srv.req("PUT", "/v1/consumers/c/cursors/%s/0" % t, {"offset": 0}), 404, "topic_not_found",
                 "commit")
    time.sleep(1.2)  # past a metadata refresh
    check(t not in [x["name"] for x in srv.topics()["topics"]], "the unknown topic was created")


def test_a_deleted_topic_answers_404_everywhere_and_the_mock_refuses_what_it_cannot_serve(ctx):
    # The mock cannot delete a topic; the gateway hides it there (kadmin.c)
    # and then serves it as deleted. Retention changes and consumer
    # list/delete are 406 on the mock only (docs/Scaling.md "Tests").
    srv = ctx.srv
    t = uniq("del")
    srv.create_topic(t, partitions=2)
    srv.publish(t, [{"value": "a", "partition": 0}, {"value": "b", "partition": 0}])
    expect_json(srv.req("PUT", "/v1/consumers/dc/cursors/%s/0" % t, {"offset": 1}), 200, "cursor")
    r = srv.req("DELETE", "/v1/topics/" + t)
    eq(r.status, 204, "delete on the mock (%r)" % r.body[:200])
    expect_error(srv.get("/v1/topics/" + t), 404, "topic_not_found", "GET after delete")
    check(t not in [x["name"] for x in srv.topics()["topics"]], "deleted topic still listed")
    expect_error(srv.req("DELETE", "/v1/topics/" + t), 404, "topic_not_found", "second delete")
    expect_error(srv.fetch(t, 0), 404, "topic_not_found", "fetch after delete")
    expect_error(srv.req("POST", "/v1/topics/%s/records" % t, {"records": [{"value": "x"}]}), 404,
                 "topic_not_found", "publish after delete")
    eq(expect_json(srv.get("/v1/consumers/dc/cursors"), 200, "cursors")["cursors"], [], "cursor of a deleted topic")
    err = expect_error(srv.req("POST", "/v1/topics", {"name": t}), 406, "not_acceptable", "recreate on the mock")
    check("deleted" in err["message"], "the 406 says why: %r" % err)
    keep = uniq("keep")
    srv.create_topic(keep, partitions=2)
    expect_error(srv.req("PATCH", "/v1/topics/" + keep, {"retention_ms": 1000}), 406, "not_acceptable",
                 "retention change on the mock")
    expect_error(srv.req("PATCH", "/v1/topics/never-" + keep, {"retention_ms": 1}), 404, "topic_not_found",
                 "patch unknown")
    expect_error(srv.req("DELETE", "/v1/topics/never-" + keep), 404, "topic_not_found", "delete unknown")
    expect_error(srv.get("/v1/consumers"), 406, "not_acceptable", "consumer list on the mock")
    expect_error(srv.req("DELETE", "/v1/consumers/dc"), 406, "not_acceptable", "consumer delete on the mock")


def test_topics_show_null_for_configs_the_gateway_does_not_read(ctx):
    t = ctx.srv.create_topic(uniq("cfg"), partitions=3, retention_ms=5000)
    eq((t["retention_ms"], t["retention_bytes"], t["segment_bytes"], t["created_at"]), (None, None, None, None),
       "configs not read back")
    eq(t["partitions"], 3, "partitions")


def test_metrics_carry_librdkafka_statistics(ctx):
    srv = ctx.srv
    t = uniq("m")
    srv.create_topic(t)
    srv.publish(t, [{"value": "x"}] * 3)

    def text():
        return raw_request(srv.port, "GET", "/metrics").body.decode()
    check(wait_until(lambda: "pulse_kafka_broker_rtt_seconds{" in text(), 12),
          "no broker round-trip times in /metrics")
    m = text()
    for name in ("pulse_kafka_up 1", "pulse_kafka_published_records_total", "pulse_kafka_producer_queue_messages",
                 "pulse_kafka_tx_errors_total", "pulse_kafka_broker_up{"):
        check(name in m, "/metrics lacks %s" % name)


def test_broker_config_hides_secret_properties(ctx):
    srv = ctx.new_server(args=KAFKA_ARGS + SECRET_ARGS).start()
    cfg = expect_json(srv.get("/v1/broker"), 200, "broker")["config"]
    eq(cfg.get("broker.backend"), "kafka", "backend")
    eq(cfg.get("kafka.property.sasl.password"), "(hidden)", "password hidden")
    eq(cfg.get("kafka.property.linger.ms"), "2", "other properties shown")
    check("s3cret-value" not in srv.get("/v1/broker").body.decode(), "the secret leaked")


def test_a_cluster_that_cannot_be_reached_answers_503_with_retry_after(ctx):
    # Nothing listens on a port just freed; every call is bounded by 500 ms.
    dead = free_port()
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="pulse-kdead-", dir=ctx.tmp)
    err = open(os.path.join(tmp, "stderr"), "wb")
    proc = subprocess.Popen([pulsed_path(), "--data-dir", os.path.join(tmp, "d"), "--listen", "127.0.0.1:%d" % port,
                             "-o", "log.level=error", "-o", "broker.backend=kafka",
                             "-o", "kafka.bootstrap-servers=127.0.0.1:%d" % dead,
                             "-o", "kafka.request-timeout=500ms"], stdout=subprocess.DEVNULL, stderr=err)
    try:
        def up():
            try:
                return raw_request(port, "GET", "/healthz", timeout=2).status == 200
            except OSError:
                return False
        check(wait_until(up, 30), "pulsed did not start without its cluster")

        def attached():
            # 503 "not ready" until the backend is open; then 503 naming the cluster.
            r = raw_request(port, "GET", "/readyz", timeout=5)
            return r.status == 503 and b"cluster cannot be reached" in r.body
        check(wait_until(attached, 30), "/readyz must answer 503 naming the cluster")
        calls = [("GET", "/v1/topics", None), ("POST", "/v1/topics", {"name": "t"}),
                 ("POST", "/v1/topics/t/records", {"records": [{"value": "x"}]}),
                 ("GET", "/v1/topics/t/partitions/0/records", None),
                 ("GET", "/v1/consumers/c/cursors/t/0", None)]
        for method, path, body in calls:
            t0 = time.monotonic()
            r = raw_request(port, method, path, body, timeout=10)
            took = time.monotonic() - t0
            eq(r.status, 503, "%s %s without a cluster (%r)" % (method, path, r.body[:200]))
            check(r.header("Retry-After") is not None, "%s %s: Retry-After" % (method, path))
            check(took < 3.0, "%s %s took %.1f s (bound: 500 ms per call)" % (method, path, took))
        m = raw_request(port, "GET", "/metrics", timeout=5).body.decode()
        check("pulse_kafka_up 0" in m, "pulse_kafka_up must be 0")
        proc.terminate()
        eq(proc.wait(timeout=30), 0, "exit status after SIGTERM")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err.close()


def _mock_bootstraps(srv):
    """The mock cluster's brokers of a pulsed started with log.level=info
    (kafka.c logs them)."""
    def found():
        with open(srv.stderr_path, "rb") as f:
            m = re.search(rb"mock cluster of \d+ broker\(s\) at (\S+)", f.read())
        return m.group(1).decode() if m else None
    check(wait_until(lambda: found() is not None, 10), "no mock bootstrap line in %s" % srv.stderr_path)
    return found()


def test_topics_unknown_to_the_gateway_are_looked_up_without_holding_a_worker(ctx):
    # Gateway G speaks to the mock cluster that pulsed M runs, so topics
    # created through M are created behind G's back, and stopping M
    # (SIGSTOP) makes the cluster stop answering while G's cache is still
    # fresh. G has two HTTP workers. A publish or fetch naming a topic G's
    # cache does not know waits for a refresh on the backend's thread, its
    # request suspended: many of them at once, with the cluster silent,
    # hold no worker, so /healthz and topic reads stay prompt, and each is
    # answered 503 within the bound.
    m = ctx.new_server(args=KAFKA_ARGS + ["-o", "log.level=info"]).start()
    g = ctx.new_server(args=["-o", "broker.backend=kafka", "-o", "kafka.mock-brokers=0",
                             "-o", "kafka.bootstrap-servers=" + _mock_bootstraps(m),
                             "-o", "kafka.request-timeout=2s", "-o", "server.threads=2"]).start()
    known = uniq("known")
    m.create_topic(known, partitions=2)
    behind = uniq("behind")
    m.create_topic(behind, partitions=2)
    other = uniq("behind-f")
    m.create_topic(other, partitions=1)
    m.publish(other, [{"value": "f"}])
    # Past the 100 ms in which G answers a miss from the refresh it just
    # made (docs/Scaling.md), well before its next once-a-second refresh
    # has surely run.
    time.sleep(0.3)
    r = g.req("POST", "/v1/topics/%s/records" % behind, {"records": [{"value": "b", "partition": 1}]})
    eq(expect_json(r, 200, "publish to a topic created behind the gateway's back")["offsets"],
       [{"partition": 1, "offset": 0}], "offsets")
    eq([x["value"] for x in expect_json(g.fetch(other, 0), 200, "fetch behind")["records"]], ["f"],
       "fetch of a topic created behind the gateway's back")
    expect_error(g.req("POST", "/v1/topics/%s/records" % uniq("none"), {"records": [{"value": "x"}]}), 404,
                 "topic_not_found", "publish to a topic nobody made")
    expect_error(g.fetch(uniq("none"), 0), 404, "topic_not_found", "fetch of a topic nobody made")
    g.publish(known, [{"value": "k"}])

    results = []
    lock = threading.Lock()

    def unknown(i):
        t0 = time.monotonic()
        if i % 2:
            r = raw_request(g.port, "POST", "/v1/topics/%s/records" % uniq("gone"), {"records": [{"value": "x"}]},
                            timeout=30)
        else:
            r = raw_request(g.port, "GET", "/v1/topics/%s/partitions/0/records" % uniq("gone"), timeout=30)
        with lock:
            results.append((r.status, r.header("Retry-After"), time.monotonic() - t0))

    n = 8  # four times the workers
    os.kill(m.server_pid(), signal.SIGSTOP)
    try:
        time.sleep(0.3)  # G's cache is older than the 100 ms a miss may trust
        threads = [threading.Thread(target=unknown, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        eq(raw_request(g.port, "GET", "/healthz", timeout=30).status, 200, "/healthz")
        healthz = time.monotonic() - t0
        t0 = time.monotonic()
        r = raw_request(g.port, "GET", "/v1/topics/" + known, timeout=30)
        topic_read = time.monotonic() - t0
        check(r.status in (200, 503), "topic read while the cluster is silent: %r" % r.body[:200])
        for t in threads:
            t.join(60)
    finally:
        os.kill(m.server_pid(), signal.SIGCONT)
    check(healthz < 1.0, "/healthz took %.2f s while lookups waited: a worker was held" % healthz)
    check(topic_read < 1.0, "a topic read took %.2f s while lookups waited: a worker was held" % topic_read)
    eq(len(results), n, "answers")
    for status, retry_after, took in results:
        eq(status, 503, "a lookup with the cluster silent")
        check(retry_after is not None, "503 without Retry-After")
        # kwait's refresh in progress, then the lookups' one: two timeouts.
        check(took < 2 * 2.0 + 2.0, "a lookup took %.1f s" % took)
    # The cluster answers again: so does G.
    check(wait_until(lambda: raw_request(g.port, "POST", "/v1/topics/%s/records" % known,
                                         {"records": [{"value": "again"}]}, timeout=30).status == 200, 30),
          "publishes through G did not recover")


def test_replay_copies_a_local_topic_into_kafka_with_its_cursors(ctx):
    # docs/Scaling.md "Moving existing data": examples/replay_topic.py.
    src = ctx.new_server(args=["-o", "broker.backend=local"]).start()
    dst = ctx.srv
    t = uniq("moved")
    src.create_topic(t, partitions=2)
    recs = [{"key": "k%d" % i, "value": "v%d" % i, "headers": {"h": str(i)}, "timestamp": 1000 + i,
             "partition": i % 2} for i in range(10)]
    recs.append({"value_base64": "AAEC/w==", "partition": 0, "timestamp": 5000})
    src.publish(t, recs)
    expect_json(src.req("PUT", "/v1/consumers/mover/cursors/%s/0" % t, {"offset": 3}), 200, "cursor")
    out = subprocess.run([sys.executable, os.path.join(srcdir(), "examples", "replay_topic.py"),
                          "--from", "http://127.0.0.1:%d" % src.port, "--to", "http://127.0.0.1:%d" % dst.port,
                          "--topic", t, "--batch", "4"], capture_output=True, timeout=60)
    eq(out.returncode, 0, "replay_topic.py exit status (stderr %r)" % out.stderr[-500:])
    for p in (0, 1):
        a = src.fetch_json(t, p)["records"]
        b = dst.fetch_json(t, p)["records"]
        eq(b, a, "partition %d copied record for record (same offsets from an empty start)" % p)
    cur = expect_json(dst.get("/v1/consumers/mover/cursors/%s/0" % t), 200, "translated cursor")
    eq(cur["offset"], 3, "cursor")


if __name__ == "__main__":
    sys.exit(main(globals(), server_args=KAFKA_ARGS))
