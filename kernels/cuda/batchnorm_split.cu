/* The split batch norm in training (a context's batchnorm_split): several
 * blocks a channel, as kernels/bn_split.h plans them, instead of
 * batchnorm.cu's one. Forward is two launches: the moments (one read of x,
 * fp32 sums of deviations from the channel's first value, a partial pair a
 * block) and the apply (each block merges its channel's partials in part
 * order, block 0 of the channel saves the statistics, every block writes
 * its chunk of y = a x + b, with the ReLU after it where fused). Backward
 * likewise: sums of dy and dy (x - mean), the ReLU's mask recomputed from x
 * in the same read, then dx. No atomics, and the plan depends on the shape
 * only: repeated runs give the same bits. Activations of the context's type
 * (act.cuh), parameters and statistics fp32. */
#include "act.cuh"
#include "backend_cuda.h"
#include "bn_split.h"
#include "cuda_check.h"
#include "elementwise.h"
#include "launch.cuh"

/* Block b is part b % parts of channel b / parts (one division a block). */
struct bn_block {
    int ch, part;
    size_t begin, end;
};

__device__ static bn_block bn_block_of(const bn_split_plan &plan)
{
    bn_block k;
    k.ch = (int)(blockIdx.x / (unsigned)plan.parts);
    k.part = (int)(blockIdx.x - (unsigned)k.ch * (unsigned)plan.parts);
    k.begin = (size_t)k.part * plan.chunk;
    k.end = k.begin + plan.chunk < plan.count ? k.begin + plan.chunk : plan.count;
    return k;
}

/* Thread 0 of the block writes its pair of block sums at `pair`. */
__device__ static void bn_store_pair(float s1, float s2, float *pair)
{
    s1 = block_sum(s1);
    s2 = block_sum(s2);
    if (threadIdx.x == 0) {
        pair[0] = s1;
        pair[1] = s2;
    }
}

template <typename T>
__global__ void bn_split_moments_kernel(int c, int hw, bn_split_plan plan, const T *x,
                                        float *partials)
{
    const bn_block k = bn_block_of(plan);
    const bn_walk w = bn_walk_for(c, hw, blockDim.x);
    float *chan = partials + (size_t)k.ch * bn_split_stride(&plan);
    const float shift = act_ld(x, (size_t)k.ch * hw);
    if (k.part == 0 && threadIdx.x == 0)
        chan[0] = shift; /* for the apply: y may overwrite x */
    float s1 = 0.0f, s2 = 0.0f;
    bn_cursor at = bn_cursor_at(&w, k.ch, k.begin + threadIdx.x);
    for (size_t e = k.begin + threadIdx.x; e < k.end; e += blockDim.x, bn_cursor_next(&at, &w)) {
        const float d = act_ld(x, at.off) - shift;
        s1 += d;
        s2 += d * d;
    }
    bn_store_pair(s1, s2, chan + 1 + 2 * k.part);
}

template <typename T, bool RELU>
__global__ void bn_split_apply_kernel(int c, int hw, bn_split_plan plan, const T *x,
                                      const float *partials, const float *gamma,
                                      const float *beta, float *running_mean, float *running_var,
                                      float momentum, float eps, T *y, float *save_mean,
                                      float *save_invstd)
{
    const bn_block k = bn_block_of(plan);
    const bn_walk w = bn_walk_for(c, hw, blockDim.x);
    const float *chan = partials + (size_t)k.ch * bn_split_stride(&plan);
    double s1, s2;
    bn_split_merge(chan + 1, plan.parts, &s1, &s2);
    const bn_split_stats s = bn_split_forward_stats(s1, s2, (double)plan.count, chan[0], eps);
    const bn_split_affine f = bn_split_affine_of(gamma[k.ch], beta[k.ch], s.mean, s.invstd);
    if (k.part == 0 && threadIdx.x == 0) {
        save_mean[k.ch] = s.mean;
        save_invstd[k.ch] = s.invstd;
        running_mean[k.ch] = (1.0f - momentum) * running_mean[k.ch] + momentum * s.mean;
        running_var[k.ch] = (1.0f - momentum) * running_var[k.ch] + momentum * (float)s.unbiased;
    }
    bn_cursor at = bn_cursor_at(&w, k.ch, k.begin + threadIdx.x);
    for (size_t e = k.begin + threadIdx.x; e < k.end; e += blockDim.x, bn_cursor_next(&at, &w)) {
        const float v = f.a * act_ld(x, at.off) + f.b;
        act_st(y, at.off, RELU ? relu_elem(v) : v);
    }
}

