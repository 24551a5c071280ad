/*
 * crc32c.h - CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum of the record format (README.md in this directory).
 *
 * tr_crc32c uses the SSE4.2 crc32 instruction when the CPU has it (checked
 * once at run time) and a slicing-by-8 table otherwise; both give the same
 * value. CRC32C("123456789") = 0xE3069283.
 */
#ifndef TR_CRC32C_H
#define TR_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extend crc (0 for a fresh checksum) over data[0, bytes). Chaining works:
 * tr_crc32c(tr_crc32c(0, a, n), b, m) == CRC32C of a followed by b. */
uint32_t tr_crc32c(uint32_t crc, const void *data, size_t bytes);
/* The table version alone (tests compare it with the hardware path). */
uint32_t tr_crc32c_sw(uint32_t crc, const void *data, size_t bytes);
/* 1 when tr_crc32c uses the SSE4.2 instruction. */
int tr_crc32c_hw_available(void);

#endif
