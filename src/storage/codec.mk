# SPDX-License-Identifier: MIT
# The batch codec (storage contract section 3).
libpulsestore_a_SOURCES += src/storage/batch.h
