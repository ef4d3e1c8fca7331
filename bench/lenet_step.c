/* One training step (forward, softmax cross-entropy, backward, Nesterov SGD
 * through vec_sgd_momentum) at batch 128 on random inputs: LeNet on 1x28x28,
 * or with --arch allcnn / wrn (WRN-16-4) on 3x32x32, 10 classes.
 *
 *   lenet_step [--arch lenet|allcnn|wrn] [--threads 1,2] [--steps N] [--reps R]
 *              [--warmup W] [--batch B] [--precision fp32|bf16] [--direct]
 *       prints the median ms/step at each thread count, images/s and the
 *       step's GFLOP/s (3x the forward's conv and linear multiply-adds x 2);
 *       --precision bf16 runs the contexts at bf16 (backend_ctx_set_precision_cpu);
 *       --direct keeps 3x3 convolutions off Winograd (the direct oneDNN
 *       primitives: the reference for Winograd's gain); unless both are off
 *       it first prints one step's loss and gradient against fp32 with
 *       direct convolutions on the same batch
 *   lenet_step --layers ...
 *       also times every layer's forward and backward (conv backward split
 *       into filter and data), the rest of the driver (loss...) and the update:
 *       where a step's time goes; the "dnnl" column is the time inside
 *       oneDNN's convolution primitive alone (without our reorders)
 *   lenet_step --serve
 *       reads "THREADS STEPS" lines on stdin and answers each with the ms/step
 *       of that many steps: bench/lenet_step.py interleaves these with PyTorch's;
 *       "sgemm THREADS N" is answered with the GFLOP/s of our gemm (oneDNN's
 *       sgemm when built with it) on N x N x N, the machine's peak to compare to
 *
 * Timings on a shared machine are noisy: compare medians, and compare against
 * a reference measured in the same run (bench/README.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "cpu/cpu_ops.h"
#include "model.h"

enum { MAX_THREAD_COUNTS = 16, MAX_ROWS = 256, MAX_REPS = 100, SGEMM_CALLS = 3,
       BENCH_MAX_THREADS = 256 };

static const float LR = 0.01f, MOMENTUM = 0.9f;

typedef struct bench {
    model m;
    /* The model lives in host's memory; ctx, one of made[] (a context for
     * each thread count, made on first use and kept, so that switching
     * counts rebuilds no oneDNN primitive), runs it (every CPU context can
     * use another's memory). */
    backend_ctx host, *ctx;
    backend_ctx made[BENCH_MAX_THREADS + 1];
    int threads;         /* ctx's thread count; 0 before the first */
    enum backend_precision precision;
    int direct;          /* no Winograd */
    int batch;
    size_t in_size;      /* floats per example */
    double step_flops;   /* per example */
    float *x, *velocity;
    int32_t *labels;
    long step;
} bench;

/* Rows of the per-layer breakdown: each layer's forward and backward, timed
 * by wrapping the layer's function pointers, so that model_train_grads
 * itself runs; whatever it does outside the layers (loss, residual sums,
 * gradient routing) is the "driver" row: the step's time less the layers'. */
typedef void (*forward_fn)(layer *l, model *m, backend_ctx *ctx, const float *x, int n,
                           enum forward_mode mode);
typedef void (*backward_fn)(layer *l, model *m, backend_ctx *ctx, const float *x,
                            const float *dy, float *dx, int n);

typedef struct profile {
    int nrows;
    char name[MAX_ROWS][48];   /* "conv1 fwd" */
    char group[MAX_ROWS][48];  /* "conv fwd": rows summed over layers of a kind */
    int driver_row, update_row;
    struct {
        forward_fn forward;
        backward_fn backward;
        int fwd_row, bwd_row, bwd_data_row;
    } layers[MAX_ROWS];
    double *acc;               /* where the wrappers add their seconds */
    double *prim;              /* and the seconds inside oneDNN's conv primitives */
} profile;

