/* Whole networks on a CUDA context (fp32) against the CPU backend, which the
 * unit tests check against finite differences:
 *   (a) one training step of LeNet, All-CNN and WRN-16-4 at batch 8 from the
 *       same initialisation, batch and dropout draws: the loss, the logits of
 *       an inference pass, the BN running statistics and every gradient
 *       tensor must agree;
 *   (b) 20 Nesterov SGD steps of LeNet (vec_sgd_momentum on each side) on
 *       fresh batches: the two trajectories must stay together;
 *   (c) building WRN-28-10 for an absurd batch fails with a message naming
 *       the GPU and the bytes, and the GPU is still usable afterwards;
 *   (d) batches staged ahead on the copy stream, as the runner stages them
 *       (the next batch uploads while a step computes, and each pinned
 *       buffer is refilled as soon as its step returns) give bit for bit
 *       the gradients of uploading each batch just before its step.
 *
 * Why the gradient tolerances are loose. The backends sum in different
 * orders, so every value differs by float32 rounding. Forward passes are
 * continuous in those differences; backward passes are not: a pre-activation
 * within rounding of 0 passes its gradient through ReLU on one side only (a
 * near tie in max pooling, likewise). Measured on the CPU backend alone, with
 * the parameters perturbed by 1e-5 relative as a stand-in for the GPU's
 * rounding: All-CNN and WRN-16-4 at batch 8 had such flips in most steps,
 * giving per-tensor RMS errors up to 2e-2 (max-abs errors up to 0.14), and a
 * flip during 20 LeNet steps moved the trajectory by up to 15%; without a
 * flip the errors were 1e-4 and below. So the forward (loss, logits, BN
 * statistics) is checked tightly, gradients by RMS with room for flips: a
 * wrong kernel is off by order 1.
 *
 * A tensor's error is |gpu - cpu| / (|cpu| + FLOOR * the model's largest
 * |cpu| tensor), by max or RMS over its elements: the gradient of a conv bias
 * followed by BN is zero but for rounding noise, which no two summation
 * orders share, so it is measured against the model's scale, not its own.
 * Exits 77 (skipped) when there is no CUDA device. */
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "testutil.h"

enum { BATCH = 8, CLASSES = 10, SGD_STEPS = 20 };

static const double FLOOR = 1e-2;

typedef struct tolerance {
    double forward;     /* loss, logits, BN statistics: max error */
    double tensor_rms;  /* each gradient tensor: RMS error */
    double global_rms;  /* all gradients as one vector */
} tolerance;
static const tolerance LENET_TOL = {1e-4, 2e-2, 1e-2};
static const tolerance DEEP_TOL = {1e-3, 1e-1, 5e-2};
/* (b): the parameters' move over the 20 steps, and the parameters. */
static const double SGD_MOVE_RMS = 0.35, SGD_PARAMS_RMS = 5e-2;
static const float LR = 0.01f, MOMENTUM = 0.9f, WEIGHT_DECAY = 5e-4f;

/* A network built and initialised on one backend. */
typedef struct side {
    backend_ctx ctx;
    model m;
    int ready;        /* ctx initialised */
    int built;        /* m built on ctx */
} side;

typedef struct errors {
    double max, rms, global_rms;    /* the worst tensor by each measure; all as one */
    const char *max_at, *rms_at;
} errors;

static model_spec arch_spec(const char *arch, int depth, int width)
{
    int mnist = strcmp(arch, "lenet") == 0;
    model_spec s = {.depth = depth, .width = width, .dropout = -1, .classes = CLASSES,
                    .in_c = mnist ? 1 : 3, .in_h = mnist ? 28 : 32, .in_w = mnist ? 28 : 32};
    snprintf(s.arch, sizeof s.arch, "%s", arch);
    return s;
}

/* The GPU side's batch norm: the split kernels (batchnorm_split) when set. */
static int split_bn;

/* gpu: build on GPU 0 in fp32, else on the CPU; s was zeroed. Returns 0 or
 * -1 (a failed check). */
