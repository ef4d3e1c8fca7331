/* The sweeps' door within the queue (sweeps.c, sweeps_json.c): a sweep's
 * record and its submission, their reload and early stop. Its fields are
 * its part of each job (in_sweep_of) and of the queue (sweeps_state). */
#ifndef PARLE_SWEEPS_IMPL_H
#define PARLE_SWEEPS_IMPL_H

#include "jobs_impl.h"
#include "sweep_file.h"

/* A sweep's job: the sweeps' (sweeps.c). Its sweep (sweep_id from
 * status.json until the sweeps are reloaded), grid point and seed
 * index; its test error at the sweep's early-stop epoch once known, and
 * whether the early stop cancelled it. No sweep_id: a job of its own.
 * The tag is read back from a reloaded status.json before any sweep is
 * (job_restore_sweep). Another writer: a sweep's removal unlinks its jobs
 * (job_remove.c, as sweep_forget does). */
struct job_in_sweep {
    sweep *sweep;
    char sweep_id[PROTO_ID_MAX];
    long point;
    int seed_index;
    double sweep_error;
    int sweep_error_known, early_stopped;
};
static inline struct job_in_sweep *in_sweep_of(const job *j)
{
    return job_part(j, JOB_PART_SWEEP);
}

/* The sweeps' (sweeps.c): in submission order, under <state dir>/sweeps,
 * and those being submitted, not all queued yet. queue.c sets up the
 * folder and the first id at start; job_remove.c takes removed sweeps
 * out (as sweep_forget) and keeps the next id. */
struct jobs_sweeps {
    sweep *sweeps;
    int next_sweep_id;
    char sweeps_dir[1040];
    sweep_submission *submitting;
};
static inline struct jobs_sweeps *sweeps_state(const jobs *js)
{
    return jobs_part(js, JOB_PART_SWEEP);
}

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
    int linked;             /* the sweep's record is written and in the sweeps' list */
    job **prepared;
    cJSON **texts;
    sweep_submission *next;
};

/* sweeps.c: every sweep under <state dir>/sweeps, after the jobs, its jobs
 * found by their tag and any the sweep lacks (parled stopped while it
 * queued them) queued now. */
int sweeps_reload(jobs *js, char *err, size_t errlen);
/* A sweep's job's tag (sweep, point, seed_index) in its status
 * (sweeps_json.c), and read back from a reloaded status.json, before any
 * sweep is: sweeps_reload links the job to its sweep by it. */
void job_status_sweep(const job *j, cJSON *o);
void job_restore_sweep(job *j, const cJSON *st);
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
