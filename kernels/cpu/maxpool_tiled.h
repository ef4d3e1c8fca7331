/* Max pooling over windows that tile a plane (stride k, no padding: LeNet's),
 * shared by pool.c and the fused BN + ReLU + pooling of bn_relu_pool.c. */
#ifndef PARLE_MAXPOOL_TILED_H
#define PARLE_MAXPOOL_TILED_H

#include <stdint.h>

#include "elementwise.h"

/* The windows of an OH x OW output over a plane W wide, of relu(a x + b)
 * when `affine` (BN's output, never stored), else of x. Inlined with k and
 * `affine` constants, so each window's taps unroll into one chain of selects
 * in row-major order (the first maximum wins, as in maxpool2d_forward's
 * general loop), and neighbouring windows' chains overlap (5x faster on
 * LeNet's 3x3 pool than a loop over clipped windows). */
static inline __attribute__((always_inline)) void
maxpool_plane_tiled(int k, int W, int OH, int OW, const float *restrict xp, int affine, float a,
                    float b, float *restrict yp, int32_t *restrict ap)
{
    for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++) {
            const int first = oh * k * W + ow * k;
            int best = first;
            float best_v = affine ? relu_elem(a * xp[first] + b) : xp[first];
            for (int kh = 0; kh < k; kh++)
                for (int kw = 0; kw < k; kw++) {
                    const int i = first + kh * W + kw;
                    const float v = affine ? relu_elem(a * xp[i] + b) : xp[i];
                    /* A mask, not a select: GCC branched on the select,
                     * and which element wins is random. */
                    best += (i - best) & -(int)(v > best_v);
                    best_v = v > best_v ? v : best_v;
                }
            yp[oh * OW + ow] = best_v;
            ap[oh * OW + ow] = best;
        }
}

#endif
