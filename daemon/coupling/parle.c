/* Parle (docs/algorithms.md), as the paper's multi-GPU code computes it:
 * L Entropy-SGD inner steps on y anchored at x, then x moves along
 * d = (x - z) + rho_k (x - zbar) with its own Nesterov momentum u.
 * With L = 0 it is Elastic-SGD, and with n = 1 or rho = 0 plain Nesterov SGD
 * with weight decay (the same update with d = g + lambda x). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "coupling.h"
#include "graph.h"
#include "rule_state.h"
#include "parle.h"

extern const coupling_rule coupling_parle;

/* gamma_k and rho_k grow by (1 + growth/nb) per outer iteration, capped. */
static float schedule_growth(double start, double cap, double growth, long nb, long k)
{
    double v = start * pow(1.0 + growth / (double)nb, (double)k);
    return (float)(v < cap ? v : cap);
}

void parle_schedule(const job_config *cfg, long nb, long k, float *gamma, float *rho)
{
    *gamma = schedule_growth(cfg->algorithm.gamma, cfg->algorithm.gamma_max,
                             cfg->algorithm.growth, nb, k);
    *rho = schedule_growth(cfg->algorithm.rho, cfg->algorithm.rho_max, cfg->algorithm.growth,
                           nb, k);
}

void parle_report(const job_config *cfg, const coupling_rule *rule, int replicas, float gamma,
                  float rho, double *gamma_out, double *rho_out)
{
    int parle = coupling_family(rule) == &coupling_parle;
    *gamma_out = parle && cfg->algorithm.L > 0 ? gamma : 0;
    *rho_out = parle && replicas > 1 ? rho : 0;
}

static int parle_steps_per_sync(const job_config *cfg) { return cfg->algorithm.L > 0 ? cfg->algorithm.L : 1; }

static int parle_init(replica *r, char *err, size_t errlen)
{
    parle_state *s = rule_state_new(r, sizeof *s, "Parle", err, errlen);
    if (!s)
        return -1;
    /* With L = 0 (plain SGD) x is the model's own weights, and z, v unused. */
    int inner = r->cfg->algorithm.L > 0;
    if (rule_state_vectors(r, "Parle", RULE_VECTORS(&s->u, inner ? &s->x : NULL,
                                                    inner ? &s->z : NULL, inner ? &s->v : NULL),
                           err, errlen) != 0)
        return -1;
    if (inner)
        backend_copy(&r->ctx, s->x, r->model.params, r->model.nparams * sizeof(float));
    else
        s->x = r->model.params;
    return 0;
}

/* x_hat = x ; y = x ; z = x */
static void parle_begin(replica *r)
{
    parle_state *s = r->rule_state;
    if (r->cfg->algorithm.L == 0)
        return;
    size_t bytes = r->model.nparams * sizeof(float);
    backend_copy(&r->ctx, r->model.params, s->x, bytes);
    backend_copy(&r->ctx, s->z, s->x, bytes);
}

static void parle_step(replica *r)
{
    parle_state *s = r->rule_state;
    if (r->cfg->algorithm.L == 0)
        return; /* the update needs the mean of x: done in sync */
    vec_parle_inner(&r->ctx, r->model.nparams, r->inner_lr, (float)r->cfg->optim.momentum,
                    (float)r->cfg->optim.weight_decay, r->gamma, (float)r->cfg->algorithm.alpha,
                    r->model.params, s->z, s->v, r->model.grads, s->x);
}

/* The all-reduce, timed: that is the replica's time in sync. On a GPU the
 * next outer iteration's first batch is already uploading on the copy
 * stream (the runner staged it before calling sync), so it moves while the
 * average runs: the copy waits only for the step that last read its slot,
 * and the next step's compute waits for both, the comm's `done` event and
 * the copy's (docs/gpu.md "Batches"). */
static const float *parle_mean(replica *r, const float *vec)
{
    double t0 = comm_now_s();
    const float *mean = comm_allreduce_mean(r->comm, r->rank, &r->ctx, vec, r->model.nparams);
    r->sync_s += comm_now_s() - t0;
    return mean;
}

