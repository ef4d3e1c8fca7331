/* The asynchronous rules (easgd, adpsgd, gossip, gosgd) and comm_peer on real
 * threads. Their schedules are the threads' own, so most checks are
 * invariants, not trajectories:
 *   - EASGD sync: every buffer after every step against a float64 reference
 *     on a quadratic (deterministic: its exchanges are collective), the
 *     centre at every pass end, and a resume from the saved state that
 *     continues bit for bit. Tolerance: 2e-5 relative + 1e-6 absolute.
 *   - GoSGD: sum a_i = 1 at every pass end (1e-12) and, without gradients,
 *     sum a_i x_i unchanged by any number of pushes (1e-5), the master equal
 *     to it.
 *   - AD-PSGD, EASGD async: without gradients, the sum of the vectors (with
 *     the centre) is unchanged by the exchanges.
 *   - gossip: without gradients every x_i stays in the hull of the starts.
 *   - comm_peer under contention: pair averages whole (both sides equal,
 *     mass conserved against concurrent owner updates, no deadlock whoever
 *     starts a pair), snapshots never torn (constant vectors stamped with
 *     their version), mailbox weight conserved with pushes in flight.
 * Run under ThreadSanitizer in the 'threads' suite. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm_peer.h"
#include "coupling.h"
#include "testutil.h"

#define DIM 29
#define MAXN 4
#define MAXSTEPS 160

/* ---- the rules on a quadratic f_i(w) = 1/2 sum_k h_k (w_k - t_ik(step))^2 ---- */

typedef struct harness {
    job_config cfg;
    comm comm;
    int n, passes, S, first_pass; /* first_pass > 0: resume from `saved` */
    double h[DIM];
    double t[MAXN][MAXSTEPS][DIM];
    double x0[MAXN][DIM];
    float x[MAXN][MAXSTEPS][DIM];       /* model.params after every step */
    float master[8][DIM];               /* after every pass */
    float x_end[8][MAXN][DIM];          /* weights after every pass's sync */
    double scalar[8][MAXN];             /* the rule's first scalar after every pass */
    float saved[MAXN][RULE_MAX_STATE][DIM]; /* state after pass 1 */
    double saved_scalars[MAXN][RULE_MAX_SCALARS];
    int describe_ok[MAXN];
    char failed[MAXN][300];             /* checked on the main thread */
} harness;

typedef struct targ { harness *h; int rank; } targ;

