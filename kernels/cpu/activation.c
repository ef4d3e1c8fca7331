/* ReLU and inverted dropout, element-wise over elementwise.h. */
#include "cpu_ops.h"
#include "cpu_util.h"
#include "elementwise.h"

CPU_HOT static void relu_range(size_t count, const float *restrict x, float *restrict y)
{
    for (size_t i = 0; i < count; i++)
        y[i] = relu_elem(x[i]);
}

/* Not restrict: dx may alias dy, and each element is read before written. */
CPU_HOT static void relu_grad_range(size_t count, const float *y, const float *dy, float *dx)
{
    for (size_t i = 0; i < count; i++)
        dx[i] = relu_grad_elem(y[i], dy[i]);
}

void cpu_relu_forward(backend_ctx *ctx, size_t count, const float *x, float *y)
{
#pragma omp parallel num_threads(ctx->threads) if (count >= CPU_PARALLEL_MIN)
    {
        size_t lo, hi;
        cpu_slice(count, &lo, &hi);
        relu_range(hi - lo, x + lo, y + lo);
    }
}

void cpu_relu_backward(backend_ctx *ctx, size_t count, const float *y, const float *dy, float *dx)
{
#pragma omp parallel num_threads(ctx->threads) if (count >= CPU_PARALLEL_MIN)
    {
        size_t lo, hi;
        cpu_slice(count, &lo, &hi);
        relu_grad_range(hi - lo, y + lo, dy + lo, dx + lo);
    }
}

/* Philox blocks drawn side by side: the rounds run on DROPOUT_LANES
 * independent counters at once, which the compiler turns into vector
 * multiplies; with dropout_elem's branch-free mask the whole map vectorises
 * (3-4x faster than a block at a time with a branch per element). */
enum { DROPOUT_LANES = 8, DROPOUT_GROUP = 4 * DROPOUT_LANES };

/* out[e] = dropout_elem(in[e], u_e, p) for the DROPOUT_GROUP elements of
 * blocks counter + j, j < DROPOUT_LANES: element 4 j + w takes word w of
 * block j, as philox_uniform_at. */
CPU_HOT static void dropout_group(float p, philox_key key, uint64_t counter,
                                  const float *restrict in, float *restrict out)
{
    uint32_t c0[DROPOUT_LANES], c1[DROPOUT_LANES], c2[DROPOUT_LANES], c3[DROPOUT_LANES];
    for (int j = 0; j < DROPOUT_LANES; j++) {
        c0[j] = (uint32_t)(counter + (uint64_t)j);
        c1[j] = (uint32_t)((counter + (uint64_t)j) >> 32);
        c2[j] = c3[j] = 0;
    }
    for (int r = 0; r < 10; r++) {
        const uint32_t k0 = philox_key0(key, r), k1 = philox_key1(key, r);
        for (int j = 0; j < DROPOUT_LANES; j++)
            philox_round(&c0[j], &c1[j], &c2[j], &c3[j], k0, k1);
    }
    uint32_t bits[DROPOUT_GROUP];
    for (int j = 0; j < DROPOUT_LANES; j++) {
        bits[4 * j] = c0[j];
        bits[4 * j + 1] = c1[j];
        bits[4 * j + 2] = c2[j];
        bits[4 * j + 3] = c3[j];
    }
    for (int e = 0; e < DROPOUT_GROUP; e++)
        out[e] = dropout_elem(in[e], philox_uniform(bits[e]), p);
}

/* The map from element 0 of counter's block: whole groups, then element by
 * element. */
typedef void dropout_range_fn(size_t count, float p, philox_key key, uint64_t counter,
                              const float *in, float *out);
static void dropout_range(size_t count, float p, philox_key key, uint64_t counter,
                          const float *in, float *out)
{
    const size_t groups = count / DROPOUT_GROUP;
    for (size_t g = 0; g < groups; g++)
        dropout_group(p, key, counter + g * DROPOUT_LANES, in + g * DROPOUT_GROUP,
                      out + g * DROPOUT_GROUP);
    for (size_t i = groups * DROPOUT_GROUP; i < count; i++)
        out[i] = dropout_elem(in[i], philox_uniform_at(key, counter, i), p);
}

/* Threads split spans of DROPOUT_SPAN elements: 32 blocks, four portable
 * groups or four AVX-512 vectors of counters. */
enum { DROPOUT_SPAN = 128 };

#if defined(__x86_64__) && defined(__GNUC__)
#define DROPOUT_AVX512 1
/* AVX-512F by hand where the CPU has it, the same bits as dropout_group:
 * GCC vectorises that poorly at 512 bits (an avx512f clone ran slower than
 * the avx2 one), this runs 5x faster. */
#include <immintrin.h>

#define AVX512_TARGET __attribute__((target("avx512f")))

/* Counter vectors per span, 8 blocks each: their rounds interleaved give
 * enough independent multiplies to hide the latency (two ran 1.2x slower,
 * six or eight slower still, out of registers). */
enum { DROPOUT_SETS = DROPOUT_SPAN / (4 * 8) };

/* Philox's rounds on DROPOUT_SETS sets of 8 blocks, a block to a 64-bit
 * lane, its word w in the low half of that lane of c[set][w]: vpmuludq
 * gives the whole 32 x 32 -> 64-bit product of the low halves, a shift
 * brings its high word down, and the lanes' high halves are never read. */
