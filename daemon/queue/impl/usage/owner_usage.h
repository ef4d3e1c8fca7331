/* Fair share's glue's door within the queue (owner_usage.c): the running
 * jobs' owners charged in daemon/usage/'s table, usage.json and the
 * accounting record's runs. Its fields are its part of each job (fair_of)
 * and of the queue (fair_state). */
#ifndef PARLE_OWNER_USAGE_H
#define PARLE_OWNER_USAGE_H

#include "accounting.h"
#include "fair_share.h"
#include "jobs_store.h"

/* Fair share's glue's (owner_usage.c), no other file writes it:
 * device-seconds charged to the current run (acct_device_units x its
 * seconds), for the accounting record. */
struct job_fair {
    double run_device_s;
};
static inline struct job_fair *fair_of(const job *j) { return job_part(j, JOB_PART_FAIR); }

/* Fair share's glue's part of the queue (owner_usage.c; queue.c frees it
 * at the end): the table (daemon/usage/'s fair_share.h, on jobs_mono_s;
 * owner_usage_of and the overview read it), kept in usage_path, written
 * every --usage-save-interval while jobs run, and the accounting record
 * of ended runs. */
struct jobs_fair {
    fair_share_table share;
    char usage_path[1040];
    uv_timer_t usage_save;
    acct_log acct;
};
static inline struct jobs_fair *fair_state(const jobs *js) { return jobs_part(js, JOB_PART_FAIR); }

/* owner_usage.c: fair share's table. jobs_usage_update brings every owner's
 * decayed device use (device-seconds) up to now (also as a job ends, before
 * it stops counting as running); owner_usage_of reads one, as of the last
 * update. jobs_usage_save
 * writes it to <state dir>/usage.json (atomically; a failure is logged) and
 * jobs_usage_load reads it back at start: a missing file is an empty table,
 * a bad one is logged, naming the file and the field, and ignored; it also
 * opens the accounting record (fair_state(js)->acct) and records there the runs that
 * usage.json shows under way (parled was killed). */
void jobs_usage_update(jobs *js);
double owner_usage_of(const jobs *js, unsigned uid);
void jobs_usage_save(jobs *js);
void jobs_usage_load(jobs *js, const char *state_dir);
/* What job j holds, in devices (acct_device_units): a GPU times its
 * gpu_share, K of the daemon's cores as K / ncores of the CPU. */
double job_device_units(const jobs *js, const job *j);
/* owner charged device_seconds more, now (a preemption it withdrew). */
void owner_usage_charge(jobs *js, const job_owner *owner, double device_seconds);
/* Job j's run (begun at began_mono, jobs_mono_s) ended `end` (accounting.h): usage.json
 * saved, then the run appended to the accounting record (a failure is
 * logged). After jobs_usage_update, once the job no longer runs. */
void jobs_usage_run_ended(jobs *js, job *j, const char *end, double began_mono);
/* usage.json written every --usage-save-interval while a job runs (so a
 * kill -9 loses at most that much use): the timer made, then started. */
void jobs_usage_init(jobs *js);
void jobs_usage_start(jobs *js);

#endif
