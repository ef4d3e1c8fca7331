/* Large convolutions through oneDNN's convolution primitives.
 *
 * With 32 or more channels in and out, oneDNN's blocked-layout JIT
 * convolution (plus reorders from and to our plain NCHW / OIHW arrays) beats
 * im2col + GEMM; below that it does not, and conv.c keeps im2col.
 *
 * Which algorithm, by rule (deterministic, so a job computes the same on
 * every run): 3x3 stride-1 convolutions go through oneDNN's Winograd
 * F(4x4, 3x3) (jit_wino_4x3, AVX-512 only) wherever it accepts the shape,
 * the rest through its direct convolution. On this project's shapes (All-CNN
 * and WRN-16-4, batch 128, 64-256 channels, 8x8 to 32x32) Winograd took
 * 0.35-0.6x the direct primitive's time in each of the three directions, at
 * 1 and 2 threads, and 0.7-1.0x the bf16 direct one: so bf16 contexts use it
 * too, and bf16 only for what Winograd does not take (strided, 1x1). Its
 * error is ~2e-6 of the result's scale, direct's ~3e-7
 * (tests/unit/test_conv_winograd.c).
 * bf16 (ctx->precision): sources, weights and incoming gradients are
 * converted to bf16 by the reorders into oneDNN's layout, results come out
 * in fp32 (f32 accumulation), so our arrays stay fp32. A primitive
 * is built for the thread count it will run on, so each context keeps the
 * ones it made (cpu_impl, behind ctx->impl), keyed by (direction, shape,
 * batch, threads, bias, precision, Winograd allowed), and creates each once. Everything lives in the
 * context: replica threads never share.
 * The blocked copies and the scratchpad of a call live in the context's
 * workspace, so memory grows with the largest call, not with the plans. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_ops.h"
#include "cpu_util.h"
#include "parle_config.h"

#if PARLE_HAVE_DNNL
#include <dnnl.h>
#include <omp.h>

/* Winograd beats im2col from 16 channels on (WRN's 16 -> 64 at 32x32: 0.4x
 * its time); the direct primitive from 32. */
enum { DNNL_MIN_CHANNELS = 32, WINOGRAD_MIN_CHANNELS = 16, PLAN_MAX_ARGS = 4 };
enum conv_dir { CONV_FORWARD, CONV_BACKWARD_DATA, CONV_BACKWARD_FILTER };
enum tensor_kind { T_IMAGE_IN, T_FILTER, T_BIAS, T_IMAGE_OUT };

/* One execute argument: our plain array, and when the primitive wants
 * another layout, its own buffer and the reorder between the two. */
typedef struct plan_arg {
    int arg; /* DNNL_ARG_* */
    int is_output;
    dnnl_memory_t user;
    dnnl_memory_t inner;      /* NULL: the primitive takes `user` as it is */
    dnnl_primitive_t reorder; /* user -> inner for inputs, inner -> user for outputs */
    size_t inner_offset;      /* bytes into the workspace */
} plan_arg;

struct conv_plan {
    enum conv_dir dir;
    conv2d_desc d;
    int n, threads, bias;
    int winograd_ok, bf16; /* the context's choices it was made for */
    int winograd;          /* it runs Winograd */
    dnnl_primitive_t prim; /* NULL: oneDNN cannot do this one; im2col does */
    dnnl_memory_t scratch; /* NULL if the primitive needs none */
    size_t scratch_offset, work_bytes;
    int nargs;
    plan_arg args[PLAN_MAX_ARGS];
};

