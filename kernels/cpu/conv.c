/* 2-D convolution as im2col + one GEMM per chunk of images.
 *
 * A chunk of m images is unrolled into col[C k k, m P] (P = out_h out_w, image i
 * in columns [i P, (i+1) P)), so small feature maps still make one wide GEMM.
 * The chunk is as many images as keep col and the [out_c, m P] product in
 * about 1 MiB, so the GEMM reads col from L2 (LeNet ran faster so than with
 * whole-batch chunks), but at least enough for CONV_MIN_COLS GEMM columns and
 * never past CONV_MAX_FLOATS of workspace, whatever the batch.
 * Convolutions with many channels go to oneDNN's primitives (conv_dnnl.c)
 * when it has them; these loops do the rest. */
#include <string.h>

#include "cpu_ops.h"
#include "cpu_util.h"

enum {
    CONV_CACHE_FLOATS = 1 << 18, /* 1 MiB */
    CONV_MIN_COLS = 512,
    CONV_MAX_FLOATS = 8 << 20, /* 32 MiB */
};

static int out_size(int in, int k, int stride, int pad)
{
    return in + 2 * pad < k ? 0 : (in + 2 * pad - k) / stride + 1;
}

void conv2d_desc_init(conv2d_desc *d, int in_c, int in_h, int in_w, int out_c, int k, int stride,
                      int pad)
{
    d->in_c = in_c;
    d->in_h = in_h;
    d->in_w = in_w;
    d->out_c = out_c;
    d->k = k;
    d->stride = stride;
    d->pad = pad;
    d->out_h = out_size(in_h, k, stride, pad);
    d->out_w = out_size(in_w, k, stride, pad);
}

/* Outputs o in [*lo, *hi) read input o stride + offset inside [0, in). */
static void valid_range(int out, int in, int stride, int offset, int *lo, int *hi)
{
    int l = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    int h = in - 1 - offset < 0 ? 0 : (in - 1 - offset) / stride + 1;
    *hi = h < out ? h : out;
    *lo = l < *hi ? l : *hi;
}

static size_t floats_per_image(const conv2d_desc *d)
{
    return (size_t)(d->in_c * d->k * d->k + d->out_c) * d->out_h * d->out_w;
}

static int chunk_images(const conv2d_desc *d, int n)
{
    const size_t per_image = floats_per_image(d), P = (size_t)d->out_h * d->out_w;
    if (per_image == 0)
        return 1; /* empty output: nothing to compute */
    size_t m = CONV_CACHE_FLOATS / per_image;
    if (m * P < CONV_MIN_COLS)
        m = (CONV_MIN_COLS + P - 1) / P;
    if (m * per_image > CONV_MAX_FLOATS)
        m = CONV_MAX_FLOATS / per_image;
    if (m > (size_t)n)
        m = (size_t)n;
    return m < 1 ? 1 : (int)m;
}

/* Scratch for one chunk, or NULL with the context failed (out of memory). */
static float *chunk_workspace(backend_ctx *ctx, const conv2d_desc *d, int m)
{
    return backend_workspace(ctx, floats_per_image(d) * m);
}

/* Loops that copy or clear rows stay loops here: rows are short (4 to 32
 * floats), and GCC's memcpy/memset calls in their place cost more than the
 * copies (40% of LeNet conv2's forward). */
#if defined(__GNUC__) && !defined(__clang__)
#define SHORT_ROWS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define SHORT_ROWS
#endif

/* Output row `row` of one kernel tap: input elements src[0], src[stride], ...
 * in columns [lo, hi), zero where the tap falls in the padding. */
static inline void gather_row(int OW, int lo, int hi, int stride, const float *restrict src,
                              float *restrict row)
{
    for (int ow = 0; ow < lo; ow++)
        row[ow] = 0.0f;
    for (int ow = lo; ow < hi; ow++)
        row[ow] = src[(ow - lo) * stride];
    for (int ow = hi; ow < OW; ow++)
        row[ow] = 0.0f;
}

static inline void zero_floats(size_t count, float *x)
{
    for (size_t j = 0; j < count; j++)
        x[j] = 0.0f;
}

/* Row r = (c, ki, kj) of col for m images: the divisions and clipping are
 * done once per row, not once per image (on small maps they were the cost). */
