# SPDX-License-Identifier: MIT
"""Bearer tokens and grants (docs/Security.md), driven by the router's own
table: `pulsed --routes` prints every route and method with the grant it
needs, and every one of them is tried

  - with no token: 401 with WWW-Authenticate: Bearer and the JSON error
    (except /healthz, /readyz and what auth.public lists);
  - with a wrong token: 401, error="invalid_token";
  - with a valid token that lacks the grant: 403 naming the grant
    ("read:t1");
  - with a token that has it: neither 401 nor 403.

Also: lists show only what a token covers; a topic create checks admin on
the name in the body; pulsed --hash-token's line is what the file takes
(its hash is SHA-256 of the token); SIGHUP reloads the file and a bad file
keeps the old tokens; a non-loopback --listen without tokens is refused
(exit 2) and server.allow-insecure=on starts with a warning; the access
log has one line per request with the token's name, never a token."""

import hashlib
import os
import re
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import SseClient, check, eq, free_port, main, pulsed_path, srcdir, wait_until  # noqa: E402

ROOT = "root-token-0123456789"
READER = "reader-token-abcdef"
NOGRANT = "nogrant-token-xyz"
ROOT_GRANTS = ["admin:*", "read:*", "write:*", "commit:*"]


def hash_line(name, token, grants):
    p = subprocess.run([pulsed_path(), "--hash-token", name] + grants, input=(token + "\n").encode(),
                       capture_output=True, timeout=30)
    eq(p.returncode, 0, "--hash-token exit status (stderr %r)" % p.stderr)
    return p.stdout.decode()


def write_tokens(path, entries):
    with open(path, "w") as f:
        f.write("# test tokens\n")
        for name, token, grants in entries:
            f.write(hash_line(name, token, grants))


def bearer(token):
    return {"Authorization": "Bearer " + token} if token else {}


def auth_server(ctx, entries, extra=()):
    path = os.path.join(ctx.tmp, "tokens-%d" % (len(ctx.extra) + 1))
    write_tokens(path, entries)
    srv = ctx.new_server(args=["-o", "auth.token-file=" + path] + list(extra))
    srv.start()
    srv.token_file = path
    return srv


def routes():
    p = subprocess.run([pulsed_path(), "--routes"], capture_output=True, timeout=30)
    eq(p.returncode, 0, "--routes exit status")
    out = []
    for line in p.stdout.decode().splitlines():
        method, tmpl, grant, subject = line.split(" ")
        out.append((method, tmpl, grant, subject))
    check(len(out) >= 25, "--routes lists every route: %r" % out)
    return out


def fill(tmpl):
    return (tmpl.replace("{topic}", "t1").replace("{partition}", "0").replace("{consumer}", "c1")
            .replace("{group}", "g1").replace("{member}", "m1").replace("{asset}", "app.js"))


def body_for(method, tmpl):
    if method not in ("POST", "PUT", "PATCH"):
        return None
    if tmpl == "/v1/topics":
        return {"name": "t1"}
    if tmpl.endswith("/records"):
        return {"records": [{"value": "x"}]}
    if tmpl.endswith("/members"):
        return {"topics": ["t1"]}
    return {}


class StreamHead:
    """The status of an event stream that was let in: the stream itself never
    ends, so only its head is read."""

    def __init__(self, srv, path, token):
        sc = SseClient(srv.port, path, headers=bearer(token))
        self.status = sc.status
        self.body = b""
        sc.close()


def call(srv, method, tmpl, token):
    if tmpl.endswith("/events") and token is not None and token != "not-a-known-token" and token != NOGRANT:
        return StreamHead(srv, fill(tmpl), token)
    return srv.req(method, fill(tmpl), body=body_for(method, tmpl), headers=bearer(token))


PUBLIC_BY_DEFAULT = ("/", "/ui/{asset}", "/openapi.yaml")


