/* Stochastic Gradient Push (Assran et al. 2019; docs/algorithms.md): push-sum
 * on the time-varying directed exponential graph. Replica i keeps a numerator
 * z_i (a vector) and a weight w_i (a host number, w = 1 at the start) and
 * takes its gradient at the de-biased x_i = z_i / w_i (model.params):
 *   z_i <- step(z_i, g_i(x_i))
 *   z_i and w_i are split into p + 1 equal parts: one kept, one pushed to each
 *   out-peer of the round; the parts received are added.
 * osgp overlaps the push with the next rounds' compute: a part pushed at
 * round k is added at round k + synch_freq + 1, and a replica pushes again
 * only once its last push has landed (one message in flight per replica, as
 * the SGP code's single gossip thread). The rounds are synchronous here, so
 * "in flight" is explicit: the receiver's inbox (vector) and its
 * w_in_flight (shared), and sum_i (w_i + w_in_flight_i) = n at every
 * boundary. Master: sum_i z_i / sum_i w_i. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coupling.h"
#include "graph.h"
#include "rule_state.h"

/* Host numbers in comm_shared_rows, entry i written by replica i only; the
 * others read only pub_w and shown_*, between an exchange's two barriers.
 * Replicas are numbered in the job (replica.id), so this runs across MPI
 * ranks too (on CPUs). */
typedef struct sgp_shared {
    double *w;         /* w_i */
    double *in_flight; /* weight pushed to i, not yet added */
    double *pub_w;     /* w_i, published for the round's push */
    double *shown_w, *shown_flight; /* w_i, in_flight_i before it: for describe */
} sgp_shared;

typedef struct sgp_state {
    float *z, *u;
    float *tmp;   /* sgp: the mixed numerator while peers read ours; the master */
    float *inbox; /* osgp: the numerator parts in flight to this replica */
    rule_peers peers;
    sgp_shared sh;
    int overlap, fresh;
    double seen_w[64], seen_flight[64]; /* rank 0: everyone's, as the last push found them */
} sgp_state;

static int sgp_steps_per_sync(const job_config *cfg)
{
    (void)cfg;
    return 1;
}

static int sgp_start(replica *r, int overlap, char *err, size_t errlen)
{
    sgp_state *s = rule_state_new(r, sizeof *s, "SGP", err, errlen);
    if (!s)
        return -1;
    s->overlap = overlap;
    double *sh = comm_shared_rows(r->comm, r->rank, 5);
    if (!sh) {
        snprintf(err, errlen, "replica %d: SGP's shared weights: the job stopped", r->rank);
        return -1;
    }
    s->sh = (sgp_shared){sh, sh + r->n, sh + 2 * r->n, sh + 3 * r->n, sh + 4 * r->n};
    s->sh.w[r->id] = 1.0;
    if (rule_state_vectors(r, "SGP", RULE_VECTORS(&s->z, &s->u, &s->tmp,
                                                  s->overlap ? &s->inbox : NULL),
                           err, errlen) != 0)
        return -1;
    backend_copy(&r->ctx, s->z, r->model.params, r->model.nparams * sizeof(float));
    s->fresh = 1;
    return 0;
}

static int sgp_init(replica *r, char *err, size_t errlen) { return sgp_start(r, 0, err, errlen); }
static int osgp_init(replica *r, char *err, size_t errlen) { return sgp_start(r, 1, err, errlen); }

/* x_i = z_i / w_i, where the gradient is taken. */
static void debias(replica *r, sgp_state *s)
{
    vec_axpby(&r->ctx, r->model.nparams, (float)(1.0 / s->sh.w[r->id]), s->z, 0.0f,
              r->model.params);
}

/* After init or a resume (z and w restored): de-bias once. */
static void sgp_begin(replica *r)
{
    sgp_state *s = r->rule_state;
    if (s->fresh)
        debias(r, s);
    s->fresh = 0;
}

static void sgp_step(replica *r)
{
    sgp_state *s = r->rule_state;
    rule_fold_decay(r, r->model.params); /* the regulariser at x_i, not at z_i */
    rule_local_step(r, s->z, s->u, 0);
}

/* The round's push: every rank publishes (z_i, w_i) and reads its in-peers'.
 * sgp adds the parts at once; osgp puts them in its inbox. */
