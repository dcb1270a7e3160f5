# SPDX-License-Identifier: MIT
"""HTTPS (tls.cert-file, tls.key-file) and client certificates
(tls.client-ca-file), with a CA this test makes with the openssl command:

  - publish and fetch over HTTPS with `curl --cacert` against the test's
    CA; plain HTTP to the same port gets no answer, and curl without the
    CA refuses the server;
  - a raw fetch over HTTPS returns exactly the bytes of the segment file
    (libmicrohttpd cannot use sendfile under TLS: it reads the file and
    encrypts; the trace must show no sendfile while the bytes agree);
  - with tls.client-ca-file, a client without a certificate, or with one
    another CA signed, is refused (403 on every route, nothing stored), and
    one with a certificate the CA signed is served;
  - SIGHUP serves a renewed certificate from the next handshake on, with
    the listener and open connections untouched; a bad file on SIGHUP keeps
    the last good certificate and the log names the file;
  - unreadable, non-PEM or mismatched files stop pulsed at start with exit
    status 2 and a message naming the setting and the file."""

import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pulsetest import (Response, Server, Skip, b64, check, decode_batches, eq, expect_error,  # noqa: E402
                       expect_status, free_port, local_only, main, note, pulsed_path, read_file, segment_files)

OPENSSL = shutil.which("openssl")
CURL = shutil.which("curl")


def sh(args, what):
    p = subprocess.run(args, capture_output=True, timeout=60)
    check(p.returncode == 0, "%s: %s exited %d: %s" % (what, args[0], p.returncode,
                                                      p.stderr.decode(errors="replace")[-400:]))
    return p.stdout


