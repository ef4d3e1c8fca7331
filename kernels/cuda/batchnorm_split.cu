/* The split batch norm in training (a context's batchnorm_split): the
 * (channel, part) work items of kernels/bn_split.h's plan, looped over by a
 * grid the size of what the GPU holds at once, instead of batchnorm.cu's
 * block a channel. Forward is two launches: the moments (one read of x,
 * fp32 sums of deviations from the channel's first value, a partial pair an
 * item) and the apply (per item one warp merges the channel's partials and
 * one thread computes the statistics, the item of part 0 saves them, every
 * thread writes its share of y = a x + b, with the ReLU after it where
 * fused). Backward likewise: sums of dy and dy (x - mean), the ReLU's mask
 * recomputed from x in the same read, then dx. The apply kernels take the
 * items last first, so that they start on what the moments kernel left in
 * L2. Where hw is a multiple of 8 and the tensors 16-byte aligned, 8 values
 * are one 16-byte load (bf16) or two (fp32), several groups in flight a
 * thread; elsewhere (hw = 1, odd maps) the same groups value by value. No
 * atomics, and the plan depends on the shape only: every grid and every
 * run gives the same bits, the ones tests/unit/bn_split_replay.c replays.
 * Activations of the context's type (act.cuh), parameters and statistics
 * fp32. */
#include <stdint.h>

#include "act.cuh"
#include "backend_cuda.h"
#include "bn_split.h"
#include "cuda_check.h"
#include "elementwise.h"
#include "launch.cuh"

#define BN_BOUNDS __launch_bounds__(BN_SPLIT_THREADS, BN_SPLIT_MIN_BLOCKS_PER_SM)

/* Groups a thread keeps in flight: 64 bytes of loads. */
template <typename T> struct bn_unroll {
    enum { N = 64 / (BN_SPLIT_GROUP * (int)sizeof(T)) };
};

/* A group of 8 values as loaded, 16-byte aligned: two float4, or one uint4
 * of bf16 (kept packed until used: 4 registers a group in flight). */
template <typename T> struct bn_group;
template <> struct bn_group<float> {
    float4 a, b;
};
template <> struct bn_group<__nv_bfloat16> {
    uint4 u;
};

__device__ __forceinline__ void bn_ld8(const float *p, bn_group<float> &g)
{
    g.a = reinterpret_cast<const float4 *>(p)[0];
    g.b = reinterpret_cast<const float4 *>(p)[1];
}

__device__ __forceinline__ void bn_ld8(const __nv_bfloat16 *p, bn_group<__nv_bfloat16> &g)
{
    g.u = *reinterpret_cast<const uint4 *>(p);
}

__device__ __forceinline__ void bn_unpack(const bn_group<float> &g, float v[8])
{
    v[0] = g.a.x, v[1] = g.a.y, v[2] = g.a.z, v[3] = g.a.w;
    v[4] = g.b.x, v[5] = g.b.y, v[6] = g.b.z, v[7] = g.b.w;
}

__device__ __forceinline__ void bn_unpack(const bn_group<__nv_bfloat16> &g, float v[8])
{
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&g.u);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float2 f = __bfloat1622float2(h[k]);
        v[2 * k] = f.x;
        v[2 * k + 1] = f.y;
    }
}

