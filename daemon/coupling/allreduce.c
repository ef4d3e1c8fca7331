/* All-reduce SGD, bulk-synchronous (docs/algorithms.md): every step the
 * replicas average their gradients, then all take the same local step from
 * the same weights, so they stay identical (one SGD run with batch n b,
 * but for BN statistics and dropout masks, which stay each replica's). The
 * validator refuses init "independent": the replicas must start equal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coupling.h"
#include "graph.h"
#include "rule_state.h"

typedef struct allreduce_state {
    float *u; /* momentum, the same on every replica */
} allreduce_state;

static int allreduce_steps_per_sync(const job_config *cfg)
{
    (void)cfg;
    return 1;
}

static int allreduce_init(replica *r, char *err, size_t errlen)
{
    allreduce_state *s = rule_state_new(r, sizeof *s, "all-reduce", err, errlen);
    return s ? rule_state_vectors(r, "all-reduce", RULE_VECTORS(&s->u), err, errlen) : -1;
}

static void allreduce_begin(replica *r) { (void)r; }

/* The step needs the mean gradient: it is taken in sync. */
static void allreduce_step(replica *r) { (void)r; }

static int allreduce_sync(replica *r)
{
    allreduce_state *s = r->rule_state;
    double t0 = comm_now_s();
    const float *g = comm_allreduce_mean(r->comm, r->rank, &r->ctx, r->model.grads,
                                         r->model.nparams);
    r->sync_s += comm_now_s() - t0;
    if (!g)
        return -1;
    const job_config *cfg = r->cfg;
    vec_sgd_momentum(&r->ctx, r->model.nparams, r->lr, (float)cfg->optim.momentum,
                     (float)cfg->optim.weight_decay, cfg->optim.nesterov, r->model.params, s->u,
                     g);
    return 0;
}

static float *allreduce_weights(replica *r) { return r->model.params; }

/* The replicas are identical: a healthy one's weights and momentum, bit for
 * bit, so they stay so. */
static int allreduce_reseed(replica *r, int bad)
{
    allreduce_state *s = r->rule_state;
    return coupling_consensus(r, bad, r->model.params, 1) == 0 &&
           coupling_consensus(r, bad, s->u, 1) == 0 ? 0 : -1;
}

/* Replica 0's weights, which every replica holds bit for bit: the mean of
 * identical vectors could round them. */
static const float *allreduce_master(replica *r) { return r->model.params; }

/* u (allreduce_init). */
static int allreduce_vectors(const job_config *cfg, int id)
{
    return 1;
}

static int allreduce_state_buffers(replica *r, const char **names, float **bufs)
{
    allreduce_state *s = r->rule_state;
    names[0] = "x", bufs[0] = r->model.params;
    names[1] = "u", bufs[1] = s->u;
    return 2;
}

static void allreduce_free(replica *r)
{
    allreduce_state *s = r->rule_state;
    if (s)
        rule_state_free(r, NULL, RULE_VECTORS(&s->u));
}

static void allreduce_validate(job_config *cfg, rule_check *c)
{
    if (strcmp(cfg->algorithm.init, "independent") == 0)
        rule_report(c, "algorithm.init: allreduce needs \"same\": its replicas take identical "
                    "steps and must start equal");
}

const coupling_rule coupling_allreduce = {
    .name = "allreduce",
    .validate = allreduce_validate,
    .net = NET_ANY,
    .init = allreduce_init,
    .steps_per_sync = allreduce_steps_per_sync,
    .begin = allreduce_begin,
    .step = allreduce_step,
    .sync = allreduce_sync,
    .weights = allreduce_weights,
    .state = allreduce_state_buffers,
    .vectors = allreduce_vectors,
    .master = allreduce_master,
    .reseed = allreduce_reseed,
    .free = allreduce_free,
};
