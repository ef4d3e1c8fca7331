/* Datasets in memory: loaded once per job, shared read-only by every replica. */
#ifndef PARLE_DATASET_H
#define PARLE_DATASET_H

#include <stddef.h>
#include <stdint.h>

typedef struct dataset {
    int n;               /* number of examples */
    int c, h, w;         /* per-example shape */
    int classes;
    float *images;       /* n * c*h*w floats, pixels scaled to [0, 1] (then normalised) */
    int32_t *labels;     /* n labels in [0, classes) */
} dataset;

static inline size_t dataset_example_size(const dataset *d) { return (size_t)d->c * d->h * d->w; }

/* IDX (MNIST, Fashion-MNIST): gzip or raw, detected by the gzip magic.
 * `limit` > 0 keeps only the first `limit` examples. Errors name the file
 * and what is wrong (missing, truncated, wrong magic, count mismatch). */
int idx_load(dataset *out, const char *images_path, const char *labels_path, int limit,
             char *err, size_t errlen);

/* The standard train/test file names under `root`, gzip (`*.gz`) or raw:
 * train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
 * t10k-labels-idx1-ubyte. */
int idx_load_split(dataset *train, dataset *test, const char *root, int train_limit,
                   int test_limit, char *err, size_t errlen);

/* A generated, learnable classification set: `classes` prototype images of
 * shape c x h x w plus per-example noise, all drawn from Philox keyed by seed.
 * Train and test share prototypes (same seed) and differ in noise. */
int synthetic_make(dataset *out, int n, int c, int h, int w, int classes, uint64_t seed,
                   int is_test, char *err, size_t errlen);

void dataset_free(dataset *d);

#endif
