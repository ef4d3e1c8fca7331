/* 2-D convolution through cuDNN's convolution API: NCHW float tensors,
 * cross-correlation (what the CPU backend and PyTorch compute).
 *
 * A plan per (shape, batch, precision, determinism) holds the cuDNN
 * descriptors and, per direction, the algorithm chosen the first time that
 * direction runs, with its math type and workspace size; plans live in a
 * table that grows and never evicts, since a model has a fixed, small set of
 * shapes (WRN-28-10 about a dozen per batch size). A context that asks for
 * timed algorithms (ctx->time_algorithms, the job's `algorithms`) gets the
 * fastest candidate of cuDNN's find calls, timed once per device and shape
 * for the whole process (conv_algos.c); otherwise, and always for a
 * deterministic context (a timing may pick another algorithm in the next
 * process, and a resumed job must repeat itself bit for bit), the first
 * fit of cuDNN's heuristics (the _v7 queries), the same in every run. Both
 * within the workspace limit of conv_pick.h. The plans and their table are
 * conv_plans.c's. The workspace (and at bf16 the weights' bf16 copy) is the
 * context's scratch. The bias is added, and its
 * gradient reduced, by bias.cu.
 *
 * At bf16 the activations (x, y and their gradients) are bf16 already
 * (backend.h); the weights stay fp32 outside: forward and backward-data
 * convert w into a bf16 copy in scratch (bf16.cu), backward-filter gets dw
 * in bf16 from cuDNN and converts it back. cuDNN runs on bf16 data with
 * fp32 accumulation. */
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "conv_algos.h"
#include "conv_pick.h"
#include "conv_plans.h"
#include "cuda_check.h"

/* More than any direction's algorithm count (asserted where they are read). */
#define MAX_OFFERS 16

/* cuDNN's candidates, whichever direction's perf struct they came in, as
 * conv_pick sees them; their math types kept beside. */
#define OFFERS(perf, count, offers, maths)                                          \
    for (int i_ = 0; i_ < (count); i_++) {                                          \
        (offers)[i_] = (algo_offer){(int)(perf)[i_].algo,                           \
                                    (perf)[i_].status == CUDNN_STATUS_SUCCESS,      \
                                    (perf)[i_].memory,                              \
                                    (perf)[i_].determinism == CUDNN_DETERMINISTIC,  \
                                    (perf)[i_].mathType == CUDNN_FMA_MATH};         \
        (maths)[i_] = (perf)[i_].mathType;                                          \
    }

/* One direction's candidates: from the heuristics (HEURISTIC_OR_TIMED's
 * first call) or from timing each one (its second), both best first, in
 * the same perf struct. The result is the call's status. */
#define CANDIDATES(timed, heuristic_call, find_call, perf, count, offers, maths)      \
    do {                                                                             \
        rc = (timed) ? (find_call) : (heuristic_call);                              \
        if (rc == CUDNN_STATUS_SUCCESS)                                              \
            OFFERS(perf, count, offers, maths);                                      \
    } while (0)

/* Direction dir's candidates for plan p, best first: *count of them in
 * offers and maths. The cuDNN status of the query. */
static cudnnStatus_t candidates(backend_ctx *ctx, conv_plan *p, enum conv_dir dir, int timed,
                                algo_offer *offers, cudnnMathType_t *maths, int *count)
{
    cudnnHandle_t h = cuda_impl_of(ctx)->cudnn;
    cudnnStatus_t rc;
    *count = 0;
    if (dir == CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        const int want = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
        _Static_assert((int)CUDNN_CONVOLUTION_FWD_ALGO_COUNT <= MAX_OFFERS, "offers");
        CANDIDATES(timed,
                   cudnnGetConvolutionForwardAlgorithm_v7(h, p->x, p->w, p->conv, p->y, want,
                                                          count, perf),
                   cudnnFindConvolutionForwardAlgorithm(h, p->x, p->w, p->conv, p->y, want,
                                                        count, perf),
                   perf, *count, offers, maths);
    } else if (dir == CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        const int want = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
        _Static_assert((int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT <= MAX_OFFERS, "offers");
        CANDIDATES(timed,
                   cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p->w, p->y, p->conv, p->x,
                                                               want, count, perf),
                   cudnnFindConvolutionBackwardDataAlgorithm(h, p->w, p->y, p->conv, p->x,
                                                             want, count, perf),
                   perf, *count, offers, maths);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        const int want = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
        _Static_assert((int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT <= MAX_OFFERS, "offers");
        CANDIDATES(timed,
                   cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p->x, p->y, p->conv, p->w,
                                                                 want, count, perf),
                   cudnnFindConvolutionBackwardFilterAlgorithm(h, p->x, p->y, p->conv, p->w,
                                                               want, count, perf),
                   perf, *count, offers, maths);
    }
    return rc;
}