/* The arguments of each direction, in the order the callers pass pointers. */
typedef struct arg_spec {
    int arg;
    enum tensor_kind kind;
    int is_output;
} arg_spec;
static const arg_spec dir_args[3][PLAN_MAX_ARGS] = {
    [CONV_FORWARD] = {{DNNL_ARG_SRC, T_IMAGE_IN, 0}, {DNNL_ARG_WEIGHTS, T_FILTER, 0},
                      {DNNL_ARG_DST, T_IMAGE_OUT, 1}, {DNNL_ARG_BIAS, T_BIAS, 0}},
    [CONV_BACKWARD_DATA] = {{DNNL_ARG_DIFF_DST, T_IMAGE_OUT, 0}, {DNNL_ARG_WEIGHTS, T_FILTER, 0},
                            {DNNL_ARG_DIFF_SRC, T_IMAGE_IN, 1}},
    [CONV_BACKWARD_FILTER] = {{DNNL_ARG_SRC, T_IMAGE_IN, 0}, {DNNL_ARG_DIFF_DST, T_IMAGE_OUT, 0},
                              {DNNL_ARG_DIFF_WEIGHTS, T_FILTER, 1},
                              {DNNL_ARG_DIFF_BIAS, T_BIAS, 1}},
};

static void plan_destroy(struct conv_plan *p)
{
    for (int i = 0; i < p->nargs; i++) {
        dnnl_primitive_destroy(p->args[i].reorder);
        dnnl_memory_destroy(p->args[i].inner);
        dnnl_memory_destroy(p->args[i].user);
    }
    dnnl_memory_destroy(p->scratch);
    dnnl_primitive_destroy(p->prim);
    free(p);
}

void conv_dnnl_free(cpu_impl *impl)
{
    for (int i = 0; i < CPU_CONV_PLANS; i++) {
        if (impl->conv_plans[i])
            plan_destroy(impl->conv_plans[i]);
        impl->conv_plans[i] = NULL;
    }
    dnnl_stream_destroy(impl->dnnl_stream);
    dnnl_engine_destroy(impl->dnnl_engine);
    impl->dnnl_stream = NULL;
    impl->dnnl_engine = NULL;
}

/* plain: our NCHW / OIHW layout; else whichever the primitive likes. */
static int md_init(dnnl_memory_desc_t *md, const conv2d_desc *d, int n, enum tensor_kind kind,
                   int plain, dnnl_data_type_t dt)
{
    dnnl_format_tag_t tag = !plain ? dnnl_format_tag_any : kind == T_FILTER ? dnnl_oihw : dnnl_nchw;
    dnnl_dims_t dims;
    int ndims = 4;
    switch (kind) {
    case T_IMAGE_IN:
        dims[0] = n, dims[1] = d->in_c, dims[2] = d->in_h, dims[3] = d->in_w;
        break;
    case T_FILTER:
        dims[0] = d->out_c, dims[1] = d->in_c, dims[2] = d->k, dims[3] = d->k;
        break;
    case T_BIAS:
        dims[0] = d->out_c, ndims = 1;
        tag = dnnl_x; /* its only layout */
        break;
    case T_IMAGE_OUT:
        dims[0] = n, dims[1] = d->out_c, dims[2] = d->out_h, dims[3] = d->out_w;
        break;
    }
    return dnnl_memory_desc_init_by_tag(md, ndims, dims, dt, tag) == dnnl_success ? 0 : -1;
}

/* The primitive descriptor of direction p->dir with p->winograd's algorithm,
 * NULL if oneDNN has none; backward ones need the forward one as a hint. */
