/* Aligned parameters (issue 25): every parameter tensor of every arch starts
 * at a multiple of MODEL_PARAM_ALIGN floats (256 bytes) in params and grads,
 * the buffers' bases and the arena's buffers are 256-byte aligned, the real
 * parameter count is kept apart from the padded length; the initial values
 * are the unpadded layout's (each tensor's Philox draws numbered from its
 * logical offset, recomputed here from philox directly); the padding stays
 * zero through training steps and every optimizer and coupling update, and
 * through a Parle job through the runner (syncs, master, checkpoints kept in
 * the logical layout, a resume equal bit for bit). */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "model.h"
#include "runner.h"
#include "safetensors.h"
#include "testjob.h"
#include "testutil.h"

static model_spec spec(const char *arch, int c, int h, int depth, int width)
{
    model_spec s = {.depth = depth, .width = width, .dropout = -1, .classes = 10, .in_c = c,
                    .in_h = h, .in_w = h};
    snprintf(s.arch, sizeof s.arch, "%s", arch);
    return s;
}

/* Whether every float of v outside the parameter tensors is zero. */
static int padding_zero(const model *m, const float *v)
{
    size_t at = 0, bad = 0;
    for (int i = 0; i < m->ntensors; i++) {
        const tensor_info *t = &m->tensors[i];
        if (t->is_stat)
            continue;
        for (; at < t->offset; at++)
            bad += v[at] != 0.0f;
        at = t->offset + t->count;
    }
    for (; at < m->nparams; at++)
        bad += v[at] != 0.0f;
    return bad == 0;
}

static int aligned(const void *p) { return ((uintptr_t)p & 255) == 0; }

/* The layout of one arch (a dry run): aligned offsets, tensors in order
 * without overlap, logical offsets back to back, the real count. */
static void check_layout(const char *name, const model_spec *s, size_t want)
{
    model m;
    char err[256];
    int rc = model_build(&m, NULL, s, 1, 1, err, sizeof err);
    CHECK(rc == 0, "%s: %s", name, err);
    if (rc != 0)
        return;
    size_t logical = 0, end = 0, stats = 0;
    int misaligned = 0, disordered = 0, tensors = 0;
    for (int i = 0; i < m.ntensors; i++) {
        const tensor_info *t = &m.tensors[i];
        if (t->is_stat) {
            disordered += t->offset != stats || t->logical != stats;
            stats += t->count;
            continue;
        }
        tensors++;
        misaligned += t->offset % MODEL_PARAM_ALIGN != 0;
        disordered += t->offset < end || t->logical != logical;
        end = t->offset + t->count;
        logical += t->count;
    }
    CHECK(misaligned == 0, "%s: %d of %d parameter tensors start off a multiple of %d floats",
          name, misaligned, tensors, MODEL_PARAM_ALIGN);
    CHECK(disordered == 0, "%s: %d tensors overlap or are out of logical order", name,
          disordered);
    CHECK(m.nparams_logical == logical && (want == 0 || logical == want),
          "%s: %zu parameters counted, the tensors hold %zu, want %zu", name, m.nparams_logical,
          logical, want);
    CHECK(m.nparams % MODEL_PARAM_ALIGN == 0 && m.nparams >= end && m.nstats == stats,
          "%s: buffer of %zu floats, tensors end at %zu", name, m.nparams, end);
    printf("%-10s %9zu parameters in %3d tensors, buffer %9zu floats: %6zu bytes of padding "
           "(%.3f%%)\n", name, logical, tensors, m.nparams, (m.nparams - logical) * sizeof(float),
           100.0 * (double)(m.nparams - logical) / (double)logical);
    model_free(&m, NULL);
}

/* PyTorch's default draws of init_uniform / init_normal (models/model.c),
 * at the unpadded layout's counters. */
static float want_uniform(philox_key key, size_t at, float bound)
{
    return bound * (2.0f * philox_uniform_at(key, 0, at) - 1.0f);
}

