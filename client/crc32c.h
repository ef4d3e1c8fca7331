/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
 * TFRecord framing (tfrecord.c). */
#ifndef PARLECTL_CRC32C_H
#define PARLECTL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of n bytes: "123456789" gives 0xE3069283. */
uint32_t crc32c(const void *data, size_t n);

#endif
