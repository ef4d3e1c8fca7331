/* The whole queue at a glance, as plain numbers (jobs_overview.c): what
 * `parlectl top` asks for in one request and what the metrics file
 * (daemon/metrics/) is written from. Taken on the loop thread in one walk
 * of the jobs, bounded whatever their number: counts by state, every
 * device, the running jobs, the first `max_queued` queued jobs in the
 * queue's order and each owner with jobs or a recent use. */
#ifndef PARLE_JOBS_OVERVIEW_H
#define PARLE_JOBS_OVERVIEW_H

#include <stdint.h>

#include "jobs.h"
#include "protocol.h"

#define OVERVIEW_DEVICES_MAX 65     /* the CPU and 64 GPUs */
#define OVERVIEW_RUNNING_MAX 512    /* running jobs listed (more are counted) */
#define OVERVIEW_QUEUED_MAX 200     /* the most queued jobs one overview lists */
#define OVERVIEW_OWNERS_MAX 128     /* owners listed, those with jobs first */

typedef struct overview_job {
    char id[PROTO_ID_MAX];
    char owner[64];
    unsigned uid;
    char rule[32];           /* the coupling rule (algorithm.name) */
    char devices[64];        /* "cpu", "0,1", or "gpu:N" while queued */
    const char *state;       /* as status shows it: held, preempted, queued, running... */
    int priority;
    double share;            /* of each of its devices: gpu_share, or cores held / cores */
    double wait_s;           /* queued: seconds since it was submitted */
    char waiting[1024];      /* queued: why, as status says it ("" none yet) */
    int details;             /* the training values below are filled */
    long step;
    double passes, epoch, progress; /* progress: 0..1 of the job */
    int epochs;
    double images_per_sec, eta_s, test_error; /* NAN when unknown */
    double memory_peak;      /* bytes: the run's reported peak over its devices */
} overview_job;

typedef struct overview_device {
    int gpu;                 /* its index, -1 for the CPU */
    int cores;               /* the CPU's: how many the daemon has */
    int njobs;               /* running jobs on it */
    double shares;           /* their shares together, 0..1 */
    double memory_held;      /* bytes admission counts for them (estimates) */
    double memory_peak;      /* bytes they reported at their peaks */
    int faulted;
    char jobs[160];          /* their ids, "j0001 j0002" (cut, ending "...") */
} overview_device;

typedef struct overview_owner {
    unsigned uid;
    char user[64];
    double device_seconds;   /* fair share's decayed use */
    double share;            /* of everyone's */
    int running, queued;
} overview_owner;

typedef struct jobs_overview {
    int count[JOB_STATES];
    int held;                /* queued and held */
    double oldest_wait_s;    /* the longest a queued job has waited (0: none queued) */
    overview_device dev[OVERVIEW_DEVICES_MAX];
    int ndev;
    overview_job *running;   /* nrunning of them (malloc'd) */
    int nrunning;
    overview_job *queued;    /* the first nqueued in the queue's order (malloc'd) */
    int nqueued;
    overview_owner *owners;  /* malloc'd */
    int nowners;
    int jobs_per_user, gpus_per_user, cores_per_user; /* the bounds (0: none) */
    double usage_half_life_s;
    unsigned long schedule_passes;
    double schedule_seconds; /* the passes' time together (monotonic clock) */
    unsigned long checkpoints_written, checkpoints_failed;
    int have_space;          /* state_dir_free_bytes known */
    uint64_t state_dir_free_bytes, state_dir_total_bytes;
} jobs_overview;

/* The overview as viewer sees it: a job's training values (steps, passes,
 * speed, progress, test error, ETA) filled only where
 * jobs_viewer_sees_details allows (NULL: all, for parled's own metrics
 * file). 0, or -1 (out of memory) with nothing to free. */
int jobs_overview_take(jobs *js, const job_viewer *viewer, int max_queued,
                       jobs_overview *out);
void jobs_overview_free(jobs_overview *o);

#endif
