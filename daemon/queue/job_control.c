/* The commands on one queued or running job (jobs.h: job_set_priority,
 * job_set_hold, job_cancel, job_priority_allowed) and what a job asked to go
 * back into the queue becomes once it stopped (job_schedule.h: job_requeued,
 * job_timed_out). On the loop thread; each change is logged, persisted and
 * followed by a scheduling pass (job_schedule.c), which never calls here. */
#include <stdio.h>

#include "jobs_store.h"
#include "job_schedule.h"

/* ---- what a job asked to go back into the queue becomes ---- */

void job_requeued(job *j)
{
    sched_of(j)->requeue_asked_mono = 0;
    job_will_resume(j); /* from the checkpoint it just took */
    if (sched_of(j)->preempted_by[0] && !sched_of(j)->held) {
        sched_of(j)->preempted = 1;
        sched_of(j)->preempted_at = jobs_now_s();
        sched_of(j)->resume_first = 1; /* not a hold: released, it ranks as any queued job */
    }
    job_log(j, "%s at epoch %.6g, step %ld: back in the queue; it resumes from its newest "
            "complete checkpoint", sched_of(j)->held ? "held" : "preempted", job_last(j)->epoch,
            job_last(j)->step);
    set_state(j, JOB_QUEUED);
}

void job_timed_out(job *j)
{
    sched_of(j)->timing_out = 0;
    sched_of(j)->requeue_asked_mono = 0;
    const run_event *last = job_last(j);
    job_set_error(j, "time limit of %.0f s reached at epoch %.6g, step %ld: it resumes from its "
                  "checkpoint with parlectl resume %s", job_time_limit(jobs_of(j), j), last->epoch,
                  last->step, job_id(j));
    job_log(j, "timeout: %s", job_error(j));
    set_state(j, JOB_TIMEOUT);
}

/* ---- priorities, holds and cancels ---- */

int job_set_priority(jobs *js, job *j, int priority, int privileged, const char **code,
                     char *err, size_t errlen)
{
    if (job_state_final(job_state_of(j))) {
        *code = ERR_BAD_STATE;
        snprintf(err, errlen, "job %s has ended (%s)", job_id(j), job_state_name(job_state_of(j)));
        return -1;
    }
    if (priority < JOB_PRIORITY_MIN || priority > JOB_PRIORITY_MAX) {
        *code = ERR_BAD_REQUEST;
        snprintf(err, errlen, "priority: must be an integer in %d..%d", JOB_PRIORITY_MIN,
                 JOB_PRIORITY_MAX);
        return -1;
    }
    if (!privileged && priority > sched_of(j)->priority) {
        *code = ERR_FORBIDDEN;
        snprintf(err, errlen,
                 "job %s has priority %d: only root, parled's user and its "
                 "--admin-group may raise a priority (you may lower it)",
                 job_id(j), sched_of(j)->priority);
        return -1;
    }
    job_log(j, "priority %d -> %d", sched_of(j)->priority, priority);
    sched_of(j)->priority = priority;
    write_status(j);
    jobs_schedule(js);
    return 0;
}

int job_set_hold(jobs *js, job *j, int hold, const job_owner *by, const char **code, char *err,
                 size_t errlen)
{
    *code = ERR_BAD_STATE;
    if (job_state_final(job_state_of(j))) {
        snprintf(err, errlen, "job %s has ended (%s)", job_id(j), job_state_name(job_state_of(j)));
        return -1;
    }
    /* An admin may make its owner's hold an admin hold. */
    const int admin_over_owner =
        hold && sched_of(j)->held && !sched_of(j)->admin_hold && by->privileged;
    if (hold == sched_of(j)->held && !admin_over_owner) {
        snprintf(err, errlen, "job %s is %s", job_id(j), hold ? "held already" : "not held");
        return -1;
    }
    if (!hold && sched_of(j)->admin_hold && !by->privileged) {
        *code = ERR_FORBIDDEN;
        snprintf(err, errlen, "job %s is held by an admin (%s): only root, parled's user and its "
                 "--admin-group may release it", job_id(j), sched_of(j)->held_by);
        return -1;
    }
    if (hold && !sched_of(j)->held && job_thread_running(j) &&
        (job_stop_asked(j) || job_cancel_requested(j))) {
        snprintf(err, errlen, "job %s is stopping already", job_id(j));
        return -1;
    }
    const int was_held = sched_of(j)->held;
    sched_of(j)->held = hold;
    sched_of(j)->admin_hold = hold && by->privileged;
    snprintf(sched_of(j)->held_by, sizeof sched_of(j)->held_by, "%s", hold ? by->user : "");
    if (hold && !was_held && job_thread_running(j)) {
        sched_of(j)->preempted_by[0] = '\0';
        job_ask_requeue(j, NULL);
    } else {
        const int admin = sched_of(j)->admin_hold;
        job_log(j, "%s by %s", hold ? (admin ? "held by an admin: only an admin releases it; it "
                                               "keeps its place but does not start"
                                             : "held: it keeps its place but does not start")
                                    : "released", by->user);
    }
    write_status(j);
    jobs_schedule(js);
    return 0;
}

int job_priority_allowed(const job *j, const job_owner *owner, const char **code, char *err,
                         size_t errlen)
{
    if (sched_of(j)->priority <= 0 || owner->privileged)
        return 0;
    *code = ERR_FORBIDDEN;
    snprintf(err, errlen, "priority: %d is above 0: only root, parled's user and its "
             "--admin-group may give a job a higher priority than the default (0); lower ones "
             "are anyone's", sched_of(j)->priority);
    return -1;
}

int job_cancel(jobs *js, job *j, char *err, size_t errlen)
{
    if (job_state_final(job_state_of(j)) || job_cancel_requested(j)) {
        snprintf(err, errlen, "job %s has already %s", job_id(j),
                 job_cancel_requested(j) ? "been asked to stop" : "ended");
        return -1;
    }
    if (job_state_of(j) == JOB_QUEUED) {
        job_log(j, "cancelled while queued");
        set_state(j, JOB_CANCELLED);
        job_log_stop(j);
        jobs_tell_end(js, j);
        jobs_schedule(js);
        return 0;
    }
    job_request_cancel(j);
    job_log(j, "cancel requested: the replicas stop now");
    return 0;
}
