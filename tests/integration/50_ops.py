# SPDX-License-Identifier: MIT
"""Operations routes and process behaviour: /healthz, /readyz, /metrics
(Prometheus text), /v1/broker, /openapi.yaml, routing errors (404 not_found,
405 with Allow), X-Request-Id on every answer, and the command line:
configuration precedence and refusing bad keys or values with exit 2."""

import http.client
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (check, eq, expect_error, expect_json, expect_keys, expect_status,  # noqa: E402
                       free_port, is_int, main, pulsed_path, raw_request, read_file, srcdir, uniq,
                       local_only)

LABELS = r'\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*\}'
METRIC_LINE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(' + LABELS + r')? [-+0-9.eEInfNa]+( -?[0-9]+)?$')


def test_healthz_and_readyz(ctx):
    srv = ctx.srv
    eq(expect_json(srv.get("/healthz"), 200, "healthz"), {"status": "ok"}, "healthz body")
    eq(expect_json(srv.get("/readyz"), 200, "readyz"), {"status": "ready", "fenced_partitions": []}, "readyz body")


def test_metrics_is_prometheus_text_with_build_info(ctx):
    srv = ctx.srv
    t = uniq("m")
    srv.create_topic(t)
    srv.publish(t, [{"value": "x"}])
    srv.fetch_json(t, 0)
    r = srv.get("/metrics")
    expect_status(r, 200, "metrics")
    ct = (r.header("Content-Type") or "").replace(" ", "").lower()
    check(ct.startswith("text/plain") and "version=0.0.4" in ct,
          "metrics Content-Type must be text/plain; version=0.0.4: %r" % r.header("Content-Type"))
    text = r.body.decode("utf-8")
    check(re.search(r"^pulse_build_info\{[^}]*version=\"[^\"]+\"[^}]*\} 1(\.0)?$", text, re.M),
          "pulse_build_info{version=...} 1 missing")
    for line in text.splitlines():
        if not line or line.startswith("#"):
            if line.startswith("# TYPE"):
                check(re.match(r"^# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram|summary|untyped)$",
                               line), "bad TYPE line %r" % line)
            continue
        check(METRIC_LINE.match(line), "not a Prometheus sample line: %r" % line)
    check(text.endswith("\n"), "exposition ends with a newline")


def test_broker_reports_identity_version_uptime_and_config(ctx):
    srv = ctx.srv
    doc = expect_json(srv.get("/v1/broker"), 200, "broker")
    expect_keys(doc, ["cluster_id", "broker_id", "version", "uptime_ms", "config"], "broker")
    for k in ("cluster_id", "broker_id", "version"):
        check(doc[k] not in (None, ""), "%s must be set: %r" % (k, doc[k]))
    check(is_int(doc["uptime_ms"]) and doc["uptime_ms"] >= 0, "uptime_ms: %r" % doc["uptime_ms"])
    cfg = doc["config"]
    check(isinstance(cfg, dict), "config is an object")
    for key in ("server.listen", "server.data-dir", "server.max-body-bytes", "storage.sync-mode",
                "storage.segment-max-bytes", "topic-defaults.partitions", "log.level"):
        check(key in cfg, "config lacks %s: %r" % (key, sorted(cfg)))
    eq(cfg["server.listen"], "127.0.0.1:%d" % srv.port, "effective server.listen")
    eq(cfg["log.level"], "warn", "effective log.level from -o")
    eq(cfg["storage.sync-mode"], "every-write", "default sync mode")
    time.sleep(0.02)
    later = expect_json(srv.get("/v1/broker"), 200, "broker")
    check(later["uptime_ms"] >= doc["uptime_ms"], "uptime_ms does not go backwards")
    eq((later["cluster_id"], later["broker_id"]), (doc["cluster_id"], doc["broker_id"]), "stable ids")


def test_openapi_yaml_is_served_verbatim(ctx):
    r = ctx.srv.get("/openapi.yaml")
    expect_status(r, 200, "openapi")
    eq((r.header("Content-Type") or "").split(";")[0].strip(), "application/yaml", "Content-Type")
    eq(r.body, read_file(os.path.join(srcdir(), "api", "openapi.yaml")),
       "served /openapi.yaml equals api/openapi.yaml")


