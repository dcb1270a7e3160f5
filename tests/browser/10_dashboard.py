# SPDX-License-Identifier: MIT
"""The dashboard at / in Debian's headless Chromium (tests/browser/
dashboard.mjs): it loads without console errors; a topic created over HTTP
appears; topics are created and deleted (with confirmation) from the
keyboard; the publish form stores a record; API errors read as words;
consumers show cursors and lag; the charts follow /metrics; the token stays
in sessionStorage and goes out as a bearer token; a server without
Server-Sent Events is explained. Leaves screenshots of the dashboard in the
build tree (`make screenshots` copies them to docs/)."""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browsertest import run_node, screenshot_dir  # noqa: E402
from pulsetest import main  # noqa: E402


def test_dashboard_in_chromium(ctx):
    run_node("dashboard.mjs", {"PULSE_URL": ctx.srv.url, "PULSE_SCREENSHOT_DIR": screenshot_dir()})


if __name__ == "__main__":
    sys.exit(main(globals()))
