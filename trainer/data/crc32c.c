/*
 * crc32c.c - CRC-32C, slicing-by-8 in software, SSE4.2 crc32 in hardware.
 *
 * Slicing-by-8: table[0] is the classic byte-at-a-time table; table[k][b] is
 * the CRC of byte b followed by k zero bytes, so eight input bytes are folded
 * with eight independent lookups XORed together (one 64-bit load per step).
 * The tables are built once on first use (pthread_once; 8 KiB).
 */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

#define CRC32C_POLY 0x82F63B78u /* reflected Castagnoli polynomial */

static uint32_t crc32c_table[8][256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;
static int crc32c_hw;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define CRC32C_HAVE_X86 1

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw_update(uint32_t crc, const uint8_t *p, size_t bytes)
{
    uint64_t c = crc;
    while (bytes > 0 && ((uintptr_t)p & 7) != 0) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        bytes--;
    }
    while (bytes >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
        p += 8;
        bytes -= 8;
    }
    while (bytes > 0) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        bytes--;
    }
    return (uint32_t)c;
}
#endif

static void crc32c_init(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc32c_table[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int t = 1; t < 8; t++)
            crc32c_table[t][b] = (crc32c_table[t - 1][b] >> 8) ^ crc32c_table[0][crc32c_table[t - 1][b] & 0xff];
#ifdef CRC32C_HAVE_X86
    __builtin_cpu_init();
    crc32c_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
}

/* Works on the inverted register; callers invert in and out. */
static uint32_t crc32c_sw_update(uint32_t c, const uint8_t *p, size_t bytes)
{
    while (bytes > 0 && ((uintptr_t)p & 7) != 0) {
        c = (c >> 8) ^ crc32c_table[0][(c ^ *p++) & 0xff];
        bytes--;
    }
    while (bytes >= 8) {
        /* Byte order: the format is little-endian and so is every host we
         * build for; assemble the words explicitly to stay correct anyway. */
        uint32_t lo = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        lo ^= c;
        c = crc32c_table[7][lo & 0xff] ^ crc32c_table[6][(lo >> 8) & 0xff] ^ crc32c_table[5][(lo >> 16) & 0xff] ^
            crc32c_table[4][lo >> 24] ^ crc32c_table[3][hi & 0xff] ^ crc32c_table[2][(hi >> 8) & 0xff] ^
            crc32c_table[1][(hi >> 16) & 0xff] ^ crc32c_table[0][hi >> 24];
        p += 8;
        bytes -= 8;
    }
    while (bytes > 0) {
        c = (c >> 8) ^ crc32c_table[0][(c ^ *p++) & 0xff];
        bytes--;
    }
    return c;
}

uint32_t tr_crc32c_sw(uint32_t crc, const void *data, size_t bytes)
{
    pthread_once(&crc32c_once, crc32c_init);
    return ~crc32c_sw_update(~crc, data, bytes);
}

uint32_t tr_crc32c(uint32_t crc, const void *data, size_t bytes)
{
    pthread_once(&crc32c_once, crc32c_init);
#ifdef CRC32C_HAVE_X86
    if (crc32c_hw) return ~crc32c_hw_update(~crc, data, bytes);
#endif
    return ~crc32c_sw_update(~crc, data, bytes);
}

int tr_crc32c_hw_available(void)
{
    pthread_once(&crc32c_once, crc32c_init);
    return crc32c_hw;
}
