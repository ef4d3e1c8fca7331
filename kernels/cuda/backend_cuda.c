/* CUDA backend context (stream, cuBLAS and cuDNN handles, scratch), its
 * memory ops, and the ops table. The ops themselves live in the files named
 * in backend_cuda.h. */
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "cuda_check.h"
#include "device_cuda.h"

int backend_cuda_probe(int inject, int *count, int *cc, int max, int ver[2], char *text, size_t len)
{
    return cuda_probe(inject, count, cc, max, ver, text, len);
}

int backend_cuda_device_props(int device, char *name, size_t namelen, size_t *total_bytes)
{
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        (void)cudaGetLastError(); /* a question, not a failure to keep */
        return -1;
    }
    snprintf(name, namelen, "%s", prop.name);
    *total_bytes = prop.totalGlobalMem;
    return 0;
}

/* cudaMemGetInfo answers for the calling thread's current device, so the
 * question sets it first (the loop thread keeps no other device). */
int backend_cuda_mem(int device, size_t *free_bytes, size_t *total_bytes)
{
    if (cudaSetDevice(device) != cudaSuccess ||
        cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) {
        (void)cudaGetLastError(); /* a question, not a failure to keep */
        return -1;
    }
    return 0;
}

/* An allocation's failure: out of memory names the device and the bytes
 * asked for (what callers act on), anything else is reported as it is. */
static void *alloc_failed(backend_ctx *ctx, cudaError_t rc, const char *what, size_t bytes)
{
    (void)cudaGetLastError();
    ctx->device_fault |= cuda_error_sticky(rc);
    if (rc == cudaErrorMemoryAllocation)
        backend_fail(ctx, "cuda:%d: out of %s allocating %zu bytes (%s: %s)", ctx->device, what,
                     bytes, cudaGetErrorName(rc), cudaGetErrorString(rc));
    else
        backend_fail(ctx, "cuda:%d: allocating %zu bytes of %s: %s (%s)", ctx->device, bytes, what,
                     cudaGetErrorName(rc), cudaGetErrorString(rc));
    return NULL;
}

static void cuda_ctx_free(backend_ctx *ctx)
{
    cuda_impl *im = cuda_impl_of(ctx);
    if (!im)
        return;
    /* The handles and memory belong to the context's device, whichever
     * device this thread used since. Nothing is reported from here: the
     * context is going away. (ctx->workspace is backend.c's to free.) */
    (void)cudaSetDevice(ctx->device);
    if (im->stream)
        (void)cudaStreamSynchronize(im->stream);
    if (im->copy)
        (void)cudaStreamSynchronize(im->copy);
    for (int s = 0; s < BACKEND_STAGE_SLOTS; s++) {
        if (im->copied[s])
            (void)cudaEventDestroy(im->copied[s]);
        if (im->consumed[s])
            (void)cudaEventDestroy(im->consumed[s]);
    }
    conv_cache_free(im->convs);
    if (im->cudnn)
        (void)cudnnDestroy(im->cudnn);
    if (im->cublas)
        (void)cublasDestroy(im->cublas);
    (void)cudaFree(im->scratch);
    (void)cudaFreeHost(im->host);
    if (im->stream)
        (void)cudaStreamDestroy(im->stream);
    if (im->copy)
        (void)cudaStreamDestroy(im->copy);
    (void)cudaGetLastError();
    free(im);
    ctx->impl = NULL;
}

int backend_cuda_ctx_init(backend_ctx *ctx, int device, char *err, size_t errlen)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->ops = &backend_cuda_ops;
    ctx->device = device;
    ctx->threads = 1;
    cuda_impl *im = calloc(1, sizeof *im);
    if (!im) {
        snprintf(err, errlen, "cuda:%d: out of host memory for the context", device);
        return -1;
    }
    im->cublas_precision = -1;
    ctx->impl = im;
    /* Failures below land in ctx->err through the usual checks, then move
     * to the caller's buffer. */
    int ok = CUDA_OK(ctx, cudaSetDevice(device)) &&
             CUDA_OK(ctx, cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking)) &&
             CUBLAS_OK(ctx, cublasCreate(&im->cublas)) &&
             CUBLAS_OK(ctx, cublasSetStream(im->cublas, im->stream)) &&
             CUDNN_OK(ctx, cudnnCreate(&im->cudnn)) &&
             CUDNN_OK(ctx, cudnnSetStream(im->cudnn, im->stream)) &&
             CUDA_OK(ctx, cudaStreamCreateWithFlags(&im->copy, cudaStreamNonBlocking)) &&
             CUDA_OK(ctx, cudaMallocHost(&im->host, CUDA_HOST_BYTES));
    for (int s = 0; ok && s < BACKEND_STAGE_SLOTS; s++)
        ok = CUDA_OK(ctx, cudaEventCreateWithFlags(&im->copied[s], cudaEventDisableTiming)) &&
             CUDA_OK(ctx, cudaEventCreateWithFlags(&im->consumed[s], cudaEventDisableTiming));
    if (ok && !(im->convs = conv_cache_new())) {
        backend_fail(ctx, "cuda:%d: out of host memory for the convolution cache", device);
        ok = 0;
    }
    if (!ok) {
        snprintf(err, errlen, "%s", ctx->err);
        cuda_ctx_free(ctx);
        ctx->ops = NULL;
        return -1;
    }
    return 0;
}

