/* The synchronous graph and leader rules (allreduce, dpsgd, sgp, osgp, lsgd;
 * docs/algorithms.md), each checked on a small quadratic against a float64
 * implementation written here from the equations, with the replicas on real
 * threads coupled through comm: after every step, the weights, every vector
 * the rule checkpoints (`state`), every host number it checkpoints
 * (`scalars`), and at every 4th step its master.
 * f_a(w) = 1/2 sum_i h_i (w_i - c_a,s,i)^2, a fresh target each step s; the
 * loss LSGD elects by is f_a plus a random offset per replica and step, so
 * elections never hinge on rounding. Tolerance: 2e-5 relative + 1e-6
 * absolute (float32 against float64 over <= 24 steps); leaders and counts
 * exactly. The peer schedules are recomputed here from their descriptions.
 * test_rules_resume.c checks their checkpoints through the runner. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coupling.h"
#include "testjob.h"

#define DIM 37
#define MAXN 8
#define STEPS 24
#define AMAX 8

typedef struct problem {
    const char *rule;
    int n, steps;
    double lr, mu, wd;
    int nesterov;
    /* rule fields */
    int ring, after, peers, synch_freq, group, tau, tau_g, avg;
    double c1, c2, p1, p2;
    double h[DIM];
    double c[MAXN][STEPS][DIM], bias[MAXN][STEPS];
    double x0[MAXN][DIM];
} problem;

/* Every buffer of replica a after step k (index k - 1). */
typedef struct snap {
    double x[DIM], u[DIM], z[DIM], inbox[DIM], sg[DIM], sG[DIM];
    double w, wf, gl, GL, nl, next, losses[AMAX];
} snap;

typedef struct trajectory {
    snap s[MAXN][STEPS];
    double master[STEPS][DIM];
} trajectory;

static double grad_at(const problem *p, int a, int s, int i, double w)
{
    return p->h[i] * (w - p->c[a][s][i]);
}

static double loss_at(const problem *p, int a, int s, const double *w)
{
    double f = 0;
    for (int i = 0; i < DIM; i++)
        f += 0.5 * p->h[i] * (w[i] - p->c[a][s][i]) * (w[i] - p->c[a][s][i]);
    return f + p->bias[a][s];
}

/* One momentum/Nesterov step (dampening 0) on x with gradient g (decay included). */
static void ref_step(const problem *p, double *x, double *u, const double *g)
{
    for (int i = 0; i < DIM; i++) {
        u[i] = p->mu * u[i] + g[i];
        x[i] -= p->lr * (p->nesterov ? g[i] + p->mu * u[i] : u[i]);
    }
}

/* ---- the reference rules ---- */

static void ref_allreduce(const problem *p, trajectory *t)
{
    static double x[MAXN][DIM], u[MAXN][DIM];
    memcpy(x, p->x0, sizeof x);
    memset(u, 0, sizeof u);
    for (int s = 0; s < p->steps; s++) {
        double gbar[DIM] = {0};
        for (int a = 0; a < p->n; a++)
            for (int i = 0; i < DIM; i++)
                gbar[i] += grad_at(p, a, s, i, x[a][i]) / p->n;
        for (int a = 0; a < p->n; a++) {
            double g[DIM];
            for (int i = 0; i < DIM; i++)
                g[i] = gbar[i] + p->wd * x[a][i];
            ref_step(p, x[a], u[a], g);
            memcpy(t->s[a][s].x, x[a], sizeof x[a]);
            memcpy(t->s[a][s].u, u[a], sizeof u[a]);
        }
        memcpy(t->master[s], x[0], sizeof x[0]);
    }
}

/* The bipartite exponential peer, from its description: offsets +1, -1,
 * +(1+2), -(1+2), +(1+4), ... below n, those equal mod n kept once; the
 * round's offset rotates; odd ranks go forward by it, even ranks back. */
static int ref_bipartite_peer(int a, int n, int round)
{
    int offs[64], count = 0;
    for (int d = 1, e = 0; d < n; e++, d = 1 + (1 << e)) {
        int cand[2] = {d, -d};
        for (int c = 0; c < 2; c++) {
            int dup = 0;
            for (int q = 0; q < count; q++)
                dup |= ((offs[q] - cand[c]) % n + n) % n == 0;
            if (!dup)
                offs[count++] = cand[c];
        }
        if (e > 0 && (1 << e) > n)
            break;
    }
    int off = offs[round % count];
    return ((a % 2 ? a + off : a - off) % n + n) % n;
}

