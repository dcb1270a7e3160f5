# SPDX-License-Identifier: MIT
"""What the browser tests share on the Python side: they start pulsed with
tests/integration/pulsetest.py (the one harness that owns its life and
checks its exit status and sanitizer output), then run one .mjs file of
this folder under node, which drives Debian's Chromium headless through
playwright-core and prints a PASS/FAIL/SKIP line per test.

Missing tools (node, tests/browser/node_modules from `npm ci`, chromium) make
a test SKIP with the reason, except in CI (CI set) or with
PULSE_REQUIRE_BROWSER=1, where they are a failure: scripts/setup.sh installs
them, and a browser test that quietly never ran would prove nothing."""

import http.client
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from pulsetest import Failure, Skip, builddir, srcdir  # noqa: E402

NODE_TIMEOUT = float(os.environ.get("PULSE_BROWSER_TIMEOUT", "120"))


def chromium_path():
    return os.environ.get("PULSE_CHROMIUM", "/usr/bin/chromium")


def tools_missing():
    """Why the browser tests cannot run here, or None."""
    if not shutil.which("node"):
        return "node is not installed (scripts/setup.sh installs nodejs)"
    mods = os.path.join(srcdir(), "tests", "browser", "node_modules", "playwright-core")
    if not os.path.isdir(mods):
        return "%s is missing (scripts/setup.sh runs npm ci in tests/browser)" % mods
    if not os.access(chromium_path(), os.X_OK):
        return "%s is not installed (scripts/setup.sh installs chromium)" % chromium_path()
    return None


def require_tools():
    why = tools_missing()
    if why is None:
        return
    if os.environ.get("CI") or os.environ.get("PULSE_REQUIRE_BROWSER"):
        raise Failure("browser tests cannot run: " + why)
    raise Skip(why)


def screenshot_dir():
    """Where the test run leaves its screenshots (in the build tree: make
    check never writes into the sources; `make screenshots` copies them)."""
    return os.path.join(builddir(), "tests", "browser", "screenshots")


def run_node(script, env):
    """Runs tests/browser/<script> with env added; relays its output.
    Exit 77 (every test in it skipped) is a Skip; any other failure a
    Failure naming the failing tests."""
    require_tools()
    full = dict(os.environ)
    full.update(env)
    full["PULSE_CHROMIUM"] = chromium_path()
    p = subprocess.run(["node", os.path.join(HERE, script)], env=full, cwd=HERE, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=NODE_TIMEOUT)
    out = p.stdout.decode("utf-8", "replace")
    for line in out.splitlines():
        print("  node: " + line)
    if p.returncode == 77:
        reasons = re.findall(r"^SKIP (.*)$", out, re.M)
        raise Skip("; ".join(reasons) or "skipped")
    if p.returncode != 0:
        failed = re.findall(r"^FAIL (\S+)", out, re.M)
        raise Failure("%s: exit %d; failing: %s" % (script, p.returncode, ", ".join(failed) or "(see output)"))


def stream_status(port, path):
    """The status a GET with Accept: text/event-stream gets, read from the
    head only (a stream that opens is never read, just closed)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Accept": "text/event-stream"})
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type") or ""
    finally:
        conn.close()


def require_sse(srv, topic):
    """Skip unless the server streams Server-Sent Events (issue 10 item 2)."""
    status, ctype = stream_status(srv.port, "/v1/topics/%s/partitions/0/records" % topic)
    if status == 406:
        raise Skip("this pulsed answers 406 to Accept: text/event-stream: the live tail over "
                   "Server-Sent Events (issue 10 item 2) is not in this build")
    if status != 200 or not ctype.startswith("text/event-stream"):
        raise Failure("stream of %s/0: expected 200 text/event-stream, got %d %r" % (topic, status, ctype))