static dnnl_primitive_desc_t make_pd(dnnl_engine_t engine, const struct conv_plan *p)
{
    const conv2d_desc *d = &p->d;
    /* The forward's types: its source and weights are what the backward
     * directions take in, its result is f32. */
    const dnnl_data_type_t in = p->bf16 && !p->winograd ? dnnl_bf16 : dnnl_f32;
    const dnnl_alg_kind_t alg = p->winograd ? dnnl_convolution_winograd : dnnl_convolution_direct;
    dnnl_memory_desc_t src, w, b, dst, dsrc, dw, ddst;
    if (md_init(&src, d, p->n, T_IMAGE_IN, 0, in) || md_init(&w, d, p->n, T_FILTER, 0, in) ||
        md_init(&b, d, p->n, T_BIAS, 0, dnnl_f32) ||
        md_init(&dst, d, p->n, T_IMAGE_OUT, 0, dnnl_f32) ||
        md_init(&dsrc, d, p->n, T_IMAGE_IN, 0, dnnl_f32) ||
        md_init(&dw, d, p->n, T_FILTER, 0, dnnl_f32) ||
        md_init(&ddst, d, p->n, T_IMAGE_OUT, 0, in))
        return NULL;
    const dnnl_dims_t strides = {d->stride, d->stride}, pad = {d->pad, d->pad};
    const dnnl_memory_desc_t *bias = p->bias ? &b : NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t fwd = NULL, pd = NULL;
    dnnl_convolution_desc_t cd;
    /* The scratchpad in our workspace, not in oneDNN's per-thread buffer. */
    if (dnnl_primitive_attr_create(&attr) != dnnl_success ||
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) != dnnl_success)
        goto done;
    if (dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, alg, &src, &w, bias, &dst,
                                           strides, pad, pad) != dnnl_success ||
        dnnl_primitive_desc_create(&fwd, &cd, attr, engine, NULL) != dnnl_success)
        goto done;
    if (p->dir == CONV_FORWARD) {
        pd = fwd, fwd = NULL;
        goto done;
    }
    dnnl_status_t st =
        p->dir == CONV_BACKWARD_DATA
            ? dnnl_convolution_backward_data_desc_init(&cd, alg, &dsrc, &w, &ddst, strides, pad,
                                                       pad)
            : dnnl_convolution_backward_weights_desc_init(&cd, alg, &src, &dw, bias, &ddst,
                                                          strides, pad, pad);
    if (st == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &cd, attr, engine, fwd) != dnnl_success)
        pd = NULL;
done:
    dnnl_primitive_desc_destroy(fwd);
    dnnl_primitive_attr_destroy(attr);
    return pd;
}

/* A memory of layout md whose buffer is set at each run: bytes
 * [*offset, *offset + size) of the workspace, which grows by whole lines. */
static int work_memory(dnnl_engine_t engine, const dnnl_memory_desc_t *md, dnnl_memory_t *mem,
                       size_t *offset, size_t *work_bytes)
{
    *offset = *work_bytes;
    *work_bytes += (dnnl_memory_desc_get_size(md) + 63) & ~(size_t)63;
    return dnnl_memory_create(mem, md, engine, DNNL_MEMORY_NONE) == dnnl_success ? 0 : -1;
}

static int make_reorder(dnnl_engine_t engine, const dnnl_memory_desc_t *from,
                        const dnnl_memory_desc_t *to, dnnl_primitive_t *reorder)
{
    dnnl_primitive_desc_t rpd;
    if (dnnl_reorder_primitive_desc_create(&rpd, from, engine, to, engine, NULL) != dnnl_success)
        return -1;
    dnnl_status_t st = dnnl_primitive_create(reorder, rpd);
    dnnl_primitive_desc_destroy(rpd);
    return st == dnnl_success ? 0 : -1;
}

static int winograd_shape(int winograd_ok, const conv2d_desc *d)
{
    return winograd_ok && d->k == 3 && d->stride == 1 && d->in_c >= WINOGRAD_MIN_CHANNELS &&
           d->out_c >= WINOGRAD_MIN_CHANNELS;
}

/* Fills p's primitive, memories and reorders; p->prim stays NULL if oneDNN
 * cannot, and the plan then just records that. */