static void ref_mix(const problem *p, double (*x)[DIM], int round)
{
    static double out[MAXN][DIM];
    for (int a = 0; a < p->n; a++)
        for (int i = 0; i < DIM; i++) {
            if (p->ring)
                out[a][i] = (x[(a + p->n - 1) % p->n][i] + x[a][i] + x[(a + 1) % p->n][i]) / 3;
            else
                out[a][i] = (x[a][i] + x[ref_bipartite_peer(a, p->n, round)][i]) / 2;
        }
    memcpy(x, out, sizeof out);
}

static void ref_dpsgd(const problem *p, trajectory *t)
{
    static double x[MAXN][DIM], u[MAXN][DIM], g[MAXN][DIM];
    memcpy(x, p->x0, sizeof x);
    memset(u, 0, sizeof u);
    for (int s = 0; s < p->steps; s++) {
        for (int a = 0; a < p->n; a++)
            for (int i = 0; i < DIM; i++)
                g[a][i] = grad_at(p, a, s, i, x[a][i]) + p->wd * x[a][i];
        if (!p->after) /* x_i <- sum_j W_ij x_j - lr step(g_i(x_i)) */
            ref_mix(p, x, s);
        for (int a = 0; a < p->n; a++)
            ref_step(p, x[a], u[a], g[a]);
        if (p->after)
            ref_mix(p, x, s);
        for (int a = 0; a < p->n; a++) {
            memcpy(t->s[a][s].x, x[a], sizeof x[a]);
            memcpy(t->s[a][s].u, u[a], sizeof u[a]);
        }
    }
}

static int ilog2(int v)
{
    int e = 0;
    while ((2 << e) <= v)
        e++;
    return e;
}

/* Push-sum: out-peers a + 2^((t p + j) mod m); who receives what is found by
 * asking every sender, as the SGP code's graph manager does. */
static void ref_sgp(const problem *p, trajectory *t, int overlap)
{
    static double z[MAXN][DIM], u[MAXN][DIM], inbox[MAXN][DIM], nz[MAXN][DIM];
    double w[MAXN], wf[MAXN], nw[MAXN];
    int m = ilog2(p->n - 1) + 1, P = p->peers, period = overlap ? p->synch_freq + 1 : 1;
    memcpy(z, p->x0, sizeof z);
    memset(u, 0, sizeof u);
    memset(inbox, 0, sizeof inbox);
    for (int a = 0; a < p->n; a++)
        w[a] = 1, wf[a] = 0;
    for (int s = 0; s < p->steps; s++) {
        int k = s + 1;
        for (int a = 0; a < p->n; a++) {
            double g[DIM];
            for (int i = 0; i < DIM; i++) {
                double x = z[a][i] / w[a];
                g[i] = grad_at(p, a, s, i, x) + p->wd * x;
            }
            ref_step(p, z[a], u[a], g);
        }
        if ((k - 1) % period == 0) {
            long round = (k - 1) / period;
            if (overlap && k > 1)
                for (int a = 0; a < p->n; a++) {
                    for (int i = 0; i < DIM; i++)
                        z[a][i] += inbox[a][i];
                    w[a] += wf[a], wf[a] = 0;
                }
            for (int b = 0; b < p->n; b++) {
                nw[b] = overlap ? 0 : w[b] / (P + 1);
                for (int i = 0; i < DIM; i++)
                    nz[b][i] = overlap ? 0 : z[b][i] / (P + 1);
            }
            for (int a = 0; a < p->n; a++)
                for (int j = 0; j < P; j++) {
                    int b = (a + (1 << ((round * P + j) % m))) % p->n;
                    nw[b] += w[a] / (P + 1);
                    for (int i = 0; i < DIM; i++)
                        nz[b][i] += z[a][i] / (P + 1);
                }
            for (int a = 0; a < p->n; a++) {
                if (overlap) {
                    memcpy(inbox[a], nz[a], sizeof nz[a]);
                    wf[a] = nw[a];
                    w[a] /= P + 1;
                    for (int i = 0; i < DIM; i++)
                        z[a][i] /= P + 1;
                } else {
                    memcpy(z[a], nz[a], sizeof nz[a]);
                    w[a] = nw[a];
                }
            }
        }
        double zs[DIM] = {0}, ws = 0;
        for (int a = 0; a < p->n; a++) {
            snap *o = &t->s[a][s];
            for (int i = 0; i < DIM; i++) {
                o->x[i] = z[a][i] / w[a];
                zs[i] += z[a][i];
            }
            memcpy(o->z, z[a], sizeof z[a]);
            memcpy(o->u, u[a], sizeof u[a]);
            memcpy(o->inbox, inbox[a], sizeof inbox[a]);
            o->w = w[a], o->wf = wf[a];
            ws += w[a];
        }
        for (int i = 0; i < DIM; i++)
            t->master[s][i] = zs[i] / ws;
    }
}

