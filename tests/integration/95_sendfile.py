# SPDX-License-Identifier: MIT
"""A raw fetch is sent from the segment file with sendfile, not copied
through user space: pulsed runs under `strace -f -e trace=sendfile,sendfile64`
and the trace must show sendfile calls that carried the whole raw body.
And a raw fetch of many batches finds its end through the offset index, not
by reading every batch header: under `strace -e trace=pread64`, a restart
that answers raw fetches makes only a few 52-byte header reads each more
than one that answers none.
Skipped (77) when strace is missing or ptrace is not permitted here."""

import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pulsetest  # noqa: E402

pulsetest.exit_unless_local("raw fetch through sendfile: the Kafka backend answers 406")

from pulsetest import (Skip, b64, check, decode_batches, eq, expect_status, main, note,  # noqa: E402
                       read_file, segment_files)


def strace_usable():
    strace = shutil.which("strace")
    if not strace:
        return None, "strace is not installed"
    try:
        p = subprocess.run([strace, "-f", "-o", os.devnull, "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "strace does not run: %s" % e
    if p.returncode != 0:
        return None, "ptrace not permitted: %s" % p.stderr.decode(errors="replace").strip()[:200]
    return strace, ""


SENDFILE = re.compile(r"\bsendfile(?:64)?\((\d+), (\d+), .*\) = (\d+)")


def test_raw_fetch_body_goes_through_sendfile(ctx):
    strace, why = strace_usable()
    if not strace:
        raise Skip(why)
    trace = os.path.join(ctx.tmp, "sendfile.trace")
    # LeakSanitizer cannot run under ptrace; leaks are checked by the other tests.
    env = {"ASAN_OPTIONS": (os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")}
    srv = ctx.new_server(env=env, wrapper=[strace, "-f", "-e", "trace=sendfile,sendfile64", "-o", trace])
    srv.start()
    srv.create_topic("sf")
    blob = bytes(range(256)) * 200  # 51,200 bytes per record
    srv.publish("sf", [{"value_base64": b64(blob)}, {"value_base64": b64(blob[::-1])}])
    srv.publish("sf", [{"key": "k", "value": "second batch"}])
    r = srv.fetch("sf", 0, format="raw")
    expect_status(r, 200, "raw fetch")
    body = r.body
    check(len(body) > 100000, "raw body holds both batches (%d bytes)" % len(body))
    eq(body, read_file(segment_files(srv.data_dir, "sf", 0)[0]), "raw body equals the segment file")
    eq(len(decode_batches(body)), 2, "two batches")
    srv.stop()
    with open(trace, "r", errors="replace") as f:
        lines = f.read().splitlines()
    calls = [(int(m.group(1)), int(m.group(2)), int(m.group(3))) for m in map(SENDFILE.search, lines) if m]
    note("sendfile calls: %r" % calls[:10])
    check(calls, "no successful sendfile call in the trace of a %d-byte raw fetch" % len(body))
    per_out = {}
    for out_fd, in_fd, n in calls:
        per_out[(out_fd, in_fd)] = per_out.get((out_fd, in_fd), 0) + n
    check(max(per_out.values()) >= len(body),
          "sendfile carried %r bytes per (socket, file) pair, the raw body has %d"
          % (per_out, len(body)))


PREAD = re.compile(r"\bpread64\(\d+, .*, (\d+), \d+\) = (\d+)")
HEADER = 52  # bytes of a batch header


def header_reads(trace):
    """The successful 52-byte preads in an strace file."""
    with open(trace, "r", errors="replace") as f:
        return sum(1 for m in map(PREAD.search, f) if m and int(m.group(1)) == HEADER and int(m.group(2)) == HEADER)


def test_a_raw_fetch_of_many_batches_reads_a_few_batch_headers(ctx):
    strace, why = strace_usable()
    if not strace:
        raise Skip(why)
    env = {"ASAN_OPTIONS": (os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")}
    srv = ctx.new_server(env=env)
    srv.start()
    srv.create_topic("hd")
    blob = bytes(range(256)) * 24  # 6,144 bytes: a batch of 3 is past the 4 KiB index interval
    for i in range(50):
        srv.publish("hd", [{"value_base64": b64(blob[i:] + blob[:i])} for _ in range(3)])
    srv.stop()
    segment = read_file(segment_files(srv.data_dir, "hd", 0)[0])
    sizes = [b["size"] for b in decode_batches(segment)]
    eq(len(sizes), 50, "50 batches on disk")
    check(len(segment) < 1 << 20, "the log (%d bytes) fits one raw answer of 1 MiB" % len(segment))

    # The same start twice under strace: once answering nothing, once
    # answering five raw fetches of 1 MiB (the whole log: 50 batches).
    counts = []
    for fetches in (0, 5):
        trace = os.path.join(ctx.tmp, "pread.%d.trace" % fetches)
        srv.wrapper = [strace, "-f", "-e", "trace=pread64", "-o", trace]
        srv.start()
        for _ in range(fetches):
            r = srv.fetch("hd", 0, format="raw", offset=0, max_bytes=1 << 20)
            expect_status(r, 200, "raw fetch")
            check(r.body == segment, "the raw answer (%d bytes) is the whole log (%d bytes)" % (len(r.body), len(segment)))
            eq(r.header("Pulse-Next-Offset"), "150", "next offset after 50 batches of 3")
        srv.stop()
        counts.append(header_reads(trace))
    note("52-byte preads: %d without fetches, %d with five" % tuple(counts))
    check(counts[1] - counts[0] <= 5 * 4,
          "five raw fetches of 50 batches read %d batch headers (a few each expected, not one per batch)"
          % (counts[1] - counts[0]))


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
