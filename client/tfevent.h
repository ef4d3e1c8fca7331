/* The protobuf encoding of the few TensorBoard `Event` messages parlectl
 * writes, each appended to a buffer as one TFRecord (tfrecord.h). Only
 * these fields of TensorBoard's event.proto and summary.proto are encoded:
 *
 *   Event   { double wall_time = 1; int64 step = 2;
 *             string file_version = 3; Summary summary = 5; }
 *   Summary { repeated Value value = 1; }
 *   Value   { string tag = 1; float simple_value = 2; }
 *
 * A field at its default (a step of 0) is left out, as protobuf's own
 * encoders do, so the bytes equal theirs. */
#ifndef PARLECTL_TFEVENT_H
#define PARLECTL_TFEVENT_H

#include <stddef.h>
#include <stdint.h>

#include "tfrecord.h"

/* One scalar of a Summary. */
typedef struct tb_scalar {
    char tag[128];
    float value;
} tb_scalar;

/* The Event that starts a file: wall_time and file_version
 * "brain.Event:2". 0, or -1 when out of memory. */
int tfevent_file_version(bytebuf *out, double wall_time);
/* An Event at `step` whose Summary holds the n scalars. 0, or -1 when out
 * of memory. */
int tfevent_scalars(bytebuf *out, double wall_time, int64_t step, const tb_scalar *v, size_t n);

#endif
