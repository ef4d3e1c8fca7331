/* Row-major single-precision GEMM: oneDNN when available, else a blocked loop.
 *
 * In a bf16 context (ctx->precision) products with M, N and K all at least
 * GEMM_BF16_MIN run as oneDNN's bf16 matmul: A (times alpha) and B rounded to
 * bf16 here, f32 accumulation, C in f32. The rest stay fp32: with one side
 * short (a first layer's 27-long im2col rows, 10 classes) the product is
 * bound by memory traffic that the conversion only adds to. Measured at 1
 * thread: bf16 took 0.5-0.7x sgemm's time with every side >= 128 (a
 * 128 x 500 x 800 linear layer, 1024^3), 1.1-3.6x with one side 10-27. The
 * matmul primitives, one per
 * (op(A), op(B), C = or C +=), take their sizes at run time, so each context
 * makes each once (cpu_impl.gemm_bf16), on the engine conv_dnnl.c made. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ops.h"
#include "cpu_util.h"
#include "parle_config.h"

#if PARLE_HAVE_DNNL
#include <dnnl.h>
#include <omp.h>

enum { GEMM_BF16_MIN = 64 };

/* Round to nearest even; NaN stays NaN (quiet). */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* rows x cols of x (row stride ld) times scale, densely into out. */
static void rows_to_bf16(int rows, int cols, float scale, const float *x, int ld, uint16_t *out)
{
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= CPU_PARALLEL_MIN)
    for (int i = 0; i < rows; i++) {
        const float *restrict r = x + (size_t)i * ld;
        uint16_t *restrict o = out + (size_t)i * cols;
        for (int j = 0; j < cols; j++)
            o[j] = to_bf16(scale * r[j]);
    }
}

/* Sizes at run time, layouts fixed: oneDNN's bf16 GEMM kernel takes
 * these; with run-time strides too, only its slow reference matmul does. */
static dnnl_primitive_t make_matmul(dnnl_engine_t engine, int trans_a, int trans_b,
                                    int accumulate)
{
    const dnnl_dims_t rt = {DNNL_RUNTIME_DIM_VAL, DNNL_RUNTIME_DIM_VAL};
    dnnl_memory_desc_t a, b, c;
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    if (dnnl_memory_desc_init_by_tag(&a, 2, rt, dnnl_bf16, trans_a ? dnnl_ba : dnnl_ab) !=
            dnnl_success ||
        dnnl_memory_desc_init_by_tag(&b, 2, rt, dnnl_bf16, trans_b ? dnnl_ba : dnnl_ab) !=
            dnnl_success ||
        dnnl_memory_desc_init_by_tag(&c, 2, rt, dnnl_f32, dnnl_ab) != dnnl_success ||
        dnnl_matmul_desc_init(&md, &a, &b, NULL, &c) != dnnl_success ||
        dnnl_primitive_attr_create(&attr) != dnnl_success ||
        dnnl_post_ops_create(&ops) != dnnl_success ||
        (accumulate && dnnl_post_ops_append_sum(ops, 1.0f) != dnnl_success) ||
        dnnl_primitive_attr_set_post_ops(attr, ops) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &md, attr, engine, NULL) != dnnl_success ||
        dnnl_primitive_create(&prim, pd) != dnnl_success)
        prim = NULL;
    dnnl_primitive_desc_destroy(pd);
    dnnl_post_ops_destroy(ops);
    dnnl_primitive_attr_destroy(attr);
    return prim;
}

static int matmul_arg(dnnl_engine_t engine, int rows, int cols, int trans, dnnl_data_type_t dt,
                      void *data, dnnl_memory_t *mem)
{
    const dnnl_dims_t dims = {rows, cols};
    dnnl_memory_desc_t md;
    return dnnl_memory_desc_init_by_tag(&md, 2, dims, dt, trans ? dnnl_ba : dnnl_ab) ==
                   dnnl_success &&
                   dnnl_memory_create(mem, &md, engine, data) == dnnl_success
               ? 0
               : -1;
}

/* C = alpha op(A) op(B) + beta C on bf16 inputs, beta 0 or 1 (the primitive's
 * sum post-op adds C as it is); -1 (C untouched) for another beta, if oneDNN
 * could not or C has gaps between rows, and the caller then runs sgemm. */
