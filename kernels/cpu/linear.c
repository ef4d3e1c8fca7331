/* Fully connected layer, PyTorch layout w[out][in], through gemm. */
#include "cpu_ops.h"
#include "cpu_util.h"

void cpu_linear_forward(backend_ctx *ctx, int n, int in, int out, const float *x, const float *w,
                        const float *b, float *y)
{
    /* Start every row at the bias, then add x w^T. */
    for (int i = 0; i < n; i++)
        for (int o = 0; o < out; o++)
            y[(size_t)i * out + o] = b ? b[o] : 0.0f;
    cpu_gemm(ctx, 0, 1, n, out, in, 1.0f, x, in, w, in, 1.0f, y, out);
}

void cpu_linear_backward(backend_ctx *ctx, int n, int in, int out, const float *x, const float *w,
                         const float *dy, float *dx, float *dw, float *db)
{
    if (dx)
        cpu_gemm(ctx, 0, 0, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
    cpu_gemm(ctx, 1, 0, out, in, n, 1.0f, dy, out, x, in, 0.0f, dw, in);
    if (!db)
        return;
    for (int o = 0; o < out; o++)
        db[o] = 0.0f;
    for (int i = 0; i < n; i++) {
        const float *restrict g = dy + (size_t)i * out;
        float *restrict acc = db;
        for (int o = 0; o < out; o++)
            acc[o] += g[o];
    }
}
