/* wire.h - the rendezvous store's frames (README.md: the protocol).
 *
 * Every message, either way, is one frame: a 4-byte body length, then the
 * body: op (1 byte), key length (2), value length (4), arg (8, signed), the
 * key, the value. Integers are big-endian. A body longer than
 * BOOT_WIRE_BODY_MAX, a key longer than BOOT_WIRE_KEY_MAX or a value longer
 * than BOOT_WIRE_VALUE_MAX is refused. */
#ifndef HORA_BOOT_WIRE_H
#define HORA_BOOT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define BOOT_WIRE_VERSION 1
#define BOOT_WIRE_HEADER_BYTES 15
#define BOOT_WIRE_KEY_MAX 512
#define BOOT_WIRE_VALUE_MAX (1u << 20)
#define BOOT_WIRE_BODY_MAX (BOOT_WIRE_HEADER_BYTES + BOOT_WIRE_KEY_MAX + BOOT_WIRE_VALUE_MAX)

/* Requests (client to server) and replies (server to client). */
enum boot_wire_op {
    BOOT_WIRE_OP_HELLO = 1,        /* value: the job id; arg: BOOT_WIRE_VERSION */
    BOOT_WIRE_OP_SET = 2,          /* key, value */
    BOOT_WIRE_OP_GET = 3,          /* key; arg: how long to wait for it, ms (0: do not wait) */
    BOOT_WIRE_OP_ADD = 4,          /* key; arg: the delta (the key holds an 8-byte counter) */
    BOOT_WIRE_OP_OK = 0x80,        /* value: GET's bytes; arg: ADD's new value */
    BOOT_WIRE_OP_NOT_FOUND = 0x81, /* GET: the key did not appear within its wait */
    BOOT_WIRE_OP_ERROR = 0x82,     /* value: the message */
};

/* One decoded message; key and value point into the body they came from. */
typedef struct {
    uint8_t op;
    int64_t arg;
    const uint8_t *key;
    size_t key_bytes;
    const uint8_t *value;
    size_t value_bytes;
} boot_wire_msg_t;

/* Bytes of the whole frame (length prefix included) for this key and value. */
size_t boot_wire_frame_bytes(size_t key_bytes, size_t value_bytes);
/* Write a frame into out (boot_wire_frame_bytes of room). */
void boot_wire_encode(uint8_t *out, uint8_t op, int64_t arg, const void *key, size_t key_bytes, const void *value,
                      size_t value_bytes);
/* The body length a frame's first 4 bytes announce. */
uint32_t boot_wire_body_bytes(const uint8_t *prefix);
/* Decode a body of body_bytes; 0, or -1 with why (a static string) when its
 * lengths do not add up or exceed the limits. */
int boot_wire_decode(const uint8_t *body, size_t body_bytes, boot_wire_msg_t *msg, const char **why);

#endif
