/* The seam itself (kernels/backend.c) on the CPU backend: memory ops round
 * trip, the workspace grows and keeps its lines, and errors are sticky: the
 * first is kept with its message, later ops are skipped, and backend_sync
 * reports it. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "testutil.h"

static void test_memory(void)
{
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 2);
    enum { N = 1000 };
    float *host = backend_host_alloc(&ctx, N * sizeof(float)), back[N];
    float *a = backend_alloc(&ctx, N * sizeof(float)), *b = backend_alloc(&ctx, N * sizeof(float));
    CHECK(host && a && b && (uintptr_t)a % 64 == 0, "allocations %p %p %p", (void *)host,
          (void *)a, (void *)b);
    test_fill_uniform(host, N, -1, 1);
    backend_upload(&ctx, a, host, N * sizeof(float));
    backend_copy(&ctx, b, a, N * sizeof(float));
    backend_download(&ctx, back, b, N * sizeof(float));
    CHECK(memcmp(back, host, sizeof back) == 0, "upload, copy, download change the bytes");
    backend_zero(&ctx, b + 10, 20 * sizeof(float));
    backend_download(&ctx, back, b, N * sizeof(float));
    int zeros = 0;
    for (int i = 0; i < N; i++)
        zeros += back[i] == 0.0f;
    CHECK(zeros == 20 && back[9] == host[9] && back[30] == host[30], "zero cleared %d floats",
          zeros);
    CHECK(backend_stage(&ctx, a, host, N * sizeof(float)) == host,
          "the CPU stages by handing the host pointer back");

    float *w = backend_workspace(&ctx, 100);
    CHECK(w && (uintptr_t)w % 64 == 0 && backend_workspace(&ctx, 10) == w,
          "a smaller workspace request moves the workspace");
    CHECK(backend_workspace(&ctx, 100000) && ctx.workspace_floats >= 100000 &&
              ctx.workspace_floats % 16 == 0,
          "workspace of %zu floats for 100000", ctx.workspace_floats);
    CHECK(backend_sync(&ctx) == 0 && !backend_failed(&ctx), "a sound context fails: %s", ctx.err);
    backend_free(&ctx, a);
    backend_free(&ctx, b);
    backend_host_free(&ctx, host);
    backend_ctx_free(&ctx);
}

static void test_sticky_error(void)
{
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    const int n = 3, classes = 7;
    float logits[21], dlogits[21], x[4] = {1, 2, 3, 4};
    test_fill_uniform(logits, 21, -1, 1);
    const int32_t labels[3] = {2, 12, 0};
    int correct = -1;
    float loss = softmax_xent(&ctx, n, classes, logits, labels, dlogits, &correct);
    CHECK(isnan(loss) && backend_failed(&ctx), "a label out of range gave loss %g", loss);
    CHECK(strstr(ctx.err, "label 12 of example 1 is outside [0, 7)"), "message \"%s\"", ctx.err);

    /* Everything after is skipped, and the first message stays. */
    vec_scale(&ctx, 4, 2.0f, x);
    CHECK(x[0] == 1 && x[3] == 4, "vec_scale ran on a failed context: %g", x[0]);
    CHECK(isnan(vec_dist2(&ctx, 4, x, x)), "vec_dist2 ran on a failed context");
    CHECK(backend_alloc(&ctx, 64) == NULL && backend_workspace(&ctx, 16) == NULL,
          "allocations on a failed context");
    const int32_t good[3] = {0, 1, 2};
    correct = -1;
    CHECK(isnan(softmax_xent(&ctx, n, classes, logits, good, NULL, &correct)) && correct == 0,
          "softmax_xent ran on a failed context");
    backend_fail(&ctx, "a later error");
    CHECK(strstr(ctx.err, "label 12") && backend_sync(&ctx) == -1,
          "after a second error: sync %d, message \"%s\"", backend_sync(&ctx), ctx.err);
    backend_ctx_free(&ctx);
    CHECK(!backend_failed(&ctx) && ctx.ops == NULL, "a freed context keeps its state");
    backend_ctx_free(&ctx); /* twice is harmless */
}

/* Without a device (or without CUDA in the build) a CUDA context is refused
 * with a message, not an abort. */
static void test_no_cuda(void)
{
    if (backend_cuda_devices() > 0)
        return;
    backend_ctx ctx;
    char err[256] = "";
    CHECK(backend_ctx_init_cuda(&ctx, 0, PRECISION_TF32, 0, err, sizeof err) == -1 && err[0],
          "a CUDA context without a device: \"%s\"", err);
}

int main(void)
{
    test_init("backend");
    test_memory();
    test_sticky_error();
    test_no_cuda();
    return test_main_end();
}
