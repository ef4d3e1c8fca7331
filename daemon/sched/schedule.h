/* The scheduler's decision: which queued jobs start, which running jobs are
 * preempted to make room, and why each job that stays queued waits. A pure
 * function of the queue's state (no clock, no files, no daemon), so that
 * every rule is tested by a table of cases (tests/unit/test_sched.c); the
 * job store acts on what it says. The rules, in docs/architecture.md
 * ("Scheduling"):
 *
 * - Order. Queued jobs are considered by priority (higher first); among
 *   equal priorities, jobs resuming a checkpoint (interrupted by a stop of
 *   parled or preempted) first, then by their owner's recent use of devices
 *   (less first: fair share), then by submission.
 * - No starvation. A job that cannot start keeps what it wants from every
 *   job after it in that order: its GPUs, and the CPU's free cores if it
 *   waits for cores.
 * - Sharing. On the CPU a job takes `cores` of the daemon's cores (all of
 *   them for a whole-CPU job); jobs whose cores fit run at once. A GPU is
 *   held whole (share 1), or shared by jobs whose shares sum to at most 1.
 * Memory is the job store's to check, for each job this decides to start
 * (a job it holds back keeps its devices as here). 
 * - Preemption. A job that waits for devices held by lower-priority running
 *   jobs has the fewest of them stopped (lowest priority first, then the
 *   youngest run) if that makes it fit; it then waits for them, keeping its
 *   devices, so that nothing after it takes what they free. A job that fits
 *   once the jobs stopping already have stopped preempts no more. */
#ifndef PARLE_SCHEDULE_H
#define PARLE_SCHEDULE_H

#include <stdint.h>

enum { SCHED_GPUS = 63, SCHED_BLOCKERS = 4 };

typedef struct sched_job {
    int running;          /* 1: running (holds its devices), 0: queued */
    int stopping;         /* running, asked to stop (preempted, cancelled): frees them soon */
    int held;             /* queued and held by its owner or an admin: never started */
    int resuming;         /* queued with a checkpoint to resume (interrupted, preempted) */
    int priority;
    long order;           /* submission order, smaller first */
    double started_at;    /* running: when its current run began */
    double usage;         /* its owner's recent device use (sched_usage_decay) */
    uint64_t gpus;        /* GPUs it holds or wants */
    double gpu_share;     /* of each of its GPUs, (0, 1]: 1 holds them whole */
    int cores;            /* CPU cores it holds or wants (0: none) */
} sched_job;

typedef struct sched_input {
    const sched_job *jobs;
    int njobs;
    int ncores;            /* the daemon's cores */
    uint64_t faulted;      /* GPUs that never come back in this process */
    int one_at_a_time;     /* only one job may run (under MPI) */
    int preempt;           /* preemption allowed */
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
};

typedef struct sched_decision {
    enum sched_action action;
    enum sched_wait wait;
    int preempted_for;          /* SCHED_PREEMPT: the job it makes room for */
    int blockers[SCHED_BLOCKERS]; /* the jobs it waits for or behind, by index */
    int nblockers;              /* how many (may exceed SCHED_BLOCKERS: the first are kept) */
    int turn;                   /* queued: its place in the order (0 first), else -1 */
} sched_decision;

/* One decision per job (out[njobs]). 0, or -1 when out of memory for the
 * order (nothing decided). */
int sched_decide(const sched_input *in, sched_decision *out);

/* Usage decayed by half every half_life seconds: usage 2^(-dt/half_life)
 * plus what was used in those dt seconds (device_seconds, at its midpoint). */
double sched_usage_decay(double usage, double dt, double half_life, double device_seconds);

#endif
