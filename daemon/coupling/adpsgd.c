/* AD-PSGD (Lian et al. 2018; docs/algorithms.md), asynchronous: each replica
 * applies its latest gradient to its shared x_i, and the even ("active")
 * ranks then average with one odd ("passive") peer, x_i, x_j <- (x_i +
 * x_j) / 2, atomically for the pair (comm_peer_pair_average). The peer is
 * (i + d) mod n for an odd d drawn uniformly, so pairs lie on the bipartite
 * graph even-odd (n even, validated). The gradient is taken at a private
 * copy of x_i made after the replica's previous update, so it may be stale
 * by the exchanges that landed since: the paper's x_i - g(x_hat_i).
 * Master: the mean of the x_i. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "async.h"
#include "coupling.h"
#include "graph.h"
#include "rule_state.h"

typedef struct adpsgd_state {
    comm_peer *peer;  /* holds x_i, which peers average with */
    float *u;         /* momentum, the replica's own */
} adpsgd_state;

static int adpsgd_steps_per_sync(const job_config *cfg)
{
    (void)cfg;
    return RULE_STEPS_PER_PASS;
}

static int adpsgd_init(replica *r, char *err, size_t errlen)
{
    adpsgd_state *s = rule_state_new(r, sizeof *s, "AD-PSGD", err, errlen);
    if (!s)
        return -1;
    if (comm_peer_attach(r->comm, r->rank, &r->ctx, r->model.nparams, PEER_PAIR,
                         r->model.params, &s->peer, err, errlen) != 0)
        return -1;
    return rule_state_vectors(r, "AD-PSGD", RULE_VECTORS(&s->u), err, errlen);
}

/* The gradient's point: x_i as it is now (after a resume, as restored). */
static void take_copy(replica *r)
{
    adpsgd_state *s = r->rule_state;
    comm_peer_lock(s->peer, r->rank);
    backend_copy(&r->ctx, r->model.params, comm_peer_x(s->peer, r->rank),
                 r->model.nparams * sizeof(float));
    comm_peer_unlock(s->peer, r->rank, &r->ctx);
}

static void adpsgd_begin(replica *r) { take_copy(r); }

static void adpsgd_step(replica *r)
{
    adpsgd_state *s = r->rule_state;
    float *x = comm_peer_x(s->peer, r->rank);
    comm_peer_lock(s->peer, r->rank);
    rule_local_step(r, x, s->u, 1);
    comm_peer_unlock(s->peer, r->rank, &r->ctx);
    if (r->id % 2 == 0) {
        int d = 2 * (int)(async_uniform(r, 0) * (float)(r->n / 2)) + 1;
        if (d > r->n - 1)
            d = r->n - 1;
        double t0 = comm_now_s();
        comm_peer_pair_average(s->peer, r->rank, (r->id + d) % r->n, &r->ctx, NULL);
        r->sync_s += comm_now_s() - t0;
    }
    take_copy(r);
}

static int adpsgd_sync(replica *r) { return async_quiesce(r); }

static float *adpsgd_weights(replica *r)
{
    return comm_peer_x(((adpsgd_state *)r->rule_state)->peer, r->rank);
}

/* The shared x from the mean of the healthy replicas' (nobody averages at
 * a meeting point), and the gradient's point with it. */
static int adpsgd_reseed(replica *r, int bad)
{
    adpsgd_state *s = r->rule_state;
    if (rule_reseed_mean(r, bad, comm_peer_x(s->peer, r->rank), s->u) != 0)
        return -1;
    if (bad)
        take_copy(r);
    return 0;
}

/* u, and the shared x and a scratch of PEER_PAIR (adpsgd_init). */
static int adpsgd_vectors(const job_config *cfg, int id)
{
    return 3;
}

static int adpsgd_state_buffers(replica *r, const char **names, float **bufs)
{
    adpsgd_state *s = r->rule_state;
    names[0] = "x", bufs[0] = comm_peer_x(s->peer, r->rank);
    names[1] = "u", bufs[1] = s->u;
    return 2;
}

static int adpsgd_describe(replica *r, char *json, size_t len)
{
    adpsgd_state *s = r->rule_state;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "exchanges", ASYNC_COUNTS(s->peer, exchanges));
    return async_json_out(o, json, len);
}

static void adpsgd_free(replica *r)
{
    adpsgd_state *s = r->rule_state;
    if (s)
        async_release(r, s->peer, RULE_VECTORS(&s->u));
}

static void adpsgd_validate(job_config *cfg, rule_check *c)
{
    int n = cfg->algorithm.replicas;
    /* Peers at odd distances have the other parity only when n is even. */
    if (async_validate(cfg, c) && n % 2 != 0)
        rule_report(c, "algorithm.replicas: adpsgd pairs replicas on a bipartite graph (even "
                    "ranks with odd ones) and needs an even number of them, got %d", n);
}

const coupling_rule coupling_adpsgd = {
    .name = "adpsgd",
    .validate = adpsgd_validate,
    .net = NET_CPU,
    .init = adpsgd_init,
    .steps_per_sync = adpsgd_steps_per_sync,
    .begin = adpsgd_begin,
    .step = adpsgd_step,
    .sync = adpsgd_sync,
    .weights = adpsgd_weights,
    .state = adpsgd_state_buffers,
    .vectors = adpsgd_vectors,
    .describe = adpsgd_describe,
    .reseed = adpsgd_reseed,
    .free = adpsgd_free,
};
