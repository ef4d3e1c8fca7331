/* The CUDA backend's error path: failures of the runtime, cuBLAS and cuDNN
 * and a bad label become the context's sticky error, in the documented
 * form, with nothing printed; every later op on that context is skipped; and
 * other contexts on the same device and thread carry on unharmed.
 * Exits 77 (skipped) when there is no CUDA device. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "testutil.h"

static char err[256];

static void init(backend_ctx *ctx)
{
    if (backend_ctx_init_cuda(ctx, 0, PRECISION_FP32, 1, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
}

/* A context on which `what` failed, naming each of `needles`. */
static void check_failed(backend_ctx *ctx, const char *what, const char *const *needles)
{
    CHECK(backend_failed(ctx), "%s: the context has not failed", what);
    for (; *needles; needles++)
        CHECK(strstr(ctx->err, *needles) != NULL, "%s: \"%s\" not in \"%s\"", what, *needles,
              ctx->err);
    printf("  %s: %s\n", what, ctx->err);
}

/* An absurd allocation: NULL, the error names the device and the bytes;
 * later ops are skipped (the upload below never lands) and sync reports. */
static void check_out_of_memory(backend_ctx *witness)
{
    backend_ctx ctx;
    init(&ctx);
    enum { N = 64 };
    float zeros[N] = {0}, ones[N], got[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1.0f;
    float *p = backend_alloc(&ctx, N * sizeof(float));
    backend_upload(&ctx, p, zeros, sizeof zeros);
    CHECK(backend_sync(&ctx) == 0, "before the failure: %s", ctx.err);

    const size_t absurd = (size_t)1 << 50;
    CHECK(backend_alloc(&ctx, absurd) == NULL, "1 PiB allocated");
    check_failed(&ctx, "out of memory", (const char *const[]){"cuda:0", "1125899906842624",
                                                               "out of memory", NULL});
    char first[sizeof ctx.err];
    snprintf(first, sizeof first, "%s", ctx.err);
    backend_upload(&ctx, p, ones, sizeof ones);
    vec_scale(&ctx, N, 2.0f, p);
    CHECK(isnan(softmax_xent(&ctx, 1, 1, p, NULL, NULL, NULL)), "softmax_xent after failure");
    CHECK(backend_sync(&ctx) == -1, "sync after failure returns -1");
    CHECK(strcmp(ctx.err, first) == 0, "the first error sticks: now \"%s\"", ctx.err);
    /* Another context reads the buffer: still the zeros. */
    backend_download(witness, got, p, sizeof got);
    CHECK(!backend_failed(witness) && memcmp(got, zeros, sizeof got) == 0,
          "an op ran after the failure: %s", witness->err);
    backend_free(&ctx, p);
    backend_ctx_free(&ctx);
}

/* Labels 10 and -1 of 10 classes at examples 3 and 5: the first is named. */
static void check_bad_label(void)
{
    backend_ctx ctx;
    init(&ctx);
    enum { N = 8, C = 10 };
    float logits[N * C];
    int32_t labels[N] = {1, 2, 3, C, 4, -1, 5, 6};
    test_fill_uniform(logits, N * C, -1, 1);
    float *z = backend_alloc(&ctx, sizeof logits);
    int32_t *lab = backend_alloc(&ctx, sizeof labels);
    backend_upload(&ctx, z, logits, sizeof logits);
    backend_upload(&ctx, lab, labels, sizeof labels);
    int hits = -1;
    CHECK(isnan(softmax_xent(&ctx, N, C, z, lab, NULL, &hits)), "a bad label gives NaN");
    check_failed(&ctx, "bad label", (const char *const[]){"label 10 of example 3", NULL});
    CHECK(strcmp(ctx.err, "label 10 of example 3 is outside [0, 10)") == 0,
          "the CPU backend's message: \"%s\"", ctx.err);
    backend_free(&ctx, z);
    backend_free(&ctx, lab);
    backend_ctx_free(&ctx);
}

/* A library's failure, with its status name and the failing file. */
static void check_library_errors(void)
{
    backend_ctx ctx;
    float *p;

    /* cuBLAS: a leading dimension smaller than the rows it must hold. */
    init(&ctx);
    p = backend_alloc(&ctx, 1024 * sizeof(float));
    gemm(&ctx, 0, 0, 4, 4, 8, 1.0f, p, 2, p, 4, 0.0f, p + 512, 4);
    check_failed(&ctx, "cublas", (const char *const[]){"linear_cublas.c:", "cublasSgemm",
                                                        "CUBLAS_STATUS_INVALID_VALUE", NULL});
    backend_free(&ctx, p);
    backend_ctx_free(&ctx);

    /* cuDNN: a tensor of no channels. */
    init(&ctx);
    p = backend_alloc(&ctx, 1024 * sizeof(float));
    conv2d_desc d;
    conv2d_desc_init(&d, 0, 8, 8, 4, 3, 1, 1);
    conv2d_forward(&ctx, &d, 1, p, p, NULL, p);
    check_failed(&ctx, "cudnn", (const char *const[]){"conv_cudnn.c:", "CUDNN_STATUS_BAD_PARAM",
                                                       NULL});
    backend_free(&ctx, p);
    backend_ctx_free(&ctx);

    /* The runtime: freeing what was never allocated. */
    init(&ctx);
    int on_stack;
    backend_free(&ctx, &on_stack);
    check_failed(&ctx, "cuda runtime", (const char *const[]){"backend_cuda.c:", "cudaFree",
                                                              "cudaError", NULL});
    backend_ctx_free(&ctx);
}

int main(void)
{
    if (backend_cuda_devices() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    test_init("gpu_errors");
    backend_ctx witness;
    init(&witness);
    CHECK(backend_ctx_init_cuda(&(backend_ctx){0}, backend_cuda_devices(), PRECISION_FP32, 0, err,
                                sizeof err) == -1 && err[0],
          "a context on a device that is not there");
    printf("  no such device: %s\n", err);

    check_out_of_memory(&witness);
    check_bad_label();
    check_library_errors();

    /* The witness, on the same device and thread, still computes. */
    enum { N = 1000 };
    float x[N], got[N];
    test_fill_uniform(x, N, -1, 1);
    float *p = backend_alloc(&witness, sizeof x);
    backend_upload(&witness, p, x, sizeof x);
    vec_scale(&witness, N, 2.0f, p);
    backend_download(&witness, got, p, sizeof got);
    int same = 1;
    for (int i = 0; i < N; i++)
        same &= got[i] == 2.0f * x[i];
    CHECK(!backend_failed(&witness) && same, "the witness context: %s", witness.err);
    backend_free(&witness, p);
    backend_ctx_free(&witness);
    return test_main_end();
}
