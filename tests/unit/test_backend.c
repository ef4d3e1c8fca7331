/* The seam itself (kernels/backend.c) on the CPU backend: memory ops round
 * trip, the workspace grows and keeps its lines, and errors are sticky: the
 * first is kept with its message, later ops are skipped, and backend_sync
 * reports it. Activations are fp32 on the CPU whatever the precision (bf16
 * only on a GPU), and batches staged ahead are the host's own pointers. */
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
    CHECK(!ctx.device_fault, "a label out of range is not a device fault");
    /* A device fault after another error: the device is gone all the same. */
    backend_fail_device(&ctx, "a device fault");
    CHECK(ctx.device_fault && strstr(ctx.err, "label 12"),
          "device_fault %d, message \"%s\"", ctx.device_fault, ctx.err);
    backend_ctx_free(&ctx);
    CHECK(!backend_failed(&ctx) && ctx.ops == NULL, "a freed context keeps its state");
    backend_ctx_free(&ctx); /* twice is harmless */

    backend_ctx_init_cpu(&ctx, 1);
    backend_fail_device(&ctx, "%s: %d", "first", 1);
    CHECK(backend_failed(&ctx) && ctx.device_fault && strcmp(ctx.err, "first: 1") == 0,
          "backend_fail_device: failed %d, device_fault %d, \"%s\"", backend_failed(&ctx),
          ctx.device_fault, ctx.err);
    backend_ctx_free(&ctx);
    CHECK(!ctx.device_fault, "a freed context keeps its device fault");
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

/* Which contexts store bf16 activations, plan contexts, and the act ops
 * of a CPU context: fp32 vector sums, no conversion, and a refusal (not a
 * wrong answer) if such a context were told its activations are bf16. */
static void test_activations(void)
{
    CHECK(backend_act_dtype(-1, PRECISION_BF16) == DTYPE_F32 &&
          backend_act_dtype(0, PRECISION_BF16) == DTYPE_BF16 &&
          backend_act_dtype(1, PRECISION_TF32) == DTYPE_F32 &&
          backend_act_dtype(0, PRECISION_FP32) == DTYPE_F32, "bf16 activations: GPU at bf16 only");
    backend_ctx plan;
    backend_ctx_plan(&plan, 0, PRECISION_BF16);
    CHECK(!plan.ops && plan.act == DTYPE_BF16 && backend_act_size(&plan) == 2 &&
          plan.device == 0 && plan.precision == PRECISION_BF16, "a bf16 GPU plan context");
    backend_ctx_plan(&plan, -1, PRECISION_BF16);
    CHECK(plan.act == DTYPE_F32 && backend_act_size(&plan) == 4, "a CPU plan at bf16 is fp32");

    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    CHECK(ctx.act == DTYPE_F32, "a CPU context has fp32 activations");
    enum { N = 1001 };
    float x[N], y[N], want[N], out[N];
    test_fill_uniform(x, N, -3, 3);
    test_fill_uniform(y, N, -3, 3);
    for (int i = 0; i < N; i++)
        want[i] = (float)((double)y[i] + (double)x[i]); /* one rounding, as float addition */
    act_add(&ctx, N, x, y);
    CHECK(memcmp(y, want, sizeof y) == 0, "act_add on fp32 activations is y + x");
    CHECK(act_from_f32(&ctx, N, x, out) == x, "fp32 activations are the staged batch itself");
    CHECK(!backend_failed(&ctx), "%s", ctx.err);

    ctx.act = DTYPE_BF16; /* what no CPU context has */
    act_add(&ctx, N, x, y);
    CHECK(backend_failed(&ctx) && strstr(ctx.err, "no bf16 activations"),
          "bf16 activations on the CPU are an error: \"%s\"", ctx.err);
    backend_ctx_free(&ctx);
}

/* On the CPU a batch staged ahead is a pointer hand-off, in any slot, and
 * waiting for or finishing a slot orders nothing and fails nothing. */
static void test_stage_ahead(void)
{
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    float host[2][7], staging[7];
    for (int s = 0; s < BACKEND_STAGE_SLOTS; s++) {
        CHECK(backend_stage_async(&ctx, s, staging, host[s % 2], sizeof host[0]) == host[s % 2],
              "slot %d: the host pointer itself", s);
        backend_stage_wait(&ctx, s);
        backend_stage_done(&ctx, s);
    }
    CHECK(!backend_failed(&ctx), "%s", ctx.err);
    backend_ctx_free(&ctx);
}

int main(void)
{
    test_init("backend");
    test_memory();
    test_sticky_error();
    test_no_cuda();
    test_activations();
    test_stage_ahead();
    return test_main_end();
}
