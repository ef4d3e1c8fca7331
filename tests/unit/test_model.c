/* Models: parameter counts of the paper's networks, tensor names, the
 * initialisation, the memory a model takes, and the whole-network gradient
 * (through residual adds, pooling, BN, dropout) against central differences
 * of the loss along random directions, evaluated in float64 from float32
 * forward passes at several step sizes. Tolerance: 3% relative on the
 * directional derivative. The gradients pass through buffers shared by
 * lifetime (models/plan.c), so a wrong plan fails them too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "testutil.h"

static model_spec spec(const char *arch, int c, int h, int depth, int width, float dropout)
{
    model_spec s = {.depth = depth, .width = width, .dropout = dropout, .classes = 10,
                    .in_c = c, .in_h = h, .in_w = h};
    snprintf(s.arch, sizeof s.arch, "%s", arch);
    return s;
}

static void check_count(const char *arch, int c, int h, int depth, int width, size_t want)
{
    model m;
    char err[256];
    model_spec s = spec(arch, c, h, depth, width, -1);
    int rc = model_build(&m, NULL, &s, 1, 1, err, sizeof err);
    CHECK(rc == 0, "%s: %s", arch, err);
    if (rc != 0)
        return;
    CHECK(m.nparams_logical == want, "%s %d-%d: %zu parameters, want %zu", arch, depth, width,
          m.nparams_logical, want);
    size_t sum = 0;
    for (int i = 0; i < m.ntensors; i++)
        sum += m.tensors[i].is_stat ? 0 : m.tensors[i].count;
    CHECK(sum == m.nparams_logical, "%s: named tensors cover %zu of %zu parameters", arch, sum,
          m.nparams_logical);
    model_free(&m, NULL);
}

/* Loss on a fixed batch with the current parameters, in training mode. */
static double loss_at(model *m, backend_ctx *ctx, const float *x, const int32_t *y, int n)
{
    return model_train_grads(m, ctx, x, y, n, NULL);
}

static void check_gradient(const char *arch, int c, int h, int depth, int width, int n)
{
    model m;
    char err[256];
    model_spec s = spec(arch, c, h, depth, width, 0.3f);
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    if (model_build(&m, &ctx, &s, n, 1, err, sizeof err) != 0) {
        CHECK(0, "%s: %s", arch, err);
        backend_ctx_free(&ctx);
        return;
    }
    model_init_params(&m, &ctx, test_seed(), 0);
    /* Dropout masks stay fixed: the same key and counter for every pass. */
    m.dropout_key = philox_make_key(test_seed(), 0, RNG_STREAM_DROPOUT);
    m.dropout_counter = 12345;
    size_t ex = (size_t)c * h * h;
    float *x = malloc((size_t)n * ex * sizeof(float));
    int32_t *y = malloc((size_t)n * sizeof(int32_t));
    test_fill_uniform(x, (size_t)n * ex, -1, 1);
    for (int i = 0; i < n; i++)
        y[i] = (int32_t)test_uniform(0, 10);
    float *w0 = malloc(m.nparams * sizeof(float)), *g = malloc(m.nparams * sizeof(float));
    float *d = malloc(m.nparams * sizeof(float));
    memcpy(w0, m.params, m.nparams * sizeof(float));
    loss_at(&m, &ctx, x, y, n);
    memcpy(g, m.grads, m.nparams * sizeof(float));
    /* One random direction per parameter tensor: a deep ReLU network is
     * only piecewise smooth, and moving one tensor crosses few kinks. */
    int checked = 0, passed = 0;
    for (int t = 0; t < m.ntensors; t++) {
        const tensor_info *ti = &m.tensors[t];
        if (ti->is_stat)
            continue;
        memset(d, 0, m.nparams * sizeof(float));
        test_fill_uniform(d + ti->offset, ti->count, -1, 1);
        double gd = 0, rms = 0;
        for (size_t i = ti->offset; i < ti->offset + ti->count; i++) {
            gd += (double)g[i] * d[i];
            rms += (double)w0[i] * w0[i] / (double)ti->count;
        }
        rms = fmax(sqrt(rms), 0.1);
        double best = INFINITY, fd_best = 0;
        for (double hstep = 1e-2; hstep >= 1e-5; hstep /= 3.1622776) {
            double scale = hstep * rms;
            for (size_t i = ti->offset; i < ti->offset + ti->count; i++)
                m.params[i] = w0[i] + (float)(scale * d[i]);
            double lp = loss_at(&m, &ctx, x, y, n);
            for (size_t i = ti->offset; i < ti->offset + ti->count; i++)
                m.params[i] = w0[i] - (float)(scale * d[i]);
            double lm = loss_at(&m, &ctx, x, y, n);
            double fd = (lp - lm) / (2 * scale);
            /* Relative error, allowing for the float32 loss's rounding. */
            double noise = 4e-7 * fabs(lp) / scale;
            double e = fmax(0.0, fabs(fd - gd) - noise) / (fabs(gd) + 1e-4);
            if (e < best)
                best = e, fd_best = fd;
        }
        memcpy(m.params + ti->offset, w0 + ti->offset, ti->count * sizeof(float));
        checked++;
        passed += best < 0.03;
        if (best >= 0.03)
            printf("  %s %s: directional derivative %.6g, finite difference %.6g\n", arch,
                   ti->name, gd, fd_best);
    }
    /* Kinks may still spoil an occasional tensor; a wrong backward spoils many. */
    CHECK(checked > 0 && passed >= checked - checked / 10,
          "%s %d-%d: %d of %d tensors' gradients match central differences", arch, depth, width,
          passed, checked);
    free(x);
    free(y);
    free(w0);
    free(g);
    free(d);
    model_free(&m, &ctx);
    backend_ctx_free(&ctx);
}

