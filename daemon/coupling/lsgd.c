/* Leader SGD (Teng et al. 2019; docs/algorithms.md). Replicas in groups of
 * group_size take local steps; every tau steps each group elects its leader
 * (the lowest mean of its last avg_size mini-batch losses) and every replica
 * is pulled toward it, x_i <- x_i - c1 (x_i - x_leader); every tau_global
 * steps likewise toward the global leader with c2 (both at once when both
 * fall due, from the weights before either pull). Between communications a
 * step may also pull toward the last known leaders' weights,
 *   x_i <- x_i - (p1 / tau) (x_i - x~group) - (p2 / tau_global) (x_i - x~global),
 * not scaled by the learning rate. A leader is never pulled toward itself.
 * Elections are synchronous: scores are shared host numbers read behind the
 * exchange's barrier, so every replica elects the same leaders. Replicas and
 * leaders are numbered in the job (replica.id), so this runs across MPI
 * ranks too (on CPUs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "coupling.h"
#include "graph.h"
#include "rule_state.h"

typedef struct lsgd_state {
    float *u;
    float *tmp;                 /* a leader's pulled weights while others read them; the master */
    float *seen_group, *seen_global; /* x~: the leaders' weights at the last election (p1, p2 > 0) */
    rule_peers peers;           /* the leaders' weights when on another GPU */
    double *score;              /* shared: each replica's mean recent loss at an election */
    /* Checkpointed host numbers (scalars): the loss window, then the leaders. */
    double losses[100];
    double nlosses, next;       /* how many are in the window; where the next one goes */
    double group_leader, global_leader; /* -1 before the first election */
    char names[100][16];
    /* Rank 0's view of the last election, for describe. */
    double seen_score[64];
    int seen_leaders[64];
} lsgd_state;

static int lsgd_steps_per_sync(const job_config *cfg)
{
    (void)cfg;
    return 1;
}

static int lsgd_init(replica *r, char *err, size_t errlen)
{
    const job_config *cfg = r->cfg;
    lsgd_state *s = rule_state_new(r, sizeof *s, "LSGD", err, errlen);
    if (!s)
        return -1;
    s->group_leader = s->global_leader = -1;
    for (int j = 0; j < 64; j++)
        s->seen_leaders[j] = -1;
    if (!(s->score = comm_shared_rows(r->comm, r->rank, 1))) {
        snprintf(err, errlen, "replica %d: LSGD's shared scores: the job stopped", r->rank);
        return -1;
    }
    return rule_state_vectors(r, "LSGD", RULE_VECTORS(&s->u, &s->tmp,
                                                      cfg->algorithm.p1 > 0 ? &s->seen_group : NULL,
                                                      cfg->algorithm.p2 > 0 ? &s->seen_global : NULL),
                              err, errlen);
}

static void lsgd_begin(replica *r) { (void)r; }

static int comm_step(const job_config *cfg, long k, int *group, int *global)
{
    *group = k % cfg->algorithm.tau == 0;
    *global = k % cfg->algorithm.tau_global == 0;
    return *group || *global;
}

static void lsgd_step(replica *r)
{
    lsgd_state *s = r->rule_state;
    const job_config *cfg = r->cfg;
    int A = cfg->algorithm.avg_size, group, global;
    rule_local_step(r, r->model.params, s->u, 1);
    s->losses[(int)s->next] = r->last_loss;
    s->next = (double)(((int)s->next + 1) % A);
    if (s->nlosses < A)
        s->nlosses++;
    if (comm_step(cfg, r->k, &group, &global))
        return; /* the election's pulls replace these */
    /* x <- (1 - a - b) x + a x~group + b x~global */
    float a = s->seen_group && s->group_leader >= 0 && s->group_leader != r->id
                  ? (float)(cfg->algorithm.p1 / cfg->algorithm.tau) : 0.0f;
    float b = s->seen_global && s->global_leader >= 0 && s->global_leader != r->id
                  ? (float)(cfg->algorithm.p2 / cfg->algorithm.tau_global) : 0.0f;
    size_t n = r->model.nparams;
    if (a > 0.0f)
        vec_axpby(&r->ctx, n, a, s->seen_group, 1.0f - a - b, r->model.params);
    if (b > 0.0f)
        vec_axpby(&r->ctx, n, b, s->seen_global, a > 0.0f ? 1.0f : 1.0f - b, r->model.params);
}

static double recent_loss(const lsgd_state *s)
{
    double sum = 0.0;
    for (int j = 0; j < (int)s->nlosses; j++)
        sum += s->losses[j];
    return s->nlosses > 0 ? sum / s->nlosses : INFINITY;
}

