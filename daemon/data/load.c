/* A job's data, loaded as its data.* fields say. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cifar.h"
#include "preprocess.h"
#include "runner.h"

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
    } else if (strcmp(name, "cifar10") == 0 || strcmp(name, "cifar100") == 0) {
        rc = cifar_load_split(train, test, cfg->data.root, strcmp(name, "cifar10") == 0 ? 10 : 100,
                              cfg->data.train_limit, cfg->data.test_limit, err, errlen);
    } else if (strcmp(name, "synthetic") == 0) {
        int ntrain = cfg->data.train_limit > 0 ? cfg->data.train_limit : 4096;
        int ntest = cfg->data.test_limit > 0 ? cfg->data.test_limit : 1024;
        /* Shaped for the model: CIFAR-like for the CIFAR networks, MNIST-like otherwise. */
        int cifar = strcmp(cfg->model.arch, "allcnn") == 0 || strcmp(cfg->model.arch, "wrn") == 0;
        int c = cifar ? 3 : 1, hw = cifar ? 32 : 28;
        rc = synthetic_make(train, ntrain, c, hw, hw, classes, cfg->seed, 0, err, errlen);
        if (rc == 0)
            rc = synthetic_make(test, ntest, c, hw, hw, classes, cfg->seed, 1, err, errlen);
    } else {
        snprintf(err, errlen, "data.dataset: \"%s\" cannot be loaded yet", name);
        return -1;
    }
    if (rc == 0 && strcmp(cfg->data.normalize, "channel") == 0) {
        preprocess_channels(train, test);
    } else if (rc == 0 && strcmp(cfg->data.normalize, "zca") == 0) {
        /* Once per job, before the replicas start: it may use every core. */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        rc = preprocess_zca(train, test, cores > 0 ? (int)cores : 1, err, errlen);
    }
    if (rc != 0) {
        dataset_free(train);
        dataset_free(test);
    }
    return rc;
}
