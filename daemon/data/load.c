/* A job's data, loaded as its data.* fields say. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

/* Per-channel mean and standard deviation of the training set, applied to both sets. */
static void normalize_channels(dataset *train, dataset *test)
{
    size_t plane = (size_t)train->h * train->w;
    for (int c = 0; c < train->c; c++) {
        double sum = 0, sq = 0;
        for (int i = 0; i < train->n; i++) {
            const float *p = train->images + ((size_t)i * train->c + c) * plane;
            for (size_t j = 0; j < plane; j++) {
                sum += p[j];
                sq += (double)p[j] * p[j];
            }
        }
        double count = (double)train->n * (double)plane;
        double mean = sum / count, var = sq / count - mean * mean;
        float inv = (float)(1.0 / sqrt(var > 1e-12 ? var : 1e-12));
        dataset *sets[2] = {train, test};
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < sets[s]->n; i++) {
                float *p = sets[s]->images + ((size_t)i * sets[s]->c + c) * plane;
                for (size_t j = 0; j < plane; j++)
                    p[j] = (p[j] - (float)mean) * inv;
            }
    }
}

int run_load_data(const job_config *cfg, dataset *train, dataset *test, char *err, size_t errlen)
{
    const char *name = cfg->data.dataset;
    memset(train, 0, sizeof(*train));
    memset(test, 0, sizeof(*test));
    int classes = cfg->model.classes > 0 ? cfg->model.classes : 10;
    int rc;
    if (strcmp(name, "mnist") == 0 || strcmp(name, "fashion-mnist") == 0) {
        rc = idx_load_split(train, test, cfg->data.root, cfg->data.train_limit,
                            cfg->data.test_limit, err, errlen);
    } else if (strcmp(name, "synthetic") == 0) {
        int ntrain = cfg->data.train_limit > 0 ? cfg->data.train_limit : 4096;
        int ntest = cfg->data.test_limit > 0 ? cfg->data.test_limit : 1024;
        rc = synthetic_make(train, ntrain, 1, 28, 28, classes, cfg->seed, 0, err, errlen);
        if (rc == 0)
            rc = synthetic_make(test, ntest, 1, 28, 28, classes, cfg->seed, 1, err, errlen);
    } else {
        snprintf(err, errlen, "data.dataset: \"%s\" cannot be loaded yet", name);
        return -1;
    }
    if (rc == 0 && strcmp(cfg->data.normalize, "channel") == 0)
        normalize_channels(train, test);
    else if (rc == 0 && strcmp(cfg->data.normalize, "zca") == 0) {
        snprintf(err, errlen, "data.normalize: \"zca\" is not available yet for %s", name);
        rc = -1;
    }
    if (rc != 0) {
        dataset_free(train);
        dataset_free(test);
    }
    return rc;
}
