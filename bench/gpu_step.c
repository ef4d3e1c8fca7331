/* One training step on a GPU (forward, softmax cross-entropy, backward,
 * Nesterov SGD through vec_sgd_momentum) on random inputs at batch 128, for
 * LeNet (1x28x28), All-CNN, WRN-16-4 and WRN-28-10 (3x32x32), 10 classes, in
 * each precision asked for. bench/torch_gpu_step.py runs this and PyTorch on
 * the same GPU and prints the two side by side (bench/README.md).
 *
 *   gpu_step [--arch lenet,allcnn,wrn16,wrn28] [--precision fp32,tf32,bf16]
 *            [--conv-algorithms auto|timed|heuristic] [--device 0] [--batch 128]
 *            [--batchnorm classic,split] [--steps 20] [--reps 5] [--warmup 3]
 *
 * --conv-algorithms: how cuDNN's convolution algorithms are chosen, as a
 * job's `conv_algorithms` (docs/config.md); auto by default, as in a job:
 * timed at fp32 and tf32, heuristic at bf16. The timing runs at the first
 * step, in the warm-up. Each row (and RESULT line) names the choice it ran
 * and marks with "auto" (the job column) the one `auto` picks at that
 * precision, the one a job gets unless it asks.
 *
 * --batchnorm: the training batch norm kernels, as a job's `gpu_batchnorm`
 * (classic, the default, or split); a list runs each in turn, a row each.
 *
 * A step's time: host clock around `steps` steps and a backend_sync, median
 * of `reps` blocks after `warmup` steps. The step includes staging the batch
 * from pinned host memory and the wait for the loss that model_train_grads
 * does (the runner needs the loss of every step).
 *
 * The kernel floor: every layer's forward and backward, and the update,
 * wrapped with a backend_sync before and after, so that each measures its
 * own kernels; the sync latency (an empty sync after a one-element op,
 * measured alone) is taken off each. Their sum is what the step would take
 * if nothing but our kernels ran, back to back. The residual adds and the
 * routing of gradients between layers, the loss and the staging are not in
 * it (they are in the step). Each result is also printed as one
 * tab-separated RESULT line for the driver, and the floor's share by layer
 * kind and direction (the mean over the reps) as a BREAKDOWN line: where a
 * step's kernel time goes.
 *
 * The batch norms' achieved bandwidth, a BNRATE line: the bytes a step's
 * batch norms must move at the least (forward reads x and writes y,
 * backward reads x and dy and writes dx: 5 passes over each BN's maps, at
 * the activations' size) over their kernel time (bn.fwd + bn.bwd), against
 * a device-to-device copy's rate (bytes read and written) measured on the
 * same context in the same run. Above 1 x the copy's rate is possible only
 * where a re-read hits L2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "model.h"

enum { MAX_REPS = 100, MAX_LAYERS = 256, MAX_LIST = 8, SYNC_PROBES = 50, COPY_REPS = 10 };
/* The copy that gives the device's memory rate: 256 MiB, twice the L2 of
 * any GPU many times over. */
static const size_t COPY_BYTES = (size_t)256 << 20;
/* The layer kinds (model.h's enum layer_kind, in its order) and the update. */
static const char *const kind_names[] = {"conv", "bn", "relu", "maxpool", "avgpool",
                                         "dropout", "linear", "add", "update"};
enum { NKINDS = sizeof kind_names / sizeof kind_names[0], KIND_UPDATE = NKINDS - 1 };
_Static_assert(LAYER_ADD + 2 == NKINDS, "a name per layer kind, and the update");

static const float LR = 0.01f, MOMENTUM = 0.9f;
static const char *const precision_names[] = {"fp32", "tf32", "bf16"};
/* --conv-algorithms: 0 and 1 by ctx.time_algorithms, then auto (by precision). */
static const char *const algorithm_names[] = {"heuristic", "timed", "auto"};
enum { ALGORITHMS_AUTO = 2 };
/* --batchnorm: by ctx.batchnorm_split. */
static const char *const batchnorm_names[] = {"classic", "split"};

typedef struct arch_choice {
    const char *name;   /* on the command line */
    const char *arch;   /* model_spec.arch */
    int depth, width, mnist;
} arch_choice;

