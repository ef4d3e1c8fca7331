/* The CPU backend's ops, the entries of backend_cpu_ops (backend_cpu.c),
 * declared from backend_ops.def. Each has the meaning and arguments of its
 * namesake in backend.h; callers
 * outside kernels/cpu go through backend.h, which skips them once the
 * context has failed. */
#ifndef PARLE_CPU_OPS_H
#define PARLE_CPU_OPS_H

#include "backend.h"

/* ctx->impl of a CPU context: the oneDNN convolution primitives made so far,
 * one per (direction, shape, batch, threads, bias, precision, conv_winograd),
 * reused round-robin when full, and the engine and stream they run on,
 * created on first use. conv_winograd: 1 (the default) lets 3x3 stride-1
 * convolutions run as Winograd where oneDNN has it (conv_dnnl.c) and 5x5
 * ones as ours (conv_winograd5.c); 0 keeps them direct, for tests that
 * compare the two. */
#define CPU_CONV_PLANS 48
#define CPU_GEMM_BF16_PRIMS 8
struct conv_plan;
struct dnnl_engine;
struct dnnl_stream;
struct dnnl_primitive;
typedef struct cpu_impl {
    struct conv_plan *conv_plans[CPU_CONV_PLANS];
    int conv_plan_next;
    int conv_winograd;
    double conv_prim_s; /* seconds in the convolution primitives alone (bench) */
    struct dnnl_engine *dnnl_engine;
    struct dnnl_stream *dnnl_stream;
    /* gemm.c's bf16 matmuls (by transposes, C = or C +=), its bf16 A and B */
    struct dnnl_primitive *gemm_bf16[CPU_GEMM_BF16_PRIMS];
    uint16_t *gemm_buf;
    size_t gemm_buf_len;
} cpu_impl;

/* Creates impl's oneDNN engine and stream if not yet there: 0, or -1. */
int cpu_dnnl_ready(cpu_impl *impl);
/* Destroys gemm.c's primitives and buffer (before conv_dnnl_free). */
void cpu_gemm_free(cpu_impl *impl);

/* One cpu_<name> per entry of backend_ops.def, with its namesake's
 * meaning and arguments. The CPU has no act_add or act_from_f32 (fp32
 * activations only); cpu_fuses_conv_filter_bn and
 * cpu_conv2d_backward_filter_bn_relu_maxpool exist only where conv_thin.c
 * is built (x86-64): backend_cpu.c leaves them out elsewhere, and models
 * then store BN's dx. */
#define BACKEND_OP(ret, name, params, args) ret cpu_##name params;
#include "backend_ops.def"

#endif
