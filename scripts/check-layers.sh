#!/bin/sh
# SPDX-License-Identifier: MIT
# Enforces the layer rule of docs/Architecture.md on #include lines:
#   common  -> (nothing of ours)
#   storage -> common
#   meta    -> common
#   broker  -> common storage meta
#   kafka   -> common broker           (the seam's headers only: broker.h, backend.h)
#   http    -> common broker           (the broker seam, broker.h: no batches)
#              and kafka/kafka_settings.h (the [kafka] table, for the configuration)
# and bans raw allocation calls outside src/common/alloc.c.
top=${1:-.}
cd "$top" || exit 2
fail=0
check() {
    dir=$1; shift
    allowed="$*"
    [ -d "src/$dir" ] || return 0
    for inc in $(grep -ho '#include "[a-z_]*/' src/$dir/*.c src/$dir/*.h 2>/dev/null | sed 's/#include "//; s,/$,,' | sort -u); do
        ok=0
        for a in $dir $allowed; do [ "$inc" = "$a" ] && ok=1; done
        if [ $ok -eq 0 ]; then
            echo "layer violation: src/$dir includes $inc/ (allowed: $dir $allowed)"
            grep -n "#include \"$inc/" src/$dir/*.c src/$dir/*.h
            fail=1
        fi
    done
}
check common
check storage common
check meta common
check broker common storage meta
check kafka common broker
check http common broker kafka
# The Kafka backend stands beside the local one behind the seam: it sees the
# seam (broker.h, backend.h) and nothing of the local backend's inside; the
# HTTP layer sees only its settings table.
if grep -n '#include "broker/' src/kafka/*.c src/kafka/*.h 2>/dev/null \
        | grep -vE '#include "broker/(broker|backend)\.h"'; then
    echo "src/kafka may include only broker/broker.h and broker/backend.h of the broker"; fail=1
fi
if grep -n '#include "kafka/' src/http/*.c src/http/*.h 2>/dev/null | grep -v '#include "kafka/kafka_settings\.h"'; then
    echo "src/http may include only kafka/kafka_settings.h of the Kafka backend"; fail=1
fi
# The log owns its segment list: only its own files (plog*.c), segment.c and
# recover.c see its inside; compaction and retention edit it through
# storage/plog_edit.h (docs/Architecture.md).
if grep -ln '#include "storage/plog_int.h"' src/*/*.c src/*/*.h 2>/dev/null \
        | grep -vE '^src/storage/(plog[a-z_]*\.c|plog_int\.h|segment\.c|recover\.c)$'; then
    echo "only src/storage/plog*.c, segment.c and recover.c may include storage/plog_int.h"; fail=1
fi
if grep -n '#include <leveldb' src/*/*.c src/*/*.h 2>/dev/null | grep -v '^src/meta/'; then
    echo "only src/meta may include LevelDB"; fail=1
fi
raw=$(grep -nE '(^|[^_a-z])(malloc|calloc|realloc|strdup|free)\(' src/*/*.c src/*.c 2>/dev/null \
      | grep -v '^src/common/alloc.c' | grep -vE 'pulse_(malloc|calloc|realloc|strdup|free)\(' \
      | grep -vE 'leveldb_free\(|json_|MHD_|/\*')
if [ -n "$raw" ]; then
    echo "raw allocation calls (use pulse_malloc & co):"; echo "$raw"; fail=1
fi
[ $fail -eq 0 ] && echo "layers: ok"
exit $fail
