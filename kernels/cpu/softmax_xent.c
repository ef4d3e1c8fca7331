/* Softmax cross-entropy, mean over the batch, computed through the
 * log-sum-exp with the row maximum subtracted so no exp overflows. */
#include <math.h>

#include "cpu_ops.h"

float cpu_softmax_xent(backend_ctx *ctx, int n, int classes, const float *logits,
                       const int32_t *labels, float *dlogits, int *correct)
{
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= classes) {
            backend_fail(ctx, "label %d of example %d is outside [0, %d)", (int)labels[i], i,
                         classes);
            return NAN; /* no defined loss */
        }
    double loss = 0.0;
    int hits = 0;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * classes;
        int top = 0;
        for (int j = 1; j < classes; j++)
            if (z[j] > z[top])
                top = j;
        const float zmax = z[top];
        double sum = 0.0;
        for (int j = 0; j < classes; j++)
            sum += exp((double)(z[j] - zmax));
        const double log_sum = log(sum);
        loss += log_sum - (double)(z[labels[i]] - zmax);
        hits += top == labels[i];
        if (!dlogits)
            continue;
        float *g = dlogits + (size_t)i * classes;
        for (int j = 0; j < classes; j++)
            g[j] = (float)(exp((double)(z[j] - zmax) - log_sum) / n);
        g[labels[i]] -= 1.0f / (float)n;
    }
    if (correct)
        *correct = hits;
    return n > 0 ? (float)(loss / n) : 0.0f;
}
