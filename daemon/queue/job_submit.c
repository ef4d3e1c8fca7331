/* A submission (jobs_client.h): whether the owner may queue more, and a job
 * checked against the daemon, admission and the scheduling glue
 * (job_prepare); the store's job_commit then gives it its id, files and
 * place. jobs_submit is the two for one job, a sweep (daemon/sweep/) the two
 * for each of its jobs, all checked first. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsutil.h"
#include "jobfile.h"
#include "jobs_store.h"
#include "job_admission.h"
#include "job_schedule.h"
#include "schedule.h"

/* Queued and running jobs of uid. */
static int active_jobs_of(const jobs *js, unsigned uid)
{
    int n = jobs_owner_active(js, uid);
    if (n >= 0)
        return n;
    n = 0;
    for (const job *j = jobs_active_next(js, NULL); j; j = jobs_active_next(js, j))
        n += job_owner_of(j)->uid == uid && !job_state_final(job_state_of(j));
    return n;
}

int jobs_may_queue(jobs *js, const job_owner *owner, int njobs, const char **code, char *err,
                   size_t errlen)
{
    if (jobs_stopping(js) && !jobs_restarting(js)) {
        *code = ERR_SHUTTING_DOWN;
        snprintf(err, errlen, "parled is shutting down");
        return -1;
    }
    /* The jobs of uid's sweeps being submitted that are not queued yet count
     * too (the store's client, the sweeps, says how many). */
    const jobs_client *c = jobs_client_of(js);
    const int bound = jobs_limits_of(js)->jobs_per_user;
    int active = active_jobs_of(js, owner->uid) + c->promised(c->self, owner->uid);
    if (bound > 0 && active + njobs > bound) {
        *code = ERR_LIMIT;
        if (njobs == 1)
            snprintf(err, errlen, "%s (uid %u) has %d jobs queued or running, parled's "
                     "--max-jobs-per-user", owner->user, owner->uid, bound);
        else
            snprintf(err, errlen, "%s (uid %u) has %d jobs queued or running: a sweep of %d jobs "
                     "would pass parled's --max-jobs-per-user %d", owner->user, owner->uid, active,
                     njobs, bound);
        return -1;
    }
    return 0;
}

/* Within parled's bounds: its time limit (--max-time-limit) and its devices
 * alone within a user's quota (else it never starts): 0, or -1 with a message. */
static int job_limits_allowed(const jobs *js, const job *j, char *err, size_t errlen)
{
    const jobs_limits *l = jobs_limits_of(js);
    const double limit = job_time_limit(js, j);
    const job_config *cfg = job_config_of(j);
    const int gpus = cfg->device_spec.count ? cfg->device_spec.count
                                            : __builtin_popcountll(job_device_mask(j) & ~DEV_CPU);
    const int cores = job_cores_wanted(js, j);
    if (l->max_time_limit_s > 0 && (limit <= 0 || limit > l->max_time_limit_s))
        snprintf(err, errlen, "time_limit: %s%.0f s is above parled's --max-time-limit (%.0f s)",
                 limit <= 0 ? "none (unbounded) " : "", limit, l->max_time_limit_s);
    else if (l->gpus_per_user > 0 && (long)gpus * sched_share_milli(cfg->gpu_share) >
                                         (long)l->gpus_per_user * SCHED_WHOLE)
        snprintf(err, errlen, "devices: %d GPU(s) are above parled's --max-gpus-per-user (%d): "
                 "the job would never start", gpus, l->gpus_per_user);
    else if (l->cores_per_user > 0 && cores > l->cores_per_user)
        snprintf(err, errlen, "devices: %d cores are above parled's --max-cores-per-user (%d): "
                 "the job would never start", cores, l->cores_per_user);
    else
        return 0;
    return -1;
}

/* Its gpu_share at least parled's --min-gpu-share (whatever its devices, so
 * that the refusal names the share): 0, or -1 with a message. */
static int job_share_allowed(const jobs *js, const job *j, char *err, size_t errlen)
{
    const double floor = jobs_limits_of(js)->min_gpu_share, share = job_config_of(j)->gpu_share;
    if (floor <= 0 || sched_share_milli(share) >= sched_share_milli(floor))
        return 0;
    snprintf(err, errlen, "gpu_share: %g is below parled's --min-gpu-share (%g): a share is not "
             "enforced on the device (a job uses as much of its GPUs' compute as it can), so "
             "parled takes none smaller", share, floor);
    return -1;
}

job *job_prepare(jobs *js, const cJSON *job_json, const char **code, char *err, size_t errlen)
{
    job *j = job_new(js);
    *code = ERR_INVALID_JOB;
    if (!j) {
        *code = ERR_INTERNAL;
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (job_read_config(j, job_json, err, errlen) != 0 ||
        job_share_allowed(js, j, err, errlen) != 0 || job_devices_now(js, j, err, errlen) != 0)
        goto fail;
    if (job_admit(j, err, errlen) != 0 || job_limits_allowed(js, j, err, errlen) != 0 ||
        job_after_valid(js, job_config_of(j), err, errlen) != 0)
        goto fail;
    sched_of(j)->priority = job_config_of(j)->priority;
    return j;
fail:
    free(j);
    return NULL;
}

job *jobs_submit(jobs *js, const cJSON *job_json, const job_owner *owner, const char **code,
                 char *err, size_t errlen)
{
    if (jobs_may_queue(js, owner, 1, code, err, errlen) != 0)
        return NULL;
    job *j = job_prepare(js, job_json, code, err, errlen);
    if (j && job_priority_allowed(j, owner, code, err, errlen) != 0) {
        free(j);
        return NULL;
    }
    *code = j ? ERR_INTERNAL : *code;
    if (!j || job_commit(js, j, job_json, owner, err, errlen) != 0)
        return NULL;
    jobs_schedule_soon(js);
    return j;
}