def test_unknown_paths_are_404_not_found(ctx):
    srv = ctx.srv
    for path in ("/v2/topics", "/ui/nope.js", "/ui", "/index.html",
                 "/v1", "/v1/topic", "/v1/topics/a/b", "/v1/topics/a/partitions/0/x",
                 "/v1/topics/a/partitions/0/records/x", "/v1/topics//",
                 "/v1/consumers/c/cursors/t", "/v1/consumers/c/cursors/t/0/x", "/healthz/x",
                 "/metrics2", "/openapi.json"):
        expect_error(srv.get(path), 404, "not_found", "GET %s" % path)
    expect_error(srv.req("POST", "/nowhere", {"x": 1}), 404, "not_found", "POST /nowhere")


def allow_set(r):
    v = r.header("Allow")
    check(v, "405 answer lacks an Allow header")
    return set(x.strip() for x in v.split(","))


def test_wrong_method_is_405_with_allow(ctx):
    srv = ctx.srv
    t = uniq("meth")
    srv.create_topic(t)
    cases = [
        ("/v1/topics", "DELETE", {"GET", "POST"}),
        ("/v1/topics", "PUT", {"GET", "POST"}),
        ("/v1/topics/" + t, "POST", {"GET", "PATCH", "DELETE"}),
        ("/v1/topics/" + t, "PUT", {"GET", "PATCH", "DELETE"}),
        ("/v1/topics/%s/records" % t, "PUT", {"GET", "POST"}),
        ("/v1/topics/%s/events" % t, "POST", {"GET"}),
        ("/v1/topics/%s/partitions/0/records" % t, "POST", {"GET"}),
        ("/v1/topics/%s/partitions/0/records" % t, "DELETE", {"GET"}),
        ("/v1/consumers", "POST", {"GET"}),
        ("/v1/consumers/c1", "GET", {"DELETE"}),
        ("/v1/consumers/c1/cursors", "PUT", {"GET", "POST"}),
        ("/v1/consumers/c1/cursors/%s/0" % t, "POST", {"GET", "PUT"}),
        ("/v1/consumers/c1/cursors/%s/0" % t, "DELETE", {"GET", "PUT"}),
        ("/healthz", "POST", {"GET"}),
        ("/readyz", "DELETE", {"GET"}),
        ("/metrics", "POST", {"GET"}),
        ("/v1/broker", "PATCH", {"GET"}),
        ("/openapi.yaml", "PUT", {"GET"}),
    ]
    for path, method, allowed in cases:
        r = srv.req(method, path, {} if method in ("POST", "PUT", "PATCH") else None)
        expect_error(r, 405, "method_not_allowed", "%s %s" % (method, path))
        got = allow_set(r)
        check(allowed <= got and got <= allowed | {"HEAD", "OPTIONS"},
              "%s %s: Allow %r, expected %r" % (method, path, r.header("Allow"), sorted(allowed)))
    eq(srv.hw(t), 0, "no record stored by a 405")
    expect_json(srv.get("/v1/topics/" + t), 200, "topic still there after DELETE-less 405s")


def test_every_answer_carries_a_request_id(ctx):
    srv = ctx.srv
    for method, path in (("GET", "/healthz"), ("GET", "/nope"), ("GET", "/metrics"),
                         ("POST", "/healthz"), ("GET", "/v1/topics/does-not-exist")):
        r = srv.req(method, path)
        rid = r.header("X-Request-Id") or ""
        check(re.match(r"^[0-9a-f]{16}$", rid.lower()), "%s %s: generated X-Request-Id %r" % (method, path, rid))
        r = srv.req(method, path, headers={"X-Request-Id": "trace-%s" % path.replace("/", "_")})
        eq(r.header("X-Request-Id"), "trace-%s" % path.replace("/", "_"), "%s %s echo" % (method, path))
    ids = set(srv.get("/healthz").header("X-Request-Id") for _ in range(20))
    eq(len(ids), 20, "generated ids are distinct")
    edge = "x" * 128
    eq(srv.get("/healthz", headers={"X-Request-Id": edge}).header("X-Request-Id"), edge, "128 chars echoed")
    for bad in ("y" * 129, "has space\x01ctl", "caf\xe9"):
        try:
            r = srv.get("/healthz", headers={"X-Request-Id": bad})
        except UnicodeEncodeError:
            continue
        rid = r.header("X-Request-Id") or ""
        check(rid and rid != bad, "invalid X-Request-Id %r must be replaced, got %r" % (bad[:20], rid))


