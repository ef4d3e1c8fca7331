/* 2-D convolution through cuDNN's convolution API: NCHW float tensors,
 * cross-correlation (what the CPU backend and PyTorch compute).
 *
 * A plan per (shape, batch, precision, determinism) holds the cuDNN
 * descriptors and, per direction, the algorithm chosen the first time that
 * direction runs, with its math type and workspace size; plans live in a
 * table that grows and never evicts, since a model has a fixed, small set of
 * shapes (WRN-28-10 about a dozen per batch size). Algorithms come from
 * cuDNN's heuristics (the _v7 queries), not from timing runs, so every
 * replica and every run picks the same ones. The workspace is the context's
 * scratch. The bias is added, and its gradient reduced, by bias.cu. */
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "cuda_check.h"

enum conv_dir { CONV_FWD, CONV_BWD_DATA, CONV_BWD_FILTER, CONV_DIRS };

/* Algorithms asking for more workspace than this are passed over while a
 * leaner one is on offer: several replicas share one GPU's memory. */
#define CONV_WORKSPACE_MAX ((size_t)512 << 20)

/* More than any direction's algorithm count (asserted where they are read). */
#define MAX_OFFERS 16

typedef struct conv_key {
    int in_c, in_h, in_w, out_c, k, stride, pad, n;
    int precision, deterministic;
} conv_key;

typedef struct conv_plan {
    conv_key key;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    int chosen[CONV_DIRS];     /* the fields below are set for this direction */
    int algo[CONV_DIRS];       /* a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    cudnnMathType_t math[CONV_DIRS];
    size_t workspace[CONV_DIRS];
} conv_plan;

struct conv_cache {
    conv_plan *plans;
    int count, cap;
};

conv_cache *conv_cache_new(void) { return calloc(1, sizeof(conv_cache)); }

void conv_cache_free(conv_cache *cache)
{
    if (!cache)
        return;
    for (int i = 0; i < cache->count; i++) {
        conv_plan *p = &cache->plans[i];
        (void)cudnnDestroyTensorDescriptor(p->x);
        (void)cudnnDestroyTensorDescriptor(p->y);
        (void)cudnnDestroyFilterDescriptor(p->w);
        (void)cudnnDestroyConvolutionDescriptor(p->conv);
    }
    free(cache->plans);
    free(cache);
}

static conv_key make_key(const backend_ctx *ctx, const conv2d_desc *d, int n)
{
    conv_key key;
    memset(&key, 0, sizeof key); /* compared with memcmp */
    key.in_c = d->in_c;
    key.in_h = d->in_h;
    key.in_w = d->in_w;
    key.out_c = d->out_c;
    key.k = d->k;
    key.stride = d->stride;
    key.pad = d->pad;
    key.n = n;
    key.precision = (int)ctx->precision;
    key.deterministic = ctx->deterministic != 0;
    return key;
}

/* fp32: plain FMA kernels only; cuDNN's default math would let float
 * convolutions run as TF32 on Ampere and later. tf32 (and bf16, run as tf32
 * until the backend has bf16 activations) allow tensor-op math. */
static cudnnMathType_t math_for(int precision)
{
    return precision == PRECISION_FP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

static int plan_descriptors(backend_ctx *ctx, conv_plan *p)
{
    const conv_key *k = &p->key;
    const int out_h = (k->in_h + 2 * k->pad - k->k) / k->stride + 1;
    const int out_w = (k->in_w + 2 * k->pad - k->k) / k->stride + 1;
    int dims[4];
    if (!(CUDNN_OK(ctx, cudnnCreateTensorDescriptor(&p->x)) &&
          CUDNN_OK(ctx, cudnnCreateTensorDescriptor(&p->y)) &&
          CUDNN_OK(ctx, cudnnCreateFilterDescriptor(&p->w)) &&
          CUDNN_OK(ctx, cudnnCreateConvolutionDescriptor(&p->conv)) &&
          CUDNN_OK(ctx, cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, k->n,
                                                   k->in_c, k->in_h, k->in_w)) &&
          CUDNN_OK(ctx, cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, k->n,
                                                   k->out_c, out_h, out_w)) &&
          CUDNN_OK(ctx, cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                   k->out_c, k->in_c, k->k, k->k)) &&
          CUDNN_OK(ctx, cudnnSetConvolution2dDescriptor(p->conv, k->pad, k->pad, k->stride,
                                                        k->stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                        CUDNN_DATA_FLOAT)) &&
          CUDNN_OK(ctx, cudnnSetConvolutionMathType(p->conv, math_for(k->precision))) &&
          CUDNN_OK(ctx, cudnnGetConvolutionNdForwardOutputDim(p->conv, p->x, p->w, 4, dims))))
        return -1;
    /* conv2d_desc_init and cuDNN must agree on the output, or every index
     * below is off. */
    if (dims[0] != k->n || dims[1] != k->out_c || dims[2] != out_h || dims[3] != out_w) {
        backend_fail(ctx, "cudnn: output %dx%dx%dx%d for a %dx%dx%dx%d conv, expected %dx%dx%dx%d",
                     dims[0], dims[1], dims[2], dims[3], k->n, k->in_c, k->in_h, k->in_w, k->n,
                     k->out_c, out_h, out_w);
        return -1;
    }
    return 0;
}

