# SPDX-License-Identifier: MIT
"""Memory is bounded per request and in total.

A JSON fetch of records made of control bytes used to build its whole answer
in memory, each byte escaped to six ("\\u0001"), and clients that never read
kept those answers alive. Here eight clients that never read fetch a
partition of such records while the test watches the resident memory of
pulsed (VmRSS and VmHWM in /proc/PID/status): the growth must stay within
the memory budget plus a fixed slack (docs/Operations.md states the bound).
Then the budget itself: past server.memory-budget, request bodies (declared,
chunked or gzip-inflated) and JSON fetches answer 503 with Retry-After, and
every reservation comes back once the requests end."""

import json
import os
import re
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (BACKEND, local_only, check, eq, expect_error, expect_json, gz, main, note, raw_request,  # noqa: E402
                       uniq, wait_until)

MIB = 1024 * 1024
OCTETS = {"Content-Type": "application/octet-stream"}

# Never-reading clients: 8 x (fetch of max_bytes = 8 MiB of JSON) over
# 24 records of 512 KiB of \x01 (3 MiB of JSON each). Built whole, every
# answer took 8 MiB of batches and 48 MiB of text, twice over while copied.
RECORD = 512 * 1024
RECORDS = 24
CLIENTS = 8
FETCH_MAX_BYTES = 8 * MIB
BUDGET = 32 * MIB
# Allocator and sanitizer overhead, MHD's per-connection buffers, and the
# kernel's view of pages: what may show beyond the budget.
SLACK = 24 * MIB


def status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s in /proc/%d/status" % (field, pid))


def metric(srv, name):
    text = raw_request(srv.port, "GET", "/metrics").body.decode()
    m = re.search(r"^%s (\d+)" % re.escape(name), text, re.M)
    check(m is not None, "metric %s missing" % name)
    return int(m.group(1))


def silent_client(port, path):
    """Sends one GET and never reads: the answer backs up into pulsed."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
    return s


def read_all(s, timeout=60):
    """The whole answer of a client that finally reads."""
    s.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(1 << 20)
        check(chunk, "closed before the answer head")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    m = re.search(rb"(?i)content-length: *(\d+)", head)
    check(m is not None, "answer without Content-Length: %r" % head)
    n = int(m.group(1))
    while len(body) < n:
        chunk = s.recv(1 << 20)
        check(chunk, "closed after %d of %d body bytes" % (len(body), n))
        body += chunk
    return head, body[:n]


@local_only("the in-process mock cluster keeps the records in pulsed's own memory, copies each one "
            "several times per fetch (freed copies sit in ASan's quarantine), and trims a partition past "
            "about 5 MB, so neither the RSS bound nor the offsets hold over it; measured by hand with "
            "ASAN_OPTIONS=quarantine_size_mb=1: 22 MiB of growth for 8 stalled fetches")
def test_clients_that_never_read_leave_memory_bounded(ctx):
    srv = ctx.new_server(args=["-o", "server.memory-budget=%d" % BUDGET])
    srv.start()
    t = uniq("escaped")
    srv.create_topic(t)
    value = b"\x01" * RECORD
    for _ in range(RECORDS):
        expect_json(srv.req("POST", "/v1/topics/%s/records" % t, value, headers=OCTETS), 200, "publish")
    pid = srv.server_pid()
    time.sleep(0.5)
    base = status_kib(pid, "VmRSS")
    path = "/v1/topics/%s/partitions/0/records?max_bytes=%d" % (t, FETCH_MAX_BYTES)
    clients = [silent_client(srv.port, path) for _ in range(CLIENTS)]
    try:
        # Every answer is under way (in flight, blocked on the socket);
        # then wait for the resident size to stop moving.
        check(wait_until(lambda: metric(srv, "pulse_http_requests_in_flight") >= CLIENTS + 1, 30),
              "the fetches did not all start")
        last = [-1]

        def settled():
            now = status_kib(pid, "VmRSS")
            same = abs(now - last[0]) < 1024
            last[0] = now
            return same
        check(wait_until(settled, 30, interval=0.5), "VmRSS did not settle")
        rss = status_kib(pid, "VmRSS")
        hwm = status_kib(pid, "VmHWM")
        reserved = metric(srv, "pulse_http_memory_reserved_bytes")
        note("VmRSS %d KiB before, %d KiB with %d stalled fetches (VmHWM %d KiB); %d bytes reserved"
             % (base, rss, CLIENTS, hwm, reserved))
        check(reserved <= BUDGET, "reserved %d bytes, budget %d" % (reserved, BUDGET))
        grown = (rss - base) * 1024
        peak = (hwm - base) * 1024
        check(grown <= BUDGET + SLACK, "VmRSS grew by %.1f MiB with %d stalled fetches (bound %.0f MiB)"
              % (grown / MIB, CLIENTS, (BUDGET + SLACK) / MIB))
        check(peak <= BUDGET + SLACK, "VmHWM rose %.1f MiB above the start (bound %.0f MiB)"
              % (peak / MIB, (BUDGET + SLACK) / MIB))
        # One of them reads at last: a whole, correct answer.
        head, body = read_all(clients[0])
        doc = json.loads(body)
        n = len(doc["records"])
        check(1 <= n < RECORDS, "records in an 8 MiB answer: %d" % n)
        check(len(body) <= FETCH_MAX_BYTES + 512, "body of %d bytes for max_bytes %d" % (len(body), FETCH_MAX_BYTES))
        eq(doc["next_offset"], n, "next_offset")
        check(b"Pulse-Next-Offset: %d" % n in head, "Pulse-Next-Offset header: %r" % head)
        eq(doc["records"][-1]["value"], "\x01" * RECORD, "the last record's value")
    finally:
        for s in clients:
            s.close()
    check(wait_until(lambda: metric(srv, "pulse_http_memory_reserved_bytes") == 0, 40),
          "reservations were not given back when the clients went away")


def stalled_upload(port, path, length):
    """Headers promising a body that never comes: its reservation is held."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
               "Content-Length: %d\r\n\r\n" % (path, length)).encode())
    return s


