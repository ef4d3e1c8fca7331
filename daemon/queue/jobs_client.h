/* A client of the job store: a module above the queue that groups jobs of
 * its own (the sweeps, daemon/sweep/). It sees the jobs through this header
 * and jobs.h only, never the record: it keeps its fields in a part of each
 * job the store allocates for it (job_client_part) and hears of what
 * happens to a job through the functions it gives jobs_open. */
#ifndef PARLE_JOBS_CLIENT_H
#define PARLE_JOBS_CLIENT_H

#include "jobs.h"

/* What the client gives jobs_open, which keeps a copy; every function is
 * called on the loop thread with `self`. */
typedef struct jobs_client {
    void *self;
    /* The bytes it keeps with each job, zeroed as the job is made. */
    size_t job_part_size;
    /* At jobs_open, once every job is reloaded: the client's own records
     * read back (it may queue the jobs they lack). 0, or -1 with a message,
     * which fails jobs_open. */
    int (*reload)(void *self, jobs *js, char *err, size_t errlen);
    /* The queue is freed (or could not open): the client's state goes too. */
    void (*free)(void *self);
    /* Its fields at the end of a job's status (every answer and
     * status.json), and read back from a reloaded status.json before its
     * reload. */
    void (*status)(void *self, const job *j, cJSON *o);
    void (*restore)(void *self, job *j, const cJSON *st);
    /* An evaluation of a running job; a run that ended done, before its
     * state is set. */
    void (*evaluated)(void *self, job *j, double epoch, double test_error);
    void (*run_done)(void *self, job *j);
    /* The jobs uid's submissions under way will queue and have not yet
     * (--max-jobs-per-user counts them). */
    int (*promised)(void *self, unsigned uid);
    /* Whether group `id` (a sweep's s0001, which a job's `after` may name)
     * has ended, for a dependency on it:
     * -2 no such group, 0 not yet (*left: its jobs not ended or not yet
     * queued), 1 every job done (or ended as well as done by the client's
     * rule), -1 one ended otherwise (*bad: it). */
    int (*group_end)(void *self, const char *id, int *left, const job **bad);
    /* Whether `rm` of job j alone is refused (a group's job goes with its
     * group): 0, or -1 with a message. */
    int (*refuses_remove)(void *self, const job *j, char *err, size_t errlen);
    /* --remove-ended: the groups every job of which ended before
     * before_mono (jobs_mono_s), removed: *njobs and *freed grow by what
     * went; a failure is logged when *failed was 0, and counted. */
    void (*remove_ended)(void *self, double before_mono, int *njobs, uint64_t *freed,
                         int *failed);
} jobs_client;

/* The client's part of job j (job_part_size bytes). */
void *job_client_part(const job *j);

/* The jobs in submission order: the first after j (NULL: the first), or
 * NULL at the end. */
job *jobs_next(const jobs *js, const job *j);

/* A job's record, read. */
double job_test_error(const job *j);   /* a done job's final one; NaN unknown */
double job_started_at(const job *j);   /* wall clock (unix s); 0 never started */
double job_ended_at(const job *j);     /* wall clock; 0 not ended */
double job_elapsed(const job *j);      /* training seconds so far */
int job_cancel_requested(const job *j);
/* Ended before before_mono (jobs_mono_s), its thread gone. */
int job_ended_before(const job *j, double before_mono);
/* The state status shows: the state's name, or for a queued job the
 * scheduling glue's word for it ("held", "preempted"). */
const char *job_shown_state(const job *j);
/* Why the job ended as it did (in status), set by the module or client
 * that ends it ("" clears it). */
void job_set_error(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line in the job's log.txt. */
void job_log(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A client's job, in two steps, so that a group queues all its jobs or
 * none. job_prepare validates a job against the daemon (its devices, its
 * memory, its limits, its dependencies): the record, not yet queued, or NULL
 * with *code and a message; job_discard frees one not committed.
 * job_commit gives it an id, its files (job.json, status.json with the
 * client's fields set before) and its place in the queue: 0, or -1 with a
 * message and j freed; jobs_schedule starts what can run. */
job *job_prepare(jobs *js, const cJSON *job_json, const char **code, char *err, size_t errlen);
void job_discard(job *j);
int job_commit(jobs *js, job *j, const cJSON *job_json, const job_owner *owner, char *err,
               size_t errlen);
/* Whether owner may queue njobs more (not shutting down, within
 * --max-jobs-per-user, counting what submissions under way will queue):
 * 0, or -1 with *code and a message. */
int jobs_may_queue(jobs *js, const job_owner *owner, int njobs, const char **code, char *err,
                   size_t errlen);
void jobs_schedule(jobs *js);
/* What a dependency on a group answers has changed (a job of it queued, the
 * group removed): the jobs waiting on one look again. */
void jobs_dependencies_changed(jobs *js);
/* 0 when j has ended, else -1 with *code ERR_BAD_STATE and a message
 * saying a job must end before it is removed. */
int job_removable(const job *j, const char **code, char *err, size_t errlen);
/* An ended job's folder removed and the job forgotten, as `rm` and a
 * group's removal do (no refusal; the caller schedules after): *freed
 * grows by its bytes. 0, or -1 with a message. */
int job_remove_folder(jobs *js, job *j, uint64_t *freed, char *err, size_t errlen);

/* Helpers the store shares with its clients. The wall clock (unix
 * seconds) is for what people read; durations use jobs_mono_s, which a
 * step of the wall clock does not move. */
double jobs_now_s(void);
double jobs_mono_s(void);
/* jobs_viewer_sees_details' rule for what `owner` owns (a group too). */
bool owner_details_seen(const jobs *js, const job_owner *owner, const job_viewer *v);
cJSON *owner_json(const job_owner *owner);                /* {"uid", "gid", "user"} */
void owner_from_json(job_owner *owner, const cJSON *o);  /* root's if damaged */
void add_num_or_null(cJSON *o, const char *k, double v); /* null when not finite */
/* A number of a status.json; `missing` if absent, null or not a number. */
double status_number(const cJSON *st, const char *key, double missing);

#endif
