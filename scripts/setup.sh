#!/bin/sh
# SPDX-License-Identifier: MIT
# Prepares a Debian 12 machine to build and test Pulse, then builds it.
#
#   ./scripts/setup.sh              install missing packages, configure, make
#   PULSE_CONFIGURE_FLAGS="--enable-sanitizers" ./scripts/setup.sh
#
# Idempotent: packages already installed are not touched, autoreconf runs
# only when the generated files are missing or older than their sources,
# ./configure only when it has not run with the same flags, and `npm ci` for
# the browser tests (tests/browser) only when its lock file changed.
set -eu
cd "$(dirname "$0")/.."

PACKAGES="build-essential autoconf automake libtool pkg-config man-db groff-base \
libmicrohttpd-dev libjansson-dev libleveldb-dev check libsubunit-dev zlib1g-dev librdkafka-dev \
python3 curl strace chromium nodejs libgnutls28-dev openssl libfuse3-dev fuse3"

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup.sh: missing packages:$missing" >&2
        echo "run as root, or install them with:" >&2
        echo "  sudo apt-get update && sudo apt-get install -y$missing" >&2
        exit 1
    fi
    echo "setup.sh: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing
fi
# npm: Debian's package, unless the installed Node.js brings its own (the
# NodeSource builds do, and conflict with Debian's npm).
if ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup.sh: npm is missing; run as root, or: sudo apt-get install -y npm" >&2
        exit 1
    fi
    echo "setup.sh: installing npm"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm
fi

# The browser tests drive Debian's chromium through playwright-core, pinned
# by tests/browser/package-lock.json; it downloads no browser of its own.
lock=tests/browser/package-lock.json
if [ -f "$lock" ] && { [ ! -f tests/browser/node_modules/.package-lock.json ] ||
                       [ "$lock" -nt tests/browser/node_modules/.package-lock.json ]; }; then
    echo "setup.sh: npm ci (tests/browser)"
    (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
fi

flags="${PULSE_CONFIGURE_FLAGS:-}"
need_autoreconf=0
if [ ! -x configure ] || [ ! -f Makefile.in ]; then
    need_autoreconf=1
elif [ configure.ac -nt configure ]; then
    need_autoreconf=1
fi
if [ $need_autoreconf -eq 1 ]; then
    echo "setup.sh: autoreconf -fi"
    autoreconf -fi
fi

stamp=.setup-configure-flags
if [ ! -f config.status ] || [ ! -f Makefile ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$flags" ]; then
    echo "setup.sh: ./configure $flags"
    # shellcheck disable=SC2086
    ./configure $flags
    printf '%s' "$flags" > "$stamp"
fi

make -j"$(nproc)"