static float want_normal(philox_key key, size_t at, float std)
{
    philox_out o = philox4x32(key, ((uint64_t)1 << 40) + at);
    float u1 = ((float)(o.v[0] >> 8) + 1.0f) * (1.0f / 16777216.0f);
    float u2 = philox_uniform(o.v[1]);
    return std * sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

/* The logical offset of the parameter tensor at `offset`, counted here
 * (tensors back to back), not taken from tensor_info. */
static size_t unpadded_offset(const model *m, size_t offset)
{
    size_t at = 0;
    for (int i = 0; i < m->ntensors; i++) {
        if (m->tensors[i].is_stat)
            continue;
        if (m->tensors[i].offset == offset)
            return at;
        at += m->tensors[i].count;
    }
    return SIZE_MAX;
}

/* Initial values against philox at the unpadded offsets; padding zero;
 * packing gives the tensors back to back and unpacking restores the buffer. */
static void check_init(const char *name, const model_spec *s)
{
    model m;
    char err[256];
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    if (model_build(&m, &ctx, s, 2, 1, err, sizeof err) != 0) {
        CHECK(0, "%s: %s", name, err);
        backend_ctx_free(&ctx);
        return;
    }
    CHECK(aligned(m.params) && aligned(m.grads) && aligned(m.stats) && aligned(m.arena),
          "%s: buffers at %p %p %p %p", name, (void *)m.params, (void *)m.grads,
          (void *)m.stats, m.arena);
    int unaligned_acts = 0;
    for (int i = 0; i < m.nlayers; i++)
        unaligned_acts += !aligned(m.layers[i].y) || !aligned(m.layers[i].dy);
    CHECK(unaligned_acts == 0, "%s: %d layers' activations off 256 bytes", name, unaligned_acts);
    const uint64_t seed = 11;
    const uint32_t rep = 2;
    model_init_params(&m, &ctx, seed, rep);
    const philox_key key = philox_make_key(seed, rep, RNG_STREAM_INIT);
    size_t checked = 0, wrong = 0;
    for (int i = 0; i < m.nlayers; i++) {
        const layer *l = &m.layers[i];
        if (l->kind != LAYER_CONV && l->kind != LAYER_LINEAR)
            continue;
        size_t fan_in = l->kind == LAYER_CONV ? (size_t)l->in_c * l->conv.k * l->conv.k
                                              : (size_t)l->in_c * l->in_h * l->in_w;
        float bound = 1.0f / sqrtf((float)fan_in), tol = 1e-6f * fmaxf(bound, 6 * l->init_std);
        size_t w = unpadded_offset(&m, l->w), count = (size_t)l->out_c * fan_in;
        for (size_t j = 0; j < count; j++) {
            float want = l->init_std > 0 ? want_normal(key, w + j, l->init_std)
                                         : want_uniform(key, w + j, bound);
            wrong += !(fabsf(m.params[l->w + j] - want) <= tol);
        }
        checked += count;
        if (l->b != NO_TENSOR) {
            size_t b = unpadded_offset(&m, l->b);
            for (int j = 0; j < l->out_c; j++)
                wrong += !(fabsf(m.params[l->b + j] - want_uniform(key, b + j, bound)) <=
                           1e-6f * bound);
            checked += (size_t)l->out_c;
        }
    }
    CHECK(checked > 0 && wrong == 0, "%s: %zu of %zu initial weights differ from the unpadded "
          "layout's draws", name, wrong, checked);
    CHECK(padding_zero(&m, m.params), "%s: padding not zero after init", name);

    float *v = malloc(m.nparams * sizeof(float)), *cat = malloc(m.nparams * sizeof(float));
    memcpy(v, m.params, m.nparams * sizeof(float));
    size_t at = 0;
    for (int i = 0; i < m.ntensors; i++)
        if (!m.tensors[i].is_stat) {
            memcpy(cat + at, m.params + m.tensors[i].offset, m.tensors[i].count * sizeof(float));
            at += m.tensors[i].count;
        }
    model_pack_params(&m, v);
    CHECK(at == m.nparams_logical && memcmp(v, cat, at * sizeof(float)) == 0,
          "%s: packing does not give the tensors back to back", name);
    for (size_t i = at; i < m.nparams; i++)
        v[i] = 1.0f; /* what lies past the packed vector must not matter */
    model_unpack_params(&m, v);
    CHECK(memcmp(v, m.params, m.nparams * sizeof(float)) == 0,
          "%s: unpacking does not restore the buffer", name);
    free(v);
    free(cat);
    model_free(&m, &ctx);
    backend_ctx_free(&ctx);
}

/* Training steps on a batch with dropout, each followed by every optimizer
 * and coupling update on the flat vectors (weight decay, momentum, Parle's
 * inner and outer steps, Elastic-SGD, the mean of two replicas, axpby and
 * scale): the padding of params, grads and every state vector stays zero. */
static void check_updates(const char *name, model_spec s)
{
    model m;
    char err[256];
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    s.dropout = 0.3f;
    const int n = 4;
    if (model_build(&m, &ctx, &s, n, 1, err, sizeof err) != 0) {
        CHECK(0, "%s: %s", name, err);
        backend_ctx_free(&ctx);
        return;
    }
    model_init_params(&m, &ctx, 5, 0);
    const size_t np = m.nparams, ex = (size_t)s.in_c * s.in_h * s.in_w;
    enum { U, V, Z, XHAT, OTHER, OU, MEAN, NVEC };
    float *vec[NVEC];
    for (int i = 0; i < NVEC; i++)
        vec[i] = calloc(np, sizeof(float));
    memcpy(vec[XHAT], m.params, np * sizeof(float));
    memcpy(vec[OTHER], m.params, np * sizeof(float));
    float *x = malloc(n * ex * sizeof(float));
    int32_t y[4];
    test_fill_uniform(x, n * ex, -1, 1);
    for (int i = 0; i < n; i++)
        y[i] = (int32_t)test_uniform(0, 10);
    int grads_ok = 1, loss_ok = 1;
    for (int step = 0; step < 3; step++) {
        model_set_dropout_step(&m, philox_make_key(5, 0, RNG_STREAM_DROPOUT), (uint64_t)step);
        loss_ok &= isfinite(model_train_grads(&m, &ctx, x, y, n, NULL));
        grads_ok &= padding_zero(&m, m.grads);
        vec_sgd_momentum(&ctx, np, 0.05f, 0.9f, 5e-4f, 1, vec[OTHER], vec[OU], m.grads);
        vec_parle_inner(&ctx, np, 0.05f, 0.9f, 1e-4f, 0.03f, 0.75f, m.params, vec[Z], vec[V],
                        m.grads, vec[XHAT]);
        vec_elastic_step(&ctx, np, 0.05f, 0.9f, 1e-4f, 0.5f, vec[OTHER], vec[OU], m.grads,
                         vec[XHAT]);
    }
    const float *const two[2] = {m.params, vec[OTHER]};
    vec_mean(&ctx, np, two, 2, vec[MEAN]);
    vec_parle_outer(&ctx, np, 0.1f, 0.9f, 0.5f, vec[XHAT], vec[U], vec[XHAT], vec[Z], vec[MEAN]);
    vec_axpby(&ctx, np, 0.5f, vec[MEAN], 0.5f, m.params);
    vec_scale(&ctx, np, 0.99f, vec[OTHER]);
    double d2 = vec_dist2(&ctx, np, m.params, vec[XHAT]);
    CHECK(!backend_failed(&ctx) && loss_ok, "%s: %s", name, ctx.err);
    CHECK(grads_ok, "%s: a gradient was written into the padding", name);
    int vecs_ok = padding_zero(&m, m.params) && padding_zero(&m, m.grads);
    for (int i = 0; i < NVEC; i++)
        vecs_ok &= padding_zero(&m, vec[i]);
    CHECK(vecs_ok, "%s: the updates left non-zero padding", name);
    CHECK(isfinite(d2) && d2 > 0, "%s: the updates moved nothing (%g)", name, d2);
    for (int i = 0; i < NVEC; i++)
        free(vec[i]);
    free(x);
    model_free(&m, &ctx);
    backend_ctx_free(&ctx);
}

/* The first replica file of the newest checkpoint under dir, or "". */
static void newest_replica_file(const char *dir, char *out, size_t len)
{
    DIR *d = opendir(dir);
    char best[256] = "";
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] == 'k' && strcmp(e->d_name, best) > 0)
            snprintf(best, sizeof best, "%s", e->d_name);
    if (d)
        closedir(d);
    out[0] = '\0';
    if (best[0])
        snprintf(out, len, "%s/%s/replica0.safetensors", dir, best);
}