/* The plan for this shape under the context's current settings; created
 * (descriptors only) on first use. NULL with the sticky error set. */
static conv_plan *find_plan(backend_ctx *ctx, const conv2d_desc *d, int n)
{
    conv_cache *cache = cuda_impl_of(ctx)->convs;
    const conv_key key = make_key(ctx, d, n);
    for (int i = 0; i < cache->count; i++)
        if (memcmp(&cache->plans[i].key, &key, sizeof key) == 0)
            return &cache->plans[i];
    if (cache->count == cache->cap) {
        const int cap = cache->cap ? 2 * cache->cap : 32;
        conv_plan *plans = realloc(cache->plans, (size_t)cap * sizeof *plans);
        if (!plans) {
            backend_fail(ctx, "cuda:%d: out of host memory for %d convolution plans",
                         ctx->device, cap);
            return NULL;
        }
        cache->plans = plans;
        cache->cap = cap;
    }
    conv_plan *p = &cache->plans[cache->count];
    memset(p, 0, sizeof *p);
    p->key = key;
    /* Counted even if a descriptor fails, so conv_cache_free destroys what
     * was created (destroying a NULL descriptor is harmless). */
    cache->count++;
    return plan_descriptors(ctx, p) == 0 ? p : NULL;
}

/* A candidate of cuDNN's heuristics, whichever direction's perf struct it
 * came in. */
typedef struct algo_offer {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
} algo_offer;

#define OFFERS(perf, count, offers)                     \
    for (int i_ = 0; i_ < (count); i_++)                \
        (offers)[i_] = (algo_offer){(int)(perf)[i_].algo, (perf)[i_].status, \
                                    (perf)[i_].memory, (perf)[i_].determinism, \
                                    (perf)[i_].mathType}

/* The first of the candidates (best first) that cuDNN can run and that fits
 * the determinism and precision asked for and the workspace limit; failing
 * the limit, the leanest that fits the rest. Returns its index or -1. */
static int pick(const conv_key *k, const algo_offer *offers, int count)
{
    int best = -1, leanest = -1;
    for (int i = 0; i < count; i++) {
        const algo_offer *o = &offers[i];
        if (o->status != CUDNN_STATUS_SUCCESS ||
            (k->deterministic && o->determinism != CUDNN_DETERMINISTIC) ||
            (k->precision == PRECISION_FP32 && o->math != CUDNN_FMA_MATH))
            continue;
        if (leanest < 0 || o->memory < offers[leanest].memory)
            leanest = i;
        if (best < 0 && o->memory <= CONV_WORKSPACE_MAX)
            best = i;
    }
    return best >= 0 ? best : leanest;
}

static const char *const dir_name[CONV_DIRS] = {"forward", "backward-data", "backward-filter"};

