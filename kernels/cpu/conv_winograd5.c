/* 5x5 stride-1 unpadded convolutions by Winograd F(4x4, 5x5): LeNet's conv2
 * (20 -> 50 channels, 8x8 maps to 4x4, one tile an image) and any other
 * whose output splits into 4x4 blocks, with 8 or more channels in (thinner
 * ones stay with conv_thin.c) and fewer than 32 in or out (wider ones go to
 * oneDNN first, conv_dnnl.c), on x86-64 with AVX-512VL.
 *
 * A 4x4 block of outputs reads an 8x8 window of each input map. The window
 * and each 5x5 filter are carried to 8x8 tiles (V = B^T d B, U = G g G^T),
 * multiplied point by point and summed over the input channels, and brought
 * back (y = A^T M A): 64 multiplications per (block, channel pair) instead of
 * 400. The data gradient runs the adjoint maps (dM = A dy A^T, then
 * dx = B (sum over outputs of U dM) B^T), and the filter gradient sums dM V
 * over the batch, then dw = G^T dU G. The matrices are Toom-Cook's for the
 * points 0, +-1, +-2, +-1/2 and infinity, derived in exact fractions; their
 * round-off costs about one decimal digit against direct summation
 * (tests/unit/test_conv_winograd.c bounds it). On LeNet's conv2 the three
 * directions take ~0.3x im2col + GEMM's time.
 *
 * Layout: each tile is 64 contiguous floats, so that the sums over channels
 * are 16-lane vector FMAs that need no gather or scatter (V[j][c], U[o][c],
 * M[j][o], j numbering the (image, block) pairs of a chunk). Every map here
 * gives the transpose of its textbook result (tile_map: P x^T P^T); U, V and
 * M are all transposed alike, and the map back transposes again. */
#include <string.h>

#include "cpu_util.h"

#if CONV_THIN /* x86-64 and GCC's intrinsics, as conv_thin.c */
#include <immintrin.h>

#define W5_TARGET __attribute__((target("avx2,fma,avx512f,avx512vl")))
#define INLINE static inline __attribute__((always_inline))

enum {
    TILE = 64,            /* floats in an 8x8 tile */
    CHUNK_BYTES = 256 << 10, /* a chunk's V and M tiles stay in L2 */
    BLOCK_R = 5,          /* tile_products' register block: 5 x 4 sums */
    BLOCK_S = 4,
    MIN_CHANNELS = 8,     /* thinner inputs (a first layer) stay direct */
};

/* Output transform A^T (4 x 8), filter transform G (8 x 5), input transform
 * B^T (8 x 8); the maps use them and their transposes. */
static const float AT[8][8] = {
    {1, 1, 1, 1, 1, 1, 1, 0},
    {0, 1, -1, 2, -2, 0.5f, -0.5f, 0},
    {0, 1, 1, 4, 4, 0.25f, 0.25f, 0},
    {0, 1, -1, 8, -8, 0.125f, -0.125f, 1},
};
static const float G[8][8] = {
    {-1, 0, 0, 0, 0},
    {-2.0f / 9, -2.0f / 9, -2.0f / 9, -2.0f / 9, -2.0f / 9},
    {-2.0f / 9, 2.0f / 9, -2.0f / 9, 2.0f / 9, -2.0f / 9},
    {1.0f / 90, 1.0f / 45, 2.0f / 45, 4.0f / 45, 8.0f / 45},
    {1.0f / 90, -1.0f / 45, 2.0f / 45, -4.0f / 45, 8.0f / 45},
    {32.0f / 45, 16.0f / 45, 8.0f / 45, 4.0f / 45, 2.0f / 45},
    {32.0f / 45, -16.0f / 45, 8.0f / 45, -4.0f / 45, 2.0f / 45},
    {0, 0, 0, 0, 1},
};
static const float BT[8][8] = {
    {-1, 0, 5.25f, 0, -5.25f, 0, 1, 0},
    {0, 1, 1, -4.25f, -4.25f, 1, 1, 0},
    {0, -1, 1, 4.25f, -4.25f, -1, 1, 0},
    {0, 0.5f, 0.25f, -2.5f, -1.25f, 2, 1, 0},
    {0, -0.5f, 0.25f, 2.5f, -1.25f, -2, 1, 0},
    {0, 2, 4, -2.5f, -5, 0.5f, 1, 0},
    {0, -2, 4, 2.5f, -5, -0.5f, 1, 0},
    {0, -1, 0, 5.25f, 0, -5.25f, 0, 1},
};