static void *replica_thread(void *q)
{
    targ *ta = q;
    harness *h = ta->h;
    int a = ta->rank;
    float params[DIM], grads[DIM];
    replica r = {.rank = a, .n = h->n, .id = a, .cfg = &h->cfg, .comm = &h->comm};
    r.model.nparams = DIM;
    r.model.params = params;
    r.model.grads = grads;
    r.lr = (float)h->cfg.optim.lr;
    backend_ctx_init_cpu(&r.ctx, 1);
    for (int i = 0; i < DIM; i++)
        params[i] = (float)h->x0[a][i];
    const coupling_rule *rule = coupling_find(h->cfg.algorithm.name);
    char err[256];
    const char *names[RULE_MAX_SCALARS];
    float *bufs[RULE_MAX_STATE];
    double *vals[RULE_MAX_SCALARS];
    if (rule->init(&r, err, sizeof err) != 0) {
        snprintf(h->failed[a], sizeof h->failed[a], "init: %s", err);
        goto out;
    }
    if (h->first_pass > 0) { /* what restore_replica does */
        int ns = rule->state(&r, names, bufs);
        for (int j = 0; j < ns; j++)
            memcpy(bufs[j], h->saved[a][j], sizeof(float) * DIM);
        int nv = rule->scalars ? rule->scalars(&r, names, vals) : 0;
        for (int j = 0; j < nv; j++)
            *vals[j] = h->saved_scalars[a][j];
    }
    comm_barrier(&h->comm, a, "start");
    r.step = (long)h->first_pass * h->S;
    for (int k = h->first_pass + 1; k <= h->passes; k++) {
        r.k = k;
        rule->begin(&r);
        for (int l = 0; l < h->S; l++) {
            int s = (int)r.step;
            double loss = 0;
            for (int i = 0; i < DIM; i++) {
                double d = params[i] - h->t[a][s][i];
                grads[i] = (float)(h->h[i] * d);
                loss += 0.5 * h->h[i] * d * d;
            }
            r.step++;
            r.last_loss = (float)loss;
            rule->step(&r);
            /* The replica's own iterate: rule->weights may be a vector that
             * peers change between pass ends (AD-PSGD's shared x). */
            memcpy(h->x[a][s], params, sizeof(float) * DIM);
        }
        if (rule->sync(&r) != 0)
            snprintf(h->failed[a], sizeof h->failed[a], "the sync of pass %d failed", k);
        memcpy(h->x_end[k - 1][a], rule->weights(&r), sizeof(float) * DIM);
        if (rule->scalars && rule->scalars(&r, names, vals) > 0)
            h->scalar[k - 1][a] = *vals[0];
        const float *m = rule->master ? rule->master(&r) : NULL;
        if (m && a == 0)
            memcpy(h->master[k - 1], m, sizeof(float) * DIM);
        if (k == 1) {
            int ns = rule->state(&r, names, bufs);
            for (int j = 0; j < ns; j++)
                memcpy(h->saved[a][j], bufs[j], sizeof(float) * DIM);
            int nv = rule->scalars ? rule->scalars(&r, names, vals) : 0;
            for (int j = 0; j < nv; j++)
                h->saved_scalars[a][j] = *vals[j];
        }
        char json[1024] = "";
        if (a == 0 && rule->describe && rule->describe(&r, json, sizeof json) > 0) {
            cJSON *o = cJSON_Parse(json);
            h->describe_ok[a] += o != NULL;
            cJSON_Delete(o);
        }
        /* Like the runner's agreement point: nobody starts the next pass
         * while another still reads this one's state. */
        comm_barrier(&h->comm, a, "agreement");
    }
out:
    if (r.rule_state)
        rule->free(&r);
    backend_ctx_free(&r.ctx);
    return NULL;
}

static void run_harness(harness *h)
{
    char err[256];
    CHECK(comm_init(&h->comm, h->n, DIM, err, sizeof err) == 0, "%s", err);
    pthread_t tid[MAXN];
    targ ta[MAXN];
    for (int a = 0; a < h->n; a++) {
        ta[a] = (targ){h, a};
        pthread_create(&tid[a], NULL, replica_thread, &ta[a]);
    }
    for (int a = 0; a < h->n; a++)
        pthread_join(tid[a], NULL);
    comm_free(&h->comm);
    for (int a = 0; a < h->n; a++)
        CHECK(!h->failed[a][0], "%s: replica %d: %s", h->cfg.algorithm.name, a, h->failed[a]);
}

static void make_harness(harness *h, const char *rule, int n, int passes, int S, int gradients)
{
    memset(h, 0, sizeof *h);
    job_config_defaults(&h->cfg);
    snprintf(h->cfg.algorithm.name, sizeof h->cfg.algorithm.name, "%s", rule);
    h->cfg.algorithm.replicas = h->n = n;
    h->cfg.optim.lr = test_uniform(0.02, 0.1);
    h->cfg.optim.weight_decay = gradients ? test_uniform(1e-4, 1e-2) : 0;
    h->cfg.seed = (uint64_t)test_uniform(0, 1e6);
    h->passes = passes, h->S = S;
    if (passes * S > MAXSTEPS || passes > 8) {
        fprintf(stderr, "make_harness: %d passes of %d steps do not fit\n", passes, S);
        exit(2);
    }
    for (int i = 0; i < DIM; i++)
        h->h[i] = gradients ? test_uniform(0.2, 2.0) : 0.0;
    for (int a = 0; a < n; a++)
        for (int i = 0; i < DIM; i++) {
            h->x0[a][i] = test_uniform(-1, 1);
            for (int s = 0; s < MAXSTEPS; s++)
                h->t[a][s][i] = test_uniform(-1, 1);
        }
}

static double rel_err(double got, double want) { return fabs(got - want) / (1e-6 / 2e-5 + fabs(want)); }