static int sgp_push(replica *r, sgp_state *s, long round)
{
    int i = r->id, p = r->cfg->algorithm.peers;
    size_t np = r->model.nparams;
    s->sh.pub_w[i] = s->sh.w[i];
    const float *const *z = comm_exchange(r->comm, r->rank, &r->ctx, s->z, r->model.nparams);
    if (!z)
        return -1;
    if (i == 0)
        for (int j = 0; j < r->n && j < 64; j++)
            s->seen_w[j] = s->sh.shown_w[j], s->seen_flight[j] = s->sh.shown_flight[j];
    double w_in = 0.0;
    const float *xs[1 + 6];
    xs[0] = s->z;
    for (int j = 0; j < p; j++) {
        int from = graph_exp_in(i, r->n, round, j, p);
        if (!(xs[1 + j] = rule_peer(r, &s->peers, j, from))) {
            comm_abort(r->comm, "replica %d: SGP's peer copies: %s", i, r->ctx.err);
            return -1;
        }
        w_in += s->sh.pub_w[from];
        if (s->overlap) /* inbox = sum of the in-peers' parts z_j / (p + 1) */
            vec_axpby(&r->ctx, np, 1.0f / (float)(p + 1), xs[1 + j], j == 0 ? 0.0f : 1.0f,
                      s->inbox);
    }
    if (!s->overlap) /* (z_i + sum_j z_j) / (p + 1): the kept part and the received ones */
        vec_mean(&r->ctx, np, xs, 1 + p, s->tmp);
    if (comm_exchange_end(r->comm, r->rank, &r->ctx) != 0)
        return -1;
    if (s->overlap) {
        vec_scale(&r->ctx, np, 1.0f / (float)(p + 1), s->z);
        s->sh.in_flight[i] = w_in / (p + 1);
        s->sh.w[i] /= p + 1;
    } else {
        float *t = s->z;
        s->z = s->tmp, s->tmp = t;
        s->sh.w[i] = (s->sh.w[i] + w_in) / (p + 1);
    }
    return 0;
}

static int sgp_sync(replica *r)
{
    sgp_state *s = r->rule_state;
    int i = r->id;
    long period = s->overlap ? r->cfg->algorithm.synch_freq + 1L : 1L;
    if ((r->k - 1) % period != 0) { /* osgp: the last push is still in flight */
        debias(r, s);
        return 0;
    }
    double t0 = comm_now_s();
    s->sh.shown_w[i] = s->sh.w[i];
    s->sh.shown_flight[i] = s->sh.in_flight[i];
    if (s->overlap && s->sh.in_flight[i] > 0.0) { /* it has landed: add it */
        vec_axpby(&r->ctx, r->model.nparams, 1.0f, s->inbox, 1.0f, s->z);
        s->sh.w[i] += s->sh.in_flight[i];
        s->sh.in_flight[i] = 0.0;
    }
    int rc = sgp_push(r, s, (r->k - 1) / period);
    r->sync_s += comm_now_s() - t0;
    if (rc != 0)
        return -1;
    debias(r, s);
    return 0;
}

static float *sgp_weights(replica *r) { return r->model.params; }

/* x_i from the mean of the healthy replicas' x, and z_i = w_i x_i for it:
 * w_i stays (push-sum's mass is the weights'), as do the parts in flight to
 * it (osgp's inbox, the healthy peers'). */
static int sgp_reseed(replica *r, int bad)
{
    sgp_state *s = r->rule_state;
    if (rule_reseed_mean(r, bad, r->model.params, s->u) != 0)
        return -1;
    if (bad) {
        backend_copy(&r->ctx, s->z, r->model.params, r->model.nparams * sizeof(float));
        vec_scale(&r->ctx, r->model.nparams, (float)s->sh.w[r->id], s->z);
    }
    return 0;
}

/* sum_i z_i / sum_i w_i = mean(z) / mean(w), both by collectives: another
 * replica's w may change as soon as it leaves. */
static const float *sgp_master(replica *r)
{
    sgp_state *s = r->rule_state;
    double wbar;
    if (comm_mean_double(r->comm, r->rank, s->sh.w[r->id], &wbar) != 0)
        return NULL;
    const float *zbar = comm_allreduce_mean(r->comm, r->rank, &r->ctx, s->z, r->model.nparams);
    if (!zbar)
        return NULL;
    vec_axpby(&r->ctx, r->model.nparams, (float)(1.0 / wbar), zbar, 0.0f, s->tmp);
    return s->tmp;
}

