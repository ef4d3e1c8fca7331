/* Admission by memory on the loop thread (docs/architecture.md): a job's
 * estimate (job_memory.h) against what its devices have, in all at submit
 * and free now when its devices are: a job that can never fit is refused,
 * one that does not fit now waits in the queue, saying why. */
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "jobs_store.h"
#include "job_admission.h"
#include "mpi_node.h"

/* The estimate, made once: 1 if known, -1 if not (the job is not held back
 * then; its run reports what goes wrong). Under MPI the replicas spread over
 * ranks, which the estimate does not place: not checked there. */
/* The job's GPUs into gpus (JOB_MEMORY_GPUS at most); how many. */
static int gpus_of(const job *j, int *gpus)
{
    int ngpus = 0;
    for (int i = 0; i < DEV_MAX_GPUS && ngpus < JOB_MEMORY_GPUS; i++)
        if (job_device_mask(j) & (1ull << i))
            gpus[ngpus++] = i;
    return ngpus;
}

static int estimate(job *j)
{
    if (admit_of(j)->need_known)
        return admit_of(j)->need_known;
    int gpus[JOB_MEMORY_GPUS], ngpus = gpus_of(j, gpus);
    char err[512];
    admit_of(j)->need_known = -1;
    if (mpi_node_size() > 1)
        return -1;
    const job_config *cfg = job_config_of(j);
    if (job_memory_estimate(cfg, gpus, ngpus, &admit_of(j)->need, err, sizeof err) != 0) {
        if (job_logging(j))
            job_log(j, "no memory estimate (not held back for memory): %s", err);
        return -1;
    }
    return admit_of(j)->need_known = 1;
}