cublasHandle_t cuda_cublas(backend_ctx *ctx)
{
    cuda_impl *im = cuda_impl_of(ctx);
    if (im->cublas_precision != (int)ctx->precision) {
        /* fp32: no TF32 (DEFAULT math uses tensor cores only at full fp32
         * precision). bf16: DEFAULT too, a new handle's mode, under which
         * cuda_gemm_op's explicit bf16 compute type takes effect; any other
         * single-precision call stays fp32. */
        cublasMath_t mode = ctx->precision == PRECISION_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                             : CUBLAS_DEFAULT_MATH;
        if (!CUBLAS_OK(ctx, cublasSetMathMode(im->cublas, mode)))
            return NULL;
        im->cublas_precision = (int)ctx->precision;
    }
    return im->cublas;
}

void *cuda_scratch(backend_ctx *ctx, size_t bytes)
{
    cuda_impl *im = cuda_impl_of(ctx);
    if (im->scratch && bytes <= im->scratch_bytes)
        return im->scratch;
    /* Grow by half again, so a run of slightly larger requests (cuDNN
     * workspaces of successive shapes) reallocates only a few times. The
     * old scratch goes once the ops queued on the stream are done with it:
     * cudaFree only "may perform implicit synchronization" (runtime API). */
    size_t want = bytes + bytes / 2;
    if (want < 1 << 20)
        want = 1 << 20;
    if (im->scratch && !CUDA_OK(ctx, cudaStreamSynchronize(im->stream)))
        return NULL;
    if (!CUDA_OK(ctx, cudaFree(im->scratch)))
        return NULL;
    im->scratch = NULL;
    im->scratch_bytes = 0;
    cudaError_t rc = cudaMalloc(&im->scratch, want);
    if (rc != cudaSuccess) {
        im->scratch = NULL;
        return alloc_failed(ctx, rc, "memory for scratch", want);
    }
    im->scratch_bytes = want;
    return im->scratch;
}

enum { SCRATCH_ALIGN = 256 };

static size_t scratch_round(size_t bytes)
{
    return (bytes + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
}

int cuda_scratch_parts(backend_ctx *ctx, int count, const size_t *bytes, void **parts)
{
    size_t total = 0;
    for (int i = 0; i < count; i++)
        total += scratch_round(bytes[i]);
    char *base = NULL;
    if (total && !(base = cuda_scratch(ctx, total)))
        return -1;
    size_t at = 0;
    for (int i = 0; i < count; i++) {
        parts[i] = bytes[i] ? base + at : NULL;
        at += scratch_round(bytes[i]);
    }
    return 0;
}

/* ---- memory ---- */

static void *cuda_alloc_op(backend_ctx *ctx, size_t bytes)
{
    void *p = NULL;
    /* cudaMalloc(0) succeeds with NULL, which callers read as failure. */
    cudaError_t rc = cudaMalloc(&p, bytes ? bytes : 1);
    return rc == cudaSuccess ? p : alloc_failed(ctx, rc, "memory", bytes);
}

/* Memory that queued ops still use (a kernel on the stream, a batch
 * staged on the copy stream) is not handed back early: cudaFree itself
 * only "may perform implicit synchronization" (runtime API docs). */
static void cuda_free_op(backend_ctx *ctx, void *p)
{
    cuda_impl *im = cuda_impl_of(ctx);
    CUDA_OK(ctx, cudaStreamSynchronize(im->stream));
    CUDA_OK(ctx, cudaStreamSynchronize(im->copy));
    CUDA_OK(ctx, cudaFree(p)); /* freed even after a failure: first error kept */
}

void cuda_zero_op(backend_ctx *ctx, void *p, size_t bytes)
{
    CUDA_OK(ctx, cudaMemsetAsync(p, 0, bytes, cuda_stream_of(ctx)));
}

/* With unified addressing the runtime tells host, device and peer pointers
 * apart, so one kind of copy serves every direction. Copies from pageable
 * host memory return once the bytes are staged; from pinned memory they are
 * truly asynchronous, so such a source must stay put until the next sync. */
static void cuda_copy_op(backend_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    CUDA_OK(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cuda_stream_of(ctx)));
}