def expect_over_budget(r, what):
    err = expect_error(r, 503, "unavailable", what)
    check("server.memory-budget" in err["message"], "%s: the message must name the limit: %r" % (what, err))
    eq(r.header("Retry-After"), "1", "%s: Retry-After" % what)


def test_past_the_budget_requests_get_503_with_retry_after(ctx):
    srv = ctx.new_server(args=["-o", "server.memory-budget=1MiB", "-o", "server.max-body-bytes=4MiB"])
    srv.start()
    t = uniq("budget")
    srv.create_topic(t)
    srv.publish(t, [{"value": "small"}])
    expect_json(srv.req("POST", "/v1/topics/%s/records" % t, b"\x02" * (300 * 1024), headers=OCTETS), 200,
                "a 300 KiB record")
    path = "/v1/topics/%s/records" % t
    # A reservation comes back when MHD reports the request complete, which
    # can be just after the client has its answer.
    check(wait_until(lambda: metric(srv, "pulse_http_memory_reserved_bytes") == 0, 10), "budget idle")
    held = [stalled_upload(srv.port, path, 400 * 1024) for _ in range(2)]
    try:
        check(wait_until(lambda: metric(srv, "pulse_http_memory_reserved_bytes") == 800 * 1024, 10),
              "two stalled uploads reserve their declared bodies (reserved: %d bytes)"
              % metric(srv, "pulse_http_memory_reserved_bytes"))
        before = srv.topics()
        # A declared body that does not fit: refused before it is read.
        expect_over_budget(srv.req("POST", path, b"x" * (300 * 1024), headers=OCTETS), "declared body")
        # A chunked body that outgrows what is left.
        expect_over_budget(srv.req("POST", path, [b"y" * (64 * 1024)] * 6, headers=OCTETS, chunked=True),
                           "chunked body")
        # A small gzip body that inflates past it.
        expect_over_budget(srv.req("POST", path, gz(b"\0" * (2 * MIB)),
                                   headers={"Content-Type": "application/octet-stream",
                                            "Content-Encoding": "gzip"}), "inflated body")
        # A JSON fetch of the 300 KiB record.
        expect_over_budget(srv.get("/v1/topics/%s/partitions/0/records?offset=1" % t), "JSON fetch")
        eq(srv.topics(), before, "nothing stored by refused requests")
        # (The refused requests give their reservations back as MHD reports
        # them complete, which can lag behind their answers.)
        check(wait_until(lambda: metric(srv, "pulse_http_memory_reserved_bytes") == 800 * 1024, 10),
              "only the stalled uploads hold memory")
        # Small requests still pass, and raw fetches take no budget.
        expect_json(srv.get("/v1/topics/%s/partitions/0/records?offset=0&max_records=1" % t), 200, "small fetch")
        if BACKEND == "local":  # Kafka: raw fetch is 406
            r = srv.get("/v1/topics/%s/partitions/0/records?offset=1&format=raw" % t)
            eq(r.status, 200, "raw fetch")
        check(metric(srv, "pulse_http_memory_refusals_total") >= 4, "refusals counted")
    finally:
        for s in held:
            s.close()
    check(wait_until(lambda: metric(srv, "pulse_http_memory_reserved_bytes") == 0, 10),
          "the stalled uploads gave their reservations back")
    doc = expect_json(srv.get("/v1/topics/%s/partitions/0/records?offset=1" % t), 200, "the fetch, once memory is free")
    eq(len(doc["records"]), 1, "the 300 KiB record")
    check(wait_until(lambda: metric(srv, "pulse_http_memory_reserved_bytes") == 0, 10), "nothing left reserved")


def zeros_array_body(n):
    """A JSON publish whose one value is an array of n zeros: 2 bytes of text
    each, about 40 bytes each once jansson has parsed them (an integer node
    and its slot in the array; docs/Operations.md)."""
    return b'{"records":[{"value":[' + b",".join([b"0"] * n) + b"]}]}"