/* The wrappers find their layer's originals and rows here. */
static profile prof;

static const char *const kind_names[] = {
    [LAYER_CONV] = "conv",         [LAYER_BN] = "bn",           [LAYER_RELU] = "relu",
    [LAYER_MAXPOOL] = "maxpool",   [LAYER_AVGPOOL] = "avgpool", [LAYER_DROPOUT] = "dropout",
    [LAYER_LINEAR] = "linear",     [LAYER_ADD] = "add",
};
enum { NKINDS = sizeof kind_names / sizeof kind_names[0] };

/* Floating-point operations of one training step per example: the conv and
 * linear layers' forward multiply-adds, twice each, and the backward's two
 * products of the same size (data and filter gradients) so 3x the forward.
 * The first layer's data gradient is not computed, but counting it keeps the
 * figure comparable with PyTorch's and between archs. */
static double step_flops(const model *m)
{
    double macs = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const layer *l = &m->layers[i];
        if (l->kind == LAYER_CONV)
            macs += (double)l->out_size * l->conv.in_c * l->conv.k * l->conv.k;
        else if (l->kind == LAYER_LINEAR)
            macs += (double)l->out_size * l->in_c * l->in_h * l->in_w;
    }
    return 3 * 2 * macs;
}

static int bench_init(bench *b, const char *arch, int batch, enum backend_precision precision,
                      int direct, char *err, size_t errlen)
{
    memset(b, 0, sizeof(*b));
    b->precision = precision;
    b->direct = direct;
    model_spec spec = {.dropout = -1, .classes = 10, .in_c = 3, .in_h = 32, .in_w = 32};
    if (strcmp(arch, "lenet") == 0) {
        spec.in_c = 1;
        spec.in_h = spec.in_w = 28;
    } else if (strcmp(arch, "wrn") == 0) {
        spec.depth = 16;
        spec.width = 4;
    }
    snprintf(spec.arch, sizeof spec.arch, "%s", arch);
    backend_ctx_init_cpu(&b->host, 1);
    /* The host context stays fp32; this only asks whether the CPU can. */
    if (backend_ctx_set_precision_cpu(&b->host, precision, err, errlen) != 0)
        return -1;
    backend_ctx_set_precision_cpu(&b->host, PRECISION_FP32, err, errlen);
    if (model_build(&b->m, &b->host, &spec, batch, 1, err, errlen) != 0)
        return -1;
    model_init_params(&b->m, &b->host, 1, 0);
    b->batch = batch;
    b->in_size = (size_t)spec.in_c * spec.in_h * spec.in_w;
    b->step_flops = step_flops(&b->m);
    size_t in = (size_t)batch * b->in_size;
    b->x = malloc(in * sizeof(float));
    b->labels = malloc((size_t)batch * sizeof(int32_t));
    b->velocity = calloc(b->m.nparams, sizeof(float));
    if (!b->x || !b->labels || !b->velocity) {
        snprintf(err, errlen, "out of memory for the inputs");
        return -1;
    }
    philox_key key = philox_make_key(7, 0, 0);
    for (size_t i = 0; i < in; i++)
        b->x[i] = philox_uniform_at(key, 0, i);
    for (int i = 0; i < batch; i++)
        b->labels[i] = (int32_t)(philox_uniform_at(key, 1ull << 40, (uint64_t)i) * 10.0f);
    return 0;
}

static void bench_free(bench *b)
{
    model_free(&b->m, &b->host);
    backend_ctx_free(&b->host);
    for (int t = 1; t <= BENCH_MAX_THREADS; t++)
        if (b->made[t].ops)
            backend_ctx_free(&b->made[t]);
    free(b->x);
    free(b->labels);
    free(b->velocity);
}

/* A context at the bench's precision, as bench_init found the CPU can. */
static void ctx_init(const bench *b, backend_ctx *ctx, int threads,
                     enum backend_precision precision)
{
    char err[256];
    backend_ctx_init_cpu(ctx, threads);
    backend_ctx_set_precision_cpu(ctx, precision, err, sizeof err);
    if (ctx->impl)
        ((cpu_impl *)ctx->impl)->conv_winograd = !b->direct;
}