/* dy, masked where a fused ReLU's output was 0. */
template <typename T, bool RELU>
__device__ __forceinline__ float bn_masked_dy(const T *dy, const bn_split_affine &f, float xv,
                                              size_t off)
{
    const float g = act_ld(dy, off);
    return RELU && !(f.a * xv + f.b > 0.0f) ? 0.0f : g;
}

template <typename T, bool RELU>
__global__ void bn_split_grad_moments_kernel(int c, int hw, bn_split_plan plan, const T *x,
                                             const T *dy, const float *gamma, const float *beta,
                                             const float *save_mean, const float *save_invstd,
                                             float *partials)
{
    const bn_block k = bn_block_of(plan);
    const bn_walk w = bn_walk_for(c, hw, blockDim.x);
    const float mean = save_mean[k.ch];
    const bn_split_affine f = bn_split_affine_of(gamma[k.ch], RELU ? beta[k.ch] : 0.0f, mean,
                                                 save_invstd[k.ch]);
    float s1 = 0.0f, s2 = 0.0f;
    bn_cursor at = bn_cursor_at(&w, k.ch, k.begin + threadIdx.x);
    for (size_t e = k.begin + threadIdx.x; e < k.end; e += blockDim.x, bn_cursor_next(&at, &w)) {
        const float xv = act_ld(x, at.off), g = bn_masked_dy<T, RELU>(dy, f, xv, at.off);
        s1 += g;
        s2 += g * (xv - mean);
    }
    bn_store_pair(s1, s2, partials + (size_t)k.ch * bn_split_stride(&plan) + 1 + 2 * k.part);
}

template <typename T, bool RELU>
__global__ void bn_split_grad_apply_kernel(int c, int hw, bn_split_plan plan, const T *x,
                                           const T *dy, const float *partials,
                                           const float *gamma, const float *beta,
                                           const float *save_mean, const float *save_invstd,
                                           T *dx, float *dgamma, float *dbeta)
{
    const bn_block k = bn_block_of(plan);
    const bn_walk w = bn_walk_for(c, hw, blockDim.x);
    const float mean = save_mean[k.ch], invstd = save_invstd[k.ch];
    const bn_split_affine f = bn_split_affine_of(gamma[k.ch], RELU ? beta[k.ch] : 0.0f, mean,
                                                 invstd);
    double s1, s2;
    bn_split_merge(partials + (size_t)k.ch * bn_split_stride(&plan) + 1, plan.parts, &s1, &s2);
    const bn_split_grad g =
        bn_split_backward_coeffs(s1, s2, (double)plan.count, gamma[k.ch], mean, invstd);
    if (k.part == 0 && threadIdx.x == 0) {
        dbeta[k.ch] = g.dbeta;
        dgamma[k.ch] = g.dgamma;
    }
    bn_cursor at = bn_cursor_at(&w, k.ch, k.begin + threadIdx.x);
    for (size_t e = k.begin + threadIdx.x; e < k.end; e += blockDim.x, bn_cursor_next(&at, &w)) {
        const float xv = act_ld(x, at.off);
        act_st(dx, at.off, g.k * bn_masked_dy<T, RELU>(dy, f, xv, at.off) + g.a * xv + g.b);
    }
}

/* A launch: the plan, c parts blocks, the partials in the op's scratch. */
struct bn_split_launch {
    bn_split_plan plan;
    unsigned blocks;
    float *partials;
    cudaStream_t stream;
};

/* 0, or -1 with the context's error set (no scratch). */
static int bn_split_prepare(backend_ctx *ctx, int n, int c, int hw, bn_split_launch *l)
{
    l->plan = bn_split_plan_for(n, c, hw);
    l->blocks = (unsigned)c * (unsigned)l->plan.parts;
    l->partials =
        (float *)cuda_scratch(ctx, (size_t)c * bn_split_stride(&l->plan) * sizeof(float));
    l->stream = cuda_stream_of(ctx);
    return l->partials ? 0 : -1;
}

