/* CRC-32C bit by bit: event files are small (a record per metrics line),
 * so no table is needed. */
#include "crc32c.h"

uint32_t crc32c(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}
