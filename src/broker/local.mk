# SPDX-License-Identifier: MIT
# src/broker: topics, routing, publish, cursors, syncer (storage + meta).
noinst_LIBRARIES += libpulsebroker.a
libpulsebroker_a_SOURCES = src/broker/broker.h
