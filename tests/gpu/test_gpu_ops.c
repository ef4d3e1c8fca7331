/* Every op of the CUDA backend against the CPU backend (which the unit tests
 * check against float64), through backend.h on two contexts: fresh random
 * inputs are copied to both sides, the op runs on each, and every output
 * (and every buffer the op may touch) must agree. fp32 mode throughout,
 * except the default job setup (tf32, non-deterministic: GEMM, linear and
 * every convolution direction, check_default_setup) and the public GEMM at bf16
 * precision, whose operands stay fp32 (see check_bf16; the ops on bf16
 * activations are test_gpu_bf16's).
 *
 * Tolerances, |gpu - cpu| <= atol + rtol |cpu| with inputs in [-1, 1):
 *  - sums of `terms` products (GEMM, convolution, bias gradients) differ in
 *    summation order only: atol = 1e-6 per term, rtol 1e-5; an indexing
 *    mistake errs by the size of the values themselves (~ sqrt(terms) / 3);
 *  - pooling and the element-wise ops visit the same values in the same
 *    order as the CPU, without FMA contraction: max pooling and argmax
 *    exactly, the rest within 1e-6;
 *  - batch norm reduces in double on both sides but in other orders and
 *    with other variance formulas: 1e-4 on outputs (xhat amplifies the
 *    statistics' rounding by invstd), 1e-5 relative on the statistics; the
 *    split kernels (batchnorm_split) sum in fp32 within a block and in
 *    double across blocks, under the same bounds, and repeat bit for bit;
 *  - softmax cross-entropy works in double: loss 1e-6 relative, dlogits
 *    1e-7 + 1e-5 relative, hits exactly.
 * The checks live by op family: matrix products in gpu_ops_matrix.c, pooling
 * and batch norm in gpu_ops_pool_bn.c, softmax, the vector ops and memory
 * here; the contexts and tensors they share in gpu_ops_check.c.
 * Exits 77 (skipped) when there is no CUDA device. */
#include <stdlib.h>
#include <string.h>

#include "gpu_ops_check.h"
#include "testutil.h"

static void check_softmax(int n, int classes)
{
    buf z = make((size_t)n * classes, -4, 4), dz = make((size_t)n * classes, 0, 0);
    int32_t *lab_h, *lab_d = int_buf(n, &lab_h);
    for (int i = 0; i < n; i++)
        lab_h[i] = (int32_t)test_uniform(0, classes);
    backend_upload(&gpu, lab_d, lab_h, n * sizeof(int32_t));
    int hits_c = -1, hits_g = -2;
    const float lc = softmax_xent(&cpu, n, classes, z.h, lab_h, dz.h, &hits_c);
    const float lg = softmax_xent(&gpu, n, classes, z.d, lab_d, dz.d, &hits_g);
    char what[96];
    snprintf(what, sizeof what, "softmax_xent n=%d classes=%d dlogits", n, classes);
    CHECK(fabs((double)lg - lc) <= 1e-6 * fabs((double)lc), "%s: loss gpu %.9g cpu %.9g", what,
          (double)lg, (double)lc);
    CHECK(hits_g == hits_c, "%s: hits gpu %d cpu %d", what, hits_g, hits_c);
    compare(what, &dz, 1e-7, 1e-5);
    /* Loss alone: no dlogits, no hits. */
    const float lg2 = softmax_xent(&gpu, n, classes, z.d, lab_d, NULL, NULL);
    CHECK(fabs((double)lg2 - lc) <= 1e-6 * fabs((double)lc), "%s: loss alone gpu %.9g cpu %.9g",
          what, (double)lg2, (double)lc);
    free(lab_h);
    backend_free(&gpu, lab_d);
    drop(&z);
    drop(&dz);
}

enum { NVEC = 5 };

/* The vector ops, ReLU and dropout through the context (vecops.cu's kernels
 * have their own, closer test: test_gpu_vecops). */
