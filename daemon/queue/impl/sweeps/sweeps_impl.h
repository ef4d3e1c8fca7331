/* The sweeps' door within the queue (sweeps.c, sweeps_json.c): a sweep's
 * record and its submission, their reload and early stop. Its fields in a
 * job are struct job's `in_sweep` (jobs_impl.h). */
#ifndef PARLE_SWEEPS_IMPL_H
#define PARLE_SWEEPS_IMPL_H

#include "jobs_impl.h"
#include "sweep_file.h"

/* A sweep (sweeps.c): its request as read (spec borrows from doc's
 * "sweep"), its owner, and whether it was cancelled. Its jobs are those
 * whose `sweep` is this one. */
struct sweep {
    sweep *next;
    char id[PROTO_ID_MAX];
    char dir[1100];
    job_owner owner;
    double created_at;
    cJSON *doc;             /* sweep.json: {"id", "owner", "created_at", "sweep"} */
    sweep_spec spec;
    int cancelled;
};

/* A sweep being submitted (sweeps.c, jobs_sweep_submit): each job prepared
 * against the daemon, then all committed, a few milliseconds at a time.
 * Linked in js->submitting, so the jobs it will queue count against its
 * owner's bound meanwhile (job_submit.c, jobs_may_queue). */
struct sweep_submission {
    jobs *js;
    sweep *s;
    int njobs, made, committed;
    int linked;             /* the sweep's record is written and in js->sweeps */
    job **prepared;
    cJSON **texts;
    sweep_submission *next;
};

/* sweeps.c: every sweep under <state dir>/sweeps, after the jobs, its jobs
 * found by their tag and any the sweep lacks (parled stopped while it
 * queued them) queued now. */
int sweeps_reload(jobs *js, char *err, size_t errlen);
/* A job's evaluation: for a sweep's job, the early stop's rule
 * (docs/sweeps.md). */
void sweep_on_eval(job *j, double epoch, double test_error);
/* A job ended done: one the early stop's cancel reached too late (its last
 * steps were already taken) is done, not early-stopped. */
void sweep_on_done(job *j);
void sweeps_free(jobs *js);
/* The jobs uid's sweeps being submitted will queue and have not yet. */
int sweeps_promised(const jobs *js, unsigned uid);
/* Whether sweep s is still being submitted (not all its jobs queued). */
int sweep_submitting(const jobs *js, const sweep *s);
/* The sweep out of js's list and freed (its jobs' tags no longer point at it). */
void sweep_forget(jobs *js, sweep *s);

#endif
