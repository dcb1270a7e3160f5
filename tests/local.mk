# SPDX-License-Identifier: MIT
# tests/: every test of the tree, registered in one list per layer. A reader
# looking for the tests of a layer finds them all in that layer's list:
#
#   tests/unit/common/local.mk    src/common
#   tests/unit/storage/local.mk   src/storage
#   tests/unit/meta/local.mk      src/meta
#   tests/unit/broker/local.mk    src/broker
#   tests/unit/kafka/local.mk     src/kafka (the Kafka backend)
#   tests/unit/http/local.mk      src/http
#   tests/unit/tools/local.mk     src/tools (pulse-log)
#   tests/fuzz/local.mk           the fuzz drivers' corpus replays
#   tests/integration/local.mk    pulsed over real HTTP
#   tests/powerloss/campaign.mk   power cuts under pulsed (plfs)
#   tests/browser/local.mk        the dashboard and the browser-facing API
#   tests/powerloss/local.mk      power cuts: the plfs file system and its self-tests
#
# tests/lib is the helper library (faulty io) the unit tests link.
include tests/lib/local.mk
include tests/unit/common/local.mk
include tests/unit/storage/local.mk
include tests/unit/meta/local.mk
include tests/unit/broker/local.mk
include tests/unit/kafka/local.mk
include tests/unit/http/local.mk
include tests/unit/tools/local.mk
include tests/fuzz/local.mk
include tests/integration/local.mk
include tests/powerloss/campaign.mk
include tests/browser/local.mk
include tests/powerloss/local.mk
