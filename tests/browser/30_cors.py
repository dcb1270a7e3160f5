# SPDX-License-Identifier: MIT
"""The dashboard on one origin watching a pulsed on another, in Debian's
headless Chromium (tests/browser/cors.mjs): a page on an allowed origin
reads and publishes, and sends a bearer token (skipped, saying so, while the
preflight does not allow Authorization); a page on a disallowed one is
refused and stores nothing. One pulsed serves the page (http://127.0.0.1:P, allowed, and
http://localhost:P, the same server under another origin, not allowed);
the other is started with server.cors-origins. Needs the CORS of issue 10
item 1: SKIPPED, with the reason, by a pulsed that does not know that
setting."""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browsertest import require_tools, run_node  # noqa: E402
from pulsetest import Failure, Skip, main  # noqa: E402


def test_cross_origin_dashboard_in_chromium(ctx):
    require_tools()
    pages = ctx.new_server()
    pages.start()
    api = ctx.new_server(args=["-o", "server.cors-origins=" + pages.url])
    try:
        api.start()
    except Failure as e:
        if 'unknown configuration key "server.cors-origins"' in str(e):
            raise Skip("this pulsed does not know server.cors-origins: CORS (issue 10 item 1) is not in this build")
        raise
    run_node("cors.mjs", {"PULSE_URL": api.url, "PULSE_PAGE": pages.url + "/",
                          "PULSE_PAGE_BAD": "http://localhost:%d/" % pages.port})


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