static const char *const dir_name[CONV_DIRS] = {"forward", "backward-data", "backward-filter"};

/* The candidates' pick for plan p under its precision and determinism into
 * *out: 0, or -1 with the sticky error set (none qualifies). */
static int pick(backend_ctx *ctx, const conv_plan *p, enum conv_dir dir, const algo_offer *offers,
                const cudnnMathType_t *maths, int count, conv_algo *out)
{
    const conv_key *k = &p->key;
    const int i = conv_pick(offers, count, k->deterministic, k->precision == PRECISION_FP32,
                            CONV_WORKSPACE_MAX);
    if (i < 0) {
        backend_fail(ctx, "cudnn: no %s%s%s algorithm for a %dx%dx%dx%d conv to %d channels, "
                     "k=%d stride=%d pad=%d", k->deterministic ? "deterministic " : "",
                     k->precision == PRECISION_BF16 ? "bf16 " : "", dir_name[dir], k->n, k->in_c,
                     k->in_h, k->in_w, k->out_c, k->k, k->stride, k->pad);
        return -1;
    }
    *out = (conv_algo){1, offers[i].algo, (int)maths[i]};
    return 0;
}

/* Ask under the math type of the precision; cuDNN answers per candidate
 * with the math type it would run it with. */
static int ask(backend_ctx *ctx, conv_plan *p, enum conv_dir dir, int timed, conv_algo *out)
{
    algo_offer offers[MAX_OFFERS];
    cudnnMathType_t maths[MAX_OFFERS];
    int count = 0;
    if (!CUDNN_OK(ctx, cudnnSetConvolutionMathType(p->conv, conv_math_for(p->key.precision))))
        return -1;
    const cudnnStatus_t rc = candidates(ctx, p, dir, timed, offers, maths, &count);
    if (timed && rc != CUDNN_STATUS_SUCCESS) {
        /* Timing allocates its own tensors and every candidate's workspace:
         * short of memory (several replicas on one GPU), or refused for a
         * configuration, it leaves the choice to the heuristics. Unless the
         * device itself is gone. */
        cuda_probe_device(ctx);
        if (!ctx->device_fault) {
            out->timed = 0;
            return 0;
        }
    }
    if (!CUDNN_OK(ctx, rc))
        return -1;
    return pick(ctx, p, dir, offers, maths, count, out);
}

typedef struct timing {
    backend_ctx *ctx;
    conv_plan *plan;
    enum conv_dir dir;
} timing;

static int time_candidates(void *arg, conv_algo *out)
{
    const timing *t = arg;
    return ask(t->ctx, t->plan, t->dir, 1, out);
}

/* Direction dir's algorithm and math type for plan p: timed once per
 * process and device (conv_algos.h) when the context asks for timing and
 * is not deterministic; from the heuristics otherwise, or when timing
 * could not run. */
static int algorithm(backend_ctx *ctx, conv_plan *p, enum conv_dir dir, conv_algo *out)
{
    if (ctx->time_algorithms && !ctx->deterministic) {
        conv_algo_key key;
        memset(&key, 0, sizeof key); /* compared with memcmp */
        _Static_assert(sizeof(conv_key) <= sizeof key.shape, "conv_key fits a timing's key");
        key.device = ctx->device;
        key.dir = (int)dir;
        memcpy(key.shape, &p->key, sizeof p->key);
        timing t = {ctx, p, dir};
        if (conv_algos_get(&key, out, time_candidates, &t) != 0)
            return -1;
        if (out->timed)
            return 0;
    }
    return ask(ctx, p, dir, 0, out);
}

