/* 2-D convolution as im2col + one GEMM per chunk of images.
 *
 * A chunk of m images is unrolled into col[C k k, m P] (P = out_h out_w, image i
 * in columns [i P, (i+1) P)), so small feature maps still make one wide GEMM;
 * the filter gradient's into its transpose colT[m P, C k k] (im2row).
 * The chunk is as many images as keep col and the [out_c, m P] product in
 * about 1 MiB, so the GEMM reads col from L2 (LeNet ran faster so than with
 * whole-batch chunks), but at least enough for CONV_MIN_COLS GEMM columns and
 * never past CONV_MAX_FLOATS of workspace, whatever the batch.
 *
 * Threads split the batch, not the GEMMs: each takes a contiguous slice of
 * images and runs im2col, a one-thread GEMM and the copies of its chunks
 * alone, in its own workspace, so a convolution is one parallel region with
 * one barrier. These convolutions' GEMMs are small (20 or 50 rows on LeNet):
 * split across threads they were barely faster than on one, and every
 * im2col, GEMM and scatter was a team wake-up and a barrier of its own.
 * Convolutions with many channels go to oneDNN's primitives (conv_dnnl.c)
 * when it has them, and the forward and filter gradient of thin stride-1
 * ones (a first layer's) to conv_thin.c, within the same thread split;
 * these loops do the rest. */
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

/* Threads splitting a convolution of n images: the context's, unless the
 * whole convolution is smaller than a team's wake-up, never more than images;
 * with one, the GEMMs run outside any parallel region, on all the context's
 * threads. */
static int conv_threads(const backend_ctx *ctx, const conv2d_desc *d, int n)
{
    return cpu_batch_threads(ctx, n, floats_per_image(d) * n);
}

/* How a convolution of n images on t threads is cut. */
typedef struct conv_split {
    int threads, chunk;   /* images per chunk, within one thread's slice */
    size_t chunk_floats;  /* one thread's im2col + product scratch */
} conv_split;

static conv_split conv_split_make(const backend_ctx *ctx, const conv2d_desc *d, int n)
{
    conv_split s;
    s.threads = conv_threads(ctx, d, n);
    s.chunk = chunk_images(d, (n + s.threads - 1) / s.threads);
    s.chunk_floats = floats_per_image(d) * s.chunk;
    return s;
}

/* The context for a slice's GEMMs: this one's threads, or one inside a
 * parallel region, and always fp32 (an fp32 cpu_gemm reads only the thread
 * count). In a bf16 context too: these are the thin and small convolutions,
 * and bf16 GEMMs, one caller at a time through the context's oneDNN stream,
 * kept the batch from being split across threads (All-CNN's first layer,
 * 3 -> 96 channels, took 87 ms a step at 2 threads against 19 in fp32). */
static backend_ctx gemm_ctx(const backend_ctx *ctx, int threads)
{
    backend_ctx g = *ctx;
    g.threads = threads;
    g.precision = PRECISION_FP32;
    return g;
}

/* One convolution call's operands; each op reads those it needs. */
typedef struct conv_args {
    const conv2d_desc *d;
    conv_split s;
    float *ws;                 /* s.threads chunk scratches, then (filter) gradient blocks */
    const float *x, *w, *b, *dy;
    float *y, *dx;
} conv_args;

/* Images [lo, hi) of thread t, on a context whose GEMMs that thread may run. */
typedef void (*conv_slice_fn)(backend_ctx *ctx, const conv_args *a, size_t lo, size_t hi,
                              int t);

/* fn over the batch: with one thread at once, its GEMMs on all the
 * context's, else in one parallel region, each thread on its slice with a
 * one-thread context. */