static void check_vector_ops(size_t n)
{
    buf v[NVEC];
    char what[96];
#define RESET()                                   \
    for (int j = 0; j < NVEC; j++) {              \
        test_fill_uniform(v[j].h, n, -1, 1);      \
        backend_upload(&gpu, v[j].d, v[j].h, n * sizeof(float)); \
    }
#define COMPARE_ALL(name)                         \
    for (int j = 0; j < NVEC; j++) {              \
        snprintf(what, sizeof what, "%s n=%zu [%d]", (name), n, j); \
        compare(what, &v[j], 1e-6, 1e-6);         \
    }
    quiet = 1;
    for (int j = 0; j < NVEC; j++)
        v[j] = make(n, -1, 1);
    RESET();
    vec_axpby(&cpu, n, 0.3f, v[0].h, -1.2f, v[1].h);
    vec_axpby(&gpu, n, 0.3f, v[0].d, -1.2f, v[1].d);
    COMPARE_ALL("vec_axpby");
    vec_scale(&cpu, n, -0.7f, v[2].h);
    vec_scale(&gpu, n, -0.7f, v[2].d);
    COMPARE_ALL("vec_scale");
    const float *xs_c[3] = {v[0].h, v[1].h, v[2].h}, *xs_g[3] = {v[0].d, v[1].d, v[2].d};
    vec_mean(&cpu, n, xs_c, 3, v[1].h); /* out aliasing an input */
    vec_mean(&gpu, n, xs_g, 3, v[1].d);
    COMPARE_ALL("vec_mean");
    const double dc = vec_dist2(&cpu, n, v[0].h, v[3].h), dg = vec_dist2(&gpu, n, v[0].d, v[3].d);
    CHECK(fabs(dg - dc) <= 1e-10 * dc, "vec_dist2 n=%zu: gpu %.17g cpu %.17g", n, dg, dc);
    RESET();
    vec_sgd_momentum(&cpu, n, 0.1f, 0.9f, 5e-4f, 1, v[0].h, v[1].h, v[2].h);
    vec_sgd_momentum(&gpu, n, 0.1f, 0.9f, 5e-4f, 1, v[0].d, v[1].d, v[2].d);
    COMPARE_ALL("vec_sgd_momentum");
    vec_parle_inner(&cpu, n, 0.1f, 0.9f, 1e-3f, 0.03f, 0.75f, v[0].h, v[1].h, v[2].h, v[3].h,
                    v[4].h);
    vec_parle_inner(&gpu, n, 0.1f, 0.9f, 1e-3f, 0.03f, 0.75f, v[0].d, v[1].d, v[2].d, v[3].d,
                    v[4].d);
    COMPARE_ALL("vec_parle_inner");
    vec_parle_outer(&cpu, n, 0.1f, 0.9f, 0.5f, v[0].h, v[1].h, v[0].h, v[3].h, v[4].h);
    vec_parle_outer(&gpu, n, 0.1f, 0.9f, 0.5f, v[0].d, v[1].d, v[0].d, v[3].d, v[4].d);
    COMPARE_ALL("vec_parle_outer x = xhat");
    vec_elastic_step(&cpu, n, 0.1f, 0.9f, 1e-3f, 0.5f, v[0].h, v[1].h, v[2].h, v[3].h);
    vec_elastic_step(&gpu, n, 0.1f, 0.9f, 1e-3f, 0.5f, v[0].d, v[1].d, v[2].d, v[3].d);
    COMPARE_ALL("vec_elastic_step");
    relu_forward(&cpu, n, v[0].h, v[1].h);
    relu_forward(&gpu, n, v[0].d, v[1].d);
    relu_backward(&cpu, n, v[1].h, v[2].h, v[2].h);
    relu_backward(&gpu, n, v[1].d, v[2].d, v[2].d);
    COMPARE_ALL("relu");
    const philox_key key = philox_make_key(test_seed(), 3, RNG_STREAM_DROPOUT);
    dropout_forward(&cpu, n, 0.3f, key, 12345, v[0].h, v[3].h);
    dropout_forward(&gpu, n, 0.3f, key, 12345, v[0].d, v[3].d);
    dropout_backward(&cpu, n, 0.3f, key, 12345, v[1].h, v[4].h);
    dropout_backward(&gpu, n, 0.3f, key, 12345, v[1].d, v[4].d);
    COMPARE_ALL("dropout");
#undef RESET
#undef COMPARE_ALL
    quiet = 0;
    for (int j = 0; j < NVEC; j++)
        drop(&v[j]);
}

static void check_memory(void)
{
    const size_t n = 4099;
    buf a = make(n, -1, 1), b = make(n, 0, 0);
    backend_copy(&gpu, b.d, a.d, n * sizeof(float));
    memcpy(b.h, a.h, n * sizeof(float));
    compare("copy", &b, 0, 0);
    backend_zero(&gpu, b.d, 7 * sizeof(float));
    memset(b.h, 0, 7 * sizeof(float));
    compare("zero", &b, 0, 0);
    float *pinned = backend_host_alloc(&gpu, n * sizeof(float));
    CHECK(pinned != NULL, "host_alloc: %s", gpu.err);
    if (pinned) {
        test_fill_uniform(pinned, n, -1, 1);
        memcpy(a.h, pinned, n * sizeof(float));
        const void *staged = backend_stage(&gpu, a.d, pinned, n * sizeof(float));
        CHECK(staged == a.d, "stage returns the staging buffer");
        CHECK(backend_sync(&gpu) == 0, "sync: %s", gpu.err);
        compare("stage from pinned memory", &a, 0, 0);
        backend_host_free(&gpu, pinned);
    }
    drop(&a);
    drop(&b);
}

