/* The scheduling glue's door within the queue (job_schedule.c, job_control.c,
 * job_after.c): what the decision in daemon/sched/ needs, carrying out its
 * answer, holds, priorities, preemptions, time limits, dependencies. Its
 * fields are struct job's `sched` (jobs_impl.h). */
#ifndef PARLE_JOB_SCHEDULE_H
#define PARLE_JOB_SCHEDULE_H

#include "jobs_impl.h"

/* job_schedule.c: the queue's scheduling (docs/architecture.md,
 * "Scheduling"). jobs_schedule starts what may run now, asks lower-priority
 * jobs to make room, and says in each queued job's status why it waits,
 * looking again every few seconds while one waits for memory. */
void jobs_schedule_init(jobs *js);
void jobs_schedule(jobs *js);
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

/* job_after.c: a queued job's dependencies (`after`). job_after_check: 0
 * they allow it to start, 1 one has not ended (why names it), -1 one ended
 * so that it never will (why says which and how). job_after_valid at
 * submit: 0, or -1 with a message naming an id that is not there. */
int job_after_check(jobs *js, const job *j, char *why, size_t whylen);
int job_after_valid(jobs *js, const job_config *cfg, char *err, size_t errlen);

#endif