static void set_threads(bench *b, int threads)
{
    if (b->threads == threads)
        return;
    if (!b->made[threads].ops)
        ctx_init(b, &b->made[threads], threads, b->precision);
    b->ctx = &b->made[threads];
    b->threads = threads;
}

/* The dropout draws of this step, as the runner sets them. */
static void next_step(bench *b)
{
    model_set_dropout_step(&b->m, philox_make_key(1, 0, RNG_STREAM_DROPOUT), (uint64_t)b->step++);
}

static void update(bench *b)
{
    vec_sgd_momentum(b->ctx, b->m.nparams, LR, MOMENTUM, 0.0f, 1, b->m.params, b->velocity,
                     b->m.grads);
}

static void train_step(bench *b)
{
    next_step(b);
    model_train_grads(&b->m, b->ctx, b->x, b->labels, b->batch, NULL);
    update(b);
}

static double time_steps(bench *b, int steps)
{
    double t0 = now_s();
    for (int s = 0; s < steps; s++)
        train_step(b);
    return (now_s() - t0) / steps;
}

/* GFLOP/s of our gemm on n x n x n, the fastest of a few calls after a warm
 * one: what the machine's cores give this code at best, the yardstick for a
 * training step's GFLOP/s. */
static double sgemm_gflops(bench *b, int threads, int n)
{
    size_t count = (size_t)n * n;
    float *a = malloc(count * sizeof(float)), *bm = malloc(count * sizeof(float)),
          *c = malloc(count * sizeof(float));
    double best = 0;
    if (a && bm && c) {
        philox_key key = philox_make_key(9, 0, 0);
        for (size_t i = 0; i < count; i++) {
            a[i] = philox_uniform_at(key, 0, i) - 0.5f;
            bm[i] = philox_uniform_at(key, 1ull << 40, i) - 0.5f;
        }
        set_threads(b, threads);
        for (int k = 0; k <= SGEMM_CALLS; k++) {
            double t0 = now_s();
            gemm(b->ctx, 0, 0, n, n, n, 1.0f, a, n, bm, n, 0.0f, c, n);
            double t = now_s() - t0;
            if (k > 0 && (best == 0 || t < best))
                best = t;
        }
    }
    free(a);
    free(bm);
    free(c);
    return best > 0 ? 2.0 * n * n * n / best * 1e-9 : 0;
}

static int add_row(profile *p, const char *name, const char *what, const char *group_kind)
{
    int r = p->nrows++;
    snprintf(p->name[r], sizeof p->name[r], "%s%s%s", name, *what ? " " : "", what);
    snprintf(p->group[r], sizeof p->group[r], "%s%s%s", group_kind, *what ? " " : "", what);
    return r;
}

static double prim_s(const backend_ctx *ctx)
{
    return ctx->impl ? ((const cpu_impl *)ctx->impl)->conv_prim_s : 0;
}

/* Adds the call's seconds, and those inside oneDNN's primitives, to row. */
#define TIMED(ctx, row, call)                                \
    do {                                                     \
        double t0_ = now_s(), p0_ = prim_s(ctx);             \
        call;                                                \
        prof.acc[row] += now_s() - t0_;                      \
        prof.prim[row] += prim_s(ctx) - p0_;                 \
    } while (0)

static void timed_forward(layer *l, model *m, backend_ctx *ctx, const float *x, int n,
                          enum forward_mode mode)
{
    int i = (int)(l - m->layers);
    TIMED(ctx, prof.layers[i].fwd_row, prof.layers[i].forward(l, m, ctx, x, n, mode));
}

/* A convolution's backward is timed in two parts: the original with dx NULL
 * computes the filter (and bias) gradients only; then the data gradient. */
