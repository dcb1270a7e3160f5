# SPDX-License-Identifier: MIT
"""The programs in examples/ work as documented against a live server, with
the address given through PULSE_URL: walkthrough.sh (curl), producer.py,
consumer.py (commits cursors and resumes where it stopped) and
decode_raw.py (verifies CRC32C and prints records, refuses a damaged body)."""

import json
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (Skip, check, eq, expect_status, main, srcdir, uniq, local_only)  # noqa: E402


def example(name):
    return os.path.join(srcdir(), "examples", name)


def run(cmd, srv, timeout=120, extra_env=None):
    env = dict(os.environ)
    env["PULSE_URL"] = srv.url
    env.update(extra_env or {})
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, env=env)
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    return p.returncode, out, err


def must(rc_out_err, what):
    rc, out, err = rc_out_err
    if rc != 0:
        raise AssertionError("%s exited %d\n--- stdout ---\n%s\n--- stderr ---\n%s" % (what, rc, out[-3000:], err[-3000:]))
    return out


def test_walkthrough_runs_twice_against_the_server(ctx):
    if not shutil.which("curl"):
        raise Skip("curl is not installed")
    srv = ctx.srv
    topic = uniq("walk")
    env = {"PULSE_TOPIC": topic, "PULSE_CONSUMER": uniq("walker")}
    out = must(run(["sh", example("walkthrough.sh")], srv, extra_env=env), "walkthrough.sh")
    check("walkthrough done" in out, "walkthrough finished")
    eq(srv.hw(topic, 0), 4, "records published by the walkthrough")
    cur = srv.get("/v1/consumers/%s/cursors/%s/0" % (env["PULSE_CONSUMER"], topic)).json()
    eq((cur["offset"], cur["lag"]), (2, 2), "cursor committed by the walkthrough")
    must(run(["sh", example("walkthrough.sh")], srv, extra_env=env), "walkthrough.sh (second run)")
    eq(srv.hw(topic, 0), 8, "second run appends to the same topic")


@local_only("restarts pulsed, and the mock cluster lives and dies inside it")
def test_producer_then_consumer_resumes_after_restart(ctx):
    srv = ctx.srv
    topic, group = uniq("shop"), uniq("billing")
    out = must(run([sys.executable, example("producer.py"), "--topic", topic, "--count", "25",
                    "--batch", "4", "--partitions", "2"], srv), "producer.py")
    produced = re.findall(r"order (\d+) -> partition (\d+) offset (\d+)", out)
    eq(len(produced), 25, "producer printed one line per record")
    positions = set((int(p), int(o)) for _, p, o in produced)
    eq(len(positions), 25, "distinct positions")

    def consume(*extra):
        out = must(run([sys.executable, example("consumer.py"), "--topic", topic, "--group", group,
                        "--wait-ms", "100"] + list(extra), srv), "consumer.py")
        return [(int(p), int(o)) for p, o in re.findall(r"^%s/(\d+)@(\d+) " % re.escape(topic), out, re.M)]

    first = consume("--limit", "10")
    eq(len(first), 10, "first run handles --limit records")
    # The committed cursors outlive a broker restart too. After it, groups
    # wait groups.lease-max before partitions are handed out (docs/API.md
    # "Restarts and at-least-once delivery"): a short one keeps this fast.
    srv.stop()
    srv.args = srv.args + ["-o", "groups.lease-max=1s"]
    srv.start()
    rest = consume("--exit-when-idle", "--lease-ms", "1000")
    eq(len(set(first) & set(rest)), 0, "the second run resumes after the committed records")
    eq(set(first) | set(rest), positions, "both runs together saw every produced record")
    again = consume("--exit-when-idle", "--lease-ms", "1000")
    eq(again, [], "a third run finds nothing new")
    lst = srv.get("/v1/consumers/%s/cursors" % group).json()
    eq(sum(c["lag"] for c in lst["cursors"]), 0, "no lag left")


