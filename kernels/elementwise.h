/* Element-wise maths shared by the CPU loops and the CUDA kernels.
 * Every optimizer and coupling update is written here once, per element;
 * kernels/cpu/vecops.c and kernels/cuda/vecops.cu only loop over it. */
#ifndef PARLE_ELEMENTWISE_H
#define PARLE_ELEMENTWISE_H

#include "hostdevice.h"

PARLE_HD static inline float relu_elem(float x) { return x > 0.0f ? x : 0.0f; }

/* Gradient through ReLU, written in terms of its output y (valid in place). */
PARLE_HD static inline float relu_grad_elem(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

/* Inverted dropout: keep with probability 1-p and scale by 1/(1-p). A product
 * with the 0/1 mask, not a branch: a branch on a random mask mispredicts
 * every few elements, and the product vectorises. */
PARLE_HD static inline float dropout_elem(float x, float uniform, float p)
{
    const float keep = uniform >= p ? 1.0f : 0.0f;
    return keep * (x / (1.0f - p));
}

PARLE_HD static inline float axpby_elem(float a, float x, float b, float y) { return a * x + b * y; }

/* SGD with momentum mu (dampening 0) and weight decay wd, as torch.optim.SGD:
 *   g' = g + wd w ; v = mu v + g' ; w -= lr (g' + mu v)  (Nesterov)  or  lr v.
 * Parle's outer step is this same update with d in place of g and wd = 0. */
PARLE_HD static inline void sgd_momentum_elem(float *w, float *v, float g, float lr, float mu,
                                              float wd, int nesterov)
{
    float gd = g + wd * *w;
    float vn = mu * *v + gd;
    *v = vn;
    *w -= lr * (nesterov ? gd + mu * vn : vn);
}

/* Parle inner step (docs/algorithms.md) on the iterate y, anchored at xhat:
 *   g' = g + lambda y + gamma (y - xhat) ; v = mu v + g' ;
 *   y -= eta (g' + mu v) ; z = alpha z + (1 - alpha) y */
PARLE_HD static inline void parle_inner_elem(float *y, float *z, float *v, float g, float xhat,
                                             float eta, float mu, float lambda, float gamma,
                                             float alpha)
{
    float gd = g + lambda * *y + gamma * (*y - xhat);
    float vn = mu * *v + gd;
    *v = vn;
    float yn = *y - eta * (gd + mu * vn);
    *y = yn;
    *z = alpha * *z + (1.0f - alpha) * yn;
}

/* Parle's outer direction with L > 0: d = (xhat - z) + rho (xhat - zbar). */
PARLE_HD static inline float parle_outer_dir_elem(float xhat, float z, float zbar, float rho)
{
    return (xhat - z) + rho * (xhat - zbar);
}

/* Elastic-SGD direction (Parle with L = 0): d = g + lambda x + rho (x - xbar). */
PARLE_HD static inline float elastic_dir_elem(float x, float g, float xbar, float lambda, float rho)
{
    return g + lambda * x + rho * (x - xbar);
}

#endif
