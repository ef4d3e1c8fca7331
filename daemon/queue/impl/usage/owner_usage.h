/* Fair share's glue's door within the queue (owner_usage.c): the running
 * jobs' owners charged in daemon/usage/'s table, usage.json and the
 * accounting record's runs. */
#ifndef PARLE_OWNER_USAGE_H
#define PARLE_OWNER_USAGE_H

#include "jobs_impl.h"

/* owner_usage.c: fair share's table. jobs_usage_update brings every owner's
 * decayed device use (device-seconds) up to now (also as a job ends, before
 * it stops counting as running); owner_usage_of (the store's job_record.c,
 * jobs_impl.h) reads one, as of the last update. jobs_usage_save
 * writes it to <state dir>/usage.json (atomically; a failure is logged) and
 * jobs_usage_load reads it back at start: a missing file is an empty table,
 * a bad one is logged, naming the file and the field, and ignored; it also
 * opens the accounting record (js->acct) and records there the runs that
 * usage.json shows under way (parled was killed). */
void jobs_usage_update(jobs *js);
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
