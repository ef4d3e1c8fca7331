/* D-PSGD (Lian et al. 2017; docs/algorithms.md): every step
 *   x_i <- sum_j W_ij x_j - eta step_i(g_i(x_i))
 * with W doubly stochastic: a ring (1/3 self and each neighbour) or the
 * bipartite exponential graph (x_i <- (x_i + x_peer) / 2, one peer a round,
 * rotating). The pre-step iterate is mixed, as in the paper; with
 * mix_after_step the step comes first, as the SGP code does. Momentum
 * buffers stay each replica's own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coupling.h"
#include "graph.h"
#include "rule_state.h"

typedef struct dpsgd_state {
    float *u;   /* momentum, never mixed */
    float *mix; /* the mixed iterate, while the peers still read ours */
    rule_peers peers;
    int ring;
} dpsgd_state;

static int dpsgd_steps_per_sync(const job_config *cfg)
{
    (void)cfg;
    return 1;
}

static int dpsgd_init(replica *r, char *err, size_t errlen)
{
    dpsgd_state *s = rule_state_new(r, sizeof *s, "D-PSGD", err, errlen);
    if (!s)
        return -1;
    s->ring = strcmp(r->cfg->algorithm.graph, "ring") == 0;
    return rule_state_vectors(r, "D-PSGD", RULE_VECTORS(&s->u, &s->mix), err, errlen);
}

static void dpsgd_begin(replica *r) { (void)r; }

/* Everything happens in sync, where the peers' iterates can be read. */
static void dpsgd_step(replica *r) { (void)r; }

/* x_i <- sum_j W_ij x_j for this round's graph. 0, or -1 once aborted. */
static int dpsgd_mix(replica *r)
{
    dpsgd_state *s = r->rule_state;
    const float *const *x =
        comm_exchange(r->comm, r->rank, &r->ctx, r->model.params, r->model.nparams);
    if (!x)
        return -1;
    int i = r->id, n = r->n;
    const float *xs[3];
    int k = 0;
    if (s->ring) {
        xs[k++] = rule_peer(r, &s->peers, 0, (i + n - 1) % n);
        xs[k++] = x[i];
        xs[k++] = rule_peer(r, &s->peers, 1, (i + 1) % n);
    } else {
        xs[k++] = x[i];
        xs[k++] = rule_peer(r, &s->peers, 0, graph_bipartite_peer(i, n, r->k - 1));
    }
    if (!xs[0] || !xs[k - 1] || !xs[1]) {
        comm_abort(r->comm, "replica %d: D-PSGD's peer copies: %s", i, r->ctx.err);
        return -1;
    }
    vec_mean(&r->ctx, r->model.nparams, xs, k, s->mix);
    if (comm_exchange_end(r->comm, r->rank, &r->ctx) != 0)
        return -1;
    backend_copy(&r->ctx, r->model.params, s->mix, r->model.nparams * sizeof(float));
    return 0;
}

static int dpsgd_sync(replica *r)
{
    dpsgd_state *s = r->rule_state;
    int after = r->cfg->algorithm.mix_after_step;
    if (after)
        rule_local_step(r, r->model.params, s->u, 1);
    else /* weight decay belongs to g_i(x_i), at the iterate before the mix */
        rule_fold_decay(r, r->model.params);
    double t0 = comm_now_s();
    int rc = dpsgd_mix(r);
    r->sync_s += comm_now_s() - t0;
    if (rc != 0)
        return -1;
    if (!after)
        rule_local_step(r, r->model.params, s->u, 0);
    return 0;
}

static float *dpsgd_weights(replica *r) { return r->model.params; }

static int dpsgd_reseed(replica *r, int bad)
{
    return rule_reseed_mean(r, bad, r->model.params, ((dpsgd_state *)r->rule_state)->u);
}

/* u and mix (dpsgd_init); a copy of a peer on another device is not counted. */
static int dpsgd_vectors(const job_config *cfg, int id)
{
    return 2;
}

static int dpsgd_state_buffers(replica *r, const char **names, float **bufs)
{
    dpsgd_state *s = r->rule_state;
    names[0] = "x", bufs[0] = r->model.params;
    names[1] = "u", bufs[1] = s->u;
    return 2;
}

static void dpsgd_free(replica *r)
{
    dpsgd_state *s = r->rule_state;
    if (s)
        rule_state_free(r, &s->peers, RULE_VECTORS(&s->u, &s->mix));
}

static void dpsgd_validate(job_config *cfg, rule_check *c)
{
    int n = cfg->algorithm.replicas;
    if (rule_field_state(c, "algorithm.replicas") == RULE_FIELD_BAD)
        return;
    if (strcmp(cfg->algorithm.graph, "ring") == 0 && n < 3)
        rule_report(c, "algorithm.replicas: dpsgd on a ring needs >= 3 replicas, got %d", n);
    if (strcmp(cfg->algorithm.graph, "bipartite-exponential") == 0 && n % 2 != 0)
        rule_report(c, "algorithm.replicas: dpsgd on graph bipartite-exponential needs an even "
                    "number of replicas, got %d", n);
}

static const char *const dpsgd_fields[] = {"algorithm.graph", "algorithm.mix_after_step", NULL};

const coupling_rule coupling_dpsgd = {
    .name = "dpsgd",
    .fields = dpsgd_fields,
    .validate = dpsgd_validate,
    .net = NET_CPU,
    .init = dpsgd_init,
    .steps_per_sync = dpsgd_steps_per_sync,
    .begin = dpsgd_begin,
    .step = dpsgd_step,
    .sync = dpsgd_sync,
    .weights = dpsgd_weights,
    .state = dpsgd_state_buffers,
    .vectors = dpsgd_vectors,
    .reseed = dpsgd_reseed,
    .free = dpsgd_free,
};
