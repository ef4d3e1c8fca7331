/* The table a backend fills in (darknet's "GPU twin behind a thin seam"):
 * kernels/backend.c's public functions skip the call once the context has
 * failed and otherwise forward to these. Private to kernels/. Each entry has
 * the meaning and arguments of its namesake in backend.h; the compute ops
 * come from their list, backend_ops.def. */
#ifndef PARLE_BACKEND_OPS_H
#define PARLE_BACKEND_OPS_H

#include "backend.h"

struct backend_ops {
    const char *name; /* "cpu", "cuda" */
    void (*ctx_free)(backend_ctx *ctx);

    /* Memory and streams, written here by hand: their public functions are
     * backend.h's backend_* ones, each with a rule of its own in backend.c
     * (releases never skipped, sync's return, optional stage_*). */
    void *(*alloc)(backend_ctx *ctx, size_t bytes);
    void (*free)(backend_ctx *ctx, void *p);
    void (*zero)(backend_ctx *ctx, void *p, size_t bytes);
    void (*copy)(backend_ctx *ctx, void *dst, const void *src, size_t bytes);
    void (*upload)(backend_ctx *ctx, void *dst, const void *host_src, size_t bytes);
    void (*download)(backend_ctx *ctx, void *host_dst, const void *src, size_t bytes);
    void *(*host_alloc)(backend_ctx *ctx, size_t bytes);
    void (*host_free)(backend_ctx *ctx, void *p);
    const void *(*stage)(backend_ctx *ctx, void *staging, const void *host, size_t bytes);
    void (*sync)(backend_ctx *ctx);
    /* Optional (NULL: one stream, nothing to order; stage_async is stage). */
    const void *(*stage_async)(backend_ctx *ctx, int slot, void *staging, const void *host,
                               size_t bytes);
    void (*stage_wait)(backend_ctx *ctx, int slot);
    void (*stage_done)(backend_ctx *ctx, int slot);

    /* The compute ops, one member per entry of backend_ops.def, with the
     * meaning and arguments of its public namesake (BACKEND_OP_TABLE's:
     * of backend.h's backend_fuses_* and act_from_f32). The _FUSED,
     * _OPTIONAL and _TABLE ones may be NULL (backend_ops.def). */
#define BACKEND_OP(ret, name, params, args) ret(*name) params;
#include "backend_ops.def"
};

/* The tables (backend_cpu.c; cuda/backend_cuda.c when built with CUDA). */
extern const backend_ops backend_cpu_ops;
extern const backend_ops backend_cuda_ops;

/* backend_cuda.c: fills ctx (ops, impl) for `device`; 0 or -1 with err. */
int backend_cuda_ctx_init(backend_ctx *ctx, int device, char *err, size_t errlen);
/* The driver's GPUs (cudaGetDeviceCount; `inject`, when not 0, stands for
 * its error), their compute capabilities and the runtime's and driver's CUDA
 * versions (driver 0: none loaded): 0, or the CUDA error with the driver's
 * message in text (cuda/device_cuda.h, cuda_probe). */
int backend_cuda_probe(int inject, int *count, int *cc, int max, int ver[2], char *text, size_t len);
int backend_cuda_device_props(int device, char *name, size_t namelen, size_t *total_bytes);
int backend_cuda_mem(int device, size_t *free_bytes, size_t *total_bytes);

#endif