@local_only("raw fetch: the Kafka backend answers 406")
def test_decode_raw_prints_records_and_rejects_damage(ctx):
    srv = ctx.srv
    topic = uniq("decode")
    srv.create_topic(topic)
    srv.publish(topic, [{"key": "a", "value": "first"}, {"value_base64": "AAEC/w=="}])
    srv.publish(topic, [{"key": "b", "value": "third", "headers": {"h": "v"}}])
    r = srv.fetch(topic, 0, format="raw")
    expect_status(r, 200, "raw fetch")
    path = os.path.join(ctx.tmp, "body.bin")
    with open(path, "wb") as f:
        f.write(r.body)
    out = must(run([sys.executable, example("decode_raw.py"), path], srv), "decode_raw.py")
    eq(re.findall(r"offset=(\d+)", out), ["0", "1", "2"], "decoded offsets")
    check("value='first'" in out and "value=0x000102ff" in out and "value='third'" in out,
          "decoded values in output:\n" + out)
    check("'h'='v'" in out, "decoded headers in output")
    check("all checksums valid" in out, "summary line")
    out = must(run([sys.executable, example("decode_raw.py"), "--from", "1", path], srv), "decode_raw.py --from")
    eq(re.findall(r"offset=(\d+)", out), ["1", "2"], "--from skips earlier records")
    bad = bytearray(r.body)
    bad[60] ^= 0xFF
    with open(path, "wb") as f:
        f.write(bytes(bad))
    rc, out, err = run([sys.executable, example("decode_raw.py"), path], srv)
    eq(rc, 1, "exit status on a corrupt body")
    check("CRC32C mismatch" in err, "names the CRC failure: %r" % err)
    check("offset=" not in out, "prints no record of a corrupt batch")
    with open(path, "wb") as f:
        f.write(r.body[:-3])
    rc, out, err = run([sys.executable, example("decode_raw.py"), path], srv)
    eq(rc, 1, "exit status on a truncated body")


def doc_examples(text):
    """(expected status, shell command, shown answer or None) for every sh
    block of docs/API.md preceded by an <!-- expect: NNN --> marker. The
    shown answer is a json block right after the command (blank lines
    between them only); json blocks after prose are illustrations."""
    out = []
    for m in re.finditer(r"<!-- expect: (\d{3}) -->\n```sh\n(.*?)\n```\n(?:\s*\n)*(```json\n(.*?)\n```)?", text,
                         re.S):
        out.append((int(m.group(1)), m.group(2), m.group(4)))
    return out


# Members whose values differ from run to run (clocks, identities such as a group member's random id, sizes
# that depend on timestamps' encodings): only their presence is compared.
VARYING = {"created_at", "timestamp", "cluster_id", "broker_id", "uptime_ms", "version", "size_bytes", "member_id",
           "joined_at_ms", "lease_expires_in_ms", "owner", "assigned_to", "config"}


def same_shape(shown, got, where="$"):
    """Why got differs from the answer the docs show, or None."""
    if isinstance(shown, dict):
        if not isinstance(got, dict):
            return "%s: shown an object, got %r" % (where, got)
        if set(shown) != set(got):
            return "%s: members %s shown, %s answered" % (where, sorted(shown), sorted(got))
        for k in shown:
            if k in VARYING:
                continue
            why = same_shape(shown[k], got[k], "%s.%s" % (where, k))
            if why:
                return why
        return None
    if isinstance(shown, list):
        if not isinstance(got, list) or len(shown) != len(got):
            return "%s: shown %r, got %r" % (where, shown, got)
        for i, (a, b) in enumerate(zip(shown, got)):
            why = same_shape(a, b, "%s[%d]" % (where, i))
            if why:
                return why
        return None
    return None if shown == got else "%s: shown %r, got %r" % (where, shown, got)


def readme_quick_start(text):
    """The shell commands of README.md's quick start (the indented block
    after "With the broker running"), joined at their continuation lines."""
    block = text.split("With the broker running", 1)[1].split("\n\n", 2)[1]
    return "\n".join(line[4:] for line in block.splitlines())


# Route templates as regular expressions, to prove every route has an example.
ROUTE_RES = [
    ("GET", r"/v1/topics"), ("POST", r"/v1/topics"), ("GET", r"/v1/topics/[^/]+"),
    ("PATCH", r"/v1/topics/[^/]+"), ("DELETE", r"/v1/topics/[^/]+"), ("POST", r"/v1/topics/[^/]+/records"),
    ("GET", r"/v1/topics/[^/]+/partitions/[^/]+/records"), ("GET", r"/v1/consumers"),
    ("DELETE", r"/v1/consumers/[^/]+"), ("GET", r"/v1/consumers/[^/]+/cursors"),
    ("POST", r"/v1/consumers/[^/]+/cursors"), ("GET", r"/v1/consumers/[^/]+/cursors/[^/]+/[^/]+"),
    ("PUT", r"/v1/consumers/[^/]+/cursors/[^/]+/[^/]+"), ("GET", r"/healthz"), ("GET", r"/readyz"),
    ("GET", r"/metrics"), ("GET", r"/v1/broker"), ("GET", r"/openapi.yaml"), ("GET", r"/"),
    ("GET", r"/v1/groups"), ("GET", r"/v1/groups/[^/]+"), ("POST", r"/v1/groups/[^/]+/members"),
    ("DELETE", r"/v1/groups/[^/]+/members/[^/]+"), ("POST", r"/v1/groups/[^/]+/members/[^/]+/heartbeat"),
    ("GET", r"/v1/groups/[^/]+/members/[^/]+/records"), ("POST", r"/v1/groups/[^/]+/members/[^/]+/commit"),
    ("GET", r"/v1/topics/[^/]+/partitions"), ("GET", r"/v1/topics/[^/]+/partitions/[^/]+"),
    ("GET", r"/v1/topics/[^/]+/records"), ("GET", r"/v1/topics/[^/]+/events"),
]


