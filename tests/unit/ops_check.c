/* What the op tests share (ops_check.h): random inputs, float64 copies,
 * array checks and central differences. */
#include "ops_check.h"

#include <math.h>
#include <stdlib.h>

#include "testutil.h"

float *new_floats(size_t n, double lo, double hi)
{
    float *x = malloc((n ? n : 1) * sizeof(float));
    test_fill_uniform(x, n, lo, hi);
    return x;
}

double *to_double(const float *x, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof(double));
    for (size_t i = 0; i < n; i++)
        d[i] = x ? x[i] : 0.0;
    return d;
}

double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

void check_array(const char *what, const float *got, const double *want, size_t n,
                        double atol, double rtol)
{
    size_t bad = 0, worst = 0;
    double worst_excess = -1.0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]), allowed = atol + rtol * fabs(want[i]);
        if (!(err <= allowed))
            bad++;
        if (!(err - allowed <= worst_excess))
            worst_excess = err - allowed, worst = i;
    }
    CHECK(bad == 0, "%s: %zu of %zu off, worst [%zu] got %.9g want %.9g", what, bad, n, worst,
          n ? (double)got[worst] : 0.0, n ? want[worst] : 0.0);
}

void check_same(const char *what, const float *got, const float *want, size_t n)
{
    double *w = to_double(want, n);
    check_array(what, got, w, n, SAME_TOL, SAME_TOL);
    free(w);
}

void numeric_grad(loss_fn loss, void *arg, double *p, size_t n, double *grad)
{
    for (size_t i = 0; i < n; i++) {
        double saved = p[i];
        p[i] = saved + FD_STEP;
        double up = loss(arg);
        p[i] = saved - FD_STEP;
        double down = loss(arg);
        p[i] = saved;
        grad[i] = (up - down) / (2.0 * FD_STEP);
    }
}

void check_ref_grad(const char *what, loss_fn loss, void *arg, double *p, size_t n,
                           const double *grad)
{
    double *want = malloc((n ? n : 1) * sizeof(double));
    numeric_grad(loss, arg, p, n, want);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !(fabs(grad[i] - want[i]) <= 1e-7 + 1e-7 * fabs(want[i]));
    CHECK(bad == 0, "%s: %zu of %zu differ from central differences", what, bad, n);
    free(want);
}

void check_grad(const char *what, loss_fn loss, void *arg, double *p, size_t n,
                       const float *got)
{
    double *want = malloc((n ? n : 1) * sizeof(double));
    numeric_grad(loss, arg, p, n, want);
    check_array(what, got, want, n, BWD_ATOL, BWD_RTOL);
    free(want);
}

void fill_distinct(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(-1.0 + 2.0 * ((double)i + 0.5) / (double)n);
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)test_uniform(0.0, (double)i);
        float t = x[i - 1];
        x[i - 1] = x[j];
        x[j] = t;
    }
}