static int gemm_bf16(backend_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha,
                     const float *A, int lda, const float *B, int ldb, float beta, float *C,
                     int ldc)
{
    cpu_impl *impl = ctx->impl;
    const int accumulate = beta != 0.0f, which = 4 * !!trans_a + 2 * !!trans_b + accumulate;
    dnnl_primitive_t *prim = &impl->gemm_bf16[which];
    if (ldc != N || (accumulate && beta != 1.0f) || cpu_dnnl_ready(impl) != 0 ||
        (!*prim && !(*prim = make_matmul(impl->dnnl_engine, trans_a, trans_b, accumulate))))
        return -1;
    const size_t na = (size_t)M * K, need = na + (size_t)K * N;
    if (need > impl->gemm_buf_len) {
        uint16_t *buf = realloc(impl->gemm_buf, need * sizeof(uint16_t));
        if (!buf)
            return -1;
        impl->gemm_buf = buf, impl->gemm_buf_len = need;
    }
    /* Densely, in their stored orientation: op(A) is A^T when trans_a. */
    uint16_t *a = impl->gemm_buf, *b = impl->gemm_buf + na;
    rows_to_bf16(trans_a ? K : M, trans_a ? M : K, alpha, A, lda, a);
    rows_to_bf16(trans_b ? N : K, trans_b ? K : N, 1.0f, B, ldb, b);
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL;
    int rc = -1;
    if (matmul_arg(impl->dnnl_engine, M, K, trans_a, dnnl_bf16, a, &ma) ||
        matmul_arg(impl->dnnl_engine, K, N, trans_b, dnnl_bf16, b, &mb) ||
        matmul_arg(impl->dnnl_engine, M, N, 0, dnnl_f32, C, &mc))
        goto done;
    const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    if (dnnl_primitive_execute(*prim, impl->dnnl_stream, 3, args) ==
            dnnl_success &&
        dnnl_stream_wait(impl->dnnl_stream) == dnnl_success)
        rc = 0;
done:
    dnnl_memory_destroy(ma);
    dnnl_memory_destroy(mb);
    dnnl_memory_destroy(mc);
    return rc;
}

void cpu_gemm_free(cpu_impl *impl)
{
    for (int i = 0; i < CPU_GEMM_BF16_PRIMS; i++) {
        dnnl_primitive_destroy(impl->gemm_bf16[i]);
        impl->gemm_bf16[i] = NULL;
    }
    free(impl->gemm_buf);
    impl->gemm_buf = NULL;
    impl->gemm_buf_len = 0;
}

void cpu_gemm(backend_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    /* oneDNN sizes its team from this thread's OpenMP setting: make it the
     * context's, whatever else this thread ran since. */
    if (omp_get_max_threads() != ctx->threads)
        omp_set_num_threads(ctx->threads);
    if (ctx->precision == PRECISION_BF16 && M >= GEMM_BF16_MIN && N >= GEMM_BF16_MIN &&
        K >= GEMM_BF16_MIN &&
        gemm_bf16(ctx, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == 0)
        return;
    /* Invalid sizes are the caller's bug; oneDNN then leaves C untouched. */
    (void)dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb,
                     beta, C, ldc);
}

#else

void cpu_gemm_free(cpu_impl *impl)
{
    (void)impl;
}

/* Portable fallback: C row i += alpha A[i, k] B[k, :], with B packed into
 * K x N_BLOCK panels (transposed if needed) so the inner loop is a unit-stride
 * axpy the compiler vectorises. */
enum { N_BLOCK = 256, K_BLOCK = 128 };

CPU_HOT static void axpy_row(int n, float a, const float *restrict x, float *restrict y)
{
    for (int j = 0; j < n; j++)
        y[j] += a * x[j];
}

void cpu_gemm(backend_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
    if (K <= 0 || alpha == 0.0f)
        return;
#pragma omp parallel num_threads(ctx->threads) if ((size_t)M * N * K >= CPU_PARALLEL_MIN)
    {
        float panel[K_BLOCK * N_BLOCK];
        for (int j0 = 0; j0 < N; j0 += N_BLOCK) {
            int nb = N - j0 < N_BLOCK ? N - j0 : N_BLOCK;
            for (int k0 = 0; k0 < K; k0 += K_BLOCK) {
                int kb = K - k0 < K_BLOCK ? K - k0 : K_BLOCK;
                for (int k = 0; k < kb; k++)
                    for (int j = 0; j < nb; j++)
                        panel[k * nb + j] = trans_b ? B[(size_t)(j0 + j) * ldb + k0 + k]
                                                    : B[(size_t)(k0 + k) * ldb + j0 + j];
#pragma omp for schedule(static)
                for (int i = 0; i < M; i++)
                    for (int k = 0; k < kb; k++) {
                        float a = trans_a ? A[(size_t)(k0 + k) * lda + i] : A[(size_t)i * lda + k0 + k];
                        axpy_row(nb, alpha * a, panel + k * nb, C + (size_t)i * ldc + j0);
                    }
            }
        }
    }
}

#endif
