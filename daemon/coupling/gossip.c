/* Pairwise gossip averaging, one-sided (the dpwa design; docs/algorithms.md).
 * Each replica publishes (x_i, clock_i, loss_i) before its local step;
 * after it, with probability fetch_probability, it copies a peer's newest
 * whole snapshot and moves toward it:
 *   x_i <- (1 - f) x_i + f x_j,   clock_i <- (1 - f) clock_i + f clock_j
 * with f = value (constant), clock_j / (clock_i + clock_j) (clock) or
 * loss_i / (loss_i + loss_j) (loss), times loss_i / divergence_threshold
 * when loss_i is below a threshold > 0. The peer is untouched (this is not
 * mass-conserving). clock_i counts steps; loss_i is the mean of the last 10
 * mini-batch losses. The peer is the argmax over j != i of score_j plus a
 * uniform draw in [10, 1000): a score starts at 1000, gains 10 on a fetch
 * (up to 1000) and loses 100 when a snapshot could not be had within
 * timeout_ms (down to 10). Master: the mean of the replicas. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"
#include "coupling.h"
#include "graph.h"
#include "rule_state.h"

enum { LOSS_WINDOW = 10, SCORE_MAX = 1000, SCORE_MIN = 10, SCORE_UP = 10, SCORE_DOWN = 100 };

typedef struct gossip_state {
    comm_peer *peer;
    float *u;        /* momentum, the replica's own */
    float *fetched;  /* the peer's snapshot, copied here */
    double clock;
    double losses[LOSS_WINDOW];
    int nlosses, next;
    /* The loss window at the last pass boundary (what a checkpoint saves:
     * its mean and length), from which every pass starts. */
    double loss_mean, loss_count;
} gossip_state;

static int gossip_steps_per_sync(const job_config *cfg)
{
    (void)cfg;
    return RULE_STEPS_PER_PASS;
}

static int gossip_init(replica *r, char *err, size_t errlen)
{
    gossip_state *s = rule_state_new(r, sizeof *s, "gossip", err, errlen);
    if (!s)
        return -1;
    if (comm_peer_attach(r->comm, r->rank, &r->ctx, r->model.nparams, PEER_SNAPSHOT, NULL,
                         &s->peer, err, errlen) != 0)
        return -1;
    if (rule_state_vectors(r, "gossip", RULE_VECTORS(&s->u, &s->fetched), err, errlen) != 0)
        return -1;
    for (int j = 0; j < r->n; j++)
        comm_peer_set_score(s->peer, r->rank, j, SCORE_MAX);
    return 0;
}

/* NaN while no loss is known yet. */
static double loss_now(const gossip_state *s)
{
    double sum = 0.0;
    for (int i = 0; i < s->nlosses; i++)
        sum += s->losses[i];
    return s->nlosses ? sum / s->nlosses : NAN;
}

/* Every pass starts from the boundary's window (so a resumed run goes on as
 * the uninterrupted one) and publishes at once, so that peers do not wait
 * for this replica's first step. */
static void gossip_begin(replica *r)
{
    gossip_state *s = r->rule_state;
    s->nlosses = (int)s->loss_count;
    s->next = s->nlosses % LOSS_WINDOW;
    for (int i = 0; i < s->nlosses; i++)
        s->losses[i] = s->loss_mean;
    comm_peer_publish(s->peer, r->rank, &r->ctx, r->model.params, s->clock, loss_now(s));
}

/* The interpolation weight toward a peer with snapshot m. */
static double weight_toward(const replica *r, const gossip_state *s, const peer_meta *m)
{
    const job_config *cfg = r->cfg;
    double f = cfg->algorithm.value, loss = loss_now(s);
    const char *how = cfg->algorithm.interpolation;
    if (strcmp(how, "clock") == 0 && s->clock + m->clock > 0.0)
        f = m->clock / (s->clock + m->clock);
    else if (strcmp(how, "loss") == 0 && loss + m->loss > 0.0)
        f = loss / (loss + m->loss); /* NaN (a loss not yet known) fails the test: value */
    double thr = cfg->algorithm.divergence_threshold;
    if (thr > 0.0 && loss < thr)
        f *= loss / thr;
    return f;
}

static int choose_peer(const replica *r, const gossip_state *s)
{
    int best = -1;
    float best_score = -1.0f;
    for (int j = 0; j < r->n; j++) {
        if (j == r->id)
            continue;
        float score = (float)comm_peer_score(s->peer, r->rank, j) +
                      10.0f + 990.0f * async_uniform(r, 1 + (unsigned)j);
        if (score > best_score)
            best = j, best_score = score;
    }
    return best;
}