__device__ __forceinline__ void bn_st8(float *p, const float v[8])
{
    reinterpret_cast<float4 *>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4 *>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

__device__ __forceinline__ void bn_st8(__nv_bfloat16 *p, const float v[8])
{
    uint4 u;
    __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&u);
#pragma unroll
    for (int k = 0; k < 4; k++)
        h[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
    *reinterpret_cast<uint4 *>(p) = u;
}

/* A thread's whole groups of an item, in group order (the plan's order,
 * which the sums follow), 16 bytes a load: N groups of x (and of dy) are
 * issued before the first is used, then use(off, v, g) for each, with the
 * group's offset, its 8 values and dy's (zeros where DY is false). */
template <typename T, bool DY, typename F>
__device__ __forceinline__ void bn_item_vec(const bn_split_item &k, int c, int hw, const T *x,
                                            const T *dy, F use)
{
    const int N = bn_unroll<T>::N / (DY ? 2 : 1);
    const uint32_t G = BN_SPLIT_GROUP, step = G * BN_SPLIT_THREADS;
    const bn_walk wg = bn_walk_for(c, hw, step);
    const size_t first = k.begin + G * threadIdx.x;
    bn_cursor at = bn_cursor_at(&wg, k.ch, first);
    for (size_t e = first; e < k.end; e += (size_t)N * step) {
        bn_group<T> rx[N], rg[DY ? N : 1];
        size_t off[N];
#pragma unroll
        for (int u = 0; u < N; u++) {
            off[u] = at.off;
            if (e + (size_t)u * step < k.end) {
                bn_ld8(x + at.off, rx[u]);
                if (DY)
                    bn_ld8(dy + at.off, rg[DY ? u : 0]);
            }
            bn_cursor_next(&at, &wg);
        }
#pragma unroll
        for (int u = 0; u < N; u++)
            if (e + (size_t)u * step < k.end) {
                float v[8], g[8] = {0};
                bn_unpack(rx[u], v);
                if (DY)
                    bn_unpack(rg[DY ? u : 0], g);
                use(off[u], v, g);
            }
    }
}

/* A thread's share of an item, its groups in group order: add(x, dy) for
 * each value, dy 0 where DY is false. */
template <typename T, bool VEC, bool DY, typename F>
__device__ __forceinline__ void bn_item_groups(const bn_split_item &k, int c, int hw, const T *x,
                                               const T *dy, F add)
{
    if (VEC) {
        bn_item_vec<T, DY>(k, c, hw, x, dy, [&](size_t, const float *v, const float *g) {
#pragma unroll
            for (int q = 0; q < 8; q++)
                add(v[q], g[q]);
        });
    } else {
        const uint32_t G = BN_SPLIT_GROUP, step = G * BN_SPLIT_THREADS;
        const bn_walk wg = bn_walk_for(c, hw, step), w1 = bn_walk_for(c, hw, 1);
        const size_t first = k.begin + G * threadIdx.x;
        bn_cursor at = bn_cursor_at(&wg, k.ch, first);
        for (size_t e = first; e < k.end; e += step, bn_cursor_next(&at, &wg)) {
            const size_t stop = e + G < k.end ? e + G : k.end;
            bn_cursor v = at;
            for (size_t q = e; q < stop; q++, bn_cursor_next(&v, &w1))
                add(act_ld(x, v.off), DY ? act_ld(dy, v.off) : 0.0f);
        }
    }
}

/* Every value of an item once, in any order: out = f(x, dy) (dy 0 where DY
 * is false). A thread stores only the groups it loaded, so out may alias x
 * or dy. */
template <typename T, bool VEC, bool DY, typename F>
__device__ __forceinline__ void bn_item_map(const bn_split_item &k, int c, int hw, const T *x,
                                            const T *dy, T *out, F f)
{
    if (VEC) {
        bn_item_vec<T, DY>(k, c, hw, x, dy, [&](size_t off, float *v, const float *g) {
#pragma unroll
            for (int q = 0; q < 8; q++)
                v[q] = f(v[q], g[q]);
            bn_st8(out + off, v);
        });
    } else {
        const bn_walk w = bn_walk_for(c, hw, BN_SPLIT_THREADS);
        bn_cursor at = bn_cursor_at(&w, k.ch, k.begin + threadIdx.x);
        for (size_t e = k.begin + threadIdx.x; e < k.end;
             e += BN_SPLIT_THREADS, bn_cursor_next(&at, &w))
            act_st(out, at.off, f(act_ld(x, at.off), DY ? act_ld(dy, at.off) : 0.0f));
    }
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

/* A channel's partials merged by warp 0 (bn_split.h's order): lane 0's. */
__device__ static void bn_warp_merge(const float *pairs, int parts, double *s1, double *s2)
{
    bn_split_lane_sums(pairs, parts, (int)(threadIdx.x % 32), s1, s2);
    for (int off = 16; off > 0; off /= 2) {
        *s1 += __shfl_xor_sync(0xffffffffu, *s1, off);
        *s2 += __shfl_xor_sync(0xffffffffu, *s2, off);
    }
}

/* A block's items: blockIdx.x, then every gridDim.x-th; from the last item
 * back in the apply kernels (bn_split_item_index). */
#define BN_ITEMS(plan, i) for (size_t i = blockIdx.x; i < (plan).items; i += gridDim.x)

template <typename T, bool VEC>
__global__ void BN_BOUNDS bn_split_moments_kernel(int c, int hw, bn_split_plan plan, const T *x,
                                                  float *partials)
{
    BN_ITEMS(plan, i) {
        const bn_split_item k = bn_split_item_of(&plan, bn_split_item_index(plan.items, i, 0));
        float *chan = partials + (size_t)k.ch * bn_split_stride(&plan);
        const float shift = act_ld(x, (size_t)k.ch * hw);
        if (k.part == 0 && threadIdx.x == 0)
            chan[0] = shift; /* for the apply: y may overwrite x */
        float s1 = 0.0f, s2 = 0.0f;
        bn_item_groups<T, VEC, false>(k, c, hw, x, x, [&](float v, float) {
            bn_split_acc_fwd(v, shift, &s1, &s2);
        });
        bn_store_pair(s1, s2, chan + 1 + 2 * k.part);
    }
}

template <typename T, bool RELU, bool VEC>
__global__ void BN_BOUNDS bn_split_apply_kernel(int c, int hw, bn_split_plan plan, const T *x,
                                                const float *partials, const float *gamma,
                                                const float *beta, float *running_mean,
                                                float *running_var, float momentum, float eps,
                                                T *y, float *save_mean, float *save_invstd)
{
    __shared__ bn_split_affine shared_f;
    BN_ITEMS(plan, i) {
        const bn_split_item k = bn_split_item_of(&plan, bn_split_item_index(plan.items, i, 1));
        if (threadIdx.x < 32) {
            const float *chan = partials + (size_t)k.ch * bn_split_stride(&plan);
            double s1, s2;
            bn_warp_merge(chan + 1, plan.parts, &s1, &s2);
            if (threadIdx.x == 0) {
                const bn_split_stats s =
                    bn_split_forward_stats(s1, s2, (double)plan.count, chan[0], eps);
                shared_f = bn_split_affine_of(gamma[k.ch], beta[k.ch], s.mean, s.invstd);
                if (k.part == 0) {
                    save_mean[k.ch] = s.mean;
                    save_invstd[k.ch] = s.invstd;
                    running_mean[k.ch] = (1.0f - momentum) * running_mean[k.ch] + momentum * s.mean;
                    running_var[k.ch] =
                        (1.0f - momentum) * running_var[k.ch] + momentum * (float)s.unbiased;
                }
            }
        }
        __syncthreads();
        const bn_split_affine f = shared_f;
        __syncthreads(); /* read before the next item's thread 0 writes it */
        bn_item_map<T, VEC, false>(k, c, hw, x, x, y, [&](float v, float) {
            const float o = fmaf(f.a, v, f.b);
            return RELU ? relu_elem(o) : o;
        });
    }
}

template <typename T, bool RELU, bool VEC>
__global__ void BN_BOUNDS bn_split_grad_moments_kernel(int c, int hw, bn_split_plan plan,
                                                       const T *x, const T *dy,
                                                       const float *gamma, const float *beta,
                                                       const float *save_mean,
                                                       const float *save_invstd, float *partials)
{
    BN_ITEMS(plan, i) {
        const bn_split_item k = bn_split_item_of(&plan, bn_split_item_index(plan.items, i, 0));
        const float mean = save_mean[k.ch];
        const bn_split_affine f = bn_split_affine_of(gamma[k.ch], RELU ? beta[k.ch] : 0.0f, mean,
                                                     save_invstd[k.ch]);
        float s1 = 0.0f, s2 = 0.0f;
        bn_item_groups<T, VEC, true>(k, c, hw, x, dy, [&](float v, float g) {
            bn_split_acc_bwd(v, bn_split_mask(&f, RELU, v, g), mean, &s1, &s2);
        });
        bn_store_pair(s1, s2, partials + (size_t)k.ch * bn_split_stride(&plan) + 1 + 2 * k.part);
    }
}

template <typename T, bool RELU, bool VEC>
__global__ void BN_BOUNDS bn_split_grad_apply_kernel(int c, int hw, bn_split_plan plan,
                                                     const T *x, const T *dy,
                                                     const float *partials, const float *gamma,
                                                     const float *beta, const float *save_mean,
                                                     const float *save_invstd, T *dx,
                                                     float *dgamma, float *dbeta)
{
    __shared__ bn_split_grad shared_g;
    BN_ITEMS(plan, i) {
        const bn_split_item k = bn_split_item_of(&plan, bn_split_item_index(plan.items, i, 1));
        const float mean = save_mean[k.ch], invstd = save_invstd[k.ch];
        const bn_split_affine f = bn_split_affine_of(gamma[k.ch], RELU ? beta[k.ch] : 0.0f, mean,
                                                     invstd);
        if (threadIdx.x < 32) {
            double s1, s2;
            bn_warp_merge(partials + (size_t)k.ch * bn_split_stride(&plan) + 1, plan.parts, &s1,
                          &s2);
            if (threadIdx.x == 0) {
                shared_g = bn_split_backward_coeffs(s1, s2, (double)plan.count, gamma[k.ch], mean,
                                                    invstd);
                if (k.part == 0) {
                    dbeta[k.ch] = shared_g.dbeta;
                    dgamma[k.ch] = shared_g.dgamma;
                }
            }
        }
        __syncthreads();
        const bn_split_grad g = shared_g;
        __syncthreads();
        bn_item_map<T, VEC, true>(k, c, hw, x, dy, dx, [&](float v, float d) {
            return fmaf(g.k, bn_split_mask(&f, RELU, v, d), fmaf(g.a, v, g.b));
        });
    }
}

/* The grid of a launch of `kernel` on the context's device: the occupancy
 * API's blocks a SM (asked once a kernel and device, then kept) times the
 * SMs, fewer where there are fewer items (bn_split_grid). 0 with the
 * context's error set where the runtime cannot answer. */
enum { BN_CACHED_DEVICES = 64 };

template <typename K>
static unsigned bn_grid(backend_ctx *ctx, K kernel, size_t items)
{
    static int per_sm[BN_CACHED_DEVICES], sms[BN_CACHED_DEVICES];
    const int dev = ctx->device;
    const bool cached = dev >= 0 && dev < BN_CACHED_DEVICES;
    int b = cached ? __atomic_load_n(&per_sm[dev], __ATOMIC_RELAXED) : 0;
    int s = cached ? __atomic_load_n(&sms[dev], __ATOMIC_RELAXED) : 0;
    if (b <= 0 || s <= 0) {
        if (!CUDA_OK(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel,
                                                                        BN_SPLIT_THREADS, 0)) ||
            !CUDA_OK(ctx, cudaDeviceGetAttribute(&s, cudaDevAttrMultiProcessorCount, dev)))
            return 0;
        if (cached) {
            __atomic_store_n(&per_sm[dev], b, __ATOMIC_RELAXED);
            __atomic_store_n(&sms[dev], s, __ATOMIC_RELAXED);
        }
    }
    return bn_split_grid(items, b, s);
}

/* Launch kernel<<<its grid, BN_SPLIT_THREADS>>>(args...) on the stream. */
template <typename K, typename... A>
static void bn_launch(backend_ctx *ctx, K kernel, size_t items, A... args)
{
    const unsigned grid = bn_grid(ctx, kernel, items);
    if (grid > 0)
        kernel<<<grid, BN_SPLIT_THREADS, 0, cuda_stream_of(ctx)>>>(args...);
}

/* A launch: the plan, the partials in the op's scratch, whether 16-byte
 * loads apply. */
struct bn_split_launch {
    bn_split_plan plan;
    float *partials;
    bool vec;
};

/* 0, or -1 with the context's error set (no scratch). */
static int bn_split_prepare(backend_ctx *ctx, int n, int c, int hw, uintptr_t ptr_bits,
                            bn_split_launch *l)
{
    l->plan = bn_split_plan_for(n, c, hw);
    l->vec = bn_split_vectorised(hw, ptr_bits) != 0;
    l->partials =
        (float *)cuda_scratch(ctx, (size_t)c * bn_split_stride(&l->plan) * sizeof(float));
    return l->partials ? 0 : -1;
}

template <typename T, bool RELU, bool VEC>
static void bn_split_train_launch(backend_ctx *ctx, const bn_split_launch &l, int c, int hw,
                                  const T *x, const float *gamma, const float *beta,
                                  float *running_mean, float *running_var, float momentum,
                                  float eps, T *y, float *save_mean, float *save_invstd)
{
    bn_launch(ctx, bn_split_moments_kernel<T, VEC>, l.plan.items, c, hw, l.plan, x, l.partials);
    bn_launch(ctx, bn_split_apply_kernel<T, RELU, VEC>, l.plan.items, c, hw, l.plan, x,
              (const float *)l.partials, gamma, beta, running_mean, running_var, momentum, eps, y,
              save_mean, save_invstd);
}

template <typename T>
static void bn_split_train(backend_ctx *ctx, int n, int c, int hw, const float *xv,
                           const float *gamma, const float *beta, float *running_mean,
                           float *running_var, float momentum, float eps, int relu, float *yv,
                           float *save_mean, float *save_invstd)
{
    bn_split_launch l;
    if (bn_split_prepare(ctx, n, c, hw, (uintptr_t)xv | (uintptr_t)yv, &l) != 0)
        return;
    const T *x = act_in<T>(xv);
    T *y = act_out<T>(yv);
#define BN_TRAIN(R, V)                                                                       \
    bn_split_train_launch<T, R, V>(ctx, l, c, hw, x, gamma, beta, running_mean, running_var, \
                                   momentum, eps, y, save_mean, save_invstd)
    if (relu)
        l.vec ? BN_TRAIN(true, true) : BN_TRAIN(true, false);
    else
        l.vec ? BN_TRAIN(false, true) : BN_TRAIN(false, false);
#undef BN_TRAIN
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

template <typename T, bool RELU, bool VEC>
static void bn_split_grad_launch(backend_ctx *ctx, const bn_split_launch &l, int c, int hw,
                                 const T *x, const T *dy, const float *gamma, const float *beta,
                                 const float *save_mean, const float *save_invstd, T *dx,
                                 float *dgamma, float *dbeta)
{
    bn_launch(ctx, bn_split_grad_moments_kernel<T, RELU, VEC>, l.plan.items, c, hw, l.plan, x,
              dy, gamma, beta, save_mean, save_invstd, l.partials);
    bn_launch(ctx, bn_split_grad_apply_kernel<T, RELU, VEC>, l.plan.items, c, hw, l.plan, x, dy,
              (const float *)l.partials, gamma, beta, save_mean, save_invstd, dx, dgamma, dbeta);
}

template <typename T>
static void bn_split_backward(backend_ctx *ctx, int n, int c, int hw, const float *xv,
                              const float *dyv, const float *gamma, const float *beta,
                              const float *save_mean, const float *save_invstd, int relu,
                              float *dxv, float *dgamma, float *dbeta)
{
    bn_split_launch l;
    if (bn_split_prepare(ctx, n, c, hw, (uintptr_t)xv | (uintptr_t)dyv | (uintptr_t)dxv, &l) !=
        0)
        return;
    const T *x = act_in<T>(xv), *dy = act_in<T>(dyv);
    T *dx = act_out<T>(dxv);
#define BN_GRAD(R, V)                                                                  \
    bn_split_grad_launch<T, R, V>(ctx, l, c, hw, x, dy, gamma, beta, save_mean, save_invstd, \
                                  dx, dgamma, dbeta)
    if (relu)
        l.vec ? BN_GRAD(true, true) : BN_GRAD(true, false);
    else
        l.vec ? BN_GRAD(false, true) : BN_GRAD(false, false);
#undef BN_GRAD
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
