/* A host replay of the split batch norm's reduction
 * (kernels/cuda/batchnorm_split.cu, in the order kernels/bn_split.h gives):
 * the same items, each thread's groups of 8 values in the same order into
 * fp32 pairs with the header's own fmaf steps, the pairs through
 * launch.cuh's block_sum tree, the partials merged in double by the warp's
 * butterfly (bn_split_merge). The statistics, dgamma and dbeta it gives
 * are the kernels' bits: tests/unit/test_bn_split.c checks the replay
 * against float64, tests/gpu/test_gpu_bn_split.c the GPU against the
 * replay. Tensors are fp32 on the host (bf16 activations widened). */
#ifndef PARLE_BN_SPLIT_REPLAY_H
#define PARLE_BN_SPLIT_REPLAY_H

#include "bn_split.h"

/* What the moments kernels sum per value: forward the deviation from the
 * shift (and its square), backward dy masked by a fused ReLU (and
 * dy (x - mean)). */
typedef struct bn_replay_in {
    const float *x, *dy; /* dy NULL: forward */
    int n, c, hw;
    float shift;         /* forward */
    float mean;          /* backward */
    int relu;
    bn_split_affine f;   /* backward with relu: the forward's a, b */
} bn_replay_in;

/* Channel ch's merged sums, as the apply kernels see them. */
void bn_replay_channel(const bn_replay_in *in, int ch, double *s1, double *s2);

/* The forward's saved statistics of every channel, eps as the op's. */
void bn_replay_forward(const float *x, int n, int c, int hw, float eps, float *mean,
                       float *invstd);

/* The backward's coefficients of every channel at the saved statistics
 * (beta only where relu): dgamma, dbeta and dx's k, a, b. */
void bn_replay_backward(const float *x, const float *dy, int n, int c, int hw, const float *gamma,
                        const float *beta, const float *mean, const float *invstd, int relu,
                        bn_split_grad *grad);

#endif
