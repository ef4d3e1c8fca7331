/* A running job as runner.c and its helpers (runner_impl.h) share it: the
 * job_run that runner.c makes and owns, and what a helper may do to the job
 * besides its own work: fail it (run_fail) and report an event to the hooks
 * (run_emit, run_emit_log). The helpers see the job through this alone, so
 * none of them calls back into runner.c. */
#ifndef PARLE_RUN_STATE_H
#define PARLE_RUN_STATE_H

#include <pthread.h>
#include <stddef.h>

#include "augment.h"
#include "checkpoint.h"
#include "comm.h"
#include "coupling.h"
#include "fault.h"
#include "replica.h"
#include "runner.h"
#include "sampler.h"
#include "step_schedule.h"

typedef struct job_run {
    const job_config *cfg;
    const dataset *train, *test;
    const run_hooks *hooks;
    const coupling_rule *rule;
    comm comm;
    int n;                    /* the job's replicas, in all processes */
    int first, nlocal;        /* this process's: first .. first + nlocal - 1 (comm ranks 0..) */
    run_devices where;
    long outer_per_epoch;     /* nb: batches per pass over a replica's data */
    long batches_per_pass;    /* the same, but 1 outer iteration an epoch for
                                 RULE_STEPS_PER_PASS rules, whose S is nb */
    long total_outer;
    long eval_steps;          /* the master is evaluated where step crosses a multiple
                                 of it (eval.every_passes), and at every epoch end */
    double t_start;
    model eval_model;         /* the master, evaluated on rank 0's thread, in its memory */
    float *master_params, *master_stats; /* its host copy for on_master */
    checkpoint_info resume;   /* resume.k > 0: continue from this checkpoint */
    long kept_k;              /* the newest complete checkpoint on disk (0: none), what a
                                 failed one leaves to resume from; rank 0 writes it
                                 (atomically: the others read it to say so) */
    fault_point fault;        /* PARLE_FAULT_REPLICA (tests) */
    long number;              /* the job's number among parled's in this process
                                 (from 1; 0: a job without a stop flag) */
    long reported_step;       /* the step of replica 0's last progress event */
    const char *park_release; /* PARLE_FAULT_RELEASE: a park ends once this file exists */
    long *at_step;            /* each replica's last step, for the watchdog's message */
    size_t *mem_bytes;        /* each replica's peak memory as note_memory counts it */
    step_schedule sched;      /* turns on the cores for floating replicas (step_schedule.h) */
    int scheduled;            /* ... when they take them */
    int reseeding;            /* algorithm.on_replica_failure is "reseed" */
    char (*cause)[512];       /* per rank: why it is failing ("": it is not), written
                                 by its own thread before a meeting point */
    pthread_mutex_t lock;     /* guards failed, stopped_now, err, live */
    pthread_cond_t ended;     /* a replica thread finished */
    int live;                 /* replica threads not yet finished */
    int failed;
    int stopped_now;          /* the RUN_STOP / RUN_STOP_NOW that ended the job */
    char err[512];
    run_result result;
} job_run;

/* A replica's number in the job (seeds, data shard, checkpoint files); r->rank
 * is its rank in this process's comm. Replica 0, in the first process, holds
 * the master and reports. */
static inline int replica_id(const job_run *run, const replica *r) { return run->first + r->rank; }
static inline int is_master(const job_run *run, const replica *r) { return replica_id(run, r) == 0; }

/* The job fails with `msg` (the first failure wins) and every replica leaves
 * at its next collective: the comm is aborted. */
void run_fail(job_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void run_emit(job_run *run, const run_event *ev);
void run_emit_log(job_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
