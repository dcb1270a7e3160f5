#!/bin/sh
# SPDX-License-Identifier: MIT
# Every header must compile on its own (it includes or forward-declares what
# it uses). Compiles a one-line C file per header with the project's flags.
# Usage: check-headers.sh SRCDIR BUILDDIR CC CFLAGS...
srcdir=$1; builddir=$2; cc=$3; shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for h in "$srcdir"/src/*/*.h; do
    rel=${h#"$srcdir"/src/}
    printf '#include "%s"\n' "$rel" > "$tmp/t.c"
    extra=""
    case "$rel" in
        http/*) extra=$(pkg-config --cflags libmicrohttpd jansson 2>/dev/null) ;;
        kafka/*) extra=$(pkg-config --cflags rdkafka 2>/dev/null) ;;
    esac
    # shellcheck disable=SC2086
    if ! $cc -std=c11 -include "$builddir/config.h" -I"$srcdir/src" $extra "$@" -fsyntax-only "$tmp/t.c" 2>"$tmp/err"; then
        echo "header does not compile alone: src/$rel"
        sed 's/^/  /' "$tmp/err" | head -n 8
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "headers: ok"
exit $fail
