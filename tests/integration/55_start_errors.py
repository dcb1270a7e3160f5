# SPDX-License-Identifier: MIT
"""Start-up errors name their cause, with the documented exit status.

  - a data directory that is a file, or lies under one: exit 1,
    "not a directory: PATH";
  - a data directory (or its metadata store, or a partition directory) this
    user may not write: exit 1, "permission denied: PATH (running as uid N)",
    never "in use by another process" nor "input/output error" (on any
    line: a segment file it may not open is named so from the first). Root
    bypasses permissions, so as root pulsed runs as nobody (setpriv or
    runuser); without either that one case is skipped with the reason;
  - a data directory another pulsed holds: exit 1, "in use by another
    process";
  - a --listen host that is not an address, or a port out of range: a
    configuration error, exit 2, "port must be 1..65535"."""

import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # keep the source tree clean (and read-only safe)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pulsetest  # noqa: E402

pulsetest.exit_unless_local("these tests are about the local data directory (permissions, its lock)")

from pulsetest import Skip, check, eq, free_port, main, pulsed_path  # noqa: E402

NOBODY = 65534


def run(args, env=None, wrapper=(), what=""):
    e = dict(os.environ)
    e.update(env or {})
    cmd = list(wrapper) + [pulsed_path()] + args
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, env=e)
    except subprocess.TimeoutExpired:
        raise AssertionError("%s: pulsed kept running (it must refuse to start)" % what)
    text = (p.stdout + p.stderr).decode("utf-8", "replace")
    for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
        check(marker not in text, "%s: sanitizer report:\n%s" % (what, text))
    return p.returncode, text


def start_args(data_dir):
    return ["--data-dir", data_dir, "--listen", "127.0.0.1:%d" % free_port(), "-o", "log.level=warn"]


def expect(rc, text, want_rc, needles, what, banned=("in use by another process", "input/output error")):
    eq(rc, want_rc, "%s: exit status (output %r)" % (what, text[-600:]))
    for n in needles:
        check(n in text, "%s: the message must say %r: %r" % (what, n, text[-600:]))
    for n in banned:
        check(n not in text, "%s: the message must not say %r: %r" % (what, n, text[-600:]))


def test_data_dir_that_is_a_file(ctx):
    path = os.path.join(ctx.tmp, "plain-file")
    with open(path, "w") as f:
        f.write("not a directory\n")
    rc, text = run(start_args(path), what="file as data dir")
    expect(rc, text, 1, ["not a directory: %s" % path], "file as data dir")
    rc, text = run(start_args(os.path.join(path, "data")), what="data dir under a file")
    expect(rc, text, 1, ["not a directory"], "data dir under a file")


def as_other_user():
    """How to run pulsed as an unprivileged user: ([wrapper...], uid), or
    (None, reason)."""
    if os.geteuid() != 0:
        return [], os.geteuid()
    for wrapper in (["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"],
                    ["runuser", "-u", "nobody", "--"]):
        if shutil.which(wrapper[0]) is None:
            continue
        try:
            p = subprocess.run(wrapper + [pulsed_path(), "--version"], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if p.returncode == 0:
            return wrapper, NOBODY
    return None, "neither setpriv nor runuser can run pulsed as nobody here"


def root_made_data_dir(ctx, top, topic=None):
    """A data directory made by a root pulsed (with a topic if asked)."""
    srv = ctx.new_server()
    srv.data_dir = os.path.join(top, "d")
    srv.start()
    if topic:
        srv.create_topic(topic, partitions=2)
    srv.stop()
    return srv.data_dir


def give_to_nobody(path):
    os.chown(path, NOBODY, NOBODY)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), NOBODY, NOBODY)