static int ref_elect(const double *score, int lo, int hi)
{
    int best = lo;
    for (int j = lo + 1; j < hi; j++)
        if (score[j] < score[best])
            best = j;
    return best;
}

static void ref_lsgd(const problem *p, trajectory *t)
{
    static double x[MAXN][DIM], u[MAXN][DIM], sg[MAXN][DIM], sG[MAXN][DIM], nx[MAXN][DIM];
    double hist[MAXN][AMAX], score[MAXN];
    int nl[MAXN] = {0}, next[MAXN] = {0}, gl[MAXN], GL = -1, G = p->group;
    memcpy(x, p->x0, sizeof x);
    memset(u, 0, sizeof u);
    memset(sg, 0, sizeof sg);
    memset(sG, 0, sizeof sG);
    for (int a = 0; a < p->n; a++)
        gl[a] = -1;
    for (int s = 0; s < p->steps; s++) {
        int k = s + 1, group = k % p->tau == 0, global = k % p->tau_g == 0;
        for (int a = 0; a < p->n; a++) {
            hist[a][next[a]] = loss_at(p, a, s, x[a]);
            next[a] = (next[a] + 1) % p->avg;
            nl[a] = nl[a] < p->avg ? nl[a] + 1 : nl[a];
            double g[DIM];
            for (int i = 0; i < DIM; i++)
                g[i] = grad_at(p, a, s, i, x[a][i]) + p->wd * x[a][i];
            ref_step(p, x[a], u[a], g);
            if (group || global)
                continue;
            double ca = gl[a] >= 0 && gl[a] != a ? p->p1 / p->tau : 0;
            double cb = GL >= 0 && GL != a ? p->p2 / p->tau_g : 0;
            for (int i = 0; i < DIM; i++)
                x[a][i] -= ca * (x[a][i] - sg[a][i]) + cb * (x[a][i] - sG[a][i]);
        }
        for (int a = 0; a < p->n; a++) {
            score[a] = 0;
            for (int q = 0; q < nl[a]; q++)
                score[a] += hist[a][q] / nl[a];
        }
        if (group || global) {
            int newG = ref_elect(score, 0, p->n);
            for (int a = 0; a < p->n; a++) {
                int lead = ref_elect(score, a / G * G, a / G * G + G);
                double c1 = group && lead != a ? p->c1 : 0, c2 = global && newG != a ? p->c2 : 0;
                for (int i = 0; i < DIM; i++)
                    nx[a][i] = x[a][i] - c1 * (x[a][i] - x[lead][i]) - c2 * (x[a][i] - x[newG][i]);
                if (group) {
                    gl[a] = lead;
                    if (p->p1 > 0)
                        memcpy(sg[a], x[lead], sizeof x[lead]);
                }
                if (global && p->p2 > 0)
                    memcpy(sG[a], x[newG], sizeof x[newG]);
            }
            if (global)
                GL = newG;
            memcpy(x, nx, sizeof nx);
        }
        for (int a = 0; a < p->n; a++) {
            snap *o = &t->s[a][s];
            memcpy(o->x, x[a], sizeof x[a]);
            memcpy(o->u, u[a], sizeof u[a]);
            memcpy(o->sg, sg[a], sizeof sg[a]);
            memcpy(o->sG, sG[a], sizeof sG[a]);
            o->gl = gl[a], o->GL = GL, o->nl = nl[a], o->next = next[a];
            memcpy(o->losses, hist[a], sizeof hist[a]);
        }
        /* The master: the global leader by the scores now. */
        memcpy(t->master[s], x[ref_elect(score, 0, p->n)], sizeof x[0]);
    }
}

