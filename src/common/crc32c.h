/* SPDX-License-Identifier: MIT */
/*
 * crc32c.h - CRC-32C (Castagnoli), the checksum of every batch and snapshot.
 *
 * Reflected polynomial 0x82F63B78, initial value ~0, final xor ~0:
 * pulse_crc32c(0, "123456789", 9) == 0xE3069283.
 * pulse_crc32c picks the SSE4.2 instruction path once at run time when the CPU
 * has it, else portable slicing-by-8. Both are exported so tests can compare
 * them on the same input.
 *
 * The crc argument continues a previous result: crc32c(crc32c(0,a),b) equals
 * crc32c(0, a||b). Thread: any.
 */
#ifndef PULSE_COMMON_CRC32C_H
#define PULSE_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t pulse_crc32c(uint32_t crc, const void *data, size_t len);
uint32_t pulse_crc32c_sw(uint32_t crc, const void *data, size_t len);
/* Only call when pulse_crc32c_hw_available() is true. */
uint32_t pulse_crc32c_hw(uint32_t crc, const void *data, size_t len);
int pulse_crc32c_hw_available(void);

#endif
