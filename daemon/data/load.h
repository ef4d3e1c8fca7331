/* A job's data, as its data.* fields say (docs/config.md). */
#ifndef PARLE_LOAD_H
#define PARLE_LOAD_H

#include <stddef.h>

#include "dataset.h"
#include "jobconfig.h"

/* What a job's data will take once loaded, as its files say before any of
 * it is allocated: IDX headers, CIFAR file sizes (a file's header can claim
 * a million images of a sparse file), or a synthetic set's fields. */
typedef struct data_claim {
    long ntrain, ntest;       /* examples to load: each set's count within its limit */
    int c, h, w, classes;
    long claimed;             /* examples the larger set's files claim, limits aside */
    char source[4200];        /* what claims them: "PATH's header", "PATH's size"... */
} data_claim;

/* Asked by a loader once it has read every header of the job's files (from
 * the descriptors it then reads the data from) and before it allocates
 * anything: 0 to load, or -1 with why to refuse. */
typedef int (*data_admit_fn)(void *user, const data_claim *claim, char *err, size_t errlen);

/* For the calling thread, as data_files_as: ask `admit` (NULL: nothing is
 * asked) before every load. */
void data_admit_with(data_admit_fn admit, void *user);

/* The loaders' call: the thread's admit's answer (0 if none is set). */
int data_admit(const data_claim *claim, char *err, size_t errlen);

/* The claim of a job whose files are those its dataset ships with (the
 * shape and usual sizes of its row in dataset_table.h: 60,000 and 10,000
 * MNIST images, 50,000 and 10,000 CIFAR images) or of its synthetic set,
 * within its limits: what admission counts before the files can be read.
 * -1 with why for a dataset the table does not name. */
int data_claim_default(const job_config *cfg, data_claim *out, char *err, size_t errlen);

/* Load the job's train and test sets. `stop` (the job's stop flag; NULL:
 * none) is looked at while loading (dataset.h): once set, the load ends
 * with -1 and DATA_STOPPED in err. */
int data_load_job(const job_config *cfg, dataset *train, dataset *test, const volatile int *stop,
                  char *err, size_t errlen);

#endif
