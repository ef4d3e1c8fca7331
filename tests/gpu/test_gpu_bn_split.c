/* The split batch norm (kernels/cuda/batchnorm_split.cu) on the GPU against
 * its host replay (tests/unit/bn_split_replay.c), bit for bit: the saved
 * mean and inverse std, dgamma and dbeta are the replay's, and so are y and
 * dx computed on the host from them with the kernels' own expressions
 * (kernels/bn_split.h; bf16 results rounded by the GPU's own conversion).
 * The plans are ragged where it matters: a short last part over rows that
 * are not a multiple of 8 (17, 3, 999), hw = 1 over several parts (9000,
 * 2, 1), rows of 576 in parts of two images (128, 6, 576), and WRN-28-10's
 * 160-channel stage (128, 160, 1024); the first two take the value by value
 * path, the others the 16-byte loads. fp32 and bf16 activations, with and
 * without the fused ReLU. Inputs are drawn on a grid of 8 significant bits,
 * so that bf16 holds them exactly and both sides see the same values; the
 * mean sits far from 0. Exits 77 (skipped) when there is no CUDA device. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cuda.h"
#include "bn_split_replay.h"
#include "elementwise.h"
#include "testutil.h"

static backend_ctx gpu;

/* n values on a grid bf16 holds exactly: lo + m step, m in [0, 127]. */
static float *grid_values(size_t n, float lo, float step)
{
    float *v = malloc(n * sizeof(float));
    if (!v) {
        fprintf(stderr, "out of host memory for %zu values\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        v[i] = lo + step * (float)(int)test_uniform(0, 128);
    return v;
}

static void *dev_alloc(size_t bytes)
{
    void *p = backend_alloc(&gpu, bytes);
    if (!p) {
        fprintf(stderr, "%s\n", gpu.err);
        exit(1);
    }
    return p;
}

/* Host fp32 values as the context's activations (exact on the grid). */
static float *act_upload(const float *h, size_t n, float *f32)
{
    float *d = dev_alloc(n * sizeof(float));
    backend_upload(&gpu, gpu.act == DTYPE_BF16 ? f32 : d, h, n * sizeof(float));
    if (gpu.act == DTYPE_BF16)
        cuda_to_bf16(&gpu, n, f32, (uint16_t *)d);
    return d;
}

/* The context's activations at d as fp32 on the host. */
static void act_download(float *h, const float *d, size_t n, float *f32)
{
    if (gpu.act == DTYPE_BF16) {
        cuda_from_bf16(&gpu, n, (const uint16_t *)d, f32);
        d = f32;
    }
    backend_download(&gpu, h, d, n * sizeof(float));
}

/* What the kernels store of host results: the GPU's own rounding to bf16. */
static void act_round(float *h, size_t n, float *f32, float *scratch)
{
    if (gpu.act != DTYPE_BF16)
        return;
    backend_upload(&gpu, f32, h, n * sizeof(float));
    cuda_to_bf16(&gpu, n, f32, (uint16_t *)scratch);
    act_download(h, scratch, n, f32);
}

/* got == want bit for bit; prints the first difference. */
static void check_bits(const char *what, const float *got, const float *want, size_t n)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0 && bad++ == 0)
            first = i;
    CHECK(bad == 0, "%s: %zu of %zu differ, first [%zu] gpu %.9g replay %.9g", what, bad, n,
          first, bad ? (double)got[first] : 0.0, bad ? (double)want[first] : 0.0);
}

