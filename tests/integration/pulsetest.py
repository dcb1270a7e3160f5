# SPDX-License-Identifier: MIT
"""Shared harness for the black-box integration tests of pulsed.

Owns: starting the real binary ($PULSE_BUILDDIR/pulsed; tests/pulsed-hooks,
the same program with the test hooks, when the server's environment arms a
PULSE_FAILPOINT*) on a free loopback port with a data directory inside a
private mkdtemp() tree, waiting for
/readyz, stopping it with SIGTERM (exit status must be 0), killing it with
SIGKILL, and restarting it on the same data directory.  It also carries the
small HTTP client every test uses (a fresh connection per request, a timeout
on every call), assertion helpers that print what was expected, a decoder for
the raw batch format of the storage contract (section 3, CRC32C checked), and
Kafka's murmur2 partitioner hash.

Tests speak HTTP only, like an external client would; the only exceptions are
the crash tests, which damage segment files on purpose while the server is
down.  Python 3 standard library only.

Exit codes follow automake: 0 pass, 1 fail, 77 skip.
"""

import base64
import gzip
import http.client
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse

HTTP_TIMEOUT = float(os.environ.get("PULSE_TEST_HTTP_TIMEOUT", "20"))
START_TIMEOUT = float(os.environ.get("PULSE_TEST_START_TIMEOUT", "60"))
STOP_TIMEOUT = float(os.environ.get("PULSE_TEST_STOP_TIMEOUT", "60"))

SKIP = 77

# Which broker backend the servers use: "local" (default) or "kafka", which
# runs every server over librdkafka's in-process mock cluster
# (docs/Scaling.md "Tests"). Tests of what only the local backend has skip
# themselves under kafka with local_only().
BACKEND = os.environ.get("PULSE_TEST_BACKEND", "local")
KAFKA_ARGS = ["-o", "broker.backend=kafka", "-o", "kafka.mock-brokers=3"]


class Skip(Exception):
    """Raised by a test that cannot run here; the reason is printed."""


class Failure(AssertionError):
    """A broken expectation; the message says what was expected."""


# --------------------------------------------------------------------------
# Locating the build

def builddir():
    return os.environ.get("PULSE_BUILDDIR") or os.getcwd()


def srcdir():
    env = os.environ.get("PULSE_SRCDIR")
    if env:
        return env
    return os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def pulsed_path(hooks=False):
    """The release pulsed, or with hooks=True the one built with the test
    hooks (tests/pulsed-hooks: failpoints, PULSE_FAILPOINT* in its
    environment), which a release pulsed does not have."""
    if hooks:
        return os.path.join(builddir(), "tests", "pulsed-hooks")
    return os.path.join(builddir(), "pulsed")


def wants_hooks(env):
    """Whether an environment arms a failpoint (PULSE_FAILPOINT*)."""
    return any(k.startswith("PULSE_FAILPOINT") for k in (env or {}))


