/* TFRecord framing (tfrecord.h) and the byte buffer it writes into. */
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "tfrecord.h"

int bytebuf_put(bytebuf *b, const void *data, size_t n)
{
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n) {
            if (cap > SIZE_MAX / 2)
                return -1;
            cap *= 2;
        }
        unsigned char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n > 0)
        memcpy(b->p + b->n, data, n);
    b->n += n;
    return 0;
}

void bytebuf_free(bytebuf *b)
{
    free(b->p);
    *b = (bytebuf){0};
}

uint32_t tfrecord_masked_crc(const void *data, size_t n)
{
    uint32_t c = crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

static void le(unsigned char *out, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        out[i] = (unsigned char)(v >> (8 * i));
}

int tfrecord_put(bytebuf *out, const void *data, size_t n)
{
    unsigned char head[12], foot[4];
    le(head, (uint64_t)n, 8);
    le(head + 8, tfrecord_masked_crc(head, 8), 4);
    le(foot, tfrecord_masked_crc(data, n), 4);
    size_t was = out->n;
    if (bytebuf_put(out, head, sizeof head) != 0 || bytebuf_put(out, data, n) != 0 ||
        bytebuf_put(out, foot, sizeof foot) != 0) {
        out->n = was;
        return -1;
    }
    return 0;
}