static const arch_choice archs[] = {
    {"lenet", "lenet", 0, 0, 1},
    {"allcnn", "allcnn", 0, 0, 0},
    {"wrn16", "wrn", 16, 4, 0},
    {"wrn28", "wrn", 28, 10, 0},
};
enum { NARCHS = sizeof archs / sizeof archs[0] };

typedef struct bench {
    backend_ctx ctx;
    model m;
    int batch;
    float *images;       /* pinned host memory, as a data loader would hand it over */
    int32_t *labels;
    float *velocity;     /* device */
    long step;
} bench;

/* The layer timing wrappers find the originals here (one model at a time). */
static struct {
    void (*forward[MAX_LAYERS])(layer *, model *, backend_ctx *, const float *, int,
                                enum forward_mode);
    void (*backward[MAX_LAYERS])(layer *, model *, backend_ctx *, const float *, const float *,
                                 float *, int);
    double seconds;      /* accumulated kernel time, less the sync latency */
    double sync_latency;
    double by_kind[NKINDS][2]; /* the same, per layer kind, forward [0] and backward [1] */
} prof;

static int bench_init(bench *b, const arch_choice *a, int device, enum backend_precision p,
                      int timed, int bn_split, int batch, char *err, size_t errlen)
{
    memset(b, 0, sizeof *b);
    if (backend_ctx_init_cuda(&b->ctx, device, p, 0, err, errlen) != 0)
        return -1;
    b->ctx.time_algorithms = timed;
    b->ctx.batchnorm_split = bn_split;
    model_spec spec = {.depth = a->depth, .width = a->width, .dropout = -1, .classes = 10,
                       .in_c = a->mnist ? 1 : 3, .in_h = a->mnist ? 28 : 32,
                       .in_w = a->mnist ? 28 : 32};
    snprintf(spec.arch, sizeof spec.arch, "%s", a->arch);
    if (model_build(&b->m, &b->ctx, &spec, batch, 1, err, errlen) != 0)
        return -1;
    model_init_params(&b->m, &b->ctx, 1, 0);
    b->batch = batch;
    size_t in = (size_t)batch * spec.in_c * spec.in_h * spec.in_w;
    b->images = backend_host_alloc(&b->ctx, in * sizeof(float));
    b->labels = backend_host_alloc(&b->ctx, (size_t)batch * sizeof(int32_t));
    b->velocity = backend_alloc(&b->ctx, b->m.nparams * sizeof(float));
    if (backend_failed(&b->ctx)) {
        snprintf(err, errlen, "%s", b->ctx.err);
        return -1;
    }
    backend_zero(&b->ctx, b->velocity, b->m.nparams * sizeof(float));
    philox_key key = philox_make_key(7, 0, 0);
    for (size_t i = 0; i < in; i++)
        b->images[i] = philox_uniform_at(key, 0, i);
    for (int i = 0; i < batch; i++)
        b->labels[i] = (int32_t)(philox_uniform_at(key, 1ull << 40, (uint64_t)i) * 10.0f);
    return 0;
}

/* Safe on a bench that bench_init left half made. */
static void bench_free(bench *b)
{
    if (!b->ctx.ops)
        return;
    if (b->velocity)
        backend_free(&b->ctx, b->velocity);
    if (b->images)
        backend_host_free(&b->ctx, b->images);
    if (b->labels)
        backend_host_free(&b->ctx, b->labels);
    if (b->m.layers)
        model_free(&b->m, &b->ctx);
    backend_ctx_free(&b->ctx);
}

static void train_step(bench *b)
{
    model_set_dropout_step(&b->m, philox_make_key(1, 0, RNG_STREAM_DROPOUT), (uint64_t)b->step++);
    model_train_grads(&b->m, &b->ctx, b->images, b->labels, b->batch, NULL);
    vec_sgd_momentum(&b->ctx, b->m.nparams, LR, MOMENTUM, 0.0f, 1, b->m.params, b->velocity,
                     b->m.grads);
}

/* Seconds per step over `steps` steps, the device drained at both ends. */
static double time_steps(bench *b, int steps)
{
    backend_sync(&b->ctx);
    double t0 = now_s();
    for (int s = 0; s < steps; s++)
        train_step(b);
    backend_sync(&b->ctx);
    return (now_s() - t0) / steps;
}

/* The time of `call`'s kernels alone: drained before, waited for after;
 * counted in the floor and under kind (a kind_names index), direction dir. */