/* EASGD sync straight from the equations, in float64. */
static void check_easgd_sync(void)
{
    static harness h, again;
    make_harness(&h, "easgd", 3, 3, 20, 1);
    h.cfg.algorithm.tau = 3;
    h.cfg.algorithm.beta = 0.6;
    for (int a = 0; a < 3; a++) /* EASGD starts equal (init "same"): the centre is x_0 */
        memcpy(h.x0[a], h.x0[0], sizeof h.x0[0]);
    run_harness(&h);
    double x[MAXN][DIM], u[MAXN][DIM] = {{0}}, c[DIM], worst = 0, worst_c = 0;
    memcpy(x, h.x0, sizeof x);
    memcpy(c, h.x0[0], sizeof c);
    double beta = h.cfg.algorithm.beta, alpha = beta / h.n, lr = h.cfg.optim.lr;
    double mu = h.cfg.optim.momentum, wd = h.cfg.optim.weight_decay;
    for (int s = 0; s < h.passes * h.S; s++) {
        double g[MAXN][DIM];
        for (int a = 0; a < h.n; a++)
            for (int i = 0; i < DIM; i++)
                g[a][i] = h.h[i] * (x[a][i] - h.t[a][s][i]);
        if ((s + 1) % h.cfg.algorithm.tau == 0)
            for (int i = 0; i < DIM; i++) {
                double mean = 0;
                for (int a = 0; a < h.n; a++)
                    mean += x[a][i] / h.n;
                for (int a = 0; a < h.n; a++)
                    x[a][i] -= alpha * (x[a][i] - c[i]);
                c[i] += beta * (mean - c[i]);
            }
        for (int a = 0; a < h.n; a++)
            for (int i = 0; i < DIM; i++) {
                double gd = g[a][i] + wd * x[a][i];
                u[a][i] = mu * u[a][i] + gd;
                x[a][i] -= lr * (gd + mu * u[a][i]);
                worst = fmax(worst, rel_err(h.x[a][s][i], x[a][i]));
            }
        if ((s + 1) % h.S == 0)
            for (int i = 0; i < DIM; i++)
                worst_c = fmax(worst_c, rel_err(h.master[s / h.S][i], c[i]));
    }
    CHECK(worst <= 2e-5, "easgd sync: x off by %.3g (relative)", worst);
    CHECK(worst_c <= 2e-5, "easgd sync: the centre off by %.3g (relative)", worst_c);
    CHECK(h.describe_ok[0] == h.passes, "easgd: describe gave no valid JSON");
    /* Resumed after pass 1 from the saved state (the centre in replica 0's):
     * the same trajectory, bit for bit. */
    again = h;
    again.first_pass = 1;
    memset(again.x, 0, sizeof again.x);
    run_harness(&again);
    CHECK(memcmp(again.x[0][h.S], h.x[0][h.S], sizeof(float) * DIM * (h.passes - 1) * h.S) == 0 &&
              memcmp(again.master[2], h.master[2], sizeof h.master[2]) == 0,
          "easgd: a resume after pass 1 does not continue the same trajectory");
}

/* sum_a x_a (with a weight per replica, or 1) after pass k's sync. */
static void weighted_sum(const harness *h, int k, const double *w, double *out)
{
    for (int i = 0; i < DIM; i++) {
        out[i] = 0;
        for (int a = 0; a < h->n; a++)
            out[i] += (w ? w[a] : 1.0) * h->x_end[k][a][i];
    }
}

