/* A job's data, as its data.* fields say (docs/config.md). */
#ifndef PARLE_LOAD_H
#define PARLE_LOAD_H

#include <stddef.h>

#include "dataset.h"
#include "jobconfig.h"

/* Load the job's train and test sets. `stop` (the job's stop flag; NULL:
 * none) is looked at while loading (dataset.h): once set, the load ends
 * with -1 and DATA_STOPPED in err. */
int data_load_job(const job_config *cfg, dataset *train, dataset *test, const volatile int *stop,
                  char *err, size_t errlen);

#endif