static void timed_backward(layer *l, model *m, backend_ctx *ctx, const float *x,
                           const float *dy, float *dx, int n)
{
    int i = (int)(l - m->layers);
    if (l->kind != LAYER_CONV) {
        TIMED(ctx, prof.layers[i].bwd_row, prof.layers[i].backward(l, m, ctx, x, dy, dx, n));
        return;
    }
    TIMED(ctx, prof.layers[i].bwd_row, prof.layers[i].backward(l, m, ctx, x, dy, NULL, n));
    if (dx)
        TIMED(ctx, prof.layers[i].bwd_data_row,
              conv2d_backward_data(ctx, &l->conv, n, dy, m->params + l->w, dx));
}

static int profile_init(profile *p, const model *m, char *err, size_t errlen)
{
    memset(p, 0, sizeof(*p));
    if (3 * m->nlayers + 2 > MAX_ROWS) {
        snprintf(err, errlen, "%d layers are more than the profile holds", m->nlayers);
        return -1;
    }
    int count[NKINDS] = {0};
    for (int i = 0; i < m->nlayers; i++) {
        const layer *l = &m->layers[i];
        const char *kind = (size_t)l->kind < NKINDS && kind_names[l->kind] ? kind_names[l->kind]
                                                                           : "layer";
        char name[32];
        snprintf(name, sizeof name, "%s%d", kind, ++count[(size_t)l->kind < NKINDS ? l->kind : 0]);
        p->layers[i].forward = l->forward;
        p->layers[i].backward = l->backward;
        p->layers[i].bwd_data_row = -1;
        if (!l->forward || !l->backward)
            continue; /* done by the driver itself */
        p->layers[i].fwd_row = add_row(p, name, "fwd", kind);
        if (l->kind == LAYER_CONV) {
            p->layers[i].bwd_row = add_row(p, name, "bwd-filter", kind);
            p->layers[i].bwd_data_row = add_row(p, name, "bwd-data", kind);
        } else {
            p->layers[i].bwd_row = add_row(p, name, "bwd", kind);
        }
    }
    p->driver_row = add_row(p, "driver", "(loss, sums, routing)", "driver");
    p->update_row = add_row(p, "sgd-nesterov", "update", "optimizer");
    return 0;
}

/* Route the model's layers through the timing wrappers (or back). */
static void profile_wrap(model *m, const profile *p, int on)
{
    for (int i = 0; i < m->nlayers; i++) {
        if (!p->layers[i].forward || !p->layers[i].backward)
            continue;
        m->layers[i].forward = on ? timed_forward : p->layers[i].forward;
        m->layers[i].backward = on ? timed_backward : p->layers[i].backward;
    }
}

static double layer_rows_s(const profile *p, const double *acc)
{
    double sum = 0;
    for (int r = 0; r < p->nrows; r++)
        if (r != p->driver_row && r != p->update_row)
            sum += acc[r];
    return sum;
}

/* One step with the layers wrapped: their seconds are added to acc by the
 * wrappers, the rest of model_train_grads to the driver row. */
static void profiled_step(bench *b, profile *p, double *acc, double *prim)
{
    p->acc = acc;
    p->prim = prim;
    next_step(b);
    double before = layer_rows_s(p, acc), t0 = now_s();
    model_train_grads(&b->m, b->ctx, b->x, b->labels, b->batch, NULL);
    acc[p->driver_row] += now_s() - t0 - (layer_rows_s(p, acc) - before);
    TIMED(b->ctx, p->update_row, update(b));
}

