/* The convolution plans of a context (conv_cudnn.c's): one per (shape,
 * batch, precision, determinism), with its cuDNN descriptors and, per
 * direction, the algorithm once chosen; kept in the context's table
 * (conv_cache, backend_cuda.h), which grows and never evicts. */
#ifndef PARLE_CONV_PLANS_H
#define PARLE_CONV_PLANS_H

#include "backend_cuda.h"

enum conv_dir { CONV_FWD, CONV_BWD_DATA, CONV_BWD_FILTER, CONV_DIRS };

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

/* The plan for this shape under the context's current settings; created
 * (descriptors only) on first use. NULL with the sticky error set. */
conv_plan *conv_plan_find(backend_ctx *ctx, const conv2d_desc *d, int n);
/* fp32: plain FMA kernels only; cuDNN's default math would let float
 * convolutions run as TF32 on Ampere and later. tf32 and bf16 allow
 * tensor-op math: TF32 tensor cores on float data, bf16 ones on bf16 data. */
cudnnMathType_t conv_math_for(int precision);

#endif
