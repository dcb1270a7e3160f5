/* SPDX-License-Identifier: MIT */
/*
 * crc32c.h - CRC-32C (Castagnoli), the checksum of every batch and snapshot,
 * and the one owner of everything CRC: computing, combining and patching.
 *
 * Reflected polynomial 0x82F63B78, initial value ~0, final xor ~0:
 * pulse_crc32c(0, "123456789", 9) == 0xE3069283.
 * pulse_crc32c picks a path once at run time: three interleaved SSE4.2
 * instruction streams when the CPU has the instruction, else portable
 * slicing-by-8. Every path is exported so tests can compare them on the same
 * input; they all give the same result.
 *
 * The crc argument continues a previous result: crc32c(crc32c(0,a),b) equals
 * crc32c(0, a||b). Thread: any; nothing here blocks or allocates (the tables
 * are built once, on first use, under pthread_once).
 */
#ifndef PULSE_COMMON_CRC32C_H
#define PULSE_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t pulse_crc32c(uint32_t crc, const void *data, size_t len);
uint32_t pulse_crc32c_sw(uint32_t crc, const void *data, size_t len);
/* Only call when pulse_crc32c_hw_available() is true. _hw is one stream of
 * the instruction (each step waits for the previous one), _hw3 three streams
 * over adjacent blocks combined at the end (what pulse_crc32c uses). */
uint32_t pulse_crc32c_hw(uint32_t crc, const void *data, size_t len);
uint32_t pulse_crc32c_hw3(uint32_t crc, const void *data, size_t len);
int pulse_crc32c_hw_available(void);

/*
 * The CRC of A||B from crc_a = pulse_crc32c(0, A), crc_b = pulse_crc32c(0, B)
 * and len_b = |B|, without reading A or B: O(log len_b) steps.
 */
uint32_t pulse_crc32c_combine(uint32_t crc_a, uint32_t crc_b, size_t len_b);

/*
 * The CRC of a message after len bytes inside it changed from old_bytes to
 * new_bytes, where tail bytes of the message follow the changed ones: crc is
 * the message's CRC before the change. Costs O(len + log tail) whatever the
 * message's size (a CRC is affine in its input, so the change adds the CRC
 * of the difference followed by tail zero bytes).
 *
 * The caller must know crc was right for the old message (it just verified
 * or computed it). The result is right exactly when crc was: a wrong CRC
 * stays wrong by the same amount, so damage is still found later, where a
 * recomputation would have blessed it.
 */
uint32_t pulse_crc32c_patch(uint32_t crc, const void *old_bytes, const void *new_bytes, size_t len, size_t tail);

#endif