/* The wrapped step must compute what the plain one does. */
static int check_profiled(bench *b, profile *p, char *err, size_t errlen)
{
    size_t np = b->m.nparams;
    float *want = malloc(np * sizeof(float));
    double acc[MAX_ROWS] = {0}, prim[MAX_ROWS] = {0};
    if (!want) {
        snprintf(err, errlen, "out of memory for the check");
        return -1;
    }
    next_step(b);
    b->step--; /* the same dropout draws for both passes */
    float want_loss = model_train_grads(&b->m, b->ctx, b->x, b->labels, b->batch, NULL);
    memcpy(want, b->m.grads, np * sizeof(float));
    profile_wrap(&b->m, p, 1);
    p->acc = acc;
    p->prim = prim;
    float loss = model_train_grads(&b->m, b->ctx, b->x, b->labels, b->batch, NULL);
    profile_wrap(&b->m, p, 0);
    b->step++;
    double worst = 0, scale = 0;
    for (size_t i = 0; i < np; i++) {
        double d = fabs((double)want[i] - b->m.grads[i]), a = fabs(want[i]);
        worst = d > worst ? d : worst;
        scale = a > scale ? a : scale;
    }
    free(want);
    if (loss != want_loss || worst > 1e-5 * scale) {
        snprintf(err, errlen,
                 "the timed step differs from the plain one (loss %.7g vs %.7g, gradient off by "
                 "%.3g of %.3g): the timing wrappers no longer match layers.c",
                 (double)loss, (double)want_loss, worst, scale);
        return -1;
    }
    return 0;
}

static int parse_threads(const char *s, int *out, int *count)
{
    *count = 0;
    while (*s) {
        char *end;
        long t = strtol(s, &end, 10);
        if (end == s || t < 1 || t > BENCH_MAX_THREADS || *count == MAX_THREAD_COUNTS ||
            (*end && *end != ','))
            return -1;
        out[(*count)++] = (int)t;
        s = *end ? end + 1 : end;
    }
    return *count ? 0 : -1;
}

static int serve(bench *b)
{
    char line[128];
    while (fgets(line, sizeof line, stdin)) {
        int threads, steps;
        if (sscanf(line, "sgemm %d %d", &threads, &steps) == 2 && threads >= 1 &&
            threads <= BENCH_MAX_THREADS && steps >= 1) {
            printf("%.6f\n", sgemm_gflops(b, threads, steps));
            fflush(stdout);
            continue;
        }
        if (sscanf(line, "%d %d", &threads, &steps) != 2 || threads < 1 ||
            threads > BENCH_MAX_THREADS || steps < 1) {
            fprintf(stderr, "lenet_step: bad request \"%s\" (want \"THREADS STEPS\" or \"sgemm THREADS N\")\n", line);
            return 1;
        }
        set_threads(b, threads);
        printf("%.6f\n", 1e3 * time_steps(b, steps));
        fflush(stdout);
    }
    return 0;
}

/* Median over reps of each row's time per step, its share of the step, and
 * the median time inside oneDNN's primitive where the row has one. */
static void print_profile(const profile *p, double per_rep[][MAX_ROWS],
                          double prim_rep[][MAX_ROWS], int reps, int threads)
{
    double med[MAX_ROWS], prim[MAX_ROWS], total = 0, col[MAX_REPS];
    for (int r = 0; r < p->nrows; r++) {
        for (int k = 0; k < reps; k++)
            col[k] = per_rep[k][r];
        med[r] = median(col, reps);
        for (int k = 0; k < reps; k++)
            col[k] = prim_rep[k][r];
        prim[r] = median(col, reps);
        total += med[r];
    }
    printf("\nper-layer breakdown at %d thread%s (median ms per step; total %.3f ms; dnnl: in "
           "oneDNN's primitive)\n", threads, threads > 1 ? "s" : "", 1e3 * total);
    for (int r = 0; r < p->nrows; r++) {
        if (med[r] <= 0) /* a first convolution has no data gradient */
            continue;
        printf("  %-32s %8.3f ms %5.1f%%", p->name[r], 1e3 * med[r], 100 * med[r] / total);
        if (prim[r] > 0)
            printf("  dnnl %8.3f ms", 1e3 * prim[r]);
        printf("\n");
    }
    /* Group totals, largest first. */
    char groups[MAX_ROWS][48];
    double gsum[MAX_ROWS];
    int ng = 0;
    for (int r = 0; r < p->nrows; r++) {
        int g = 0;
        while (g < ng && strcmp(groups[g], p->group[r]) != 0)
            g++;
        if (g == ng) {
            snprintf(groups[ng], sizeof groups[ng], "%s", p->group[r]);
            gsum[ng++] = 0;
        }
        gsum[g] += med[r];
    }
    printf("by kind:\n");
    for (int done = 0; done < ng; done++) {
        int best = -1;
        for (int g = 0; g < ng; g++)
            if (gsum[g] >= 0 && (best < 0 || gsum[g] > gsum[best]))
                best = g;
        printf("  %-32s %8.3f ms %5.1f%%\n", groups[best], 1e3 * gsum[best],
               100 * gsum[best] / total);
        gsum[best] = -1;
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: lenet_step [--arch lenet|allcnn|wrn] [--threads 1,2] [--steps N] "
               "[--reps R] [--warmup W] [--batch B] [--precision fp32|bf16] [--direct] "
               "[--layers] [--serve]\n");
}