static void conv_run(backend_ctx *ctx, const conv_args *a, int n, conv_slice_fn fn)
{
    if (a->s.threads == 1) {
        backend_ctx all = gemm_ctx(ctx, ctx->threads);
        fn(&all, a, 0, (size_t)n, 0);
        return;
    }
#pragma omp parallel num_threads(a->s.threads)
    {
        backend_ctx one = gemm_ctx(ctx, 1);
        size_t lo, hi;
        cpu_slice((size_t)n, &lo, &hi);
        fn(&one, a, lo, hi, omp_get_thread_num());
    }
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

/* Stride 1, no padding: row (c, ki, kj) of image i is the OH x OW window of
 * plane c at (ki, kj), whole rows with no clipping. Inlined with OW a
 * constant for LeNet's maps (24 and 4 wide), where the per-row loop overhead,
 * not the copy, was the cost: 4.5x fewer instructions than im2col_row, which
 * took 12% of a LeNet step. */
static inline __attribute__((always_inline)) void
copy_window(int OH, int OW, int W, const float *restrict src, float *restrict dst)
{
    for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++)
            dst[oh * OW + ow] = src[oh * W + ow];
}

CPU_HOT SHORT_ROWS static void im2col_row_dense(const conv2d_desc *d, int r, int m,
                                                const float *x, float *dst_row)
{
    const int k = d->k, H = d->in_h, W = d->in_w, OH = d->out_h, OW = d->out_w;
    const int c = r / (k * k), ki = r / k % k, kj = r % k;
    const size_t P = (size_t)OH * OW, in_size = (size_t)d->in_c * H * W;
    const float *src = x + (size_t)c * H * W + (size_t)ki * W + kj;
    for (int i = 0; i < m; i++, src += in_size, dst_row += P)
        switch (OW) {
        case 4:
            copy_window(OH, 4, W, src, dst_row);
            break;
        case 24:
            copy_window(OH, 24, W, src, dst_row);
            break;
        default:
            copy_window(OH, OW, W, src, dst_row);
        }
}

/* col[C k k, m P] from m images. */
static void im2col(const conv2d_desc *d, int m, const float *x, float *col)
{
    const int rows = d->in_c * d->k * d->k;
    const size_t ld = (size_t)d->out_h * d->out_w * m;
    const int dense = d->stride == 1 && d->pad == 0;
    for (int r = 0; r < rows; r++)
        if (dense)
            im2col_row_dense(d, r, m, x, col + r * ld);
        else
            im2col_row(d, r, m, x, col + r * ld);
}

/* One row of colT, stride 1 and no padding, 3 <= k <= 8: the windows at src
 * of C planes. Each window row is copied as 8 floats, the next overwriting
 * the excess: one vector move in place of a k-float loop. The 8 - k excess
 * floats read from the next plane and land in its window (k k >= 9 floats);
 * the last plane's would run past the image and the row, so it is copied
 * exactly. */
static inline __attribute__((always_inline)) void
window_row(int C, int k, int W, size_t plane, const float *restrict src, float *restrict dst)
{
    for (int c = 0; c < C - 1; c++, src += plane, dst += k * k)
        for (int ki = 0; ki < k; ki++)
            memcpy(dst + ki * k, src + ki * W, 8 * sizeof(float));
    copy_window(k, k, W, src, dst);
}

/* colT[m P, C k k] from m images: row i P + p holds the k x k windows of
 * every input plane at image i's output p. The filter gradient's GEMM reads
 * it untransposed: dnnl_sgemm took 0.92 ms on LeNet conv2's against 1.27 ms
 * reading col transposed. */
