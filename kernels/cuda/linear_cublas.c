/* Row-major GEMM and the fully connected layer (PyTorch layout w[out][in])
 * through cuBLAS, which is column-major. */
#include "backend_cuda.h"
#include "cuda_check.h"

/* A row-major matrix is its transpose seen column-major, with the same
 * leading dimension. So row-major C = op(A) op(B) is column-major
 * C^T = op(B)^T op(A)^T: the same call with the operands swapped and M, N
 * exchanged, each keeping its own transpose flag.
 *
 * The public gemm takes fp32 at every precision. At bf16, A and B stay fp32
 * in memory and cuBLAS converts them to bf16 on
 * their way into the tensor cores (compute type 32F_FAST_16BF), accumulating
 * and writing C in fp32: no conversion pass and no scratch, unlike the
 * convolutions, whose cuDNN configuration needs bf16 in memory. The
 * compute type allows bf16 rather than forcing it, and how cuBLAS rounds is
 * its own: test_gpu_ops checks that the error has bf16's size. */
void cuda_gemm_op(backend_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    cublasHandle_t h = cuda_cublas(ctx);
    if (!h)
        return;
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (ctx->precision == PRECISION_BF16)
        CUBLAS_OK(ctx, cublasGemmEx(h, op_b, op_a, N, M, K, &alpha, B, CUDA_R_32F, ldb, A,
                                    CUDA_R_32F, lda, &beta, C, CUDA_R_32F, ldc,
                                    CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
    else
        CUBLAS_OK(ctx, cublasSgemm(h, op_b, op_a, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc));
}

/* Row-major C = op(A) op(B) + beta C for the linear layer at bf16: A and
 * B in bf16, C in bf16 (an activation) or fp32 (a weight gradient), fp32
 * accumulation (CUBLAS_COMPUTE_32F: no lower-precision compute). */
static void gemm_bf16(backend_ctx *ctx, int trans_a, int trans_b, int M, int N, int K,
                      const void *A, int lda, const void *B, int ldb, float beta, void *C,
                      cudaDataType_t c_type, int ldc)
{
    cublasHandle_t h = cuda_cublas(ctx);
    const float alpha = 1.0f;
    if (h && M > 0 && N > 0)
        CUBLAS_OK(ctx, cublasGemmEx(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B,
                                    CUDA_R_16BF, ldb, A, CUDA_R_16BF, lda, &beta, C, c_type, ldc,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* The weights' bf16 copy in scratch (bf16 activations only); NULL with the
 * sticky error set. */
static const uint16_t *weights_bf16(backend_ctx *ctx, const float *w, size_t count)
{
    uint16_t *wb = cuda_scratch(ctx, count * sizeof(uint16_t));
    if (wb)
        cuda_to_bf16(ctx, count, w, wb);
    return backend_failed(ctx) ? NULL : wb;
}

/* As the CPU: every row starts at the bias, then x w^T is added to it. At
 * bf16, x and y are bf16 activations and w goes through a bf16 copy. */
void cuda_linear_forward_op(backend_ctx *ctx, int n, int in, int out, const float *x,
                            const float *w, const float *b, float *y)
{
    cuda_bias_fill(ctx, n, out, 1, b, y);
    if (backend_failed(ctx))
        return;
    if (ctx->act == DTYPE_F32) {
        cuda_gemm_op(ctx, 0, 1, n, out, in, 1.0f, x, in, w, in, 1.0f, y, out);
        return;
    }
    const uint16_t *wb = weights_bf16(ctx, w, (size_t)out * in);
    if (wb)
        gemm_bf16(ctx, 0, 1, n, out, in, x, in, wb, in, 1.0f, y, CUDA_R_16BF, out);
}

/* At bf16: dx (bf16) = dy w through w's bf16 copy; dw (fp32) = dy^T x. */
void cuda_linear_backward_op(backend_ctx *ctx, int n, int in, int out, const float *x,
                             const float *w, const float *dy, float *dx, float *dw, float *db)
{
    const int f32 = ctx->act == DTYPE_F32;
    if (dx && f32) {
        cuda_gemm_op(ctx, 0, 0, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
    } else if (dx) {
        const uint16_t *wb = weights_bf16(ctx, w, (size_t)out * in);
        if (wb)
            gemm_bf16(ctx, 0, 0, n, in, out, dy, out, wb, in, 0.0f, dx, CUDA_R_16BF, in);
    }
    if (!backend_failed(ctx) && f32)
        cuda_gemm_op(ctx, 1, 0, out, in, n, 1.0f, dy, out, x, in, 0.0f, dw, in);
    else if (!backend_failed(ctx))
        gemm_bf16(ctx, 1, 0, out, in, n, dy, out, x, in, 0.0f, dw, CUDA_R_32F, in);
    if (db && !backend_failed(ctx))
        cuda_bias_grad(ctx, n, out, 1, dy, db);
}
