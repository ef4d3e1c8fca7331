/* The scheduling glue's door within the queue (job_schedule.c, job_control.c,
 * job_after.c): what the decision in daemon/sched/ needs, carrying out its
 * answer, holds, priorities, preemptions, time limits, dependencies. Its
 * fields are its part of each job (sched_of) and of the queue
 * (sched_state), and it words `waiting` for every wait but admission's. */
#ifndef PARLE_JOB_SCHEDULE_H
#define PARLE_JOB_SCHEDULE_H

#include "jobs_store.h"

/* The scheduling glue's (job_schedule.c, and job_control.c for the
 * commands on one job): the priority (the job file's, then as
 * `priority` sets it), held, and a requeue: asked (the time the job was
 * asked to checkpoint and go back into the queue, 0 if not), for whom
 * (preempted_by, "" when held) and, once back, shown "preempted" since
 * preempted_at; job_sched_status.c writes them into a status, reads them
 * back at a reload and clears `preempted` as a run starts. Other
 * writers, each setting up what the glue decides: a submit copies the job
 * file's priority (job_submit.c) and a resume ranks as a new start
 * (resume_first, job_resume.c). */
struct job_sched {
    int priority;
    int held;
    /* Who held it (a name), and whether an admin did (root, parled's
     * user, --admin-group): then only an admin releases it. */
    char held_by[64];
    int admin_hold;
    /* It ranks as resuming a checkpoint (stopped by a preemption or a
     * stop of parled; not a resumed failure or a released hold) until
     * it runs; the run it is in resumed a preemption (the minimum run
     * applies); and it was asked to stop at its time limit, to end
     * "timeout". */
    int resume_first;
    int run_resumed_preemption;
    int timing_out;
    unsigned memory_pass; /* it waits for host memory in the pass so numbered */
    int after_met;        /* its dependencies (`after`) all ended as it asks */
    unsigned long after_pending_at; /* js->after_epoch when one was found not ended */
    /* What `waiting` was last worded from: a pass that decides the same
     * does not word it again. */
    struct waiting_said {
        int wait, nblockers;
        long blockers[4]; /* their seq */
        const char *because;
        uint64_t devices;
        unsigned long after_epoch; /* a wait for a dependency: js->after_epoch then */
    } said;
    double requeue_asked_mono; /* jobs_mono_s; 0: not asked */
    char preempted_by[PROTO_ID_MAX];
    int preempted;
    double preempted_at;
};
static inline struct job_sched *sched_of(const job *j) { return job_part(j, JOB_PART_SCHED); }

/* The scheduling glue's part of the queue (job_schedule.c; queue.c closes
 * its timers at the end): the timer that
 * retries the queue while a job waits for memory, a submit's pass at
 * the loop's next turn, the one that watches requeues for
 * --preempt-grace and the one that wakes the queue at the next run's
 * time limit; whether a job waits for memory or disk in this
 * jobs_schedule call; the passes so far and their time together (on
 * the monotonic clock; read by jobs_overview.c for the metrics). */
struct jobs_sched {
    uv_timer_t memory_retry;
    int memory_retry_on;
    uv_timer_t schedule_soon;
    int memory_waits;
    uv_timer_t requeue_check;
    int requeue_check_on;
    uv_timer_t time_limit_check;
    unsigned schedule_passes; /* numbering memory waits */
    uint64_t schedule_ns;
};
static inline struct jobs_sched *sched_state(const jobs *js)
{
    return jobs_part(js, JOB_PART_SCHED);
}

/* job_schedule.c: the queue's scheduling (docs/architecture.md,
 * "Scheduling"). jobs_schedule (jobs_client.h) starts what may run now,
 * asks lower-priority jobs to make room, and says in each queued job's
 * status why it waits, looking again every few seconds while one waits
 * for memory. */
void jobs_schedule_init(jobs *js);
/* jobs_schedule at the loop's next turn (a submit's: the reply does not
 * wait for the pass, and submits read together share one), or before the
 * next request other than a submit (jobs_schedule_pending). */
void jobs_schedule_soon(jobs *js);

/* Ask running job j to checkpoint at its next step boundary and stop, to go
 * back into the queue (for `by`'s sake, or held when by is NULL). */
void job_ask_requeue(job *j, const job *by);

/* job_control.c: a job asked to go back into the queue stopped at its checkpoint: queued
 * again, to resume from it ("preempted", or "held"); or, stopped at its
 * time limit, ended "timeout". */
void job_requeued(job *j);
/* A job asked to stop at its time limit stopped at its checkpoint: ended
 * "timeout", resumable (job_resume). */
void job_timed_out(job *j);

/* job_sched_status.c: the store's hooks for the glue's fields of a job.
 * job_status_sched writes them into a status (priority, held, held_by,
 * admin_hold, resuming, owner_usage_s, eligible_s, eligible_as_of,
 * preempted_by, preempted_at), job_restore_sched reads them back from a
 * reloaded status.json that had `state`. A queued job is shown "held" or
 * "preempted" (job_queued_shown_as; NULL: "queued"), and job_queued_word
 * says whether a status.json's state is one of those. job_run_starting: a
 * run starts (it is no longer shown preempted); job_requeued_at_reload: a
 * reloaded job that had not ended ranks as resuming if it was running or
 * preempted. */
void job_status_sched(const job *j, cJSON *o);
void job_restore_sched(job *j, const cJSON *st, const char *state);
const char *job_queued_shown_as(const job *j);
int job_queued_word(const char *state);
void job_run_starting(job *j);
void job_requeued_at_reload(job *j, int was_running);

/* job_after.c: a queued job's dependencies (`after`). job_after_check: 0
 * they allow it to start, 1 one has not ended (why names it), -1 one ended
 * so that it never will (why says which and how). job_after_valid at
 * submit: 0, or -1 with a message naming an id that is not there. */
int job_after_check(jobs *js, const job *j, char *why, size_t whylen);
int job_after_valid(jobs *js, const job_config *cfg, char *err, size_t errlen);

#endif
