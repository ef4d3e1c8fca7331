/* The CPU backend's ops, the entries of backend_cpu_ops (backend_cpu.c).
 * Each has the meaning and arguments of its namesake in backend.h; callers
 * outside kernels/cpu go through backend.h, which skips them once the
 * context has failed. */
#ifndef PARLE_CPU_OPS_H
#define PARLE_CPU_OPS_H

#include "backend.h"

/* ctx->impl of a CPU context: the oneDNN convolution primitives made so far,
 * one per (direction, shape, batch, threads, bias, precision, conv_winograd),
 * reused round-robin when full, and the engine and stream they run on,
 * created on first use. conv_winograd: 1 (the default) lets 3x3 stride-1
 * convolutions run as Winograd where oneDNN has it (conv_dnnl.c) and 5x5
 * ones as ours (conv_winograd5.c); 0 keeps them direct, for tests that
 * compare the two. */
#define CPU_CONV_PLANS 48
#define CPU_GEMM_BF16_PRIMS 8
struct conv_plan;
struct dnnl_engine;
struct dnnl_stream;
struct dnnl_primitive;
typedef struct cpu_impl {
    struct conv_plan *conv_plans[CPU_CONV_PLANS];
    int conv_plan_next;
    int conv_winograd;
    double conv_prim_s; /* seconds in the convolution primitives alone (bench) */
    struct dnnl_engine *dnnl_engine;
    struct dnnl_stream *dnnl_stream;
    /* gemm.c's bf16 matmuls (by transposes, C = or C +=), its bf16 A and B */
    struct dnnl_primitive *gemm_bf16[CPU_GEMM_BF16_PRIMS];
    uint16_t *gemm_buf;
    size_t gemm_buf_len;
} cpu_impl;

/* Creates impl's oneDNN engine and stream if not yet there: 0, or -1. */
int cpu_dnnl_ready(cpu_impl *impl);
/* Destroys gemm.c's primitives and buffer (before conv_dnnl_free). */
void cpu_gemm_free(cpu_impl *impl);

void cpu_gemm(backend_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

void cpu_conv2d_forward(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                        const float *w, const float *b, float *y);
void cpu_conv2d_backward_data(backend_ctx *ctx, const conv2d_desc *d, int n, const float *dy,
                              const float *w, float *dx);
void cpu_conv2d_backward_filter(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                                const float *dy, float *dw, float *db);

void cpu_maxpool2d_forward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *x,
                           float *y, int32_t *argmax);
void cpu_maxpool2d_backward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *dy,
                            const int32_t *argmax, float *dx);
void cpu_avgpool2d_forward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *x,
                           float *y);
void cpu_avgpool2d_backward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *dy,
                            float *dx);

void cpu_batchnorm_forward_train(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                 const float *gamma, const float *beta, float *running_mean,
                                 float *running_var, float momentum, float eps, float *y,
                                 float *save_mean, float *save_invstd);
void cpu_batchnorm_forward_infer(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                 const float *gamma, const float *beta,
                                 const float *running_mean, const float *running_var, float eps,
                                 float *y);
void cpu_batchnorm_backward(backend_ctx *ctx, int n, int c, int hw, const float *x,
                            const float *dy, const float *gamma, const float *save_mean,
                            const float *save_invstd, float *dx, float *dgamma, float *dbeta);
void cpu_batchnorm_relu_forward_train(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                      const float *gamma, const float *beta,
                                      float *running_mean, float *running_var, float momentum,
                                      float eps, float *y, float *save_mean, float *save_invstd);
void cpu_batchnorm_relu_backward(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                 const float *y, float *dy, const float *gamma, const float *beta,
                                 const float *save_mean, const float *save_invstd, float *dx,
                                 float *dgamma, float *dbeta);

int cpu_fuses_bn_relu_maxpool(const pool2d_desc *pd);
void cpu_batchnorm_relu_maxpool_forward_train(backend_ctx *ctx, int n, const pool2d_desc *pd,
                                              const float *x, const float *gamma,
                                              const float *beta, float *running_mean,
                                              float *running_var, float momentum, float eps,
                                              float *y, int32_t *argmax, float *save_mean,
                                              float *save_invstd);
void cpu_batchnorm_relu_maxpool_backward(backend_ctx *ctx, int n, const pool2d_desc *pd,
                                         const float *x, const float *dy, const int32_t *argmax,
                                         const float *gamma, const float *beta,
                                         const float *save_mean, const float *save_invstd,
                                         float *dx, float *dgamma, float *dbeta);

/* Only where conv_thin.c is built (x86-64); backend_cpu.c leaves them out
 * elsewhere, and models then store BN's dx. */
int cpu_fuses_conv_filter_bn(const conv2d_desc *cd, const pool2d_desc *pd);
void cpu_conv2d_backward_filter_bn_relu_maxpool(backend_ctx *ctx, int n, const conv2d_desc *cd,
                                                const float *x_conv, const pool2d_desc *pd,
                                                const float *x, const float *dy,
                                                const int32_t *argmax, const float *gamma,
                                                const float *beta, const float *save_mean,
                                                const float *save_invstd, const float *dgamma,
                                                const float *dbeta, float *dw, float *db);

void cpu_relu_forward(backend_ctx *ctx, size_t count, const float *x, float *y);
void cpu_relu_backward(backend_ctx *ctx, size_t count, const float *y, const float *dy,
                       float *dx);
void cpu_dropout_forward(backend_ctx *ctx, size_t count, float p, philox_key key,
                         uint64_t counter, const float *x, float *y);
void cpu_dropout_backward(backend_ctx *ctx, size_t count, float p, philox_key key,
                          uint64_t counter, const float *dy, float *dx);

void cpu_linear_forward(backend_ctx *ctx, int n, int in, int out, const float *x, const float *w,
                        const float *b, float *y);
void cpu_linear_backward(backend_ctx *ctx, int n, int in, int out, const float *x,
                         const float *w, const float *dy, float *dx, float *dw, float *db);

float cpu_softmax_xent(backend_ctx *ctx, int n, int classes, const float *logits,
                       const int32_t *labels, float *dlogits, int *correct);

void cpu_vec_axpby(backend_ctx *ctx, size_t n, float a, const float *x, float b, float *y);
void cpu_vec_scale(backend_ctx *ctx, size_t n, float a, float *x);
void cpu_vec_mean(backend_ctx *ctx, size_t n, const float *const *xs, int k, float *out);
double cpu_vec_dist2(backend_ctx *ctx, size_t n, const float *a, const float *b);
void cpu_vec_sgd_momentum(backend_ctx *ctx, size_t n, float lr, float mu, float wd,
                          int nesterov, float *w, float *v, const float *g);
void cpu_vec_parle_inner(backend_ctx *ctx, size_t n, float eta, float mu, float lambda,
                         float gamma, float alpha, float *y, float *z, float *v, const float *g,
                         const float *xhat);
void cpu_vec_parle_outer(backend_ctx *ctx, size_t n, float eta, float mu, float rho, float *x,
                         float *u, const float *xhat, const float *z, const float *zbar);
void cpu_vec_elastic_step(backend_ctx *ctx, size_t n, float eta, float mu, float lambda,
                          float rho, float *x, float *u, const float *g, const float *xbar);

#endif