/* Whether `m` takes no more anywhere than the job was admitted with. */
static int within_admitted(const job *j, const job_memory *m)
{
    if (admit_of(j)->need_known != 1 || m->host > admit_of(j)->need.host ||
        m->ngpus != admit_of(j)->need.ngpus)
        return 0;
    for (int g = 0; g < m->ngpus; g++)
        if (m->gpu[g] > admit_of(j)->need.gpu[g])
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
    if (mpi_node_size() > 1 || job_memory_estimate_claimed(job_config_of(j), claim, gpus, ngpus, &m,
                                                           unplanned, sizeof unplanned) != 0) {
        memset(&m, 0, sizeof m);
        m.data = m.host = job_memory_data_bytes(job_config_of(j), claim);
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
    for (const job *j = jobs_running_next(js, NULL); j; j = jobs_running_next(js, j)) {
        if (!job_thread_running(j) || admit_of(j)->need_known != 1 || job_memory_reported(j))
            continue;
        held->host += admit_of(j)->need.host;
        for (int g = 0; g < admit_of(j)->need.ngpus; g++)
            if (admit_of(j)->need.gpus[g] >= 0 && admit_of(j)->need.gpus[g] < JOB_MEMORY_GPUS)
                held->gpu[admit_of(j)->need.gpus[g]] += admit_of(j)->need.gpu[g];
    }
}

int job_admit(job *j, char *err, size_t errlen)
{
    char why[JOB_WAITING_MAX], need[32], total[32];
    uint64_t free_b, total_b;
    if (estimate(j) != 1)
        return 0;
    if (!job_memory_fits(&admit_of(j)->need, 0, NULL, why, sizeof why)) {
        snprintf(err, errlen, "memory: %s", why);
        return -1;
    }
    if (jobs_state_space(jobs_of(j), &free_b, &total_b) == 0 && admit_of(j)->need.disk > total_b) {
        job_memory_bytes_text(admit_of(j)->need.disk, need, sizeof need);
        job_memory_bytes_text(total_b, total, sizeof total);
        snprintf(err, errlen, "disk: the job writes up to %s (its checkpoints, master and "
                 "metrics), more than the %s the state dir's file system (%.700s) holds", need,
                 total, jobs_dir_of(jobs_of(j)));
        return -1;
    }
    return 0;
}

int jobs_state_space(const jobs *js, uint64_t *free_bytes, uint64_t *total_bytes)
{
    struct statvfs st;
    if (statvfs(jobs_dir_of(js), &st) != 0)
        return -1;
    *free_bytes = (uint64_t)st.f_bavail * st.f_frsize;
    *total_bytes = (uint64_t)st.f_blocks * st.f_frsize;
    return 0;
}

uint64_t job_disk_to_write(const job *j)
{
    const uint64_t need = admit_of(j)->need.disk, has = job_disk_bytes(j);
    return need > has ? need - has : 0;
}

/* What running jobs are yet to write. */
static uint64_t disk_held_by_running(const jobs *js, const job *except)
{
    uint64_t held = 0;
    for (const job *j = jobs_running_next(js, NULL); j; j = jobs_running_next(js, j))
        if (j != except && job_thread_running(j) && admit_of(j)->need_known == 1)
            held += job_disk_to_write(j);
    return held;
}

int job_waits_for_disk(jobs *js, job *j, uint64_t freed)
{
    uint64_t free_b, total_b;
    if (estimate(j) != 1 || jobs_state_space(js, &free_b, &total_b) != 0)
        return 0;
    uint64_t held = disk_held_by_running(js, j);
    uint64_t has = (free_b > held ? free_b - held : 0) + freed;
    /* A queued job that ran before already holds part of what it writes. */
    uint64_t need = job_disk_to_write(j);
    if (need <= has) {
        if (admit_of(j)->disk_short)
            job_log(j, "the state dir has room for it again");
        admit_of(j)->disk_short = 0;
        return 0;
    }
    char need_t[32], ckpt_t[32], free_t[32], held_t[32];
    job_memory_bytes_text(need, need_t, sizeof need_t);
    job_memory_bytes_text(admit_of(j)->need.checkpoint, ckpt_t, sizeof ckpt_t);
    job_memory_bytes_text(free_b, free_t, sizeof free_t);
    job_memory_bytes_text(held, held_t, sizeof held_t);
    const job_config *cfg = job_config_of(j);
    job_set_waiting(j, "disk: the job writes up to %s (%d checkpoints of %s, its master and "
                    "metrics) to %.700s, which has %s free, %s of it for running jobs' files",
                    need_t, cfg->checkpoint.every_epochs > 0 ? cfg->checkpoint.keep + 1 : 0,
                    ckpt_t, jobs_dir_of(js), free_t, held_t);
    /* Logged and persisted once per wait: the figures change at every retry. */
    if (!admit_of(j)->disk_short) {
        admit_of(j)->disk_short = 1;
        job_log(j, "waiting for %s", job_waiting(j));
        write_status(j);
    }
    return 1;
}

/* Whether estimate m of job j fits in what is free now, with `freed` host
 * bytes more: 0, or 1 with the job's wait saying why (logged and persisted once
 * per wait: the figures change at every retry). */
static int memory_short(jobs *js, job *j, const job_memory *m, size_t freed)
{
    char why[JOB_WAITING_MAX - 96], freed_t[32];
    memory_held held;
    held_by_starting(js, &held);
    job_memory less = *m;
    less.host = m->host > freed ? m->host - freed : 0;
    if (job_memory_fits(&less, 1, &held, why, sizeof why)) {
        job_set_waiting(j, "%s", "");
        return 0;
    }
    /* It may have waited for devices before. */
    const int newly = strncmp(job_waiting(j), "memory:", 7) != 0;
    if (freed) { /* the figures as they are, and what the preemptions would add */
        job_memory_fits(m, 1, &held, why, sizeof why);
        job_memory_bytes_text(freed, freed_t, sizeof freed_t);
        job_set_waiting(j, "memory: %s, and the jobs it would preempt hold %s", why, freed_t);
    } else {
        job_set_waiting(j, "memory: %s", why);
    }
    if (newly) {
        job_log(j, "waiting for %s", job_waiting(j));
        write_status(j);
    }
    return 1;
}

int job_waits_for_memory(jobs *js, job *j)
{
    if (estimate(j) != 1) {
        job_set_waiting(j, "%s", "");
        return 0;
    }
    return memory_short(js, j, &admit_of(j)->need, 0);
}

int job_waits_for_memory_preempting(jobs *js, job *j, size_t freed)
{
    if (estimate(j) != 1)
        return 0;
    job_memory host = admit_of(j)->need;
    host.ngpus = 0;
    return memory_short(js, j, &host, freed);
}