def test_keep_alive_connection_serves_many_requests(ctx):
    # Per-request state must not leak from one request to the next on a
    # persistent connection (errors included).
    import http.client
    import json
    srv = ctx.srv
    t = uniq("ka")
    srv.create_topic(t)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
    try:
        for i in range(10):
            body = json.dumps({"records": [{"value": "ka-%d" % i}]})
            conn.request("POST", "/v1/topics/%s/records" % t, body=body,
                         headers={"Content-Type": "application/json", "X-Request-Id": "ka-%d" % i})
            r = conn.getresponse()
            data = r.read()
            eq(r.status, 200, "publish %d on a kept-alive connection (%r)" % (i, data[:200]))
            eq(r.getheader("X-Request-Id"), "ka-%d" % i, "request id %d" % i)
            eq(json.loads(data)["offsets"][0]["offset"], i, "offset %d" % i)
            conn.request("GET", "/v1/topics/%s/nothing-here" % t)
            r = conn.getresponse()
            eq((r.status, json.loads(r.read())["error"]["code"]), (404, "not_found"), "404 in between")
            conn.request("POST", "/v1/topics/%s/records" % t, body="{bad",
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            eq((r.status, json.loads(r.read())["error"]["code"]), (400, "invalid_request"), "400 in between")
    finally:
        conn.close()
    eq(srv.hw(t), 10, "ten records stored")


def run_pulsed(args, env=None, timeout=60):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([pulsed_path()] + args, stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=timeout, env=e)


def test_version_and_help_exit_0(ctx):
    p = run_pulsed(["--version"])
    eq(p.returncode, 0, "--version exit status")
    check(p.stdout.strip(), "--version prints something")
    p = run_pulsed(["--help"])
    eq(p.returncode, 0, "--help exit status")
    check(b"--data-dir" in p.stdout + p.stderr, "--help mentions --data-dir")


def test_bad_configuration_refuses_to_start_with_exit_2(ctx):
    d = os.path.join(ctx.tmp, "badcfg")
    os.makedirs(d, exist_ok=True)
    port = free_port()
    base = ["--data-dir", d, "--listen", "127.0.0.1:%d" % port]
    cases = [
        (["-o", "nosuch.key=1"], None, b"nosuch.key"),
        (["-o", "storage.sync-mode=sometimes"], None, b"storage.sync-mode"),
        (["-o", "server.max-body-bytes=12XB"], None, b"server.max-body-bytes"),
        (["-o", "storage.sync-interval=fast"], None, b"storage.sync-interval"),
        (["-o", "topic-defaults.partitions=many"], None, b"topic-defaults.partitions"),
        ([], {"PULSE_STORAGE_SYNC_MODE": "bogus"}, b"sync-mode"),
    ]
    for args, env, needle in cases:
        p = run_pulsed(base + args, env=env)
        eq(p.returncode, 2, "exit status for %r %r (stderr %r)" % (args, env, p.stderr[-300:]))
        check(needle.lower() in (p.stderr + p.stdout).lower(),
              "message must name the key %r: %r" % (needle, p.stderr[-300:]))
    cfg = os.path.join(ctx.tmp, "bad.conf")
    with open(cfg, "w") as f:
        f.write("[storage]\nno-such-thing = 1\n")
    p = run_pulsed(base + ["-c", cfg])
    eq(p.returncode, 2, "exit status for a config file with an unknown key (stderr %r)" % p.stderr[-300:])
    check(b"no-such-thing" in p.stderr + p.stdout, "message names the bad file key")


def test_configuration_precedence_env_then_command_line(ctx):
    srv = ctx.new_server(args=["-o", "storage.sync-interval=250ms"],
                         env={"PULSE_STORAGE_SYNC_INTERVAL": "9s", "PULSE_TOPIC_DEFAULTS_PARTITIONS": "3"})
    srv.start()
    cfg = expect_json(srv.get("/v1/broker"), 200, "broker")["config"]
    eq(str(cfg["topic-defaults.partitions"]), "3", "env sets topic-defaults.partitions")
    check(str(cfg["storage.sync-interval"]) in ("250ms", "250", "0.25s"),
          "command line beats env for storage.sync-interval: %r" % cfg["storage.sync-interval"])
    t = uniq("prec")
    eq(srv.create_topic(t)["partitions"], 3, "topic default partitions from env")
    srv.stop()


def test_unknown_routes_and_405_store_nothing(ctx):
    srv = ctx.srv
    before = srv.topics()
    srv.req("POST", "/v1/topics/x/y", {"name": "z"})
    srv.req("PUT", "/v1/topics", {"name": "put-created"})
    eq(srv.topics(), before, "topic list unchanged")
    expect_error(srv.get("/v1/topics/put-created"), 404, "topic_not_found", "not created")


def warn_lines_about(path, words):
    with open(path, errors="replace") as f:
        return [line for line in f if "level=warn" in line and any(w in line for w in words)]


def test_refusals_while_starting_are_not_warnings(ctx):
    # Recovery made slow on purpose: every /readyz poll of the harness, and
    # a client's requests, get 503 meanwhile; none of them is a fault.
    srv = ctx.new_server(env={"PULSE_FAILPOINT_DELAY": "recovery:1500"})
    srv.port = free_port()
    refused = []
    done = threading.Event()

    def client():
        while not done.is_set():
            try:
                r = raw_request(srv.port, "GET", "/v1/topics", timeout=2)
                if r.status == 503:
                    refused.append(r)
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.02)

    th = threading.Thread(target=client)
    th.start()
    try:
        srv.start()
    finally:
        done.set()
        th.join()
    check(len(refused) >= 10, "only %d requests were refused during a 1.5 s recovery" % len(refused))
    expect_error(refused[0], 503, "unavailable", "a request during recovery")
    text = srv.get("/metrics").body.decode()
    m = re.search(r'^pulse_http_requests_total\{route="/readyz",method="GET",status="503"\} (\d+)', text, re.M)
    check(m is not None and int(m.group(1)) >= 10, "readyz polls answered 503 during recovery: %r" % (m,))
    eq(warn_lines_about(srv.stderr_path, ("503", "not ready", "starting")), [],
       "warn lines about refusals during recovery")
    srv.stop()