static int parle_sync(replica *r)
{
    parle_state *s = r->rule_state;
    const job_config *cfg = r->cfg;
    size_t n = r->model.nparams;
    float mu = (float)cfg->optim.momentum, wd = (float)cfg->optim.weight_decay;
    if (cfg->algorithm.L > 0) {
        const float *zbar = parle_mean(r, s->z);
        if (!zbar)
            return -1;
        vec_parle_outer(&r->ctx, n, r->lr, mu, r->rho, s->x, s->u, s->x, s->z, zbar);
    } else if (r->n > 1 && r->rho > 0.0f) {
        const float *xbar = parle_mean(r, s->x);
        if (!xbar)
            return -1;
        vec_elastic_step(&r->ctx, n, r->lr, mu, wd, r->rho, s->x, s->u, r->model.grads, xbar);
    } else {
        vec_sgd_momentum(&r->ctx, n, r->lr, mu, wd, cfg->optim.nesterov, s->x, s->u,
                         r->model.grads);
    }
    return 0;
}

static float *parle_weights(replica *r) { return ((parle_state *)r->rule_state)->x; }

/* From the reference: the mean of the healthy replicas' x, which is what
 * the sync pulls toward; momenta zeroed, and z and y restart at x. */
static int parle_reseed(replica *r, int bad)
{
    parle_state *s = r->rule_state;
    size_t bytes = r->model.nparams * sizeof(float);
    if (rule_reseed_mean(r, bad, s->x, s->u) != 0)
        return -1;
    if (!bad || r->cfg->algorithm.L == 0)
        return 0;
    backend_zero(&r->ctx, s->v, bytes);
    backend_copy(&r->ctx, s->z, s->x, bytes);
    backend_copy(&r->ctx, r->model.params, s->x, bytes);
    return 0;
}

/* u; and x, z, v with inner steps (parle_init). */
static int parle_vectors(const job_config *cfg, int id)
{
    return cfg->algorithm.L > 0 ? 4 : 1;
}

static int parle_state_buffers(replica *r, const char **names, float **bufs)
{
    parle_state *s = r->rule_state;
    int n = 0;
    names[n] = "x", bufs[n++] = s->x;
    names[n] = "u", bufs[n++] = s->u;
    if (s->v)
        names[n] = "v", bufs[n++] = s->v;
    return n;
}

static void parle_free(replica *r)
{
    parle_state *s = r->rule_state;
    if (s)
        rule_state_free(r, NULL, RULE_VECTORS(&s->u, s->x != r->model.params ? &s->x : NULL,
                                              &s->z, &s->v));
}

/* Independent starts are the Parle reference's; every other rule starts equal. */
static void independent_init(job_config *cfg, rule_check *c)
{
    if (rule_field_state(c, "algorithm.init") == RULE_FIELD_ABSENT)
        strcpy(cfg->algorithm.init, "independent");
}

/* Parle and its exact special cases (docs/algorithms.md): the same code,
 * each its own name and validation; parle and entropy-sgd take inner steps,
 * sgd and entropy-sgd are one replica, and entropy-sgd has no pull (rho 0). */
#define PARLE_RULE(NAME, INNER, VALIDATE, ...)                                               \
    {.name = NAME, .family = &coupling_parle, .inner_steps = INNER, .fixed = {__VA_ARGS__},  \
     .validate = VALIDATE, .net = NET_ANY, .init = parle_init,                               \
     .steps_per_sync = parle_steps_per_sync, .begin = parle_begin, .step = parle_step,       \
     .sync = parle_sync, .weights = parle_weights, .state = parle_state_buffers,             \
     .vectors = parle_vectors, .reseed = parle_reseed, .free = parle_free}

const coupling_rule coupling_parle = PARLE_RULE("parle", 1, independent_init, {NULL, 0});
const coupling_rule coupling_elastic_sgd = PARLE_RULE("elastic-sgd", 0, independent_init, {NULL, 0});
const coupling_rule coupling_entropy_sgd = PARLE_RULE("entropy-sgd", 1, independent_init,
                                                      {"algorithm.replicas", 1},
                                                      {"algorithm.rho", 0});
const coupling_rule coupling_sgd = PARLE_RULE("sgd", 0, NULL, {"algorithm.replicas", 1});
