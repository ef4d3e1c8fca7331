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

/* Loading can take minutes (a large set, a slow file system, ZCA), so every
 * loader takes a stop flag (a job's `stop`, set by a cancel or a shutdown;
 * NULL: none) and looks at it at bounded intervals: every DATA_STOP_BYTES
 * read, every block of rows computed. A stopped load frees what it made and
 * returns -1 with DATA_STOPPED in err. */
#define DATA_STOPPED "stopped while loading the data"
#define DATA_STOP_BYTES (4u << 20)

/* Read as the replicas read the job's flag: atomically (it is set with
 * __atomic_store_n from the loop thread). */
static inline int data_stop_asked(const volatile int *stop)
{
    return stop && __atomic_load_n(stop, __ATOMIC_RELAXED) != 0;
}

/* -1 with DATA_STOPPED in err if a stop was asked, else 0. */
int data_check_stop(const volatile int *stop, char *err, size_t errlen);

/* IDX (MNIST, Fashion-MNIST): gzip or raw, detected by the gzip magic.
 * `limit` > 0 keeps only the first `limit` examples. Errors name the file
 * and what is wrong (missing, truncated, wrong magic, count mismatch). */
int idx_load(dataset *out, const char *images_path, const char *labels_path, int limit,
             const volatile int *stop, char *err, size_t errlen);

/* The standard train/test file names under `root`, gzip (`*.gz`) or raw:
 * train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
 * t10k-labels-idx1-ubyte. */
int idx_load_split(dataset *train, dataset *test, const char *root, int train_limit,
                   int test_limit, const volatile int *stop, char *err, size_t errlen);

/* A generated, learnable classification set: `classes` prototype images of
 * shape c x h x w plus per-example noise, all drawn from Philox keyed by seed.
 * Train and test share prototypes (same seed) and differ in noise. */
int synthetic_make(dataset *out, int n, int c, int h, int w, int classes, uint64_t seed,
                   int is_test, const volatile int *stop, char *err, size_t errlen);

void dataset_free(dataset *d);

#endif
