/* Elastic Averaging SGD (Zhang et al. 2015; docs/algorithms.md) with a
 * centre variable c (comm_peer's, in replica 0's memory; it starts as
 * replica 0's weights). Every replica takes its own local steps; every tau
 * of them:
 *   sync:  all at once, from the x_i before they move:
 *          x_i <- x_i - alpha (x_i - c),  c <- c + beta (mean_i x_i - c),
 *          alpha = beta / n (the paper's alpha = lr rho, beta = n alpha);
 *          at step t that is a multiple of tau the move comes first and the
 *          local step then applies g(x_t), as the paper's equations do.
 *   async: one replica at a time, after its local step (Theano-MPI's):
 *          x_i <- x_i - a (x_i - c),  c <- c + a (x_i - c),  a = 1/2.
 * Master: c. Across MPI ranks every process keeps a copy of c, broadcast
 * from replica 0's at the start; sync moves every copy alike at every
 * elastic step, since xbar is the mean over all of them; async averages
 * with replica 0's process's c alone (a peer request), the others' copies
 * unused. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"
#include "coupling.h"
#include "graph.h"
#include "rule_state.h"

typedef struct easgd_state {
    comm_peer *peer;  /* holds the centre */
    float *u;         /* momentum, the replica's own */
    int async;
} easgd_state;

static int easgd_steps_per_sync(const job_config *cfg)
{
    (void)cfg;
    return RULE_STEPS_PER_PASS;
}

static int easgd_init(replica *r, char *err, size_t errlen)
{
    easgd_state *s = rule_state_new(r, sizeof *s, "EASGD", err, errlen);
    if (!s)
        return -1;
    s->async = strcmp(r->cfg->algorithm.variant, "async") == 0;
    unsigned parts = PEER_CENTRE | (s->async ? PEER_CENTRE_ASYNC : 0);
    if (comm_peer_attach(r->comm, r->rank, &r->ctx, r->model.nparams, parts, r->model.params,
                         &s->peer, err, errlen) != 0)
        return -1;
    return rule_state_vectors(r, "EASGD", RULE_VECTORS(&s->u), err, errlen);
}

static void easgd_begin(replica *r) { (void)r; }

/* A failing replica (step_meets) keeps the synchronous elastic steps, from
 * the centre: its own x would move c. It takes no local step and no
 * asynchronous exchange. */
static void easgd_step(replica *r)
{
    easgd_state *s = r->rule_state;
    float *x = r->model.params;
    int exchange = r->step % r->cfg->algorithm.tau == 0;
    if (r->failing && exchange && !s->async)
        comm_peer_centre_copy(s->peer, r->rank, &r->ctx, x);
    if (r->failing && (s->async || !exchange))
        return;
    double t0 = comm_now_s();
    if (exchange && !s->async) {
        float beta = (float)r->cfg->algorithm.beta;
        /* -1: the comm was aborted; the runner leaves at its next check. */
        if (comm_peer_centre_elastic(s->peer, r->rank, &r->ctx, x, beta / (float)r->n, beta) != 0)
            return;
        PEER_COUNT(s->peer, r->rank, exchanges, 1);
    }
    r->sync_s += comm_now_s() - t0;
    if (r->failing)
        return;
    rule_local_step(r, x, s->u, 1);
    if (exchange && s->async) {
        t0 = comm_now_s();
        comm_peer_centre_average(s->peer, r->rank, &r->ctx, x);
        PEER_COUNT(s->peer, r->rank, exchanges, 1);
        r->sync_s += comm_now_s() - t0;
    }
}

static int easgd_sync(replica *r) { return async_quiesce(r); }

static float *easgd_weights(replica *r) { return r->model.params; }

/* From the centre, where this process's copy is it: in one process, or with
 * the synchronous variant, whose elastic steps move every process's copy
 * alike. The asynchronous variant across processes averages with replica
 * 0's process's centre alone: there, the mean of the healthy replicas. */
static int easgd_reseed(replica *r, int bad)
{
    easgd_state *s = r->rule_state;
    if (r->comm->net && s->async)
        return rule_reseed_mean(r, bad, r->model.params, s->u);
    if (comm_aborted(r->comm))
        return -1;
    if (bad) {
        comm_peer_centre_copy(s->peer, r->rank, &r->ctx, r->model.params);
        backend_zero(&r->ctx, s->u, r->model.nparams * sizeof(float));
    }
    return 0;
}

static const float *easgd_master(replica *r)
{
    return comm_peer_centre(((easgd_state *)r->rule_state)->peer);
}

/* Replica 0's file also holds the centre. */
/* u, and the centre in replica 0's memory (easgd_init, PEER_CENTRE). */
static int easgd_vectors(const job_config *cfg, int id)
{
    return id == 0 ? 2 : 1;
}

static int easgd_state_buffers(replica *r, const char **names, float **bufs)
{
    easgd_state *s = r->rule_state;
    names[0] = "x", bufs[0] = r->model.params;
    names[1] = "u", bufs[1] = s->u;
    if (r->rank != 0)
        return 2;
    names[2] = "centre", bufs[2] = comm_peer_centre(s->peer);
    return 3;
}

static int easgd_describe(replica *r, char *json, size_t len)
{
    easgd_state *s = r->rule_state;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "beta", r->cfg->algorithm.beta);
    /* This process's replicas (all of them but across MPI ranks). */
    cJSON_AddItemToObject(o, "exchanges", ASYNC_COUNTS(s->peer, exchanges));
    return async_json_out(o, json, len);
}

static void easgd_free(replica *r)
{
    easgd_state *s = r->rule_state;
    if (s)
        async_release(r, s->peer, RULE_VECTORS(&s->u));
}

/* EASGD's rho is the paper's: alpha = lr rho, beta = n alpha <= 1. */
static void easgd_validate(job_config *cfg, rule_check *c)
{
    int n = cfg->algorithm.replicas, n_ok = async_validate(cfg, c);
    if (rule_field_state(c, "algorithm.rho") != RULE_FIELD_SET)
        return;
    if (rule_field_state(c, "algorithm.beta") != RULE_FIELD_ABSENT) {
        rule_report(c, "algorithm.rho: give easgd either beta or rho (beta = n lr rho), not both");
        return;
    }
    double beta = n * job_lr_at_epoch(cfg, 0) * cfg->algorithm.rho;
    if (n_ok && !(beta > 0.0 && beta <= 1.0))
        rule_report(c, "algorithm.rho: easgd needs beta = replicas * lr * rho in (0, 1] (its "
                    "stability condition), got %d * %g * %g = %g", n, job_lr_at_epoch(cfg, 0),
                    cfg->algorithm.rho, beta);
    else
        cfg->algorithm.beta = beta;
}

static const char *const easgd_fields[] = {"algorithm.tau", "algorithm.beta", "algorithm.variant", NULL};

const coupling_rule coupling_easgd = {
    .name = "easgd",
    .fields = easgd_fields,
    .validate = easgd_validate,
    .net = NET_CPU,
    .init = easgd_init,
    .steps_per_sync = easgd_steps_per_sync,
    .begin = easgd_begin,
    .step = easgd_step,
    .sync = easgd_sync,
    .weights = easgd_weights,
    .master = easgd_master,
    .state = easgd_state_buffers,
    .vectors = easgd_vectors,
    .scalars = NULL,
    .describe = easgd_describe,
    .reseed = easgd_reseed,
    .step_meets = 1,
    .free = easgd_free,
};
