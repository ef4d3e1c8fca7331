/* Helpers private to the CPU backend. */
#ifndef PARLE_CPU_UTIL_H
#define PARLE_CPU_UTIL_H

#include <stddef.h>
#include <omp.h>

#include "cpu_ops.h"

/* Loops with fewer elements than this run on the calling thread alone: waking
 * an OpenMP team costs microseconds, more than the work it would share. */
#define CPU_PARALLEL_MIN 32768

/* Element-wise loops also get an AVX2 clone, picked when the program loads,
 * since the portable build targets plain x86-64 (SSE2). Not under
 * ThreadSanitizer: its instrumented ifunc resolvers run before its runtime
 * is up and crash the program at load. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define CPU_HOT __attribute__((target_clones("avx2", "default")))
#else
#define CPU_HOT
#endif

/* This thread's share [lo, hi) of [0, n); call inside a parallel region. */
static inline void cpu_slice(size_t n, size_t *lo, size_t *hi)
{
    size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
    *lo = n / nt * t + (t < n % nt ? t : n % nt);
    *hi = *lo + n / nt + (t < n % nt);
}

/* Threads splitting a batch of n items whose work spans `floats` floats: the
 * context's, never more than n, and one where the work is smaller than a
 * team's wake-up. */
static inline int cpu_batch_threads(const backend_ctx *ctx, int n, size_t floats)
{
    if (floats < CPU_PARALLEL_MIN || n < 2)
        return 1;
    return ctx->threads < n ? ctx->threads : n;
}

/* The sum of x[0 .. count) (cpu_util.c): a bias gradient's. */
float cpu_row_sum(size_t count, const float *x);

/* Per-thread partial gradients added up in thread order (the same sums for
 * the same thread count), cpu_util.c: `threads` blocks `stride` floats apart
 * from `blocks`, each n1 floats summed into out1 (which may be the first
 * block itself) and the n2 after them into out2 (none if NULL). */
void cpu_sum_thread_blocks(int threads, const float *blocks, size_t stride, size_t n1,
                           float *out1, size_t n2, float *out2);

/* conv_dnnl.c: the convolution through oneDNN's primitives when that is the
 * faster way (32 or more channels in and out) and oneDNN is there; returns
 * 0 when done, -1 when the caller must compute it instead. */
int conv_dnnl_forward(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                      const float *w, const float *b, float *y);
int conv_dnnl_backward_data(backend_ctx *ctx, const conv2d_desc *d, int n, const float *dy,
                            const float *w, float *dx);
int conv_dnnl_backward_filter(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                              const float *dy, float *dw, float *db);
/* Destroys the context's primitives, stream and engine. */
void conv_dnnl_free(cpu_impl *impl);

/* conv_winograd5.c: 5x5 stride-1 unpadded convolutions whose outputs split
 * into 4x4 blocks, with 8 or more input channels, by Winograd F(4x4, 5x5),
 * on x86-64 with AVX-512VL and the context's conv_winograd set; returns 0
 * when done, -1 when the caller must compute it instead. */
int conv_winograd5_forward(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                           const float *w, const float *b, float *y);
int conv_winograd5_backward_data(backend_ctx *ctx, const conv2d_desc *d, int n, const float *dy,
                                 const float *w, float *dx);
int conv_winograd5_backward_filter(backend_ctx *ctx, const conv2d_desc *d, int n,
                                   const float *x, const float *dy, float *dw, float *db);

/* conv_thin.c (x86-64 with AVX-512VL at run time): stride-1 unpadded
 * convolutions with thin filters, image by image. conv_thin_fits says
 * whether d is one and this CPU has the instructions; the forward writes y
 * (bias included, b may be NULL), the filter gradient adds into dw. */
#if defined(__x86_64__) && defined(__GNUC__)
#define CONV_THIN 1
int conv_thin_fits(const conv2d_desc *d);
void conv_thin_forward_image(const conv2d_desc *d, const float *x, const float *w,
                             const float *b, float *y);
void conv_thin_filter_image(const conv2d_desc *d, const float *x, const float *dy, float *dw);
#else
#define CONV_THIN 0
#endif

#endif
