/* What test_gpu_ops' files share: the two contexts, a tensor on the host
 * and its device twin, their comparison (test_gpu_ops.c gives the tolerances),
 * and each op family's checks: matrix products (gpu_ops_matrix.c), pooling and
 * batch norm (gpu_ops_pool_bn.c); softmax, the vector ops and memory are
 * test_gpu_ops.c's own. */
#ifndef PARLE_GPU_OPS_CHECK_H
#define PARLE_GPU_OPS_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

extern backend_ctx cpu, gpu;
extern int quiet; /* compare() prints its largest error unless set */

/* A float tensor on the host (what the CPU op works on) and its device twin. */
typedef struct buf {
    float *h, *d;
    size_t n;
} buf;

/* n floats in [lo, hi) on the host, copied to the device. */
buf make(size_t n, double lo, double hi);
void drop(buf *b);
/* Compare b's device copy with its host copy; returns the largest error. */
double compare(const char *what, const buf *b, double atol, double rtol);
/* Byte-for-byte equality of two device buffers (repeat runs). */
void check_same_bits(const char *what, const float *d1, const float *d2, size_t n);
/* An int32 tensor on both sides. */
int32_t *int_buf(size_t n, int32_t **host);

/* gpu_ops_matrix.c: GEMM, linear, convolution at fp32; the default job setup
 * (tf32); the GEMM at bf16. */
typedef struct conv_case {
    const char *name;
    int n, in_c, h, w, out_c, k, stride, pad, bias;
} conv_case;
void check_gemm(void);
void check_linear(void);
void check_conv(const conv_case *t);
void check_default_setup(void);
void check_gemm_bf16(void);

/* gpu_ops_pool_bn.c: max pooling; batch norm, alone and with its ReLU, the
 * empty batch, repeat runs. */
void check_pool(int n, int c, int h, int w, int k, int stride, int pad);
void check_batchnorm(int n, int c, int hw);
void check_batchnorm_empty(int c, int hw);
void check_batchnorm_relu(int n, int c, int hw);
void check_batchnorm_repeats(int n, int c, int hw, int relu);

#endif