def free_port():
    """A port the kernel just handed out; the caller retries on EADDRINUSE."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------
# HTTP

class Response:
    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers  # list of (name, value)
        self.body = body

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def json(self):
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise Failure("body is not JSON (%s): %r" % (e, self.body[:300]))

    def __repr__(self):
        return "<HTTP %d %s: %r>" % (self.status, self.header("Content-Type"), self.body[:300])


def quote_path(s):
    return urllib.parse.quote(str(s), safe="")


def qs(params):
    if not params:
        return ""
    return "?" + urllib.parse.urlencode([(k, v) for k, v in params.items() if v is not None])


def raw_request(port, method, path, body=None, headers=None, timeout=None,
                chunked=False, host="127.0.0.1"):
    """One request on a fresh connection.  body may be bytes, str, a JSON-able
    object (sent as JSON with Content-Type application/json unless the caller
    set a Content-Type, or set it to None to send none), or an iterable of
    bytes chunks when chunked=True."""
    hdrs = {}
    if headers:
        hdrs.update(headers)
    if body is not None and not isinstance(body, (bytes, bytearray, str)) and not chunked:
        body = json.dumps(body).encode("utf-8")
        hdrs.setdefault("Content-Type", "application/json")
    if isinstance(body, str):
        body = body.encode("utf-8")
    hdrs = {k: v for k, v in hdrs.items() if v is not None}
    conn = http.client.HTTPConnection(host, port, timeout=timeout or HTTP_TIMEOUT)
    try:
        if chunked:
            conn.request(method, path, body=body, headers=hdrs, encode_chunked=True)
        else:
            conn.request(method, path, body=body, headers=hdrs)
        r = conn.getresponse()
        data = r.read()
        return Response(r.status, r.reason, r.getheaders(), data)
    finally:
        conn.close()


# --------------------------------------------------------------------------
# Assertions

def fail(msg):
    raise Failure(msg)


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def eq(got, want, what=""):
    if got != want:
        raise Failure("%s: expected %r, got %r" % (what or "value", want, got))


def expect_status(r, status, what=""):
    if r.status != status:
        raise Failure("%s: expected HTTP %d, got %d; Content-Type %r; body %r"
                      % (what or "request", status, r.status,
                         r.header("Content-Type"), r.body[:400]))


def expect_json(r, status, what=""):
    expect_status(r, status, what)
    ct = (r.header("Content-Type") or "").split(";")[0].strip().lower()
    eq(ct, "application/json", "%s: Content-Type" % (what or "answer"))
    return r.json()


def expect_error(r, status, codes, what=""):
    """The answer is the JSON error shape with one of the given codes."""
    if isinstance(codes, str):
        codes = (codes,)
    doc = expect_json(r, status, what)
    check(isinstance(doc, dict) and isinstance(doc.get("error"), dict),
          "%s: error body must be {\"error\":{...}}, got %r" % (what, doc))
    err = doc["error"]
    check(err.get("code") in codes,
          "%s: expected error code %s, got %r (%r)" % (what, "|".join(codes), err.get("code"), doc))
    check(isinstance(err.get("message"), str) and err["message"] != "",
          "%s: error message must be a non-empty string, got %r" % (what, err.get("message")))
    check(r.header("X-Request-Id"), "%s: error answer lacks X-Request-Id" % what)
    return err


def expect_keys(obj, keys, what):
    check(isinstance(obj, dict), "%s: expected an object, got %r" % (what, obj))
    got = set(obj.keys())
    want = set(keys)
    if got != want:
        raise Failure("%s: keys differ: missing %s, unexpected %s (object %r)"
                      % (what, sorted(want - got), sorted(got - want), obj))


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def wait_until(pred, timeout, interval=0.05):
    """Poll pred() until it is true or the timeout passes; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


# --------------------------------------------------------------------------
# The server under test

