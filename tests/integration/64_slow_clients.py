# SPDX-License-Identifier: MIT
"""Slow clients: a request head must arrive within server.header-timeout
however slowly it trickles, a body within server.body-timeout unless it
keeps server.body-min-rate, and the connection limits leave room for
well-behaved clients; while every slot is taken, slow clients give theirs
up after a second.

The attack is real: connections from eight loopback addresses
(127.0.0.2 .. 127.0.0.9) each send a request line and then one header line
(or a whole head and then one body byte) every quarter second, which
libmicrohttpd's inactivity timeout alone never cuts. The server runs with
1 s head and body deadlines and small limits so the test stays fast."""

import os
import re
import select
import socket
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import check, eq, expect_json, main, note, raw_request, wait_until  # noqa: E402

HEAD_TIMEOUT = 1.0
BODY_TIMEOUT = 1.0
BODY_MIN_RATE = 8192
MAX_CONNECTIONS = 48
PER_ADDRESS = 5
ADDRESSES = ["127.0.0.%d" % i for i in range(2, 10)]
SERVER_ARGS = ["-o", "server.header-timeout=%dms" % int(HEAD_TIMEOUT * 1000),
               "-o", "server.max-connections=%d" % MAX_CONNECTIONS,
               "-o", "server.max-connections-per-ip=%d" % PER_ADDRESS,
               "-o", "server.body-timeout=%dms" % int(BODY_TIMEOUT * 1000),
               "-o", "server.body-min-rate=%d" % BODY_MIN_RATE,
               "-o", "server.connection-timeout=30s"]
TRICKLE_EVERY = 0.25


class Trickler:
    """One connection that sends its request head a line at a time."""

    def __init__(self, port, source, first=b"GET /v1/topics HTTP/1.1\r\nHost: x\r\n", piece=None):
        self.piece = piece  # what each trickle sends; None: a header line
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((source, 0))
        self.sock.connect(("127.0.0.1", port))
        self.sock.setblocking(False)
        self.opened = time.monotonic()
        self.closed = None
        self.lines = 0
        self.received = b""
        self.send(first)

    def send(self, data):
        if self.closed is not None:
            return
        try:
            self.sock.send(data)
        except (BrokenPipeError, ConnectionResetError):
            self.closed = time.monotonic()

    def trickle(self):
        self.lines += 1
        self.send(self.piece if self.piece is not None else b"X-Trickle-%d: still coming\r\n" % self.lines)

    def poll(self):
        """Reads what arrived; notes the close."""
        if self.closed is not None:
            return
        try:
            data = self.sock.recv(65536)
        except BlockingIOError:
            return
        except ConnectionResetError:
            data = b""
        if data:
            self.received += data
        else:
            self.closed = time.monotonic()

    def close(self):
        self.sock.close()


def drive(tricklers, seconds, during=None):
    """Trickles until every connection is closed or the time is up. during()
    runs once, a third of a deadline in (while every trickler is open)."""
    t0 = time.monotonic()
    next_line = t0 + TRICKLE_EVERY
    ran = during is None
    while time.monotonic() - t0 < seconds:
        open_ = [t for t in tricklers if t.closed is None]
        if not open_:
            break
        readable, _, _ = select.select([t.sock for t in open_], [], [], 0.02)
        for t in open_:
            if t.sock in readable:
                t.poll()
        now = time.monotonic()
        if now >= next_line:
            for t in open_:
                t.trickle()
            next_line = now + TRICKLE_EVERY
        if not ran and now - t0 >= HEAD_TIMEOUT / 3:
            ran = True
            during()


def metric(srv, name):
    text = raw_request(srv.port, "GET", "/metrics").body.decode()
    m = re.search(r"^%s (\d+)" % re.escape(name), text, re.M)
    check(m is not None, "metric %s missing" % name)
    return int(m.group(1))


def settled(srv):
    """Waits until the server has seen every connection of an earlier test
    close (a busy machine may lag behind the client's close), so that the
    per-address limit starts empty: only this request's connection is open."""
    check(wait_until(lambda: metric(srv, "pulse_http_connections") <= 1, 10),
          "the connections of the earlier tests are closed")


