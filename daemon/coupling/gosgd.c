/* GoSGD (Blot et al. 2016; docs/algorithms.md): every replica carries a
 * weight a_i (1/n at the start). After its local step, with probability p,
 * it halves a_i and pushes (x_i, a_i) to a peer j chosen uniformly; j
 * absorbs at its next step: x_j <- (a_j x_j + a_i x_i) / (a_j + a_i),
 * a_j <- a_j + a_i. The sum of the a_i, counting messages in flight, stays
 * 1; the master is sum_i a_i x_i.
 *
 * In-flight messages at a checkpoint: drained. Every pass ends with all
 * replicas past their last step (a barrier) and each absorbing its whole
 * mailbox, so at every evaluation and checkpoint nothing is in flight and
 * sum a_i = 1 holds over the saved a_i alone (rule.a in each replica's
 * file). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "async.h"
#include "coupling.h"
#include "graph.h"
#include "rule_state.h"

typedef struct gosgd_state {
    comm_peer *peer;
    float *u;       /* momentum, the replica's own */
    float *scaled;  /* the master's share n a_i x_i, then the master */
    double a;       /* a_i as of the last pass boundary (the checkpoint's) */
} gosgd_state;

static int gosgd_steps_per_sync(const job_config *cfg)
{
    (void)cfg;
    return RULE_STEPS_PER_PASS;
}

static int gosgd_init(replica *r, char *err, size_t errlen)
{
    gosgd_state *s = rule_state_new(r, sizeof *s, "GoSGD", err, errlen);
    if (!s)
        return -1;
    s->a = 1.0 / r->n;
    if (comm_peer_attach(r->comm, r->rank, &r->ctx, r->model.nparams, PEER_MAILBOX, NULL,
                         &s->peer, err, errlen) != 0)
        return -1;
    return rule_state_vectors(r, "GoSGD", RULE_VECTORS(&s->u, &s->scaled), err, errlen);
}

/* a_i from the last boundary: 1/n, or the checkpoint's after a resume. */
static void gosgd_begin(replica *r)
{
    gosgd_state *s = r->rule_state;
    comm_peer_set_weight(s->peer, r->rank, s->a);
}

static void gosgd_step(replica *r)
{
    gosgd_state *s = r->rule_state;
    float *x = r->model.params;
    rule_local_step(r, x, s->u, 1);
    double t0 = comm_now_s();
    comm_peer_absorb(s->peer, r->rank, &r->ctx, x, 0);
    if (async_uniform(r, 0) < (float)r->cfg->algorithm.p) {
        int j = async_other(r, async_uniform(r, 1));
        double a = comm_peer_weight(s->peer, r->rank) / 2.0;
        comm_peer_set_weight(s->peer, r->rank, a);
        comm_peer_push(s->peer, r->rank, j, &r->ctx, x, a);
    }
    r->sync_s += comm_now_s() - t0;
}

static int gosgd_sync(replica *r)
{
    gosgd_state *s = r->rule_state;
    if (async_quiesce(r) != 0)
        return -1;
    /* Nobody pushes any more this pass: empty the box for good. */
    comm_peer_absorb(s->peer, r->rank, &r->ctx, r->model.params, 1);
    s->a = comm_peer_weight(s->peer, r->rank);
    return 0;
}

static float *gosgd_weights(replica *r) { return r->model.params; }

/* a_i stays (the weights' sum is the master's), and so does its mailbox,
 * which the sync then absorbs: the healthy peers' pushes. */
static int gosgd_reseed(replica *r, int bad)
{
    return rule_reseed_mean(r, bad, r->model.params, ((gosgd_state *)r->rule_state)->u);
}

/* sum_i a_i x_i = the mean over replicas of n a_i x_i. */
static const float *gosgd_master(replica *r)
{
    gosgd_state *s = r->rule_state;
    size_t n = r->model.nparams;
    backend_copy(&r->ctx, s->scaled, r->model.params, n * sizeof(float));
    vec_scale(&r->ctx, n, (float)(r->n * s->a), s->scaled);
    const float *m = comm_allreduce_mean(r->comm, r->rank, &r->ctx, s->scaled, n);
    if (!m)
        return NULL;
    /* The all-reduce result lasts only until the next collective. */
    backend_copy(&r->ctx, s->scaled, m, n * sizeof(float));
    return s->scaled;
}

/* u, scaled, and the mailbox of PEER_MAILBOX (gosgd_init). */
static int gosgd_vectors(const job_config *cfg, int id)
{
    return 3;
}

static int gosgd_state_buffers(replica *r, const char **names, float **bufs)
{
    gosgd_state *s = r->rule_state;
    names[0] = "x", bufs[0] = r->model.params;
    names[1] = "u", bufs[1] = s->u;
    return 2;
}

static int gosgd_scalars(replica *r, const char **names, double **vals)
{
    gosgd_state *s = r->rule_state;
    names[0] = "a", vals[0] = &s->a;
    return 1;
}

static int gosgd_describe(replica *r, char *json, size_t len)
{
    gosgd_state *s = r->rule_state;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "a", async_json_per_replica(s->peer, comm_peer_weight));
    /* Across MPI ranks only this process's part is known here. */
    if (!r->comm->net)
        cJSON_AddNumberToObject(o, "sum_a", comm_peer_total_weight(s->peer));
    cJSON_AddItemToObject(o, "pushes", ASYNC_COUNTS(s->peer, pushes));
    return async_json_out(o, json, len);
}

static void gosgd_free(replica *r)
{
    gosgd_state *s = r->rule_state;
    if (s)
        async_release(r, s->peer, RULE_VECTORS(&s->u, &s->scaled));
}

static void gosgd_validate(job_config *cfg, rule_check *c) { async_validate(cfg, c); }

static const char *const gosgd_fields[] = {"algorithm.p", NULL};

const coupling_rule coupling_gosgd = {
    .name = "gosgd",
    .fields = gosgd_fields,
    .validate = gosgd_validate,
    .net = NET_CPU,
    .init = gosgd_init,
    .steps_per_sync = gosgd_steps_per_sync,
    .begin = gosgd_begin,
    .step = gosgd_step,
    .sync = gosgd_sync,
    .weights = gosgd_weights,
    .master = gosgd_master,
    .state = gosgd_state_buffers,
    .vectors = gosgd_vectors,
    .scalars = gosgd_scalars,
    .describe = gosgd_describe,
    .reseed = gosgd_reseed,
    .free = gosgd_free,
};
