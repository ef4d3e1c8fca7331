/* The CUDA vector ops, ReLU and dropout against the CPU backend (which the
 * unit tests check against float64). Each op starts from fresh random buffers
 * copied to both sides; afterwards every buffer, inputs included, must agree.
 * Tolerance |gpu - cpu| <= 1e-6 + 1e-6 |cpu|: both run the same per-element
 * functions without FMA contraction, so they should in fact agree bit for bit
 * (reported at the end); the slack only allows for a CPU loop that sums or
 * scales in another order. ReLU and the dropout masks must match exactly.
 * Exits 77 (skipped) when there is no CUDA device. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "device_cuda.h"
#include "testutil.h"
#include "vecops_cuda.h"

enum { NBUF = 6 };

static const double ATOL = 1e-6, RTOL = 1e-6;

/* Buffer j of an op lives on the host (cpu[j]) and on the device (gpu[j]). */
static size_t n;
static float *cpu[NBUF], *gpu[NBUF], *readback;
static backend_ctx ctx;
static char err[512];
static size_t compared, not_identical;

#define GPU_OK(call) CHECK((call) == 0, "%s", err)

/* Fresh random values in [-1, 1) in every buffer, the same on both sides. */
static void reset(void)
{
    for (int j = 0; j < NBUF; j++) {
        test_fill_uniform(cpu[j], n, -1.0, 1.0);
        GPU_OK(cuda_copy(gpu[j], cpu[j], n * sizeof(float), 0, err, sizeof err));
    }
}

/* Compare every buffer. In buffer `mask_of` (-1: none) a 0 must be a 0 on
 * both sides; returns how many of its GPU values are not 0. */
static size_t compare(const char *what, double atol, double rtol, int mask_of)
{
    size_t nonzero = 0;
    for (int j = 0; j < NBUF; j++) {
        GPU_OK(cuda_copy(readback, gpu[j], n * sizeof(float), 0, err, sizeof err));
        GPU_OK(cuda_stream_sync(0, err, sizeof err));
        size_t bad = 0, first_bad = 0;
        for (size_t i = 0; i < n; i++) {
            float g = readback[i], c = cpu[j][i];
            int ok = fabs((double)g - c) <= atol + rtol * fabs((double)c);
            if (j == mask_of) {
                ok = ok && (g == 0.0f) == (c == 0.0f);
                nonzero += g != 0.0f;
            }
            if (!ok && bad++ == 0)
                first_bad = i;
            not_identical += memcmp(&g, &c, sizeof g) != 0;
        }
        compared += n;
        CHECK(bad == 0, "%s n=%zu buffer %d: %zu elements differ, first [%zu] gpu %.9g cpu %.9g",
              what, n, j, bad, first_bad, (double)readback[first_bad], (double)cpu[j][first_bad]);
    }
    return nonzero;
}

static void check_vector_ops(void)
{
    float a = (float)test_uniform(-2, 2), b = (float)test_uniform(-2, 2);
    reset();
    vec_axpby(&ctx, n, a, cpu[0], b, cpu[1]);
    GPU_OK(cuda_vec_axpby(0, n, a, gpu[0], b, gpu[1], err, sizeof err));
    compare("vec_axpby", ATOL, RTOL, -1);

    reset();
    vec_scale(&ctx, n, a, cpu[0]);
    GPU_OK(cuda_vec_scale(0, n, a, gpu[0], err, sizeof err));
    compare("vec_scale", ATOL, RTOL, -1);

    /* k inputs in buffers 0..k-1; the output in the last buffer, then in place. */
    int k = 1 + (int)test_uniform(0, NBUF - 1);
    for (int in_place = 0; in_place < 2; in_place++) {
        int out = in_place ? (int)test_uniform(0, k) : NBUF - 1;
        const float *cpu_in[NBUF], *gpu_in[NBUF];
        for (int j = 0; j < k; j++) {
            cpu_in[j] = cpu[j];
            gpu_in[j] = gpu[j];
        }
        reset();
        vec_mean(&ctx, n, cpu_in, k, cpu[out]);
        GPU_OK(cuda_vec_mean(0, n, gpu_in, k, gpu[out], err, sizeof err));
        compare(in_place ? "vec_mean in place" : "vec_mean", ATOL, RTOL, -1);
    }
    CHECK(cuda_vec_mean(0, n, NULL, 0, gpu[0], err, sizeof err) == -1 && strlen(err) > 0,
          "vec_mean with no inputs must fail with a message");

    for (int nesterov = 0; nesterov < 2; nesterov++) {
        float lr = (float)test_uniform(0.01, 0.2), mu = (float)test_uniform(0.5, 0.99);
        float wd = (float)test_uniform(1e-5, 1e-2);
        reset();
        vec_sgd_momentum(&ctx, n, lr, mu, wd, nesterov, cpu[0], cpu[1], cpu[2]);
        GPU_OK(cuda_vec_sgd_momentum(0, n, lr, mu, wd, nesterov, gpu[0], gpu[1], gpu[2], err,
                                     sizeof err));
        compare(nesterov ? "vec_sgd_momentum nesterov" : "vec_sgd_momentum", ATOL, RTOL, -1);
    }

    float eta = (float)test_uniform(0.01, 0.2), mu = (float)test_uniform(0.5, 0.99);
    float lambda = (float)test_uniform(1e-4, 1e-2), gamma = (float)test_uniform(0.01, 1);
    float alpha = (float)test_uniform(0.5, 0.99), rho = (float)test_uniform(0.01, 1);
    reset();
    vec_parle_inner(&ctx, n, eta, mu, lambda, gamma, alpha, cpu[0], cpu[1], cpu[2], cpu[3],
                    cpu[4]);
    GPU_OK(cuda_vec_parle_inner(0, n, eta, mu, lambda, gamma, alpha, gpu[0], gpu[1], gpu[2],
                                gpu[3], gpu[4], err, sizeof err));
    compare("vec_parle_inner", ATOL, RTOL, -1);

    /* x in buffer 0, then x aliasing xhat in buffer 2. */
    for (int x = 0; x <= 2; x += 2) {
        reset();
        vec_parle_outer(&ctx, n, eta, mu, rho, cpu[x], cpu[1], cpu[2], cpu[3], cpu[4]);
        GPU_OK(cuda_vec_parle_outer(0, n, eta, mu, rho, gpu[x], gpu[1], gpu[2], gpu[3], gpu[4],
                                    err, sizeof err));
        compare(x ? "vec_parle_outer x = xhat" : "vec_parle_outer", ATOL, RTOL, -1);
    }

    reset();
    vec_elastic_step(&ctx, n, eta, mu, lambda, rho, cpu[0], cpu[1], cpu[2], cpu[3]);
    GPU_OK(cuda_vec_elastic_step(0, n, eta, mu, lambda, rho, gpu[0], gpu[1], gpu[2], gpu[3], err,
                                 sizeof err));
    compare("vec_elastic_step", ATOL, RTOL, -1);
}