def test_every_route_with_no_wrong_missing_and_right_grant(ctx):
    srv = auth_server(ctx, [("root", ROOT, ROOT_GRANTS), ("nogrant", NOGRANT, [])])
    eq(srv.req("POST", "/v1/topics", body={"name": "t1"}, headers=bearer(ROOT)).status, 201, "create t1")
    tried = 0
    for method, tmpl, grant, subject in routes():
        what = "%s %s (%s)" % (method, tmpl, grant)
        open_route = grant == "none" or (grant == "public" and tmpl in PUBLIC_BY_DEFAULT)
        for token, wrong in ((None, False), ("not-a-known-token", True)):
            r = call(srv, method, tmpl, token)
            if open_route:
                check(r.status not in (401, 403), "%s without a token: %d" % (what, r.status))
                continue
            eq(r.status, 401, "%s with %s token" % (what, "a wrong" if wrong else "no"))
            wa = r.header("WWW-Authenticate") or ""
            check(wa.startswith("Bearer"), "%s: WWW-Authenticate %r" % (what, wa))
            check(("invalid_token" in wa) == wrong, "%s: WWW-Authenticate %r" % (what, wa))
            eq(r.json()["error"]["code"], "unauthorized", what)
            check(b"not-a-known-token" not in r.body, "%s: the answer echoes the token" % what)
        r = call(srv, method, tmpl, NOGRANT)
        if grant in ("none", "public", "token"):
            check(r.status not in (401, 403), "%s with a grantless token: %d %r" % (what, r.status, r.body))
        else:
            eq(r.status, 403, "%s with a token without the grant (%r)" % (what, r.body))
            msg = r.json()["error"]["message"]
            want = {"topic": "t1", "consumer": "c1", "group": "g1"}.get(subject)
            needle = ("%s:%s" % (grant, want)) if want else grant
            check(needle in msg and 'token "nogrant"' in msg, "%s: 403 names %r: %r" % (what, needle, msg))
            eq(r.json()["error"]["code"], "forbidden", what)
        if method == "DELETE" and tmpl == "/v1/topics/{topic}":
            continue  # tried last, below, so the topic stays for the rest
        r = call(srv, method, tmpl, ROOT)
        check(r.status not in (401, 403), "%s with the grant: %d %r" % (what, r.status, r.body))
        tried += 1
    r = srv.req("DELETE", "/v1/topics/t1", headers=bearer(ROOT))
    eq(r.status, 204, "DELETE with admin:*")
    check(tried >= 25, "tried %d routes" % tried)
    with open(srv.stderr_path, "rb") as f:
        log = f.read()
    for secret in (ROOT, NOGRANT, "not-a-known-token"):
        check(secret.encode() not in log, "a token reached the log")


def test_lists_show_only_what_the_token_covers(ctx):
    srv = auth_server(ctx, [("root", ROOT, ROOT_GRANTS), ("reader", READER, ["read:t*", "commit:c*"]),
                            ("tadmin", "t-admin-token", ["admin:t*"])])
    for name in ("t1", "t2", "other"):
        eq(srv.req("POST", "/v1/topics", body={"name": name}, headers=bearer(ROOT)).status, 201, name)
    r = srv.get("/v1/topics", headers=bearer(READER))
    eq(r.status, 200, "list")
    eq(sorted(t["name"] for t in r.json()["topics"]), ["t1", "t2"], "reader's topics")
    eq(len(srv.get("/v1/topics", headers=bearer(ROOT)).json()["topics"]), 3, "root's topics")
    eq(srv.get("/v1/topics/other", headers=bearer(READER)).status, 403, "other")
    eq(srv.get("/v1/topics/t2", headers=bearer(READER)).status, 200, "t2")
    # The name a create asks for is in the body: admin on that name.
    r = srv.req("POST", "/v1/topics", body={"name": "t9"}, headers=bearer(READER))
    eq(r.status, 403, "create without admin")
    check('holds no admin grant' in r.json()["error"]["message"], r.body)
    r = srv.req("POST", "/v1/topics", body={"name": "x9"}, headers=bearer("t-admin-token"))
    eq(r.status, 403, "create outside the admin pattern")
    check('lacks the grant admin:x9' in r.json()["error"]["message"], r.body)
    eq(srv.req("POST", "/v1/topics", body={"name": "t9"}, headers=bearer("t-admin-token")).status, 201, "t9")
    # A fetch that starts at a consumer's cursor needs commit on it.
    eq(srv.get("/v1/topics/t1/partitions/0/records?consumer=c1", headers=bearer(READER)).status, 200, "c1")
    r = srv.get("/v1/topics/t1/partitions/0/records?consumer=x1", headers=bearer(READER))
    eq(r.status, 403, "consumer x1")
    check("commit:x1" in r.json()["error"]["message"], r.body)
    # metrics are not public by default; with auth.public=metrics they are.
    eq(srv.get("/metrics").status, 401, "metrics without a token")
    eq(srv.get("/metrics", headers=bearer(READER)).status, 200, "metrics with a token")


