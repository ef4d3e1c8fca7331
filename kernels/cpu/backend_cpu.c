/* The CPU backend: context memory is host memory, so the copies are memcpy
 * and staging hands the host pointer straight back; the ops are the cpu_*
 * functions of this directory. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "cpu_util.h"
#include "parle_config.h"

#if PARLE_HAVE_DNNL
#include <dnnl.h>
#endif

/* Whole 256-byte blocks (at least one, so 0 bytes still gets a pointer),
 * as aligned_alloc requires, on 256-byte boundaries as cudaMalloc gives:
 * a model's aligned parameter tensors and arena buffers (MODEL_PARAM_ALIGN)
 * are then as aligned on the CPU as on a GPU. */
static void *cpu_alloc(backend_ctx *ctx, size_t bytes)
{
    size_t rounded = bytes ? (bytes + 255) & ~(size_t)255 : 256;
    void *p = rounded >= bytes ? aligned_alloc(256, rounded) : NULL;
    if (!p)
        backend_fail(ctx, "cpu: out of memory allocating %zu bytes", bytes);
    return p;
}

static void cpu_free(backend_ctx *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static void cpu_zero(backend_ctx *ctx, void *p, size_t bytes)
{
    (void)ctx;
    memset(p, 0, bytes);
}

static void cpu_copy(backend_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    memcpy(dst, src, bytes);
}

static const void *cpu_stage(backend_ctx *ctx, void *staging, const void *host, size_t bytes)
{
    (void)ctx, (void)staging, (void)bytes;
    return host;
}

static void cpu_sync(backend_ctx *ctx)
{
    (void)ctx; /* every op has finished when it returns */
}

static void cpu_ctx_free(backend_ctx *ctx)
{
    if (ctx->impl) {
        cpu_gemm_free(ctx->impl);
        conv_dnnl_free(ctx->impl);
    }
    free(ctx->impl);
    ctx->impl = NULL;
}

const backend_ops backend_cpu_ops = {
    .name = "cpu",
    .ctx_free = cpu_ctx_free,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .upload = cpu_copy,
    .download = cpu_copy,
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .stage = cpu_stage,
    .sync = cpu_sync,
    /* backend_ops.def's ops every backend has, then the optional ones the CPU has. */
#define BACKEND_OP(ret, name, params, args) .name = cpu_##name,
#define BACKEND_OP_FUSED(ret, name, params, args)
#define BACKEND_OP_OPTIONAL(ret, name, params, args)
#define BACKEND_OP_TABLE(ret, name, params, args)
#include "backend_ops.def"
    .batchnorm_relu_forward_train = cpu_batchnorm_relu_forward_train,
    .batchnorm_relu_backward = cpu_batchnorm_relu_backward,
    .fuses_bn_relu_maxpool = cpu_fuses_bn_relu_maxpool,
    .batchnorm_relu_maxpool_forward_train = cpu_batchnorm_relu_maxpool_forward_train,
    .batchnorm_relu_maxpool_backward = cpu_batchnorm_relu_maxpool_backward,
#if CONV_THIN
    .fuses_conv_filter_bn = cpu_fuses_conv_filter_bn,
    .conv2d_backward_filter_bn_relu_maxpool = cpu_conv2d_backward_filter_bn_relu_maxpool,
#endif
};

void backend_openmp_defaults(void)
{
    if (!getenv("OMP_WAIT_POLICY"))
        setenv("GOMP_SPINCOUNT", "1000", 0);
}

void backend_ctx_init_cpu(backend_ctx *ctx, int threads)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->ops = &backend_cpu_ops;
    ctx->device = -1;
    ctx->threads = threads < 1 ? 1 : threads;
    ctx->precision = PRECISION_FP32;
    if (!(ctx->impl = calloc(1, sizeof(cpu_impl))))
        backend_fail(ctx, "cpu: out of memory creating a context");
    else
        ((cpu_impl *)ctx->impl)->conv_winograd = 1;
    /* oneDNN's GEMM sizes its team from the calling thread's OpenMP setting. */
    omp_set_num_threads(ctx->threads);
}

/* bf16 only where oneDNN has native bf16 kernels (AVX512-BF16 or AMX): on
 * other CPUs it emulates bf16 on AVX-512 at below fp32's speed, so a job that
 * asked for bf16 to be faster would be slower and compute something else than
 * fp32 for nothing. That is an error the job reports at its start rather than
 * a silent fallback, so that a job's numerics never depend on the machine.
 * tf32 has no CPU counterpart: it runs as fp32 (the job default is tf32). */
int backend_ctx_set_precision_cpu(backend_ctx *ctx, enum backend_precision precision, char *err,
                                  size_t errlen)
{
    if (precision != PRECISION_BF16) {
        ctx->precision = PRECISION_FP32;
        return 0;
    }
#if PARLE_HAVE_DNNL
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    if ((isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16) {
        ctx->precision = PRECISION_BF16;
        return 0;
    }
    snprintf(err, errlen,
             "precision bf16 on the CPU needs AVX512-BF16, which this CPU lacks (oneDNN's ISA "
             "0x%x); use \"precision\": \"fp32\"", (unsigned)isa);
#else
    snprintf(err, errlen, "precision bf16 on the CPU needs oneDNN, and this build has none; use "
                          "\"precision\": \"fp32\"");
#endif
    return -1;
}