static void check_activations(void)
{
    reset();
    relu_forward(&ctx, n, cpu[0], cpu[1]);
    GPU_OK(cuda_relu_forward(0, DTYPE_F32, n, gpu[0], gpu[1], err, sizeof err));
    compare("relu_forward", 0, 0, -1);

    /* dx in its own buffer, then in place over dy. */
    for (int dx = 2; dx >= 1; dx--) {
        reset();
        relu_backward(&ctx, n, cpu[0], cpu[1], cpu[dx]);
        GPU_OK(cuda_relu_backward(0, DTYPE_F32, n, gpu[0], gpu[1], gpu[dx], err, sizeof err));
        compare(dx == 1 ? "relu_backward in place" : "relu_backward", 0, 0, -1);
    }

    /* Inputs are never 0, so a 0 output means dropped: compare() then checks
     * the masks exactly. The counter starts just below a 2^32 boundary so the
     * Philox blocks of one call carry into the counter's high word. */
    float p = (float)test_uniform(0.05, 0.95);
    philox_key key = philox_make_key(test_seed(), (uint32_t)test_uniform(0, 64), RNG_STREAM_DROPOUT);
    uint64_t counter = ((uint64_t)(uint32_t)test_uniform(0, 4294967296.0) << 32) |
                       (0xFFFFFFF0u + (uint32_t)test_uniform(0, 16));
    reset();
    dropout_forward(&ctx, n, p, key, counter, cpu[0], cpu[1]);
    GPU_OK(cuda_dropout_forward(0, DTYPE_F32, n, p, key, counter, gpu[0], gpu[1], err, sizeof err));
    size_t kept = compare("dropout_forward", ATOL, RTOL, 1);
    if (n > 100000)
        CHECK(fabs((double)kept / (double)n - (1.0 - p)) < 0.01, "dropout keeps %zu of %zu, p %g",
              kept, n, (double)p);

    reset();
    dropout_backward(&ctx, n, p, key, counter, cpu[0], cpu[1]);
    GPU_OK(cuda_dropout_backward(0, DTYPE_F32, n, p, key, counter, gpu[0], gpu[1], err, sizeof err));
    compare("dropout_backward", ATOL, RTOL, 1);
}

int main(void)
{
    if (backend_cuda_devices() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    test_init("gpu_vecops");
    if (cuda_set_device(0, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    backend_ctx_init_cpu(&ctx, 2);

    /* Odd sizes leave partial Philox blocks; the two largest exceed one grid
     * of threads (vector ops, then dropout), so the grid-stride loops run. */
    const size_t sizes[] = {1, 3, 1000, 4099, (1u << 20) + 7, (1u << 22) + 5};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        n = sizes[s];
        int allocated = (readback = malloc(n * sizeof(float))) != NULL;
        for (int j = 0; j < NBUF; j++) {
            void *mem;
            allocated &= (cpu[j] = malloc(n * sizeof(float))) != NULL;
            allocated &= cuda_alloc(&mem, n * sizeof(float), err, sizeof err) == 0;
            gpu[j] = mem;
        }
        CHECK(allocated, "n=%zu: out of memory: %s", n, err);
        if (allocated) {
            check_vector_ops();
            check_activations();
        }
        for (int j = 0; j < NBUF; j++) {
            free(cpu[j]);
            cuda_free(gpu[j]);
        }
        free(readback);
    }
    printf("gpu_vecops: %zu of %zu values not bit-identical to the CPU\n", not_identical, compared);
    backend_ctx_free(&ctx);
    return test_main_end();
}