/* Choose direction dir's algorithm for plan p, once. */
static int choose(backend_ctx *ctx, conv_plan *p, enum conv_dir dir)
{
    if (p->chosen[dir])
        return 0;
    cudnnHandle_t h = cuda_impl_of(ctx)->cudnn;
    conv_algo chosen;
    if (algorithm(ctx, p, dir, &chosen) != 0)
        return -1;
    p->algo[dir] = chosen.algo;
    p->math[dir] = (cudnnMathType_t)chosen.math;
    /* The workspace asked again for the chosen algorithm under its own math
     * type: the heuristics' memory figure is an estimate. */
    size_t bytes = 0;
    int ok = CUDNN_OK(ctx, cudnnSetConvolutionMathType(p->conv, p->math[dir]));
    if (ok && dir == CONV_FWD)
        ok = CUDNN_OK(ctx, cudnnGetConvolutionForwardWorkspaceSize(
                               h, p->x, p->w, p->conv, p->y,
                               (cudnnConvolutionFwdAlgo_t)p->algo[dir], &bytes));
    else if (ok && dir == CONV_BWD_DATA)
        ok = CUDNN_OK(ctx, cudnnGetConvolutionBackwardDataWorkspaceSize(
                               h, p->w, p->y, p->conv, p->x,
                               (cudnnConvolutionBwdDataAlgo_t)p->algo[dir], &bytes));
    else if (ok)
        ok = CUDNN_OK(ctx, cudnnGetConvolutionBackwardFilterWorkspaceSize(
                               h, p->x, p->y, p->conv, p->w,
                               (cudnnConvolutionBwdFilterAlgo_t)p->algo[dir], &bytes));
    if (!ok)
        return -1;
    p->workspace[dir] = bytes;
    p->chosen[dir] = 1;
    return 0;
}

/* The plan with direction dir's algorithm chosen and its math type set on
 * the descriptor; NULL with the sticky error set. */
static conv_plan *prepare(backend_ctx *ctx, const conv2d_desc *d, int n, enum conv_dir dir)
{
    conv_plan *p = conv_plan_find(ctx, d, n);
    if (!p || choose(ctx, p, dir) != 0 ||
        !CUDNN_OK(ctx, cudnnSetConvolutionMathType(p->conv, p->math[dir])))
        return NULL;
    return p;
}

/* What one call hands cuDNN: its two operands and its result (the caller's
 * tensors, or at bf16 the weights' bf16 copy in scratch), and the workspace. */
typedef struct conv_io {
    const void *a, *b;
    void *out;
    void *ws;
} conv_io;

/* Which of a call's tensors holds the fp32 weights (or their gradient). */
enum io_weights { W_IN_A, W_IN_OUT };

/* The scratch of one call of direction dir, with operands a (na values) and
 * b and a result of nout values, the weights where `wt` says; at bf16 the
 * weights' bf16 copy (converted into it if an operand) is a part of it
 * beside cuDNN's workspace, the two being in use at once. 0, or -1 with the
 * sticky error set. */
static int io_begin(backend_ctx *ctx, const conv_plan *p, enum conv_dir dir, const float *a,
                    size_t na, const float *b, float *out, size_t nout, enum io_weights wt,
                    conv_io *io)
{
    const int bf16 = p->key.precision == PRECISION_BF16;
    const size_t nw = wt == W_IN_A ? na : nout;
    const size_t bytes[2] = {bf16 ? nw * sizeof(uint16_t) : 0, p->workspace[dir]};
    void *parts[2];
    if (cuda_scratch_parts(ctx, 2, bytes, parts) != 0)
        return -1;
    *io = (conv_io){a, b, out, parts[1]};
    if (bf16 && wt == W_IN_A) {
        cuda_to_bf16(ctx, na, a, parts[0]);
        io->a = parts[0];
    } else if (bf16) {
        io->out = parts[0];
    }
    return backend_failed(ctx) ? -1 : 0;
}

/* At bf16, the weight gradient from its bf16 copy into the caller's fp32. */
static void io_end_weights(backend_ctx *ctx, const conv_plan *p, const conv_io *io, float *out,
                           size_t nout)
{
    if (p->key.precision == PRECISION_BF16)
        cuda_from_bf16(ctx, nout, io->out, out);
}

