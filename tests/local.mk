# SPDX-License-Identifier: MIT
include tests/lib/local.mk
include tests/fuzz/local.mk
include tests/integration/local.mk
include tests/browser/local.mk