static void cuda_download_op(backend_ctx *ctx, void *host_dst, const void *src, size_t bytes)
{
    cudaStream_t s = cuda_stream_of(ctx);
    if (CUDA_OK(ctx, cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDefault, s)))
        CUDA_OK(ctx, cudaStreamSynchronize(s));
}

static void *cuda_host_alloc_op(backend_ctx *ctx, size_t bytes)
{
    void *p = NULL;
    cudaError_t rc = cudaMallocHost(&p, bytes ? bytes : 1);
    return rc == cudaSuccess ? p : alloc_failed(ctx, rc, "pinned host memory", bytes);
}

/* A batch staged ahead may still be copying out of p: wait for the copy
 * stream first, failed context or not (the memory goes away either way). */
static void cuda_host_free_op(backend_ctx *ctx, void *p)
{
    (void)cudaStreamSynchronize(cuda_impl_of(ctx)->copy);
    CUDA_OK(ctx, cudaFreeHost(p));
}

static const void *cuda_stage_op(backend_ctx *ctx, void *staging, const void *host, size_t bytes)
{
    cuda_copy_op(ctx, staging, host, bytes);
    return staging;
}

/* Errors of kernels that failed while running surface here. The copy
 * stream is left alone: a batch staged ahead is waited for by its step
 * (backend_stage_wait, _done), not by the comm's syncs, which must not
 * hold an all-reduce or exchange back behind the next batch's upload. */
static void cuda_sync_op(backend_ctx *ctx)
{
    CUDA_OK(ctx, cudaStreamSynchronize(cuda_stream_of(ctx)));
}

/* ---- batches staged ahead: the copy stream and its events ---- */

static int slot_ok(backend_ctx *ctx, int slot)
{
    if (slot >= 0 && slot < BACKEND_STAGE_SLOTS)
        return 1;
    backend_fail(ctx, "cuda:%d: stage slot %d outside [0, %d)", ctx->device, slot,
                 BACKEND_STAGE_SLOTS);
    return 0;
}

/* Waiting on an event never recorded returns at once: a slot's first copy
 * waits for nothing. */
static const void *cuda_stage_async_op(backend_ctx *ctx, int slot, void *staging,
                                       const void *host, size_t bytes)
{
    cuda_impl *im = cuda_impl_of(ctx);
    if (!slot_ok(ctx, slot) ||
        !CUDA_OK(ctx, cudaStreamWaitEvent(im->copy, im->consumed[slot], 0)) ||
        !CUDA_OK(ctx, cudaMemcpyAsync(staging, host, bytes, cudaMemcpyDefault, im->copy)) ||
        !CUDA_OK(ctx, cudaEventRecord(im->copied[slot], im->copy)))
        return NULL;
    return staging;
}

static void cuda_stage_wait_op(backend_ctx *ctx, int slot)
{
    cuda_impl *im = cuda_impl_of(ctx);
    if (slot_ok(ctx, slot))
        CUDA_OK(ctx, cudaStreamWaitEvent(im->stream, im->copied[slot], 0));
}

/* By now the compute has waited for the copies (stage_wait), usually long
 * ago, so the host rarely waits here. */
static void cuda_stage_done_op(backend_ctx *ctx, int slot)
{
    cuda_impl *im = cuda_impl_of(ctx);
    if (slot_ok(ctx, slot) && CUDA_OK(ctx, cudaEventRecord(im->consumed[slot], im->stream)))
        CUDA_OK(ctx, cudaEventSynchronize(im->copied[slot]));
}

const backend_ops backend_cuda_ops = {
    .name = "cuda",
    .ctx_free = cuda_ctx_free,
    .alloc = cuda_alloc_op,
    .free = cuda_free_op,
    .zero = cuda_zero_op,
    .copy = cuda_copy_op,
    .upload = cuda_copy_op,
    .download = cuda_download_op,
    .host_alloc = cuda_host_alloc_op,
    .host_free = cuda_host_free_op,
    .stage = cuda_stage_op,
    .sync = cuda_sync_op,
    .stage_async = cuda_stage_async_op,
    .stage_wait = cuda_stage_wait_op,
    .stage_done = cuda_stage_done_op,
    /* backend_ops.def's ops every backend has, then the optional ones CUDA
     * has: BN + ReLU and the bf16 activations' (the fused passes stay NULL). */
#define BACKEND_OP(ret, name, params, args) .name = cuda_##name##_op,
#define BACKEND_OP_FUSED(ret, name, params, args)
#define BACKEND_OP_OPTIONAL(ret, name, params, args)
#define BACKEND_OP_TABLE(ret, name, params, args)
#include "backend_ops.def"
    .batchnorm_relu_forward_train = cuda_batchnorm_relu_forward_train_op,
    .batchnorm_relu_backward = cuda_batchnorm_relu_backward_op,
    .act_add = cuda_act_add_op,
    .act_from_f32 = cuda_act_from_f32_op,
};
