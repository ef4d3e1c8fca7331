/* CPU backend context: thread count and scratch workspace. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_util.h"

void backend_ctx_init_cpu(backend_ctx *ctx, int threads)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->device = -1;
    ctx->threads = threads < 1 ? 1 : threads;
    /* oneDNN's GEMM sizes its team from the calling thread's OpenMP setting. */
    omp_set_num_threads(ctx->threads);
}

void backend_ctx_free(backend_ctx *ctx)
{
    conv_dnnl_free(ctx);
    free(ctx->workspace);
    ctx->workspace = NULL;
    ctx->workspace_floats = 0;
}

float *backend_workspace(backend_ctx *ctx, size_t floats)
{
    if (ctx->workspace && floats <= ctx->workspace_floats)
        return ctx->workspace;
    /* Whole 64-byte lines (at least one, so 0 floats still gets a pointer),
     * as aligned_alloc requires and vector loads like. */
    size_t bytes = (floats * sizeof(float) + 63) & ~(size_t)63;
    if (bytes == 0)
        bytes = 64;
    float *p = aligned_alloc(64, bytes);
    if (!p)
        return NULL;
    free(ctx->workspace);
    ctx->workspace = p;
    ctx->workspace_floats = bytes / sizeof(float);
    return p;
}