#define KERNEL_TIME(ctx, kind, dir, call)                                 \
    do {                                                                  \
        backend_sync(ctx);                                                \
        double t0_ = now_s();                                             \
        call;                                                             \
        backend_sync(ctx);                                                \
        double dt_ = now_s() - t0_ - prof.sync_latency;                   \
        prof.seconds += dt_ > 0 ? dt_ : 0;                                \
        prof.by_kind[kind][dir] += dt_ > 0 ? dt_ : 0;                     \
    } while (0)

static void timed_forward(layer *l, model *m, backend_ctx *ctx, const float *x, int n,
                          enum forward_mode mode)
{
    KERNEL_TIME(ctx, l->kind, 0, prof.forward[l - m->layers](l, m, ctx, x, n, mode));
}

static void timed_backward(layer *l, model *m, backend_ctx *ctx, const float *x,
                           const float *dy, float *dx, int n)
{
    KERNEL_TIME(ctx, l->kind, 1, prof.backward[l - m->layers](l, m, ctx, x, dy, dx, n));
}

/* Route the layers through the wrappers (on) or back. ADD layers have no
 * functions: the driver does them. */
static void wrap_layers(model *m, int on)
{
    for (int i = 0; i < m->nlayers; i++) {
        layer *l = &m->layers[i];
        if (on && l->forward) {
            prof.forward[i] = l->forward;
            prof.backward[i] = l->backward;
            l->forward = timed_forward;
            l->backward = timed_backward;
        } else if (!on && prof.forward[i]) {
            l->forward = prof.forward[i];
            l->backward = prof.backward[i];
        }
    }
}

/* The median time of a sync after the smallest op: what every wrapped call
 * pays beside its kernels. */
static double sync_latency(bench *b)
{
    double t[SYNC_PROBES];
    for (int k = 0; k < SYNC_PROBES; k++) {
        backend_sync(&b->ctx);
        double t0 = now_s();
        vec_scale(&b->ctx, 1, 1.0f, b->velocity);
        backend_sync(&b->ctx);
        t[k] = now_s() - t0;
    }
    return median(t, SYNC_PROBES);
}

/* Kernel floor of one step, seconds. */
static double kernel_floor(bench *b)
{
    if (b->m.nlayers > MAX_LAYERS)
        return 0;
    memset(prof.forward, 0, sizeof prof.forward);
    prof.seconds = 0;
    wrap_layers(&b->m, 1);
    model_set_dropout_step(&b->m, philox_make_key(1, 0, RNG_STREAM_DROPOUT), (uint64_t)b->step++);
    model_train_grads(&b->m, &b->ctx, b->images, b->labels, b->batch, NULL);
    KERNEL_TIME(&b->ctx, KIND_UPDATE, 0,
                vec_sgd_momentum(&b->ctx, b->m.nparams, LR, MOMENTUM, 0.0f, 1, b->m.params,
                                 b->velocity, b->m.grads));
    wrap_layers(&b->m, 0);
    return prof.seconds;
}

/* The floor by kind and direction, ms a step (the mean over reps), largest
 * first: "BREAKDOWN arch prec bn  conv.bwd 12.3 (41%)  bn.fwd ...". */
static void print_breakdown(const char *arch, const char *precision, const char *bn, int reps)
{
    double total = 0;
    int used[NKINDS][2] = {{0}};
    for (int k = 0; k < NKINDS; k++)
        total += prof.by_kind[k][0] + prof.by_kind[k][1];
    printf("BREAKDOWN\t%s\t%s\t%s", arch, precision, bn);
    for (;;) {
        int bk = -1, bd = 0;
        for (int k = 0; k < NKINDS; k++)
            for (int d = 0; d < 2; d++)
                if (!used[k][d] && prof.by_kind[k][d] > 0 &&
                    (bk < 0 || prof.by_kind[k][d] > prof.by_kind[bk][bd]))
                    bk = k, bd = d;
        if (bk < 0)
            break;
        used[bk][bd] = 1;
        printf("\t%s.%s %.3f ms (%.0f%%)", kind_names[bk], bd ? "bwd" : "fwd",
               1e3 * prof.by_kind[bk][bd] / reps, 100 * prof.by_kind[bk][bd] / total);
    }
    printf("\n");
}

/* Bytes a step's batch norms move at the least: 5 passes over each BN's
 * output maps (forward x, y; backward x, dy, dx). */
