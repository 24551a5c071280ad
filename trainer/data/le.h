/*
 * le.h - little-endian integers in byte buffers, whatever the host: the
 * encoding of the record format (record.c) and of the checkpoint file
 * (trainer/ckpt/ckpt_file.c).
 */
#ifndef TR_DATA_LE_H
#define TR_DATA_LE_H

#include <stdint.h>

static inline void tr_le_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void tr_le_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void tr_le_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t tr_le_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t tr_le_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t tr_le_get_u64(const uint8_t *p)
{
    return tr_le_get_u32(p) | (uint64_t)tr_le_get_u32(p + 4) << 32;
}

#endif
