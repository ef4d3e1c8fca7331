/* A submission (job_submit.c), in two steps, so that a sweep queues all its
 * jobs or none: above the store, admission and the scheduling glue, which
 * each check a job; below the sweeps, which submit through it. Behind the
 * queue's door (tests/unit/layers.py). */
#ifndef PARLE_JOB_SUBMIT_H
#define PARLE_JOB_SUBMIT_H

#include "jobs_impl.h"

/* job_prepare validates a job against the daemon (its devices, its memory,
 * its limits, its dependencies): the record, not yet queued (the store's
 * job_commit queues it), or NULL with *code and a message. */
job *job_prepare(jobs *js, const cJSON *job_json, const char **code, char *err, size_t errlen);
/* Whether owner may queue njobs more (not shutting down, within
 * --max-jobs-per-user, counting what sweeps being submitted will queue):
 * 0, or -1 with *code and a message. */
int jobs_may_queue(jobs *js, const job_owner *owner, int njobs, const char **code, char *err,
                   size_t errlen);

#endif