/* Parle (2 LeNet replicas, L = 2, Nesterov momentum, weight decay) through
 * the runner: the master after the syncs has zero padding; a checkpoint
 * keeps each rule vector packed (nparams_logical floats, as before the
 * alignment), a vector of the padded length is refused naming the file;
 * a stopped and resumed run ends with the uninterrupted run's master. */
static void check_parle_job(void)
{
    job_config cfg;
    test_synthetic_job(&cfg, "lenet", 2, 2, 7);
    cfg.data.train_limit = 192;
    cfg.data.test_limit = 64;
    cfg.algorithm.L = 2;
    cfg.optim.momentum = 0.9;
    cfg.optim.nesterov = true;
    cfg.optim.weight_decay = 5e-4;
    cfg.checkpoint.every_epochs = 1;
    cfg.checkpoint.keep = 1;
    char tmpl[] = "/tmp/parle-align-XXXXXX";
    CHECK(mkdtemp(tmpl) != NULL, "mkdtemp");
    char da[128], db[128], cmd[300], err[512];
    snprintf(da, sizeof da, "%s/a", tmpl);
    snprintf(db, sizeof db, "%s/b", tmpl);
    run_result res;
    test_watch a = {0};
    int rc = test_run_job(&cfg, NULL, da, &a, &res, err, sizeof err);
    CHECK(rc == 0 && a.final, "Parle job: %s", err);

    model m;
    model_spec s = spec("lenet", 1, 28, 0, 0);
    CHECK(model_build(&m, NULL, &s, 1, 1, err, sizeof err) == 0, "%s", err);
    if (rc == 0 && a.final) {
        CHECK(a.n == m.nparams && padding_zero(&m, a.final),
              "Parle job: the master's padding is not zero (%zu floats)", a.n);
        double sq = 0;
        for (size_t i = 0; i < a.n; i++)
            sq += (double)a.final[i] * a.final[i];
        CHECK(isfinite(sq) && sq > 0, "Parle job: master %g", sq);
    }

    char path[400];
    newest_replica_file(da, path, sizeof path);
    float *x = malloc(m.nparams * sizeof(float));
    tensor_info t = {.name = "x", .ndim = 1, .count = m.nparams_logical,
                     .shape = {(int)m.nparams_logical}};
    float *data[1] = {x};
    CHECK(path[0] && safetensors_read_tensors(path, &t, data, 1, NULL, err, sizeof err) == 0,
          "checkpoint %s: the rule's x of %zu floats: %s", path, m.nparams_logical, err);
    t.count = m.nparams;
    t.shape[0] = (int)m.nparams;
    CHECK(safetensors_read_tensors(path, &t, data, 1, NULL, err, sizeof err) != 0 &&
              strstr(err, path) && strstr(err, "shape"),
          "a padded-length read of %s: \"%s\"", path, err);
    free(x);
    model_free(&m, NULL);

    test_watch b = {.stop_after_eval = 1}, b2 = {0};
    CHECK(test_run_job(&cfg, NULL, db, &b, &res, err, sizeof err) == 0 && res.stopped,
          "stopped Parle job: %s", err);
    CHECK(test_run_job(&cfg, NULL, db, &b2, &res, err, sizeof err) == 0 && b2.final &&
              b2.resumes == 1,
          "resumed Parle job: %s", err);
    CHECK(a.final && b2.final && a.n == b2.n &&
              memcmp(a.final, b2.final, a.n * sizeof(float)) == 0,
          "a resumed Parle job differs from the uninterrupted one");
    free(a.final);
    free(b.final);
    free(b2.final);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpl);
    CHECK(system(cmd) == 0, "%s", cmd);
}

int main(void)
{
    test_init("align");
    struct { const char *name; model_spec s; size_t count; } archs[] = {
        {"lenet", spec("lenet", 1, 28, 0, 0), 132220},
        {"mlp", spec("mlp", 1, 28, 0, 0), 0},
        {"allcnn", spec("allcnn", 3, 32, 0, 0), 1667166},
        {"wrn-10-1", spec("wrn", 3, 32, 10, 1), 0},
        {"wrn-16-4", spec("wrn", 3, 32, 16, 4), 2748890},
        {"wrn-28-10", spec("wrn", 3, 32, 28, 10), 36479194},
    };
    const int narchs = (int)(sizeof archs / sizeof archs[0]);
    for (int i = 0; i < narchs; i++)
        check_layout(archs[i].name, &archs[i].s, archs[i].count);
    for (int i = 0; i < narchs - 1; i++) /* WRN-28-10's 36M draws: its layout is enough */
        check_init(archs[i].name, &archs[i].s);
    check_updates("lenet", archs[0].s);
    check_updates("mlp", archs[1].s);
    check_updates("wrn-10-1", archs[3].s);
    check_parle_job();
    return test_main_end();
}