static void check_shape(int n, int c, int hw, int relu)
{
    const size_t count = (size_t)n * c * hw, cb = (size_t)c * sizeof(float);
    const float eps = 1e-5f;
    float *x = grid_values(count, 4.0f, 1.0f / 32), *dy = grid_values(count, -0.5f, 1.0f / 128);
    float *gamma = grid_values((size_t)c, 0.5f, 1.0f / 128);
    float *beta = grid_values((size_t)c, -0.5f, 1.0f / 128);
    float *out = malloc(count * sizeof(float)), *want = malloc(count * sizeof(float));
    float *st = malloc(4 * cb), *rs = malloc(2 * cb);
    bn_split_grad *grad = malloc((size_t)c * sizeof *grad);
    float *f32 = dev_alloc(count * sizeof(float)), *tmp = dev_alloc(count * sizeof(float));
    float *dx_d = act_upload(x, count, f32), *y_d = act_upload(x, count, f32);
    float *x_d = act_upload(x, count, f32), *dy_d = act_upload(dy, count, f32);
    float *p_d = dev_alloc(8 * cb);
    float *g_d = p_d, *b_d = p_d + c, *rm_d = p_d + 2 * c, *rv_d = p_d + 3 * c;
    float *m_d = p_d + 4 * c, *s_d = p_d + 5 * c, *dg_d = p_d + 6 * c, *db_d = p_d + 7 * c;
    backend_upload(&gpu, g_d, gamma, cb);
    backend_upload(&gpu, b_d, beta, cb);
    backend_zero(&gpu, rm_d, 2 * cb);
    char what[160];
    snprintf(what, sizeof what, "%s n=%d c=%d hw=%d relu %d",
             gpu.act == DTYPE_BF16 ? "bf16" : "fp32", n, c, hw, relu);
    if (relu)
        batchnorm_relu_forward_train(&gpu, n, c, hw, x_d, g_d, b_d, rm_d, rv_d, 0.1f, eps, y_d,
                                     m_d, s_d);
    else
        batchnorm_forward_train(&gpu, n, c, hw, x_d, g_d, b_d, rm_d, rv_d, 0.1f, eps, y_d, m_d,
                                s_d);
    backend_download(&gpu, st, m_d, 2 * cb); /* mean, invstd */
    CHECK(backend_sync(&gpu) == 0, "%s forward: %s", what, gpu.err);
    bn_replay_forward(x, n, c, hw, eps, rs, rs + c);
    char part[200];
    snprintf(part, sizeof part, "%s save_mean", what);
    check_bits(part, st, rs, (size_t)c);
    snprintf(part, sizeof part, "%s save_invstd", what);
    check_bits(part, st + c, rs + c, (size_t)c);
    /* y from the GPU's statistics with the kernel's expression. */
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < c; ch++) {
            const bn_split_affine f = bn_split_affine_of(gamma[ch], beta[ch], st[ch], st[c + ch]);
            for (int j = 0; j < hw; j++) {
                const size_t at = ((size_t)i * c + ch) * hw + j;
                const float v = fmaf(f.a, x[at], f.b);
                want[at] = relu ? relu_elem(v) : v;
            }
        }
    act_round(want, count, f32, tmp);
    act_download(out, y_d, count, f32);
    snprintf(part, sizeof part, "%s y", what);
    check_bits(part, out, want, count);

    if (relu)
        batchnorm_relu_backward(&gpu, n, c, hw, x_d, y_d, dy_d, g_d, b_d, m_d, s_d, dx_d, dg_d,
                                db_d);
    else
        batchnorm_backward(&gpu, n, c, hw, x_d, dy_d, g_d, m_d, s_d, dx_d, dg_d, db_d);
    backend_download(&gpu, st + 2 * c, dg_d, 2 * cb); /* dgamma, dbeta */
    CHECK(backend_sync(&gpu) == 0, "%s backward: %s", what, gpu.err);
    bn_replay_backward(x, dy, n, c, hw, gamma, beta, st, st + c, relu, grad);
    for (int ch = 0; ch < c; ch++) {
        rs[ch] = grad[ch].dgamma;
        rs[c + ch] = grad[ch].dbeta;
    }
    snprintf(part, sizeof part, "%s dgamma", what);
    check_bits(part, st + 2 * c, rs, (size_t)c);
    snprintf(part, sizeof part, "%s dbeta", what);
    check_bits(part, st + 3 * c, rs + c, (size_t)c);
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < c; ch++) {
            const bn_split_affine f =
                bn_split_affine_of(gamma[ch], relu ? beta[ch] : 0.0f, st[ch], st[c + ch]);
            const bn_split_grad *g = &grad[ch];
            for (int j = 0; j < hw; j++) {
                const size_t at = ((size_t)i * c + ch) * hw + j;
                want[at] = fmaf(g->k, bn_split_mask(&f, relu, x[at], dy[at]),
                                fmaf(g->a, x[at], g->b));
            }
        }
    act_round(want, count, f32, tmp);
    act_download(out, dx_d, count, f32);
    snprintf(part, sizeof part, "%s dx", what);
    check_bits(part, out, want, count);
    CHECK(backend_sync(&gpu) == 0, "%s: %s", what, gpu.err);
    printf("%s: checked\n", what);
    fflush(stdout);

    float *dev[] = {f32, tmp, dx_d, y_d, x_d, dy_d, p_d};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        backend_free(&gpu, dev[i]);
    free(x), free(dy), free(gamma), free(beta), free(out), free(want), free(st), free(rs);
    free(grad);
}

int main(void)
{
    if (backend_cuda_devices() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    test_init("gpu_bn_split");
    const int shapes[][3] = {{17, 3, 999}, {9000, 2, 1}, {128, 6, 576}, {128, 160, 1024},
                             {1, 3, 7}};
    const enum backend_precision precisions[] = {PRECISION_FP32, PRECISION_BF16};
    for (size_t p = 0; p < sizeof precisions / sizeof precisions[0]; p++) {
        char err[256];
        if (backend_ctx_init_cuda(&gpu, 0, precisions[p], 1, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        gpu.batchnorm_split = 1;
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int relu = 0; relu < 2; relu++)
                check_shape(shapes[i][0], shapes[i][1], shapes[i][2], relu);
        backend_ctx_free(&gpu);
    }
    return test_main_end();
}
