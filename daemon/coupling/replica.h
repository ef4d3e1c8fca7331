/* One replica of a running job: its model, backend context and the state its
 * coupling rule keeps. Owned by its own thread. */
#ifndef PARLE_REPLICA_H
#define PARLE_REPLICA_H

#include "backend.h"
#include "comm.h"
#include "jobconfig.h"
#include "model.h"

typedef struct replica {
    int rank, n;           /* its rank in this process's comm; the job's replicas */
    int id;                /* its number in the job (graphs, peers): rank in one process */
    const job_config *cfg;
    comm *comm;
    model model;           /* model.params is the iterate the gradients are taken at */
    backend_ctx ctx;
    void *rule_state;
    /* The schedules at the current outer iteration k (from 1). */
    long k;
    long step;             /* gradient steps taken, counting the one `step` applies */
    float last_loss;       /* that step's mini-batch loss */
    float lr, inner_lr, gamma, rho;
    /* Failed in this outer iteration and waiting to be re-seeded at the
     * next meeting point (coupling_rule.reseed): it takes no more part in
     * its rule's updates. The runner's; rules with step_meets read it. */
    int failing;
    long reseeds;          /* the job's re-seeds so far, as the replicas agreed */
    double sync_s;         /* time spent in the rule's sync, seconds */
    double step_s;         /* time in gradient steps and the rule's per-step update */
    double wait_s;         /* time waiting for the loader's next batch */
    double eval_s;         /* replica 0: time evaluating the master (its hook included) */
} replica;

#endif