/* ---- the rule under test, on threads ---- */

typedef struct run_ctx {
    const problem *p;
    const trajectory *t;
    job_config cfg;
    comm comm;
    double err[MAXN];        /* worst relative error of any float buffer or number */
    int exact_bad[MAXN];     /* leaders, counts: must match exactly */
    int failed[MAXN];
    char what[MAXN][128];    /* the first buffer off by more than the tolerance */
    double mass[STEPS][MAXN];/* sgp: w_i + w_in_flight_i after each step */
} run_ctx;

/* fp32 rules against float64 over 20 steps with momentum: a momentum buffer
 * near cancellation reached 2.3e-5 (PARLE_TEST_SEED=20573744994); a wrong
 * coefficient is off by 1e-2 or more. */
static const double ATOL = 1e-6, RTOL = 5e-5;

static void compare(run_ctx *rc, int a, int k, const char *name, const float *got,
                    const double *want, int count)
{
    for (int i = 0; i < count; i++) {
        double e = fabs(got[i] - want[i]) / (ATOL / RTOL + fabs(want[i]));
        if (e > rc->err[a] && e > RTOL && !rc->what[a][0])
            snprintf(rc->what[a], sizeof rc->what[a], "%s[%d] after step %d: %.9g, want %.9g",
                     name, i, k, got[i], want[i]);
        rc->err[a] = fmax(rc->err[a], e);
    }
}

static const double *ref_vector(const snap *o, const char *name)
{
    return !strcmp(name, "x") ? o->x : !strcmp(name, "u") ? o->u : !strcmp(name, "z") ? o->z
         : !strcmp(name, "inbox") ? o->inbox : !strcmp(name, "seen_group") ? o->sg
         : !strcmp(name, "seen_global") ? o->sG : NULL;
}

static void check_scalars(run_ctx *rc, const coupling_rule *rule, replica *r, int k)
{
    const char *names[RULE_MAX_SCALARS];
    double *vals[RULE_MAX_SCALARS];
    const snap *o = &rc->t->s[r->rank][k - 1];
    int n = rule->scalars ? rule->scalars(r, names, vals) : 0, a = r->rank;
    for (int q = 0; q < n; q++) {
        const char *nm = names[q];
        double v = *vals[q];
        if (!strcmp(nm, "w") || !strcmp(nm, "w_in_flight")) {
            double want = nm[1] ? o->wf : o->w;
            float got = (float)v;
            compare(rc, a, k, nm, &got, &want, 1);
            rc->mass[k - 1][a] += v;
        } else if (!strncmp(nm, "loss", 4) && nm[4] >= '0' && nm[4] <= '9') {
            int j = atoi(nm + 4);
            float got = (float)v;
            if (j < (int)o->nl)
                compare(rc, a, k, nm, &got, &o->losses[j], 1);
        } else {
            double want = !strcmp(nm, "group_leader") ? o->gl : !strcmp(nm, "global_leader") ? o->GL
                        : !strcmp(nm, "nlosses") ? o->nl : !strcmp(nm, "next_loss") ? o->next
                        : NAN;
            if (v != want && !rc->exact_bad[a]) {
                rc->exact_bad[a] = 1;
                fprintf(stderr, "replica %d step %d: %s = %g, want %g\n", a, k, nm, v, want);
            }
        }
    }
}