/* z, u, tmp, and OSGP's inbox (sgp_start). */
static int sgp_vectors(const job_config *cfg, int id)
{
    (void)cfg, (void)id;
    return 3;
}

static int osgp_vectors(const job_config *cfg, int id) { return sgp_vectors(cfg, id) + 1; }

static int sgp_state_buffers(replica *r, const char **names, float **bufs)
{
    sgp_state *s = r->rule_state;
    int n = 0;
    names[n] = "z", bufs[n++] = s->z;
    names[n] = "u", bufs[n++] = s->u;
    if (s->overlap)
        names[n] = "inbox", bufs[n++] = s->inbox;
    return n;
}

static int sgp_scalars(replica *r, const char **names, double **vals)
{
    sgp_state *s = r->rule_state;
    s->fresh = 1; /* a resume writes them: de-bias at the next begin */
    names[0] = "w", vals[0] = &s->sh.w[r->id];
    if (!s->overlap)
        return 1;
    names[1] = "w_in_flight", vals[1] = &s->sh.in_flight[r->id];
    return 2;
}

/* {"w":[...],"w_in_flight":[...],"w_sum":n}: as the last push round found them. */
static int sgp_describe(replica *r, char *json, size_t len)
{
    sgp_state *s = r->rule_state;
    size_t at = 0;
    double sum = 0.0;
    for (int pass = 0; pass < (s->overlap ? 2 : 1); pass++) {
        const double *v = pass ? s->seen_flight : s->seen_w;
        at += (size_t)snprintf(json + at, at < len ? len - at : 0, "%s\"%s\":[", pass ? "," : "{",
                               pass ? "w_in_flight" : "w");
        for (int j = 0; j < r->n && j < 64; j++) {
            sum += v[j];
            at += (size_t)snprintf(json + at, at < len ? len - at : 0, "%s%.6g", j ? "," : "",
                                   v[j]);
        }
        at += (size_t)snprintf(json + at, at < len ? len - at : 0, "]");
    }
    at += (size_t)snprintf(json + at, at < len ? len - at : 0, ",\"w_sum\":%.9g}", sum);
    return at < len ? (int)at : (int)len - 1;
}

static void sgp_free(replica *r)
{
    sgp_state *s = r->rule_state;
    if (s)
        rule_state_free(r, &s->peers, RULE_VECTORS(&s->z, &s->u, &s->tmp, &s->inbox));
}

/* floor(log2(n - 1)) + 1: the distances of the exponential graph. */
static int exp_graph_distances(int n)
{
    int m = 0;
    while ((1L << m) <= n - 1)
        m++;
    return m > 0 ? m : 1;
}

static void sgp_validate(job_config *cfg, rule_check *c)
{
    int n = cfg->algorithm.replicas;
    if (rule_field_state(c, "algorithm.replicas") == RULE_FIELD_BAD)
        return;
    if (n < 2)
        rule_report(c, "algorithm.replicas: %s needs >= 2 replicas, got %d", cfg->algorithm.name, n);
    else if (cfg->algorithm.peers > exp_graph_distances(n))
        rule_report(c, "algorithm.peers: at most %d for %d replicas (the exponential graph's "
                    "distances 1, 2, 4, ... < %d), got %d", exp_graph_distances(n), n, n,
                    cfg->algorithm.peers);
}

static const char *const sgp_fields[] = {"algorithm.peers", NULL};
static const char *const osgp_fields[] = {"algorithm.peers", "algorithm.synch_freq", NULL};

#define SGP_RULE(NAME, FIELDS, INIT, VECTORS)                                               \
    {.name = NAME, .fields = FIELDS, .validate = sgp_validate, .net = NET_CPU, .init = INIT, \
     .steps_per_sync = sgp_steps_per_sync, .begin = sgp_begin, .step = sgp_step,            \
     .sync = sgp_sync, .weights = sgp_weights, .state = sgp_state_buffers,                  \
     .vectors = VECTORS, .scalars = sgp_scalars, .describe = sgp_describe,                  \
     .master = sgp_master, .reseed = sgp_reseed, .free = sgp_free}

const coupling_rule coupling_sgp = SGP_RULE("sgp", sgp_fields, sgp_init, sgp_vectors);
/* Pushes overlapped with the next synch_freq rounds: an inbox more. */
const coupling_rule coupling_osgp = SGP_RULE("osgp", osgp_fields, osgp_init, osgp_vectors);
