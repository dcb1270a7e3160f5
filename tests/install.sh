#!/bin/sh
# SPDX-License-Identifier: MIT
# `make install` into a scratch DESTDIR puts every file the docs promise in
# its place: both programs, the man pages pulsed(8) and pulse-log(1) (which
# man -l formats without a warning), pulse.conf, openapi.yaml, the docs and
# LICENSE, and a systemd unit with its hardening. Also: `make run LISTEN=`
# serves on the address given.
set -eu
b=${PULSE_BUILDDIR:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The parent make's jobserver is not ours to use.
# Installed with the prefix configure chose (the unit names its paths).
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$b" install DESTDIR="$tmp/root" \
    >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install"; }
r=$tmp/root
# one installed file by its path's tail, or fail
found() {
    p=$(cd "$r" && find . -path "*/$1" -type f | head -n 1)
    [ -n "$p" ] && [ -s "$r/$p" ] || fail "make install did not install */$1"
    echo "$r/${p#./}"
}
for f in bin/pulsed bin/pulse-log man/man8/pulsed.8 man/man1/pulse-log.1 pulse/pulse.conf pulse/openapi.yaml \
         doc/pulse/README.md doc/pulse/LICENSE doc/pulse/API.md doc/pulse/Configuration.md \
         doc/pulse/Operations.md systemd/system/pulsed.service; do
    found "$f" >/dev/null
done
[ -x "$(found bin/pulsed)" ] || fail "pulsed is not executable"
grep -q 'MIT License' "$(found doc/pulse/LICENSE)" || fail "LICENSE is not the MIT licence"

# The man pages format cleanly: groff's warnings (-ww) go to stderr.
for page in "$(found man8/pulsed.8)" "$(found man1/pulse-log.1)"; do
    MANWIDTH=80 man --warnings=w -l "$page" >"$tmp/page.txt" 2>"$tmp/page.err" || fail "man -l $page"
    [ ! -s "$tmp/page.err" ] || { cat "$tmp/page.err"; fail "man -l $page warns"; }
    grep -q 'SYNOPSIS' "$tmp/page.txt" || fail "$page has no SYNOPSIS"
done
# pulsed(8) documents every option pulsed --help lists.
"$b/pulsed" --help 2>&1 | grep -o -- '--[a-z][a-z-]*' | sort -u >"$tmp/opts"
man -l "$(found man8/pulsed.8)" 2>/dev/null | sed 's/‐/-/g' >"$tmp/pulsed.txt"
while read -r opt; do
    grep -q -- "$opt" "$tmp/pulsed.txt" || fail "pulsed(8) does not document $opt"
done <"$tmp/opts"
man -l "$(found man1/pulse-log.1)" 2>/dev/null | sed 's/‐/-/g' >"$tmp/log.txt"
for w in dump verify --json --contiguous --not-contiguous; do
    grep -q -- "$w" "$tmp/log.txt" || fail "pulse-log(1) does not document $w"
done

# The unit runs the installed binary with the installed settings, as its own
# user, hardened.
u=$(found systemd/system/pulsed.service)
exe=$(sed -n 's/^ExecStart=\([^ ]*\) .*/\1/p' "$u")
conf=$(sed -n 's/^ExecStart=.* -c \([^ ]*\) .*/\1/p' "$u")
[ -x "$r$exe" ] || fail "ExecStart names $exe, which make install did not install"
[ -s "$r$conf" ] || fail "ExecStart reads $conf, which make install did not install"
for k in '^User=pulse$' '^ProtectSystem=strict$' '^LimitNOFILE=' '^Restart=on-failure$' '^NoNewPrivileges=true$' \
         '^StateDirectory=pulse$' '^RestartPreventExitStatus=2$'; do
    grep -q "$k" "$u" || fail "pulsed.service lacks $k"
done
if command -v systemd-analyze >/dev/null 2>&1; then
    # Verified with ExecStart pointing at the built binary (the installed
    # path does not exist here); only the unit's own syntax is judged.
    sed "s|$exe|$(cd "$b" && pwd)/pulsed|" "$u" >"$tmp/pulsed.service"
    if systemd-analyze verify "$tmp/pulsed.service" >"$tmp/verify.log" 2>&1; then :; else
        grep -v -e 'Failed to' -e 'System has not been booted' -e 'No such file' "$tmp/verify.log" \
            | grep -i -e 'unknown' -e 'invalid' -e 'ignoring' && fail "systemd-analyze verify pulsed.service"
    fi
fi

# make run LISTEN=... serves on that address.
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
# Its own process group, so that the make, its shell and pulsed stop together.
( cd "$b" && exec setsid env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s run LISTEN=127.0.0.1:$port \
      DATA_DIR="$tmp/data" >"$tmp/run.log" 2>&1 ) &
runpid=$!
ok=0
for _ in $(seq 1 100); do
    if curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then ok=1; break; fi
    sleep 0.1
done
kill -TERM -- "-$runpid" 2>/dev/null || kill -TERM "$runpid" 2>/dev/null || true
wait "$runpid" 2>/dev/null || true
[ $ok -eq 1 ] || { cat "$tmp/run.log"; fail "make run LISTEN=127.0.0.1:$port did not serve there"; }
[ -d "$tmp/data/meta" ] || fail "make run DATA_DIR= did not use that directory"
echo "PASS install.sh"