/* The lowest score among ranks [lo, hi); the lowest rank on ties. */
static int elect(const double *score, int lo, int hi)
{
    int best = lo;
    for (int j = lo + 1; j < hi; j++)
        if (score[j] < score[best])
            best = j;
    return best;
}

/* Publish weights and score; elect. Returns the peers' weights (NULL once
 * aborted); the caller ends the exchange. */
static const float *const *lsgd_election(replica *r, int *group_leader, int *global_leader)
{
    lsgd_state *s = r->rule_state;
    int G = r->cfg->algorithm.group_size, lo = r->id / G * G;
    s->score[r->id] = recent_loss(s);
    const float *const *x =
        comm_exchange(r->comm, r->rank, &r->ctx, r->model.params, r->model.nparams);
    if (!x)
        return NULL;
    *group_leader = elect(s->score, lo, lo + G);
    *global_leader = elect(s->score, 0, r->n);
    if (r->id == 0)
        for (int j = 0; j < r->n && j < 64; j++) {
            s->seen_score[j] = s->score[j];
            s->seen_leaders[j] = elect(s->score, j / G * G, j / G * G + G);
        }
    return x;
}

static int lsgd_sync(replica *r)
{
    lsgd_state *s = r->rule_state;
    const job_config *cfg = r->cfg;
    int group, global, gl, GL, i = r->id;
    if (!comm_step(cfg, r->k, &group, &global))
        return 0;
    double t0 = comm_now_s();
    const float *const *x = lsgd_election(r, &gl, &GL);
    if (!x)
        return -1;
    const float *xg = rule_peer(r, &s->peers, 0, gl), *xG = rule_peer(r, &s->peers, 1, GL);
    if (!xg || !xG) {
        comm_abort(r->comm, "replica %d: LSGD's leader copies: %s", i, r->ctx.err);
        return -1;
    }
    size_t n = r->model.nparams, bytes = n * sizeof(float);
    float c1 = group && gl != i ? (float)cfg->algorithm.c1 : 0.0f;
    float c2 = global && GL != i ? (float)cfg->algorithm.c2 : 0.0f;
    /* A leader others read moves only after they are done: via tmp. */
    int read_by_others = (group && gl == i) || (global && GL == i);
    float *dst = read_by_others ? s->tmp : r->model.params;
    if (read_by_others && c1 + c2 > 0.0f)
        backend_copy(&r->ctx, s->tmp, r->model.params, bytes);
    if (c1 > 0.0f)
        vec_axpby(&r->ctx, n, c1, xg, 1.0f - c1 - c2, dst);
    if (c2 > 0.0f)
        vec_axpby(&r->ctx, n, c2, xG, c1 > 0.0f ? 1.0f : 1.0f - c2, dst);
    if (group) {
        s->group_leader = gl;
        if (s->seen_group)
            backend_copy(&r->ctx, s->seen_group, xg, bytes);
    }
    if (global) {
        s->global_leader = GL;
        if (s->seen_global)
            backend_copy(&r->ctx, s->seen_global, xG, bytes);
    }
    int rc = comm_exchange_end(r->comm, r->rank, &r->ctx);
    if (rc == 0 && read_by_others && c1 + c2 > 0.0f)
        backend_copy(&r->ctx, r->model.params, s->tmp, bytes);
    r->sync_s += comm_now_s() - t0;
    return rc;
}

static float *lsgd_weights(replica *r) { return r->model.params; }

/* Its loss window keeps the losses from before the failure (a failing
 * replica's step is skipped), and the leaders' weights it pulls toward stay
 * the last election's. */
static int lsgd_reseed(replica *r, int bad)
{
    return rule_reseed_mean(r, bad, r->model.params, ((lsgd_state *)r->rule_state)->u);
}

/* The global leader, elected now from the same scores as at a communication. */
static const float *lsgd_master(replica *r)
{
    lsgd_state *s = r->rule_state;
    int gl, GL;
    const float *const *x = lsgd_election(r, &gl, &GL);
    if (!x)
        return NULL;
    const float *xG = rule_peer(r, &s->peers, 1, GL);
    if (!xG) {
        comm_abort(r->comm, "replica %d: LSGD's leader copy: %s", r->rank, r->ctx.err);
        return NULL;
    }
    backend_copy(&r->ctx, s->tmp, xG, r->model.nparams * sizeof(float));
    return comm_exchange_end(r->comm, r->rank, &r->ctx) == 0 ? s->tmp : NULL;
}

