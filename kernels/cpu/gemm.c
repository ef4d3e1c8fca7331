/* Row-major single-precision GEMM: oneDNN when available, else a blocked loop. */

#include "cpu_ops.h"
#include "cpu_util.h"
#include "parle_config.h"

#if PARLE_HAVE_DNNL
#include <dnnl.h>
#include <omp.h>

void cpu_gemm(backend_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    /* oneDNN sizes its team from this thread's OpenMP setting: make it the
     * context's, whatever else this thread ran since. */
    if (omp_get_max_threads() != ctx->threads)
        omp_set_num_threads(ctx->threads);
    /* Invalid sizes are the caller's bug; oneDNN then leaves C untouched. */
    (void)dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb,
                     beta, C, ldc);
}

#else

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
