/* wire.c - encoding and decoding of the store's frames (wire.h), and the clock every boot deadline uses (boot_now_s,
 * store.h). */
#include "boot/wire.h"

#include <string.h>
#include <time.h>

#include "boot/store.h"

static void put_be(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

static uint64_t get_be(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v = (v << 8) | p[i];
    return v;
}

size_t boot_wire_frame_bytes(size_t key_bytes, size_t value_bytes)
{
    return 4 + BOOT_WIRE_HEADER_BYTES + key_bytes + value_bytes;
}

void boot_wire_encode(uint8_t *out, uint8_t op, int64_t arg, const void *key, size_t key_bytes, const void *value,
                      size_t value_bytes)
{
    put_be(out, BOOT_WIRE_HEADER_BYTES + key_bytes + value_bytes, 4);
    out[4] = op;
    put_be(out + 5, key_bytes, 2);
    put_be(out + 7, value_bytes, 4);
    put_be(out + 11, (uint64_t)arg, 8);
    if (key_bytes) memcpy(out + 4 + BOOT_WIRE_HEADER_BYTES, key, key_bytes);
    if (value_bytes) memcpy(out + 4 + BOOT_WIRE_HEADER_BYTES + key_bytes, value, value_bytes);
}

uint32_t boot_wire_body_bytes(const uint8_t *prefix) { return (uint32_t)get_be(prefix, 4); }

int boot_wire_decode(const uint8_t *body, size_t body_bytes, boot_wire_msg_t *msg, const char **why)
{
    if (body_bytes < BOOT_WIRE_HEADER_BYTES) {
        *why = "a body shorter than its header";
        return -1;
    }
    msg->op = body[0];
    msg->key_bytes = (size_t)get_be(body + 1, 2);
    msg->value_bytes = (size_t)get_be(body + 3, 4);
    msg->arg = (int64_t)get_be(body + 7, 8);
    if (msg->key_bytes > BOOT_WIRE_KEY_MAX) {
        *why = "a key longer than the limit";
        return -1;
    }
    if (msg->value_bytes > BOOT_WIRE_VALUE_MAX) {
        *why = "a value longer than the limit";
        return -1;
    }
    if (BOOT_WIRE_HEADER_BYTES + msg->key_bytes + msg->value_bytes != body_bytes) {
        *why = "key and value lengths that do not add up to the frame's";
        return -1;
    }
    msg->key = body + BOOT_WIRE_HEADER_BYTES;
    msg->value = msg->key + msg->key_bytes;
    return 0;
}

double boot_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
