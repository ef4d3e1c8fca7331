/* A protobuf encoder for just the fields of tfevent.h: varints, fixed
 * 32- and 64-bit numbers and length-delimited fields (strings, embedded
 * messages, encoded inside out and then framed). */
#include <string.h>

#include "tfevent.h"

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_BYTES = 2, WIRE_FIXED32 = 5 };
enum { EVENT_WALL_TIME = 1, EVENT_STEP = 2, EVENT_FILE_VERSION = 3, EVENT_SUMMARY = 5 };
enum { SUMMARY_VALUE = 1 };
enum { VALUE_TAG = 1, VALUE_SIMPLE_VALUE = 2 };

static int put_varint(bytebuf *b, uint64_t v)
{
    unsigned char out[10];
    size_t n = 0;
    do {
        out[n++] = (unsigned char)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return bytebuf_put(b, out, n);
}

static int put_key(bytebuf *b, unsigned field, unsigned wire)
{
    return put_varint(b, (uint64_t)field << 3 | wire);
}

static int put_fixed(bytebuf *b, unsigned field, uint64_t bits, int bytes)
{
    unsigned char out[8];
    for (int i = 0; i < bytes; i++)
        out[i] = (unsigned char)(bits >> (8 * i));
    return put_key(b, field, bytes == 8 ? WIRE_FIXED64 : WIRE_FIXED32) ||
                   bytebuf_put(b, out, (size_t)bytes)
               ? -1
               : 0;
}

static int put_double(bytebuf *b, unsigned field, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return put_fixed(b, field, bits, 8);
}

static int put_float(bytebuf *b, unsigned field, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return put_fixed(b, field, bits, 4);
}

static int put_bytes(bytebuf *b, unsigned field, const void *data, size_t n)
{
    return put_key(b, field, WIRE_BYTES) || put_varint(b, n) || bytebuf_put(b, data, n) ? -1 : 0;
}

/* An Event's head: wall_time and step (left out at 0, its default). */
static int put_event_head(bytebuf *b, double wall_time, int64_t step)
{
    if (put_double(b, EVENT_WALL_TIME, wall_time) != 0)
        return -1;
    return step == 0 || (put_key(b, EVENT_STEP, WIRE_VARINT) == 0 &&
                         put_varint(b, (uint64_t)step) == 0)
               ? 0
               : -1;
}

/* Frame the message in b (whose encoding gave `rc`) as a record of out;
 * frees b. */
static int frame(bytebuf *out, bytebuf *b, int rc)
{
    rc = rc != 0 ? -1 : tfrecord_put(out, b->p, b->n);
    bytebuf_free(b);
    return rc;
}

int tfevent_file_version(bytebuf *out, double wall_time)
{
    static const char version[] = "brain.Event:2";
    bytebuf ev = {0};
    int rc = put_event_head(&ev, wall_time, 0) ||
             put_bytes(&ev, EVENT_FILE_VERSION, version, sizeof version - 1);
    return frame(out, &ev, rc);
}

int tfevent_scalars(bytebuf *out, double wall_time, int64_t step, const tb_scalar *v, size_t n)
{
    bytebuf summary = {0}, value = {0}, ev = {0};
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        value.n = 0;
        rc = put_bytes(&value, VALUE_TAG, v[i].tag, strlen(v[i].tag)) ||
             put_float(&value, VALUE_SIMPLE_VALUE, v[i].value) ||
             put_bytes(&summary, SUMMARY_VALUE, value.p, value.n);
    }
    rc = rc || put_event_head(&ev, wall_time, step) ||
         put_bytes(&ev, EVENT_SUMMARY, summary.p, summary.n);
    bytebuf_free(&value);
    bytebuf_free(&summary);
    return frame(out, &ev, rc);
}