static double bn_floor_bytes(const bench *b)
{
    double bytes = 0;
    for (int i = 0; i < b->m.nlayers; i++)
        if (b->m.layers[i].kind == LAYER_BN)
            bytes += 5.0 * b->batch * (double)b->m.layers[i].out_size *
                     (double)backend_act_size(&b->ctx);
    return bytes;
}

/* The device's copy rate, GB/s of bytes read and written: the median of
 * COPY_REPS copies of COPY_BYTES within the context's memory. 0 where that
 * much memory is not free (asked first: a failed allocation would fail the
 * context). */
static double copy_gbps(bench *b, int device)
{
    size_t free_bytes = 0, total = 0;
    if (backend_cuda_mem_info(device, &free_bytes, &total) != 0 || free_bytes < 3 * COPY_BYTES)
        return 0;
    void *src = backend_alloc(&b->ctx, COPY_BYTES), *dst = backend_alloc(&b->ctx, COPY_BYTES);
    double t[COPY_REPS];
    if (src && dst) {
        backend_zero(&b->ctx, src, COPY_BYTES);
        backend_copy(&b->ctx, dst, src, COPY_BYTES);
        for (int k = 0; k < COPY_REPS; k++) {
            backend_sync(&b->ctx);
            const double t0 = now_s();
            backend_copy(&b->ctx, dst, src, COPY_BYTES);
            backend_sync(&b->ctx);
            t[k] = now_s() - t0;
        }
    }
    if (src)
        backend_free(&b->ctx, src);
    if (dst)
        backend_free(&b->ctx, dst);
    return src && dst ? 2.0 * (double)COPY_BYTES / median(t, COPY_REPS) / 1e9 : 0;
}

/* Times one arch at one precision and prints its row; 0 or -1 (printed). */
static int run_one(const arch_choice *a, int device, enum backend_precision p, int algorithms,
                   int bn_split, int batch, int steps, int reps, int warmup)
{
    const int timed = algorithms == ALGORITHMS_AUTO ? backend_times_algorithms_by_default(p)
                                                    : algorithms;
    const char *role = timed == backend_times_algorithms_by_default(p) ? "auto" : "-";
    char err[512];
    bench b;
    if (bench_init(&b, a, device, p, timed, bn_split, batch, err, sizeof err) != 0) {
        printf("%-7s %-5s failed: %s\n", a->name, precision_names[p], err);
        bench_free(&b);
        return -1;
    }
    double step_s[MAX_REPS], floor_s[MAX_REPS];
    memset(prof.by_kind, 0, sizeof prof.by_kind);
    if (warmup > 0)
        time_steps(&b, warmup);
    prof.sync_latency = sync_latency(&b);
    for (int k = 0; k < reps; k++) {
        step_s[k] = time_steps(&b, steps);
        floor_s[k] = kernel_floor(&b);
    }
    int rc = backend_sync(&b.ctx);
    if (rc != 0) {
        printf("%-7s %-5s failed: %s\n", a->name, precision_names[p], b.ctx.err);
    } else {
        double step = median(step_s, reps), fl = median(floor_s, reps);
        /* The precision the context holds: backend.h says what each means. */
        printf("%-7s %-5s %-9s %-7s %-7s %10zu %9.3f ms %9.3f ms %6.2f %10.0f img/s  "
               "(sync latency %.1f us)\n",
               a->name, precision_names[b.ctx.precision], algorithm_names[timed], role,
               batchnorm_names[bn_split], b.m.nparams_logical, 1e3 * step, 1e3 * fl, fl > 0 ? step / fl : 0.0, batch / step,
               1e6 * prof.sync_latency);
        printf("RESULT\t%s\t%s\t%.6f\t%.6f\t%.6f\t%s\t%s\t%s\n", a->name,
               precision_names[b.ctx.precision], 1e3 * step, 1e3 * fl, 1e6 * prof.sync_latency,
               algorithm_names[timed], role, batchnorm_names[bn_split]);
        print_breakdown(a->name, precision_names[b.ctx.precision], batchnorm_names[bn_split],
                        reps);
        const double bn_s = (prof.by_kind[LAYER_BN][0] + prof.by_kind[LAYER_BN][1]) / reps;
        const double bytes = bn_floor_bytes(&b), copy = copy_gbps(&b, device);
        const double rate = bn_s > 0 ? bytes / bn_s / 1e9 : 0;
        printf("BNRATE\t%s\t%s\t%s\t%s\t%.6f\t%.1f\t%.1f\t%.1f\t%.3f\n", a->name,
               precision_names[b.ctx.precision], algorithm_names[timed], batchnorm_names[bn_split],
               1e3 * bn_s, bytes / 1e6, rate, copy, copy > 0 ? rate / copy : 0.0);
        rc = backend_sync(&b.ctx);
    }
    fflush(stdout);
    bench_free(&b);
    return rc;
}