static void check_init(void)
{
    model m;
    char err[256];
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    model_spec s = spec("lenet", 1, 28, 0, 0, -1);
    CHECK(model_build(&m, &ctx, &s, 4, 1, err, sizeof err) == 0, "%s", err);
    model_init_params(&m, &ctx, 7, 0);
    const tensor_info *w = model_find_tensor(&m, "fc1.weight");
    const tensor_info *rv = model_find_tensor(&m, "bn1.running_var");
    const tensor_info *bw = model_find_tensor(&m, "bn3.weight");
    CHECK(w && rv && bw && model_find_tensor(&m, "conv1.weight") &&
          model_find_tensor(&m, "bn2.running_mean") && model_find_tensor(&m, "fc2.bias"),
          "LeNet tensor names");
    if (w && rv && bw) {
        double bound = 1.0 / sqrt(200.0), maxabs = 0, mean = 0;
        for (size_t i = 0; i < w->count; i++) {
            double v = m.params[w->offset + i];
            maxabs = fmax(maxabs, fabs(v));
            mean += v / (double)w->count;
        }
        CHECK(maxabs <= bound && maxabs > 0.95 * bound, "fc1.weight within U(+-%.4f): max %.4f",
              bound, maxabs);
        CHECK(fabs(mean) < 0.05 * bound, "fc1.weight mean %.5f", mean);
        CHECK(m.stats[rv->offset] == 1.0f && m.params[bw->offset] == 1.0f, "BN init");
    }
    float *first = malloc(m.nparams * sizeof(float));
    memcpy(first, m.params, m.nparams * sizeof(float));
    model_init_params(&m, &ctx, 7, 1);
    CHECK(memcmp(first, m.params, m.nparams * sizeof(float)) != 0, "replicas 0 and 1 share init");
    model_init_params(&m, &ctx, 7, 0);
    CHECK(memcmp(first, m.params, m.nparams * sizeof(float)) == 0, "init is not reproducible");
    free(first);
    model_free(&m, &ctx);

    s = spec("wrn", 3, 32, 10, 1, -1);
    CHECK(model_build(&m, &ctx, &s, 1, 1, err, sizeof err) == 0, "%s", err);
    model_init_params(&m, &ctx, 7, 0);
    const tensor_info *c2 = model_find_tensor(&m, "block3.layer.0.conv2.weight");
    if (c2) {
        double var = 0;
        for (size_t i = 0; i < c2->count; i++)
            var += (double)m.params[c2->offset + i] * m.params[c2->offset + i] / (double)c2->count;
        double want = 2.0 / (9 * 64);
        CHECK(fabs(var - want) < 0.1 * want, "WRN conv init variance %.3g, want %.3g", var, want);
    } else {
        CHECK(0, "WRN tensor block3.layer.0.conv2.weight missing");
    }
    model_free(&m, &ctx);
    backend_ctx_free(&ctx);
}

/* Bytes a model takes: a dry run (no context) gives what the build
 * allocates; WRN-28-10 trains at batch 128 in well under 10 GB, and its
 * evaluation model at batch 256 keeps no gradients and reuses activations. */