static void replica_thread(void *ctx, int a)
{
    run_ctx *rc = ctx;
    const problem *p = rc->p;
    float params[DIM], grads[DIM];
    replica r;
    test_replica_init(&r, a, p->n, &rc->cfg, &rc->comm, params, grads, DIM, p->x0[a]);
    const coupling_rule *rule = coupling_find(p->rule);
    char err[256];
    if (!rule || rule->init(&r, err, sizeof err) != 0 || rule->steps_per_sync(&rc->cfg) != 1) {
        rc->failed[a] = 1;
        comm_abort(&rc->comm, "init");
        return;
    }
    r.lr = (float)p->lr;
    for (int k = 1; k <= p->steps; k++) {
        r.k = k;
        r.step = k;
        rule->begin(&r);
        double x[DIM];
        for (int i = 0; i < DIM; i++) {
            x[i] = params[i];
            grads[i] = (float)grad_at(p, a, k - 1, i, params[i]);
        }
        r.last_loss = (float)loss_at(p, a, k - 1, x);
        rule->step(&r);
        if (rule->sync(&r) != 0) {
            rc->failed[a] = 1;
            break;
        }
        const snap *o = &rc->t->s[a][k - 1];
        compare(rc, a, k, "weights", rule->weights(&r), o->x, DIM);
        const char *names[RULE_MAX_STATE];
        float *bufs[RULE_MAX_STATE];
        int nb = rule->state(&r, names, bufs);
        for (int b = 0; b < nb; b++) {
            const double *want = ref_vector(o, names[b]);
            if (!want) {
                rc->failed[a] = 1;
                fprintf(stderr, "%s: no reference for state \"%s\"\n", p->rule, names[b]);
            } else {
                compare(rc, a, k, names[b], bufs[b], want, DIM);
            }
        }
        check_scalars(rc, rule, &r, k);
        if (rule->master && (k % 4 == 0 || k == p->steps)) {
            const float *m = rule->master(&r);
            if (!m) {
                rc->failed[a] = 1;
                break;
            }
            compare(rc, a, k, "master", m, rc->t->master[k - 1], DIM);
        }
    }
    test_replica_free(&r, rule);
}

static void run_rule(const problem *p, const trajectory *t, const char *label)
{
    static run_ctx rc;
    memset(&rc, 0, sizeof rc);
    rc.p = p;
    rc.t = t;
    job_config *cfg = &rc.cfg;
    test_rule_config(cfg, p->rule, p->n, 0, p->mu, p->wd, p->nesterov);
    snprintf(cfg->algorithm.graph, sizeof cfg->algorithm.graph, "%s",
             p->ring ? "ring" : "bipartite-exponential");
    cfg->algorithm.mix_after_step = p->after;
    cfg->algorithm.peers = p->peers;
    cfg->algorithm.synch_freq = p->synch_freq;
    cfg->algorithm.group_size = p->group;
    cfg->algorithm.tau = p->tau;
    cfg->algorithm.tau_global = p->tau_g;
    cfg->algorithm.avg_size = p->avg;
    cfg->algorithm.c1 = p->c1, cfg->algorithm.c2 = p->c2;
    cfg->algorithm.p1 = p->p1, cfg->algorithm.p2 = p->p2;
    test_run_replicas(&rc.comm, p->n, DIM, replica_thread, &rc);
    for (int a = 0; a < p->n; a++) {
        CHECK(!rc.failed[a], "%s replica %d: the rule failed", label, a);
        CHECK(rc.err[a] <= RTOL, "%s replica %d: off by %.3g (relative): %s", label, a, rc.err[a],
              rc.what[a]);
        CHECK(!rc.exact_bad[a], "%s replica %d: leaders or loss window differ", label, a);
    }
    /* Push-sum's mass, counting what is in flight: sum_i (w_i + w_in_flight_i) = n. */
    if (!strcmp(p->rule, "sgp") || !strcmp(p->rule, "osgp"))
        for (int s = 0; s < p->steps; s++) {
            double sum = 0;
            for (int a = 0; a < p->n; a++)
                sum += rc.mass[s][a];
            CHECK(fabs(sum - p->n) <= 1e-12 * p->n, "%s: sum of weights %.17g after step %d, want %d",
                  label, sum, s + 1, p->n);
        }
}

static void make_problem(problem *p, const char *rule, int n, int steps, int same_start)
{
    memset(p, 0, sizeof *p);
    p->rule = rule, p->n = n, p->steps = steps;
    p->lr = test_uniform(0.02, 0.1);
    p->mu = 0.9;
    p->nesterov = 1;
    p->wd = test_uniform(1e-4, 1e-2);
    p->ring = 1, p->peers = 1, p->group = n, p->tau = 4, p->tau_g = 8, p->avg = 3;
    p->c1 = 0.5, p->c2 = 0.5;
    for (int i = 0; i < DIM; i++)
        p->h[i] = test_uniform(0.2, 2.0);
    for (int a = 0; a < n; a++) {
        for (int i = 0; i < DIM; i++)
            p->x0[a][i] = same_start ? p->x0[0][i] : test_uniform(-1, 1);
        if (a == 0 && same_start)
            for (int i = 0; i < DIM; i++)
                p->x0[0][i] = test_uniform(-1, 1);
        for (int s = 0; s < STEPS; s++) {
            p->bias[a][s] = test_uniform(0, 2);
            for (int i = 0; i < DIM; i++)
                p->c[a][s][i] = test_uniform(-1, 1);
        }
    }
}

