/* A coupling rule: how replicas turn gradients into updates and talk to each
 * other (design.md §3). One file per algorithm; the runner drives them all
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

typedef struct coupling_rule {
    const char *name;
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
    void (*free)(replica *r);
} coupling_rule;

/* The rule for cfg->algorithm.name, or NULL. */
const coupling_rule *coupling_find(const char *name);

#endif
