/* Checkpoints of a running job (docs/architecture.md, "Checkpoints"): at an outer-iteration boundary
 * every replica writes its own file, then rank 0 writes the manifest, the
 * completion marker, last. Layout under the job's checkpoint directory:
 *   k<outer iteration, 10 digits>/replica<r>.safetensors   weights, optimizer and
 *                                                       coupling state, BN statistics
 *   k<...>/manifest.json                                 written last, atomically
 * A directory without a valid manifest, or whose replica files do not read
 * back, is torn and never used. */
#ifndef PARLE_CHECKPOINT_H
#define PARLE_CHECKPOINT_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "model.h"
#include "safetensors.h"

typedef struct checkpoint_info {
    long k;                 /* outer iterations done */
    long step;              /* gradient steps per replica done */
    int replicas;
    int epochs_done;        /* evaluations done */
    double test_error, test_loss; /* the last evaluation, if epochs_done > 0 */
    double elapsed_s;
    long reseeds;           /* the job's re-seeded replicas so far (0 when absent) */
    char dir[1100];         /* this checkpoint's directory */
} checkpoint_info;

/* The directory of checkpoint k under `root` (buffer of at least 1100 bytes). */
void checkpoint_path(char *out, size_t outlen, const char *root, long k);

/* Replica `rank`'s file in checkpoint k; creates the directory. */
int checkpoint_write_replica(const char *root, long k, int rank, const tensor_info *ts,
                             const float *const *data, int n, const st_meta *meta, int nmeta,
                             char *err, size_t errlen);
int checkpoint_read_replica(const checkpoint_info *info, int rank, const tensor_info *ts,
                            float *const *data, int n, char **meta_json, char *err,
                            size_t errlen);

/* Replica `rank`'s file in the checkpoint at info->dir (buffer of at least 1200 bytes). */
void checkpoint_replica_path(char *out, size_t outlen, const checkpoint_info *info, int rank);

/* A replica file's metadata (the JSON object of string values that
 * checkpoint_read_replica returns), parsed into key/values. Every error
 * names the file and, for a value, the key. */
typedef struct checkpoint_meta {
    char file[1200];
    cJSON *root;            /* an object whose every value is a string */
} checkpoint_meta;

/* 0, or -1 with a message (not a JSON object, a value that is not a string,
 * out of memory); the meta is empty then, and can be freed either way. */
int checkpoint_meta_parse(checkpoint_meta *m, const char *file, const char *json, char *err,
                          size_t errlen);
/* The value of `key`, or NULL. */
const char *checkpoint_meta_get(const checkpoint_meta *m, const char *key);
/* The value of `key` as a whole decimal integer or number: 0, or -1 with a
 * message naming the file and the key (missing, or not such a number). */
int checkpoint_meta_long(const checkpoint_meta *m, const char *key, long long *out, char *err,
                         size_t errlen);
int checkpoint_meta_u64(const checkpoint_meta *m, const char *key, unsigned long long *out,
                        char *err, size_t errlen);
int checkpoint_meta_double(const checkpoint_meta *m, const char *key, double *out, char *err,
                           size_t errlen);
void checkpoint_meta_free(checkpoint_meta *m);

/* Writes the manifest of info->k (making it complete), then deletes all but
 * the newest `keep` complete checkpoints and any torn ones older than it. */
int checkpoint_commit(const char *root, checkpoint_info *info, int keep, char *err, size_t errlen);

/* The newest complete checkpoint for `replicas` replicas: 1 found, 0 none,
 * -1 error. Each torn or unreadable one skipped is described in `log`
 * (one line each, may be empty). */
int checkpoint_find_latest(const char *root, int replicas, checkpoint_info *info, char *log,
                           size_t loglen);

#endif
