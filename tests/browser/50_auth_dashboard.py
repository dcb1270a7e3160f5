# SPDX-License-Identifier: MIT
"""The dashboard with bearer tokens, in headless Chromium (tests/browser/
auth_dashboard.mjs): pulsed runs with a token file; without a token the
page shows the 401 in words, with a reader's token it lists the topics
that token may read, and a refused create names the missing grant."""

import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browsertest import run_node  # noqa: E402
from pulsetest import main, pulsed_path  # noqa: E402

ADMIN = "dash-admin-token-0123456789"
READER = "dash-reader-token-abcdef"


def line(name, token, grants):
    p = subprocess.run([pulsed_path(), "--hash-token", name] + grants, input=(token + "\n").encode(),
                       capture_output=True, check=True, timeout=30)
    return p.stdout.decode()


def test_dashboard_with_tokens_in_chromium(ctx):
    path = os.path.join(ctx.tmp, "tokens")
    with open(path, "w") as f:
        f.write(line("admin", ADMIN, ["admin:*", "read:*", "write:*", "commit:*"]))
        f.write(line("reader", READER, ["read:shop-*", "commit:*"]))
    srv = ctx.new_server(args=["-o", "auth.token-file=" + path])
    srv.start()
    run_node("auth_dashboard.mjs", {"PULSE_URL": srv.url, "PULSE_ADMIN_TOKEN": ADMIN, "PULSE_READER_TOKEN": READER})


if __name__ == "__main__":
    sys.exit(main(globals(), shared_server=False))