/* One step's loss and gradient at the bench's precision and convolutions
 * against fp32 with direct convolutions, on the same parameters, batch and
 * dropout draws. */
static int compare_precision(bench *b, int threads, char *err, size_t errlen)
{
    size_t np = b->m.nparams;
    float *want = malloc(np * sizeof(float));
    if (!want) {
        snprintf(err, errlen, "out of memory for the comparison");
        return -1;
    }
    backend_ctx fp32;
    ctx_init(b, &fp32, threads, PRECISION_FP32);
    ((cpu_impl *)fp32.impl)->conv_winograd = 0;
    next_step(b);
    b->step--;
    float want_loss = model_train_grads(&b->m, &fp32, b->x, b->labels, b->batch, NULL);
    backend_ctx_free(&fp32);
    memcpy(want, b->m.grads, np * sizeof(float));
    set_threads(b, threads);
    next_step(b);
    float loss = model_train_grads(&b->m, b->ctx, b->x, b->labels, b->batch, NULL);
    double d2 = 0, w2 = 0;
    for (size_t i = 0; i < np; i++) {
        double d = (double)b->m.grads[i] - want[i];
        d2 += d * d;
        w2 += (double)want[i] * want[i];
    }
    free(want);
    printf("one step on the same batch: loss fp32 direct %.6f, %s%s %.6f (%+.2e relative); "
           "gradient |g - g_ref| / |g_ref| = %.2e\n", (double)want_loss,
           b->precision == PRECISION_BF16 ? "bf16" : "fp32", b->direct ? " direct" : "",
           (double)loss,
           ((double)loss - want_loss) / want_loss, sqrt(d2 / (w2 > 0 ? w2 : 1)));
    return 0;
}

