#!/bin/sh
# SPDX-License-Identifier: MIT
# Functions that read in one sitting (README.md, "Development"): lists every
# function definition in src/**/*.c longer than a limit and fails if there is
# one. Split a long function by phase into static helpers rather than raising
# the limit.
#
#   scripts/check-functions.sh [top] [limit]      limit defaults to 120
#
# The length of a function runs from the line that names it (the line after
# the return type) to its closing brace, both included. The scan relies on
# the house layout, which the whole tree follows: a definition's opening brace
# stands alone at column 0, its closing brace is the next "}" at column 0, and
# the name is the identifier before the first "(" on the nearest line above
# the brace that starts at column 0 (continuation lines of the parameter list
# are indented). A "{" at column 0 that does not follow such a line (which
# would be a layout this scan does not understand) is reported, not skipped.
top=${1:-.}
limit=${2:-120}
cd "$top" || exit 2
case $limit in
    '' | *[!0-9]*) echo "check-functions: limit must be a number: $limit"; exit 2 ;;
esac
files=$(find src -name '*.c' | LC_ALL=C sort)
[ -n "$files" ] || { echo "check-functions: no sources under $top/src"; exit 2; }

# shellcheck disable=SC2086
awk -v limit="$limit" '
function report_odd(msg) { printf "%s:%d: %s\n", FILENAME, FNR, msg; odd = 1 }
FNR == 1 {
    if (open) report_odd("unterminated function " name " in previous file")
    open = 0; head = 0; hname = ""
}
# A line at column 0 that opens a parameter list: remember the name and line.
!open && /^[A-Za-z_][^;=]*\(/ {
    s = $0
    sub(/\(.*/, "", s)
    n = split(s, w, /[^A-Za-z0-9_]+/)
    hname = w[n]; head = FNR
    next
}
# Any other line at column 0 except "{" ends the candidate declaration (a
# comment, a directive, a struct), and so does a ";" or "=" on any line (the
# end of a prototype or the start of an initialiser).
!open && (/^[^ \t{]/ || /[;=]/) { hname = ""; head = 0; next }
!open && /^\{/ {
    if (hname == "") { report_odd("\"{\" at column 0 with no function name above it"); next }
    open = 1; name = hname; start = head
    next
}
open && /^\}/ {
    len = FNR - start + 1
    total++
    if (len > limit) {
        printf "%s:%d: %s is %d lines (limit %d)\n", FILENAME, start, name, len, limit
        over++
    }
    open = 0; hname = ""; head = 0
    next
}
END {
    if (open) report_odd("unterminated function " name)
    if (total == 0) {
        printf "check-functions: no function definitions found: the scan does not match the layout\n"
        exit 1
    }
    if (over || odd) {
        if (over)
            printf "check-functions: %d of %d functions over %d lines: split them by phase into static helpers\n", over, total, limit
        if (odd)
            printf "check-functions: layout not understood at the lines above (see the head of scripts/check-functions.sh)\n"
        exit 1
    }
    printf "functions: ok (%d functions, none over %d lines)\n", total, limit
}
' $files