def served_at_once(srv, what):
    """A normal client (127.0.0.1) gets its answers promptly."""
    t0 = time.monotonic()
    expect_json(raw_request(srv.port, "GET", "/healthz", timeout=5), 200, what + ": healthz")
    expect_json(raw_request(srv.port, "GET", "/v1/topics", timeout=5), 200, what + ": topics")
    took = time.monotonic() - t0
    check(took < HEAD_TIMEOUT / 2, "%s: a normal client waited %.2f s" % (what, took))


def test_trickled_heads_are_cut_at_the_deadline(ctx):
    srv = ctx.srv
    settled(srv)
    before = metric(srv, "pulse_http_header_timeouts_total")
    tricklers = [Trickler(srv.port, a) for a in ADDRESSES for _ in range(PER_ADDRESS)]
    try:
        drive(tricklers, HEAD_TIMEOUT * 6, during=lambda: served_at_once(srv, "during the trickle"))
        still = [t for t in tricklers if t.closed is None]
        check(not still, "%d of %d trickling connections still open after %.1f s (sent %d header lines each)"
              % (len(still), len(tricklers), HEAD_TIMEOUT * 6, max(t.lines for t in tricklers)))
        lives = sorted(t.closed - t.opened for t in tricklers)
        note("trickling connections closed after %.2f .. %.2f s (deadline %.1f s)" % (lives[0], lives[-1],
                                                                                       HEAD_TIMEOUT))
        check(lives[0] >= HEAD_TIMEOUT * 0.9, "a connection was closed before its deadline: %.2f s" % lives[0])
        check(lives[-1] < HEAD_TIMEOUT + 1.5, "a connection outlived its deadline: %.2f s" % lives[-1])
        for t in tricklers:
            eq(t.received, b"", "nothing is answered to an unfinished request head")
    finally:
        for t in tricklers:
            t.close()
    eq(metric(srv, "pulse_http_header_timeouts_total") - before, len(tricklers), "head timeouts counted")
    served_at_once(srv, "after the trickle")


