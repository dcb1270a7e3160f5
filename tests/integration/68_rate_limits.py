# SPDX-License-Identifier: MIT
"""Rate limits per client ([limits]): token buckets of requests and bytes.

  - over limits.requests-per-second (a burst past limits.burst), requests
    are answered 429 too_many_requests with Retry-After (whole seconds, at
    least 1) and the JSON error body, and nothing of them is executed: a
    refused publish stores nothing; /metrics counts them
    (pulse_http_rate_limited_total);
  - the bucket refills: after Retry-After seconds the client is served;
  - each client address has its own buckets (an Authorization header,
    which nothing verifies yet, does not make a client of its own), and
    /healthz and /readyz are never limited;
  - over limits.bytes-per-second a publish whose declared body the bucket
    cannot hold is refused before its body is read, and a fetch's bytes put
    the client in debt that its next request waits out;
  - the table of clients stays within limits.max-clients, forgetting the
    least recently seen (pulse_http_rate_limit_clients, _evictions_total);
  - a token's line may carry its own rates (rps=, bps=): a lower rps
    limits that token sooner than the default, rps=0 lifts the limit, a
    token without the field keeps the default, an override limits even
    with the defaults off, and SIGHUP applies new rates to the next
    requests."""

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (BACKEND, Response, check, eq, expect_error, expect_json, main, note,  # noqa: E402
                       pulsed_path, wait_until)

ADMIN = "127.0.0.2"  # the tests' own reads come from this address: a client of its own


def metric(srv, name):
    r = from_address(ADMIN, srv, "GET", "/metrics")
    eq(r.status, 200, "/metrics (own bucket)")
    m = re.search(r"^%s (\d+)$" % re.escape(name), r.body.decode(), re.M)
    check(m is not None, "/metrics has no %s" % name)
    return int(m.group(1))


def from_address(addr, srv, method, path, body=None, headers=None):
    """One request from the loopback address addr (127.0.0.0/8): a client
    with buckets of its own."""
    hdrs = dict(headers or {})
    if body is not None:
        body = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30, source_address=(addr, 0))
    try:
        conn.request(method, path, body=body, headers=hdrs)
        r = conn.getresponse()
        return Response(r.status, r.reason, r.getheaders(), r.read())
    finally:
        conn.close()


def retry_after(r):
    v = r.header("Retry-After")
    check(v is not None and v.isdigit() and int(v) >= 1, "429 needs Retry-After >= 1, got %r" % v)
    return int(v)


def publish(srv, topic, value, headers=None):
    return srv.req("POST", "/v1/topics/%s/records" % topic, {"records": [{"value": value}]}, headers=headers)


def test_burst_past_the_request_limit_is_429_and_stores_nothing(ctx):
    # 1 request per second, a bucket of 3: a burst of 10 gets 3 through
    # (4 if the burst takes over a second on a slow machine).
    srv = ctx.new_server(args=["-o", "limits.requests-per-second=1", "-o", "limits.burst=3s"])
    srv.start()
    from_address(ADMIN, srv, "POST", "/v1/topics", {"name": "rl"})
    ok, refused = [], []
    for i in range(10):
        r = publish(srv, "rl", "v%d" % i)
        if r.status == 200:
            ok.append("v%d" % i)
        else:
            expect_error(r, 429, "too_many_requests", "publish %d" % i)
            retry_after(r)
            check("limits.requests-per-second" in r.json()["error"]["message"], "the message names the limit")
            refused.append(i)
    note("admitted %d, refused %d" % (len(ok), len(refused)))
    check(3 <= len(ok) <= 4, "a bucket of 3 at 1/s admits 3 (or 4) of a burst of 10, admitted %d" % len(ok))
    r = from_address(ADMIN, srv, "GET", "/v1/topics/rl/partitions/0/records?max_records=100")
    got = [rec["value"] for rec in expect_json(r, 200, "fetch")["records"]]
    eq(got, ok, "exactly the admitted publishes are stored")
    eq(metric(srv, "pulse_http_rate_limited_total"), len(refused), "refusals counted in /metrics")
    # Never limited, whatever the bucket holds.
    for _ in range(5):
        eq(srv.get("/healthz").status, 200, "/healthz")
        eq(srv.get("/readyz").status, 200, "/readyz")
    srv.stop()


def test_bucket_refills_after_retry_after(ctx):
    srv = ctx.new_server(args=["-o", "limits.requests-per-second=2", "-o", "limits.burst=1s"])
    srv.start()
    r = None
    for _ in range(10):
        r = srv.get("/v1/topics")
        if r.status == 429:
            break
    eq(r.status, 429, "a burst of 10 at 2/s with a bucket of 2 is refused")
    wait = retry_after(r)
    eq(wait, 1, "at 2/s a token is at most half a second away: Retry-After rounds up to 1")
    time.sleep(wait)
    eq(srv.get("/v1/topics").status, 200, "served again after Retry-After")
    srv.stop()


