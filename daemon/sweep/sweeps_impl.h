/* The sweeps' implementation header (sweeps.h): a sweep's record, its
 * submission, the sweeps' state and their part of each job, shared by
 * sweeps.c (submission, cancel, early stop), sweeps_reload.c,
 * sweeps_json.c, sweeps_remove.c and sweeps_client.c (the table of what
 * the store calls). They reach the jobs
 * through jobs_client.h only. */
#ifndef PARLE_SWEEPS_IMPL_H
#define PARLE_SWEEPS_IMPL_H

#include "jobs_client.h"
#include "protocol.h"
#include "sweep_file.h"
#include "sweeps.h"

/* Each job of js, in submission order; the body must not remove j. */
#define each_job(js, j) for (job *j = jobs_next(js, NULL); j; j = jobs_next(js, j))

/* The sweeps' part of each job (job_client_part). Its sweep (sweep_id
 * from status.json until the sweeps are reloaded), grid point and seed
 * index; its test error at the sweep's early-stop epoch once known, and
 * whether the early stop cancelled it. No sweep_id: a job of its own.
 * The tag is read back from a reloaded status.json before any sweep is
 * (job_restore_sweep). */
struct job_in_sweep {
    sweep *sweep;
    char sweep_id[PROTO_ID_MAX];
    long point;
    int seed_index;
    double sweep_error;
    int sweep_error_known, early_stopped;
};
static inline struct job_in_sweep *in_sweep_of(const job *j) { return job_client_part(j); }

/* The sweeps (sweeps_new): in submission order, under <state dir>/sweeps,
 * and those being submitted, not all queued yet; the queue they are the
 * client of, from its reload on. */
struct sweeps {
    jobs *js;
    jobs_client client;
    sweep *list;
    int next_id;
    char dir[1040];
    sweep_submission *submitting;
};

/* A sweep: its request as read (spec borrows from doc's "sweep"), its
 * owner, and whether it was cancelled. Its jobs are those whose `sweep`
 * is this one. */
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

/* A sweep being submitted (sweeps_submit): each job prepared against the
 * daemon, then all committed, a few milliseconds at a time. Linked in
 * sw->submitting, so the jobs it will queue count against its owner's
 * bound meanwhile (the client's promised). */
struct sweep_submission {
    sweeps *sw;
    sweep *s;
    int njobs, made, committed;
    int linked;             /* the sweep's record is written and in the sweeps' list */
    job **prepared;
    cJSON **texts;
    sweep_submission *next;
};

/* sweeps.c */
void sweep_free(sweep *s);
void sweeps_link(sweeps *sw, sweep *s);       /* at the end of the list */
/* The sweep out of the list and freed (its jobs' tags no longer point at it). */
void sweep_forget(sweeps *sw, sweep *s);
/* Whether sweep s is still being submitted (not all its jobs queued). */
int sweep_submitting(const sweeps *sw, const sweep *s);
/* state.json: whether the sweep was cancelled, each job's test error at
 * the early-stop epoch, the jobs the early stop cancelled (a failed write
 * is logged; the next change writes it again). */
void sweep_write_state(sweeps *sw, sweep *s);
/* The job of (point, seed k) prepared against the daemon, its JSON in
 * *json: NULL with *code and a message naming the point. */
job *sweep_prepare_point(sweeps *sw, const sweep *s, long point, int k, cJSON **json,
                         const char **code, char *err, size_t errlen);
/* A prepared job tagged as the sweep's and queued: 0, or -1 with a
 * message (j freed). */
int sweep_commit_tagged(sweeps *sw, sweep *s, job *j, const cJSON *job_json, long point, int k,
                        char *err, size_t errlen);

/* sweeps.c: the client's free, promised, evaluated, run_done and
 * group_end (jobs_client.h). */
void sweeps_free(void *self);
int sweeps_promised(void *self, unsigned uid);
void sweep_on_eval(void *self, job *j, double epoch, double test_error);
void sweep_on_done(void *self, job *j);
int sweep_end(void *self, const char *id, int *left, const job **bad);

/* sweeps_reload.c: the client's reload and restore (jobs_client.h). */
int sweeps_reload(void *self, jobs *js, char *err, size_t errlen);
void job_restore_sweep(void *self, job *j, const cJSON *st);
/* sweeps_json.c: the client's status. */
void job_status_sweep(void *self, const job *j, cJSON *o);
/* sweeps_remove.c: the client's refuses_remove and remove_ended. */
int sweep_refuses_remove(void *self, const job *j, char *err, size_t errlen);
void sweeps_remove_ended(void *self, double before_mono, int *njobs, uint64_t *freed,
                         int *failed);

#endif