static int side_open(side *s, int gpu, const model_spec *spec, int batch, uint64_t seed)
{
    char err[512];
    if (gpu) {
        s->ready = backend_ctx_init_cuda(&s->ctx, 0, PRECISION_FP32, 0, err, sizeof err) == 0;
        CHECK(s->ready, "cuda:0 context: %s", err);
        s->ctx.batchnorm_split = split_bn;
    } else {
        backend_ctx_init_cpu(&s->ctx, 2);
        s->ready = 1;
    }
    if (!s->ready)
        return -1;
    s->built = model_build(&s->m, &s->ctx, spec, batch, 1, err, sizeof err) == 0;
    CHECK(s->built, "%s on %s: %s", spec->arch, gpu ? "cuda:0" : "cpu", err);
    if (!s->built)
        return -1;
    model_init_params(&s->m, &s->ctx, seed, 0);
    CHECK(backend_sync(&s->ctx) == 0, "%s init: %s", spec->arch, s->ctx.err);
    return backend_failed(&s->ctx) ? -1 : 0;
}

static void side_close(side *s)
{
    if (s->built)
        model_free(&s->m, &s->ctx);
    if (s->ready)
        backend_ctx_free(&s->ctx);
    memset(s, 0, sizeof *s);
}

/* A host copy of `count` floats of the side's memory (malloc'd; NULL if the
 * copy failed, with the check reported). */
static float *host_copy(side *s, const float *p, size_t count, const char *what)
{
    float *h = malloc((count ? count : 1) * sizeof(float));
    if (h)
        backend_download(&s->ctx, h, p, count * sizeof(float));
    CHECK(h && !backend_failed(&s->ctx), "%s: downloading %s: %s", s->m.spec.arch, what,
          s->ctx.err);
    if (h && backend_failed(&s->ctx)) {
        free(h);
        h = NULL;
    }
    return h;
}

/* The dropout draws of one step, the same on both sides. */
static void set_dropout(model *m, uint64_t seed, long step)
{
    model_set_dropout_step(m, philox_make_key(seed, 0, RNG_STREAM_DROPOUT), (uint64_t)step);
}

static void random_batch(float *images, int32_t *labels, size_t image_floats, int n)
{
    test_fill_uniform(images, (size_t)n * image_floats, 0.0, 1.0);
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)test_uniform(0, CLASSES);
}

/* max |d| and RMS of d = gpu - cpu over one tensor, with cpu's own max and
 * RMS (sums of squares in *_ss). NaN counts as infinitely wrong. */
static void tensor_diff(const float *gpu, const float *cpu, size_t count, double *dmax,
                        double *dss, double *cmax, double *css)
{
    *dmax = *dss = *cmax = *css = 0;
    for (size_t i = 0; i < count; i++) {
        double d = (double)gpu[i] - cpu[i], c = cpu[i];
        if (isnan(d))
            d = INFINITY;
        *dmax = fmax(*dmax, fabs(d));
        *dss += d * d;
        *cmax = fmax(*cmax, fabs(c));
        *css += c * c;
    }
}

/* Compares the tensors of one kind (parameters or gradients: is_stat 0; BN
 * statistics: 1) held as gpu[] and cpu[] in m's layout. Each tensor must be
 * within max_tol by max and rms_tol by RMS (INFINITY: not checked). */
static errors compare_tensors(const model *m, const float *gpu, const float *cpu, int is_stat,
                              double max_tol, double rms_tol, const char *what)
{
    errors e = {.max_at = "-", .rms_at = "-"};
    double scale_max = 0, scale_rms = 0, all_dss = 0, all_css = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int t = 0; t < m->ntensors; t++) {
            const tensor_info *ti = &m->tensors[t];
            if (ti->is_stat != is_stat || ti->count == 0)
                continue;
            double dmax, dss, cmax, css, n = (double)ti->count;
            tensor_diff(gpu + ti->offset, cpu + ti->offset, ti->count, &dmax, &dss, &cmax, &css);
            if (pass == 0) { /* the model's scale first */
                scale_max = fmax(scale_max, cmax);
                scale_rms = fmax(scale_rms, sqrt(css / n));
                all_dss += dss;
                all_css += css;
                continue;
            }
            double emax = dmax / (cmax + FLOOR * scale_max + 1e-30);
            double erms = sqrt(dss / n) / (sqrt(css / n) + FLOOR * scale_rms + 1e-30);
            CHECK(emax <= max_tol && erms <= rms_tol,
                  "%s %s %s: max error %.3g (tolerance %g), RMS error %.3g (tolerance %g); "
                  "max |cpu| %.3g", m->spec.arch, what, ti->name, emax, max_tol, erms, rms_tol,
                  cmax);
            if (!(emax < e.max)) {
                e.max = emax;
                e.max_at = ti->name;
            }
            if (!(erms < e.rms)) {
                e.rms = erms;
                e.rms_at = ti->name;
            }
        }
    e.global_rms = sqrt(all_dss / (all_css + 1e-300));
    printf("  %-7s %-10s max %.3g (%s), RMS %.3g (%s), all %.3g\n", m->spec.arch, what, e.max,
           e.max_at, e.rms, e.rms_at, e.global_rms);
    return e;
}