CPU_HOT SHORT_ROWS static void im2row(const conv2d_desc *d, int m, const float *x, float *colT)
{
    const int k = d->k, s = d->stride, C = d->in_c, H = d->in_h, W = d->in_w;
    const size_t in_size = (size_t)C * H * W, plane = (size_t)H * W, ckk = (size_t)C * k * k;
    const int dense = s == 1 && d->pad == 0 && k >= 3 && k <= 8;
    for (int i = 0; i < m; i++, x += in_size)
        for (int oh = 0; oh < d->out_h; oh++)
            for (int ow = 0; ow < d->out_w; ow++, colT += ckk) {
                const int ih0 = oh * s - d->pad, iw0 = ow * s - d->pad;
                const float *src = x + (ptrdiff_t)ih0 * W + iw0;
                if (dense && k == 5) { /* k a constant for LeNet's conv2 */
                    window_row(C, 5, W, plane, src, colT);
                    continue;
                }
                if (dense) {
                    window_row(C, k, W, plane, src, colT);
                    continue;
                }
                /* Taps [*_lo, *_hi) fall inside the input. */
                const int ki_lo = ih0 < 0 ? -ih0 : 0, ki_hi = H - ih0 < k ? H - ih0 : k;
                const int kj_lo = iw0 < 0 ? -iw0 : 0, kj_hi = W - iw0 < k ? W - iw0 : k;
                for (int c = 0; c < C; c++, src += plane)
                    for (int ki = 0; ki < k; ki++)
                        if (ki < ki_lo || ki >= ki_hi)
                            zero_floats((size_t)k, colT + c * k * k + ki * k);
                        else
                            gather_row(k, kj_lo, kj_hi, 1, src + ki * W + kj_lo,
                                       colT + c * k * k + ki * k);
            }
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

/* dst window += src, OH x OW, for col2im's stride-1 unpadded case. */
static inline __attribute__((always_inline)) void
add_window(int OH, int OW, int W, const float *restrict src, float *restrict dst)
{
    for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++)
            dst[oh * W + ow] += src[oh * OW + ow];
}

/* Plane c of m images += its k x k rows of col (stride 1, no padding); OW a
 * constant for LeNet's maps, as im2col_row_dense (2.7x fewer instructions).
 * Images innermost, so each row of col is read in order: image by image, the
 * k k reads of an image were 2 KiB apart and LeNet conv2's data gradient
 * took 1.44 ms against 1.22. */
CPU_HOT static void col2im_plane_dense(const conv2d_desc *d, int c, int m, const float *col,
                                       float *dx)
{
    const int k = d->k, H = d->in_h, W = d->in_w, OH = d->out_h, OW = d->out_w;
    const size_t P = (size_t)OH * OW, ld = P * m, in_size = (size_t)d->in_c * H * W;
    for (int ki = 0; ki < k; ki++)
        for (int kj = 0; kj < k; kj++)
            for (int i = 0; i < m; i++) {
                const float *src = col + (size_t)((c * k + ki) * k + kj) * ld + i * P;
                float *dst = dx + i * in_size + (size_t)c * H * W + (size_t)ki * W + kj;
                switch (OW) {
                case 4:
                    add_window(OH, 4, W, src, dst);
                    break;
                case 24:
                    add_window(OH, 24, W, src, dst);
                    break;
                default:
                    add_window(OH, OW, W, src, dst);
                }
            }
}

/* dx of m images = the sum of col's columns back onto the input planes they
 * came from. */
