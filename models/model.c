/* Model construction (the layer list from builder.c and archs.c, then the
 * buffers), initialisation and the forward/backward driver. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "layers.h"


static size_t layer_in_size(const layer *l) { return (size_t)l->in_c * l->in_h * l->in_w; }

static size_t image_size(const model *m)
{
    return (size_t)m->spec.in_c * m->spec.in_h * m->spec.in_w;
}

int model_build(model *m, backend_ctx *ctx, const model_spec *spec, int max_batch, int train,
                char *err, size_t errlen)
{
    memset(m, 0, sizeof(*m));
    m->spec = *spec;
    m->train = train;
    if (m->spec.classes <= 0)
        m->spec.classes = 10;
    if (max_batch < 1 || spec->in_c < 1 || spec->in_h < 1 || spec->in_w < 1) {
        snprintf(err, errlen, "model: bad input shape %dx%dx%d or batch %d", spec->in_c,
                 spec->in_h, spec->in_w, max_batch);
        return -1;
    }
    m->max_batch = max_batch;
    m->act = ctx ? ctx->act : DTYPE_F32;
    net_builder b = {.m = m, .c = spec->in_c, .h = spec->in_h, .w = spec->in_w, .cur = -1};
    if (arch_build(&b, &m->spec, err, errlen) != 0) {
        model_free(m, ctx);
        return -1;
    }
    for (int i = 0; i < m->nlayers; i++) {
        const layer *l = &m->layers[i];
        if (l->src >= 0)
            m->layers[l->src].consumers++;
        if (l->src2 >= 0)
            m->layers[l->src2].consumers++;
    }
    m->nparams = model_param_align(m->nparams); /* whole blocks: no tail for vector loops */
    const size_t arena = b.failed ? SIZE_MAX : model_layout(m, NULL);
    if (arena == SIZE_MAX) {
        snprintf(err, errlen, "model: out of host memory building %s", spec->arch);
        model_free(m, ctx);
        return -1;
    }
    const size_t pbytes = m->nparams * sizeof(float), sbytes = m->nstats * sizeof(float);
    m->bytes = (train ? 2 : 1) * pbytes + sbytes + arena;
    if (!ctx || !ctx->ops) /* sizing only */
        return 0;
    m->params = backend_alloc(ctx, pbytes);
    m->grads = train ? backend_alloc(ctx, pbytes) : NULL;
    m->stats = backend_alloc(ctx, sbytes);
    m->arena = backend_alloc(ctx, arena);
    if (backend_failed(ctx) || model_layout(m, m->arena) == SIZE_MAX) {
        snprintf(err, errlen, "model: building %s for batch %d: %s", spec->arch, max_batch,
                 backend_failed(ctx) ? ctx->err : "out of host memory");
        model_free(m, ctx);
        return -1;
    }
    backend_zero(ctx, m->params, pbytes);
    if (train)
        backend_zero(ctx, m->grads, pbytes);
    backend_zero(ctx, m->stats, sbytes);
    return 0;
}

void model_free(model *m, backend_ctx *ctx)
{
    if (ctx && ctx->ops) {
        backend_free(ctx, m->params);
        backend_free(ctx, m->grads);
        backend_free(ctx, m->stats);
        backend_free(ctx, m->arena);
    }
    free(m->layers);
    free(m->tensors);
    memset(m, 0, sizeof(*m));
}

/* kaiming_uniform(a = sqrt(5)) for weights and U(-1/sqrt(fan_in), ..) for
 * biases reduce to the same bound 1/sqrt(fan_in). */
static void init_uniform(float *p, size_t count, float bound, philox_key key, size_t offset)
{
    for (size_t i = 0; i < count; i++)
        p[i] = bound * (2.0f * philox_uniform_at(key, 0, offset + i) - 1.0f);
}

/* N(0, std) by Box-Muller, from a counter range apart from the uniform draws. */
static void init_normal(float *p, size_t count, float std, philox_key key, size_t offset)
{
    const uint64_t base = (uint64_t)1 << 40;
    for (size_t i = 0; i < count; i++) {
        philox_out o = philox4x32(key, base + offset + i);
        float u1 = ((float)(o.v[0] >> 8) + 1.0f) * (1.0f / 16777216.0f); /* (0, 1] */
        float u2 = philox_uniform(o.v[1]);
        p[i] = std * sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
    }
}

/* The logical offset of the parameter tensor at `offset`: its draws are
 * numbered as if the tensors lay back to back, so aligning them changed no
 * initial value. */
static size_t logical_offset(const model *m, size_t offset)
{
    for (int i = 0; i < m->ntensors; i++)
        if (!m->tensors[i].is_stat && m->tensors[i].offset == offset)
            return m->tensors[i].logical;
    return offset; /* not reached: every layer's w and b are tensors */
}

