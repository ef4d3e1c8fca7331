/* Removals' door within the queue (job_remove.c): --keep-ended and
 * --remove-ended. */
#ifndef PARLE_JOB_REMOVE_H
#define PARLE_JOB_REMOVE_H

#include "jobs_store.h"

/* The removals' part of the queue: --keep-ended's timer, which looks at
 * the failed jobs' ages (and --remove-ended's at the ended ones'). */
struct jobs_remove {
    uv_timer_t keep_ended_check;
};
static inline struct jobs_remove *remove_state(const jobs *js)
{
    return jobs_part(js, JOB_PART_REMOVE);
}

/* --keep-ended: failed jobs' checkpoints past the age or the count go
 * (done and cancelled jobs remove theirs as they end). At start, every few
 * minutes and as a job fails. */
void jobs_keep_ended(jobs *js);
/* --remove-ended: the jobs that ended longer ago than its age, and the
 * sweeps all of whose jobs did, removed as `rm` does (the accounting
 * record keeps their use). At start, every few minutes and as jobs end. */
void jobs_remove_ended(jobs *js);
void jobs_keep_ended_init(jobs *js);
void jobs_keep_ended_start(jobs *js);

#endif