/* u, tmp, and the leaders seen when p1, p2 pull towards them (lsgd_init). */
static int lsgd_vectors(const job_config *cfg, int id)
{
    return 2 + (cfg->algorithm.p1 > 0) + (cfg->algorithm.p2 > 0);
}

static int lsgd_state_buffers(replica *r, const char **names, float **bufs)
{
    lsgd_state *s = r->rule_state;
    int n = 0;
    names[n] = "x", bufs[n++] = r->model.params;
    names[n] = "u", bufs[n++] = s->u;
    if (s->seen_group)
        names[n] = "seen_group", bufs[n++] = s->seen_group;
    if (s->seen_global)
        names[n] = "seen_global", bufs[n++] = s->seen_global;
    return n;
}

static int lsgd_scalars(replica *r, const char **names, double **vals)
{
    lsgd_state *s = r->rule_state;
    int n = 0;
    names[n] = "nlosses", vals[n++] = &s->nlosses;
    names[n] = "next_loss", vals[n++] = &s->next;
    names[n] = "group_leader", vals[n++] = &s->group_leader;
    names[n] = "global_leader", vals[n++] = &s->global_leader;
    for (int j = 0; j < r->cfg->algorithm.avg_size; j++) {
        snprintf(s->names[j], sizeof s->names[j], "loss%d", j);
        names[n] = s->names[j], vals[n++] = &s->losses[j];
    }
    return n;
}

/* {"global_leader":g,"group_leaders":[...],"scores":[...]} at the last election. */
static int lsgd_describe(replica *r, char *json, size_t len)
{
    lsgd_state *s = r->rule_state;
    size_t at = (size_t)snprintf(json, len, "{\"global_leader\":%d,\"group_leaders\":[",
                                 (int)s->global_leader);
    int G = r->cfg->algorithm.group_size;
    for (int j = 0; j < r->n && j < 64; j += G)
        at += (size_t)snprintf(json + at, at < len ? len - at : 0, "%s%d", j ? "," : "",
                               s->seen_leaders[j]);
    at += (size_t)snprintf(json + at, at < len ? len - at : 0, "],\"scores\":[");
    for (int j = 0; j < r->n && j < 64; j++)
        at += (size_t)snprintf(json + at, at < len ? len - at : 0, "%s%.5g", j ? "," : "",
                               isfinite(s->seen_score[j]) ? s->seen_score[j] : -1.0);
    at += (size_t)snprintf(json + at, at < len ? len - at : 0, "]}");
    return at < len ? (int)at : (int)len - 1;
}

static void lsgd_free(replica *r)
{
    lsgd_state *s = r->rule_state;
    if (s)
        rule_state_free(r, &s->peers,
                        RULE_VECTORS(&s->u, &s->tmp, &s->seen_group, &s->seen_global));
}

static void lsgd_validate(job_config *cfg, rule_check *c)
{
    int n = cfg->algorithm.replicas;
    if (rule_field_state(c, "algorithm.tau") == RULE_FIELD_ABSENT)
        cfg->algorithm.tau = 256;
    if (rule_field_state(c, "algorithm.replicas") == RULE_FIELD_BAD)
        return;
    /* A group_size already reported out of range holds no divisor. */
    const enum rule_field g = rule_field_state(c, "algorithm.group_size");
    if (g == RULE_FIELD_ABSENT)
        cfg->algorithm.group_size = n;
    else if (g == RULE_FIELD_SET && n % cfg->algorithm.group_size != 0)
        rule_report(c, "algorithm.group_size: must divide algorithm.replicas (%d), got %d", n,
                    cfg->algorithm.group_size);
}

static const char *const lsgd_fields[] = {"algorithm.group_size", "algorithm.tau", "algorithm.tau_global", "algorithm.avg_size", "algorithm.c1", "algorithm.c2", "algorithm.p1", "algorithm.p2", NULL};

const coupling_rule coupling_lsgd = {
    .name = "lsgd",
    .fields = lsgd_fields,
    .validate = lsgd_validate,
    .net = NET_CPU,
    .init = lsgd_init,
    .steps_per_sync = lsgd_steps_per_sync,
    .begin = lsgd_begin,
    .step = lsgd_step,
    .sync = lsgd_sync,
    .weights = lsgd_weights,
    .state = lsgd_state_buffers,
    .vectors = lsgd_vectors,
    .scalars = lsgd_scalars,
    .describe = lsgd_describe,
    .master = lsgd_master,
    .reseed = lsgd_reseed,
    .free = lsgd_free,
};
