/* Stride-1 unpadded convolutions with thin filters (a first layer's: LeNet's
 * conv1 is 20 x 1 x 5 x 5) and out_w a multiple of 8, straight on the NCHW
 * maps, without im2col, the chunk gather or the scatter. As GEMMs over
 * im2col these are too thin for sgemm's blocking (K = 25 forward, M x N =
 * 20 x 25 for the filter gradient; 26 GFLOP/s). Rows of 8 outputs are AVX
 * vectors, and the sums for a block of outputs stay in registers: 20 to 24
 * of them, which takes AVX-512VL's 32 vector registers (at 256 bits). */
#include <immintrin.h>

#include "cpu_util.h"

#define THIN_TARGET __attribute__((target("avx2,fma,avx512f,avx512vl")))
#define INLINE static inline __attribute__((always_inline))

enum {
    FILTER_OUTS = 4,  /* filter gradient: outputs per block, k sums each */
    FORWARD_OUTS = 8, /* forward: outputs per block, up to 3 vectors each */
};

int conv_thin_fits(const conv2d_desc *d)
{
    return d->stride == 1 && d->pad == 0 && d->out_w % 8 == 0 && d->k <= 8 &&
           d->in_c * d->k * d->k <= 64 && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("fma");
}

THIN_TARGET static float hsum(__m256 v)
{
    float s[8];
    _mm256_storeu_ps(s, v);
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* y[o][oh][v0 .. v0 + 8 nv) for FORWARD_OUTS outputs from o0 (a short last
 * block repeats its first output and stores only the real ones), the k x k
 * taps of every channel each one broadcast weight times one x vector. */
THIN_TARGET INLINE void forward_block_row(int nv, const conv2d_desc *d, int o0, int oh, int v0,
                                          const float *x, const float *w, const float *b,
                                          float *y)
{
    const int k = d->k, W = d->in_w, kk = k * k, ckk = d->in_c * kk;
    const size_t P = (size_t)d->out_h * d->out_w, plane = (size_t)d->in_h * W;
    const float *wo[FORWARD_OUTS];
    __m256 acc[FORWARD_OUTS][3];
    for (int j = 0; j < FORWARD_OUTS; j++) {
        const int o = o0 + j < d->out_c ? o0 + j : o0;
        wo[j] = w + (size_t)o * ckk;
        for (int v = 0; v < nv; v++)
            acc[j][v] = _mm256_set1_ps(b ? b[o] : 0.0f);
    }
    for (int c = 0; c < d->in_c; c++)
        for (int ki = 0; ki < k; ki++) {
            const float *xr = x + c * plane + (size_t)(oh + ki) * W + v0;
            const int tap0 = c * kk + ki * k;
            for (int kj = 0; kj < k; kj++) {
                __m256 xv[3];
                for (int v = 0; v < nv; v++)
                    xv[v] = _mm256_loadu_ps(xr + kj + 8 * v);
                for (int j = 0; j < FORWARD_OUTS; j++) {
                    const __m256 wv = _mm256_set1_ps(wo[j][tap0 + kj]);
                    for (int v = 0; v < nv; v++)
                        acc[j][v] = _mm256_fmadd_ps(wv, xv[v], acc[j][v]);
                }
            }
        }
    for (int j = 0; j < FORWARD_OUTS && o0 + j < d->out_c; j++)
        for (int v = 0; v < nv; v++)
            _mm256_storeu_ps(y + (o0 + j) * P + (size_t)oh * d->out_w + v0 + 8 * v, acc[j][v]);
}

THIN_TARGET void conv_thin_forward_image(const conv2d_desc *d, const float *x, const float *w,
                                         const float *b, float *y)
{
    for (int o0 = 0; o0 < d->out_c; o0 += FORWARD_OUTS)
        for (int oh = 0; oh < d->out_h; oh++)
            for (int v0 = 0; v0 < d->out_w; v0 += 24)
                switch ((d->out_w - v0) / 8) {
                case 1: forward_block_row(1, d, o0, oh, v0, x, w, b, y); break;
                case 2: forward_block_row(2, d, o0, oh, v0, x, w, b, y); break;
                default: forward_block_row(3, d, o0, oh, v0, x, w, b, y);
                }
}

/* gw[j][kj] += sum over (oh, ow) of dy[j][oh][ow] xrow[oh][ow + kj]: one
 * filter row ki for FILTER_OUTS outputs, k sums each, every x load feeding
 * all the outputs (0.6x the GEMM's time with 2 outputs a block, 0.4x with 4). */
THIN_TARGET INLINE void filter_block_row(int k, int OH, int OW, int W, const float *const *dy,
                                         const float *xrow, float *const *gw)
{
    __m256 acc[FILTER_OUTS][8];
    for (int j = 0; j < FILTER_OUTS; j++)
        for (int kj = 0; kj < k; kj++)
            acc[j][kj] = _mm256_setzero_ps();
    for (int oh = 0; oh < OH; oh++, xrow += W)
        for (int v = 0; v < OW; v += 8) {
            __m256 dv[FILTER_OUTS];
            for (int j = 0; j < FILTER_OUTS; j++)
                dv[j] = _mm256_loadu_ps(dy[j] + oh * OW + v);
            for (int kj = 0; kj < k; kj++) {
                const __m256 xv = _mm256_loadu_ps(xrow + v + kj);
                for (int j = 0; j < FILTER_OUTS; j++)
                    acc[j][kj] = _mm256_fmadd_ps(dv[j], xv, acc[j][kj]);
            }
        }
    for (int j = 0; j < FILTER_OUTS; j++)
        for (int kj = 0; kj < k; kj++)
            gw[j][kj] += hsum(acc[j][kj]);
}

/* k a constant, so that the sums stay in registers. A short last block
 * repeats its first output, the repeats' sums going to a scratch row. */
THIN_TARGET INLINE void filter_image(int k, const conv2d_desc *d, const float *x, const float *dy,
                                     float *gw)
{
    const int OH = d->out_h, OW = d->out_w, W = d->in_w, kk = k * k;
    const size_t P = (size_t)OH * OW, plane = (size_t)d->in_h * W;
    float spare[8];
    for (int o = 0; o < d->out_c; o += FILTER_OUTS)
        for (int c = 0; c < d->in_c; c++)
            for (int ki = 0; ki < k; ki++) {
                const float *dys[FILTER_OUTS];
                float *gws[FILTER_OUTS];
                for (int j = 0; j < FILTER_OUTS; j++) {
                    const int real = o + j < d->out_c;
                    dys[j] = dy + (real ? o + j : o) * P;
                    gws[j] = real ? gw + ((size_t)(o + j) * d->in_c + c) * kk + ki * k : spare;
                }
                filter_block_row(k, OH, OW, W, dys, x + c * plane + (size_t)ki * W, gws);
            }
}

THIN_TARGET void conv_thin_filter_image(const conv2d_desc *d, const float *x, const float *dy,
                                        float *gw)
{
    switch (d->k) {
    case 3: filter_image(3, d, x, dy, gw); break;
    case 5: filter_image(5, d, x, dy, gw); break;
    default: filter_image(d->k, d, x, dy, gw);
    }
}