def test_each_address_has_its_own_bucket(ctx):
    srv = ctx.new_server(args=["-o", "limits.requests-per-second=1", "-o", "limits.burst=2s"])
    srv.start()
    codes_a = [from_address("127.0.0.5", srv, "GET", "/v1/topics").status for _ in range(4)]
    check(429 in codes_a, "client a is limited: %r" % codes_a)
    eq(from_address("127.0.0.6", srv, "GET", "/v1/topics").status, 200, "client b has a bucket of its own")
    eq(srv.get("/v1/topics").status, 200, "127.0.0.1: its own bucket, untouched by a and b")
    srv.stop()


def test_byte_limit_refuses_a_declared_body_before_reading_it(ctx):
    srv = ctx.new_server(args=["-o", "limits.bytes-per-second=10KiB", "-o", "limits.burst=1s"])
    srv.start()
    from_address(ADMIN, srv, "POST", "/v1/topics", {"name": "bytes"})
    big = "x" * 7000
    eq(publish(srv, "bytes", big).status, 200, "the first 7 KB publish fits the 10 KiB bucket")
    r = publish(srv, "bytes", big)
    expect_error(r, 429, "too_many_requests", "a second 7 KB publish at once")
    check("limits.bytes-per-second" in r.json()["error"]["message"], "the message names the byte limit")
    retry_after(r)
    r = from_address(ADMIN, srv, "GET", "/v1/topics/bytes/partitions/0/records")
    eq(len(expect_json(r, 200, "fetch")["records"]), 1, "the refused publish stored nothing")
    # A fetch's bytes are charged when it answers: 7 KB served to a fresh
    # bucket twice puts it in debt, and the next request waits.
    # (The Kafka backend has no raw form: a JSON fetch of the same bytes.)
    fmt = "?format=raw" if BACKEND == "local" else ""
    codes = [from_address("127.0.0.4", srv, "GET", "/v1/topics/bytes/partitions/0/records" + fmt).status
             for _ in range(3)]
    eq(codes[0], 200, "first fetch")
    check(429 in codes, "fetched bytes count against the byte limit: %r" % codes)
    srv.stop()


def test_client_table_stays_within_max_clients(ctx):
    srv = ctx.new_server(args=["-o", "limits.requests-per-second=100", "-o", "limits.max-clients=3"])
    srv.start()
    for i in range(8):
        eq(from_address("127.0.0.%d" % (10 + i), srv, "GET", "/v1/topics").status, 200, "client %d" % i)
    eq(metric(srv, "pulse_http_rate_limit_clients"), 3, "clients remembered")
    # 8 clients + the metrics reader into 3 slots: 6 forgotten by now.
    eq(metric(srv, "pulse_http_rate_limit_evictions_total"), 6, "least recently seen clients forgotten")
    srv.stop()


def test_a_made_up_authorization_header_does_not_escape_the_limit(ctx):
    # Without token authentication nothing vouches for an Authorization
    # header: a client that sends a new one with every request must still
    # be limited by its address, and cannot push other clients out of the
    # table with them.
    srv = ctx.new_server(args=["-o", "limits.requests-per-second=1", "-o", "limits.burst=2s",
                               "-o", "limits.max-clients=4"])
    srv.start()
    codes = [srv.get("/v1/topics", headers={"Authorization": "Bearer made-up-%d" % i}).status for i in range(6)]
    check(429 in codes, "a new Authorization header per request is still this address's bucket: %r" % codes)
    eq(from_address("127.0.0.3", srv, "GET", "/v1/topics").status, 200, "another address has its own bucket")
    srv.stop()


def token_line(name, token, grants):
    p = subprocess.run([pulsed_path(), "--hash-token", name] + grants, input=(token + "\n").encode(),
                       capture_output=True, timeout=30)
    eq(p.returncode, 0, "--hash-token exit status (stderr %r)" % p.stderr)
    return p.stdout.decode()


def test_with_tokens_each_token_has_its_buckets_wherever_it_comes_from(ctx):
    path = os.path.join(ctx.tmp, "rl-tokens")
    with open(path, "w") as f:
        for name, token in (("alpha", "alpha-token-1"), ("beta", "beta-token-2")):
            f.write(token_line(name, token, ["admin:*", "read:*", "write:*"]))
    srv = ctx.new_server(args=["-o", "auth.token-file=" + path, "-o", "limits.requests-per-second=1",
                               "-o", "limits.burst=2s"])
    srv.start()
    alpha = {"Authorization": "Bearer alpha-token-1"}
    beta = {"Authorization": "Bearer beta-token-2"}
    # alpha's bucket of 2, spent from two addresses: one bucket, not two.
    got = [from_address(a, srv, "GET", "/v1/topics", headers=alpha).status
           for a in ("127.0.0.3", "127.0.0.4", "127.0.0.3", "127.0.0.4")]
    check(got.count(429) >= 1 and got[:2] == [200, 200], "alpha from two addresses shares one bucket: %r" % got)
    # beta, from the same address as alpha, still has its own.
    eq(from_address("127.0.0.3", srv, "GET", "/v1/topics", headers=beta).status, 200, "beta's own bucket")
    # A request without a valid token is answered 401 before any bucket.
    for _ in range(4):
        eq(from_address("127.0.0.3", srv, "GET", "/v1/topics").status, 401, "no token")



