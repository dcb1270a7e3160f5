# SPDX-License-Identifier: MIT
"""The consumer-group examples work against a live server: two
examples/consumer.py started together split the topic's partitions and
handle every record between them, and examples/group_consumer.mjs (Node,
fetch only) runs the same loop and commits the group's cursors."""

import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pulsetest  # noqa: E402


from pulsetest import Skip, check, eq, expect_json, main, srcdir, uniq  # noqa: E402


def example(name):
    return os.path.join(srcdir(), "examples", name)


def start(cmd, srv):
    env = dict(os.environ, PULSE_URL=srv.url, PYTHONUNBUFFERED="1")
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def finish(p, what, timeout=60):
    out, err = p.communicate(timeout=timeout)
    out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    if p.returncode != 0:
        raise AssertionError("%s exited %d\n--- stdout ---\n%s\n--- stderr ---\n%s" % (what, p.returncode,
                                                                                       out[-3000:], err[-3000:]))
    return out


def publish(srv, t, partitions, n):
    got = set()
    for p, o in srv.publish(t, [{"key": "k%d" % i, "value": "v%d" % i, "partition": i % partitions}
                                for i in range(n)]):
        got.add((p, o))
    return got


def test_two_consumer_py_split_the_work(ctx):
    srv = ctx.srv
    t, g = uniq("split"), uniq("billing")
    srv.create_topic(t, partitions=4)
    published = publish(srv, t, 4, 80)
    cmd = [sys.executable, example("consumer.py"), "--topic", t, "--group", g, "--wait-ms", "300",
           "--process-ms", "15", "--max-records", "5", "--lease-ms", "5000", "--exit-when-idle"]
    a, b = start(cmd, srv), start(cmd, srv)
    out_a, out_b = finish(a, "consumer.py A"), finish(b, "consumer.py B")
    pat = r"^%s/(\d+)@(\d+) " % re.escape(t)
    seen_a = set((int(p), int(o)) for p, o in re.findall(pat, out_a, re.M))
    seen_b = set((int(p), int(o)) for p, o in re.findall(pat, out_b, re.M))
    eq(seen_a | seen_b, published, "every record handled by one of the two")
    check(seen_a and seen_b, "both did part of the work (A %d, B %d records)" % (len(seen_a), len(seen_b)))
    cur = expect_json(srv.get("/v1/consumers/%s/cursors" % g), 200, "group cursors")["cursors"]
    eq(sum(c["lag"] for c in cur), 0, "the group's cursors are at the end")


def test_node_example_consumes_and_commits(ctx):
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        raise Skip("node is not installed")
    ver = subprocess.run([node, "--version"], capture_output=True).stdout.decode().strip().lstrip("v")
    if int(ver.split(".")[0]) < 18:
        raise Skip("node %s has no fetch (18 or later needed)" % ver)
    srv = ctx.srv
    t, g = uniq("node"), uniq("jsgroup")
    srv.create_topic(t, partitions=3)
    published = publish(srv, t, 3, 30)
    out = finish(start([node, example("group_consumer.mjs"), "--topic", t, "--group", g, "--wait-ms", "300",
                        "--exit-when-idle"], srv), "group_consumer.mjs")
    seen = set((int(p), int(o)) for p, o in re.findall(r"^%s/(\d+)@(\d+) " % re.escape(t), out, re.M))
    eq(seen, published, "every record handled")
    check("handled 30 records" in out, "summary line:\n" + out[-500:])
    cur = expect_json(srv.get("/v1/consumers/%s/cursors" % g), 200, "group cursors")["cursors"]
    eq(sorted((c["partition"], c["offset"]) for c in cur), [(0, 10), (1, 10), (2, 10)], "committed cursors")


if __name__ == "__main__":
    sys.exit(main(globals()))
