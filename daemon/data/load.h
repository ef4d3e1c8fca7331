/* A job's data, as its data.* fields say (docs/config.md): the loaders
 * (idx.c, cifar.c, synthetic.c) picked and their sets preprocessed. */
#ifndef PARLE_LOAD_H
#define PARLE_LOAD_H

#include <stddef.h>

#include "admit.h"
#include "dataset.h"
#include "jobconfig.h"

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
