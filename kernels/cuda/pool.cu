/* Max and average pooling over NCHW planes, floor mode as PyTorch, matching
 * kernels/cpu/pool.c bit for bit: the same windows, clipped to the input,
 * visited in the same order.
 *
 * Forward is one thread per output. Backward is one thread per INPUT
 * element, gathering from the outputs whose windows cover it (windows
 * overlap when stride < k): no two threads write one element, so no atomics,
 * and each thread adds its outputs in row-major output order, the order the
 * CPU's scatter adds them in. Activations are the context's type (act.cuh),
 * sums in float. */
#include "act.cuh"
#include "backend_cuda.h"
#include "cuda_check.h"
#include "launch.cuh"

/* The window of output o along one axis, clipped to [0, in). */
__device__ static void window(int o, int in, int k, int stride, int pad, int *lo, int *hi)
{
    const int start = o * stride - pad;
    *lo = start < 0 ? 0 : start;
    *hi = start + k > in ? in : start + k;
}

/* The outputs [*lo, *hi) along one axis whose windows hold input i. */
__device__ static void covering(int i, int out, int k, int stride, int pad, int *lo, int *hi)
{
    /* o stride - pad <= i <= o stride - pad + k - 1 */
    const int first = i + pad - k + 1;
    *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
    const int last = (i + pad) / stride + 1;
    *hi = last < out ? last : out;
}

/* Rows [r[0], r[1]) and columns [r[2], r[3]) of the input under output `at`
 * of a plane. */
__device__ static void window_2d(const pool2d_desc &p, int at, int r[4])
{
    window(at / p.out_w, p.in_h, p.k, p.stride, p.pad, &r[0], &r[1]);
    window(at % p.out_w, p.in_w, p.k, p.stride, p.pad, &r[2], &r[3]);
}

/* Rows [r[0], r[1]) and columns [r[2], r[3]) of the outputs whose windows
 * hold input `at` of a plane. */
__device__ static void covering_2d(const pool2d_desc &p, int at, int r[4])
{
    covering(at / p.in_w, p.out_h, p.k, p.stride, p.pad, &r[0], &r[1]);
    covering(at % p.in_w, p.out_w, p.k, p.stride, p.pad, &r[2], &r[3]);
}

/* The sum over rows [r[0], r[1]) and columns [r[2], r[3]) of a plane with
 * rows ld long, each term times scale: average pooling's backward scales
 * every gradient before adding, as the CPU's scatter does; forward passes 1
 * (exact) and scales the sum. */
template <typename T>
__device__ static float box_sum(const T *plane, int ld, const int r[4], float scale)
{
    float sum = 0.0f;
    for (int a = r[0]; a < r[1]; a++)
        for (int b = r[2]; b < r[3]; b++)
            sum += act_ld(plane, a * ld + b) * scale;
    return sum;
}

template <typename T>
static void maxpool_fwd(backend_ctx *ctx, const pool2d_desc *d, int n, const float *xv, float *yv,
                        int32_t *argmax)
{
    const T *x = act_in<T>(xv);
    T *y = act_out<T>(yv);
    const pool2d_desc p = *d;
    const size_t in_plane = (size_t)p.in_h * p.in_w, out_plane = (size_t)p.out_h * p.out_w;
    auto f = [=] __device__(size_t o) {
        const T *xp = x + o / out_plane * in_plane;
        int r[4];
        window_2d(p, (int)(o % out_plane), r);
        int best = r[0] * p.in_w + r[2];
        float best_v = act_ld(xp, best);
        for (int ih = r[0]; ih < r[1]; ih++)
            for (int iw = r[2]; iw < r[3]; iw++) {
                const float v = act_ld(xp, ih * p.in_w + iw);
                if (v > best_v) { /* strictly greater: the first maximum wins */
                    best = ih * p.in_w + iw;
                    best_v = v;
                }
            }
        act_st(y, o, best_v);
        argmax[o] = best;
    };
    CUDA_OK(ctx, for_each_index(cuda_stream_of(ctx), (size_t)n * p.c * out_plane, f));
}

