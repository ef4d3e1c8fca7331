/* The scheduler's decision: which queued jobs start (and on which GPUs),
 * which running jobs are preempted to make room, and why each job that
 * stays queued waits. A pure function of the queue's state and the time it
 * is given (no clock, no files, no daemon), so that every rule is tested by
 * a table of cases and by random queues (tests/unit/test_sched.c) and the
 * same function replays traces (bench/sched_sim.c); the job store acts on
 * what it says. The rules, in docs/architecture.md ("Scheduling"):
 *
 * - Order. Queued jobs are considered by priority (higher first); among
 *   equal priorities, jobs resuming a checkpoint (stopped by a preemption
 *   or a stop of parled, as the store says) first, then by their owner's
 *   recent use of devices (less first: fair share), then by submission.
 *   A job eligible to run for oldest_first_s or more (its age: time held or
 *   waiting on a dependency does not count, and a resumed job's counts from
 *   its resume) ranks before all of these among its priority, the oldest
 *   first: fair share delays, never starves.
 * - Eligibility. A held job, one whose dependencies have not all ended
 *   (after_pending), one past its owner's quota of GPUs or cores and one
 *   that waits for host memory keep nothing from the jobs after them.
 * - No starvation. A job that cannot start keeps what it wants from every
 *   job after it in that order: its GPUs (for "any N GPUs", the N that free
 *   soonest), and the CPU's free cores if it waits for cores.
 * - Backfill. Where every job holding what a waiting job keeps has a time
 *   limit, the waiting job's start is known (start_by); a later job with a
 *   time limit may use the kept devices if it ends by then.
 * - Sharing. On the CPU a job takes `cores` of the daemon's cores; jobs
 *   whose cores fit run at once. A GPU is held whole (1000 thousandths), or
 *   shared by jobs whose shares, whole thousandths, sum to at most 1000:
 *   integers, compared exactly.
 * - Any N GPUs. A job that asks for N GPUs of a set gets N that are free,
 *   all at once, preferring N joined pairwise by NVLink/P2P (links).
 * - Preemption. A job that waits for devices held by lower-priority running
 *   jobs has the fewest of them stopped (lowest priority first, then the
 *   fewest GPU thousandths, then the youngest run), among those holding
 *   what it can use and past their minimum run (a run that resumed a
 *   preemption is not preempted again within min_run_s), if that makes it
 *   fit; it then waits for them, keeping its devices. A job that fits once
 *   the jobs stopping already have stopped preempts no more. */
#ifndef PARLE_SCHEDULE_H
#define PARLE_SCHEDULE_H

#include <stdint.h>

enum { SCHED_GPUS = 63, SCHED_BLOCKERS = 4, SCHED_WHOLE = 1000 };

typedef struct sched_job {
    int running;          /* 1: running (holds its devices), 0: queued */
    int stopping;         /* running, asked to stop (preempted, cancelled): frees them soon */
    int held;             /* queued and held by its owner or an admin: never started */
    int resuming;         /* queued, stopped by a preemption or a stop of parled: ranks first */
    int after_pending;    /* queued: a job it depends on has not ended yet */
    int memory_wait;      /* queued: host memory it needs is not free now */
    int priority;
    long order;           /* submission order, smaller first */
    unsigned owner;       /* whose job (quotas) */
    double usage;         /* its owner's recent device use (sched_usage_decay) */
    double eligible_s;    /* queued: seconds it has been eligible to run, its age
                             (oldest_first_s): not held, no dependency pending */
    double started_at;    /* running: when its current run began (as `now`) */
    int was_preempted;    /* running: this run resumed a preemption (the minimum run applies) */
    double time_limit;    /* seconds a run may last; 0: none (its end is unknown) */
    uint64_t gpus;        /* running: the GPUs it holds; queued: those it wants, or
                             with ngpus, those it may take from */
    int ngpus;            /* queued: any ngpus of gpus; 0: every GPU of gpus */
    int gpu_share;        /* thousandths of each of its GPUs, 1..SCHED_WHOLE */
    int cores;            /* CPU cores it holds or wants (0: none) */
} sched_job;

typedef struct sched_input {
    const sched_job *jobs;
    int njobs;
    int ncores;            /* the daemon's cores */
    uint64_t faulted;      /* GPUs that never come back in this process */
    int one_at_a_time;     /* only one job may run (under MPI) */
    int preempt;           /* preemption allowed */
    int backfill;          /* backfill allowed */
    double now;            /* the time started_at and time limits are counted in
                              (a monotonic clock's) */
    double min_run_s;      /* a run that resumed a preemption is not preempted sooner */
    double oldest_first_s; /* a job eligible this long ranks before fair share (0: never) */
    uint64_t links[SCHED_GPUS]; /* bit h of links[g]: GPUs g and h are joined (NVLink/P2P) */
    int max_gpus_per_owner;  /* whole GPUs one owner's jobs may hold at once (0: no bound) */
    int max_cores_per_owner; /* cores one owner's jobs may hold at once (0: no bound) */
} sched_input;

enum sched_action { SCHED_KEEP, SCHED_START, SCHED_PREEMPT };

enum sched_wait {
    SCHED_NOT_WAITING, /* running, or starting now */
    SCHED_HOLD,        /* held */
    SCHED_DEVICES,     /* its devices are held by running jobs (blockers) */
    SCHED_QUEUE,       /* its devices are kept for a job before it (blockers[0]) */
    SCHED_STOPPING,    /* waiting for running jobs that are stopping (blockers): preempted for it, or cancelled */
    SCHED_FAULTED,     /* it wants a GPU that faulted */
    SCHED_ONE_AT_A_TIME, /* a job runs and only one may (MPI) */
    SCHED_AFTER,       /* a job it depends on has not ended */
    SCHED_QUOTA,       /* its owner's running jobs hold their quota (blockers: them) */
    SCHED_MEMORY,      /* host memory it needs is not free */
};

typedef struct sched_decision {
    enum sched_action action;
    enum sched_wait wait;
    int preempted_for;          /* SCHED_PREEMPT: the job it makes room for */
    int blockers[SCHED_BLOCKERS]; /* the jobs it waits for or behind, by index */
    int nblockers;              /* how many (may exceed SCHED_BLOCKERS: the first are kept) */
    int turn;                   /* queued: its place in the order (0 first), else -1 */
    uint64_t gpus;              /* SCHED_START: the GPUs it gets; waiting: those it keeps */
    int backfilled;             /* SCHED_START on devices kept for blockers[0] */
    double start_by;            /* waiting and keeping: when what it keeps is free by the
                                   limits of its holders (INFINITY when one has none) */
} sched_decision;

/* One decision per job (out[njobs]). 0, or -1 when out of memory for the
 * order (nothing decided). */
int sched_decide(const sched_input *in, sched_decision *out);

/* A share of a GPU in (0, 1] as whole thousandths, rounded to the nearest:
 * 0 when it is below one thousandth. */
int sched_share_milli(double share);

/* Usage decayed by half every half_life seconds: usage 2^(-dt/half_life)
 * plus what was used in those dt seconds (device_seconds, at its midpoint). */
double sched_usage_decay(double usage, double dt, double half_life, double device_seconds);

#endif