static void check_memory(void)
{
    model m;
    char err[256];
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    const char *archs[] = {"lenet", "wrn", "allcnn"};
    for (int a = 0; a < 3; a++)
        for (int train = 0; train < 2; train++) {
            model_spec s = a ? spec(archs[a], 3, 32, 10, 1, -1) : spec("lenet", 1, 28, 0, 0, -1);
            CHECK(model_build(&m, NULL, &s, 6, train, err, sizeof err) == 0, "%s", err);
            size_t counted = m.bytes;
            model_free(&m, NULL);
            CHECK(model_build(&m, &ctx, &s, 6, train, err, sizeof err) == 0, "%s", err);
            CHECK(m.bytes == counted, "%s train %d: a build takes %zu bytes, its dry run %zu",
                  archs[a], train, m.bytes, counted);
            int dys = 0;
            for (int i = 0; i < m.nlayers; i++)
                dys += m.layers[i].dy != NULL;
            CHECK(train ? dys == m.nlayers && m.grads : dys == 0 && !m.grads,
                  "%s train %d: %d of %d layers have a dy", archs[a], train, dys, m.nlayers);
            model_free(&m, &ctx);
        }
    backend_ctx_free(&ctx);

    model_spec s = spec("wrn", 3, 32, 28, 10, -1);
    CHECK(model_build(&m, NULL, &s, 128, 1, err, sizeof err) == 0, "%s", err);
    const size_t train_bytes = m.bytes;
    model_free(&m, NULL);
    CHECK(model_build(&m, NULL, &s, 256, 0, err, sizeof err) == 0, "%s", err);
    const size_t eval_bytes = m.bytes;
    model_free(&m, NULL);
    printf("WRN-28-10: training model at batch 128 %.3f GB, evaluation model at batch 256 "
           "%.3f GB\n", 1e-9 * (double)train_bytes, 1e-9 * (double)eval_bytes);
    CHECK(train_bytes < 10e9, "WRN-28-10 training at 128: %zu bytes", train_bytes);
    CHECK(eval_bytes < 2e9, "WRN-28-10 evaluation at 256: %zu bytes", eval_bytes);
}

/* The arena planned for bf16 activations (a GPU at bf16 precision, sized
 * with a plan context on the CPU): activations and their gradients take 2
 * bytes, the staged batches, labels, max-pool indices and BN saves keep
 * theirs, so the arena comes out at about half (between 45% and 60%); the
 * parameters, gradients and statistics do not change. A CPU at bf16 plans
 * fp32 activations. */
static size_t arena_bytes(const model *m)
{
    return m->bytes - (m->train ? 2 : 1) * m->nparams * sizeof(float) -
           m->nstats * sizeof(float);
}

static void check_bf16_plan(const model_spec *s, int batch, int train, const char *name)
{
    model m;
    char err[256];
    backend_ctx f32, bf16, cpu;
    backend_ctx_plan(&f32, 0, PRECISION_FP32);
    backend_ctx_plan(&bf16, 0, PRECISION_BF16);
    backend_ctx_plan(&cpu, -1, PRECISION_BF16);
    size_t total[3], arena[3];
    backend_ctx *plans[3] = {&f32, &bf16, &cpu};
    for (int p = 0; p < 3; p++) {
        int rc = model_build(&m, plans[p], s, batch, train, err, sizeof err);
        CHECK(rc == 0 && !m.params && !m.arena, "%s: a plan allocates nothing: %s", name, err);
        total[p] = m.bytes;
        arena[p] = arena_bytes(&m);
        model_free(&m, plans[p]);
    }
    const double ratio = (double)arena[1] / (double)arena[0];
    CHECK(ratio > 0.45 && ratio < 0.6, "%s train %d batch %d: bf16 arena %zu bytes, fp32 %zu "
          "(%.3f of it)", name, train, batch, arena[1], arena[0], ratio);
    CHECK(total[0] - arena[0] == total[1] - arena[1], "%s: parameters and statistics stay fp32",
          name);
    CHECK(total[2] == total[0], "%s: the CPU plans fp32 activations at bf16", name);
    if (batch == 128 && train)
        printf("%s train at batch %d: fp32 %.3f GB (activations arena %.3f GB), bf16 %.3f GB "
               "(arena %.3f GB, %.1f%%)\n", name, batch, 1e-9 * (double)total[0],
               1e-9 * (double)arena[0], 1e-9 * (double)total[1], 1e-9 * (double)arena[1],
               100.0 * ratio);
}

/* Training from a batch staged ahead in slot 1, with another batch staged
 * in slot 0 meanwhile, is bit for bit training on it directly: on the CPU
 * the slots hold the host pointers, so the second staging must not change
 * what the first slot's step reads. */