static size_t x_count(const conv2d_desc *d, int n)
{
    return (size_t)n * d->in_c * d->in_h * d->in_w;
}

static size_t y_count(const conv2d_desc *d, int n)
{
    return (size_t)n * d->out_c * d->out_h * d->out_w;
}

static size_t w_count(const conv2d_desc *d) { return (size_t)d->out_c * d->in_c * d->k * d->k; }

/* cuDNN rejects empty tensors; an empty batch or output has nothing to
 * compute, and its gradients are zeros. */
static int empty(const conv2d_desc *d, int n) { return n <= 0 || d->out_h <= 0 || d->out_w <= 0; }

void cuda_conv2d_forward_op(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                            const float *w, const float *b, float *y)
{
    if (empty(d, n))
        return;
    conv_plan *p = prepare(ctx, d, n, CONV_FWD);
    conv_io io;
    const float one = 1.0f, nil = 0.0f;
    if (!p || io_begin(ctx, p, CONV_FWD, w, w_count(d), x, y, y_count(d, n), W_IN_A, &io) != 0 ||
        !CUDNN_OK(ctx, cudnnConvolutionForward(
                           cuda_impl_of(ctx)->cudnn, &one, p->x, io.b, p->w, io.a, p->conv,
                           (cudnnConvolutionFwdAlgo_t)p->algo[CONV_FWD], io.ws,
                           p->workspace[CONV_FWD], &nil, p->y, io.out)))
        return;
    if (b && !backend_failed(ctx))
        cuda_bias_add(ctx, n, d->out_c, (size_t)d->out_h * d->out_w, b, y);
}

void cuda_conv2d_backward_data_op(backend_ctx *ctx, const conv2d_desc *d, int n, const float *dy,
                                  const float *w, float *dx)
{
    if (empty(d, n)) {
        if (n > 0)
            cuda_zero_op(ctx, dx, x_count(d, n) * backend_act_size(ctx));
        return;
    }
    conv_plan *p = prepare(ctx, d, n, CONV_BWD_DATA);
    conv_io io;
    const float one = 1.0f, nil = 0.0f;
    if (!p || io_begin(ctx, p, CONV_BWD_DATA, w, w_count(d), dy, dx, x_count(d, n), W_IN_A,
                       &io) != 0 ||
        !CUDNN_OK(ctx, cudnnConvolutionBackwardData(
                           cuda_impl_of(ctx)->cudnn, &one, p->w, io.a, p->y, io.b, p->conv,
                           (cudnnConvolutionBwdDataAlgo_t)p->algo[CONV_BWD_DATA], io.ws,
                           p->workspace[CONV_BWD_DATA], &nil, p->x, io.out)))
        return;
}

/* At bf16, cuDNN accumulates dw in fp32 but hands it over in bf16 (its
 * bf16 configuration has no float output): the gradient keeps 8
 * significant bits, a relative error up to 2^-9 per weight, far below the
 * noise of a minibatch gradient. */
void cuda_conv2d_backward_filter_op(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                                    const float *dy, float *dw, float *db)
{
    if (empty(d, n)) {
        cuda_zero_op(ctx, dw, w_count(d) * sizeof(float));
        if (db)
            cuda_zero_op(ctx, db, (size_t)d->out_c * sizeof(float));
        return;
    }
    conv_plan *p = prepare(ctx, d, n, CONV_BWD_FILTER);
    conv_io io;
    const float one = 1.0f, nil = 0.0f;
    if (!p || io_begin(ctx, p, CONV_BWD_FILTER, x, x_count(d, n), dy, dw, w_count(d), W_IN_OUT,
                       &io) != 0 ||
        !CUDNN_OK(ctx, cudnnConvolutionBackwardFilter(
                           cuda_impl_of(ctx)->cudnn, &one, p->x, io.a, p->y, io.b, p->conv,
                           (cudnnConvolutionBwdFilterAlgo_t)p->algo[CONV_BWD_FILTER], io.ws,
                           p->workspace[CONV_BWD_FILTER], &nil, p->w, io.out)))
        return;
    io_end_weights(ctx, p, &io, dw, w_count(d));
    if (db && !backend_failed(ctx))
        cuda_bias_grad(ctx, n, d->out_c, (size_t)d->out_h * d->out_w, dy, db);
}