class Server:
    """One pulsed process on a private data directory.

    stop() sends SIGTERM and requires exit status 0; kill() sends SIGKILL;
    start() may be called again afterwards and reuses the same data
    directory and the same port when it can."""

    def __init__(self, tmp, args=(), env=None, wrapper=None, name="pulsed"):
        self.tmp = tmp
        self.data_dir = os.path.join(tmp, "data")
        self.args = list(args)
        self.env = dict(env or {})
        self.wrapper = list(wrapper or [])
        self.name = name
        self.proc = None
        self.port = None
        self.starts = 0
        self.stderr_path = None
        self.stdout_path = None

    # -- lifecycle -----------------------------------------------------------

    def command(self):
        backend = KAFKA_ARGS if BACKEND == "kafka" else []
        return self.wrapper + [pulsed_path(wants_hooks(self.env)), "--data-dir", self.data_dir,
                               "--listen", "127.0.0.1:%d" % self.port,
                               "-o", "log.level=warn"] + backend + self.args

    def start(self):
        if self.proc is not None:
            raise RuntimeError("server already running")
        last_err = None
        for attempt in range(5):
            if self.port is None or attempt > 0:
                self.port = free_port()
            self.starts += 1
            self.stderr_path = os.path.join(self.tmp, "%s.%d.stderr" % (self.name, self.starts))
            self.stdout_path = os.path.join(self.tmp, "%s.%d.stdout" % (self.name, self.starts))
            env = dict(os.environ)
            env.update(self.env)
            with open(self.stderr_path, "wb") as err, open(self.stdout_path, "wb") as out:
                self.proc = subprocess.Popen(self.command(), stdout=out, stderr=err,
                                             stdin=subprocess.DEVNULL, env=env)
            ok, why = self._wait_ready()
            if ok:
                return self
            rc = self.proc.poll()
            tail = self.stderr_tail()
            if rc is not None and ("in use" in tail.lower() or "eaddrinuse" in tail.lower()):
                self.proc = None
                last_err = why
                continue
            self._reap_hard()
            raise Failure("pulsed did not become ready: %s\n--- stderr tail ---\n%s" % (why, tail))
        raise Failure("pulsed could not bind a free port: %s" % last_err)

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        why = "timeout"
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                return False, "exited with status %d before ready" % rc
            try:
                r = raw_request(self.port, "GET", "/readyz", timeout=2)
                if r.status == 200:
                    return True, ""
                why = "readyz answered %d" % r.status
            except (OSError, http.client.HTTPException) as e:
                why = "readyz: %s" % e
            time.sleep(0.05)
        return False, why

    def stop(self, timeout=STOP_TIMEOUT, expect_rc=0):
        """SIGTERM, wait, and require the exit status (0 by default)."""
        if self.proc is None:
            return None
        proc = self.proc
        self._signal_server(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._reap_hard()
            raise Failure("pulsed did not exit within %.0f s of SIGTERM\n--- stderr tail ---\n%s"
                          % (timeout, self.stderr_tail()))
        self.proc = None
        if expect_rc is not None and rc != expect_rc:
            raise Failure("pulsed exited with status %d after SIGTERM (expected %d)\n"
                          "--- stderr tail ---\n%s" % (rc, expect_rc, self.stderr_tail()))
        self.check_sanitizers()
        return rc

    def check_sanitizers(self):
        """Fail when the sanitizers reported anything on this run's stderr."""
        if not self.stderr_path or not os.path.exists(self.stderr_path):
            return
        with open(self.stderr_path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                       "WARNING: ThreadSanitizer"):
            if marker in text:
                raise Failure("sanitizer report in pulsed stderr (%s):\n%s"
                              % (self.stderr_path, self.stderr_tail(80)))

    def server_pid(self):
        """The pid of pulsed itself (a wrapper such as strace may sit between,
        or one such as prlimit that execs it)."""
        if not self.wrapper:
            return self.proc.pid
        try:
            if os.path.realpath("/proc/%d/exe" % self.proc.pid) == os.path.realpath(pulsed_path()):
                return self.proc.pid
        except OSError:
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                    kids = f.read().split()
                if kids:
                    return int(kids[0])
            except OSError:
                pass
            time.sleep(0.05)
        return self.proc.pid

    def _signal_server(self, sig):
        try:
            os.kill(self.server_pid(), sig)
        except ProcessLookupError:
            pass

    def kill(self):
        """SIGKILL: the crash the recovery code must survive."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT)
        self.proc = None
        self.check_sanitizers()

    def restart(self):
        self.stop()
        return self.start()

    def _reap_hard(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.proc = None

    def cleanup(self):
        self._reap_hard()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stderr_tail(self, lines=40):
        if not self.stderr_path or not os.path.exists(self.stderr_path):
            return "(no stderr)"
        with open(self.stderr_path, "rb") as f:
            data = f.read()
        text = data.decode("utf-8", "replace").splitlines()
        return "\n".join(text[-lines:])

    # -- HTTP ----------------------------------------------------------------

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def req(self, method, path, body=None, headers=None, timeout=None, chunked=False):
        return raw_request(self.port, method, path, body=body, headers=headers,
                           timeout=timeout, chunked=chunked)

    def get(self, path, **kw):
        return self.req("GET", path, **kw)

    # -- convenience wrappers for the common calls ------------------------------

    def create_topic(self, name, **fields):
        body = {"name": name}
        body.update(fields)
        return expect_json(self.req("POST", "/v1/topics", body), 201, "create topic %s" % name)

    def topic(self, name):
        return expect_json(self.get("/v1/topics/" + quote_path(name)), 200, "get topic %s" % name)

    def topics(self):
        return expect_json(self.get("/v1/topics"), 200, "list topics")

    def hw(self, name, partition=0):
        t = self.topic(name)
        for ps in t["partition_stats"]:
            if ps["partition"] == partition:
                return ps["high_watermark"]
        fail("topic %s has no partition %d in %r" % (name, partition, t))

    def publish(self, topic, records, what="publish"):
        r = self.req("POST", "/v1/topics/%s/records" % quote_path(topic), {"records": records})
        doc = expect_json(r, 200, what)
        expect_keys(doc, ["offsets"], what)
        eq(len(doc["offsets"]), len(records), "%s: number of offsets" % what)
        return [(o["partition"], o["offset"]) for o in doc["offsets"]]

    def fetch(self, topic, partition=0, headers=None, **params):
        path = "/v1/topics/%s/partitions/%s/records%s" % (quote_path(topic), partition, qs(params))
        return self.get(path, headers=headers)

    def fetch_json(self, topic, partition=0, **params):
        return expect_json(self.fetch(topic, partition, **params), 200, "fetch %s/%s" % (topic, partition))

    def fetch_all(self, topic, partition=0, start=None):
        """Every record from start (default: log start) to the high watermark."""
        out = []
        offset = start
        while True:
            params = {"max_records": 10000}
            if offset is not None:
                params["offset"] = offset
            doc = self.fetch_json(topic, partition, **params)
            out.extend(doc["records"])
            if doc["next_offset"] >= doc["high_watermark"] or not doc["records"]:
                return out, doc
            offset = doc["next_offset"]


# --------------------------------------------------------------------------
# Raw batches (storage contract section 3)

def _crc32c_table():
    tab = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        tab.append(c)
    return tab


_CRC_TAB = _crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    tab = _CRC_TAB
    for b in data:
        crc = tab[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283

BATCH_HEADER = 52
NULL_LEN = 0xFFFFFFFF


class BatchError(Exception):
    pass


def decode_batches(data, allow_partial_tail=False):
    """Decode a sequence of whole batches.  Returns a list of dicts with the
    header fields, 'pos', 'size', 'bytes' and 'records' (each record: offset,
    timestamp, key, value, headers as bytes / None).  Raises BatchError on any
    malformed, truncated or CRC-failing batch (unless allow_partial_tail, in
    which case decoding stops at the first damaged batch)."""
    out = []
    pos = 0
    n = len(data)
    while pos < n:
        try:
            b = _decode_one(data, pos)
        except BatchError:
            if allow_partial_tail:
                break
            raise
        out.append(b)
        pos += b["size"]
    return out


def _decode_one(data, pos):
    n = len(data)
    if n - pos < BATCH_HEADER:
        raise BatchError("truncated batch header at %d" % pos)
    magic, version, flags, crc, base, blen, ts0, ts1, count, pid, pep, bseq = \
        struct.unpack_from(">BBHIqIqqIIIi", data, pos)
    if magic != 1 or version != 1:
        raise BatchError("bad magic/version %d/%d at %d" % (magic, version, pos))
    end = pos + BATCH_HEADER + blen
    if end > n:
        raise BatchError("batch at %d overruns the data (%d > %d)" % (pos, end, n))
    got = crc32c(data[pos + 8:end])
    if got != crc:
        raise BatchError("CRC mismatch at %d: stored %08x computed %08x" % (pos, crc, got))
    recs = []
    p = pos + BATCH_HEADER
    sparse = bool(flags & 0x0008)
    for _ in range(count):
        if end - p < 4:
            raise BatchError("truncated record length")
        (rlen,) = struct.unpack_from(">I", data, p)
        p += 4
        rend = p + rlen
        if rend > end:
            raise BatchError("record overruns batch")
        q = p
        if rend - q < 1 + 4 + 4:
            raise BatchError("record too short")
        q += 1  # attributes
        (tsd,) = struct.unpack_from(">i", data, q)
        q += 4
        (odelta,) = struct.unpack_from(">I", data, q)
        q += 4
        if (not sparse and odelta >= count) or odelta >= (1 << 31):
            raise BatchError("offset delta %d out of range" % odelta)

        def take(q):
            if rend - q < 4:
                raise BatchError("truncated length field")
            (ln,) = struct.unpack_from(">I", data, q)
            q += 4
            if ln == NULL_LEN:
                return None, q
            if rend - q < ln:
                raise BatchError("field overruns record")
            return bytes(data[q:q + ln]), q + ln

        key, q = take(q)
        value, q = take(q)
        if rend - q < 4:
            raise BatchError("truncated header count")
        (hc,) = struct.unpack_from(">I", data, q)
        q += 4
        hdrs = []
        for _ in range(hc):
            hk, q = take(q)
            hv, q = take(q)
            if hk is None or hv is None:
                raise BatchError("null header key/value")
            hdrs.append((hk, hv))
        if q != rend:
            raise BatchError("record has %d trailing bytes" % (rend - q))
        recs.append({"offset": base + odelta, "timestamp": ts0 + tsd, "key": key,
                     "value": value, "headers": hdrs})
        p = rend
    if p != end:
        raise BatchError("batch has %d bytes after its records" % (end - p))
    return {"pos": pos, "size": end - pos, "flags": flags, "crc": crc, "base": base,
            "count": count, "first_ts": ts0, "last_ts": ts1, "records": recs,
            "bytes": bytes(data[pos:end])}


def segment_dir(data_dir, topic, partition=0):
    return os.path.join(data_dir, "topics", topic, str(partition))


def segment_files(data_dir, topic, partition=0):
    d = segment_dir(data_dir, topic, partition)
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".log"))


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


# --------------------------------------------------------------------------
# Record helpers

def json_value_bytes(rec):
    """The stored bytes of a fetched JSON record's value (None for null)."""
    if "value_base64" in rec:
        return base64.b64decode(rec["value_base64"])
    v = rec.get("value")
    if v is None:
        return None
    return v.encode("utf-8")


def json_key_bytes(rec):
    if "key_base64" in rec:
        return base64.b64decode(rec["key_base64"])
    k = rec.get("key")
    if k is None:
        return None
    return k.encode("utf-8")


def b64(data):
    return base64.b64encode(data).decode("ascii")


def gz(data):
    return gzip.compress(data)


# --------------------------------------------------------------------------
# Kafka's default partitioner hash (org.apache.kafka.common.utils.Utils.murmur2)

def murmur2(data):
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = (data[i4] & 0xFF) + ((data[i4 + 1] & 0xFF) << 8) + \
            ((data[i4 + 2] & 0xFF) << 16) + ((data[i4 + 3] & 0xFF) << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    base = length & ~3
    if rest == 3:
        h ^= (data[base + 2] & 0xFF) << 16
    if rest >= 2:
        h ^= (data[base + 1] & 0xFF) << 8
    if rest >= 1:
        h ^= data[base] & 0xFF
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_partition(key_bytes, partitions):
    return (murmur2(key_bytes) & 0x7FFFFFFF) % partitions


# Values from Kafka's own UtilsTest.testMurmur2, so the tests pin the real hash.
assert murmur2(b"21") == -973932308
assert murmur2(b"foobar") == -790332482
assert murmur2(b"a-little-bit-long-string") == -985981536
assert murmur2(b"a-little-bit-longer-string") == -1486304829
assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
assert murmur2(b"abc") == 479470107


# --------------------------------------------------------------------------
# Running a test file

def seed_from_env(default=None):
    s = os.environ.get("PULSE_TEST_SEED")
    if s:
        return int(s)
    return default if default is not None else random.SystemRandom().randrange(1 << 31)


class Context:
    """What each test function receives: the shared server (or None) and a
    private temp directory for servers it starts itself."""

    def __init__(self, tmp, srv):
        self.tmp = tmp
        self.srv = srv
        self._n = 0
        self.extra = []

    def new_server(self, args=(), env=None, wrapper=None):
        self._n += 1
        d = os.path.join(self.tmp, "s%d" % self._n)
        os.makedirs(d)
        s = Server(d, args=args, env=env, wrapper=wrapper, name="pulsed")
        self.extra.append(s)
        return s


def main(module_globals, server_args=(), shared_server=True, server_env=None):
    """Run every test_* function of the calling module in definition order.
    Each gets a Context.  With shared_server, one pulsed is started first and
    stopped (SIGTERM, exit 0 required) at the end."""
    name = os.path.basename(module_globals.get("__file__", "test"))
    if not os.access(pulsed_path(), os.X_OK):
        print("SKIP %s: %s is not built" % (name, pulsed_path()))
        return SKIP
    only = os.environ.get("PULSE_TEST_ONLY")
    wanted = [w for w in (only or "").split(",") if w]
    tests = [(k, v) for k, v in module_globals.items()
             if k.startswith("test_") and callable(v) and (not wanted or any(w in k for w in wanted))]
    tmp = tempfile.mkdtemp(prefix="pulse-it-")
    failed, passed, skipped = [], [], []
    srv = None
    ctx = None
    try:
        if shared_server:
            srv = Server(os.path.join(tmp, "shared"), args=server_args, env=server_env)
            os.makedirs(srv.tmp)
            try:
                srv.start()
            except Failure as e:
                print("FAIL %s: server start: %s" % (name, e))
                return 1
        ctx = Context(tmp, srv)
        for tname, fn in tests:
            t0 = time.monotonic()
            try:
                fn(ctx)
                passed.append(tname)
                print("PASS %s (%.2fs)" % (tname, time.monotonic() - t0))
            except Skip as e:
                skipped.append(tname)
                print("SKIP %s: %s" % (tname, e))
            except Exception as e:  # noqa: BLE001 - report every kind of failure
                failed.append(tname)
                print("FAIL %s (%.2fs): %s" % (tname, time.monotonic() - t0, e))
                traceback.print_exc(file=sys.stdout)
                servers = ([srv] if srv else []) + ctx.extra
                for s in servers:
                    if s.stderr_path:
                        print("--- pulsed stderr tail (%s) ---\n%s" % (s.stderr_path, s.stderr_tail()))
            finally:
                for s in ctx.extra:
                    if s.alive():
                        try:
                            s.stop(expect_rc=None)
                        except Failure:
                            pass
                    s.cleanup()
                ctx.extra = []
            if srv is not None and not srv.alive():
                print("FAIL %s: the shared server died\n--- stderr tail ---\n%s"
                      % (tname, srv.stderr_tail()))
                failed.append("server-died")
                break
        if srv is not None and srv.alive():
            try:
                srv.stop()
                print("PASS clean SIGTERM shutdown exits 0")
            except Failure as e:
                failed.append("shutdown")
                print("FAIL shutdown: %s" % e)
    finally:
        if srv is not None:
            srv.cleanup()
        if ctx is not None:
            for s in ctx.extra:
                s.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%s: %d passed, %d failed, %d skipped" % (name, len(passed), len(failed), len(skipped)))
    if failed:
        print("failed: " + ", ".join(failed))
        return 1
    if not passed and skipped:
        return SKIP
    return 0


def local_only(reason):
    """Marks a test (decorator) or, called at the top of a module before
    main(), a whole module as needing the local backend: under
    PULSE_TEST_BACKEND=kafka it is skipped with the reason (what the
    Kafka backend or its mock cluster cannot serve)."""
    def wrap(fn):
        def run(ctx):
            if BACKEND != "local":
                raise Skip("local backend only: " + reason)
            return fn(ctx)
        run.__name__ = fn.__name__
        return run
    return wrap


def exit_unless_local(reason):
    """A whole module that needs the local backend: exits 77 (skip) under
    another one, naming the reason."""
    if BACKEND != "local":
        print("SKIP: local backend only: " + reason)
        sys.exit(SKIP)


def uniq(prefix):
    """A topic/consumer name unique within this process."""
    uniq.n += 1
    return "%s-%d-%d" % (prefix, os.getpid() % 10000, uniq.n)


uniq.n = 0


class Threads:
    """Start callables in threads and join them with a deadline."""

    def __init__(self):
        self.threads = []

    def start(self, fn, *args):
        t = threading.Thread(target=fn, args=args, daemon=True)
        t.start()
        self.threads.append(t)
        return t

    def join(self, timeout):
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return all(not t.is_alive() for t in self.threads)


def note(msg):
    print(msg)
    sys.stdout.flush()


__all__ = [n for n in dir() if not n.startswith("_")]



# --------------------------------------------------------------------------
# Event streams (text/event-stream) over a raw socket

class SseClient:
    """One event stream on its own socket, read as a browser's EventSource
    would: the HTTP/1.1 head, then the chunked body split into events.
    Events are dicts with "id", "event", "data" (text), "retry", and
    "comment" for comment lines.  rcvbuf sets SO_RCVBUF before connecting
    (a slow client); the caller decides when to read."""

    def __init__(self, port, path, headers=None, rcvbuf=None, timeout=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout or HTTP_TIMEOUT)
        self.sock.connect(("127.0.0.1", port))
        hdrs = {"Host": "127.0.0.1:%d" % port, "Accept": "text/event-stream"}
        hdrs.update(headers or {})
        head = "GET %s HTTP/1.1\r\n" % path + "".join("%s: %s\r\n" % kv for kv in hdrs.items() if kv[1] is not None)
        self.sock.sendall((head + "\r\n").encode("latin-1"))
        self.raw = b""
        self.body = b""
        self.closed = False
        self.ended = False  # the chunked body's last chunk arrived
        self.status, self.headers = self._read_head()
        self.chunked = self.headers.get("transfer-encoding", "").lower() == "chunked"

    def _recv(self, n=65536):
        data = self.sock.recv(n)
        if not data:
            self.closed = True
        return data

    def _read_head(self):
        while b"\r\n\r\n" not in self.raw:
            data = self._recv()
            if not data:
                raise Failure("event stream closed before its head: %r" % self.raw)
            self.raw += data
        head, self.raw = self.raw.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        return status, headers

    def _decode(self):
        """Moves whole chunks from raw to body."""
        if not self.chunked:
            self.body += self.raw
            self.raw = b""
            return
        while True:
            nl = self.raw.find(b"\r\n")
            if nl < 0:
                return
            size = int(self.raw[:nl].split(b";")[0], 16)
            if size == 0:
                self.ended = True
                self.raw = b""
                return
            if len(self.raw) < nl + 2 + size + 2:
                return
            self.body += self.raw[nl + 2:nl + 2 + size]
            self.raw = self.raw[nl + 2 + size + 2:]

    def _take_event(self):
        sep = self.body.find(b"\n\n")
        if sep < 0:
            return None
        block, self.body = self.body[:sep].decode("utf-8"), self.body[sep + 2:]
        ev = {}
        for line in block.split("\n"):
            if line.startswith(":"):
                ev["comment"] = line[1:].strip()
                continue
            k, _, v = line.partition(":")
            v = v[1:] if v.startswith(" ") else v
            ev[k] = ev[k] + "\n" + v if k == "data" and k in ev else v
        return ev

    def next_event(self, timeout=None, recv_bytes=65536):
        """The next event (a dict), or None once the stream ended."""
        deadline = time.monotonic() + (timeout or HTTP_TIMEOUT)
        self._decode()  # what came with the head
        while True:
            ev = self._take_event()
            if ev is not None:
                return ev
            if self.ended or self.closed:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure("no event within the timeout; buffered %r" % self.body[:200])
            self.sock.settimeout(left)
            data = self._recv(recv_bytes)
            self.raw += data
            self._decode()

    def events(self, n, timeout=None, skip_comments=True):
        """The next n events with data (comments and retry-only blocks
        skipped unless asked for); fewer if the stream ends."""
        out = []
        deadline = time.monotonic() + (timeout or HTTP_TIMEOUT)
        while len(out) < n:
            ev = self.next_event(timeout=max(0.01, deadline - time.monotonic()))
            if ev is None:
                break
            if skip_comments and "data" not in ev:
                continue
            out.append(ev)
        return out

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