int main(int argc, char **argv)
{
    backend_openmp_defaults(); /* parled's OpenMP threads, unless the environment says */
    int thread_counts[MAX_THREAD_COUNTS] = {1, 2}, nthreads = 2;
    int steps = 20, reps = 5, warmup = 3, batch = 128, layers = 0, serve_mode = 0, direct = 0;
    enum backend_precision precision = PRECISION_FP32;
    const char *arch = "lenet";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--layers"))
            layers = 1;
        else if (!strcmp(a, "--direct"))
            direct = 1;
        else if (v && !strcmp(a, "--precision") && (!strcmp(v, "fp32") || !strcmp(v, "bf16"))) {
            precision = !strcmp(v, "bf16") ? PRECISION_BF16 : PRECISION_FP32;
            i++;
        }
        else if (!strcmp(a, "--serve"))
            serve_mode = 1;
        else if (!strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (v && !strcmp(a, "--arch") && (!strcmp(v, "lenet") || !strcmp(v, "allcnn") ||
                                                 !strcmp(v, "wrn"))) {
            arch = v;
            i++;
        } else if (v && !strcmp(a, "--threads") && parse_threads(v, thread_counts, &nthreads) == 0)
            i++;
        else if (v && !strcmp(a, "--steps") && (steps = atoi(v)) >= 1)
            i++;
        else if (v && !strcmp(a, "--reps") && (reps = atoi(v)) >= 1 && reps <= MAX_REPS)
            i++;
        else if (v && !strcmp(a, "--warmup") && (warmup = atoi(v)) >= 0)
            i++;
        else if (v && !strcmp(a, "--batch") && (batch = atoi(v)) >= 2)
            i++;
        else {
            fprintf(stderr, "lenet_step: bad argument %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    char err[512];
    bench b;
    profile *p = &prof;
    if (bench_init(&b, arch, batch, precision, direct, err, sizeof err) != 0 ||
        profile_init(p, &b.m, err, sizeof err) != 0) {
        fprintf(stderr, "lenet_step: %s\n", err);
        bench_free(&b);
        return 1;
    }
    if (serve_mode) {
        int rc = serve(&b);
        bench_free(&b);
        return rc;
    }
    static double step_s[MAX_THREAD_COUNTS][MAX_REPS];
    static double rows_s[MAX_THREAD_COUNTS][MAX_REPS][MAX_ROWS];
    static double prim_rows_s[MAX_THREAD_COUNTS][MAX_REPS][MAX_ROWS];
    if ((precision != PRECISION_FP32 || !direct) &&
        compare_precision(&b, thread_counts[0], err, sizeof err)) {
        fprintf(stderr, "lenet_step: %s\n", err);
        bench_free(&b);
        return 1;
    }
    for (int t = 0; t < nthreads; t++) {
        set_threads(&b, thread_counts[t]);
        if (layers && check_profiled(&b, p, err, sizeof err) != 0) {
            fprintf(stderr, "lenet_step: %s\n", err);
            bench_free(&b);
            return 1;
        }
    }
    /* Thread counts interleaved within each repetition, so that a burst of
     * load elsewhere on the machine hits all of them alike. */
    for (int k = 0; k < reps; k++)
        for (int t = 0; t < nthreads; t++) {
            set_threads(&b, thread_counts[t]);
            if (k == 0)
                time_steps(&b, warmup ? warmup : 1);
            step_s[t][k] = time_steps(&b, steps);
            if (!layers)
                continue;
            double *acc = rows_s[t][k], *prim = prim_rows_s[t][k];
            profile_wrap(&b.m, p, 1);
            for (int s = 0; s < steps; s++)
                profiled_step(&b, p, acc, prim);
            profile_wrap(&b.m, p, 0);
            for (int r = 0; r < p->nrows; r++) {
                acc[r] /= steps;
                prim[r] /= steps;
            }
        }
    printf("%s training step, %s%s, batch %d, %zu parameters, %.3f GFLOP/step, %d reps of %d "
           "steps\n", arch, precision == PRECISION_BF16 ? "bf16" : "fp32",
           direct ? ", direct convolutions" : "", batch, b.m.nparams_logical,
           1e-9 * b.step_flops * batch, reps, steps);
    for (int t = 0; t < nthreads; t++) {
        double lo = step_s[t][0], hi = lo;
        for (int k = 1; k < reps; k++) {
            lo = step_s[t][k] < lo ? step_s[t][k] : lo;
            hi = step_s[t][k] > hi ? step_s[t][k] : hi;
        }
        double med = median(step_s[t], reps);
        printf("threads %d: %.3f ms/step (median; min %.3f, max %.3f), %.1f images/s, "
               "%.1f GFLOP/s\n", thread_counts[t], 1e3 * med, 1e3 * lo, 1e3 * hi, batch / med,
               1e-9 * b.step_flops * batch / med);
    }
    for (int t = 0; layers && t < nthreads; t++)
        print_profile(p, rows_s[t], prim_rows_s[t], reps, thread_counts[t]);
    bench_free(&b);
    return 0;
}
