/* Softmax cross-entropy, mean over the batch, with the maths of
 * kernels/cpu/softmax_xent.c (log-sum-exp about the row maximum, in double).
 * One warp per row writes the row's loss and hit and its dlogits; then one
 * block sums the rows and finds the first bad label, and that summary comes
 * back through pinned memory. Logits and dlogits are activations of the
 * context's type (act.cuh). */
#include <math.h>

#include "act.cuh"
#include "backend_cuda.h"
#include "cuda_check.h"
#include "launch.cuh"

/* What comes back to the host. */
struct xent_result {
    double loss;   /* sum over rows */
    int hits;
    int bad;       /* first example with a label outside [0, classes), or -1 */
    int bad_label;
};

enum { ROWS_PER_BLOCK = THREADS_PER_BLOCK / 32 };

template <typename T>
__global__ void xent_rows_kernel(int n, int classes, const T *logits, const int32_t *labels,
                                 T *dlogits, double *row_loss, int *row_hit)
{
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= n)
        return; /* whole warps leave together: rows are warp-aligned */
    const int label = labels[row];
    if (label < 0 || label >= classes)
        return; /* reported by xent_sum_kernel; this row's outputs are left alone */
    const T *z = logits + (size_t)row * classes;
    /* The first maximum: the CPU's strict > over j in order. */
    int top = -1;
    float top_v = 0.0f;
    for (int j = lane; j < classes; j += 32)
        if (top < 0 || act_ld(z, j) > top_v) {
            top = j;
            top_v = act_ld(z, j);
        }
    for (int off = 16; off > 0; off /= 2) {
        const int o_top = __shfl_down_sync(0xffffffffu, top, off);
        const float o_v = __shfl_down_sync(0xffffffffu, top_v, off);
        if (o_top >= 0 && (top < 0 || o_v > top_v || (o_v == top_v && o_top < top))) {
            top = o_top;
            top_v = o_v;
        }
    }
    top = __shfl_sync(0xffffffffu, top, 0);
    const float zmax = __shfl_sync(0xffffffffu, top_v, 0);
    double sum = 0.0;
    for (int j = lane; j < classes; j += 32)
        sum += exp((double)(act_ld(z, j) - zmax));
    for (int off = 16; off > 0; off /= 2)
        sum += __shfl_down_sync(0xffffffffu, sum, off);
    const double log_sum = log(__shfl_sync(0xffffffffu, sum, 0));
    if (lane == 0) {
        row_loss[row] = log_sum - (double)(act_ld(z, label) - zmax);
        row_hit[row] = top == label;
    }
    if (!dlogits)
        return;
    T *g = dlogits + (size_t)row * classes;
    for (int j = lane; j < classes; j += 32) {
        float v = (float)(exp((double)(act_ld(z, j) - zmax) - log_sum) / n);
        if (j == label)
            v -= 1.0f / (float)n;
        act_st(g, j, v);
    }
}

template <typename T>
static void xent_rows(backend_ctx *ctx, int blocks, int n, int classes, const float *logits,
                      const int32_t *labels, float *dlogits, double *row_loss, int *row_hit)
{
    xent_rows_kernel<T><<<blocks, THREADS_PER_BLOCK, 0, cuda_stream_of(ctx)>>>(
        n, classes, act_in<T>(logits), labels, act_out<T>(dlogits), row_loss, row_hit);
}

/* One block: the rows' losses and hits summed, and the first bad label (the
 * smallest such example, as the CPU's scan in order would report). */
__global__ void xent_sum_kernel(int n, int classes, const int32_t *labels,
                                const double *row_loss, const int *row_hit, xent_result *out)
{
    __shared__ int first_bad;
    if (threadIdx.x == 0)
        first_bad = n;
    __syncthreads();
    double loss = 0.0;
    int hits = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        if (labels[i] < 0 || labels[i] >= classes) {
            atomicMin(&first_bad, i);
            continue;
        }
        loss += row_loss[i];
        hits += row_hit[i];
    }
    loss = block_sum(loss);
    hits = block_sum(hits);
    __syncthreads(); /* every atomicMin done */
    if (threadIdx.x == 0) {
        out->loss = loss;
        out->hits = hits;
        out->bad = first_bad < n ? first_bad : -1;
        out->bad_label = first_bad < n ? labels[first_bad] : 0;
    }
}

extern "C" float cuda_softmax_xent_op(backend_ctx *ctx, int n, int classes, const float *logits,
                                      const int32_t *labels, float *dlogits, int *correct)
{
    if (correct)
        *correct = 0;
    if (n <= 0)
        return 0.0f;
    cuda_impl *im = cuda_impl_of(ctx);
    cudaStream_t s = im->stream;
    /* Scratch: the result, then n row losses, then n row hits. */
    char *scratch = (char *)cuda_scratch(ctx, sizeof(xent_result) + (size_t)n * (8 + 4));
    if (!scratch)
        return NAN;
    xent_result *res = (xent_result *)scratch;
    double *row_loss = (double *)(scratch + sizeof(xent_result));
    int *row_hit = (int *)(row_loss + n);
    const int blocks = (n + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    ACT_DISPATCH(ctx, xent_rows, ctx, blocks, n, classes, logits, labels, dlogits, row_loss,
                 row_hit);
    if (!CUDA_OK(ctx, cudaGetLastError()))
        return NAN;
    xent_sum_kernel<<<1, THREADS_PER_BLOCK, 0, s>>>(n, classes, labels, row_loss, row_hit, res);
    xent_result *host = (xent_result *)im->host;
    if (!CUDA_OK(ctx, cudaGetLastError()) ||
        !CUDA_OK(ctx, cudaMemcpyAsync(host, res, sizeof *host, cudaMemcpyDeviceToHost, s)) ||
        !CUDA_OK(ctx, cudaStreamSynchronize(s)))
        return NAN;
    if (host->bad >= 0) {
        backend_fail(ctx, "label %d of example %d is outside [0, %d)", host->bad_label, host->bad,
                     classes);
        return NAN;
    }
    if (correct)
        *correct = host->hits;
    return (float)(host->loss / n);
}
