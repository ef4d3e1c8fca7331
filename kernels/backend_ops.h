/* The table a backend fills in (darknet's "GPU twin behind a thin seam"):
 * kernels/backend.c's public functions skip the call once the context has
 * failed and otherwise forward to these. Private to kernels/. Each entry has
 * the meaning and arguments of its namesake in backend.h. */
#ifndef PARLE_BACKEND_OPS_H
#define PARLE_BACKEND_OPS_H

#include "backend.h"

struct backend_ops {
    const char *name; /* "cpu", "cuda" */
    void (*ctx_free)(backend_ctx *ctx);

    void *(*alloc)(backend_ctx *ctx, size_t bytes);
    void (*free)(backend_ctx *ctx, void *p);
    void (*zero)(backend_ctx *ctx, void *p, size_t bytes);
    void (*copy)(backend_ctx *ctx, void *dst, const void *src, size_t bytes);
    void (*upload)(backend_ctx *ctx, void *dst, const void *host_src, size_t bytes);
    void (*download)(backend_ctx *ctx, void *host_dst, const void *src, size_t bytes);
    void *(*host_alloc)(backend_ctx *ctx, size_t bytes);
    void (*host_free)(backend_ctx *ctx, void *p);
    const void *(*stage)(backend_ctx *ctx, void *staging, const void *host, size_t bytes);
    void (*sync)(backend_ctx *ctx);
    /* Optional (NULL: one stream, nothing to order; stage_async is stage). */
    const void *(*stage_async)(backend_ctx *ctx, int slot, void *staging, const void *host,
                               size_t bytes);
    void (*stage_wait)(backend_ctx *ctx, int slot);
    void (*stage_done)(backend_ctx *ctx, int slot);

