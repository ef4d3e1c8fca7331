/* The convolution plans' table (conv_plans.h): each plan's cuDNN
 * descriptors made once, its key compared whole. */
#include <stdlib.h>
#include <string.h>

#include "conv_plans.h"
#include "cuda_check.h"

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

cudnnMathType_t conv_math_for(int precision)
{
    return precision == PRECISION_FP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

/* The data type of the tensors and filter cuDNN sees. bf16 is cuDNN's
 * PSEUDO_BFLOAT16 configuration: bf16 data with a float compute type (set
 * on the convolution descriptor for every precision), i.e. fp32
 * accumulation; the legacy API has no bf16 configuration with bf16 compute,
 * and none mixing bf16 inputs with a float output. */
static cudnnDataType_t data_for(int precision)
{
    return precision == PRECISION_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

static int plan_descriptors(backend_ctx *ctx, conv_plan *p)
{
    const conv_key *k = &p->key;
    const int out_h = (k->in_h + 2 * k->pad - k->k) / k->stride + 1;
    const int out_w = (k->in_w + 2 * k->pad - k->k) / k->stride + 1;
    const cudnnDataType_t data = data_for(k->precision);
    int dims[4];
    if (!(CUDNN_OK(ctx, cudnnCreateTensorDescriptor(&p->x)) &&
          CUDNN_OK(ctx, cudnnCreateTensorDescriptor(&p->y)) &&
          CUDNN_OK(ctx, cudnnCreateFilterDescriptor(&p->w)) &&
          CUDNN_OK(ctx, cudnnCreateConvolutionDescriptor(&p->conv)) &&
          CUDNN_OK(ctx, cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, data, k->n,
                                                   k->in_c, k->in_h, k->in_w)) &&
          CUDNN_OK(ctx, cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, data, k->n,
                                                   k->out_c, out_h, out_w)) &&
          CUDNN_OK(ctx, cudnnSetFilter4dDescriptor(p->w, data, CUDNN_TENSOR_NCHW,
                                                   k->out_c, k->in_c, k->k, k->k)) &&
          CUDNN_OK(ctx, cudnnSetConvolution2dDescriptor(p->conv, k->pad, k->pad, k->stride,
                                                        k->stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                        CUDNN_DATA_FLOAT)) &&
          CUDNN_OK(ctx, cudnnSetConvolutionMathType(p->conv, conv_math_for(k->precision))) &&
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

conv_plan *conv_plan_find(backend_ctx *ctx, const conv2d_desc *d, int n)
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