static void plan_build(dnnl_engine_t engine, struct conv_plan *p)
{
    p->winograd = winograd_shape(p->winograd_ok, &p->d);
    dnnl_primitive_desc_t pd = make_pd(engine, p);
    if (!pd && p->winograd && p->d.in_c >= DNNL_MIN_CHANNELS &&
        p->d.out_c >= DNNL_MIN_CHANNELS) {
        p->winograd = 0; /* not this shape, or not this CPU */
        pd = make_pd(engine, p);
    }
    if (!pd)
        return;
    /* The bias comes last, so a plan without one has one argument fewer. */
    p->nargs = 3 + (p->bias && p->dir != CONV_BACKWARD_DATA);
    for (int i = 0; i < p->nargs; i++) {
        const arg_spec *s = &dir_args[p->dir][i];
        plan_arg *a = &p->args[i];
        a->arg = s->arg;
        a->is_output = s->is_output;
        dnnl_memory_desc_t user_md;
        const dnnl_memory_desc_t *want =
            dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, s->arg);
        if (!want || md_init(&user_md, &p->d, p->n, s->kind, 1, dnnl_f32) ||
            dnnl_memory_create(&a->user, &user_md, engine, DNNL_MEMORY_NONE) != dnnl_success)
            goto done;
        if (dnnl_memory_desc_equal(want, &user_md))
            continue;
        if (work_memory(engine, want, &a->inner, &a->inner_offset, &p->work_bytes) ||
            make_reorder(engine, s->is_output ? want : &user_md, s->is_output ? &user_md : want,
                         &a->reorder))
            goto done;
    }
    const dnnl_memory_desc_t *scratch =
        dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (scratch && dnnl_memory_desc_get_size(scratch) > 0 &&
        work_memory(engine, scratch, &p->scratch, &p->scratch_offset, &p->work_bytes))
        goto done;
    if (dnnl_primitive_create(&p->prim, pd) != dnnl_success)
        p->prim = NULL;
done:
    dnnl_primitive_desc_destroy(pd);
}

int cpu_dnnl_ready(cpu_impl *impl)
{
    if (!impl->dnnl_engine && dnnl_engine_create(&impl->dnnl_engine, dnnl_cpu, 0) != dnnl_success)
        return -1;
    if (!impl->dnnl_stream && dnnl_stream_create(&impl->dnnl_stream, impl->dnnl_engine,
                                                 dnnl_stream_default_flags) != dnnl_success)
        return -1;
    return 0;
}

/* The context's plan for this call, created (or found unusable) once. */
static struct conv_plan *plan_get(backend_ctx *ctx, enum conv_dir dir, const conv2d_desc *d,
                                  int n, int bias)
{
    cpu_impl *impl = ctx->impl;
    const int bf16 = ctx->precision == PRECISION_BF16, winograd_ok = impl->conv_winograd;
    for (int i = 0; i < CPU_CONV_PLANS; i++) {
        struct conv_plan *p = impl->conv_plans[i];
        if (p && p->dir == dir && p->n == n && p->threads == ctx->threads && p->bias == bias &&
            p->bf16 == bf16 && p->winograd_ok == winograd_ok && memcmp(&p->d, d, sizeof *d) == 0)
            return p;
    }
    if (cpu_dnnl_ready(impl) != 0)
        return NULL;
    struct conv_plan *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    *p = (struct conv_plan){.dir = dir, .d = *d, .n = n, .threads = ctx->threads, .bias = bias,
                            .winograd_ok = winograd_ok, .bf16 = bf16};
    /* oneDNN fits its kernels to the thread count it sees at creation. */
    if (omp_get_max_threads() != ctx->threads)
        omp_set_num_threads(ctx->threads);
    plan_build(impl->dnnl_engine, p);
    /* Full: the slots are reused round-robin (a model has a few dozen). */
    const int slot = impl->conv_plan_next;
    if (impl->conv_plans[slot])
        plan_destroy(impl->conv_plans[slot]);
    impl->conv_plans[slot] = p;
    impl->conv_plan_next = (slot + 1) % CPU_CONV_PLANS;
    return p;
}