template <typename T>
static void bn_split_train(backend_ctx *ctx, int n, int c, int hw, const float *xv,
                           const float *gamma, const float *beta, float *running_mean,
                           float *running_var, float momentum, float eps, int relu, float *yv,
                           float *save_mean, float *save_invstd)
{
    bn_split_launch l;
    if (bn_split_prepare(ctx, n, c, hw, &l) != 0)
        return;
    const T *x = act_in<T>(xv);
    T *y = act_out<T>(yv);
    bn_split_moments_kernel<T><<<l.blocks, BN_SPLIT_THREADS, 0, l.stream>>>(c, hw, l.plan, x,
                                                                           l.partials);
    if (relu)
        bn_split_apply_kernel<T, true><<<l.blocks, BN_SPLIT_THREADS, 0, l.stream>>>(
            c, hw, l.plan, x, l.partials, gamma, beta, running_mean, running_var, momentum, eps,
            y, save_mean, save_invstd);
    else
        bn_split_apply_kernel<T, false><<<l.blocks, BN_SPLIT_THREADS, 0, l.stream>>>(
            c, hw, l.plan, x, l.partials, gamma, beta, running_mean, running_var, momentum, eps,
            y, save_mean, save_invstd);
    CUDA_OK(ctx, cudaGetLastError());
}

extern "C" void cuda_bn_split_forward_train(backend_ctx *ctx, int n, int c, int hw,
                                            const float *x, const float *gamma,
                                            const float *beta, float *running_mean,
                                            float *running_var, float momentum, float eps,
                                            int relu, float *y, float *save_mean,
                                            float *save_invstd)
{
    if (c <= 0 || (size_t)n * hw == 0)
        return;
    ACT_DISPATCH(ctx, bn_split_train, ctx, n, c, hw, x, gamma, beta, running_mean, running_var,
                 momentum, eps, relu, y, save_mean, save_invstd);
}

template <typename T, bool RELU>
static void bn_split_grad_launch(const bn_split_launch &l, int c, int hw, const T *x,
                                 const T *dy, const float *gamma, const float *beta,
                                 const float *save_mean, const float *save_invstd, T *dx,
                                 float *dgamma, float *dbeta)
{
    bn_split_grad_moments_kernel<T, RELU><<<l.blocks, BN_SPLIT_THREADS, 0, l.stream>>>(
        c, hw, l.plan, x, dy, gamma, beta, save_mean, save_invstd, l.partials);
    bn_split_grad_apply_kernel<T, RELU><<<l.blocks, BN_SPLIT_THREADS, 0, l.stream>>>(
        c, hw, l.plan, x, dy, l.partials, gamma, beta, save_mean, save_invstd, dx, dgamma,
        dbeta);
}

template <typename T>
static void bn_split_backward(backend_ctx *ctx, int n, int c, int hw, const float *xv,
                              const float *dyv, const float *gamma, const float *beta,
                              const float *save_mean, const float *save_invstd, int relu,
                              float *dxv, float *dgamma, float *dbeta)
{
    bn_split_launch l;
    if (bn_split_prepare(ctx, n, c, hw, &l) != 0)
        return;
    if (relu)
        bn_split_grad_launch<T, true>(l, c, hw, act_in<T>(xv), act_in<T>(dyv), gamma, beta,
                                      save_mean, save_invstd, act_out<T>(dxv), dgamma, dbeta);
    else
        bn_split_grad_launch<T, false>(l, c, hw, act_in<T>(xv), act_in<T>(dyv), gamma, beta,
                                       save_mean, save_invstd, act_out<T>(dxv), dgamma, dbeta);
    CUDA_OK(ctx, cudaGetLastError());
}

extern "C" void cuda_bn_split_backward(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                       const float *dy, const float *gamma, const float *beta,
                                       const float *save_mean, const float *save_invstd,
                                       int relu, float *dx, float *dgamma, float *dbeta)
{
    ACT_DISPATCH(ctx, bn_split_backward, ctx, n, c, hw, x, dy, gamma, beta, save_mean,
                 save_invstd, relu, dx, dgamma, dbeta);
}