def statuses(srv, headers, n):
    """n requests in a row with headers: their statuses, and the last 429."""
    got, refused = [], None
    for _ in range(n):
        r = from_address("127.0.0.3", srv, "GET", "/v1/topics", headers=headers)
        got.append(r.status)
        if r.status == 429:
            refused = r
    return got, refused


def test_a_token_line_may_give_the_token_its_own_rates(ctx):
    path = os.path.join(ctx.tmp, "rl-own-tokens")
    grants = ["admin:*", "read:*", "write:*"]
    with open(path, "w") as f:
        f.write(token_line("slow", "slow-token-1", grants + ["rps=1"]))
        f.write(token_line("free", "free-token-2", grants + ["rps=0"]))
        f.write(token_line("plain", "plain-token-3", grants))
    check("rps=1" in open(path).read(), "--hash-token prints the field on the line")
    srv = ctx.new_server(args=["-o", "auth.token-file=" + path, "-o", "limits.requests-per-second=5",
                               "-o", "limits.burst=2s"])
    srv.start()
    # slow: its own bucket of 2 (1/s for 2 s), below the default's 10.
    got, refused = statuses(srv, {"Authorization": "Bearer slow-token-1"}, 5)
    check(got[:2] == [200, 200] and got.count(429) >= 2, "slow is limited at its own rps: %r" % got)
    retry_after(refused)
    check("its token's rps" in refused.body.decode(), "the 429 names the token's rps: %r" % refused.body)
    # free: rps=0, never limited however many.
    got, _ = statuses(srv, {"Authorization": "Bearer free-token-2"}, 25)
    eq(got, [200] * 25, "free (rps=0) is never limited")
    # plain: the default bucket of 10.
    got, refused = statuses(srv, {"Authorization": "Bearer plain-token-3"}, 16)
    check(got[:10] == [200] * 10 and got.count(429) >= 1, "plain keeps the default: %r" % got)
    check("limits.requests-per-second" in refused.body.decode(), "the default is named: %r" % refused.body)
    srv.stop()


def test_an_override_limits_with_the_defaults_off_and_reloads_apply(ctx):
    path = os.path.join(ctx.tmp, "rl-off-tokens")
    grants = ["admin:*", "read:*", "write:*"]
    with open(path, "w") as f:
        f.write(token_line("slow", "slow-token-1", grants + ["rps=1"]))
        f.write(token_line("plain", "plain-token-3", grants))
    srv = ctx.new_server(args=["-o", "auth.token-file=" + path, "-o", "limits.burst=2s"])
    srv.start()
    slow = {"Authorization": "Bearer slow-token-1"}
    got, _ = statuses(srv, slow, 5)
    check(got[:2] == [200, 200] and got.count(429) >= 2, "an override limits without defaults: %r" % got)
    got, _ = statuses(srv, {"Authorization": "Bearer plain-token-3"}, 20)
    eq(got, [200] * 20, "no default: a token without the field is not limited")
    # SIGHUP: slow becomes unlimited from its next request on.
    with open(path, "w") as f:
        f.write(token_line("slow", "slow-token-1", grants + ["rps=0"]))
    os.kill(srv.server_pid(), signal.SIGHUP)
    # Five in a row pass only once rps=0 applies (1/s holds 2 at most).
    check(wait_until(lambda: statuses(srv, slow, 5)[0] == [200] * 5, 10),
          "after the reload slow's rps=0 applies: %s" % srv.stderr_tail())
    got, _ = statuses(srv, slow, 10)
    eq(got, [200] * 10, "and stays")
    srv.stop()



def test_a_429_names_the_default_when_the_token_overrides_only_the_other_rate(ctx):
    path = os.path.join(ctx.tmp, "rl-mixed-tokens")
    with open(path, "w") as f:
        f.write(token_line("fast", "fast-token-1", ["admin:*", "read:*", "write:*", "rps=100"]))
    srv = ctx.new_server(args=["-o", "auth.token-file=" + path, "-o", "limits.bytes-per-second=1000"])
    srv.start()
    fast = {"Authorization": "Bearer fast-token-1"}
    body = {"records": [{"value": "v" * 850}]}
    first = from_address("127.0.0.3", srv, "POST", "/v1/topics/mixed/records", body=body, headers=fast)
    check(first.status != 429, "the first body fits the byte bucket: %d" % first.status)
    r = from_address("127.0.0.3", srv, "POST", "/v1/topics/mixed/records", body=body, headers=fast)
    eq(r.status, 429, "the second is over the default byte rate")
    text = r.body.decode()
    check("limits.bytes-per-second" in text and "token" not in text, "the default is named: %r" % text)
    srv.stop()


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