/* Logits of an inference pass on the batch, on the host (malloc'd). */
static float *infer_logits(side *s, const float *images, int n)
{
    size_t bytes = (size_t)n * s->m.spec.in_c * s->m.spec.in_h * s->m.spec.in_w * sizeof(float);
    const float *x = backend_stage(&s->ctx, s->m.input, images, bytes);
    const float *logits = model_forward(&s->m, &s->ctx, x, n, MODE_INFER);
    return host_copy(s, logits, (size_t)n * CLASSES, "logits");
}

/* max |gpu - cpu| over max |cpu| of n values. */
static double max_error(const float *gpu, const float *cpu, size_t n)
{
    double dmax, dss, cmax, css;
    tensor_diff(gpu, cpu, n, &dmax, &dss, &cmax, &css);
    return dmax / (cmax + 1e-30);
}

/* (a) One training step on each side from the same start, then the checks. */
static void check_step(const char *arch, int depth, int width, const tolerance *tol)
{
    model_spec spec = arch_spec(arch, depth, width);
    uint64_t seed = test_seed();
    side cpu = {0}, gpu = {0};
    size_t image_floats = (size_t)spec.in_c * spec.in_h * spec.in_w;
    float *images = malloc(BATCH * image_floats * sizeof(float));
    float *grads = NULL, *stats = NULL, *logits_gpu = NULL, *logits_cpu = NULL;
    int32_t labels[BATCH];
    int ok = images && side_open(&cpu, 0, &spec, BATCH, seed) == 0 &&
             side_open(&gpu, 1, &spec, BATCH, seed) == 0;
    if (ok) {
        random_batch(images, labels, image_floats, BATCH);
        set_dropout(&cpu.m, seed, 1);
        set_dropout(&gpu.m, seed, 1);
        int hits_cpu = 0, hits_gpu = 0;
        float loss_cpu = model_train_grads(&cpu.m, &cpu.ctx, images, labels, BATCH, &hits_cpu);
        float loss_gpu = model_train_grads(&gpu.m, &gpu.ctx, images, labels, BATCH, &hits_gpu);
        ok = backend_sync(&gpu.ctx) == 0 && !backend_failed(&cpu.ctx);
        CHECK(ok, "%s step: cuda:0: %s; cpu: %s", arch, gpu.ctx.err, cpu.ctx.err);
        double loss_err = fabs((double)loss_gpu - loss_cpu) / fabs((double)loss_cpu);
        CHECK(loss_err <= tol->forward, "%s: loss gpu %.9g cpu %.9g", arch, (double)loss_gpu,
              (double)loss_cpu);
        /* The logits agree to rounding; a near tie may still move one hit. */
        CHECK(abs(hits_gpu - hits_cpu) <= 1, "%s: %d hits on cuda:0, %d on cpu", arch, hits_gpu,
              hits_cpu);
        printf("  %-7s loss       gpu %.7f cpu %.7f, error %.3g\n", arch, (double)loss_gpu,
               (double)loss_cpu, loss_err);
    }
    if (ok && (grads = host_copy(&gpu, gpu.m.grads, gpu.m.nparams, "gradients"))) {
        errors e = compare_tensors(&cpu.m, grads, cpu.m.grads, 0, INFINITY, tol->tensor_rms,
                                   "gradients");
        CHECK(e.global_rms <= tol->global_rms, "%s: all gradients: RMS error %.3g (tolerance %g)",
              arch, e.global_rms, tol->global_rms);
    }
    /* The running statistics went through one update: a forward result. */
    if (ok && cpu.m.nstats && (stats = host_copy(&gpu, gpu.m.stats, gpu.m.nstats, "BN stats")))
        compare_tensors(&cpu.m, stats, cpu.m.stats, 1, tol->forward, INFINITY, "BN stats");
    if (ok && (logits_gpu = infer_logits(&gpu, images, BATCH)) &&
        (logits_cpu = infer_logits(&cpu, images, BATCH))) {
        double e = max_error(logits_gpu, logits_cpu, BATCH * CLASSES);
        CHECK(e <= tol->forward, "%s: inference logits: max error %.3g (tolerance %g)", arch, e,
              tol->forward);
        printf("  %-7s logits     max %.3g (inference pass after the step)\n", arch, e);
    }
    free(logits_gpu);
    free(logits_cpu);
    free(grads);
    free(stats);
    free(images);
    side_close(&gpu);
    side_close(&cpu);
}