int main(void)
{
    if (backend_cuda_devices() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    test_init("gpu_ops");
    char err[256];
    if (backend_ctx_init_cuda(&gpu, 0, PRECISION_FP32, 1, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    backend_ctx_init_cpu(&cpu, 2);

    check_memory();
    check_gemm();
    check_linear();
    static const conv_case convs[] = {
        {"3x13x11->5 k3 s2 p1 n3", 3, 3, 13, 11, 5, 3, 2, 1, 1},
        {"lenet 1x28x28->6 k5", 4, 1, 28, 28, 6, 5, 1, 0, 1},
        {"lenet 6x12x12->16 k5", 4, 6, 12, 12, 16, 5, 1, 0, 1},
        {"wrn 16x32x32->160 k3 p1", 2, 16, 32, 32, 160, 3, 1, 1, 0},
        {"wrn 160x16x16->320 k3 s2 p1", 2, 160, 16, 16, 320, 3, 2, 1, 0},
        {"wrn shortcut 160x16x16->320 k1 s2", 2, 160, 16, 16, 320, 1, 2, 0, 0},
        {"1x1 image 7x1x1->3 k1", 5, 7, 1, 1, 3, 1, 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof convs / sizeof *convs; i++)
        check_conv(&convs[i]);
    check_default_setup();
    check_gemm_bf16();
    check_pool(2, 3, 7, 9, 3, 2, 1);  /* overlapping windows, padded */
    check_pool(2, 3, 8, 8, 2, 2, 0);  /* tiling */
    check_pool(1, 2, 9, 9, 3, 3, 0);  /* LeNet's */
    check_pool(2, 4, 11, 10, 3, 2, 0);
    check_pool(1, 3, 5, 6, 3, 1, 1);  /* every input under up to 9 windows */
    check_batchnorm(4, 7, 30);
    check_batchnorm(16, 4, 64);
    check_batchnorm(9, 13, 1);        /* 1-D, after a linear layer */
    check_batchnorm(1, 5, 1);         /* n hw = 1: variance 0 */
    check_batchnorm(1, 3, 7);
    check_batchnorm_empty(6, 10);
    check_batchnorm_relu(4, 7, 30);   /* the classic kernels, then ReLU */
    /* The split kernels (batchnorm_split): one part a channel, several
     * (hw dividing a part and not), hw = 1 in several parts, a short last
     * part over rows not a multiple of 8; their bits against the host
     * replay are test_gpu_bn_split's. */
    gpu.batchnorm_split = 1;
    printf("split batch norm:\n");
    const int split_shapes[][3] = {{4, 7, 30}, {9, 13, 1}, {1, 5, 1}, {1, 3, 7},
                                   {128, 16, 1024}, {64, 40, 64}, {50, 6, 49}, {4096, 3, 1},
                                   {17, 3, 999}, {9000, 2, 1}, {128, 6, 576}};
    for (size_t i = 0; i < sizeof split_shapes / sizeof *split_shapes; i++) {
        const int *s = split_shapes[i];
        check_batchnorm(s[0], s[1], s[2]);
        check_batchnorm_relu(s[0], s[1], s[2]);
    }
    check_batchnorm_empty(6, 10);
    check_batchnorm_repeats(128, 16, 1024, 0);
    check_batchnorm_repeats(128, 16, 1024, 1);
    check_batchnorm_repeats(4096, 3, 1, 1);
    gpu.batchnorm_split = 0;
    check_batchnorm_repeats(16, 4, 64, 1);
    check_softmax(7, 10);
    check_softmax(33, 100);
    check_softmax(3, 1000);
    const size_t sizes[] = {1, 1000, (1u << 20) + 4099};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        check_vector_ops(sizes[i]);

    CHECK(backend_sync(&gpu) == 0 && !backend_failed(&gpu), "context failed: %s", gpu.err);
    backend_ctx_free(&gpu);
    backend_ctx_free(&cpu);
    return test_main_end();
}
