/* Parle's equations (docs/algorithms.md) and its reductions, checked on a small
 * quadratic against float64 references written here from the plain
 * algorithms, with the replicas on real threads coupled through comm.
 * f_a(w) = 1/2 sum_i h_i (w_i - c_ai)^2 + noise per step, so every replica
 * sees its own "mini-batches". Tolerance: 2e-5 relative + 1e-6 absolute
 * (float32 against float64 over ~20 fused updates). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coupling.h"
#include "parle.h"
#include "testjob.h"

#define DIM 37
#define MAXN 4
#define MAXSTEPS 64

typedef struct problem {
    int n, L, outer;
    double lr, inner_lr, mu, wd, gamma0, rho0, growth, alpha;
    long nb;
    double h[DIM];
    double c[MAXN][MAXSTEPS][DIM]; /* per replica, per gradient step: the target */
    double x0[MAXN][DIM];
} problem;

/* The reference trajectory: weights after every outer iteration, and the
 * inner iterate y after every gradient step. */
typedef struct trajectory {
    double x[MAXN][MAXSTEPS][DIM];
    double y[MAXN][MAXSTEPS][DIM];
    double z[MAXN][MAXSTEPS][DIM], v[MAXN][MAXSTEPS][DIM], u[MAXN][MAXSTEPS][DIM];
} trajectory;

static double grow(double v0, double cap, const problem *p, long k)
{
    double v = v0 * pow(1.0 + p->growth / (double)p->nb, (double)k);
    return v < cap ? v : cap;
}

static double grad_at(const problem *p, int a, int step, int i, double w)
{
    return p->h[i] * (w - p->c[a][step][i]);
}

/* Parle, straight from the equations, every replica in lockstep. */
static void ref_parle(const problem *p, trajectory *t)
{
    static double x[MAXN][DIM], y[MAXN][DIM], z[MAXN][DIM], v[MAXN][DIM], u[MAXN][DIM];
    memcpy(x, p->x0, sizeof x);
    memset(v, 0, sizeof v);
    memset(u, 0, sizeof u);
    int step = 0;
    for (int k = 1; k <= p->outer; k++) {
        double gamma = grow(p->gamma0, 1.0, p, k), rho = grow(p->rho0, 10.0, p, k);
        for (int a = 0; a < p->n; a++)
            for (int i = 0; i < DIM; i++)
                y[a][i] = z[a][i] = x[a][i];
        for (int l = 0; l < p->L; l++, step++)
            for (int a = 0; a < p->n; a++)
                for (int i = 0; i < DIM; i++) {
                    double g = grad_at(p, a, step, i, y[a][i]) + p->wd * y[a][i] +
                               gamma * (y[a][i] - x[a][i]);
                    v[a][i] = p->mu * v[a][i] + g;
                    y[a][i] -= p->inner_lr * (g + p->mu * v[a][i]);
                    z[a][i] = p->alpha * z[a][i] + (1 - p->alpha) * y[a][i];
                    t->y[a][step][i] = y[a][i];
                }
        for (int i = 0; i < DIM; i++) {
            double zbar = 0;
            for (int a = 0; a < p->n; a++)
                zbar += z[a][i] / p->n;
            for (int a = 0; a < p->n; a++) {
                double d = (x[a][i] - z[a][i]) + rho * (x[a][i] - zbar);
                u[a][i] = p->mu * u[a][i] + d;
                x[a][i] -= p->lr * (d + p->mu * u[a][i]);
                t->x[a][k - 1][i] = x[a][i];
                t->z[a][k - 1][i] = z[a][i];
                t->v[a][k - 1][i] = v[a][i];
                t->u[a][k - 1][i] = u[a][i];
            }
        }
    }
}