    void (*gemm)(backend_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
    void (*conv2d_forward)(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                           const float *w, const float *b, float *y);
    void (*conv2d_backward_data)(backend_ctx *ctx, const conv2d_desc *d, int n, const float *dy,
                                 const float *w, float *dx);
    void (*conv2d_backward_filter)(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                                   const float *dy, float *dw, float *db);
    void (*maxpool2d_forward)(backend_ctx *ctx, const pool2d_desc *d, int n, const float *x,
                              float *y, int32_t *argmax);
    void (*maxpool2d_backward)(backend_ctx *ctx, const pool2d_desc *d, int n, const float *dy,
                               const int32_t *argmax, float *dx);
    void (*avgpool2d_forward)(backend_ctx *ctx, const pool2d_desc *d, int n, const float *x,
                              float *y);
    void (*avgpool2d_backward)(backend_ctx *ctx, const pool2d_desc *d, int n, const float *dy,
                               float *dx);
    void (*batchnorm_forward_train)(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                    const float *gamma, const float *beta, float *running_mean,
                                    float *running_var, float momentum, float eps, float *y,
                                    float *save_mean, float *save_invstd);
    void (*batchnorm_forward_infer)(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                    const float *gamma, const float *beta,
                                    const float *running_mean, const float *running_var,
                                    float eps, float *y);
    void (*batchnorm_backward)(backend_ctx *ctx, int n, int c, int hw, const float *x,
                               const float *dy, const float *gamma, const float *save_mean,
                               const float *save_invstd, float *dx, float *dgamma, float *dbeta);
    /* Optional (NULL: backend.c runs batchnorm_* and relu_* one after the other). */
    void (*batchnorm_relu_forward_train)(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                         const float *gamma, const float *beta,
                                         float *running_mean, float *running_var, float momentum,
                                         float eps, float *y, float *save_mean,
                                         float *save_invstd);
    void (*batchnorm_relu_backward)(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                    const float *y, float *dy, const float *gamma,
                                    const float *beta, const float *save_mean,
                                    const float *save_invstd, float *dx, float *dgamma,
                                    float *dbeta);
    /* Optional (NULL: models run batchnorm_relu_* and maxpool2d_* apart);
     * fuses_bn_relu_maxpool says for which poolings the pair below runs. */
    int (*fuses_bn_relu_maxpool)(const pool2d_desc *pd);
    void (*batchnorm_relu_maxpool_forward_train)(backend_ctx *ctx, int n, const pool2d_desc *pd,
                                                 const float *x, const float *gamma,
                                                 const float *beta, float *running_mean,
                                                 float *running_var, float momentum, float eps,
                                                 float *y, int32_t *argmax, float *save_mean,
                                                 float *save_invstd);
    void (*batchnorm_relu_maxpool_backward)(backend_ctx *ctx, int n, const pool2d_desc *pd,
                                            const float *x, const float *dy,
                                            const int32_t *argmax, const float *gamma,
                                            const float *beta, const float *save_mean,
                                            const float *save_invstd, float *dx, float *dgamma,
                                            float *dbeta);
    /* Optional (NULL: models store BN's dx and run conv2d_backward_filter on
     * it); fuses_conv_filter_bn says for which convolutions it runs. */
    int (*fuses_conv_filter_bn)(const conv2d_desc *cd, const pool2d_desc *pd);
    void (*conv2d_backward_filter_bn_relu_maxpool)(
        backend_ctx *ctx, int n, const conv2d_desc *cd, const float *x_conv,
        const pool2d_desc *pd, const float *x, const float *dy, const int32_t *argmax,
        const float *gamma, const float *beta, const float *save_mean, const float *save_invstd,
        const float *dgamma, const float *dbeta, float *dw, float *db);
    void (*relu_forward)(backend_ctx *ctx, size_t count, const float *x, float *y);
    void (*relu_backward)(backend_ctx *ctx, size_t count, const float *y, const float *dy,
                          float *dx);
    void (*dropout_forward)(backend_ctx *ctx, size_t count, float p, philox_key key,
                            uint64_t counter, const float *x, float *y);
    void (*dropout_backward)(backend_ctx *ctx, size_t count, float p, philox_key key,
                             uint64_t counter, const float *dy, float *dx);
    void (*linear_forward)(backend_ctx *ctx, int n, int in, int out, const float *x,
                           const float *w, const float *b, float *y);
    void (*linear_backward)(backend_ctx *ctx, int n, int in, int out, const float *x,
                            const float *w, const float *dy, float *dx, float *dw, float *db);
    float (*softmax_xent)(backend_ctx *ctx, int n, int classes, const float *logits,
                          const int32_t *labels, float *dlogits, int *correct);
    /* Needed only by backends with bf16 activations (fp32 ones are vectors:
     * backend.c uses vec_axpby and the staged batch itself). */
    void (*act_add)(backend_ctx *ctx, size_t n, const float *x, float *y);
    void (*act_from_f32)(backend_ctx *ctx, size_t n, const float *x, float *out);

    void (*vec_axpby)(backend_ctx *ctx, size_t n, float a, const float *x, float b, float *y);
    void (*vec_scale)(backend_ctx *ctx, size_t n, float a, float *x);
    void (*vec_mean)(backend_ctx *ctx, size_t n, const float *const *xs, int k, float *out);
    double (*vec_dist2)(backend_ctx *ctx, size_t n, const float *a, const float *b);
    void (*vec_sgd_momentum)(backend_ctx *ctx, size_t n, float lr, float mu, float wd,
                             int nesterov, float *w, float *v, const float *g);
    void (*vec_parle_inner)(backend_ctx *ctx, size_t n, float eta, float mu, float lambda,
                            float gamma, float alpha, float *y, float *z, float *v,
                            const float *g, const float *xhat);
    void (*vec_parle_outer)(backend_ctx *ctx, size_t n, float eta, float mu, float rho, float *x,
                            float *u, const float *xhat, const float *z, const float *zbar);
    void (*vec_elastic_step)(backend_ctx *ctx, size_t n, float eta, float mu, float lambda,
                             float rho, float *x, float *u, const float *g, const float *xbar);
};

/* The tables (backend_cpu.c; cuda/backend_cuda.c when built with CUDA). */
extern const backend_ops backend_cpu_ops;
extern const backend_ops backend_cuda_ops;

/* backend_cuda.c: fills ctx (ops, impl) for `device`; 0 or -1 with err. */
int backend_cuda_ctx_init(backend_ctx *ctx, int device, char *err, size_t errlen);
int backend_cuda_device_count(void);
int backend_cuda_device_props(int device, char *name, size_t namelen, size_t *total_bytes);
int backend_cuda_mem(int device, size_t *free_bytes, size_t *total_bytes);

#endif
