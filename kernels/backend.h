/* The compute backend seam (docs/architecture.md, "Backends").
 *
 * A replica owns one backend_ctx: the CPU (its math thread count) or one CUDA
 * device (its stream, library handles and workspace). Every op below takes
 * the context and dispatches through ctx->ops, so callers never ask which
 * backend they run on; the pointers an op takes live in the context's memory
 * (host memory for the CPU, device memory for CUDA) unless said otherwise.
 * Nothing here keeps process-global state, so one thread per replica is safe.
 * Tensors are NCHW, contiguous. Parameters, their gradients, statistics and
 * vectors are float32; activations (the x, y, dx, dy of the layer ops, the
 * logits and dlogits of softmax_xent) have the context's activation type
 * ctx->act: float32, or bf16 on a CUDA context at bf16 precision, where a
 * `float *` argument then points at bf16 elements (device memory the host
 * never reads). Backward functions overwrite (=) their outputs; they never
 * accumulate.
 *
 * Errors are sticky values, not prints or aborts: the first failure (a CUDA,
 * cuDNN or cuBLAS status, out of memory, a label out of range) is kept in
 * ctx->err as "file:line: call: STATUS_NAME (message)", every later op is
 * skipped, and the caller checks backend_failed() where it can stop cleanly. */
#ifndef PARLE_BACKEND_H
#define PARLE_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "philox.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fp32: IEEE float everywhere (no TF32), comparable with the CPU backend.
 * tf32: convolutions and GEMMs may use TF32 tensor cores (the GPU default).
 * bf16: on a GPU, activations are stored in bf16 and convolutions and GEMMs
 *       compute on bf16 with fp32 accumulation; weights, gradients, optimizer
 *       and coupling state and BN statistics stay fp32 (docs/gpu.md).
 * The CPU backend runs fp32 and tf32 as fp32; bf16 (backend_ctx_set_precision_cpu,
 * AVX512-BF16 only) converts at the op boundary of large convolutions and
 * GEMMs and stores everything fp32. */
enum backend_precision { PRECISION_FP32, PRECISION_TF32, PRECISION_BF16 };

/* The element type of a context's activations. */
enum backend_dtype { DTYPE_F32, DTYPE_BF16 };

typedef struct backend_ops backend_ops;

typedef struct backend_ctx {
    const backend_ops *ops;
    int device;          /* -1: CPU; >= 0: CUDA device id */
    int threads;         /* CPU math threads this replica may use */
    enum backend_precision precision;
    enum backend_dtype act; /* activations' type: backend_act_dtype(device, precision) */
    int deterministic;   /* CUDA: deterministic algorithms only */
    int time_algorithms; /* CUDA: convolution algorithms by timing, not heuristics
                            (kernels/cuda/conv_cudnn.c); set after init, before the
                            first op; ignored when deterministic;
                            backend_times_algorithms_by_default says
                            what a job gets unless it asks) */
    int batchnorm_split; /* CUDA: batch norm in training by the split kernels
                            (kernels/bn_split.h: several blocks a channel, the
                            ReLU after it fused), not one block a channel;
                            set after init, before the first op */
    void *impl;          /* the backend's own state (oneDNN primitives; CUDA stream, handles) */
    float *workspace;    /* in the context's memory, grown by backend_workspace() */
    size_t workspace_floats;
    int failed;          /* sticky: set by the first error, ops are skipped after it */
    /* Sticky for the whole process, not just this context: the error left the
     * device unusable (a CUDA illegal address, a kernel fault, an uncorrectable
     * ECC error...), so every later call of this process on it fails too, in
     * any context; only a new process gets a working device back (docs/gpu.md
     * "Sticky device faults"). Set with failed, by the backend where it turns
     * a status into the context's error, or by backend_fail_device. */
    int device_fault;
    char err[384];
} backend_ctx;

/* Call first in main(), before any OpenMP use: unless OMP_WAIT_POLICY or
 * GOMP_SPINCOUNT says otherwise, an idle OpenMP thread spins for 1000 polls
 * (microseconds) before it sleeps. The LeNet step at 2 threads on 2 cores
 * (bench/lenet_step, 3 interleaved rounds, 2026-11-23): idle, 5.8-6.5 ms
 * against 6.8-7.7 ms asleep at once (passive) and 5.4-6.1 spinning
 * (active); with a busy process on one of the cores, 12.6-12.8 ms against
 * 11.9-12.6 passive, 19.7 active, 18.1 libgomp's default, and 30 ms at
 * 30000 polls: a spinning team collapses when it shares a core, and a
 * daemon cannot know its machine stays idle. OMP_WAIT_POLICY=active is
 * for a user who knows. */
void backend_openmp_defaults(void);

/* A CPU context; `threads` >= 1. Sets the calling thread's OpenMP thread
 * count, so call it from the replica thread that will use it. */
void backend_ctx_init_cpu(backend_ctx *ctx, int threads);
/* A CPU context's precision: fp32 and tf32 run as fp32; bf16 (convolutions
 * and GEMMs on bf16 inputs, fp32 results, everything stored fp32) needs a CPU
 * with AVX512-BF16 and oneDNN. Returns 0, or -1 with a message. */