static int fits(const backend_ctx *ctx, const conv2d_desc *d, int n)
{
    return ((cpu_impl *)ctx->impl)->conv_winograd && n > 0 && d->k == 5 && d->stride == 1 &&
           d->pad == 0 && d->out_h % 4 == 0 && d->out_w % 4 == 0 && d->out_h > 0 &&
           d->out_w > 0 && d->in_c >= MIN_CHANNELS && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("fma");
}

W5_TARGET INLINE void transpose8(__m256 r[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* z = P x^T P^T for P m x k (p's top-left m x k, or its transpose when
 * trans), x k rows of which the first k lanes count; z's m rows have their
 * lanes past m zero. p, trans, m and k are constants at every call, so the
 * zero coefficients fold away. */
W5_TARGET INLINE void tile_map(const float (*p)[8], int trans, int m, int k, const __m256 *x,
                               __m256 *z)
{
    __m256 s[8];
#pragma GCC unroll 8
    for (int a = 0; a < 8; a++)
        s[a] = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int a = 0; a < m; a++) {
#pragma GCC unroll 8
        for (int i = 0; i < k; i++) {
            const float c = trans ? p[i][a] : p[a][i];
            if (c != 0.0f)
                s[a] = _mm256_fmadd_ps(_mm256_set1_ps(c), x[i], s[a]);
        }
    }
    transpose8(s); /* s[j]: column j of P x */
#pragma GCC unroll 8
    for (int a = 0; a < m; a++) {
        z[a] = _mm256_setzero_ps();
#pragma GCC unroll 8
        for (int j = 0; j < k; j++) {
            const float c = trans ? p[j][a] : p[a][j];
            if (c != 0.0f)
                z[a] = _mm256_fmadd_ps(_mm256_set1_ps(c), s[j], z[a]);
        }
    }
}

W5_TARGET INLINE void load_tile(const float *t, __m256 r[8])
{
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_loadu_ps(t + 8 * i);
}

W5_TARGET INLINE void store_tile(const __m256 r[8], float *t)
{
    for (int i = 0; i < 8; i++)
        _mm256_storeu_ps(t + 8 * i, r[i]);
}

/* An 8 x 8 window at x (rows W apart) to its tile V. */
W5_TARGET INLINE void input_tile(const float *x, int W, float *v)
{
    __m256 r[8], z[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_loadu_ps(x + (size_t)i * W);
    tile_map(BT, 0, 8, 8, r, z);
    store_tile(z, v);
}

/* A 4 x 4 block of dy (rows OW apart) to its tile dM. */
W5_TARGET INLINE void grad_tile(const float *dy, int OW, float *dm)
{
    __m256 r[8], z[8];
    for (int i = 0; i < 4; i++)
        r[i] = _mm256_maskz_loadu_ps(0x0F, dy + (size_t)i * OW);
    tile_map(AT, 1, 8, 4, r, z);
    store_tile(z, dm);
}

/* Every filter to its tile: u[o][c]. */
W5_TARGET static void filter_tiles(const conv2d_desc *d, const float *w, float *u)
{
    const size_t count = (size_t)d->out_c * d->in_c;
    for (size_t f = 0; f < count; f++) {
        __m256 r[8], z[8];
        for (int i = 0; i < 5; i++)
            r[i] = _mm256_maskz_loadu_ps(0x1F, w + f * 25 + i * 5);
        tile_map(G, 0, 8, 5, r, z);
        store_tile(z, u + f * TILE);
    }
}

/* The filter gradient's tiles du[o][c] back to 5x5 filters. */
W5_TARGET static void filters_from_tiles(const conv2d_desc *d, const float *du, float *dw)
{
    const size_t count = (size_t)d->out_c * d->in_c;
    for (size_t f = 0; f < count; f++) {
        __m256 r[8], z[8];
        load_tile(du + f * TILE, r);
        tile_map(G, 1, 5, 8, r, z);
        for (int a = 0; a < 5; a++)
            _mm256_mask_storeu_ps(dw + f * 25 + a * 5, 0x1F, z[a]);
    }
}

/* The sums of one BLOCK_S x BLOCK_R block for lanes [q, q + 16): see
 * tile_products. A short block repeats its first row or column and stores
 * only the real ones. */
W5_TARGET INLINE void product_block(int R, int S, int K, int r0, int s0, int q, const float *a,
                                    size_t ar, size_t ak, const float *b, size_t bs, size_t bk,
                                    float *c, size_t cs, size_t cr, int add)
{
    const float *ap[BLOCK_R], *bp[BLOCK_S];
    for (int i = 0; i < BLOCK_R; i++)
        ap[i] = a + ((size_t)(r0 + i < R ? r0 + i : r0) * ar) * TILE + q;
    for (int j = 0; j < BLOCK_S; j++)
        bp[j] = b + ((size_t)(s0 + j < S ? s0 + j : s0) * bs) * TILE + q;
    __m512 acc[BLOCK_S][BLOCK_R];
    for (int j = 0; j < BLOCK_S; j++)
        for (int i = 0; i < BLOCK_R; i++)
            acc[j][i] = _mm512_setzero_ps();
    for (size_t k = 0; k < (size_t)K; k++) {
        __m512 av[BLOCK_R], bv[BLOCK_S];
        for (int i = 0; i < BLOCK_R; i++)
            av[i] = _mm512_loadu_ps(ap[i] + k * ak * TILE);
        for (int j = 0; j < BLOCK_S; j++)
            bv[j] = _mm512_loadu_ps(bp[j] + k * bk * TILE);
        for (int j = 0; j < BLOCK_S; j++)
            for (int i = 0; i < BLOCK_R; i++)
                acc[j][i] = _mm512_fmadd_ps(av[i], bv[j], acc[j][i]);
    }
    for (int j = 0; j < BLOCK_S && s0 + j < S; j++)
        for (int i = 0; i < BLOCK_R && r0 + i < R; i++) {
            float *t = c + ((size_t)(s0 + j) * cs + (size_t)(r0 + i) * cr) * TILE + q;
            _mm512_storeu_ps(t, add ? _mm512_add_ps(_mm512_loadu_ps(t), acc[j][i]) : acc[j][i]);
        }
}

/* c[s][r] = (or += when add) the sum over k of a[r][k] * b[s][k], point by
 * point over tiles, where tile (r, k) of a starts at a + (r ar + k ak) TILE
 * floats, and likewise b's (strides bs, bk) and c's (cs, cr). */
W5_TARGET static void tile_products(int R, int S, int K, const float *a, size_t ar, size_t ak,
                                    const float *b, size_t bs, size_t bk, float *c, size_t cs,
                                    size_t cr, int add)
{
    for (int q = 0; q < TILE; q += 16)
        for (int s0 = 0; s0 < S; s0 += BLOCK_S)
            for (int r0 = 0; r0 < R; r0 += BLOCK_R)
                product_block(R, S, K, r0, s0, q, a, ar, ak, b, bs, bk, c, cs, cr, add);
}

/* One call's shapes: T blocks an image (tw across), chunks of J blocks. */
typedef struct wino_shape {
    int C, O, H, W, OH, OW, tw, T, J, threads;
    size_t in_size, out_size, chunk_floats;
} wino_shape;

static wino_shape shape_of(const backend_ctx *ctx, const conv2d_desc *d, int n)
{
    wino_shape s = {.C = d->in_c, .O = d->out_c, .H = d->in_h, .W = d->in_w, .OH = d->out_h,
                    .OW = d->out_w};
    s.tw = s.OW / 4;
    s.T = s.tw * (s.OH / 4);
    s.J = (int)(CHUNK_BYTES / ((size_t)(s.C + s.O) * TILE * sizeof(float))) & ~(BLOCK_S - 1);
    if (s.J < BLOCK_S)
        s.J = BLOCK_S;
    s.in_size = (size_t)s.C * s.H * s.W;
    s.out_size = (size_t)s.O * s.OH * s.OW;
    s.chunk_floats = (size_t)s.J * (s.C + s.O) * TILE;
    s.threads = cpu_batch_threads(ctx, n, (s.in_size + s.out_size) * n);
    return s;
}

/* Block b's top-left offset in a map `width` floats wide: its input window's
 * (width W) or its outputs' (width OW). */
static size_t block_origin(const wino_shape *s, size_t b, int width)
{
    return b / s->tw * 4 * width + b % s->tw * 4;
}

/* V[j][c] for blocks [j0, j0 + nj) of the batch. */
W5_TARGET static void input_tiles(const wino_shape *s, const float *x, size_t j0, int nj,
                                  float *v)
{
    for (int j = 0; j < nj; j++) {
        const size_t i = (j0 + j) / s->T;
        const float *win = x + i * s->in_size + block_origin(s, (j0 + j) % s->T, s->W);
        for (int c = 0; c < s->C; c++)
            input_tile(win + (size_t)c * s->H * s->W, s->W, v + ((size_t)j * s->C + c) * TILE);
    }
}

/* dM[j][o] for blocks [j0, j0 + nj) of the batch. */
W5_TARGET static void grad_tiles(const wino_shape *s, const float *dy, size_t j0, int nj,
                                 float *dm)
{
    for (int j = 0; j < nj; j++) {
        const size_t i = (j0 + j) / s->T;
        const float *blk = dy + i * s->out_size + block_origin(s, (j0 + j) % s->T, s->OW);
        for (int o = 0; o < s->O; o++)
            grad_tile(blk + (size_t)o * s->OH * s->OW, s->OW,
                      dm + ((size_t)j * s->O + o) * TILE);
    }
}

/* Blocks in the chunk from block j0: J, or fewer where the slice ends
 * (before image hi). */
static int next_chunk(const wino_shape *s, size_t hi, size_t j0)
{
    return hi * s->T - j0 < (size_t)s->J ? (int)(hi * s->T - j0) : s->J;
}

/* Images [lo, hi) of one direction that maps the filters' tiles u from `in`
 * to `out` (b: the forward's bias, or NULL), through one thread's scratch. */
typedef void (*filter_slice_fn)(const wino_shape *s, const float *u, const float *in,
                                const float *b, float *out, size_t lo, size_t hi,
                                float *scratch);

W5_TARGET static void forward_slice(const wino_shape *s, const float *u, const float *x,
                                    const float *b, float *y, size_t lo, size_t hi,
                                    float *scratch)
{
    float *v = scratch, *m = scratch + (size_t)s->J * s->C * TILE;
    for (size_t j0 = lo * s->T; j0 < hi * s->T; j0 += s->J) {
        const int nj = next_chunk(s, hi, j0);
        input_tiles(s, x, j0, nj, v);
        tile_products(s->O, nj, s->C, u, s->C, 1, v, s->C, 1, m, s->O, 1, 0);
        for (int j = 0; j < nj; j++) {
            const size_t i = (j0 + j) / s->T;
            float *out = y + i * s->out_size + block_origin(s, (j0 + j) % s->T, s->OW);
            for (int o = 0; o < s->O; o++) {
                __m256 r[8], z[8];
                load_tile(m + ((size_t)j * s->O + o) * TILE, r);
                tile_map(AT, 0, 4, 8, r, z);
                const __m256 bias = _mm256_set1_ps(b ? b[o] : 0.0f);
                for (int a = 0; a < 4; a++)
                    _mm256_mask_storeu_ps(out + (size_t)o * s->OH * s->OW + (size_t)a * s->OW,
                                          0x0F, _mm256_add_ps(z[a], bias));
            }
        }
    }
}

/* The data gradient (b unused). Windows overlap when an image has several
 * blocks, so dx is cleared and each window added in. */
W5_TARGET static void data_slice(const wino_shape *s, const float *u, const float *dy,
                                 const float *b, float *dx, size_t lo, size_t hi, float *scratch)
{
    (void)b;
    float *dv = scratch, *dm = scratch + (size_t)s->J * s->C * TILE;
    memset(dx + lo * s->in_size, 0, (hi - lo) * s->in_size * sizeof(float));
    for (size_t j0 = lo * s->T; j0 < hi * s->T; j0 += s->J) {
        const int nj = next_chunk(s, hi, j0);
        grad_tiles(s, dy, j0, nj, dm);
        tile_products(s->C, nj, s->O, u, 1, s->C, dm, s->O, 1, dv, s->C, 1, 0);
        for (int j = 0; j < nj; j++) {
            const size_t i = (j0 + j) / s->T;
            float *win = dx + i * s->in_size + block_origin(s, (j0 + j) % s->T, s->W);
            for (int c = 0; c < s->C; c++) {
                __m256 r[8], z[8];
                load_tile(dv + ((size_t)j * s->C + c) * TILE, r);
                tile_map(BT, 1, 8, 8, r, z);
                float *row = win + (size_t)c * s->H * s->W;
                for (int a = 0; a < 8; a++, row += s->W)
                    _mm256_storeu_ps(row, _mm256_add_ps(_mm256_loadu_ps(row), z[a]));
            }
        }
    }
}

/* Images [lo, hi) of the filter gradient, summed into du (tiles [o][c],
 * cleared here) and db (O floats). */
W5_TARGET static void filter_slice(const wino_shape *s, const float *x, const float *dy,
                                   float *du, float *db, size_t lo, size_t hi, float *scratch)
{
    float *v = scratch, *dm = scratch + (size_t)s->J * s->C * TILE;
    memset(du, 0, (size_t)s->O * s->C * TILE * sizeof(float));
    memset(db, 0, (size_t)s->O * sizeof(float));
    for (size_t j0 = lo * s->T; j0 < hi * s->T; j0 += s->J) {
        const int nj = next_chunk(s, hi, j0);
        input_tiles(s, x, j0, nj, v);
        grad_tiles(s, dy, j0, nj, dm);
        tile_products(s->O, s->C, nj, dm, 1, s->O, v, 1, s->C, du, 1, s->C, 1);
    }
    const size_t P = (size_t)s->OH * s->OW;
    for (size_t i = lo; i < hi; i++)
        for (int o = 0; o < s->O; o++)
            db[o] += cpu_row_sum(P, dy + i * s->out_size + o * P);
}

/* The forward or the data gradient: the filters' tiles once, then the
 * threads' image slices. */
static int run_with_filter_tiles(backend_ctx *ctx, const conv2d_desc *d, int n, const float *w,
                                 const float *in, const float *b, float *out, filter_slice_fn fn)
{
    if (!fits(ctx, d, n))
        return -1;
    const wino_shape s = shape_of(ctx, d, n);
    const size_t nu = (size_t)s.O * s.C * TILE;
    float *ws = backend_workspace(ctx, nu + s.chunk_floats * s.threads);
    if (!ws)
        return 0; /* the context has failed and says why */
    filter_tiles(d, w, ws);
#pragma omp parallel num_threads(s.threads) if (s.threads > 1)
    {
        size_t lo, hi;
        cpu_slice((size_t)n, &lo, &hi);
        fn(&s, ws, in, b, out, lo, hi, ws + nu + s.chunk_floats * omp_get_thread_num());
    }
    return 0;
}

int conv_winograd5_forward(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                           const float *w, const float *b, float *y)
{
    return run_with_filter_tiles(ctx, d, n, w, x, b, y, forward_slice);
}

int conv_winograd5_backward_data(backend_ctx *ctx, const conv2d_desc *d, int n, const float *dy,
                                 const float *w, float *dx)
{
    return run_with_filter_tiles(ctx, d, n, w, dy, NULL, dx, data_slice);
}

/* Each thread sums its images into its own dU and db; they are added up in
 * thread order, then dU maps back to 5x5 filters. */
int conv_winograd5_backward_filter(backend_ctx *ctx, const conv2d_desc *d, int n,
                                   const float *x, const float *dy, float *dw, float *db)
{
    if (!fits(ctx, d, n))
        return -1;
    const wino_shape s = shape_of(ctx, d, n);
    const size_t nu = (size_t)s.O * s.C * TILE, per_thread = s.chunk_floats + nu + s.O;
    float *ws = backend_workspace(ctx, per_thread * s.threads);
    if (!ws)
        return 0;
#pragma omp parallel num_threads(s.threads) if (s.threads > 1)
    {
        size_t lo, hi;
        cpu_slice((size_t)n, &lo, &hi);
        float *mine = ws + per_thread * omp_get_thread_num();
        filter_slice(&s, x, dy, mine + s.chunk_floats, mine + s.chunk_floats + nu, lo, hi, mine);
    }
    float *du = ws + s.chunk_floats;
    cpu_sum_thread_blocks(s.threads, du, per_thread, nu, du, (size_t)s.O, db);
    filters_from_tiles(d, du, dw);
    return 0;
}

#else

int conv_winograd5_forward(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                           const float *w, const float *b, float *y)
{
    (void)ctx, (void)d, (void)n, (void)x, (void)w, (void)b, (void)y;
    return -1;
}

int conv_winograd5_backward_data(backend_ctx *ctx, const conv2d_desc *d, int n, const float *dy,
                                 const float *w, float *dx)
{
    (void)ctx, (void)d, (void)n, (void)dy, (void)w, (void)dx;
    return -1;
}

int conv_winograd5_backward_filter(backend_ctx *ctx, const conv2d_desc *d, int n,
                                   const float *x, const float *dy, float *dw, float *db)
{
    (void)ctx, (void)d, (void)n, (void)x, (void)dy, (void)dw, (void)db;
    return -1;
}

#endif
