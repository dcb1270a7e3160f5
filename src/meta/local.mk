# SPDX-License-Identifier: MIT
# src/meta: the LevelDB metadata store (the only includer of leveldb/c.h).
