/* Admission by memory (docs/architecture.md): what a job will hold on each
 * of its devices, sized from its file before anything runs, and what the
 * machine has. An estimate, not a bound: see the docs for what it leaves
 * out. */
#ifndef PARLE_JOB_MEMORY_H
#define PARLE_JOB_MEMORY_H

#include <stddef.h>

#include "jobconfig.h"
#include "load.h"

#define JOB_MEMORY_GPUS 63

typedef struct job_memory {
    int replicas;
    /* In each replica's device memory. */
    size_t model;           /* its training model (model_build at optim.batch) */
    size_t rule, rule0;     /* its rule's vectors; replica 0's (EASGD's centre) */
    size_t eval;            /* the master's evaluation model, beside replica 0 */
    /* In host memory, once per job. */
    size_t data;            /* train and test sets (floats, labels), ZCA's fit */
    size_t batches;         /* the replicas' loader buffers and samplers, the master's copy */
    /* Summed where they live: the host (everything, for a CPU job; data and
     * batches beside GPUs) and each of the job's GPUs. */
    size_t host;
    /* On the state dir's disk: the most the job's folder holds at once,
     * its checkpoints (checkpoint.keep and the one being written), its
     * master, metrics and log (job_memory_disk). */
    size_t checkpoint, disk;
    int ngpus;
    int gpus[JOB_MEMORY_GPUS];
    size_t gpu[JOB_MEMORY_GPUS];
} job_memory;

/* The estimate for `cfg` with its replicas round-robin on `gpus` (ngpus 0:
 * the CPU), its data as its dataset usually is (data_claim_default). 0, or
 * -1 with a message (a model that does not build, a dataset not in
 * data/dataset_table.h). */
int job_memory_estimate(const job_config *cfg, const int *gpus, int ngpus, job_memory *m,
                        char *err, size_t errlen);

/* The same for the data `claim` says the job's files hold (load.h), as a
 * loader asks before allocating: their counts and image sizes, not the
 * dataset's usual ones. */
int job_memory_estimate_claimed(const job_config *cfg, const data_claim *claim, const int *gpus,
                                int ngpus, job_memory *m, char *err, size_t errlen);

/* Host bytes of the data alone (job_memory.data) as `claim` says. */
size_t job_memory_data_bytes(const job_config *cfg, const data_claim *claim);

/* MemTotal and MemAvailable of /proc/meminfo, in bytes. The environment's
 * PARLE_MEMINFO names another file in that format instead: a test hook
 * (tests/integration/admission.sh), read at every call. 0, or -1 if the
 * file cannot be read or lacks either line. */
int job_memory_host(size_t *total, size_t *available);

/* Memory that jobs already starting are yet to take (the machine does not
 * show it until they have built their replicas): on the host, and on each
 * GPU by its id. */
typedef struct memory_held {
    size_t host;
    size_t gpu[JOB_MEMORY_GPUS];
} memory_held;

/* Does the job fit in what each of its devices has in all (now 0:
 * MemTotal, a GPU's memory) or free now (now 1: MemAvailable, a GPU's free
 * memory, each less what `held` says other jobs are yet to take; NULL:
 * nothing)? 1, or 0 with `why` naming the device, what the job needs there
 * (and of what) and what it has. A figure the machine does not tell counts
 * as fitting. */
int job_memory_fits(const job_memory *m, int now, const memory_held *held, char *why,
                    size_t whylen);

/* bytes as "1.50 GiB", "12.3 MiB", "512 KiB". */
void job_memory_bytes_text(size_t bytes, char *out, size_t len);

#endif