static int exec(dnnl_stream_t stream, dnnl_primitive_t prim, int nargs, const dnnl_exec_arg_t *args)
{
    return dnnl_primitive_execute(prim, stream, nargs, args) == dnnl_success ? 0 : -1;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ptrs[i] is the caller's array for argument i of the direction. */
static int plan_run(backend_ctx *ctx, struct conv_plan *p, void *const *ptrs)
{
    dnnl_stream_t stream = ((cpu_impl *)ctx->impl)->dnnl_stream;
    dnnl_exec_arg_t args[PLAN_MAX_ARGS + 1];
    char *work = (char *)backend_workspace(ctx, p->work_bytes / sizeof(float));
    if (!work || (p->scratch && dnnl_memory_set_data_handle(p->scratch, work + p->scratch_offset) !=
                                    dnnl_success))
        return -1;
    if (omp_get_max_threads() != ctx->threads)
        omp_set_num_threads(ctx->threads);
    for (int i = 0; i < p->nargs; i++) {
        plan_arg *a = &p->args[i];
        if (dnnl_memory_set_data_handle(a->user, ptrs[i]) != dnnl_success ||
            (a->inner && dnnl_memory_set_data_handle(a->inner, work + a->inner_offset) !=
                             dnnl_success))
            return -1;
        args[i] = (dnnl_exec_arg_t){a->arg, a->inner ? a->inner : a->user};
        const dnnl_exec_arg_t from_user[2] = {{DNNL_ARG_FROM, a->user}, {DNNL_ARG_TO, a->inner}};
        if (a->reorder && !a->is_output && exec(stream, a->reorder, 2, from_user))
            return -1;
    }
    int nargs = p->nargs;
    if (p->scratch)
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, p->scratch};
    /* A CPU stream runs a primitive before execute returns. */
    const double t0 = seconds();
    if (exec(stream, p->prim, nargs, args))
        return -1;
    ((cpu_impl *)ctx->impl)->conv_prim_s += seconds() - t0;
    for (int i = 0; i < p->nargs; i++) {
        plan_arg *a = &p->args[i];
        const dnnl_exec_arg_t to_user[2] = {{DNNL_ARG_FROM, a->inner}, {DNNL_ARG_TO, a->user}};
        if (a->reorder && a->is_output && exec(stream, a->reorder, 2, to_user))
            return -1;
    }
    return dnnl_stream_wait(stream) == dnnl_success ? 0 : -1;
}

static int conv_dnnl(backend_ctx *ctx, enum conv_dir dir, const conv2d_desc *d, int n, int bias,
                     void *const *ptrs)
{
    const int wide = d->in_c >= DNNL_MIN_CHANNELS && d->out_c >= DNNL_MIN_CHANNELS;
    if ((!wide && !winograd_shape(((cpu_impl *)ctx->impl)->conv_winograd, d)) || n < 1 ||
        d->out_h < 1 || d->out_w < 1)
        return -1;
    struct conv_plan *p = plan_get(ctx, dir, d, n, bias);
    return p && p->prim ? plan_run(ctx, p, ptrs) : -1;
}

int conv_dnnl_forward(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                      const float *w, const float *b, float *y)
{
    void *const ptrs[] = {(void *)x, (void *)w, y, (void *)b};
    return conv_dnnl(ctx, CONV_FORWARD, d, n, b != NULL, ptrs);
}

int conv_dnnl_backward_data(backend_ctx *ctx, const conv2d_desc *d, int n, const float *dy,
                            const float *w, float *dx)
{
    void *const ptrs[] = {(void *)dy, (void *)w, dx};
    return conv_dnnl(ctx, CONV_BACKWARD_DATA, d, n, 0, ptrs);
}

int conv_dnnl_backward_filter(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                              const float *dy, float *dw, float *db)
{
    void *const ptrs[] = {(void *)x, (void *)dy, dw, db};
    return conv_dnnl(ctx, CONV_BACKWARD_FILTER, d, n, db != NULL, ptrs);
}

#else /* no oneDNN: conv.c's im2col does every convolution */

void conv_dnnl_free(cpu_impl *impl)
{
    (void)impl;
}

int conv_dnnl_forward(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                      const float *w, const float *b, float *y)
{
    (void)ctx, (void)d, (void)n, (void)x, (void)w, (void)b, (void)y;
    return -1;
}

int conv_dnnl_backward_data(backend_ctx *ctx, const conv2d_desc *d, int n, const float *dy,
                            const float *w, float *dx)
{
    (void)ctx, (void)d, (void)n, (void)dy, (void)w, (void)dx;
    return -1;
}

int conv_dnnl_backward_filter(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                              const float *dy, float *dw, float *db)
{
    (void)ctx, (void)d, (void)n, (void)x, (void)dy, (void)dw, (void)db;
    return -1;
}

#endif
