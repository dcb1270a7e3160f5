#!/bin/sh
# SPDX-License-Identifier: MIT
# Holds the C sources and headers of src/, tests/ and bench/ to the layout in
# .clang-format (docs/CodeFormat.md).
#
#   check-format.sh [SRCDIR]          check: print the diff of every file that
#                                     differs, exit 1 if any does
#   check-format.sh --fix [SRCDIR]    rewrite those files in place
#   check-format.sh --list [SRCDIR]   print the files covered, one a line
#
# Covered: every *.c and *.h under src/, tests/ and bench/, except generated
# files: those listed in GENERATED below and any whose first line says
# "Do not edit" (the header our generators write).
#
# clang-format missing: the check is skipped with a message and exit 0, so a
# machine without it can still run `make check`; PULSE_REQUIRE_FORMAT=1 makes
# that an error (CI sets it). Another major version than the one the config
# was tuned with (CLANG_FORMAT_MAJOR) lays some lines out differently, so it
# is skipped the same way unless PULSE_REQUIRE_FORMAT=1. PULSE_CLANG_FORMAT
# names the program to use (default: clang-format, then clang-format-14).
CLANG_FORMAT_MAJOR=14
GENERATED="src/http/openapi_data.c"

mode=check
case "${1:-}" in
    --fix) mode=fix; shift ;;
    --list) mode=list; shift ;;
    -*) echo "usage: $0 [--fix | --list] [SRCDIR]" >&2; exit 2 ;;
esac
top=${1:-.}
cd "$top" || exit 2
require=${PULSE_REQUIRE_FORMAT:-0}

covered() {
    find src tests bench -type f \( -name '*.c' -o -name '*.h' \) 2>/dev/null | LC_ALL=C sort |
    while IFS= read -r f; do
        skip=0
        for g in $GENERATED; do
            [ "$f" = "$g" ] && skip=1
        done
        [ $skip -eq 0 ] && head -n 1 "$f" | grep -q 'Do not edit' && skip=1
        [ $skip -eq 0 ] && printf '%s\n' "$f"
    done
}

if [ $mode = list ]; then
    covered
    exit 0
fi

# The check is skipped (exit 0, said loudly) or fails, as PULSE_REQUIRE_FORMAT says.
skip() {
    if [ "$require" = 1 ]; then
        echo "check-format: FAILED: $1 (PULSE_REQUIRE_FORMAT=1)" >&2
        exit 1
    fi
    what="checked"
    [ $mode = fix ] && what="reformatted"
    echo "check-format: SKIPPED: $1; the C layout was not $what" \
        "(install clang-format $CLANG_FORMAT_MAJOR, or set PULSE_REQUIRE_FORMAT=1 to make this an error)"
    exit 0
}

cf=${PULSE_CLANG_FORMAT:-}
if [ -z "$cf" ]; then
    for c in clang-format clang-format-$CLANG_FORMAT_MAJOR; do
        if command -v "$c" >/dev/null 2>&1; then
            cf=$c
            break
        fi
    done
fi
if [ -z "$cf" ]; then
    skip "clang-format is not installed"
elif ! command -v "$cf" >/dev/null 2>&1; then
    skip "PULSE_CLANG_FORMAT=$cf is not found"
fi
version=$("$cf" --version 2>/dev/null | sed -n 's/.*clang-format version \([0-9][0-9]*\)\..*/\1/p')
if [ "$version" != "$CLANG_FORMAT_MAJOR" ]; then
    if [ "$require" = 1 ]; then
        echo "check-format: warning: $cf is version ${version:-unknown}, .clang-format is tuned for" \
            "$CLANG_FORMAT_MAJOR; checking anyway (PULSE_REQUIRE_FORMAT=1)" >&2
    else
        skip "$cf is version ${version:-unknown}, not $CLANG_FORMAT_MAJOR"
    fi
fi
if [ ! -f .clang-format ]; then
    echo "check-format: no .clang-format in $(pwd)" >&2
    exit 2
fi

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
covered > "$tmp/files"
total=0
bad=0
while IFS= read -r f; do
    total=$((total + 1))
    # --style=file finds the .clang-format at the top of the tree.
    if ! "$cf" --style=file "$f" > "$tmp/out" 2> "$tmp/err"; then
        echo "check-format: $cf failed on $f:" >&2
        cat "$tmp/err" >&2
        exit 2
    fi
    cmp -s "$f" "$tmp/out" && continue
    bad=$((bad + 1))
    if [ $mode = fix ]; then
        cat "$tmp/out" > "$f" || exit 2
        echo "check-format: reformatted $f"
    else
        echo "check-format: $f is not laid out as .clang-format says; \`make format\` would change:"
        diff -u "$f" "$tmp/out" | sed -e "1s|^--- .*|--- $f|" -e "2s|^+++ .*|+++ $f (formatted)|"
    fi
done < "$tmp/files"

if [ $mode = fix ]; then
    echo "check-format: $bad of $total files reformatted"
    exit 0
fi
if [ $bad -gt 0 ]; then
    echo "check-format: FAILED: $bad of $total files differ from .clang-format; run \`make format\`" \
        "(or fix the lines shown above)"
    exit 1
fi
echo "check-format: ok ($total files)"
exit 0