/* The initial parameters and statistics into host arrays. */
static void init_host(const model *m, philox_key key, float *params, float *stats)
{
    for (int i = 0; i < m->nlayers; i++) {
        const layer *l = &m->layers[i];
        if (l->kind == LAYER_CONV || l->kind == LAYER_LINEAR) {
            size_t fan_in = l->kind == LAYER_CONV ? (size_t)l->in_c * l->conv.k * l->conv.k
                                                  : layer_in_size(l);
            float bound = 1.0f / sqrtf((float)fan_in);
            const size_t w = logical_offset(m, l->w);
            if (l->init_std > 0)
                init_normal(params + l->w, (size_t)l->out_c * fan_in, l->init_std, key, w);
            else
                init_uniform(params + l->w, (size_t)l->out_c * fan_in, bound, key, w);
            if (l->b != NO_TENSOR)
                init_uniform(params + l->b, (size_t)l->out_c, bound, key,
                             logical_offset(m, l->b));
        } else if (l->kind == LAYER_BN) {
            for (int c = 0; c < l->out_c; c++) {
                params[l->w + c] = 1.0f;
                params[l->b + c] = 0.0f;
                stats[l->rmean + c] = 0.0f;
                stats[l->rvar + c] = 1.0f;
            }
        }
    }
}