static void col2im(const conv2d_desc *d, int m, const float *col, float *dx)
{
    const int k = d->k, s = d->stride, H = d->in_h, W = d->in_w, OH = d->out_h, OW = d->out_w;
    const size_t P = (size_t)OH * OW, ld = P * m, in_size = (size_t)d->in_c * H * W;
    memset(dx, 0, in_size * m * sizeof(float));
    for (int c = 0; c < d->in_c; c++) {
        if (s == 1 && d->pad == 0) {
            col2im_plane_dense(d, c, m, col, dx);
            continue;
        }
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
static void chunk_gather(int m, int channels, size_t P, const float *t, float *g)
{
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
static void chunk_scatter(int m, int channels, size_t P, const float *g, const float *b,
                          float *t)
{
    for (int i = 0; i < m; i++)
        for (int o = 0; o < channels; o++)
            add_bias(P, b ? b[o] : 0.0f, g + (o * m + i) * P, t + ((size_t)i * channels + o) * P);
}

static void forward_slice(backend_ctx *ctx, const conv_args *a, size_t lo, size_t hi, int t)
{
    const conv2d_desc *d = a->d;
    const int ckk = d->in_c * d->k * d->k, oc = d->out_c, chunk = a->s.chunk;
    const size_t P = (size_t)d->out_h * d->out_w, in_size = (size_t)d->in_c * d->in_h * d->in_w;
    float *col = a->ws + a->s.chunk_floats * t;
    for (size_t i0 = lo; i0 < hi; i0 += chunk) {
        const int m = hi - i0 < (size_t)chunk ? (int)(hi - i0) : chunk;
        float *prod = col + (size_t)ckk * P * m;
        im2col(d, m, a->x + i0 * in_size, col);
        cpu_gemm(ctx, 0, 0, oc, (int)(P * m), ckk, 1.0f, a->w, ckk, col, (int)(P * m), 0.0f,
                 prod, (int)(P * m));
        chunk_scatter(m, oc, P, prod, a->b, a->y + i0 * oc * P);
    }
}

#if CONV_THIN
static void thin_forward_slice(backend_ctx *ctx, const conv_args *a, size_t lo, size_t hi,
                               int t)
{
    (void)ctx, (void)t;
    const conv2d_desc *d = a->d;
    const size_t out_size = (size_t)d->out_c * d->out_h * d->out_w;
    const size_t in_size = (size_t)d->in_c * d->in_h * d->in_w;
    for (size_t i = lo; i < hi; i++)
        conv_thin_forward_image(d, a->x + i * in_size, a->w, a->b, a->y + i * out_size);
}
#endif

void cpu_conv2d_forward(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                        const float *w, const float *b, float *y)
{
    if (conv_dnnl_forward(ctx, d, n, x, w, b, y) == 0 ||
        conv_winograd5_forward(ctx, d, n, x, w, b, y) == 0)
        return;
    conv_args a = {.d = d, .s = conv_split_make(ctx, d, n), .x = x, .w = w, .b = b, .y = y};
    conv_slice_fn fn = forward_slice;
#if CONV_THIN
    if (conv_thin_fits(d)) {
        fn = thin_forward_slice;
        a.s.chunk_floats = 0;
    }
#endif
    a.ws = backend_workspace(ctx, a.s.chunk_floats * a.s.threads);
    if (a.ws)
        conv_run(ctx, &a, n, fn);
}

static void backward_data_slice(backend_ctx *ctx, const conv_args *a, size_t lo, size_t hi,
                                int t)
{
    const conv2d_desc *d = a->d;
    const int ckk = d->in_c * d->k * d->k, oc = d->out_c, chunk = a->s.chunk;
    const size_t P = (size_t)d->out_h * d->out_w, in_size = (size_t)d->in_c * d->in_h * d->in_w;
    float *col = a->ws + a->s.chunk_floats * t;
    for (size_t i0 = lo; i0 < hi; i0 += chunk) {
        const int m = hi - i0 < (size_t)chunk ? (int)(hi - i0) : chunk;
        float *dyg = col + (size_t)ckk * P * m;
        chunk_gather(m, oc, P, a->dy + i0 * oc * P, dyg);
        cpu_gemm(ctx, 1, 0, ckk, (int)(P * m), oc, 1.0f, a->w, ckk, dyg, (int)(P * m), 0.0f, col,
                 (int)(P * m));
        col2im(d, m, col, a->dx + i0 * in_size);
    }
}

void cpu_conv2d_backward_data(backend_ctx *ctx, const conv2d_desc *d, int n, const float *dy,
                              const float *w, float *dx)
{
    if (conv_dnnl_backward_data(ctx, d, n, dy, w, dx) == 0 ||
        conv_winograd5_backward_data(ctx, d, n, dy, w, dx) == 0)
        return;
    conv_args a = {.d = d, .s = conv_split_make(ctx, d, n), .w = w, .dy = dy, .dx = dx};
    a.ws = backend_workspace(ctx, a.s.chunk_floats * a.s.threads);
    if (a.ws)
        conv_run(ctx, &a, n, backward_data_slice);
}

static size_t filter_grad_floats(const conv2d_desc *d)
{
    return (size_t)d->out_c * d->in_c * d->k * d->k + d->out_c;
}

/* Thread t's images' dw and db, summed into its own [dw | db] block after
 * the chunk scratches. */
static void backward_filter_slice(backend_ctx *ctx, const conv_args *a, size_t lo, size_t hi,
                                  int t)
{
    const conv2d_desc *d = a->d;
    const int ckk = d->in_c * d->k * d->k, oc = d->out_c, chunk = a->s.chunk;
    const size_t P = (size_t)d->out_h * d->out_w, in_size = (size_t)d->in_c * d->in_h * d->in_w;
    const size_t grad_floats = filter_grad_floats(d);
    float *col = a->ws + a->s.chunk_floats * t;
    float *gw = a->ws + a->s.chunk_floats * a->s.threads + grad_floats * t, *gb = gw + oc * ckk;
    memset(gw, 0, grad_floats * sizeof(float));
    for (size_t i0 = lo; i0 < hi; i0 += chunk) {
        const int m = hi - i0 < (size_t)chunk ? (int)(hi - i0) : chunk;
        float *dyg = col + (size_t)ckk * P * m;
        im2row(d, m, a->x + i0 * in_size, col);
        chunk_gather(m, oc, P, a->dy + i0 * oc * P, dyg);
        cpu_gemm(ctx, 0, 0, oc, ckk, (int)(P * m), 1.0f, dyg, (int)(P * m), col, ckk, 1.0f, gw,
                 ckk);
        /* The bias gradient from the gathered chunk, while it is in cache. */
        for (int o = 0; o < oc; o++)
            gb[o] += cpu_row_sum(P * m, dyg + o * P * m);
    }
}

#if CONV_THIN
/* conv_thin.c's filter gradient: image by image, bias from row sums. */
static void thin_filter_slice(backend_ctx *ctx, const conv_args *a, size_t lo, size_t hi, int t)
{
    (void)ctx;
    const conv2d_desc *d = a->d;
    const size_t P = (size_t)d->out_h * d->out_w, in_size = (size_t)d->in_c * d->in_h * d->in_w;
    const size_t grad_floats = filter_grad_floats(d);
    float *gw = a->ws + grad_floats * t, *gb = gw + grad_floats - d->out_c;
    memset(gw, 0, grad_floats * sizeof(float));
    for (size_t i = lo; i < hi; i++) {
        const float *dy = a->dy + i * d->out_c * P;
        conv_thin_filter_image(d, a->x + i * in_size, dy, gw);
        for (int o = 0; o < d->out_c; o++)
            gb[o] += cpu_row_sum(P, dy + o * P);
    }
}
#endif

/* Each thread sums its images' gradients into its own block; the blocks are
 * then added up in thread order (the same sums for the same thread count).
 * They are small (25,050 floats on LeNet's conv2): the team is not woken
 * again for them. */
void cpu_conv2d_backward_filter(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                                const float *dy, float *dw, float *db)
{
    if (conv_dnnl_backward_filter(ctx, d, n, x, dy, dw, db) == 0 ||
        conv_winograd5_backward_filter(ctx, d, n, x, dy, dw, db) == 0)
        return;
    conv_args a = {.d = d, .s = conv_split_make(ctx, d, n), .x = x, .dy = dy};
    conv_slice_fn fn = backward_filter_slice;
#if CONV_THIN
    if (conv_thin_fits(d)) {
        fn = thin_filter_slice;
        a.s.chunk_floats = 0;
    }
#endif
    const size_t grad_floats = filter_grad_floats(d), nw = grad_floats - d->out_c;
    a.ws = backend_workspace(ctx, (a.s.chunk_floats + grad_floats) * a.s.threads);
    if (!a.ws)
        return;
    conv_run(ctx, &a, n, fn);
    cpu_sum_thread_blocks(a.s.threads, a.ws + a.s.chunk_floats * a.s.threads, grad_floats, nw,
                          dw, (size_t)d->out_c, db);
}
