# SPDX-License-Identifier: MIT
"""api/openapi.yaml and the live server agree: every route the server
answers (the ROUTES table below, each exercised live and shown to be routed,
i.e. neither 404 not_found nor 405) is described in the document, and the
document describes no route the server does not have.  The YAML is read
minimally without PyYAML: the `  /path:` lines under `paths:` and the
method keys indented beneath them."""

import os
import re
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (SseClient, check, eq, expect_json, fail, main, read_file, srcdir, uniq, BACKEND)  # noqa: E402

# (method, path template) for every route pulsed serves.
ROUTES = [
    ("GET", "/v1/topics"),
    ("POST", "/v1/topics"),
    ("GET", "/v1/topics/{topic}"),
    ("PATCH", "/v1/topics/{topic}"),
    ("DELETE", "/v1/topics/{topic}"),
    ("POST", "/v1/topics/{topic}/records"),
    ("GET", "/v1/topics/{topic}/partitions/{partition}/records"),
    ("GET", "/v1/consumers"),
    ("DELETE", "/v1/consumers/{consumer}"),
    ("GET", "/v1/consumers/{consumer}/cursors"),
    ("POST", "/v1/consumers/{consumer}/cursors"),
    ("GET", "/v1/consumers/{consumer}/cursors/{topic}/{partition}"),
    ("PUT", "/v1/consumers/{consumer}/cursors/{topic}/{partition}"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/v1/broker"),
    ("GET", "/openapi.yaml"),
    ("GET", "/v1/topics/{topic}/partitions"),
    ("GET", "/v1/topics/{topic}/partitions/{partition}"),
    ("GET", "/"),
    ("GET", "/ui/{asset}"),
    ("POST", "/v1/groups/{group}/members"),
    ("POST", "/v1/groups/{group}/members/{member}/heartbeat"),
    ("GET", "/v1/groups/{group}/members/{member}/records"),
    ("POST", "/v1/groups/{group}/members/{member}/commit"),
    ("GET", "/v1/groups/{group}"),
    ("GET", "/v1/groups"),
    ("DELETE", "/v1/groups/{group}/members/{member}"),
    ("GET", "/v1/topics/{topic}/records"),
    ("GET", "/v1/topics/{topic}/events"),
]

METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


def openapi_routes(text):
    """(METHOD, path) pairs from the paths: section."""
    routes = set()
    in_paths = False
    current = None
    for line in text.splitlines():
        if re.match(r"^\S", line):
            in_paths = line.rstrip() == "paths:"
            current = None
            continue
        if not in_paths:
            continue
        m = re.match(r"^  (/\S*):\s*$", line)
        if m:
            current = m.group(1)
            continue
        m = re.match(r"^    ([a-z]+):\s*$", line)
        if m and current and m.group(1) in METHODS:
            routes.add((m.group(1).upper(), current))
    return routes


def test_openapi_lists_exactly_the_served_routes(ctx):
    text = read_file(os.path.join(srcdir(), "api", "openapi.yaml")).decode("utf-8")
    doc = openapi_routes(text)
    check(doc, "no routes parsed from api/openapi.yaml")
    missing = sorted(set(ROUTES) - doc)
    extra = sorted(doc - set(ROUTES))
    check(not missing, "routes served but not in api/openapi.yaml: %r" % missing)
    check(not extra, "routes in api/openapi.yaml that the test does not know: %r" % extra)
    check(text.startswith("openapi: 3.1"), "document declares OpenAPI 3.1")
    check("- url: http://127.0.0.1:8080" in text, "servers entry http://127.0.0.1:8080")


def test_every_route_is_routed_live(ctx):
    srv = ctx.srv
    t = uniq("routes")
    c = uniq("routes-c")
    values = {"topic": t, "consumer": c, "partition": "0", "group": uniq("routes-g"), "member": None, "asset": "app.js"}
    bodies = {
        ("POST", "/v1/topics"): {"name": t},
        ("PATCH", "/v1/topics/{topic}"): {"retention_ms": 1000},
        ("POST", "/v1/topics/{topic}/records"): {"records": [{"value": "v"}]},
        ("POST", "/v1/consumers/{consumer}/cursors"): {"cursors": [{"topic": t, "partition": 0, "offset": 1}]},
        ("PUT", "/v1/consumers/{consumer}/cursors/{topic}/{partition}"): {"offset": 1},
        ("POST", "/v1/groups/{group}/members"): {"topics": [t]},
        ("POST", "/v1/groups/{group}/members/{member}/commit"):
            lambda: {"generation": values["generation"], "offsets": [{"topic": t, "partition": 0, "offset": 1}]},
    }
    expected = {
        ("POST", "/v1/topics"): 201,
        ("DELETE", "/v1/topics/{topic}"): 204,
        ("DELETE", "/v1/consumers/{consumer}"): 204,
        ("POST", "/v1/groups/{group}/members"): 201,
        ("DELETE", "/v1/groups/{group}/members/{member}"): 204,
    }
    if BACKEND == "kafka":
        # What the Kafka backend answers 406 for, over the mock cluster
        # (docs/Scaling.md "What differs").
        expected.update({("PATCH", "/v1/topics/{topic}"): 406,
                         ("GET", "/v1/consumers"): 406, ("DELETE", "/v1/consumers/{consumer}"): 406})
    # Order matters: create first, delete last.
    order = [ROUTES[1]] + [r for r in ROUTES if r not in (ROUTES[1], ROUTES[4], ROUTES[8])] + \
        [ROUTES[8], ROUTES[4]]
    eq(sorted(order), sorted(ROUTES), "every route exercised once")
    for method, tmpl in order:
        path = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], tmpl)
        if tmpl.endswith("/events"):  # an event stream never ends by itself
            sse = SseClient(srv.port, path)
            r = sse
            sse.body = b""
            sse.close()
        else:
            body = bodies.get((method, tmpl))
            r = srv.req(method, path, body() if callable(body) else body)
        want = expected.get((method, tmpl), 200)
        if r.status != want:
            fail("%s %s (%s): expected %d, got %d %r" % (method, path, tmpl, want, r.status, r.body[:300]))
        if tmpl == "/v1/groups/{group}/members":
            values["member"], values["generation"] = r.json()["member_id"], r.json()["generation"]
    expect_json(srv.get("/v1/topics/" + t), 404, "topic deleted by the last route")


def test_served_document_is_the_file(ctx):
    r = ctx.srv.get("/openapi.yaml")
    eq(r.status, 200, "status")
    eq(r.body, read_file(os.path.join(srcdir(), "api", "openapi.yaml")), "bytes of /openapi.yaml")


if __name__ == "__main__":
    sys.exit(main(globals()))
