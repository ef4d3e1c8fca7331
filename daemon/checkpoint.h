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
#include "model.h"
#include "safetensors.h"

typedef struct checkpoint_info {
    long k;                 /* outer iterations done */
    long step;              /* gradient steps per replica done */
    int replicas;
    int epochs_done;        /* evaluations done */
    double test_error, test_loss; /* the last evaluation, if epochs_done > 0 */
    double elapsed_s;
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

/* Writes the manifest of info->k (making it complete), then deletes all but
 * the newest `keep` complete checkpoints and any torn ones older than it. */
int checkpoint_commit(const char *root, checkpoint_info *info, int keep, char *err, size_t errlen);

/* The newest complete checkpoint for `replicas` replicas: 1 found, 0 none,
 * -1 error. Each torn or unreadable one skipped is described in `log`
 * (one line each, may be empty). */
int checkpoint_find_latest(const char *root, int replicas, checkpoint_info *info, char *log,
                           size_t loglen);

#endif
