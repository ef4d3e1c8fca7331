/* Sweeps (docs/sweeps.md): many jobs from one base job and a grid, a
 * durable object of the daemon, kept above the queue as the job store's
 * client (jobs_client.h): each sweep's record under <state dir>/sweeps, its
 * tag on each of its jobs, its early stop. All on the loop thread. */
#ifndef PARLE_SWEEPS_H
#define PARLE_SWEEPS_H

#include <stdint.h>
#include <cjson/cJSON.h>

#include "jobs.h"

typedef struct sweeps sweeps;
typedef struct sweep sweep;
typedef struct sweep_submission sweep_submission;

/* The sweeps of <state_dir>/sweeps, not read yet: jobs_open takes
 * sweeps_client(sw), reloads them after the jobs and frees them with the
 * queue (or at once if the queue cannot open). NULL when out of memory. */
sweeps *sweeps_new(const char *state_dir);
const jobs_client *sweeps_client(const sweeps *sw);

/* sweeps_submit reads `sweep_json` (sweep_file.h) and checks its cheap
 * bounds (its size, --max-jobs-per-user) without building a job: NULL with
 * *code (ERR_INVALID_SWEEP, ERR_LIMIT, ERR_SHUTTING_DOWN, ERR_INTERNAL) and
 * a message, or a submission, whose jobs count against the owner's bound
 * from then on. sweep_submission_step carries it on for about budget_s
 * seconds, so the loop serves others between steps: every job validated
 * against the daemon, then all queued as `owner`'s, or none. It returns 0
 * while there is more to do; 1 when done, with the sweep in *out, or NULL
 * with *code and a message. sweep_submission_free forgets one, done or not
 * (the jobs of a sweep whose queueing had begun are queued at the next
 * start). */
sweep_submission *sweeps_submit(sweeps *sw, const cJSON *sweep_json, const job_owner *owner,
                                const char **code, char *err, size_t errlen);
int sweep_submission_step(sweep_submission *sub, double budget_s, sweep **out, const char **code,
                          char *err, size_t errlen);
void sweep_submission_free(sweep_submission *sub);

sweep *sweeps_find(sweeps *sw, const char *id);
const char *sweep_id(const sweep *s);
const job_owner *sweep_owner(const sweep *s);
/* Cancel every queued and running job of the sweep and mark it cancelled
 * (durably: a restart queues none of its missing jobs). The number of jobs
 * cancelled, or -1 with a message when the sweep was cancelled before or
 * has ended (its state is left as it is). */
int sweep_cancel(sweeps *sw, sweep *s, char *err, size_t errlen);
/* One row per point: mean and standard deviation of the final test error
 * over its seeds, wall time, state, the best point; and the sweeps' list. */
cJSON *sweep_status_json(const sweeps *sw, const sweep *s, const job_viewer *v);
cJSON *sweeps_list_json(const sweeps *sw, const job_viewer *v);
/* A sweep whose jobs have all ended removed with them (its record first).
 * *freed: the bytes their folders took. 0, or -1 with *code
 * (ERR_BAD_STATE: a job not ended, the sweep still being queued;
 * ERR_INTERNAL) and a message. A removed id is never issued again. */
int sweep_remove(sweeps *sw, sweep *s, int *njobs, uint64_t *freed, const char **code, char *err,
                 size_t errlen);

#endif
