/* test_gpu_ops' shared contexts and tensors (gpu_ops_check.h). */
#include <stdlib.h>
#include <string.h>

#include "gpu_ops_check.h"
#include "testutil.h"

backend_ctx cpu, gpu;
int quiet;

buf make(size_t n, double lo, double hi)
{
    buf b = {malloc((n ? n : 1) * sizeof(float)), backend_alloc(&gpu, n * sizeof(float)), n};
    if (!b.h || !b.d) {
        fprintf(stderr, "out of memory for %zu floats: %s\n", n, gpu.err);
        exit(1);
    }
    test_fill_uniform(b.h, n, lo, hi);
    backend_upload(&gpu, b.d, b.h, n * sizeof(float));
    return b;
}

void drop(buf *b)
{
    free(b->h);
    backend_free(&gpu, b->d);
}

/* Compare b's device copy with its host copy; returns the largest error. */
double compare(const char *what, const buf *b, double atol, double rtol)
{
    float *got = malloc((b->n ? b->n : 1) * sizeof(float));
    backend_download(&gpu, got, b->d, b->n * sizeof(float));
    CHECK(!backend_failed(&gpu), "%s: %s", what, gpu.err);
    size_t bad = 0, first = 0;
    double worst = 0.0;
    for (size_t i = 0; i < b->n && !backend_failed(&gpu); i++) {
        const double e = fabs((double)got[i] - b->h[i]);
        worst = e > worst || isnan(e) ? e : worst;
        if (!(e <= atol + rtol * fabs((double)b->h[i])) && bad++ == 0)
            first = i;
    }
    CHECK(bad == 0, "%s: %zu of %zu differ, first [%zu] gpu %.9g cpu %.9g", what, bad, b->n,
          first, (double)got[first], (double)b->h[first]);
    if (!quiet)
        printf("  %-40s max |gpu - cpu| %.3g (atol %.3g)\n", what, worst, atol);
    free(got);
    return worst;
}

/* Byte-for-byte equality of two device buffers (repeat runs). */
void check_same_bits(const char *what, const float *d1, const float *d2, size_t n)
{
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    backend_download(&gpu, a, d1, n * sizeof(float));
    backend_download(&gpu, b, d2, n * sizeof(float));
    CHECK(memcmp(a, b, n * sizeof(float)) == 0, "%s: repeat run differs", what);
    free(a);
    free(b);
}

/* An int32 tensor on both sides. */
int32_t *int_buf(size_t n, int32_t **host)
{
    *host = malloc((n ? n : 1) * sizeof(int32_t));
    return backend_alloc(&gpu, n * sizeof(int32_t));
}