def test_hash_token_line_round_trip(ctx):
    line = hash_line("alice", "s3cret-token", ["read:orders*", "commit:svc-*"])
    m = re.fullmatch(r"alice sha256:([0-9a-f]{64}) read:orders\* commit:svc-\*\n", line)
    check(m is not None, "line %r" % line)
    eq(m.group(1), hashlib.sha256(b"s3cret-token").hexdigest(), "the hash is SHA-256 of the token")
    check("s3cret-token" not in line, "the line holds the token")
    for args, stdin, needle in ((["bad name"], "t", "name"), (["a", "reed:x"], "t", "grant \"reed:x\""),
                                (["a"], "", "the token"), ([], "t", "NAME")):
        p = subprocess.run([pulsed_path(), "--hash-token"] + args, input=stdin.encode(), capture_output=True,
                           timeout=30)
        eq(p.returncode, 2, "--hash-token %r exit status" % args)
        check(needle in p.stderr.decode(), "--hash-token %r: %r" % (args, p.stderr))


def test_sighup_reloads_tokens_and_a_bad_file_keeps_them(ctx):
    srv = auth_server(ctx, [("root", ROOT, ROOT_GRANTS)])
    eq(srv.get("/v1/topics", headers=bearer(ROOT)).status, 200, "root before")
    eq(srv.get("/v1/topics", headers=bearer(READER)).status, 401, "reader before")
    write_tokens(srv.token_file, [("reader", READER, ["read:*"])])
    os.kill(srv.server_pid(), signal.SIGHUP)
    check(wait_until(lambda: srv.get("/v1/topics", headers=bearer(READER)).status == 200, 10),
          "the new token works after SIGHUP")
    eq(srv.get("/v1/topics", headers=bearer(ROOT)).status, 401, "the removed token is refused")
    with open(srv.token_file, "a") as f:
        f.write("broken line\n")
    os.kill(srv.server_pid(), signal.SIGHUP)

    def logged():
        with open(srv.stderr_path) as f:
            return "keeping the previous 1 token(s)" in f.read()
    check(wait_until(logged, 10), "a bad file on reload is logged: %s" % srv.stderr_tail())
    with open(srv.stderr_path) as f:
        text = f.read()
    check("line 3" in text and srv.token_file in text, "the log says where: %r" % text[-800:])
    eq(srv.get("/v1/topics", headers=bearer(READER)).status, 200, "the old tokens stay")
    check(srv.alive(), "SIGHUP never stops pulsed")


def test_openapi_documents_401_and_403_where_the_table_gives_them(ctx):
    """api/openapi.yaml, read minimally: under each operation of the
    paths: section, 401 where a token may be needed, 403 where a grant
    is, and security: [] where none ever is."""
    with open(os.path.join(srcdir(), "api", "openapi.yaml")) as f:
        text = f.read()
    ops = {}
    path = method = None
    in_paths = False
    for line in text.splitlines():
        if re.match(r"^\S", line):
            in_paths = line.rstrip() == "paths:"
            continue
        if not in_paths:
            continue
        m = re.match(r"^  (/\S*):\s*$", line)
        if m:
            path, method = m.group(1), None
            continue
        m = re.match(r"^    (get|put|post|delete|patch):\s*$", line)
        if m:
            method = m.group(1).upper()
            ops[(method, path)] = []
            continue
        if method:
            ops[(method, path)].append(line)
    check("securitySchemes:\n    bearer:\n      type: http\n      scheme: bearer" in text, "the bearer scheme")
    for method, tmpl, grant, _ in routes():
        body = "\n".join(ops.get((method, tmpl), []))
        what = "openapi %s %s (%s)" % (method, tmpl, grant)
        check((method, tmpl) in ops, what + ": not described")
        check(('"401":' in body) == (grant != "none"), what + ": 401")
        if grant not in ("none", "public", "token"):
            check('"403":' in body, what + ": 403")
        check(("security: []" in body) == (grant == "none"), what + ": security")


def test_the_example_token_file_is_a_valid_one(ctx):
    srv = ctx.new_server(args=["-o", "auth.token-file=" + os.path.join(srcdir(), "conf", "tokens.example")])
    srv.start()
    eq(srv.req("POST", "/v1/topics", body={"name": "orders"}, headers=bearer("admin-example-token")).status, 201,
       "the example's operator token")
    eq(srv.req("POST", "/v1/topics/orders/records", body={"records": [{"value": 1}]},
               headers=bearer("ingest-example-token")).status, 200, "the example's producer token")
    eq(srv.get("/v1/topics/orders/partitions/0/records", headers=bearer("ingest-example-token")).status, 403,
       "the producer may not read")
    eq(srv.get("/v1/topics/orders/partitions/0/records", headers=bearer("reader-example-token")).status, 200,
       "the example's reader token")