void model_init_params(model *m, backend_ctx *ctx, uint64_t seed, uint32_t replica)
{
    const size_t pbytes = m->nparams * sizeof(float), sbytes = m->nstats * sizeof(float);
    float *params = calloc(m->nparams ? m->nparams : 1, sizeof(float));
    float *stats = calloc(m->nstats ? m->nstats : 1, sizeof(float));
    if (params && stats) {
        init_host(m, philox_make_key(seed, replica, RNG_STREAM_INIT), params, stats);
        backend_upload(ctx, m->params, params, pbytes);
        backend_upload(ctx, m->stats, stats, sbytes);
        backend_sync(ctx); /* the host arrays must outlive the copies */
    } else {
        backend_fail(ctx, "model: out of host memory initialising %zu parameters", m->nparams);
    }
    free(params);
    free(stats);
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The profile's clock: on a GPU the layer's kernels must have finished, not
 * just been queued, so it waits for the device first. */
static double profile_clock(const model *m, backend_ctx *ctx)
{
    if (!m->profile)
        return 0.0;
    backend_sync(ctx);
    return wall_s();
}

static const float *layer_input(const model *m, int src, const float *x)
{
    return src < 0 ? x : m->layers[src].y;
}

static size_t act_bytes(const model *m, size_t count)
{
    return count * (m->act == DTYPE_BF16 ? 2 : sizeof(float));
}

const float *model_forward(model *m, backend_ctx *ctx, const float *x, int n,
                           enum forward_mode mode)
{
    for (int i = 0; i < m->nlayers; i++) {
        layer *l = &m->layers[i];
        double t0 = profile_clock(m, ctx);
        if (l->kind == LAYER_ADD) {
            size_t count = (size_t)n * l->out_size;
            backend_copy(ctx, l->y, layer_input(m, l->src, x), act_bytes(m, count));
            act_add(ctx, count, layer_input(m, l->src2, x), l->y);
        } else {
            l->forward(l, m, ctx, layer_input(m, l->src, x), n, mode);
        }
        if (m->profile)
            m->profile[2 * i] += profile_clock(m, ctx) - t0;
    }
    return m->layers[m->nlayers - 1].y;
}

/* Where layer `src`'s gradient goes: straight into its dy when this is its only
 * consumer, else into the scratch, to be added by grad_deliver. */
static float *grad_target(model *m, int src)
{
    if (src < 0)
        return NULL;
    return m->layers[src].consumers == 1 ? m->layers[src].dy : m->grad_scratch;
}

/* Consumers run backward in reverse order, so the first to deliver copies and
 * the later ones add. */
static void grad_deliver(model *m, backend_ctx *ctx, int src, const float *g, int n,
                         unsigned char *delivered)
{
    if (src < 0)
        return;
    layer *s = &m->layers[src];
    size_t count = (size_t)n * s->out_size;
    if (!delivered[src]) {
        if (g != s->dy)
            backend_copy(ctx, s->dy, g, act_bytes(m, count));
        delivered[src] = 1;
    } else {
        act_add(ctx, count, g, s->dy);
    }
}

static int fits(const model *m, backend_ctx *ctx, int n)
{
    if (n <= m->max_batch)
        return 1;
    backend_fail(ctx, "model: a batch of %d, built for at most %d", n, m->max_batch);
    return 0;
}

const float *model_stage_input(model *m, backend_ctx *ctx, const float *images, int n)
{
    if (!fits(m, ctx, n))
        return NULL;
    const size_t count = (size_t)n * image_size(m);
    const float *x = backend_stage(ctx, m->input, images, count * sizeof(float));
    return act_from_f32(ctx, count, x, m->input_act);
}

static const int32_t *stage_labels(model *m, backend_ctx *ctx, const int32_t *labels, int n)
{
    return backend_stage(ctx, m->labels, labels, (size_t)n * sizeof(int32_t));
}

void model_stage_batch(model *m, backend_ctx *ctx, int slot, const float *images,
                       const int32_t *labels, int n)
{
    if (!m->train) {
        backend_fail(ctx, "model: built for evaluation, it has no gradients");
        return;
    }
    if (!fits(m, ctx, n))
        return;
    m->staged_x[slot] = backend_stage_async(ctx, slot, m->slot_x[slot], images,
                                            (size_t)n * image_size(m) * sizeof(float));
    m->staged_y[slot] = backend_stage_async(ctx, slot, m->slot_y[slot], labels,
                                            (size_t)n * sizeof(int32_t));
}

float model_train_grads(model *m, backend_ctx *ctx, const float *images, const int32_t *labels,
                        int n, int *correct)
{
    model_stage_batch(m, ctx, 0, images, labels, n);
    return model_train_slot(m, ctx, 0, n, correct);
}

float model_train_slot(model *m, backend_ctx *ctx, int slot, int n, int *correct)
{
    if (!m->train) {
        backend_fail(ctx, "model: built for evaluation, it has no gradients");
        return NAN;
    }
    backend_stage_wait(ctx, slot);
    const float *x = act_from_f32(ctx, (size_t)n * image_size(m), m->staged_x[slot],
                                  m->input_act);
    const int32_t *y = m->staged_y[slot];
    /* From a failure on, every op below is skipped and the loss is NaN. */
    const float *logits = model_forward(m, ctx, x, n, MODE_TRAIN);
    layer *last = &m->layers[m->nlayers - 1];
    float loss = softmax_xent(ctx, n, m->spec.classes, logits, y, last->dy, correct);
    unsigned char delivered[m->nlayers];
    memset(delivered, 0, sizeof delivered);
    for (int i = m->nlayers - 1; i >= 0; i--) {
        layer *l = &m->layers[i];
        double t0 = profile_clock(m, ctx);
        if (l->kind == LAYER_ADD) {
            grad_deliver(m, ctx, l->src, l->dy, n, delivered);
            grad_deliver(m, ctx, l->src2, l->dy, n, delivered);
        } else {
            float *dx = grad_target(m, l->src);
            l->backward(l, m, ctx, layer_input(m, l->src, x), l->dy, dx, n);
            if (dx)
                grad_deliver(m, ctx, l->src, dx, n, delivered);
        }
        if (m->profile)
            m->profile[2 * i + 1] += profile_clock(m, ctx) - t0;
    }
    /* The batch was read last by the first layer's backward, queued above. */
    backend_stage_done(ctx, slot);
    return loss;
}

void model_evaluate(model *m, backend_ctx *ctx, const float *images, const int32_t *labels,
                    int count, double *loss, double *error)
{
    double loss_sum = 0;
    long wrong = 0;
    for (int i = 0; i < count; i += m->max_batch) {
        int n = count - i < m->max_batch ? count - i : m->max_batch;
        int correct = 0;
        const float *x = model_stage_input(m, ctx, images + (size_t)i * image_size(m), n);
        const int32_t *y = stage_labels(m, ctx, labels + i, n);
        const float *logits = model_forward(m, ctx, x, n, MODE_INFER);
        loss_sum += (double)softmax_xent(ctx, n, m->spec.classes, logits, y, NULL, &correct) * n;
        wrong += n - correct;
    }
    *loss = count ? loss_sum / count : 0.0;
    *error = count ? (double)wrong / count : 0.0;
}

void model_recompute_bn(model *m, backend_ctx *ctx, const float *images, int count)
{
    m->bn_batches = 0;
    for (int i = 0; i < count; i += m->max_batch) {
        int n = count - i < m->max_batch ? count - i : m->max_batch;
        if (n < 2)
            break; /* a batch of one has no variance */
        const float *x = model_stage_input(m, ctx, images + (size_t)i * image_size(m), n);
        model_forward(m, ctx, x, n, MODE_BN_RECOMPUTE);
        m->bn_batches++;
    }
}

const tensor_info *model_find_tensor(const model *m, const char *name)
{
    for (int i = 0; i < m->ntensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return &m->tensors[i];
    return NULL;
}

/* Tensors are registered in order, so both offsets grow with the index:
 * packing moves each tensor down (never over one not yet moved), unpacking
 * moves them up from the last. */
void model_pack_params(const model *m, float *v)
{
    for (int i = 0; i < m->ntensors; i++) {
        const tensor_info *t = &m->tensors[i];
        if (!t->is_stat && t->logical != t->offset)
            memmove(v + t->logical, v + t->offset, t->count * sizeof(float));
    }
}

void model_unpack_params(const model *m, float *v)
{
    size_t end = m->nparams; /* where the tensor above the current one starts */
    for (int i = m->ntensors - 1; i >= 0; i--) {
        const tensor_info *t = &m->tensors[i];
        if (t->is_stat)
            continue;
        if (t->logical != t->offset)
            memmove(v + t->offset, v + t->logical, t->count * sizeof(float));
        memset(v + t->offset + t->count, 0, (end - t->offset - t->count) * sizeof(float));
        end = t->offset;
    }
    memset(v, 0, end * sizeof(float));
}