@local_only("the examples include raw fetch, retention changes and deletes")
def test_api_md_curl_examples_answer_as_documented(ctx):
    if not shutil.which("curl"):
        raise Skip("curl is not installed")
    with open(os.path.join(srcdir(), "docs", "API.md"), encoding="utf-8") as f:
        text = f.read()
    examples = doc_examples(text)
    check(len(examples) >= 20, "docs/API.md has its curl examples (found %d)" % len(examples))
    covered = set()
    for status, cmd, _ in examples:
        flat = cmd.replace("\\\n", " ")
        m = re.search(r"-X (\w+)", flat)
        method = m.group(1) if m else ("POST" if re.search(r" -d |--data", flat) else "GET")
        m = re.search(r"http://127\.0\.0\.1:8080(/[^?' ]*)", flat)
        check(m, "example without the documented address: %r" % cmd)
        for meth, rx in ROUTE_RES:
            if meth == method and re.fullmatch(rx, m.group(1)) and 200 <= status < 300:
                covered.add((meth, rx))
    missing = [r for r in ROUTE_RES if r not in covered]
    check(not missing, "routes without a successful curl example in docs/API.md: %r" % missing)

    # A broker on which a new user already followed README.md's quick
    # start: its `orders` topic must not trip the examples up.
    srv = ctx.new_server()
    srv.start()
    with open(os.path.join(srcdir(), "README.md"), encoding="utf-8") as f:
        quick = readme_quick_start(f.read()).replace("localhost:8080", srv.url)
    check("curl" in quick and "orders" in quick, "README quick start found: %r" % quick)
    p = subprocess.run(["sh", "-c", "set -e\n" + quick], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    eq(p.returncode, 0, "README quick start: %r" % p.stderr[-500:])
    eq(srv.topic("orders")["partitions"], 3, "the quick start's orders")
    work = os.path.join(ctx.tmp, "docwork")
    os.makedirs(work)
    with open(os.path.join(work, ".curlrc"), "w") as f:
        f.write('write-out = "\\n@@STATUS@@%{http_code}\\n"\n')
    env = dict(os.environ)
    env["CURL_HOME"] = work
    env["HOME"] = work
    compared = 0
    for i, (status, cmd, shown) in enumerate(examples):
        live = cmd.replace("http://127.0.0.1:8080", srv.url)
        p = subprocess.run(["sh", "-c", "set -e\n" + live], cwd=work, env=env, capture_output=True,
                           timeout=60, stdin=subprocess.DEVNULL)
        out = p.stdout.decode("utf-8", "replace")
        codes = re.findall(r"@@STATUS@@(\d{3})", out)
        if p.returncode != 0 or not codes or int(codes[-1]) != status:
            raise AssertionError("docs/API.md example %d (expect %d) gave exit %d, status %s\n%s\n--- output ---\n%s%s"
                                 % (i, status, p.returncode, codes, cmd, out[-1500:],
                                    p.stderr.decode("utf-8", "replace")[-500:]))
        if shown is None:
            continue
        body = out[:out.rindex("@@STATUS@@")].strip()
        try:
            want = json.loads(shown)
            got = json.loads(body)
        except ValueError as e:
            raise AssertionError("docs/API.md example %d: shown or answered body is not JSON (%s)\n%s\n--- shown ---\n"
                                 "%s\n--- answered ---\n%s" % (i, e, cmd, shown, body[-1500:]))
        why = same_shape(want, got)
        if why:
            raise AssertionError("docs/API.md example %d answers another body than the one shown: %s\n%s\n"
                                 "--- answered ---\n%s" % (i, why, cmd, body[-1500:]))
        compared += 1
    check(compared >= 12, "docs/API.md shows the answers of its examples (compared %d)" % compared)
    srv.stop()


if __name__ == "__main__":
    sys.exit(main(globals()))