def run_pulsed(args, what):
    try:
        p = subprocess.run([pulsed_path()] + args, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError("%s: pulsed kept running (it must refuse to start)" % what)
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")


def test_non_loopback_listen_without_tokens_is_refused(ctx):
    d = os.path.join(ctx.tmp, "exposed")
    for listen in ("0.0.0.0:%d" % free_port(), "[::]:%d" % free_port()):
        rc, text = run_pulsed(["--data-dir", d, "--listen", listen], "listen %s" % listen)
        eq(rc, 2, "listen %s: exit status (%r)" % (listen, text))
        for needle in ("refusing to listen on %s without authentication" % listen, "auth.token-file",
                       "server.allow-insecure=on"):
            check(needle in text, "listen %s: the message says %r: %r" % (listen, needle, text))
    check(not os.path.exists(d), "a refused start touches no data directory")
    # A token file that cannot be read is a configuration error too.
    rc, text = run_pulsed(["--data-dir", d, "-o", "auth.token-file=" + os.path.join(ctx.tmp, "missing")], "missing")
    eq(rc, 2, "missing token file (%r)" % text)
    check("cannot open" in text, text)


def test_allow_insecure_starts_and_warns(ctx):
    # Bound to every address for a moment; only the loopback is spoken to.
    srv = ctx.new_server(args=["-o", "server.allow-insecure=on"])
    srv.command_orig = srv.command
    srv.command = lambda: [a if not a.startswith("127.0.0.1:") else "0.0.0.0:%d" % srv.port
                           for a in srv.command_orig()]
    srv.start()
    srv.stop()
    with open(srv.stderr_path) as f:
        text = f.read()
    check("level=warn server.allow-insecure=on: serving 0.0.0.0" in text and "WITHOUT AUTHENTICATION" in text,
          "the warning: %r" % text)


def test_access_log_has_one_line_per_request(ctx):
    srv = auth_server(ctx, [("root", ROOT, ROOT_GRANTS)], extra=["-o", "server.access-log=on"])
    eq(srv.req("POST", "/v1/topics", body={"name": "t1"}, headers=bearer(ROOT)).status, 201, "create")
    body = b'{"records":[{"value":"hello"}]}'
    r = srv.req("POST", "/v1/topics/t1/records", body=body,
                headers=dict(bearer(ROOT), **{"Content-Type": "application/json", "X-Request-Id": "acc-1"}))
    eq(r.status, 200, "publish")
    eq(srv.get("/v1/topics", headers={"X-Request-Id": "acc-2"}).status, 401, "no token")

    def lines():
        with open(srv.stderr_path) as f:
            return [ln for ln in f.read().splitlines() if " access " in ln]
    # A line is written once its answer is done: wait for the last one.
    check(wait_until(lambda: all(any("request_id=" + i in ln for ln in lines()) for i in ("acc-1", "acc-2")), 10),
          "access lines: %r" % lines())
    pub = [ln for ln in lines() if "request_id=acc-1" in ln]
    eq(len(pub), 1, "one line for the publish: %r" % lines())
    want = (r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=info access client=127\.0\.0\.1:\d+ token=root "
            r"method=POST path=/v1/topics/t1/records status=200 bytes_in=%d bytes_out=%d duration_ms=\d+\.\d+ "
            r"request_id=acc-1$" % (len(body), len(r.body)))
    check(re.match(want, pub[0]), "the publish line %r" % pub[0])
    anon = [ln for ln in lines() if "request_id=acc-2" in ln]
    check(len(anon) == 1 and "token=- " in anon[0] and "status=401" in anon[0], "the 401 line %r" % anon)
    srv.stop()
    # Off by default: no access lines at all.
    quiet = auth_server(ctx, [("root", ROOT, ROOT_GRANTS)])
    eq(quiet.get("/v1/topics", headers=bearer(ROOT)).status, 200, "list")
    quiet.stop()
    with open(quiet.stderr_path) as f:
        check(" access " not in f.read(), "access lines with server.access-log off")


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