CPU_HOT SHORT_ROWS static void im2col_row(const conv2d_desc *d, int r, int m, const float *x,
                                          float *dst_row)
{
    const int k = d->k, s = d->stride, H = d->in_h, W = d->in_w, OH = d->out_h, OW = d->out_w;
    const int c = r / (k * k), ki = r / k % k, kj = r % k;
    const size_t P = (size_t)OH * OW, in_size = (size_t)d->in_c * H * W;
    int oh_lo, oh_hi, ow_lo, ow_hi;
    valid_range(OH, H, s, ki - d->pad, &oh_lo, &oh_hi);
    valid_range(OW, W, s, kj - d->pad, &ow_lo, &ow_hi);
    /* Input column of the first valid output column. */
    const int iw0 = ow_lo * s + kj - d->pad;
    for (int i = 0; i < m; i++) {
        const float *plane = x + i * in_size + (size_t)c * H * W;
        float *dst = dst_row + i * P;
        zero_floats((size_t)oh_lo * OW, dst);
        for (int oh = oh_lo; oh < oh_hi; oh++)
            gather_row(OW, ow_lo, ow_hi, s, plane + (size_t)(oh * s + ki - d->pad) * W + iw0,
                       dst + (size_t)oh * OW);
        zero_floats((size_t)(OH - oh_hi) * OW, dst + (size_t)oh_hi * OW);
    }
}

/* col[C k k, m P] from m images; one task per row. */
static void im2col(backend_ctx *ctx, const conv2d_desc *d, int m, const float *x, float *col)
{
    const int rows = d->in_c * d->k * d->k;
    const size_t ld = (size_t)d->out_h * d->out_w * m;
#pragma omp parallel for schedule(static) num_threads(ctx->threads) \
    if ((size_t)rows * ld >= CPU_PARALLEL_MIN)
    for (int r = 0; r < rows; r++)
        im2col_row(d, r, m, x, col + r * ld);
}

static void add_strided(int count, int stride, const float *restrict src, float *restrict dst)
{
    if (stride == 1)
        for (int j = 0; j < count; j++)
            dst[j] += src[j];
    else
        for (int j = 0; j < count; j++)
            dst[j * stride] += src[j];
}

/* dx = the sum of col's columns back onto the input planes they came from.
 * One task per input channel, so no two threads add into one plane (the
 * first layer, with few channels, needs no dx). */
static void col2im(backend_ctx *ctx, const conv2d_desc *d, int m, const float *col, float *dx)
{
    const int k = d->k, s = d->stride, H = d->in_h, W = d->in_w, OH = d->out_h, OW = d->out_w;
    const size_t P = (size_t)OH * OW, ld = P * m, in_size = (size_t)d->in_c * H * W;
#pragma omp parallel for schedule(static) num_threads(ctx->threads) \
    if ((size_t)d->in_c * k * k * ld >= CPU_PARALLEL_MIN)
    for (int c = 0; c < d->in_c; c++) {
        for (int i = 0; i < m; i++)
            memset(dx + i * in_size + (size_t)c * H * W, 0, (size_t)H * W * sizeof(float));
        for (int ki = 0; ki < k; ki++) {
            int oh_lo, oh_hi;
            valid_range(OH, H, s, ki - d->pad, &oh_lo, &oh_hi);
            for (int kj = 0; kj < k; kj++) {
                int ow_lo, ow_hi;
                valid_range(OW, W, s, kj - d->pad, &ow_lo, &ow_hi);
                const float *row = col + (size_t)((c * k + ki) * k + kj) * ld;
                const int iw0 = ow_lo * s + kj - d->pad;
                for (int i = 0; i < m; i++) {
                    float *plane = dx + i * in_size + (size_t)c * H * W;
                    for (int oh = oh_lo; oh < oh_hi; oh++)
                        add_strided(ow_hi - ow_lo, s, row + i * P + (size_t)oh * OW + ow_lo,
                                    plane + (size_t)(oh * s + ki - d->pad) * W + iw0);
                }
            }
        }
    }
}

/* Images are NCHW, t[i][o][p]; a chunk keeps them as g[o][i P + p]. */
static void chunk_gather(backend_ctx *ctx, int m, int channels, size_t P, const float *t,
                         float *g)
{
#pragma omp parallel for collapse(2) schedule(static) num_threads(ctx->threads) \
    if ((size_t)channels * P * m >= CPU_PARALLEL_MIN)
    for (int i = 0; i < m; i++)
        for (int o = 0; o < channels; o++)
            memcpy(g + (o * m + i) * P, t + ((size_t)i * channels + o) * P, P * sizeof(float));
}

CPU_HOT static void add_bias(size_t count, float bias, const float *restrict src,
                             float *restrict dst)
{
    for (size_t p = 0; p < count; p++)
        dst[p] = src[p] + bias;
}