template <typename T>
static void maxpool_bwd(backend_ctx *ctx, const pool2d_desc *d, int n, const float *dyv,
                        const int32_t *argmax, float *dxv)
{
    const T *dy = act_in<T>(dyv);
    T *dx = act_out<T>(dxv);
    const pool2d_desc p = *d;
    const size_t in_plane = (size_t)p.in_h * p.in_w, out_plane = (size_t)p.out_h * p.out_w;
    auto f = [=] __device__(size_t i) {
        const size_t plane = i / in_plane;
        const int at = (int)(i % in_plane);
        const T *g = dy + plane * out_plane;
        const int32_t *am = argmax + plane * out_plane;
        int r[4];
        covering_2d(p, at, r);
        float sum = 0.0f;
        for (int oh = r[0]; oh < r[1]; oh++)
            for (int ow = r[2]; ow < r[3]; ow++)
                if (am[oh * p.out_w + ow] == at)
                    sum += act_ld(g, oh * p.out_w + ow);
        act_st(dx, i, sum);
    };
    CUDA_OK(ctx, for_each_index(cuda_stream_of(ctx), (size_t)n * p.c * in_plane, f));
}

template <typename T>
static void avgpool_fwd(backend_ctx *ctx, const pool2d_desc *d, int n, const float *xv, float *yv)
{
    const T *x = act_in<T>(xv);
    T *y = act_out<T>(yv);
    const pool2d_desc p = *d;
    const size_t in_plane = (size_t)p.in_h * p.in_w, out_plane = (size_t)p.out_h * p.out_w;
    /* Floor mode never lets a window pass the padded border, so counting the
     * padding makes every divisor k * k. */
    const float scale = 1.0f / (float)(p.k * p.k);
    auto f = [=] __device__(size_t o) {
        const T *xp = x + o / out_plane * in_plane;
        int r[4];
        window_2d(p, (int)(o % out_plane), r);
        act_st(y, o, box_sum(xp, p.in_w, r, 1.0f) * scale);
    };
    CUDA_OK(ctx, for_each_index(cuda_stream_of(ctx), (size_t)n * p.c * out_plane, f));
}

template <typename T>
static void avgpool_bwd(backend_ctx *ctx, const pool2d_desc *d, int n, const float *dyv,
                        float *dxv)
{
    const T *dy = act_in<T>(dyv);
    T *dx = act_out<T>(dxv);
    const pool2d_desc p = *d;
    const size_t in_plane = (size_t)p.in_h * p.in_w, out_plane = (size_t)p.out_h * p.out_w;
    const float scale = 1.0f / (float)(p.k * p.k);
    auto f = [=] __device__(size_t i) {
        const T *g = dy + i / in_plane * out_plane;
        int r[4];
        covering_2d(p, (int)(i % in_plane), r);
        act_st(dx, i, box_sum(g, p.out_w, r, scale));
    };
    CUDA_OK(ctx, for_each_index(cuda_stream_of(ctx), (size_t)n * p.c * in_plane, f));
}

extern "C" void cuda_maxpool2d_forward_op(backend_ctx *ctx, const pool2d_desc *d, int n,
                                          const float *x, float *y, int32_t *argmax)
{
    ACT_DISPATCH(ctx, maxpool_fwd, ctx, d, n, x, y, argmax);
}

extern "C" void cuda_maxpool2d_backward_op(backend_ctx *ctx, const pool2d_desc *d, int n,
                                           const float *dy, const int32_t *argmax, float *dx)
{
    ACT_DISPATCH(ctx, maxpool_bwd, ctx, d, n, dy, argmax, dx);
}

extern "C" void cuda_avgpool2d_forward_op(backend_ctx *ctx, const pool2d_desc *d, int n,
                                          const float *x, float *y)
{
    ACT_DISPATCH(ctx, avgpool_fwd, ctx, d, n, x, y);
}

extern "C" void cuda_avgpool2d_backward_op(backend_ctx *ctx, const pool2d_desc *d, int n,
                                           const float *dy, float *dx)
{
    ACT_DISPATCH(ctx, avgpool_bwd, ctx, d, n, dy, dx);
}
