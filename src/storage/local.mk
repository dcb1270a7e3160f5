# SPDX-License-Identifier: MIT
# src/storage: the storage engine library (knows common only).
noinst_LIBRARIES += libpulsestore.a
libpulsestore_a_SOURCES = \
	src/storage/io.h \
	src/storage/plog.h

# The batch codec lives in its own fragment.
include src/storage/codec.mk
