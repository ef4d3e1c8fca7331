/* Weights on disk as safetensors (the format PyTorch's safetensors package reads):
 * 8-byte little-endian header length, a JSON header naming every tensor with
 * dtype "F32", shape and data_offsets, `__metadata__` with "format": "pt",
 * then the raw little-endian data. */
#ifndef PARLE_SAFETENSORS_H
#define PARLE_SAFETENSORS_H

#include <stddef.h>
#include "model.h"

/* Metadata entries as key/value string pairs (values are strings, as the format says). */
typedef struct st_meta { const char *key; const char *value; } st_meta;

/* Writes every named tensor of `m` (parameters and BN statistics) from the
 * given flat buffers (params: m->nparams floats, stats: m->nstats floats).
 * Atomic: a temporary file in the same directory, fsync, rename, fsync dir. */
int safetensors_write(const char *path, const model *m, const float *params, const float *stats,
                      const st_meta *meta, int nmeta, char *err, size_t errlen);

/* Reads a file written by safetensors_write (or PyTorch) into the flat buffers
 * of `m`: every tensor of the model must be present with the same shape and
 * dtype F32. Anything malformed is an error naming the file and the problem.
 * If meta_json is not NULL it receives a malloc'd copy of the __metadata__ JSON. */
int safetensors_read(const char *path, const model *m, float *params, float *stats,
                     char **meta_json, char *err, size_t errlen);

/* The same over any list of named tensors, data[i] holding ts[i].count floats
 * (offset and is_stat are not used): checkpoints save optimizer and coupling
 * state this way. */
int safetensors_write_tensors(const char *path, const tensor_info *ts, const float *const *data,
                              int n, const st_meta *meta, int nmeta, char *err, size_t errlen);
int safetensors_read_tensors(const char *path, const tensor_info *ts, float *const *data, int n,
                             char **meta_json, char *err, size_t errlen);

#endif