static void check_graphs(void)
{
    /* Every bipartite round is a perfect matching across the parity classes. */
    for (int n = 2; n <= 16; n += 2)
        for (int t = 0; t < 12; t++)
            for (int a = 0; a < n; a++) {
                int b = ref_bipartite_peer(a, n, t);
                CHECK(ref_bipartite_peer(b, n, t) == a && (a + b) % 2 == 1,
                      "bipartite n=%d round %d: %d -> %d -> %d", n, t, a, b,
                      ref_bipartite_peer(b, n, t));
            }
}

int main(void)
{
    test_init("rules_sync");
    static problem p;
    static trajectory t;
    check_graphs();

    make_problem(&p, "allreduce", 3, 20, 1);
    ref_allreduce(&p, &t);
    run_rule(&p, &t, "allreduce n=3");
    make_problem(&p, "allreduce", 4, 12, 1);
    p.nesterov = 0;
    ref_allreduce(&p, &t);
    run_rule(&p, &t, "allreduce n=4 heavy-ball");

    make_problem(&p, "dpsgd", 4, 16, 0);
    ref_dpsgd(&p, &t);
    run_rule(&p, &t, "dpsgd ring n=4");
    make_problem(&p, "dpsgd", 3, 16, 0);
    p.after = 1;
    ref_dpsgd(&p, &t);
    run_rule(&p, &t, "dpsgd ring n=3 mix_after_step");
    make_problem(&p, "dpsgd", 6, 16, 0);
    p.ring = 0;
    ref_dpsgd(&p, &t);
    run_rule(&p, &t, "dpsgd bipartite n=6");
    make_problem(&p, "dpsgd", 8, 16, 0);
    p.ring = 0, p.after = 1;
    ref_dpsgd(&p, &t);
    run_rule(&p, &t, "dpsgd bipartite n=8 mix_after_step");

    make_problem(&p, "sgp", 4, 16, 0);
    ref_sgp(&p, &t, 0);
    run_rule(&p, &t, "sgp n=4");
    make_problem(&p, "sgp", 5, 16, 0);
    p.peers = 3;
    ref_sgp(&p, &t, 0);
    run_rule(&p, &t, "sgp n=5 peers=3");
    make_problem(&p, "osgp", 4, 16, 0);
    ref_sgp(&p, &t, 1);
    run_rule(&p, &t, "osgp n=4");
    make_problem(&p, "osgp", 6, 20, 0);
    p.peers = 2, p.synch_freq = 2;
    ref_sgp(&p, &t, 1);
    run_rule(&p, &t, "osgp n=6 peers=2 synch_freq=2");

    make_problem(&p, "lsgd", 4, 24, 1);
    p.group = 2, p.tau = 3, p.tau_g = 5, p.c1 = 0.4, p.c2 = 0.3, p.p1 = 0.6, p.p2 = 0.5;
    ref_lsgd(&p, &t);
    run_rule(&p, &t, "lsgd n=4 groups of 2");
    make_problem(&p, "lsgd", 3, 20, 0);
    p.tau = 2, p.tau_g = 4, p.avg = 5, p.p2 = 0.8;
    ref_lsgd(&p, &t);
    run_rule(&p, &t, "lsgd n=3 one group");

    /* The checks can fail: a 1% error in LSGD's c2 must be caught. */
    printf("rules_sync: a deliberate 1%% error in c2 follows; its failures are expected\n");
    make_problem(&p, "lsgd", 4, 16, 1);
    p.group = 2, p.tau = 2, p.tau_g = 4;
    ref_lsgd(&p, &t);
    p.c2 *= 1.01;
    int before = test_failures;
    run_rule(&p, &t, "lsgd with a wrong c2");
    CHECK(test_forget_failures(before), "a 1%% error in c2 went unnoticed");

    return test_main_end();
}
