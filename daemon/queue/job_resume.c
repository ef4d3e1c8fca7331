/* A failed job run again (jobs.h, job_resume; docs/protocol.md "resume"):
 * queued as a job interrupted by a restart is, so the runner resumes it
 * from its newest complete checkpoint, which a failed job keeps (jobs.c,
 * set_state). */
#include <stdio.h>
#include <string.h>

#include "checkpoint.h"
#include "jobs_store.h"
#include "job_schedule.h"

/* The newest complete checkpoint of j, as the runner will find it: 1 (in
 * *info), 0 none (why: the torn ones skipped, ';'-separated, or ""), -1
 * the directory cannot be listed (why says so). */
static int newest_checkpoint(job *j, checkpoint_info *info, char *why, size_t whylen)
{
    char root[1200];
    job_file_path(j, "ckpt", root, sizeof root);
    int found =
        checkpoint_find_latest(root, job_config_of(j)->algorithm.replicas, info, why, whylen);
    size_t n = strlen(why);
    if (n > 0 && why[n - 1] == '\n')
        why[--n] = '\0';
    for (char *nl = strchr(why, '\n'); nl; nl = strchr(nl, '\n'))
        *nl = ';';
    return found;
}

int job_resume(jobs *js, job *j, int from_scratch, const char *by, long *from_step,
               const char **code, char *err, size_t errlen)
{
    *code = ERR_BAD_STATE;
    if (job_state_of(j) != JOB_FAILED && job_state_of(j) != JOB_TIMEOUT) {
        snprintf(err, errlen, "job %s is %s: only a failed or timed-out job can be resumed",
                 job_id(j), job_state_name(job_state_of(j)));
        return -1;
    }
    checkpoint_info info = {0};
    char why[2048] = "";
    int found = from_scratch ? 0 : newest_checkpoint(j, &info, why, sizeof why);
    if (found < 0) {
        *code = ERR_INTERNAL;
        snprintf(err, errlen, "job %s: %s", job_id(j), why);
        return -1;
    }
    if (found == 0 && !from_scratch) {
        const char *id = job_id(j);
        snprintf(err, errlen, "job %s has no complete checkpoint to resume from%s%.1500s%s: "
                 "resume it with from_scratch (parlectl resume %s --from-scratch) to run it "
                 "again from step 0", id, why[0] ? " (" : "", why, why[0] ? ")" : "", id);
        return -1;
    }
    if (jobs_may_queue(js, job_owner_of(j), 1, code, err, errlen) != 0)
        return -1;
    if (job_devices_now(js, j, err, errlen) != 0) {
        *code = ERR_BAD_STATE;
        return -1;
    }
    if (!job_logging(j) && job_log_start(j, err, errlen) != 0) {
        *code = ERR_INTERNAL;
        return -1;
    }
    if (from_scratch) {
        job_remove_checkpoints(j);
        job_log(j, "resume asked by %s: queued to run again from scratch (it ended %s: %s)", by,
                job_state_name(job_state_of(j)), job_error(j));
    } else {
        job_log(j, "resume asked by %s: queued to resume from its checkpoint at outer iteration "
                "%ld (step %ld) (it ended %s: %s)", by, info.k, info.step,
                job_state_name(job_state_of(j)), job_error(j));
    }
    *from_step = found ? info.step : 0;
    job_reset_end(j); /* its age counts from now */
    /* As after a restart, its first event says where the run starts (jobs.c,
     * begin_resumed_run); but it ranks as any queued job, not as one
     * resuming a preemption or a restart (resume_first). */
    job_will_resume(j);
    sched_of(j)->resume_first = 0;
    set_state(j, JOB_QUEUED);
    jobs_schedule(js);
    return 0;
}