int backend_ctx_set_precision_cpu(backend_ctx *ctx, enum backend_precision precision, char *err,
                                  size_t errlen);
/* A CUDA context on `device`: makes it the calling thread's device, then
 * creates the stream, cuBLAS and cuDNN handles. Call it on the replica thread
 * that will use it, and use the context on that thread only: its ops run on
 * the thread's current device. Returns 0, or -1 with a message (also when the build has
 * no CUDA, or there is no such device). */
int backend_ctx_init_cuda(backend_ctx *ctx, int device, enum backend_precision precision,
                          int deterministic, char *err, size_t errlen);
void backend_ctx_free(backend_ctx *ctx);
/* The activation type of a context on `device` (-1: the CPU) at `precision`:
 * bf16 only on a GPU at PRECISION_BF16. */
static inline enum backend_dtype backend_act_dtype(int device, enum backend_precision precision)
{
    return device >= 0 && precision == PRECISION_BF16 ? DTYPE_BF16 : DTYPE_F32;
}
/* Whether convolution algorithms are timed by default at `precision` (a
 * job's `conv_algorithms: "auto"`, the bench's default). An H100 step at
 * batch 128 (bench/README.md, "Which convolution algorithms"): timing won at
 * tf32 (LeNet 1.24 -> 0.70 ms, WRN-28-10 45.2 -> 41.4) and lost at bf16
 * (All-CNN 5.38 -> 7.25, WRN-16-4 6.74 -> 10.15, WRN-28-10 26.5 -> 28.7). */
static inline int backend_times_algorithms_by_default(enum backend_precision precision)
{
    return precision != PRECISION_BF16;
}
/* A plan context: no ops and no memory, only the device, precision and
 * activation type that a real one would have, for sizing a model
 * (model_build) without the device. Nothing else may be called on it. */
void backend_ctx_plan(backend_ctx *ctx, int device, enum backend_precision precision);
static inline size_t backend_act_size(const backend_ctx *ctx)
{
    return ctx->act == DTYPE_BF16 ? 2 : sizeof(float);
}
/* CUDA devices present (0 without CUDA in the build, a driver or a device). */
int backend_cuda_devices(void);
/* The GPUs as the driver shows them, asked once per process (gpu_probe.c). */
#define BACKEND_MAX_GPUS 63
typedef struct {
    int built;          /* parle was built with CUDA */
    int count;          /* GPUs the driver shows; 0 when it cannot be asked */
    uint64_t unusable;  /* bit i: GPU i is below compute capability 8.0, for which
                         * the build has no code */
    int cc[BACKEND_MAX_GPUS]; /* compute capability, major * 10 + minor */
    char error[640];    /* "" or the driver's error and what to do about it */
    char brief[256];    /* the same in fewer words, for a refusal */
} backend_gpu_probe_t;
const backend_gpu_probe_t *backend_gpu_probe(void);
/* 1 and why in `why` when GPU `device` is shown but unusable; else 0. */
int backend_gpu_unusable(int device, char *why, size_t len);
/* Why the machine has no usable GPU (the driver's error in brief, no CUDA in
 * the build, GPUs too old), for a refusal; "" when nothing is amiss. */
void backend_gpu_why_none(char *buf, size_t len);
/* Name and total memory of CUDA device `device`: 0, or -1 if there is none. */
int backend_cuda_device_info(int device, char *name, size_t namelen, size_t *total_bytes);
/* Free and total memory of CUDA device `device` now (cudaMemGetInfo; the
 * device becomes the calling thread's current one): 0, or -1 if there is
 * none or it cannot tell. */
int backend_cuda_mem_info(int device, size_t *free_bytes, size_t *total_bytes);