static void check_gosgd(void)
{
    static harness h;
    make_harness(&h, "gosgd", 4, 4, 40, 0);
    h.cfg.algorithm.p = 0.5;
    run_harness(&h);
    double start[DIM] = {0}, now[DIM], worst = 0, worst_m = 0;
    for (int a = 0; a < h.n; a++)
        for (int i = 0; i < DIM; i++)
            start[i] += h.x0[a][i] / h.n;
    for (int k = 0; k < h.passes; k++) {
        double sum = 0;
        for (int a = 0; a < h.n; a++)
            sum += h.scalar[k][a];
        CHECK(fabs(sum - 1.0) <= 1e-12, "gosgd: sum of a after pass %d is %.17g", k + 1, sum);
        weighted_sum(&h, k, h.scalar[k], now);
        for (int i = 0; i < DIM; i++) {
            worst = fmax(worst, fabs(now[i] - start[i]));
            worst_m = fmax(worst_m, fabs(h.master[k][i] - now[i]));
        }
    }
    CHECK(worst <= 1e-5, "gosgd: sum a_i x_i moved by %.3g without gradients", worst);
    CHECK(worst_m <= 1e-5, "gosgd: the master is off sum a_i x_i by %.3g", worst_m);
    CHECK(h.describe_ok[0] == h.passes, "gosgd: describe gave no valid JSON");
    /* The pushes happened: the replicas moved toward each other. */
    double spread = 0;
    for (int i = 0; i < DIM; i++)
        spread = fmax(spread, fabs(h.x[0][h.passes * h.S - 1][i] - h.x[1][h.passes * h.S - 1][i]));
    CHECK(spread < 0.5, "gosgd: replicas 0 and 1 still %.3g apart after many pushes", spread);
}

/* Exchanges that conserve the plain sum (AD-PSGD; EASGD async with c). */
static void check_conserving(const char *rule, const char *variant)
{
    static harness h;
    make_harness(&h, rule, 4, 2, 40, 0);
    h.cfg.algorithm.tau = 2;
    snprintf(h.cfg.algorithm.variant, sizeof h.cfg.algorithm.variant, "%s", variant);
    int easgd = strcmp(rule, "easgd") == 0;
    if (easgd)
        for (int a = 1; a < h.n; a++)
            memcpy(h.x0[a], h.x0[0], sizeof h.x0[0]);
    /* EASGD's centre starts as x_0 and counts in the sum. */
    run_harness(&h);
    double start[DIM], now[DIM], worst = 0;
    for (int i = 0; i < DIM; i++) {
        start[i] = easgd ? h.x0[0][i] : 0;
        for (int a = 0; a < h.n; a++)
            start[i] += h.x0[a][i];
    }
    weighted_sum(&h, h.passes - 1, NULL, now);
    for (int i = 0; i < DIM; i++)
        worst = fmax(worst, fabs(now[i] + (easgd ? h.master[h.passes - 1][i] : 0) - start[i]));
    CHECK(worst <= 1e-5, "%s %s: the exchanges changed the sum by %.3g", rule, variant, worst);
    CHECK(h.describe_ok[0] == h.passes, "%s: describe gave no valid JSON", rule);
}

static void check_gossip(const char *interpolation)
{
    static harness h;
    make_harness(&h, "gossip", 3, 2, 40, 0);
    snprintf(h.cfg.algorithm.interpolation, sizeof h.cfg.algorithm.interpolation, "%s",
             interpolation);
    run_harness(&h);
    int outside = 0;
    for (int i = 0; i < DIM; i++) {
        double lo = 1e9, hi = -1e9;
        for (int a = 0; a < h.n; a++)
            lo = fmin(lo, h.x0[a][i]), hi = fmax(hi, h.x0[a][i]);
        for (int a = 0; a < h.n; a++)
            for (int s = 0; s < h.passes * h.S; s++)
                outside += !(h.x[a][s][i] >= lo - 1e-6 && h.x[a][s][i] <= hi + 1e-6);
    }
    CHECK(outside == 0, "gossip %s: %d values left the hull of the starts", interpolation, outside);
    CHECK(h.describe_ok[0] == h.passes, "gossip: describe gave no valid JSON");
}

/* ---- comm_peer under contention ---- */

#define LEN 20000
#define ROUNDS 300

typedef struct stress {
    comm comm;
    int n;
    comm_peer *p[MAXN];
    float *ones;
    double added[MAXN];    /* what each owner added to its own x */
    int torn[MAXN], unequal[MAXN], backwards[MAXN], failed[MAXN];
    long fetched[MAXN];
    double sum, want, total_in_flight, total_drained; /* rank 0's */
    int readers_done;                                 /* atomic */
} stress;

typedef struct sarg { stress *s; int rank; } sarg;

static int all_equal(const float *x, float want)
{
    for (size_t i = 0; i < LEN; i++)
        if (x[i] != want)
            return 0;
    return 1;
}

