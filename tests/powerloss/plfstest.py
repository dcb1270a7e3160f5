# SPDX-License-Identifier: MIT
"""Helpers for the plfs self-tests (tests/powerloss/README.md).

A test is a function test_<rule>(t) taking a Case: a fresh BACKING directory
(t.backing) and mount point (t.mnt) under a private temporary directory.
t.mount() starts plfs and waits for "plfs: ready"; t.cut() is the power cut
(SIGUSR1), t.stop() the clean stop (SIGTERM); both check that plfs exited 0
without a sanitizer report. main() runs every test_* of the module and exits
0 (all passed), 1 (one failed) or 77 (skipped: no /dev/fuse, no fusermount3,
not root, or plfs not built; the reason is printed)."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback

SKIP = 77
PAGE = 4096


class Skip(Exception):
    pass


def plfs_path():
    build = os.environ.get("PULSE_BUILDDIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    return os.path.join(build, "tests", "powerloss", "plfs")


def skip_reason():
    """Why plfs cannot run here, or None."""
    if os.geteuid() != 0:
        return "not root (mounting FUSE file systems needs root here)"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is missing (Debian package fuse3)"
    if not os.access(plfs_path(), os.X_OK):
        return "%s is not built (configure did not find fuse3: install libfuse3-dev)" % plfs_path()
    return None


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def eq(got, want, msg):
    if got != want:
        g, w = repr(got), repr(want)
        raise AssertionError("%s: got %s, want %s" % (msg, g[:300], w[:300]))


def fsync_path(path):
    """fsync of a file or (O_DIRECTORY) a directory, by path."""
    flags = os.O_RDONLY | (os.O_DIRECTORY if os.path.isdir(path) else 0)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path, data, sync=False, flags=os.O_CREAT | os.O_WRONLY | os.O_TRUNC):
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


class Case:
    def __init__(self, root):
        self.backing = os.path.join(root, "backing")
        self.mnt = os.path.join(root, "mnt")
        os.mkdir(self.backing)
        os.mkdir(self.mnt)
        self.proc = None
        self.err = b""

    def b(self, name=""):
        return os.path.join(self.backing, name)

    def m(self, name=""):
        return os.path.join(self.mnt, name)

    def mount(self, seed=None, torn=False):
        args = [plfs_path()]
        if seed is not None:
            args += ["--seed", str(seed)]
        if torn:
            args.append("--torn")
        args += [self.backing, self.mnt]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # stderr is drained by a thread so a chatty plfs never blocks.
        self.err = b""
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()
        line = self._ready_line()
        if line != b"plfs: ready\n":
            self.proc.wait(timeout=20)
            self.reader.join(5)
            text = self.err.decode("utf-8", "replace")
            if "Operation not permitted" in text or "fuse: device not found" in text:
                raise Skip("cannot mount FUSE here: " + text.strip())
            raise AssertionError("plfs did not start (exit %s): %r" % (self.proc.returncode, text))
        check(os.path.ismount(self.mnt), "plfs said ready but %s is not a mount point" % self.mnt)

    def _drain(self):
        for chunk in iter(lambda: self.proc.stderr.read1(4096), b""):
            self.err += chunk

    def _ready_line(self):
        out = []
        t = threading.Thread(target=lambda: out.append(self.proc.stdout.readline()), daemon=True)
        t.start()
        t.join(20)
        return out[0] if out else b""

    def _finish(self, sig, what):
        if sig is None:
            subprocess.run(["fusermount3", "-u", self.mnt], check=True)
        else:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("plfs did not exit after %s" % what)
        self.reader.join(5)
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.proc = None
        text = self.err.decode("utf-8", "replace")
        for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            check(marker not in text, "plfs: sanitizer report after %s:\n%s" % (what, text))
        eq(rc, 0, "plfs exit status after %s (stderr %r)" % (what, text[-2000:]))
        check(not os.path.ismount(self.mnt), "%s still mounted after %s" % (self.mnt, what))
        check(not os.path.exists(self.b(".plfs-stash")), "the stash is left in BACKING after %s" % what)
        return text

    def cut(self):
        """The power cut: returns plfs's stderr."""
        return self._finish(signal.SIGUSR1, "the power cut")

    def stop(self):
        return self._finish(signal.SIGTERM, "the clean stop")

    def unmount(self):
        """fusermount3 -u: a clean stop too."""
        return self._finish(None, "fusermount3 -u")

    def cleanup(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            subprocess.run(["umount", "-l", self.mnt], stderr=subprocess.DEVNULL)

    def listing(self, rel=""):
        """BACKING's tree under rel: {path: bytes or None for a directory}."""
        out = {}
        top = self.b(rel)
        for d, dirs, files in os.walk(top):
            for n in dirs:
                out[os.path.relpath(os.path.join(d, n), top)] = None
            for n in files:
                out[os.path.relpath(os.path.join(d, n), top)] = read_file(os.path.join(d, n))
        return out


def main(module_globals):
    name = os.path.basename(sys.argv[0])
    reason = skip_reason()
    if reason is not None:
        print("SKIP %s: %s" % (name, reason))
        return SKIP
    tests = sorted((k, v) for k, v in module_globals.items() if k.startswith("test_") and callable(v))
    failed = 0
    for tname, fn in tests:
        root = tempfile.mkdtemp(prefix="plfs-")
        t = Case(root)
        try:
            fn(t)
            print("PASS %s" % tname)
        except Skip as e:
            print("SKIP %s: %s" % (tname, e))
            return SKIP
        except Exception:
            failed += 1
            print("FAIL %s" % tname)
            traceback.print_exc(file=sys.stdout)
            if t.err:
                print("plfs stderr:\n" + t.err.decode("utf-8", "replace")[-3000:])
        finally:
            t.cleanup()
            shutil.rmtree(root, ignore_errors=True)
        sys.stdout.flush()
    print("%d of %d tests failed" % (failed, len(tests)) if failed else "all %d tests passed" % len(tests))
    return 1 if failed else 0
