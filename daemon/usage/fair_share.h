/* Fair share's table (docs/architecture.md, "Scheduling"): each owner's
 * device use in device-seconds, decayed by a half-life, as of a time; what
 * <state dir>/usage.json holds of it, read back and validated. Data about
 * owners, not about the queue: it knows no job. The queue's glue
 * (daemon/queue/owner_usage.c) walks the jobs, charges their owners here
 * and keeps the record's runs (accounting.h).
 *
 * Fields: fair_share_table is this module's alone; the glue reads
 * `owners` (the ranking it shows) and sets the clocks through
 * fair_share_decay only. */
#ifndef PARLE_FAIR_SHARE_H
#define PARLE_FAIR_SHARE_H

#include <cjson/cJSON.h>

#include "accounting.h"

/* usage.json holds one short entry per owner of recent jobs and one per
 * running job. */
#define USAGE_FILE_MAX (1 << 20)
#define USAGE_OWNERS_MAX 65536
#define USAGE_RUNS_MAX 4096
#define USAGE_MAX_S ACCT_DEVICE_S_MAX

/* An owner's device use (device-seconds, decayed). */
typedef struct owner_usage {
    unsigned uid;
    char user[64];          /* the name of its latest job */
    double usage;
} owner_usage;

/* The table, as of usage_at (wall clock, shown and saved) and usage_mono
 * (the monotonic clock, from which the next update counts; 0: none since
 * parled started). */
typedef struct fair_share_table {
    owner_usage *owners;
    int n, cap;
    double usage_at, usage_mono;
} fair_share_table;

/* uid's entry (made if need be; NULL when out of memory), its name set
 * when `user` is given. */
owner_usage *fair_share_entry(fair_share_table *t, unsigned uid, const char *user);
/* uid's use as of the last update (0 if not in the table). */
double fair_share_of(const fair_share_table *t, unsigned uid);
/* Every owner's use decayed up to now (mono: the monotonic clock, wall:
 * unix seconds): returns the monotonic seconds since the last update, over
 * which the running jobs' use is then added (fair_share_add). The first
 * update since parled started also decays by the time it was stopped, read
 * off the wall clock (none if that is behind usage_at). */
double fair_share_decay(fair_share_table *t, double mono, double wall, double half_life);
/* u used `device_seconds` over the last dt seconds (decayed as it went). */
void fair_share_add(owner_usage *u, double dt, double half_life, double device_seconds);
/* owner charged device_seconds more, now (a preemption it withdrew). */
void fair_share_charge(fair_share_table *t, unsigned uid, const char *user,
                       double device_seconds);
/* Entry i out of the table (the last one takes its place). */
void fair_share_drop(fair_share_table *t, int i);
/* The table sorted by use, highest first (then by uid). */
void fair_share_rank(fair_share_table *t);
/* usage.json's {"owners": [{"uid", "user", "device_seconds"}], "runs",
 * "usage_at"}, `runs` (an array, taken) given by the caller; NULL when out
 * of memory. */
cJSON *fair_share_json(const fair_share_table *t, cJSON *runs);
/* The table as usage.json's root holds it: 0, or -1 with what is wrong in
 * `why` (the table may then hold part of it: empty it). */
int fair_share_read(fair_share_table *t, const cJSON *root, char *why, size_t whylen);
/* The runs under way when usage.json was written (a kill of parled ended
 * them): each validated into *runs (malloc'd, *nruns). 0, or -1 with why. */
int fair_share_runs_read(const cJSON *root, acct_run **runs, int *nruns, char *why,
                         size_t whylen);
void fair_share_free(fair_share_table *t);

#endif