/* Plain Nesterov SGD with weight decay (torch.optim.SGD, dampening 0). */
static void ref_nesterov_sgd(const problem *p, trajectory *t)
{
    double w[DIM], buf[DIM] = {0};
    memcpy(w, p->x0[0], sizeof w);
    for (int s = 0; s < p->outer; s++)
        for (int i = 0; i < DIM; i++) {
            double g = grad_at(p, 0, s, i, w[i]) + p->wd * w[i];
            buf[i] = p->mu * buf[i] + g;
            w[i] = w[i] - p->lr * (g + p->mu * buf[i]);
            t->x[0][s][i] = w[i];
        }
}

/* Elastic-SGD: every replica takes a Nesterov step on
 * f_a(x_a) + lambda/2 |x_a|^2 + rho/2 |x_a - mean(x)|^2, all with the same mean. */
static void ref_elastic(const problem *p, trajectory *t)
{
    static double x[MAXN][DIM], buf[MAXN][DIM];
    memcpy(x, p->x0, sizeof x);
    memset(buf, 0, sizeof buf);
    for (int s = 0; s < p->outer; s++) {
        double rho = grow(p->rho0, 10.0, p, s + 1);
        double mean[DIM] = {0};
        for (int a = 0; a < p->n; a++)
            for (int i = 0; i < DIM; i++)
                mean[i] += x[a][i] / p->n;
        for (int a = 0; a < p->n; a++)
            for (int i = 0; i < DIM; i++) {
                double g = grad_at(p, a, s, i, x[a][i]) + p->wd * x[a][i] +
                           rho * (x[a][i] - mean[i]);
                buf[a][i] = p->mu * buf[a][i] + g;
                x[a][i] -= p->lr * (g + p->mu * buf[a][i]);
                t->x[a][s][i] = x[a][i];
            }
    }
}

/* ---- the rule under test, on threads ---- */

typedef struct run_ctx {
    const problem *p;
    const trajectory *t;
    job_config cfg;
    comm comm;
    double err_x[MAXN], err_y[MAXN], err_zvu[MAXN];
} run_ctx;

static double rel_err(float got, double want) { return fabs(got - want) / (1e-6 / 2e-5 + fabs(want)); }

static void replica_thread(void *ctx, int a)
{
    run_ctx *rc = ctx;
    const problem *p = rc->p;
    float params[DIM], grads[DIM];
    replica r;
    test_replica_init(&r, a, p->n, &rc->cfg, &rc->comm, params, grads, DIM, p->x0[a]);
    const coupling_rule *rule = coupling_find(rc->cfg.algorithm.name);
    char err[256];
    if (rule->init(&r, err, sizeof err) != 0)
        return;
    int S = rule->steps_per_sync(&rc->cfg), step = 0;
    r.inner_lr = (float)p->inner_lr;
    r.lr = (float)p->lr;
    for (int k = 1; k <= p->outer; k++) {
        r.k = k;
        r.gamma = (float)grow(p->gamma0, 1.0, p, k);
        r.rho = (float)grow(p->rho0, 10.0, p, k);
        rule->begin(&r);
        for (int l = 0; l < S; l++, step++) {
            for (int i = 0; i < DIM; i++)
                grads[i] = (float)grad_at(p, a, step, i, params[i]);
            rule->step(&r);
            if (p->L > 0)
                for (int i = 0; i < DIM; i++)
                    rc->err_y[a] = fmax(rc->err_y[a], rel_err(params[i], rc->t->y[a][step][i]));
        }
        rule->sync(&r);
        const float *x = rule->weights(&r);
        parle_state *s = r.rule_state;
        for (int i = 0; i < DIM; i++) {
            rc->err_x[a] = fmax(rc->err_x[a], rel_err(x[i], rc->t->x[a][k - 1][i]));
            if (p->L > 0) {
                double e = fmax(rel_err(s->z[i], rc->t->z[a][k - 1][i]),
                                fmax(rel_err(s->v[i], rc->t->v[a][k - 1][i]),
                                     rel_err(s->u[i], rc->t->u[a][k - 1][i])));
                rc->err_zvu[a] = fmax(rc->err_zvu[a], e);
            }
        }
    }
    test_replica_free(&r, rule);
}

