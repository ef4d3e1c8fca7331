/* Removals' door within the queue (job_remove.c): --keep-ended and
 * --remove-ended. */
#ifndef PARLE_JOB_REMOVE_H
#define PARLE_JOB_REMOVE_H

#include "jobs_impl.h"

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