/* RMS of (a - a0) - (b - b0) over RMS of a - a0: how far two trajectories
 * from the same start a0 = b0 have moved apart, relative to the move. */
static double move_error(const float *a, const float *b, const float *start, size_t n)
{
    double dss = 0, mss = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i], move = (double)b[i] - start[i];
        dss += isnan(d) ? INFINITY : d * d;
        mss += move * move;
    }
    return sqrt(dss / (mss + 1e-300));
}

/* (b) SGD_STEPS Nesterov steps of LeNet on each side, each on a fresh batch. */
static void check_sgd(void)
{
    model_spec spec = arch_spec("lenet", 0, 0);
    uint64_t seed = test_seed() + 1;
    side cpu = {0}, gpu = {0};
    int ok = side_open(&cpu, 0, &spec, BATCH, seed) == 0 &&
             side_open(&gpu, 1, &spec, BATCH, seed) == 0;
    size_t np = ok ? cpu.m.nparams : 0, image_floats = 28 * 28;
    float *start = ok ? host_copy(&gpu, gpu.m.params, np, "initial parameters") : NULL;
    float *v_cpu = calloc(np ? np : 1, sizeof(float));
    float *v_gpu = ok ? backend_alloc(&gpu.ctx, np * sizeof(float)) : NULL;
    float *images = malloc(BATCH * image_floats * sizeof(float)), *params = NULL;
    int32_t labels[BATCH];
    ok = ok && start && v_cpu && v_gpu && images;
    CHECK(!ok || memcmp(start, cpu.m.params, np * sizeof(float)) == 0,
          "lenet: the same seed initialised cuda:0 and cpu differently");
    if (ok)
        backend_zero(&gpu.ctx, v_gpu, np * sizeof(float));
    double worst_loss = 0;
    for (long step = 0; ok && step < SGD_STEPS; step++) {
        random_batch(images, labels, image_floats, BATCH);
        set_dropout(&cpu.m, seed, step);
        set_dropout(&gpu.m, seed, step);
        float lc = model_train_grads(&cpu.m, &cpu.ctx, images, labels, BATCH, NULL);
        float lg = model_train_grads(&gpu.m, &gpu.ctx, images, labels, BATCH, NULL);
        vec_sgd_momentum(&cpu.ctx, np, LR, MOMENTUM, WEIGHT_DECAY, 1, cpu.m.params, v_cpu,
                         cpu.m.grads);
        vec_sgd_momentum(&gpu.ctx, np, LR, MOMENTUM, WEIGHT_DECAY, 1, gpu.m.params, v_gpu,
                         gpu.m.grads);
        ok = !backend_failed(&gpu.ctx) && !backend_failed(&cpu.ctx);
        worst_loss = fmax(worst_loss, fabs((double)lg - lc) / fabs((double)lc));
    }
    CHECK(ok, "lenet SGD: cuda:0: %s; cpu: %s", gpu.ctx.err, cpu.ctx.err);
    if (ok && (params = host_copy(&gpu, gpu.m.params, np, "parameters"))) {
        errors e = compare_tensors(&cpu.m, params, cpu.m.params, 0, INFINITY, INFINITY,
                                   "params@20");
        double move = move_error(params, cpu.m.params, start, np);
        printf("  lenet   trajectory RMS error %.3g of the move; worst step loss error %.3g\n",
               move, worst_loss);
        CHECK(move <= SGD_MOVE_RMS && e.global_rms <= SGD_PARAMS_RMS,
              "lenet after %d steps: the move differs by %.3g (tolerance %g), the parameters "
              "by %.3g (tolerance %g)", SGD_STEPS, move, SGD_MOVE_RMS, e.global_rms,
              SGD_PARAMS_RMS);
    }
    if (v_gpu)
        backend_free(&gpu.ctx, v_gpu);
    free(params);
    free(start);
    free(v_cpu);
    free(images);
    side_close(&gpu);
    side_close(&cpu);
}

