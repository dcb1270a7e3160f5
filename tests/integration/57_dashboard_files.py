# SPDX-License-Identifier: MIT
"""The dashboard's files, compiled into pulsed from web/: GET / is
web/index.html and GET /ui/<name> each file of web/, byte for byte, with the
Content-Type of its kind, an entity tag (304 on a matching If-None-Match),
Cache-Control: no-cache and a Content-Security-Policy the page satisfies (no
inline script or style, nothing loaded from another server).  The page
itself is driven in a real browser by tests/browser/."""

import os
import re
import sys

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (check, eq, expect_error, expect_status, main, read_file, srcdir)  # noqa: E402

TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}


def web_files():
    d = os.path.join(srcdir(), "web")
    names = sorted(os.listdir(d))
    check(names, "web/ holds the dashboard's files")
    return [(n, read_file(os.path.join(d, n))) for n in names]


def expect_file_headers(r, ctype, what):
    eq(r.header("Content-Type"), ctype, "%s: Content-Type" % what)
    check(re.fullmatch(r'"\d+-\d+"', r.header("ETag") or ""), "%s: ETag %r" % (what, r.header("ETag")))
    eq(r.header("Cache-Control"), "no-cache", "%s: Cache-Control" % what)
    eq(r.header("X-Content-Type-Options"), "nosniff", "%s: X-Content-Type-Options" % what)
    check(r.header("Content-Security-Policy"), "%s: Content-Security-Policy" % what)


def test_root_is_the_dashboard_page(ctx):
    # A browser's own Accept header (no application/json in it) is fine here.
    r = ctx.srv.get("/", headers={"Accept": "text/html,application/xhtml+xml;q=0.9"})
    expect_status(r, 200, "GET /")
    eq(r.body, read_file(os.path.join(srcdir(), "web", "index.html")), "GET / is web/index.html")
    expect_file_headers(r, TYPES[".html"], "GET /")


def test_every_file_of_web_is_served_with_its_type(ctx):
    for name, data in web_files():
        r = ctx.srv.get("/ui/" + name)
        expect_status(r, 200, "GET /ui/" + name)
        eq(r.body, data, "bytes of /ui/%s" % name)
        expect_file_headers(r, TYPES[os.path.splitext(name)[1]], "GET /ui/" + name)


def test_policy_forbids_inline_code_and_the_page_has_none(ctx):
    csp = ctx.srv.get("/").header("Content-Security-Policy")
    directives = dict((d.strip().split(" ", 1) + [""])[:2] for d in csp.split(";"))
    eq(directives.get("default-src"), "'none'", "default-src")
    eq(directives.get("script-src"), "'self'", "script-src: this server's files only")
    eq(directives.get("style-src"), "'self'", "style-src: this server's files only")
    check("unsafe" not in csp, "no 'unsafe-*' source in %r" % csp)
    html = read_file(os.path.join(srcdir(), "web", "index.html")).decode("utf-8")
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, re.S | re.I)
    check(scripts, "the page loads a script")
    for attrs, body in scripts:
        check("src=" in attrs and body.strip() == "", "no inline script: %r" % attrs)
    check(not re.search(r"<style\b", html, re.I), "no <style> element")
    check(not re.search(r"\sstyle\s*=", html, re.I), "no style attribute")
    check(not re.search(r"\son[a-z]+\s*=", html, re.I), "no inline event handler")
    # Everything the page loads comes from /ui/ and is served.
    refs = re.findall(r"\s(?:src|href)=\"([^\"#]+)\"", html)
    check(refs, "the page references its files")
    for ref in refs:
        check(ref.startswith("/ui/"), "page loads %r from this server's /ui/" % ref)
        expect_status(ctx.srv.get(ref), 200, "GET " + ref)


def test_matching_entity_tag_is_304_without_body(ctx):
    srv = ctx.srv
    for path in ("/", "/ui/app.js", "/openapi.yaml"):
        tag = srv.get(path).header("ETag")
        check(tag, "%s has an ETag" % path)
        for inm in (tag, "W/" + tag, '"other", ' + tag, "*"):
            r = srv.get(path, headers={"If-None-Match": inm})
            expect_status(r, 304, "%s with If-None-Match %s" % (path, inm))
            eq(r.body, b"", "304 has no body")
            eq(r.header("ETag"), tag, "304 repeats the ETag")
        r = srv.get(path, headers={"If-None-Match": '"0-0"'})
        expect_status(r, 200, "%s with a stale tag" % path)
        check(len(r.body) > 0, "stale tag gets the body")


def test_files_are_read_only_and_unknown_ones_404(ctx):
    srv = ctx.srv
    expect_error(srv.get("/ui/missing.js"), 404, "not_found", "unknown asset")
    expect_error(srv.get("/ui/" + "a" * 300), 404, "not_found", "long asset name")
    expect_error(srv.get("/ui/app.js/x"), 404, "not_found", "no subdirectories")
    for method, path in (("POST", "/"), ("DELETE", "/ui/app.js"), ("PUT", "/ui/index.html")):
        expect_error(srv.req(method, path, {} if method != "DELETE" else None), 405, "method_not_allowed",
                     "%s %s" % (method, path))


if __name__ == "__main__":
    sys.exit(main(globals()))