/* The inverse of chunk_gather, adding the bias b (or nothing if NULL). */
static void chunk_scatter(backend_ctx *ctx, int m, int channels, size_t P, const float *g,
                          const float *b, float *t)
{
#pragma omp parallel for collapse(2) schedule(static) num_threads(ctx->threads) \
    if ((size_t)channels * P * m >= CPU_PARALLEL_MIN)
    for (int i = 0; i < m; i++)
        for (int o = 0; o < channels; o++)
            add_bias(P, b ? b[o] : 0.0f, g + (o * m + i) * P, t + ((size_t)i * channels + o) * P);
}

void cpu_conv2d_forward(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                        const float *w, const float *b, float *y)
{
    const int ckk = d->in_c * d->k * d->k, oc = d->out_c;
    const size_t P = (size_t)d->out_h * d->out_w, in_size = (size_t)d->in_c * d->in_h * d->in_w;
    if (conv_dnnl_forward(ctx, d, n, x, w, b, y) == 0)
        return;
    const int chunk = chunk_images(d, n);
    float *col = chunk_workspace(ctx, d, chunk);
    if (!col)
        return;
    for (int i0 = 0; i0 < n; i0 += chunk) {
        const int m = n - i0 < chunk ? n - i0 : chunk;
        float *prod = col + (size_t)ckk * P * m;
        im2col(ctx, d, m, x + i0 * in_size, col);
        cpu_gemm(ctx, 0, 0, oc, (int)(P * m), ckk, 1.0f, w, ckk, col, (int)(P * m), 0.0f,
                 prod, (int)(P * m));
        chunk_scatter(ctx, m, oc, P, prod, b, y + (size_t)i0 * oc * P);
    }
}

void cpu_conv2d_backward_data(backend_ctx *ctx, const conv2d_desc *d, int n, const float *dy,
                              const float *w, float *dx)
{
    const int ckk = d->in_c * d->k * d->k, oc = d->out_c;
    const size_t P = (size_t)d->out_h * d->out_w, in_size = (size_t)d->in_c * d->in_h * d->in_w;
    if (conv_dnnl_backward_data(ctx, d, n, dy, w, dx) == 0)
        return;
    const int chunk = chunk_images(d, n);
    float *col = chunk_workspace(ctx, d, chunk);
    if (!col)
        return;
    for (int i0 = 0; i0 < n; i0 += chunk) {
        const int m = n - i0 < chunk ? n - i0 : chunk;
        float *dyg = col + (size_t)ckk * P * m;
        chunk_gather(ctx, m, oc, P, dy + (size_t)i0 * oc * P, dyg);
        cpu_gemm(ctx, 1, 0, ckk, (int)(P * m), oc, 1.0f, w, ckk, dyg, (int)(P * m), 0.0f,
                 col, (int)(P * m));
        col2im(ctx, d, m, col, dx + i0 * in_size);
    }
}

CPU_HOT static float row_sum(size_t count, const float *x)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (size_t j = 0; j < count; j++)
        s += x[j];
    return s;
}

void cpu_conv2d_backward_filter(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                                const float *dy, float *dw, float *db)
{
    const int ckk = d->in_c * d->k * d->k, oc = d->out_c;
    const size_t P = (size_t)d->out_h * d->out_w, in_size = (size_t)d->in_c * d->in_h * d->in_w;
    if (conv_dnnl_backward_filter(ctx, d, n, x, dy, dw, db) == 0)
        return;
    const int chunk = chunk_images(d, n);
    float *col = chunk_workspace(ctx, d, chunk);
    if (!col)
        return;
    memset(dw, 0, (size_t)oc * ckk * sizeof(float));
    if (db)
        memset(db, 0, (size_t)oc * sizeof(float));
    for (int i0 = 0; i0 < n; i0 += chunk) {
        const int m = n - i0 < chunk ? n - i0 : chunk;
        float *dyg = col + (size_t)ckk * P * m;
        im2col(ctx, d, m, x + i0 * in_size, col);
        chunk_gather(ctx, m, oc, P, dy + (size_t)i0 * oc * P, dyg);
        cpu_gemm(ctx, 0, 1, oc, ckk, (int)(P * m), 1.0f, dyg, (int)(P * m), col, (int)(P * m),
                 1.0f, dw, ckk);
        /* The bias gradient from the gathered chunk, while it is in cache. */
        if (db)
            for (int o = 0; o < oc; o++)
                db[o] += row_sum(P * m, dyg + o * P * m);
    }
}