/* (c) A model far larger than any GPU: a clean failure, then a usable GPU. */
static void check_out_of_memory(void)
{
    model_spec spec = arch_spec("wrn", 28, 10);
    const int batch = 1 << 16;
    char err[512] = "";
    model m;
    int sized = model_build(&m, NULL, &spec, batch, 1, err, sizeof err) == 0;
    CHECK(sized, "sizing WRN-28-10: %s", err);
    size_t want = sized ? m.bytes : 0;
    if (sized)
        model_free(&m, NULL);
    backend_ctx ctx;
    if (backend_ctx_init_cuda(&ctx, 0, PRECISION_FP32, 0, err, sizeof err) != 0) {
        CHECK(0, "cuda:0 context: %s", err);
        return;
    }
    int rc = model_build(&m, &ctx, &spec, batch, 1, err, sizeof err);
    CHECK(rc == -1, "WRN-28-10 at batch %d (%zu bytes) was built on cuda:0", batch, want);
    if (rc == 0)
        model_free(&m, &ctx);
    else
        printf("  wrn-28-10 at batch %d needs %.0f GB: \"%s\"\n", batch, 1e-9 * (double)want, err);
    CHECK(rc == 0 || (strstr(err, "cuda:0") && strstr(err, "bytes")),
          "the message should name the GPU (cuda:0) and the bytes: \"%s\"", err);
    backend_ctx_free(&ctx);

    /* The failure was the context's, not the device's. */
    side s = {0};
    model_spec small = arch_spec("lenet", 0, 0);
    if (side_open(&s, 1, &small, BATCH, 1) == 0)
        CHECK(backend_sync(&s.ctx) == 0, "cuda:0 after the failure: %s", s.ctx.err);
    side_close(&s);
}

/* (d) Model a trains on each batch as it comes (slot 0, copy then
 * compute); model b as the runner does, with three pinned buffers going
 * round as the loader's do. A copy that ran before its slot's previous
 * reader had finished, a compute that did not wait for its copy, or a
 * buffer refilled while still being copied would change b's gradients.
 * Same context, deterministic algorithms: the same bits. */
