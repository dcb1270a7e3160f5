# SPDX-License-Identifier: MIT
"""The dashboard's live tail in Debian's headless Chromium
(tests/browser/live_tail.mjs): a record published over HTTP shows in the
tail within a second; a whole-topic tail with pause and a key filter; a
tail with a bearer token (read through fetch()); a deleted topic ending the
tail in words; stop and restart. Needs the Server-Sent Events of issue 10 item 2: SKIPPED, with
the reason, by a pulsed that answers 406 to Accept: text/event-stream."""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browsertest import require_sse, require_tools, run_node  # noqa: E402
from pulsetest import main, uniq  # noqa: E402


def test_live_tail_in_chromium(ctx):
    require_tools()
    t = uniq("sse-probe")
    ctx.srv.create_topic(t)
    require_sse(ctx.srv, t)
    run_node("live_tail.mjs", {"PULSE_URL": ctx.srv.url})


if __name__ == "__main__":
    sys.exit(main(globals()))