/* Pairs started from both sides (no deadlock), against owners adding to
 * their own x under their lock: nothing lost, nothing torn. */
static void *pair_worker(void *q)
{
    sarg *sa = q;
    stress *s = sa->s;
    int me = sa->rank;
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    float *x0 = malloc(LEN * sizeof(float));
    for (size_t i = 0; i < LEN; i++)
        x0[i] = (float)(me * 64);
    char err[256];
    comm_peer *p;
    if (comm_peer_attach(&s->comm, me, &ctx, LEN, PEER_PAIR, x0, &p, err, sizeof err) != 0) {
        s->failed[me] = 1;
        comm_peer_detach(p, me, &ctx);
        free(x0);
        return NULL;
    }
    s->p[me] = p;
    for (int k = 0; k < ROUNDS; k++) {
        int peer = (me + 1 + k % (s->n - 1)) % s->n;
        double d2 = -1;
        comm_peer_pair_average(p, me, peer, &ctx, &d2);
        s->unequal[me] += d2 != 0.0;
        /* Powers of two keep every sum exact in float. */
        comm_peer_lock(p, me);
        vec_axpby(&ctx, LEN, 0.25f, s->ones, 1.0f, comm_peer_x(p, me));
        s->added[me] += 0.25;
        comm_peer_unlock(p, me, &ctx);
    }
    comm_barrier(&s->comm, me, "end");
    if (me == 0) {
        s->want = s->sum = 0;
        for (int j = 0; j < s->n; j++) {
            const float *x = comm_peer_x(p, j);
            s->torn[me] += !all_equal(x, x[0]);
            s->sum += x[0];
            s->want += j * 64 + s->added[j];
        }
    }
    comm_barrier(&s->comm, me, "end");
    comm_peer_detach(p, me, &ctx);
    free(x0);
    backend_ctx_free(&ctx);
    return NULL;
}

/* Rank 0 publishes constant vectors stamped with their version while the
 * others fetch: every fetched vector is whole and versions never go back. */
static void *snapshot_worker(void *q)
{
    sarg *sa = q;
    stress *s = sa->s;
    int me = sa->rank;
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    float *buf = malloc(LEN * sizeof(float));
    char err[256];
    comm_peer *p;
    if (comm_peer_attach(&s->comm, me, &ctx, LEN, PEER_SNAPSHOT, NULL, &p, err, sizeof err) != 0) {
        s->failed[me] = 1;
        comm_peer_detach(p, me, &ctx);
        free(buf);
        return NULL;
    }
    if (me == 0) {
        /* Publish until every reader is done (values stay exact in float). */
        for (int v = 1; __atomic_load_n(&s->readers_done, __ATOMIC_ACQUIRE) < s->n - 1; v++) {
            v = v < (1 << 24) ? v : 1;
            for (size_t i = 0; i < LEN; i++)
                buf[i] = (float)v;
            comm_peer_publish(p, me, &ctx, buf, v, v);
        }
    } else {
        unsigned long last = 0;
        for (int k = 0; k < 4 * ROUNDS; k++) {
            peer_meta m;
            if (comm_peer_fetch(p, me, 0, &ctx, 5.0, buf, &m) != 0)
                continue;
            s->fetched[me]++;
            s->torn[me] += !all_equal(buf, (float)m.clock) || m.clock != m.loss;
            s->backwards[me] += m.version < last;
            last = m.version;
        }
        __atomic_add_fetch(&s->readers_done, 1, __ATOMIC_RELEASE);
    }
    comm_barrier(&s->comm, me, "end");
    comm_peer_detach(p, me, &ctx);
    free(buf);
    backend_ctx_free(&ctx);
    return NULL;
}

/* Everyone pushes halves of its weight at random peers and absorbs with
 * trylock; at the end (after a drain) the weight is all there. */