static void check_staged_slots(void)
{
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    model a, b;
    char err[256];
    model_spec s = spec("lenet", 1, 28, 0, 0, 0.3f);
    const int n = 4;
    if (model_build(&a, &ctx, &s, n, 1, err, sizeof err) != 0 ||
        model_build(&b, &ctx, &s, n, 1, err, sizeof err) != 0) {
        CHECK(0, "%s", err);
        return;
    }
    model_init_params(&a, &ctx, 7, 0);
    model_init_params(&b, &ctx, 7, 0);
    const size_t ex = 28 * 28;
    float *x = malloc(2 * n * ex * sizeof(float));
    test_fill_uniform(x, 2 * n * ex, -1, 1);
    int32_t y[8];
    for (int i = 0; i < 2 * n; i++)
        y[i] = (int32_t)test_uniform(0, 10);
    philox_key key = philox_make_key(3, 0, RNG_STREAM_DROPOUT);
    model_set_dropout_step(&a, key, 5);
    model_set_dropout_step(&b, key, 5);
    int ca = -1, cb = -2;
    float la = model_train_grads(&a, &ctx, x, y, n, &ca);
    model_stage_batch(&b, &ctx, 1, x, y, n);
    model_stage_batch(&b, &ctx, 0, x + n * ex, y + n, n);
    float lb = model_train_slot(&b, &ctx, 1, n, &cb);
    CHECK(!backend_failed(&ctx), "%s", ctx.err);
    CHECK(la == lb && ca == cb && memcmp(a.grads, b.grads, a.nparams * sizeof(float)) == 0,
          "a staged slot trains as the batch itself: loss %g vs %g", la, lb);
    float lc = model_train_slot(&b, &ctx, 0, n, NULL);
    float ld = model_train_grads(&a, &ctx, x + n * ex, y + n, n, NULL);
    CHECK(lc == ld, "the other slot: loss %g vs %g", lc, ld);
    free(x);
    model_free(&a, &ctx);
    model_free(&b, &ctx);
    backend_ctx_free(&ctx);
}

/* An evaluation model (shared activations) computes what a training model
 * does: evaluation, BN recomputation, and again evaluation; and it refuses
 * to train. */
static void check_eval_model(const char *arch, int c, int h, int depth, int width)
{
    model tm, em;
    char err[256];
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    model_spec s = spec(arch, c, h, depth, width, 0.3f);
    const int count = 20, batch = 8;
    if (model_build(&tm, &ctx, &s, batch, 1, err, sizeof err) != 0 ||
        model_build(&em, &ctx, &s, batch, 0, err, sizeof err) != 0) {
        CHECK(0, "%s: %s", arch, err);
        backend_ctx_free(&ctx);
        return;
    }
    model_init_params(&tm, &ctx, 3, 0);
    model_init_params(&em, &ctx, 3, 0);
    size_t ex = (size_t)c * h * h;
    float *x = malloc(count * ex * sizeof(float));
    int32_t y[20];
    test_fill_uniform(x, count * ex, -1, 1);
    for (int i = 0; i < count; i++)
        y[i] = (int32_t)test_uniform(0, 10);
    for (int pass = 0; pass < 2; pass++) {
        double tl, te, el, ee;
        model_evaluate(&tm, &ctx, x, y, count, &tl, &te);
        model_evaluate(&em, &ctx, x, y, count, &el, &ee);
        CHECK(isfinite(tl) && fabs(el - tl) <= 1e-6 * fabs(tl) && ee == te,
              "%s pass %d: evaluation model loss %.9g error %g, training model %.9g %g", arch,
              pass, el, ee, tl, te);
        model_recompute_bn(&tm, &ctx, x, count);
        model_recompute_bn(&em, &ctx, x, count);
    }
    CHECK(!backend_failed(&ctx), "%s: %s", arch, ctx.err);
    CHECK(isnan(model_train_grads(&em, &ctx, x, y, batch, NULL)) && backend_failed(&ctx) &&
              strstr(ctx.err, "evaluation"),
          "%s: an evaluation model trained (\"%s\")", arch, ctx.err);
    free(x);
    model_free(&tm, &ctx);
    model_free(&em, &ctx);
    backend_ctx_free(&ctx);
}

int main(void)
{
    test_init("model");
    check_count("lenet", 1, 28, 0, 0, 132220);
    check_count("allcnn", 3, 32, 0, 0, 1667166);
    check_count("wrn", 3, 32, 16, 4, 2748890);
    check_count("wrn", 3, 32, 28, 10, 36479194);
    check_init();
    check_memory();
    model_spec wrn2810 = spec("wrn", 3, 32, 28, 10, -1);
    check_bf16_plan(&wrn2810, 128, 1, "WRN-28-10");
    check_bf16_plan(&wrn2810, 256, 0, "WRN-28-10 eval");
    model_spec lenet = spec("lenet", 1, 28, 0, 0, -1), allcnn = spec("allcnn", 3, 32, 0, 0, -1);
    check_bf16_plan(&lenet, 37, 1, "LeNet");
    check_bf16_plan(&allcnn, 16, 1, "All-CNN");
    check_bf16_plan(&allcnn, 16, 0, "All-CNN eval");
    check_staged_slots();
    check_eval_model("lenet", 1, 28, 0, 0);
    check_eval_model("wrn", 3, 32, 10, 1);
    check_gradient("mlp", 1, 6, 0, 0, 5);
    check_gradient("lenet", 1, 28, 0, 0, 3);
    check_gradient("wrn", 3, 32, 10, 1, 2);
    check_gradient("allcnn", 3, 32, 0, 0, 2);
    return test_main_end();
}