@local_only("slows the local backend's cursor commit with a failpoint")
def test_refusals_while_draining_are_not_warnings(ctx):
    # A cursor commit made slow on purpose keeps the drain waiting; a kept-
    # alive connection's next request meanwhile is told the broker stops.
    srv = ctx.new_server(env={"PULSE_FAILPOINT_DELAY": "cursor_commit_write:1500"}).start()
    t = uniq("drain")
    srv.create_topic(t)
    srv.publish(t, [{"value": "x"}])
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    conn.request("GET", "/healthz")
    eq(conn.getresponse().read(), b'{"status":"ok"}\n', "first request on the kept-alive connection")
    out = {}

    def commit():
        try:
            out["commit"] = raw_request(srv.port, "PUT", "/v1/consumers/c/cursors/%s/0" % t, body={"offset": 1},
                                        timeout=30)
        except (OSError, http.client.HTTPException) as e:
            out["commit"] = e

    th = threading.Thread(target=commit)
    th.start()
    time.sleep(0.3)
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    statuses = []
    for _ in range(5):
        conn.request("GET", "/v1/topics")
        r = conn.getresponse()
        r.read()
        statuses.append(r.status)
        if r.getheader("Connection", "").lower() == "close":
            break
    conn.close()
    th.join(30)
    eq(statuses[0], 503, "a request during the drain (statuses %r)" % statuses)
    eq(srv.proc.wait(timeout=30), 0, "exit status after the drain")
    srv.proc = None
    eq(warn_lines_about(srv.stderr_path, ("503", "shutting down")), [], "warn lines about refusals while draining")


if __name__ == "__main__":
    sys.exit(main(globals()))