def test_unwritable_data_dir_is_permission_denied(ctx):
    wrapper, uid = as_other_user()
    if wrapper is None:
        raise Skip("permission denied case: %s" % uid)
    # A tree the other user can reach (mkdtemp makes 0700 directories).
    top = tempfile.mkdtemp(prefix="pulse-perm-")
    try:
        os.chmod(top, 0o755)
        ro = os.path.join(top, "ro")
        os.mkdir(ro)
        os.chmod(ro, 0o555)
        rc, text = run(start_args(ro), wrapper=wrapper, what="unwritable data dir")
        expect(rc, text, 1, ["permission denied: %s (running as uid %d)" % (ro, uid)], "unwritable data dir")
        if os.geteuid() != 0:
            return  # the store case needs files owned by someone else
        # A data directory made by root and opened up, all but meta/: this
        # used to be reported as "in use by another process".
        d = root_made_data_dir(ctx, top)
        os.chmod(d, 0o777)
        os.chmod(os.path.join(d, "topics"), 0o777)
        rc, text = run(start_args(d), wrapper=wrapper, what="unwritable metadata store")
        expect(rc, text, 1, ["permission denied: %s/meta (running as uid %d)" % (d, uid)],
               "unwritable metadata store")
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_partition_directory_of_another_user_is_permission_denied(ctx):
    wrapper, uid = as_other_user()
    if wrapper is None or os.geteuid() != 0:
        raise Skip("partition permission case: %s" % (uid if wrapper is None else "needs root to chown"))
    top = tempfile.mkdtemp(prefix="pulse-perm-")
    try:
        os.chmod(top, 0o755)
        d = root_made_data_dir(ctx, top, topic="t")
        give_to_nobody(d)
        part = os.path.join(d, "topics", "t", "1")
        os.chown(part, 0, 0)
        rc, text = run(start_args(d), wrapper=wrapper, what="partition directory of root")
        expect(rc, text, 1, ["permission denied: %s (running as uid %d)" % (part, uid)],
               "partition directory of root")
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_segment_file_of_another_user_is_permission_denied_from_the_first_line(ctx):
    wrapper, uid = as_other_user()
    if wrapper is None or os.geteuid() != 0:
        raise Skip("segment permission case: %s" % (uid if wrapper is None else "needs root to chown"))
    top = tempfile.mkdtemp(prefix="pulse-perm-")
    try:
        os.chmod(top, 0o755)
        d = root_made_data_dir(ctx, top, topic="t")
        give_to_nobody(d)
        part = os.path.join(d, "topics", "t", "0")
        seg = sorted(f for f in os.listdir(part) if f.endswith(".log"))[0]
        path = os.path.join(part, seg)
        os.chown(path, 0, 0)
        os.chmod(path, 0o644)  # readable, not writable: the open for writing fails
        rc, text = run(start_args(d), wrapper=wrapper, what="segment file of root")
        expect(rc, text, 1, ["permission denied: %s (running as uid %d)" % (path, uid)], "segment file of root")
        # Every line names the cause, the first one included.
        for line in text.splitlines():
            check("level=error" not in line or "ermission denied" in line,
                  "an error line that does not name the cause: %r in %r" % (line, text))
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_data_dir_in_use(ctx):
    srv = ctx.new_server()
    srv.start()
    rc, text = run(start_args(srv.data_dir), what="second pulsed")
    expect(rc, text, 1, ["in use by another process"], "second pulsed", banned=("permission denied",))
    srv.stop()


def test_bad_listen_address_is_a_configuration_error(ctx):
    d = os.path.join(ctx.tmp, "cfg")
    cases = [
        (["--listen", "127.0.0.1:70000"], None, "port must be 1..65535"),
        (["--listen", "[::1]:99999999999"], None, "port must be 1..65535"),
        (["-o", "server.listen=127.0.0.1:65536"], None, "port must be 1..65535"),
        ([], {"PULSE_SERVER_LISTEN": "127.0.0.1:100000"}, "port must be 1..65535"),
        (["--listen", "no-such-host.invalid:8080"], None, "is not an IP address"),
        (["--listen", "127.0.0.1"], None, "is not HOST:PORT"),
    ]
    for args, env, needle in cases:
        rc, text = run(["--data-dir", d] + args, env=env, what="listen %r %r" % (args, env))
        expect(rc, text, 2, ["server.listen", needle], "listen %r %r" % (args, env))
    check(not os.path.exists(d), "a configuration error touches no data directory")


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
