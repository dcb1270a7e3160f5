# SPDX-License-Identifier: MIT
"""Server-Sent Events in Debian's headless Chromium
(tests/browser/sse_resume.mjs): an EventSource whose connection is cut
reconnects with Last-Event-ID, a new one resumes with ?last_event_id=, and
every record arrives exactly once, for a partition and for the topic-wide
stream. Needs issue 10 item 2: SKIPPED, with the reason, by a pulsed that
answers 406 to Accept: text/event-stream."""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browsertest import require_sse, require_tools, run_node  # noqa: E402
from pulsetest import main, uniq  # noqa: E402


def test_sse_resume_in_chromium(ctx):
    require_tools()
    t = uniq("sse-probe")
    ctx.srv.create_topic(t)
    require_sse(ctx.srv, t)
    run_node("sse_resume.mjs", {"PULSE_URL": ctx.srv.url})


if __name__ == "__main__":
    sys.exit(main(globals()))
