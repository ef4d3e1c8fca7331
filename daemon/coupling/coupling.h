/* A coupling rule: how replicas turn gradients into updates and talk to each
 * other (docs/architecture.md). One file per algorithm; the runner drives them all
 * through this table:
 *
 *   init  ; repeat { begin ; (gradient ; step) x steps_per_sync ; sync }
 *
 * The rule's `weights` are what the master averages and what a checkpoint
 * saves as the replica's weights. */
#ifndef PARLE_COUPLING_H
#define PARLE_COUPLING_H

#include <stddef.h>
#include "replica.h"

#define RULE_MAX_STATE 4
/* LSGD's loss window (algorithm.avg_size <= 100) with its leaders. */
#define RULE_MAX_SCALARS 128

/* steps_per_sync's answer for a rule that needs no meeting point but the
 * pass boundaries (the asynchronous ones): the runner makes each outer
 * iteration one pass over the replica's data, so the replicas meet only
 * where the master is evaluated and checkpoints are taken. */
#define RULE_STEPS_PER_PASS 0

/* Where a rule runs across MPI ranks (docs/mpi.md): its collectives are
 * all-reduces and agreements (anywhere), or also exchanges (comm_exchange
 * gathers every vector on the host) or peer requests (comm_peer_net.c, host
 * vectors): CPUs only. */
enum rule_net { NET_NONE = 0, NET_ANY, NET_CPU };

typedef struct coupling_rule {
    const char *name;
    enum rule_net net;
    int (*init)(replica *r, char *err, size_t errlen);
    int (*steps_per_sync)(const job_config *cfg);
    void (*begin)(replica *r);   /* start of outer iteration r->k */
    void (*step)(replica *r);    /* r->model.grads holds the new gradient */
    /* End of outer iteration r->k: 0, or -1 when the comm was aborted (the
     * rule stops; the runner reports why). */
    int (*sync)(replica *r);
    float *(*weights)(replica *r);
    /* The vectors (nparams floats each) that, with the BN statistics, are the
     * replica's whole state at an outer-iteration boundary: what a checkpoint
     * saves and a resume restores. Returns how many (at most RULE_MAX_STATE). */
    int (*state)(replica *r, const char **names, float **bufs);
    /* How many vectors of nparams floats init allocates in replica `id`'s
     * context memory (its state, scratch and comm_peer buffers): for memory
     * admission (daemon/job_memory.c), which sizes a job before it runs. */
    int (*vectors)(const job_config *cfg, int id);
    /* Optional (NULL: none). Host scalars that are part of that state
     * (GoSGD's weight a_i, gossip's clock): pointers to the rule's own
     * doubles, which a checkpoint saves in its metadata and a resume writes
     * back after init. Returns how many (at most RULE_MAX_SCALARS). */
    int (*scalars)(replica *r, const char **names, double **vals);
    /* Optional (NULL: none). The rule's own quantities for status and
     * metrics, as a JSON object's text (e.g. {"a":[0.25,0.25]}), on rank 0
     * at a progress or evaluation event. Returns the length written. */
    int (*describe)(replica *r, char *json, size_t len);
    /* Optional (NULL: the mean of `weights`). The master when it is not that
     * mean (LSGD's global leader, SGP's sum z / sum w): every rank calls it at
     * the same outer-iteration boundary; it returns a vector in the rank's
     * context memory, unchanged until the rank's next step, or NULL once the
     * comm was aborted. */
    const float *(*master)(replica *r);
    void (*free)(replica *r);
} coupling_rule;

/* The rule for cfg->algorithm.name, or NULL. */
const coupling_rule *coupling_find(const char *name);
/* Can this job's rule run across MPI ranks (its `net`), on GPUs or on
 * CPUs? */
int coupling_runs_across_ranks(const job_config *cfg, int on_gpus);

#endif