/* Choose direction dir's algorithm for plan p, once. */
static int choose(backend_ctx *ctx, conv_plan *p, enum conv_dir dir)
{
    if (p->chosen[dir])
        return 0;
    cudnnHandle_t h = cuda_impl_of(ctx)->cudnn;
    algo_offer offers[MAX_OFFERS];
    int count = 0;
    /* Ask under the math type of the precision; cuDNN answers per candidate
     * with the math type it would run it with. */
    if (!CUDNN_OK(ctx, cudnnSetConvolutionMathType(p->conv, math_for(p->key.precision))))
        return -1;
    if (dir == CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        _Static_assert((int)CUDNN_CONVOLUTION_FWD_ALGO_COUNT <= MAX_OFFERS, "offers");
        if (!CUDNN_OK(ctx, cudnnGetConvolutionForwardAlgorithm_v7(
                               h, p->x, p->w, p->conv, p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                               &count, perf)))
            return -1;
        OFFERS(perf, count, offers);
    } else if (dir == CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        _Static_assert((int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT <= MAX_OFFERS, "offers");
        if (!CUDNN_OK(ctx, cudnnGetConvolutionBackwardDataAlgorithm_v7(
                               h, p->w, p->y, p->conv, p->x,
                               CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf)))
            return -1;
        OFFERS(perf, count, offers);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        _Static_assert((int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT <= MAX_OFFERS, "offers");
        if (!CUDNN_OK(ctx, cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                               h, p->x, p->y, p->conv, p->w,
                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf)))
            return -1;
        OFFERS(perf, count, offers);
    }
    const int i = pick(&p->key, offers, count);
    if (i < 0) {
        const conv_key *k = &p->key;
        backend_fail(ctx, "cudnn: no %s%s algorithm for a %dx%dx%dx%d conv to %d channels, "
                     "k=%d stride=%d pad=%d", k->deterministic ? "deterministic " : "",
                     dir_name[dir], k->n, k->in_c, k->in_h, k->in_w, k->out_c, k->k, k->stride,
                     k->pad);
        return -1;
    }
    p->algo[dir] = offers[i].algo;
    p->math[dir] = offers[i].math;
    /* The workspace asked again for the chosen algorithm under its own math
     * type: the heuristics' memory figure is an estimate. */
    size_t bytes = 0;
    int ok = CUDNN_OK(ctx, cudnnSetConvolutionMathType(p->conv, p->math[dir]));
    if (ok && dir == CONV_FWD)
        ok = CUDNN_OK(ctx, cudnnGetConvolutionForwardWorkspaceSize(
                               h, p->x, p->w, p->conv, p->y,
                               (cudnnConvolutionFwdAlgo_t)p->algo[dir], &bytes));
    else if (ok && dir == CONV_BWD_DATA)
        ok = CUDNN_OK(ctx, cudnnGetConvolutionBackwardDataWorkspaceSize(
                               h, p->w, p->y, p->conv, p->x,
                               (cudnnConvolutionBwdDataAlgo_t)p->algo[dir], &bytes));
    else if (ok)
        ok = CUDNN_OK(ctx, cudnnGetConvolutionBackwardFilterWorkspaceSize(
                               h, p->x, p->y, p->conv, p->w,
                               (cudnnConvolutionBwdFilterAlgo_t)p->algo[dir], &bytes));
    if (!ok)
        return -1;
    p->workspace[dir] = bytes;
    p->chosen[dir] = 1;
    return 0;
}

/* The plan with direction dir's algorithm chosen and its math type set on
 * the descriptor, and *ws the workspace; NULL with the sticky error set. */
static conv_plan *prepare(backend_ctx *ctx, const conv2d_desc *d, int n, enum conv_dir dir,
                          void **ws)
{
    conv_plan *p = find_plan(ctx, d, n);
    if (!p || choose(ctx, p, dir) != 0 ||
        !CUDNN_OK(ctx, cudnnSetConvolutionMathType(p->conv, p->math[dir])))
        return NULL;
    *ws = NULL;
    if (p->workspace[dir] && !(*ws = cuda_scratch(ctx, p->workspace[dir])))
        return NULL;
    return p;
}

/* cuDNN rejects empty tensors; an empty batch or output has nothing to
 * compute, and its gradients are zeros. */
static int empty(const conv2d_desc *d, int n) { return n <= 0 || d->out_h <= 0 || d->out_w <= 0; }

static void zero(backend_ctx *ctx, void *p, size_t bytes)
{
    CUDA_OK(ctx, cudaMemsetAsync(p, 0, bytes, cuda_stream_of(ctx)));
}

void cuda_conv2d_forward(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                         const float *w, const float *b, float *y)
{
    if (empty(d, n))
        return;
    void *ws;
    conv_plan *p = prepare(ctx, d, n, CONV_FWD, &ws);
    const float one = 1.0f, nil = 0.0f;
    if (!p || !CUDNN_OK(ctx, cudnnConvolutionForward(
                                 cuda_impl_of(ctx)->cudnn, &one, p->x, x, p->w, w, p->conv,
                                 (cudnnConvolutionFwdAlgo_t)p->algo[CONV_FWD], ws,
                                 p->workspace[CONV_FWD], &nil, p->y, y)))
        return;
    if (b)
        cuda_bias_add(ctx, n, d->out_c, (size_t)d->out_h * d->out_w, b, y);
}

void cuda_conv2d_backward_data(backend_ctx *ctx, const conv2d_desc *d, int n, const float *dy,
                               const float *w, float *dx)
{
    if (empty(d, n)) {
        if (n > 0)
            zero(ctx, dx, (size_t)n * d->in_c * d->in_h * d->in_w * sizeof(float));
        return;
    }
    void *ws;
    conv_plan *p = prepare(ctx, d, n, CONV_BWD_DATA, &ws);
    const float one = 1.0f, nil = 0.0f;
    if (p)
        CUDNN_OK(ctx, cudnnConvolutionBackwardData(
                          cuda_impl_of(ctx)->cudnn, &one, p->w, w, p->y, dy, p->conv,
                          (cudnnConvolutionBwdDataAlgo_t)p->algo[CONV_BWD_DATA], ws,
                          p->workspace[CONV_BWD_DATA], &nil, p->x, dx));
}

void cuda_conv2d_backward_filter(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                                 const float *dy, float *dw, float *db)
{
    if (empty(d, n)) {
        zero(ctx, dw, (size_t)d->out_c * d->in_c * d->k * d->k * sizeof(float));
        if (db)
            zero(ctx, db, (size_t)d->out_c * sizeof(float));
        return;
    }
    void *ws;
    conv_plan *p = prepare(ctx, d, n, CONV_BWD_FILTER, &ws);
    const float one = 1.0f, nil = 0.0f;
    if (!p || !CUDNN_OK(ctx, cudnnConvolutionBackwardFilter(
                                 cuda_impl_of(ctx)->cudnn, &one, p->x, x, p->y, dy, p->conv,
                                 (cudnnConvolutionBwdFilterAlgo_t)p->algo[CONV_BWD_FILTER], ws,
                                 p->workspace[CONV_BWD_FILTER], &nil, p->w, dw)))
        return;
    if (db)
        cuda_bias_grad(ctx, n, d->out_c, (size_t)d->out_h * d->out_w, dy, db);
}
