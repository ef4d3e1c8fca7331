/* A job's data, loaded as its data.* fields say. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cifar.h"
#include "dataset_table.h"
#include "fault.h"
#include "preprocess.h"
#include "load.h"

#define FAULT_LOAD_POLL_US 10000

/* Loads with a stop flag so far in this process: PARLE_FAULT_REPLICA's load
 * phase picks one (several jobs may load at once). */
static long stoppable_loads;

/* PARLE_FAULT_REPLICA's load phase (fault.h): hold the chosen load until a
 * stop is asked, so that tests can stop a job while it loads. */
static int fault_hold(const volatile int *stop, char *err, size_t errlen)
{
    fault_point fp;
    if (fault_parse(getenv("PARLE_FAULT_REPLICA"), &fp, err, errlen) != 0)
        return -1;
    if (!stop)
        return 0;
    long k = __atomic_add_fetch(&stoppable_loads, 1, __ATOMIC_RELAXED);
    if (!fault_strikes(&fp, 0, FAULT_LOAD, k, 0))
        return 0;
    while (!data_stop_asked(stop))
        usleep(FAULT_LOAD_POLL_US);
    return data_check_stop(stop, err, errlen);
}

static long limited(int limit, long all) { return limit > 0 && limit < all ? limit : all; }

/* A synthetic set's examples: shaped as CIFAR's for the CIFAR networks, as
 * MNIST's otherwise, with model.classes classes when it is set. */
static void synthetic_shape(const job_config *cfg, data_claim *c)
{
    int cifar = !strcmp(cfg->model.arch, "allcnn") || !strcmp(cfg->model.arch, "wrn");
    c->c = cifar ? 3 : 1;
    c->h = c->w = cifar ? 32 : 28;
    if (cfg->model.classes > 0)
        c->classes = cfg->model.classes;
}

/* The job's row of the table, or NULL with why. */
static const dataset_kind *job_dataset(const job_config *cfg, char *err, size_t errlen)
{
    const dataset_kind *k = dataset_kind_find(cfg->data.dataset);
    if (!k)
        snprintf(err, errlen, "data.dataset: no dataset \"%s\"", cfg->data.dataset);
    return k;
}

int data_claim_default(const job_config *cfg, data_claim *out, char *err, size_t errlen)
{
    const dataset_kind *k = job_dataset(cfg, err, errlen);
    if (!k)
        return -1;
    data_claim c = {.ntrain = k->ntrain, .ntest = k->ntest, .c = k->c, .h = k->h, .w = k->w,
                    .classes = k->classes};
    if (k->format == DATASET_SYNTHETIC) {
        /* Generated: as many examples as the limits say. */
        synthetic_shape(cfg, &c);
        if (cfg->data.train_limit > 0)
            c.ntrain = cfg->data.train_limit;
        if (cfg->data.test_limit > 0)
            c.ntest = cfg->data.test_limit;
    }
    c.ntrain = limited(cfg->data.train_limit, c.ntrain);
    c.ntest = limited(cfg->data.test_limit, c.ntest);
    c.claimed = c.ntrain > c.ntest ? c.ntrain : c.ntest;
    snprintf(c.source, sizeof c.source, "data.dataset \"%s\"", k->name);
    *out = c;
    return 0;
}

/* A synthetic set as data.train_limit and data.test_limit ask. */
static int make_synthetic(const job_config *cfg, dataset *train, dataset *test,
                          const volatile int *stop, char *err, size_t errlen)
{
    data_claim c;
    if (data_claim_default(cfg, &c, err, errlen) != 0)
        return -1;
    if (cfg->data.train_limit > 0 || cfg->data.test_limit > 0)
        snprintf(c.source, sizeof c.source, "%s",
                 c.ntrain >= c.ntest ? "data.train_limit" : "data.test_limit");
    if (data_admit(&c, err, errlen) != 0 ||
        synthetic_make(train, (int)c.ntrain, c.c, c.h, c.w, c.classes, cfg->seed, 0, stop, err,
                       errlen) != 0)
        return -1;
    return synthetic_make(test, (int)c.ntest, c.c, c.h, c.w, c.classes, cfg->seed, 1, stop, err,
                          errlen);
}

/* The sets by their row's format (dataset_table.h). */
static int load_sets(const job_config *cfg, dataset *train, dataset *test,
                     const volatile int *stop, char *err, size_t errlen)
{
    const dataset_kind *k = job_dataset(cfg, err, errlen);
    if (!k)
        return -1;
    switch (k->format) {
    case DATASET_IDX:
        return idx_load_split(train, test, cfg->data.root, cfg->data.train_limit,
                              cfg->data.test_limit, stop, err, errlen);
    case DATASET_CIFAR:
        return cifar_load_split(train, test, cfg->data.root, k->classes, cfg->data.train_limit,
                                cfg->data.test_limit, stop, err, errlen);
    case DATASET_SYNTHETIC:
        return make_synthetic(cfg, train, test, stop, err, errlen);
    }
    snprintf(err, errlen, "data.dataset: \"%s\" has no loader", k->name);
    return -1;
}

int data_load_job(const job_config *cfg, dataset *train, dataset *test, const volatile int *stop,
                  char *err, size_t errlen)
{
    memset(train, 0, sizeof(*train));
    memset(test, 0, sizeof(*test));
    int rc = fault_hold(stop, err, errlen);
    if (rc == 0)
        rc = load_sets(cfg, train, test, stop, err, errlen);
    if (rc == 0 && strcmp(cfg->data.normalize, "channel") == 0) {
        preprocess_channels(train, test);
    } else if (rc == 0 && strcmp(cfg->data.normalize, "zca") == 0) {
        /* Once per job, before the replicas start: it may use every core. */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        rc = preprocess_zca(train, test, cores > 0 ? (int)cores : 1, stop, err, errlen);
    }
    if (rc != 0) {
        dataset_free(train);
        dataset_free(test);
    }
    return rc;
}