AVX512_TARGET static inline void philox_rounds_x8(__m512i c[DROPOUT_SETS][4], philox_key key)
{
    const __m512i m0 = _mm512_set1_epi64(0xD2511F53u), m1 = _mm512_set1_epi64(0xCD9E8D57u);
    for (int r = 0; r < 10; r++) {
        const __m512i k0 = _mm512_set1_epi32((int)philox_key0(key, r));
        const __m512i k1 = _mm512_set1_epi32((int)philox_key1(key, r));
        for (int j = 0; j < DROPOUT_SETS; j++) {
            const __m512i p0 = _mm512_mul_epu32(c[j][0], m0), p1 = _mm512_mul_epu32(c[j][2], m1);
            /* 0x96: a ^ b ^ c */
            c[j][0] = _mm512_ternarylogic_epi32(_mm512_srli_epi64(p1, 32), c[j][1], k0, 0x96);
            c[j][2] = _mm512_ternarylogic_epi32(_mm512_srli_epi64(p0, 32), c[j][3], k1, 0x96);
            c[j][1] = p1;
            c[j][3] = p0;
        }
    }
}

/* dropout_range for count a multiple of DROPOUT_SPAN. Set j of a span
 * holds blocks 8 j + 4 h + k in lane 2 k + h, so that an unpack of words
 * 0 and 1 paired with words 2 and 3 gives blocks 8 j + 4 h .. 8 j + 4 h + 3
 * whole, in element order. */
AVX512_TARGET static void dropout_range_avx512(size_t count, float p, philox_key key,
                                               uint64_t counter, const float *in, float *out)
{
    const __m512i block_of_lane = _mm512_setr_epi64(0, 4, 1, 5, 2, 6, 3, 7);
    const __m512 pv = _mm512_set1_ps(p), one = _mm512_set1_ps(1.0f);
    const __m512 keep_div = _mm512_set1_ps(1.0f - p), unit = _mm512_set1_ps(1.0f / 16777216.0f);
    for (size_t s = 0; s < count / DROPOUT_SPAN; s++) {
        __m512i c[DROPOUT_SETS][4];
        for (int j = 0; j < DROPOUT_SETS; j++) {
            const __m512i blocks = _mm512_add_epi64(
                _mm512_set1_epi64((long long)(counter + 8 * (uint64_t)j)), block_of_lane);
            c[j][0] = blocks;
            c[j][1] = _mm512_srli_epi64(blocks, 32);
            c[j][2] = c[j][3] = _mm512_setzero_si512();
        }
        philox_rounds_x8(c, key);
        __m512i bits[2 * DROPOUT_SETS];
        for (int j = 0; j < DROPOUT_SETS; j++) {
            /* Words 1 and 3 up into the high halves of words 0 and 2. */
            const __m512i w01 = _mm512_mask_shuffle_epi32(c[j][0], 0xAAAA, c[j][1], _MM_PERM_CDAB);
            const __m512i w23 = _mm512_mask_shuffle_epi32(c[j][2], 0xAAAA, c[j][3], _MM_PERM_CDAB);
            bits[2 * j] = _mm512_unpacklo_epi64(w01, w23);
            bits[2 * j + 1] = _mm512_unpackhi_epi64(w01, w23);
        }
        for (int v = 0; v < 2 * DROPOUT_SETS; v++) {
            const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(bits[v], 8)), unit);
            const __m512 keep = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(u, pv, _CMP_GE_OQ), one);
            const __m512 x = _mm512_loadu_ps(in + 16 * v);
            _mm512_storeu_ps(out + 16 * v, _mm512_mul_ps(keep, _mm512_div_ps(x, keep_div)));
        }
        counter += DROPOUT_SPAN / 4;
        in += DROPOUT_SPAN;
        out += DROPOUT_SPAN;
    }
}
#else
#define DROPOUT_AVX512 0
#endif

/* out[i] = dropout_elem(in[i], philox_uniform_at(key, counter, i), p).
 * Forward and backward are the same map, so backward redraws the forward
 * mask. Threads split whole spans; the last partial span goes the portable
 * way. */
static void dropout_apply(backend_ctx *ctx, size_t count, float p, philox_key key,
                          uint64_t counter, const float *in, float *out)
{
    const size_t spans = count / DROPOUT_SPAN, done = spans * DROPOUT_SPAN;
    dropout_range_fn *range = dropout_range;
#if DROPOUT_AVX512
    if (__builtin_cpu_supports("avx512f"))
        range = dropout_range_avx512;
#endif
#pragma omp parallel num_threads(ctx->threads) if (count >= CPU_PARALLEL_MIN)
    {
        size_t lo, hi;
        cpu_slice(spans, &lo, &hi);
        range((hi - lo) * DROPOUT_SPAN, p, key, counter + lo * (DROPOUT_SPAN / 4),
              in + lo * DROPOUT_SPAN, out + lo * DROPOUT_SPAN);
    }
    dropout_range(count - done, p, key, counter + done / 4, in + done, out + done);
}

void cpu_dropout_forward(backend_ctx *ctx, size_t count, float p, philox_key key, uint64_t counter,
                         const float *x, float *y)
{
    dropout_apply(ctx, count, p, key, counter, x, y);
}

void cpu_dropout_backward(backend_ctx *ctx, size_t count, float p, philox_key key, uint64_t counter,
                          const float *dy, float *dx)
{
    dropout_apply(ctx, count, p, key, counter, dy, dx);
}