def test_kept_alive_connection_owes_its_next_head_in_time(ctx):
    srv = ctx.srv
    settled(srv)
    # A prompt second request on the same connection is served...
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    try:
        for _ in range(2):
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while b'"ok"}' not in data:
                chunk = s.recv(4096)
                check(chunk, "connection closed before the answer: %r" % data)
                data += chunk
            check(data.startswith(b"HTTP/1.1 200"), "answer: %r" % data[:100])
    finally:
        s.close()
    # ... but one that trickles its second head is cut at the deadline,
    # counted from the end of the first answer.
    t = Trickler(srv.port, "127.0.0.1", first=b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        deadline = time.monotonic() + 5
        while b'"ok"}' not in t.received and time.monotonic() < deadline:
            select.select([t.sock], [], [], 0.05)
            t.poll()
        check(b'"ok"}' in t.received, "first answer: %r" % t.received[:200])
        answered = time.monotonic()
        t.received = b""
        t.send(b"GET /v1/topics HTTP/1.1\r\n")
        drive([t], HEAD_TIMEOUT * 6)
        check(t.closed is not None, "a kept-alive connection trickling its next head stayed open")
        life = t.closed - answered
        check(HEAD_TIMEOUT * 0.9 <= life < HEAD_TIMEOUT + 1.5,
              "closed %.2f s after the first answer (deadline %.1f s)" % (life, HEAD_TIMEOUT))
        eq(t.received, b"", "nothing answered to the unfinished second head")
    finally:
        t.close()


def test_per_address_limit_leaves_room_for_others(ctx):
    srv = ctx.srv
    settled(srv)
    # Every address tries to take more than its share; the total the eight
    # can hold (8 x 5) stays below max-connections (48), so a ninth client
    # gets in at once, before any deadline passes.
    tries = PER_ADDRESS + 3
    tricklers = [Trickler(srv.port, a) for a in ADDRESSES for _ in range(tries)]
    try:
        drive(tricklers, HEAD_TIMEOUT / 2, during=lambda: served_at_once(srv, "while the addresses are full"))
        for a in ADDRESSES:
            mine = tricklers[ADDRESSES.index(a) * tries:(ADDRESSES.index(a) + 1) * tries]
            held = sum(1 for t in mine if t.closed is None)
            eq(held, PER_ADDRESS, "connections %s holds (of %d tried)" % (a, tries))
    finally:
        for t in tricklers:
            t.close()


def body_head(topic, length):
    return ("POST /v1/topics/%s/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
            "Content-Length: %d\r\n\r\n" % (topic, length)).encode()


def test_trickled_bodies_are_cut_at_the_body_deadline(ctx):
    srv = ctx.srv
    settled(srv)
    topic = "slow-bodies"
    srv.create_topic(topic)
    heads_before = metric(srv, "pulse_http_header_timeouts_total")
    before = metric(srv, "pulse_http_body_timeouts_total")
    # A whole head at once, then one body byte every quarter second: far
    # below the minimum rate, however steadily it comes.
    tricklers = [Trickler(srv.port, a, first=body_head(topic, 100000), piece=b"a") for a in ADDRESSES]
    try:
        drive(tricklers, BODY_TIMEOUT * 6, during=lambda: served_at_once(srv, "during the body trickle"))
        still = [t for t in tricklers if t.closed is None]
        check(not still, "%d of %d trickling bodies still open after %.1f s" % (len(still), len(tricklers),
                                                                             BODY_TIMEOUT * 6))
        lives = sorted(t.closed - t.opened for t in tricklers)
        note("trickling bodies closed after %.2f .. %.2f s (deadline %.1f s)" % (lives[0], lives[-1], BODY_TIMEOUT))
        check(lives[0] >= BODY_TIMEOUT * 0.9, "a body was cut before its deadline: %.2f s" % lives[0])
        check(lives[-1] < BODY_TIMEOUT + 1.5, "a body outlived its deadline: %.2f s" % lives[-1])
        for t in tricklers:
            eq(t.received, b"", "nothing is answered to an unfinished body")
    finally:
        for t in tricklers:
            t.close()
    eq(metric(srv, "pulse_http_body_timeouts_total") - before, len(tricklers), "body timeouts counted")
    eq(metric(srv, "pulse_http_header_timeouts_total") - heads_before, 0, "no head timeouts")
    eq(srv.hw(topic), 0, "nothing of the cut bodies was stored")
    # A body that keeps above the minimum rate may take several windows.
    size = 100000
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    try:
        t0 = time.monotonic()
        s.sendall(body_head(topic, size))
        sent = 0
        while sent < size:
            piece = min(4000, size - sent)  # 40 kB/s, five times the minimum
            s.sendall(b"b" * piece)
            sent += piece
            time.sleep(0.1)
        took = time.monotonic() - t0
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            check(chunk, "closed before the answer after %.1f s: %r" % (took, data))
            data += chunk
    finally:
        s.close()
    check(took > BODY_TIMEOUT * 2, "the steady body took %.1f s, more than two windows" % took)
    check(data.startswith(b"HTTP/1.1 200"), "steady body: %r" % data[:200])
    eq(srv.hw(topic), 1, "the steady body was stored")


def test_a_full_server_frees_the_slots_of_slow_clients(ctx):
    # Long deadlines, few slots: five addresses take all 16 with heads and
    # bodies that trickle; more wait in the listen queue. A prompt client
    # gets in only when a slot frees: after a second, not after 30.
    srv = ctx.new_server(args=["-o", "server.header-timeout=30s", "-o", "server.body-timeout=30s",
                               "-o", "server.max-connections=16", "-o", "server.max-connections-per-ip=4",
                               "-o", "server.connection-timeout=60s"]).start()
    srv.create_topic("full")
    before = metric(srv, "pulse_http_busy_closes_total")
    tricklers = []
    try:
        for i, a in enumerate(ADDRESSES[:5]):
            for j in range(4):
                if (i + j) % 2:
                    tricklers.append(Trickler(srv.port, a, first=body_head("full", 100000), piece=b"a"))
                else:
                    tricklers.append(Trickler(srv.port, a))
        drive(tricklers, 0.3)
        t0 = time.monotonic()
        r = raw_request(srv.port, "GET", "/healthz", timeout=10)
        took = time.monotonic() - t0
        expect_json(r, 200, "healthz on a full server")
        note("a prompt client on a full server was served after %.2f s" % took)
        check(took < 3.0, "a prompt client waited %.2f s for a slot" % took)
    finally:
        for t in tricklers:
            t.close()
    check(metric(srv, "pulse_http_busy_closes_total") > before, "slow connections closed early as the server was full")
    eq(srv.hw("full"), 0, "nothing stored")
    srv.stop()


if __name__ == "__main__":
    sys.exit(main(globals(), server_args=SERVER_ARGS))