/* A comma-separated list of names from `names` into idx; count or -1. */
static int parse_list(const char *s, const char *const *names, int nnames, int *idx)
{
    int count = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int i = 0; i < nnames; i++)
            if (strcmp(tok, names[i]) == 0)
                found = i;
        if (found < 0 || count == MAX_LIST)
            return -1;
        idx[count++] = found;
    }
    return count ? count : -1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: gpu_step [--arch lenet,allcnn,wrn16,wrn28] [--precision fp32,tf32,bf16] "
               "[--conv-algorithms auto|timed|heuristic] [--batchnorm classic,split] [--device N] [--batch B] [--steps N] "
               "[--reps R] [--warmup W]\n");
}

int main(int argc, char **argv)
{
    const char *arch_names[NARCHS];
    for (int i = 0; i < NARCHS; i++)
        arch_names[i] = archs[i].name;
    int arch_idx[MAX_LIST] = {0, 1, 2, 3}, narch = NARCHS;
    int prec_idx[MAX_LIST] = {0, 1, 2}, nprec = 3;
    int algo_idx[MAX_LIST], bn_idx[MAX_LIST] = {0}, nbn = 1;
    int device = 0, batch = 128, steps = 20, reps = 5, warmup = 3, algorithms = ALGORITHMS_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = v != NULL;
        if (!strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (ok && !strcmp(a, "--arch"))
            ok = (narch = parse_list(v, arch_names, NARCHS, arch_idx)) > 0;
        else if (ok && !strcmp(a, "--precision"))
            ok = (nprec = parse_list(v, precision_names, 3, prec_idx)) > 0;
        else if (ok && !strcmp(a, "--conv-algorithms"))
            ok = parse_list(v, algorithm_names, 3, algo_idx) == 1 &&
                 (algorithms = algo_idx[0]) >= 0;
        else if (ok && !strcmp(a, "--batchnorm"))
            ok = (nbn = parse_list(v, batchnorm_names, 2, bn_idx)) > 0;
        else if (ok && !strcmp(a, "--device"))
            ok = (device = atoi(v)) >= 0;
        else if (ok && !strcmp(a, "--batch"))
            ok = (batch = atoi(v)) >= 2;
        else if (ok && !strcmp(a, "--steps"))
            ok = (steps = atoi(v)) >= 1;
        else if (ok && !strcmp(a, "--reps"))
            ok = (reps = atoi(v)) >= 1 && reps <= MAX_REPS;
        else if (ok && !strcmp(a, "--warmup"))
            ok = (warmup = atoi(v)) >= 0;
        else
            ok = 0;
        if (!ok) {
            fprintf(stderr, "gpu_step: bad argument %s\n", a);
            usage(stderr);
            return 2;
        }
        i++;
    }
    if (backend_cuda_devices() <= device) {
        printf("SKIP: no CUDA device %d\n", device);
        return 77;
    }
    printf("one training step at batch %d on cuda:%d, median of %d blocks of %d steps, "
           "%s convolution algorithms (job auto: what a job's conv_algorithms \"auto\" "
           "picks at that precision)\n", batch,
           device, reps, steps, algorithm_names[algorithms]);
    printf("%-7s %-5s %-9s %-7s %-7s %10s %12s %12s %6s %16s\n", "arch", "prec", "algos", "job",
           "bn", "params", "step", "kernels", "ratio", "throughput");
    int failed = 0;
    for (int i = 0; i < narch; i++)
        for (int j = 0; j < nprec; j++)
            for (int k = 0; k < nbn; k++)
                failed |= run_one(&archs[arch_idx[i]], device, (enum backend_precision)prec_idx[j],
                                  algorithms, bn_idx[k], batch, steps, reps, warmup) != 0;
    return failed;
}
