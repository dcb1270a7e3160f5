# SPDX-License-Identifier: MIT
"""A JSON fetch that retention overtakes while it reads never steps over
records silently.

A JSON answer reads the log in several reads (a read never crosses a
segment file). When retention trimmed the log past where the answer had got
between two of its reads, the next read started at the new log start, and
the answer ran on over the trimmed offsets as if they had never been, under
the old log_start_offset: a reader from the log start missed records with
nothing in the answer saying so (the power-cut campaign found it: retention
trims while a restart's checks read). The answer now ends where the trim
overtook it, and the next fetch reports the new log start.

The test slows the answer between its reads (PULSE_FAILPOINT_DELAY
fetch_read_more, the test build of pulsed) and lowers the topic's retention
meanwhile, so that the trim lands between the first and the second read."""

import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pulsetest  # noqa: E402

pulsetest.exit_unless_local("retention of the local backend")

from pulsetest import b64, check, eq, expect_json, main, wait_until  # noqa: E402

DELAY_MS = 1500


def test_fetch_overtaken_by_retention_ends_at_the_trim(ctx):
    srv = ctx.new_server(args=["-o", "storage.retention-interval=50ms"],
                         env={"PULSE_FAILPOINT_DELAY": "fetch_read_more:%d" % DELAY_MS})
    srv.start()
    # 40 records of 2 KiB, one to a segment: the answer's first read takes
    # 64 KiB (about 31 records), its second the rest.
    srv.create_topic("t", segment_bytes=4096, retention_ms=0)
    for i in range(40):
        srv.publish("t", [{"key": "k%d" % i, "value_base64": b64(b"%04d|" % i + b"x" * 2000)}])
    segments = srv.topic("t")["partition_stats"][0]["segments"]
    check(segments >= 20, "40 records of 2 KiB in 4 KiB segments: expected 20 segments or more, got %d"
          % segments)
    answer = {}

    def fetch():
        answer["doc"] = srv.fetch_json("t", 0, offset=0, max_records=10000)

    t = threading.Thread(target=fetch)
    t.start()
    # Once the first read is done the answer sleeps before its second: trim
    # everything but the last segments meanwhile.
    time.sleep(0.5)
    expect_json(srv.req("PATCH", "/v1/topics/t", {"retention_bytes": 8192}), 200, "lower retention")
    check(wait_until(lambda: srv.topic("t")["partition_stats"][0]["log_start_offset"] >= 34, 5),
          "retention did not trim the log within 5 s")
    t.join(timeout=DELAY_MS / 1000.0 * 4 + 20)
    check(not t.is_alive(), "the fetch did not return")
    doc = answer["doc"]
    offsets = [r["offset"] for r in doc["records"]]
    check(offsets and offsets[0] == 0, "the answer starts at offset 0: %r" % offsets[:5])
    eq(offsets, list(range(offsets[0], doc["next_offset"])),
       "offsets of the answer (every offset up to next_offset is a record in it: no skipped range was "
       "listed, %r)" % doc.get("skipped"))
    check(doc["next_offset"] < 34, "the answer ran on past the trim: next_offset %d" % doc["next_offset"])
    after = srv.fetch_json("t", 0, offset=doc["next_offset"])
    check(after["log_start_offset"] > doc["next_offset"],
          "the next fetch reports the new log start (%d) above where the answer ended (%d)"
          % (after["log_start_offset"], doc["next_offset"]))
    eq(after["records"][0]["offset"], after["log_start_offset"], "the next fetch starts at the log start")
    srv.stop()


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
