/* TFRecord framing, the container of TensorBoard event files, and the
 * growable byte buffer records are encoded into.
 *
 * A record is: the data's length (u64, little-endian), the masked CRC-32C
 * of those 8 bytes (u32 LE), the data, the masked CRC-32C of the data
 * (u32 LE); masked(c) = ((c >> 15) | (c << 17)) + 0xA282EAD8. */
#ifndef PARLECTL_TFRECORD_H
#define PARLECTL_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

typedef struct bytebuf {
    unsigned char *p;
    size_t n, cap;
} bytebuf;

/* Append n bytes; 0, or -1 when out of memory (b is left as it was). */
int bytebuf_put(bytebuf *b, const void *data, size_t n);
void bytebuf_free(bytebuf *b);

/* The masked CRC-32C of n bytes, as TFRecord framing stores it. */
uint32_t tfrecord_masked_crc(const void *data, size_t n);
/* Append `data` to out as one record. 0, or -1 when out of memory (out
 * then holds none of the record). */
int tfrecord_put(bytebuf *out, const void *data, size_t n);

#endif