static void run_rule(const char *name, const problem *p, const trajectory *t)
{
    static run_ctx rc;
    memset(&rc, 0, sizeof rc);
    rc.p = p;
    rc.t = t;
    test_rule_config(&rc.cfg, name, p->n, p->L, p->mu, p->wd, true);
    rc.cfg.algorithm.alpha = p->alpha;
    test_run_replicas(&rc.comm, p->n, DIM, replica_thread, &rc);
    for (int a = 0; a < p->n; a++) {
        char what[96];
        snprintf(what, sizeof what, "%s n=%d L=%d replica %d", name, p->n, p->L, a);
        CHECK(rc.err_x[a] <= 2e-5, "%s: x off by %.3g (relative)", what, rc.err_x[a]);
        CHECK(rc.err_y[a] <= 2e-5, "%s: y off by %.3g (relative)", what, rc.err_y[a]);
        CHECK(rc.err_zvu[a] <= 2e-5, "%s: z/v/u off by %.3g (relative)", what, rc.err_zvu[a]);
    }
}

static void make_problem(problem *p, int n, int L, int outer)
{
    memset(p, 0, sizeof *p);
    p->n = n, p->L = L, p->outer = outer;
    p->lr = test_uniform(0.02, 0.1);
    p->inner_lr = test_uniform(0.02, 0.1);
    p->mu = 0.9;
    p->wd = test_uniform(1e-4, 1e-2);
    p->gamma0 = test_uniform(0.01, 0.5);
    p->rho0 = test_uniform(0.5, 2.0);
    p->growth = 0.5;
    p->alpha = 0.75;
    p->nb = 4;
    for (int i = 0; i < DIM; i++)
        p->h[i] = test_uniform(0.2, 2.0);
    for (int a = 0; a < n; a++) {
        for (int i = 0; i < DIM; i++)
            p->x0[a][i] = test_uniform(-1, 1);
        for (int s = 0; s < MAXSTEPS; s++)
            for (int i = 0; i < DIM; i++)
                p->c[a][s][i] = test_uniform(-1, 1);
    }
}

int main(void)
{
    test_init("coupling");
    static problem p;
    static trajectory t;

    /* The general case: n = 2, L = 3, every buffer after every step. */
    make_problem(&p, 2, 3, 6);
    ref_parle(&p, &t);
    run_rule("parle", &p, &t);
    make_problem(&p, 3, 5, 4);
    ref_parle(&p, &t);
    run_rule("parle", &p, &t);

    /* Entropy-SGD: n = 1, rho = 0 (its own inner/outer loops, same equations). */
    make_problem(&p, 1, 4, 6);
    p.rho0 = 0;
    ref_parle(&p, &t);
    run_rule("entropy-sgd", &p, &t);

    /* SGD: n = 1, L = 0, rho = 0 is exactly Nesterov SGD with weight decay. */
    make_problem(&p, 1, 0, 40);
    p.rho0 = 0;
    ref_nesterov_sgd(&p, &t);
    run_rule("sgd", &p, &t);

    /* Elastic-SGD: L = 0, replicas pulled to their mean. */
    make_problem(&p, 3, 0, 30);
    ref_elastic(&p, &t);
    run_rule("elastic-sgd", &p, &t);

    /* The checks can fail: a wrong rho must be caught. */
    printf("coupling: a deliberate 1%% error in rho follows; its failures are expected\n");
    make_problem(&p, 2, 0, 10);
    ref_elastic(&p, &t);
    p.rho0 *= 1.01;
    int before = test_failures;
    run_rule("elastic-sgd", &p, &t);
    CHECK(test_forget_failures(before), "a 1%% error in rho went unnoticed");
    return test_main_end();
}
