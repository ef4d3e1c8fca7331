/* Parle (design.md §8), as the paper's multi-GPU code computes it:
 * L Entropy-SGD inner steps on y anchored at x, then x moves along
 * d = (x - z) + rho_k (x - zbar) with its own Nesterov momentum u.
 * With L = 0 it is Elastic-SGD, and with n = 1 or rho = 0 plain Nesterov SGD
 * with weight decay (the same update with d = g + lambda x). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coupling.h"
#include "parle.h"


static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parle_steps_per_sync(const job_config *cfg) { return cfg->algorithm.L > 0 ? cfg->algorithm.L : 1; }

static int parle_init(replica *r, char *err, size_t errlen)
{
    size_t n = r->model.nparams;
    parle_state *s = calloc(1, sizeof(*s));
    if (!s)
        goto oom;
    r->rule_state = s;
    if (!(s->u = calloc(n, sizeof(float))))
        goto oom;
    if (r->cfg->algorithm.L == 0) {
        s->x = r->model.params;
        return 0;
    }
    s->x = malloc(n * sizeof(float));
    s->z = malloc(n * sizeof(float));
    s->v = calloc(n, sizeof(float));
    if (!s->x || !s->z || !s->v)
        goto oom;
    memcpy(s->x, r->model.params, n * sizeof(float));
    return 0;
oom:
    snprintf(err, errlen, "replica %d: out of memory for Parle's buffers", r->rank);
    return -1;
}

/* x_hat = x ; y = x ; z = x */
static void parle_begin(replica *r)
{
    parle_state *s = r->rule_state;
    if (r->cfg->algorithm.L == 0)
        return;
    size_t bytes = r->model.nparams * sizeof(float);
    memcpy(r->model.params, s->x, bytes);
    memcpy(s->z, s->x, bytes);
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

/* The all-reduce, timed: that is the replica's time in sync. */
static const float *parle_mean(replica *r, const float *vec)
{
    double t0 = now_s();
    const float *mean = comm_allreduce_mean(r->comm, r->rank, &r->ctx, vec, r->model.nparams);
    r->sync_s += now_s() - t0;
    return mean;
}

static void parle_sync(replica *r)
{
    parle_state *s = r->rule_state;
    const job_config *cfg = r->cfg;
    size_t n = r->model.nparams;
    float mu = (float)cfg->optim.momentum, wd = (float)cfg->optim.weight_decay;
    if (cfg->algorithm.L > 0) {
        const float *zbar = parle_mean(r, s->z);
        vec_parle_outer(&r->ctx, n, r->lr, mu, r->rho, s->x, s->u, s->x, s->z, zbar);
    } else if (r->n > 1 && r->rho > 0.0f) {
        const float *xbar = parle_mean(r, s->x);
        vec_elastic_step(&r->ctx, n, r->lr, mu, wd, r->rho, s->x, s->u, r->model.grads, xbar);
    } else {
        vec_sgd_momentum(&r->ctx, n, r->lr, mu, wd, cfg->optim.nesterov, s->x, s->u,
                         r->model.grads);
    }
}

static float *parle_weights(replica *r) { return ((parle_state *)r->rule_state)->x; }

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
    if (!s)
        return;
    if (s->x != r->model.params)
        free(s->x);
    free(s->z);
    free(s->v);
    free(s->u);
    free(s);
    r->rule_state = NULL;
}

const coupling_rule coupling_parle = {
    .name = "parle",
    .init = parle_init,
    .steps_per_sync = parle_steps_per_sync,
    .begin = parle_begin,
    .step = parle_step,
    .sync = parle_sync,
    .weights = parle_weights,
    .state = parle_state_buffers,
    .free = parle_free,
};