static void *mailbox_worker(void *q)
{
    sarg *sa = q;
    stress *s = sa->s;
    int me = sa->rank;
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    float *x = malloc(LEN * sizeof(float));
    for (size_t i = 0; i < LEN; i++)
        x[i] = (float)me;
    char err[256];
    comm_peer *p;
    if (comm_peer_attach(&s->comm, me, &ctx, LEN, PEER_MAILBOX, NULL, &p, err, sizeof err) != 0) {
        s->failed[me] = 1;
        comm_peer_detach(p, me, &ctx);
        free(x);
        return NULL;
    }
    comm_peer_set_weight(p, me, 1.0 / s->n);
    comm_barrier(&s->comm, me, "start");
    unsigned seed = 77u * (unsigned)me + 1u;
    for (int k = 0; k < ROUNDS; k++) {
        comm_peer_absorb(p, me, &ctx, x, 0);
        int peer = (me + 1 + (int)(rand_r(&seed) % (unsigned)(s->n - 1))) % s->n;
        double a = comm_peer_weight(p, me) / 2;
        comm_peer_set_weight(p, me, a);
        comm_peer_push(p, me, peer, &ctx, x, a);
    }
    comm_barrier(&s->comm, me, "end");
    if (me == 0)
        s->total_in_flight = comm_peer_total_weight(p);
    comm_barrier(&s->comm, me, "end");
    comm_peer_absorb(p, me, &ctx, x, 1);
    s->torn[me] += !all_equal(x, x[0]);
    comm_barrier(&s->comm, me, "end");
    if (me == 0)
        for (int j = 0; j < s->n; j++)
            s->total_drained += comm_peer_weight(p, j);
    comm_barrier(&s->comm, me, "end");
    comm_peer_detach(p, me, &ctx);
    free(x);
    backend_ctx_free(&ctx);
    return NULL;
}

static void run_stress(const char *what, void *(*fn)(void *), int n)
{
    static stress s;
    memset(&s, 0, sizeof s);
    s.n = n;
    s.ones = malloc(LEN * sizeof(float));
    for (size_t i = 0; i < LEN; i++)
        s.ones[i] = 1.0f;
    char err[256];
    CHECK(comm_init(&s.comm, n, 1, err, sizeof err) == 0, "%s", err);
    pthread_t tid[MAXN];
    sarg sa[MAXN];
    for (int a = 0; a < n; a++) {
        sa[a] = (sarg){&s, a};
        pthread_create(&tid[a], NULL, fn, &sa[a]);
    }
    for (int a = 0; a < n; a++)
        pthread_join(tid[a], NULL);
    long fetched = 0;
    for (int a = 0; a < n; a++) {
        CHECK(s.torn[a] == 0, "%s: replica %d saw %d torn vectors", what, a, s.torn[a]);
        CHECK(s.unequal[a] == 0, "%s: %d pair averages left the sides unequal", what, s.unequal[a]);
        CHECK(s.backwards[a] == 0, "%s: snapshot versions went back %d times", what, s.backwards[a]);
        fetched += s.fetched[a];
    }
    for (int a = 0; a < n; a++)
        CHECK(!s.failed[a], "%s: replica %d could not attach", what, a);
    if (fn == snapshot_worker)
        CHECK(fetched > 0, "%s: no snapshot was ever fetched", what);
    /* A lost or doubled exchange moves the sum by 0.25 at least; rounding
     * of ~10^3 float averages of values ~10^2 stays far below 0.05. */
    if (fn == pair_worker)
        CHECK(fabs(s.sum - s.want) <= 0.05, "%s: lost mass: sum %.6f, want %.6f", what, s.sum,
              s.want);
    if (fn == mailbox_worker) {
        CHECK(fabs(s.total_in_flight - 1.0) <= 1e-12, "%s: total weight %.17g with messages in "
              "flight", what, s.total_in_flight);
        CHECK(fabs(s.total_drained - 1.0) <= 1e-12, "%s: sum a = %.17g after the drain", what,
              s.total_drained);
    }
    comm_free(&s.comm);
    free(s.ones);
}

int main(void)
{
    test_init("rules_async");
    run_stress("pairs", pair_worker, 4);
    run_stress("pairs", pair_worker, 3);
    run_stress("snapshots", snapshot_worker, 4);
    run_stress("mailboxes", mailbox_worker, 4);
    check_easgd_sync();
    check_gosgd();
    check_conserving("adpsgd", "sync");
    check_conserving("easgd", "async");
    check_gossip("constant");
    check_gossip("clock");
    check_gossip("loss");
    return test_main_end();
}
