/* Admission by memory on the loop thread (docs/architecture.md): a job's
 * estimate (job_memory.h) against what its devices have, in all at submit
 * and free now when its devices are: a job that can never fit is refused,
 * one that does not fit now waits in the queue, saying why. */
#include <stdio.h>
#include <string.h>

#include "jobs_impl.h"
#include "mpi_node.h"

/* The estimate, made once: 1 if known, -1 if not (the job is not held back
 * then; its run reports what goes wrong). Under MPI the replicas spread over
 * ranks, which the estimate does not place: not checked there. */
/* The job's GPUs into gpus (JOB_MEMORY_GPUS at most); how many. */
static int gpus_of(const job *j, int *gpus)
{
    int ngpus = 0;
    for (int i = 0; i < DEV_MAX_GPUS && ngpus < JOB_MEMORY_GPUS; i++)
        if (j->devices & (1ull << i))
            gpus[ngpus++] = i;
    return ngpus;
}

static int estimate(job *j)
{
    if (j->need_known)
        return j->need_known;
    int gpus[JOB_MEMORY_GPUS], ngpus = gpus_of(j, gpus);
    char err[512];
    j->need_known = -1;
    if (mpi_node_size() > 1)
        return -1;
    if (job_memory_estimate(&j->cfg, gpus, ngpus, &j->need, err, sizeof err) != 0) {
        if (j->log)
            job_log(j, "no memory estimate (not held back for memory): %s", err);
        return -1;
    }
    return j->need_known = 1;
}

/* Whether `m` takes no more anywhere than the job was admitted with. */
static int within_admitted(const job *j, const job_memory *m)
{
    if (j->need_known != 1 || m->host > j->need.host || m->ngpus != j->need.ngpus)
        return 0;
    for (int g = 0; g < m->ngpus; g++)
        if (m->gpu[g] > j->need.gpu[g])
            return 0;
    return 1;
}

int job_admit_data(void *user, const data_claim *claim, char *err, size_t errlen)
{
    const job *j = user;
    int gpus[JOB_MEMORY_GPUS], ngpus = gpus_of(j, gpus);
    job_memory m;
    char why[768], unplanned[256];
    /* Under MPI, or for a model that does not plan at the claimed size,
     * the data alone is counted: this rank loads it whole. */
    if (mpi_node_size() > 1 || job_memory_estimate_claimed(&j->cfg, claim, gpus, ngpus, &m,
                                                           unplanned, sizeof unplanned) != 0) {
        memset(&m, 0, sizeof m);
        m.data = m.host = job_memory_data_bytes(&j->cfg, claim);
    }
    if (within_admitted(j, &m) || job_memory_fits(&m, 1, NULL, why, sizeof why))
        return 0;
    snprintf(err, errlen, "memory: %s claims %ld examples of %dx%dx%d (%ld training and %ld test "
             "examples to load): the job %s", claim->source, claim->claimed, claim->c, claim->h,
             claim->w, claim->ntrain, claim->ntest, why);
    return -1;
}

/* Memory that running jobs are yet to take: MemAvailable and a GPU's free
 * memory do not show it until they have loaded their data and built their
 * replicas (the first progress event reports their memory). On a GPU it
 * matters where jobs share one (gpu_share). */
static void held_by_starting(const jobs *js, memory_held *held)
{
    memset(held, 0, sizeof *held);
    for (const job *j = js->first; j; j = j->next) {
        if (!j->thread_running || j->need_known != 1 || j->memory_reported)
            continue;
        held->host += j->need.host;
        for (int g = 0; g < j->need.ngpus; g++)
            if (j->need.gpus[g] >= 0 && j->need.gpus[g] < JOB_MEMORY_GPUS)
                held->gpu[j->need.gpus[g]] += j->need.gpu[g];
    }
}

int job_admit(job *j, char *err, size_t errlen)
{
    char why[sizeof j->waiting];
    if (estimate(j) != 1 || job_memory_fits(&j->need, 0, NULL, why, sizeof why))
        return 0;
    snprintf(err, errlen, "memory: %s", why);
    return -1;
}

int job_waits_for_memory(jobs *js, job *j)
{
    char why[sizeof j->waiting - 16];
    memory_held held;
    held_by_starting(js, &held);
    if (estimate(j) != 1 || job_memory_fits(&j->need, 1, &held, why, sizeof why)) {
        j->waiting[0] = '\0';
        return 0;
    }
    int newly = strncmp(j->waiting, "memory:", 7) != 0; /* it may have waited for devices */
    snprintf(j->waiting, sizeof j->waiting, "memory: %s", why);
    /* Logged and persisted once per wait: the figures change at every retry. */
    if (newly) {
        job_log(j, "waiting for %s", j->waiting);
        write_status(j);
    }
    return 1;
}