JSON = {"Content-Type": "application/json"}
NDJSON = {"Content-Type": "application/x-ndjson"}


def test_parsing_a_json_body_stays_inside_the_budget(ctx):
    """The parsed form of a JSON body used to sit outside the budget: one 4 MB
    publish of an array of zeros raised VmHWM by 92 MiB, and answered 200.
    Now every allocation of the parse is charged first: a body whose parse
    alone would pass the whole budget is 413, one that does not fit next to
    the others in flight is 503 with Retry-After, and the resident size
    stays within the budget plus the slack. (Under AddressSanitizer freed
    blocks wait in a quarantine before they can be used again, so seven
    parses one after the other would each take fresh pages: this server
    runs with a 1 MiB quarantine.)"""
    budget = 8 * MIB
    asan = (os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=1").lstrip(":")
    srv = ctx.new_server(args=["-o", "server.memory-budget=%d" % budget], env={"ASAN_OPTIONS": asan})
    srv.start()
    t = uniq("jsonparse")
    srv.create_topic(t)
    pid = srv.server_pid()
    path = "/v1/topics/%s/records" % t
    body = zeros_array_body(2 * 1000 * 1000)
    time.sleep(0.5)
    base = status_kib(pid, "VmHWM")
    err = expect_error(srv.req("POST", path, body, headers=JSON), 413, "payload_too_large", "one huge parse")
    check("server.memory-budget" in err["message"], "the 413 names the limit: %r" % err)
    # Four at once, and the same shapes as NDJSON and on another JSON route.
    lines = b"\n".join([b'{"value":[' + b",".join([b"0"] * 200000) + b"]}"] * 10)
    topic_body = b'{"name":"never","partitions":[' + b",".join([b"0"] * 2000000) + b"]}"
    results = []

    def post(p, b, h):
        try:
            results.append(srv.req("POST", p, b, headers=h))
        except (BrokenPipeError, ConnectionResetError):
            # Its declared body did not fit next to the others: answered 503
            # from the headers and closed before the body was read.
            results.append(None)
    threads = [threading.Thread(target=post, args=(path, body, JSON)) for _ in range(4)]
    threads.append(threading.Thread(target=post, args=(path, lines, NDJSON)))
    threads.append(threading.Thread(target=post, args=("/v1/topics", topic_body, JSON)))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    eq(len(results), len(threads), "every request answered")
    check(any(r is not None for r in results), "some bodies were read and parsed")
    for r in filter(None, results):
        check(r.status in (413, 503), "a parse past the budget: %d %r" % (r.status, r.body[:200]))
        if r.status == 503:
            eq(r.header("Retry-After"), "1", "Retry-After of a 503")
    peak = (status_kib(pid, "VmHWM") - base) * 1024
    note("VmHWM rose %.1f MiB over 7 JSON bodies whose parse passes an %d MiB budget" % (peak / MIB, budget // MIB))
    check(peak <= budget + SLACK, "VmHWM rose %.1f MiB (bound %.0f MiB)" % (peak / MIB, (budget + SLACK) / MIB))
    eq(srv.topic(t)["partition_stats"][0]["high_watermark"], 0, "nothing stored")
    check(srv.req("GET", "/v1/topics/never").status == 404, "no topic created")
    check(wait_until(lambda: metric(srv, "pulse_http_memory_reserved_bytes") == 0, 10), "every charge given back")
    # A JSON value that fits is parsed and stored as before.
    small = zeros_array_body(10000)
    expect_json(srv.req("POST", path, small, headers=JSON), 200, "a parse within the budget")
    doc = srv.fetch_json(t, 0, offset=0)
    eq(doc["records"][0]["value"], "[" + ",".join(["0"] * 10000) + "]", "the stored value")


def test_a_parse_that_fits_alone_waits_for_room_with_503(ctx):
    """Past what is left of the budget (not the whole of it): 503 with
    Retry-After, then 200 once the other requests are gone."""
    srv = ctx.new_server(args=["-o", "server.memory-budget=%d" % (4 * MIB)])
    srv.start()
    t = uniq("jsonroom")
    srv.create_topic(t)
    path = "/v1/topics/%s/records" % t
    body = zeros_array_body(30000)  # 60 KB of text, about 1.2 MiB parsed
    held = [stalled_upload(srv.port, path, 1400 * 1024) for _ in range(2)]
    try:
        check(wait_until(lambda: metric(srv, "pulse_http_memory_reserved_bytes") == 2800 * 1024, 10),
              "two stalled uploads hold 2.8 MiB")
        expect_over_budget(srv.req("POST", path, body, headers=JSON), "a JSON parse past what is left")
    finally:
        for s in held:
            s.close()
    check(wait_until(lambda: metric(srv, "pulse_http_memory_reserved_bytes") == 0, 10), "budget idle")
    expect_json(srv.req("POST", path, body, headers=JSON), 200, "the same publish with room")
    eq(srv.topic(t)["partition_stats"][0]["high_watermark"], 1, "stored once")


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
