#!/bin/sh
# SPDX-License-Identifier: MIT
# Prepares a Debian 12 machine to build and test Pulse, then builds it.
#
#   ./scripts/setup.sh              install missing packages, configure, make
#   PULSE_CONFIGURE_FLAGS="--enable-sanitizers" ./scripts/setup.sh
#
# Idempotent: packages already installed are not touched, autoreconf runs
# only when the generated files are missing or older than their sources, and
# ./configure only when it has not run with the same flags.
set -eu
cd "$(dirname "$0")/.."

PACKAGES="build-essential autoconf automake libtool pkg-config \
libmicrohttpd-dev libjansson-dev libleveldb-dev check libsubunit-dev zlib1g-dev \
python3 curl strace clang-format"

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