static void gossip_step(replica *r)
{
    gossip_state *s = r->rule_state;
    float *x = r->model.params;
    s->losses[s->next] = r->last_loss;
    s->next = (s->next + 1) % LOSS_WINDOW;
    if (s->nlosses < LOSS_WINDOW)
        s->nlosses++;
    double t0 = comm_now_s();
    comm_peer_publish(s->peer, r->rank, &r->ctx, x, s->clock, loss_now(s));
    r->sync_s += comm_now_s() - t0;
    rule_local_step(r, x, s->u, 1);
    s->clock += 1.0;
    if (async_uniform(r, 0) >= (float)r->cfg->algorithm.fetch_probability)
        return;
    t0 = comm_now_s();
    int j = choose_peer(r, s), score = comm_peer_score(s->peer, r->rank, j);
    peer_meta m;
    if (comm_peer_fetch(s->peer, r->rank, j, &r->ctx, r->cfg->algorithm.timeout_ms / 1000.0,
                        s->fetched, &m) == 0) {
        double f = weight_toward(r, s, &m);
        vec_axpby(&r->ctx, r->model.nparams, (float)f, s->fetched, (float)(1.0 - f), x);
        s->clock = (1.0 - f) * s->clock + f * m.clock;
        score = score + SCORE_UP < SCORE_MAX ? score + SCORE_UP : SCORE_MAX;
    } else {
        score = score - SCORE_DOWN > SCORE_MIN ? score - SCORE_DOWN : SCORE_MIN;
    }
    comm_peer_set_score(s->peer, r->rank, j, score);
    r->sync_s += comm_now_s() - t0;
}

static int gossip_sync(replica *r)
{
    gossip_state *s = r->rule_state;
    double mean = loss_now(s);
    s->loss_count = s->nlosses;
    s->loss_mean = s->nlosses ? mean : 0.0;
    return async_quiesce(r);
}

static float *gossip_weights(replica *r) { return r->model.params; }

/* Its clock and loss window stay: a failing replica's step is skipped, so
 * they hold nothing of the failure. */
static int gossip_reseed(replica *r, int bad)
{
    return rule_reseed_mean(r, bad, r->model.params, ((gossip_state *)r->rule_state)->u);
}

/* u, fetched, and the two snapshots of PEER_SNAPSHOT (gossip_init). */
static int gossip_vectors(const job_config *cfg, int id)
{
    return 4;
}

static int gossip_state_buffers(replica *r, const char **names, float **bufs)
{
    gossip_state *s = r->rule_state;
    names[0] = "x", bufs[0] = r->model.params;
    names[1] = "u", bufs[1] = s->u;
    return 2;
}

static int gossip_scalars(replica *r, const char **names, double **vals)
{
    gossip_state *s = r->rule_state;
    names[0] = "clock", vals[0] = &s->clock;
    names[1] = "loss_mean", vals[1] = &s->loss_mean;
    names[2] = "loss_count", vals[2] = &s->loss_count;
    return 3;
}

static int gossip_describe(replica *r, char *json, size_t len)
{
    gossip_state *s = r->rule_state;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "fetches", ASYNC_COUNTS(s->peer, fetches));
    cJSON_AddItemToObject(o, "timeouts", ASYNC_COUNTS(s->peer, timeouts));
    cJSON_AddItemToObject(o, "skipped_publishes", ASYNC_COUNTS(s->peer, skipped));
    /* scores[i][j]: replica i's score of peer j (its own: null); the rows
     * of this process's replicas, which on the status's rank 0 are 0.. */
    cJSON *scores = cJSON_AddArrayToObject(o, "scores");
    for (int i = 0; scores && i < comm_peer_replicas(s->peer); i++) {
        cJSON *row = cJSON_CreateArray();
        for (int j = 0; row && j < r->n; j++)
            cJSON_AddItemToArray(row, i + r->id - r->rank == j ? cJSON_CreateNull()
                                             : cJSON_CreateNumber(comm_peer_score(s->peer, i, j)));
        cJSON_AddItemToArray(scores, row);
    }
    int n = async_json_out(cJSON_Duplicate(o, 1), json, len);
    if (n == 0) { /* too many replicas for every score: the counts alone */
        cJSON_DeleteItemFromObject(o, "scores");
        return async_json_out(o, json, len);
    }
    cJSON_Delete(o);
    return n;
}

static void gossip_free(replica *r)
{
    gossip_state *s = r->rule_state;
    if (s)
        async_release(r, s->peer, RULE_VECTORS(&s->u, &s->fetched));
}

static void gossip_validate(job_config *cfg, rule_check *c) { async_validate(cfg, c); }

static const char *const gossip_fields[] = {"algorithm.fetch_probability", "algorithm.interpolation", "algorithm.value", "algorithm.divergence_threshold", "algorithm.timeout_ms", NULL};

const coupling_rule coupling_gossip = {
    .name = "gossip",
    .fields = gossip_fields,
    .validate = gossip_validate,
    .net = NET_CPU,
    .init = gossip_init,
    .steps_per_sync = gossip_steps_per_sync,
    .begin = gossip_begin,
    .step = gossip_step,
    .sync = gossip_sync,
    .weights = gossip_weights,
    .state = gossip_state_buffers,
    .vectors = gossip_vectors,
    .scalars = gossip_scalars,
    .describe = gossip_describe,
    .reseed = gossip_reseed,
    .free = gossip_free,
};