static inline int backend_failed(const backend_ctx *ctx) { return ctx->failed; }
/* Record an error (the first one sticks). For backends and the layers above. */
void backend_fail(backend_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Record an error that leaves the device unusable for the process (as
 * backend_fail, and device_fault is set even if an earlier error is the one
 * kept). The CUDA backend classifies its statuses itself; tests inject one
 * through this on the CPU (PARLE_FAULT_REPLICA's `device` phase). */
void backend_fail_device(backend_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Forget the error of a context whose device stays usable (an allocation
 * refused, a library call's error status), so that its ops run again: 0; -1,
 * nothing changed, after a device fault. For a replica that is re-seeded
 * (algorithm.on_replica_failure). */
int backend_recover(backend_ctx *ctx);

/* Scratch of at least `floats` floats in the context's memory (NULL with the
 * sticky error set if out of memory). */
float *backend_workspace(backend_ctx *ctx, size_t floats);

/* ---- memory ----
 * backend_alloc gives memory of the context (device memory for CUDA), its
 * contents undefined; NULL with a sticky error naming the device and the bytes
 * asked for when there is none. Copies are ordered with the ops on the
 * context's stream; backend_download returns once the bytes are on the host.
 * backend_copy moves bytes within the context's memory, or from another
 * device's (a peer copy). */
void *backend_alloc(backend_ctx *ctx, size_t bytes);
void backend_free(backend_ctx *ctx, void *p);
void backend_zero(backend_ctx *ctx, void *p, size_t bytes);
void backend_copy(backend_ctx *ctx, void *dst, const void *src, size_t bytes);
/* Asynchronous from pinned memory (backend_host_alloc): keep host_src
 * unchanged until the next backend_sync or download. */
void backend_upload(backend_ctx *ctx, void *dst, const void *host_src, size_t bytes);
void backend_download(backend_ctx *ctx, void *host_dst, const void *src, size_t bytes);
/* Host buffers the device copies from and to at full speed (pinned for CUDA). */
void *backend_host_alloc(backend_ctx *ctx, size_t bytes);
void backend_host_free(backend_ctx *ctx, void *p);
/* `host` made readable by the context's ops: the CPU returns `host` itself;
 * CUDA uploads it into `staging` (context memory of >= bytes) and returns that
 * (asynchronously from pinned memory, as backend_upload). */
const void *backend_stage(backend_ctx *ctx, void *staging, const void *host, size_t bytes);
/* Wait until every op queued on the context has finished (batches staged
 * ahead aside: their steps wait for them). Returns 0, or -1 when the
 * context has failed (now or before). */
int backend_sync(backend_ctx *ctx);

/* ---- batches staged ahead (docs/gpu.md "Batches") ----
 * Step k+1's batch is staged while step k computes, into one of
 * BACKEND_STAGE_SLOTS slots used in turn. On CUDA the copies run on the
 * context's copy stream, ordered by events per slot; on the CPU staging
 * hands the host pointer over and the calls below order nothing. A slot's
 * round, in this order:
 *   backend_stage_async: the copy waits until the ops queued before the
 *     slot's previous backend_stage_done have run (they read the slot's
 *     previous batch), then runs beside the compute; returns what ops read,
 *     as backend_stage does. `host` (pinned) must stay unchanged until
 *     backend_stage_done.
 *   backend_stage_wait: ops queued from now on run after the slot's copies.
 *   backend_stage_done: the slot may be overwritten once the ops queued so
 *     far have run; returns once its copies have finished reading the host,
 *     so the host buffers may be refilled. */
enum { BACKEND_STAGE_SLOTS = 2 };
const void *backend_stage_async(backend_ctx *ctx, int slot, void *staging, const void *host,
                                size_t bytes);
void backend_stage_wait(backend_ctx *ctx, int slot);
void backend_stage_done(backend_ctx *ctx, int slot);

/* ---- 2-D convolution (square kernel, symmetric padding, cross-correlation) ---- */
typedef struct conv2d_desc {
    int in_c, in_h, in_w;
    int out_c, k, stride, pad;
    int out_h, out_w;    /* filled by conv2d_desc_init */
} conv2d_desc;
void conv2d_desc_init(conv2d_desc *d, int in_c, int in_h, int in_w, int out_c, int k, int stride,
                      int pad);

/* ---- pooling ---- */
typedef struct pool2d_desc {
    int c, in_h, in_w, k, stride, pad;
    int out_h, out_w;    /* filled by pool2d_desc_init (floor mode, as PyTorch) */
} pool2d_desc;
void pool2d_desc_init(pool2d_desc *d, int c, int in_h, int in_w, int k, int stride, int pad);

/* vec_mean's bound on its inputs. */
#define BACKEND_MEAN_MAX 128

/* ---- the compute ops ----
 * Declared from their one list, backend_ops.def, where each op's comment
 * says what it does: gemm, conv2d_*, maxpool2d_* and avgpool2d_*,
 * batchnorm_* (with the fused batchnorm_relu_* and batchnorm_relu_maxpool_*,
 * and conv2d_backward_filter_bn_relu_maxpool), relu_*, dropout_*,
 * linear_*, softmax_xent, act_add and the vec_* of optimizers and
 * couplings. Each `ret name(params);` below is one entry of that list; the
 * three after it have a signature of their own and are written here. */
#define BACKEND_OP(ret, name, params, args) ret name params;
#define BACKEND_OP_TABLE(ret, name, params, args)
#include "backend_ops.def"

/* Whether the backend fuses BN + ReLU + this max pooling
 * (batchnorm_relu_maxpool_forward_train and _backward, backend_ops.def). */
int backend_fuses_bn_relu_maxpool(const backend_ctx *ctx, const pool2d_desc *pd);
/* Whether the backend has conv2d_backward_filter_bn_relu_maxpool for this
 * convolution and pooling (backend_ops.def). */
int backend_fuses_conv_filter_bn(const backend_ctx *ctx, const conv2d_desc *cd,
                                 const pool2d_desc *pd);
/* n fp32 values (a staged batch) as activations: x itself when they are
 * fp32, else converted into `out` (n activations of context memory). */
const float *act_from_f32(backend_ctx *ctx, size_t n, const float *x, float *out);

#ifdef __cplusplus
}
#endif

#endif