class Certs:
    """A CA, a server certificate for 127.0.0.1 and a client certificate it
    signed, plus a client certificate from another CA: P-256 keys, made
    with openssl in dir."""

    def __init__(self, d):
        if not OPENSSL:
            raise Skip("openssl is not installed (scripts/setup.sh installs it)")
        os.makedirs(d, exist_ok=True)
        self.d = d
        self.ca, self.ca_key = self._self_signed("ca", "/CN=pulse test CA")
        self.other_ca, self.other_ca_key = self._self_signed("other-ca", "/CN=another CA")
        self.srv, self.srv_key = self._signed("server", "/CN=127.0.0.1", self.ca, self.ca_key,
                                              "subjectAltName=IP:127.0.0.1,DNS:localhost")
        self.cli, self.cli_key = self._signed("client", "/CN=client-a", self.ca, self.ca_key, None)
        self.bad_cli, self.bad_cli_key = self._signed("stranger", "/CN=stranger", self.other_ca,
                                                      self.other_ca_key, None)

    def p(self, name):
        return os.path.join(self.d, name)

    def _key(self, name):
        sh([OPENSSL, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-out", self.p(name + ".key")], "key " + name)
        return self.p(name + ".key")

    def _self_signed(self, name, subj):
        key = self._key(name)
        sh([OPENSSL, "req", "-x509", "-new", "-key", key, "-subj", subj, "-days", "2",
            "-out", self.p(name + ".pem")], "CA " + name)
        return self.p(name + ".pem"), key

    def _signed(self, name, subj, ca, ca_key, ext):
        key = self._key(name)
        sh([OPENSSL, "req", "-new", "-key", key, "-subj", subj, "-out", self.p(name + ".csr")], "csr " + name)
        args = [OPENSSL, "x509", "-req", "-in", self.p(name + ".csr"), "-CA", ca, "-CAkey", ca_key,
                "-CAcreateserial", "-days", "2", "-out", self.p(name + ".pem")]
        if ext:
            with open(self.p(name + ".ext"), "w") as f:
                f.write(ext + "\n")
            args += ["-extfile", self.p(name + ".ext")]
        sh(args, "sign " + name)
        return self.p(name + ".pem"), key


class TlsServer(Server):
    """A pulsed serving HTTPS; its requests (and the readiness wait) go
    through Python's ssl with the test CA, and the client certificate when
    client is given."""

    def __init__(self, tmp, certs, mtls=False, args=(), env=None, wrapper=None):
        tls = ["-o", "tls.cert-file=" + certs.srv, "-o", "tls.key-file=" + certs.srv_key]
        if mtls:
            tls += ["-o", "tls.client-ca-file=" + certs.ca]
        super().__init__(tmp, args=tls + list(args), env=env, wrapper=wrapper)
        self.certs = certs
        self.client = (certs.cli, certs.cli_key) if mtls else None

    @property
    def url(self):
        return "https://127.0.0.1:%d" % self.port

    def req(self, method, path, body=None, headers=None, timeout=None, chunked=False, client="default"):
        ctx = ssl.create_default_context(cafile=self.certs.ca)
        pair = self.client if client == "default" else client
        if pair:
            ctx.load_cert_chain(pair[0], pair[1])
        hdrs = dict(headers or {})
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout or 30, context=ctx)
        try:
            conn.request(method, path, body=body, headers=hdrs)
            r = conn.getresponse()
            return Response(r.status, r.reason, r.getheaders(), r.read())
        finally:
            conn.close()

    def _wait_ready(self):
        deadline = time.monotonic() + 60
        why = "timeout"
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                return False, "exited with status %d before ready" % rc
            try:
                r = self.req("GET", "/readyz", timeout=2)
                if r.status == 200:
                    return True, ""
                why = "readyz answered %d" % r.status
            except (OSError, http.client.HTTPException) as e:
                why = "readyz: %s" % e
            time.sleep(0.05)
        return False, why


def tls_server(ctx, certs, **kw):
    ctx._n += 1
    d = os.path.join(ctx.tmp, "tls%d" % ctx._n)
    os.makedirs(d)
    s = TlsServer(d, certs, **kw)
    ctx.extra.append(s)
    return s


def curl(args, what):
    if not CURL:
        raise Skip("curl is not installed")
    p = subprocess.run([CURL, "-sS", "--max-time", "30", "-w", "\n%{http_code}"] + args,
                       capture_output=True, timeout=60)
    out = p.stdout
    body, _, code = out.rpartition(b"\n")
    return p.returncode, body, code.decode(), p.stderr.decode(errors="replace")


_certs = {}


def certs_for(ctx):
    if "c" not in _certs:
        _certs["c"] = Certs(os.path.join(ctx.tmp, "pki"))
    return _certs["c"]


def test_https_publish_and_fetch_with_curl_cacert(ctx):
    certs = certs_for(ctx)
    srv = tls_server(ctx, certs).start()
    base = srv.url
    rc, body, code, err = curl(["--cacert", certs.ca, "-H", "Content-Type: application/json",
                                "-d", '{"name":"secure"}', base + "/v1/topics"], "create")
    eq((rc, code), (0, "201"), "create topic over HTTPS: %r %r" % (body, err))
    rc, body, code, err = curl(["--cacert", certs.ca, "-H", "Content-Type: application/json",
                                "-d", '{"records":[{"key":"k","value":"over tls"}]}',
                                base + "/v1/topics/secure/records"], "publish")
    eq((rc, code), (0, "200"), "publish over HTTPS: %r %r" % (body, err))
    eq(json.loads(body)["offsets"][0]["offset"], 0, "first offset")
    rc, body, code, err = curl(["--cacert", certs.ca, base + "/v1/topics/secure/partitions/0/records"], "fetch")
    eq((rc, code), (0, "200"), "fetch over HTTPS: %r" % err)
    eq([r["value"] for r in json.loads(body)["records"]], ["over tls"], "fetched records")
    # Without the CA curl does not trust the server; plain HTTP gets no answer.
    rc, body, code, err = curl([base + "/healthz"], "no CA")
    check(rc != 0, "curl without --cacert must refuse the test CA's server (rc %d)" % rc)
    rc, body, code, err = curl(["http://127.0.0.1:%d/healthz" % srv.port], "plain HTTP")
    check(rc != 0 or code != "200", "plain HTTP to the HTTPS port must not be served: %r %r" % (code, body))
    srv.stop()


@local_only("compares a raw fetch with the local segment file; the Kafka backend answers raw fetch 406")
def test_large_raw_fetch_over_https_is_the_segment_file_byte_for_byte(ctx):
    certs = certs_for(ctx)
    env = {}
    wrapper = []
    strace = shutil.which("strace")
    trace = os.path.join(ctx.tmp, "tls-sendfile.trace")
    if strace and subprocess.run([strace, "-f", "-o", os.devnull, "true"], capture_output=True).returncode == 0:
        # LeakSanitizer cannot run under ptrace; the other tests check leaks.
        env = {"ASAN_OPTIONS": (os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")}
        wrapper = [strace, "-f", "-e", "trace=sendfile,sendfile64", "-o", trace]
    srv = tls_server(ctx, certs, env=env, wrapper=wrapper).start()
    srv.create_topic("big")
    rnd = os.urandom(3 * 1024 * 1024)
    chunk = 96 * 1024
    for i in range(0, len(rnd), 8 * chunk):
        recs = [{"value_base64": b64(rnd[j:j + chunk])} for j in range(i, min(i + 8 * chunk, len(rnd)), chunk)]
        srv.publish("big", recs)
    seg = read_file(segment_files(srv.data_dir, "big", 0)[0])
    check(len(seg) > 3 * 1024 * 1024, "segment holds the 3 MiB (%d bytes)" % len(seg))
    out = os.path.join(ctx.tmp, "raw.bin")
    rc, _, code, err = curl(["--cacert", certs.ca, "-o", out,
                             srv.url + "/v1/topics/big/partitions/0/records?format=raw&max_bytes=8388608"],
                            "raw fetch")
    eq((rc, code), (0, "200"), "raw fetch over HTTPS: %r" % err)
    body = read_file(out)
    eq(len(body), len(seg), "raw body length equals the segment file's")
    check(body == seg, "raw body over HTTPS differs from the segment file")
    values = b"".join(rec["value"] for b in decode_batches(body) for rec in b["records"])
    check(values == rnd, "the records' values are the published bytes")
    srv.stop()
    if wrapper:
        with open(trace, errors="replace") as f:
            calls = [ln for ln in f if "sendfile" in ln and "= -1" not in ln and "resumed" not in ln]
        note("sendfile calls under TLS: %d" % len(calls))
        eq(calls, [], "no sendfile may carry bytes of a TLS connection (they would go out unencrypted)")


def test_mtls_refuses_clients_without_a_certificate_of_the_ca(ctx):
    certs = certs_for(ctx)
    srv = tls_server(ctx, certs, mtls=True).start()
    srv.create_topic("m")
    url = srv.url + "/v1/topics/m/records"
    pub = ["-H", "Content-Type: application/json", "-d", '{"records":[{"value":"x"}]}', url]
    rc, body, code, err = curl(["--cacert", certs.ca] + pub, "no client certificate")
    eq((rc, code), (0, "403"), "publish without a client certificate: %r %r" % (body, err))
    eq(json.loads(body)["error"]["code"], "forbidden", "error code")
    check("client certificate" in json.loads(body)["error"]["message"], "message says why: %r" % body)
    rc, body, code, err = curl(["--cacert", certs.ca, "--cert", certs.bad_cli, "--key", certs.bad_cli_key] + pub,
                               "another CA's certificate")
    eq((rc, code), (0, "403"), "publish with another CA's certificate: %r %r" % (body, err))
    rc, body, code, err = curl(["--cacert", certs.ca, srv.url + "/healthz"], "healthz without certificate")
    eq(code, "403", "even /healthz needs the certificate")
    eq(srv.hw("m"), 0, "nothing stored by refused clients")
    rc, body, code, err = curl(["--cacert", certs.ca, "--cert", certs.cli, "--key", certs.cli_key] + pub,
                               "the CA's client")
    eq((rc, code), (0, "200"), "publish with the CA's client certificate: %r %r" % (body, err))
    eq(srv.hw("m"), 1, "the accepted publish is stored")
    r = srv.req("GET", "/v1/topics", client=None)
    expect_error(r, 403, "forbidden", "Python client without a certificate")
    srv.stop()


def served_serial(port, ca):
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return tls.getpeercert()["serialNumber"]


def test_sighup_reloads_the_certificate_and_keeps_the_listener(ctx):
    certs = certs_for(ctx)
    second, second_key = certs._signed("server2", "/CN=127.0.0.1 renewed", certs.ca, certs.ca_key,
                                       "subjectAltName=IP:127.0.0.1")
    cert, key = os.path.join(ctx.tmp, "live-cert.pem"), os.path.join(ctx.tmp, "live-key.pem")
    shutil.copy(certs.srv, cert)
    shutil.copy(certs.srv_key, key)

    class Live:
        pass
    live = Live()
    live.srv, live.srv_key, live.ca = cert, key, certs.ca
    srv = tls_server(ctx, live).start()
    first = served_serial(srv.port, certs.ca)
    kept = http.client.HTTPSConnection("127.0.0.1", srv.port, timeout=30,
                                       context=ssl.create_default_context(cafile=certs.ca))
    kept.request("GET", "/healthz")
    eq(kept.getresponse().read(), b'{"status":"ok"}\n', "kept-alive connection before the reload")
    shutil.copy(second, cert)
    shutil.copy(second_key, key)
    srv._signal_server(signal.SIGHUP)
    want = sh([OPENSSL, "x509", "-in", second, "-noout", "-serial"], "serial").decode().strip().split("=")[1]
    deadline = time.monotonic() + 10
    got = first
    while time.monotonic() < deadline and got.upper() != want.upper():
        time.sleep(0.05)
        got = served_serial(srv.port, certs.ca)
    eq(got.upper(), want.upper(), "new handshakes get the renewed certificate after SIGHUP")
    check(first.upper() != want.upper(), "the two certificates differ")
    kept.request("GET", "/healthz")
    eq(kept.getresponse().status, 200, "the connection opened before the reload still works")
    kept.close()
    # A bad file on SIGHUP: the renewed certificate stays, the log names the file.
    with open(cert, "w") as f:
        f.write("garbage\n")
    srv._signal_server(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "SIGHUP" not in open(srv.stderr_path).read():
        time.sleep(0.05)
    log = open(srv.stderr_path).read()
    check("tls.cert-file" in log and cert in log, "the failed reload names the file: %r" % log[-400:])
    eq(served_serial(srv.port, certs.ca).upper(), want.upper(), "a failed reload keeps serving the last good pair")
    srv.stop()


def run_start(args, what):
    cmd = [pulsed_path(), "--listen", "127.0.0.1:%d" % free_port(), "-o", "log.level=warn"] + args
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    text = (p.stdout + p.stderr).decode(errors="replace")
    for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
        check(marker not in text, "%s: sanitizer report:\n%s" % (what, text))
    return p.returncode, text


def test_bad_tls_files_stop_pulsed_at_start_naming_the_file(ctx):
    certs = certs_for(ctx)
    data = os.path.join(ctx.tmp, "bad-start")
    junk = os.path.join(ctx.tmp, "junk.pem")
    with open(junk, "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    missing = os.path.join(ctx.tmp, "missing.pem")
    cases = [
        ("missing certificate", [missing, certs.srv_key, None], ["tls.cert-file", missing]),
        ("junk certificate", [junk, certs.srv_key, None], ["tls.cert-file", junk]),
        ("key of another certificate", [certs.srv, certs.cli_key, None], ["tls.key-file", certs.cli_key]),
        ("certificate as key", [certs.srv, certs.srv, None], ["tls.key-file", certs.srv]),
        ("junk client CA", [certs.srv, certs.srv_key, junk], ["tls.client-ca-file", junk]),
        ("no key", [certs.srv, None, None], ["tls.key-file"]),
        ("key without certificate", [None, certs.srv_key, None], ["tls.cert-file"]),
    ]
    for what, (cert, key, ca), needles in cases:
        args = ["--data-dir", data]
        for name, val in (("cert-file", cert), ("key-file", key), ("client-ca-file", ca)):
            if val:
                args += ["-o", "tls.%s=%s" % (name, val)]
        rc, text = run_start(args, what)
        eq(rc, 2, "%s: exit status (output %r)" % (what, text[-500:]))
        for n in needles:
            check(n in text, "%s: the message must name %r: %r" % (what, n, text[-500:]))


def test_the_servers_own_https_origin_may_write(ctx):
    # Browsers send Origin on a same-origin POST: a page served by this
    # HTTPS pulsed (its dashboard) says https://host:port, and that is the
    # server's own origin, not another one to refuse.
    certs = certs_for(ctx)
    srv = tls_server(ctx, certs).start()
    own = "https://127.0.0.1:%d" % srv.port
    r = srv.req("POST", "/v1/topics", {"name": "from-own-page"}, headers={"Origin": own})
    expect_status(r, 201, "create from the server's own https origin")
    r = srv.req("POST", "/v1/topics", {"name": "from-plain-http"},
                headers={"Origin": "http://127.0.0.1:%d" % srv.port})
    expect_error(r, 403, "forbidden", "the http:// origin is not an HTTPS server's own")
    r = srv.req("POST", "/v1/topics", {"name": "from-elsewhere"}, headers={"Origin": "https://evil.example"})
    expect_error(r, 403, "forbidden", "another origin may not write")
    srv.stop()


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