static void check_staged(void)
{
    enum { STEPS = 7, BUFS = 3 };
    const model_spec spec = arch_spec("wrn", 16, 4); /* steps long enough to overlap */
    backend_ctx ctx;
    char err[512];
    if (backend_ctx_init_cuda(&ctx, 0, PRECISION_FP32, 1, err, sizeof err) != 0) {
        CHECK(0, "cuda:0 context: %s", err);
        return;
    }
    model a, b;
    int built = model_build(&a, &ctx, &spec, BATCH, 1, err, sizeof err) == 0;
    built = built && model_build(&b, &ctx, &spec, BATCH, 1, err, sizeof err) == 0;
    CHECK(built, "wrn-16-4 twice on cuda:0: %s", err);
    const size_t ex = (size_t)spec.in_c * spec.in_h * spec.in_w, xn = BATCH * ex;
    float *images = malloc(STEPS * xn * sizeof(float)), *pinned[BUFS];
    int32_t *labels = malloc(STEPS * BATCH * sizeof(int32_t)), *pinned_y[BUFS];
    for (int i = 0; i < BUFS; i++) {
        pinned[i] = backend_host_alloc(&ctx, xn * sizeof(float));
        pinned_y[i] = backend_host_alloc(&ctx, BATCH * sizeof(int32_t));
    }
    float *ga = malloc(a.nparams * sizeof(float)), *gb = malloc(a.nparams * sizeof(float));
    if (!built || backend_failed(&ctx)) {
        CHECK(0, "setup: %s", ctx.err);
        backend_ctx_free(&ctx);
        return;
    }
    model_init_params(&a, &ctx, 9, 0);
    model_init_params(&b, &ctx, 9, 0);
    for (int k = 0; k < STEPS; k++)
        random_batch(images + k * xn, labels + k * BATCH, ex, BATCH);
    /* The loader has filled all three buffers before the first step. */
    for (int k = 0; k < BUFS; k++) {
        memcpy(pinned[k], images + k * xn, xn * sizeof(float));
        memcpy(pinned_y[k], labels + k * BATCH, BATCH * sizeof(int32_t));
    }
    model_stage_batch(&b, &ctx, 0, pinned[0], pinned_y[0], BATCH);
    int same = 0;
    for (int k = 0; k < STEPS; k++) {
        set_dropout(&a, 9, k);
        set_dropout(&b, 9, k);
        model_train_grads(&a, &ctx, pinned[k % BUFS], pinned_y[k % BUFS], BATCH, NULL);
        backend_download(&ctx, ga, a.grads, a.nparams * sizeof(float));
        /* b: stage k + 1, train k, then refill k's buffer with k + 3. */
        const int next = (k + 1) % BUFS;
        if (k + 1 < STEPS)
            model_stage_batch(&b, &ctx, (k + 1) % BACKEND_STAGE_SLOTS, pinned[next],
                              pinned_y[next], BATCH);
        model_train_slot(&b, &ctx, k % BACKEND_STAGE_SLOTS, BATCH, NULL);
        if (k + BUFS < STEPS) {
            memcpy(pinned[k % BUFS], images + (k + BUFS) * xn, xn * sizeof(float));
            memcpy(pinned_y[k % BUFS], labels + (k + BUFS) * BATCH, BATCH * sizeof(int32_t));
        }
        backend_download(&ctx, gb, b.grads, b.nparams * sizeof(float));
        same += !backend_failed(&ctx) && memcmp(ga, gb, a.nparams * sizeof(float)) == 0;
    }
    CHECK(same == STEPS && !backend_failed(&ctx), "staged ahead: %d of %d steps have the "
          "gradients of staging just in time: %s", same, STEPS, ctx.err);
    printf("  %d wrn-16-4 steps staged ahead on the copy stream: %d bit for bit\n", STEPS, same);
    for (int i = 0; i < BUFS; i++) {
        backend_host_free(&ctx, pinned[i]);
        backend_host_free(&ctx, pinned_y[i]);
    }
    free(images);
    free(labels);
    free(ga);
    free(gb);
    model_free(&a, &ctx);
    model_free(&b, &ctx);
    backend_ctx_free(&ctx);
}

int main(void)
{
    if (backend_cuda_devices() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    test_init("gpu_model");
    printf("one training step at batch %d, cuda:0 fp32 vs cpu; errors relative to |cpu| + %g "
           "of the model's largest tensor:\n", BATCH, FLOOR);
    check_step("lenet", 0, 0, &LENET_TOL);
    check_step("allcnn", 0, 0, &DEEP_TOL);
    check_step("wrn", 16, 4, &DEEP_TOL);
    printf("the same with the split batch norm on the GPU (BN + ReLU fused):\n");
    split_bn = 1;
    check_step("allcnn", 0, 0, &DEEP_TOL);
    check_step("wrn", 16, 4, &DEEP_TOL);
    split_bn = 0;
    printf("%d Nesterov SGD steps of LeNet on each side:\n", SGD_STEPS);
    check_sgd();
    printf("out of memory:\n");
    check_out_of_memory();
    printf("batches staged ahead:\n");
    check_staged();
    return test_main_end();
}
