/* Forward/backward pairs for each layer kind: thin wrappers that bind a
 * layer's offsets in the flat buffers to the backend ops. */
#include "layers.h"

static float *param(model *m, size_t off) { return off == NO_TENSOR ? NULL : m->params + off; }
static float *grad(model *m, size_t off) { return off == NO_TENSOR ? NULL : m->grads + off; }

static void conv_forward(layer *l, model *m, backend_ctx *ctx, const float *x, int n,
                         enum forward_mode mode)
{
    (void)mode;
    conv2d_forward(ctx, &l->conv, n, x, param(m, l->w), param(m, l->b), l->y);
}

/* A BN layer whose only consumer is the ReLU right after it runs that ReLU
 * in its own passes with batch statistics (batchnorm_relu_*): it writes the
 * ReLU's output and, backward, reads the ReLU's dy, and the ReLU does
 * nothing. The plan's lifetimes still hold: the ReLU's y is written one step
 * early, when nothing but BN's input can have ended (kept for BN's backward
 * in training; in an evaluation model sharing its bytes, element for
 * element), and its y and dy are read one step late, when only BN's dx can
 * have started in their bytes, each element read before dx's is written.
 * Layer indices, and so dropout's draws, stay as they were. */
static int bn_feeds_relu(const model *m, int i)
{
    return i >= 0 && i + 1 < m->nlayers && m->layers[i].kind == LAYER_BN &&
           m->layers[i].consumers == 1 && m->layers[i + 1].kind == LAYER_RELU &&
           m->layers[i + 1].src == i;
}

static int fused_relu(const layer *l, const model *m, enum forward_mode mode)
{
    return mode != MODE_INFER && bn_feeds_relu(m, l->src);
}

/* Such a pair whose ReLU feeds only a max pooling with tiling windows: where
 * the backend fuses the three (batchnorm_relu_maxpool_*), BN writes the
 * pool's y and argmax and, backward, reads the pool's dy, and the ReLU and
 * the pool do nothing; plan.c keeps those buffers alive from BN's forward to
 * its backward (layer_fused_into). */
static int bn_relu_feeds_pool(const model *m, int i)
{
    if (!bn_feeds_relu(m, i) || i + 2 >= m->nlayers || m->layers[i + 1].consumers != 1)
        return 0;
    const layer *p = &m->layers[i + 2];
    return p->kind == LAYER_MAXPOOL && p->src == i + 1 && p->pool.stride == p->pool.k &&
           p->pool.pad == 0;
}

static int fused_pool(const model *m, backend_ctx *ctx, int i, enum forward_mode mode)
{
    return mode != MODE_INFER && bn_relu_feeds_pool(m, i) &&
           backend_fuses_bn_relu_maxpool(ctx, &m->layers[i + 2].pool);
}

/* A convolution on the model's input (no data gradient) whose output feeds
 * only such a BN: where the backend has it (conv2d_backward_filter_bn_relu_
 * maxpool), BN's backward only sums (dgamma, dbeta) and the convolution's
 * takes its filter gradient from them, the pool's dy and argmax and its own
 * output, BN's input, so that BN's dx, conv1-sized, is never written.
 * plan.c keeps those buffers alive until the convolution's backward
 * (layer_fused_into, layer_backward_reads). */
static int conv_feeds_bn_pool(const model *m, int i)
{
    return i >= 0 && m->layers[i].kind == LAYER_CONV && m->layers[i].src < 0 &&
           m->layers[i].consumers == 1 && i + 1 < m->nlayers && m->layers[i + 1].src == i &&
           bn_relu_feeds_pool(m, i + 1);
}

static int fused_conv(const model *m, backend_ctx *ctx, int i)
{
    return conv_feeds_bn_pool(m, i) && fused_pool(m, ctx, i + 1, MODE_TRAIN) &&
           backend_fuses_conv_filter_bn(ctx, &m->layers[i].conv, &m->layers[i + 3].pool);
}

int layer_fused_into(const model *m, int i)
{
    if (i < 2 || !bn_relu_feeds_pool(m, i - 2))
        return i;
    return conv_feeds_bn_pool(m, i - 3) ? i - 3 : i - 2;
}

static void conv_backward(layer *l, model *m, backend_ctx *ctx, const float *x, const float *dy,
                          float *dx, int n)
{
    const int i = (int)(l - m->layers);
    if (fused_conv(m, ctx, i)) {
        const layer *bn = &m->layers[i + 1], *p = &m->layers[i + 3];
        conv2d_backward_filter_bn_relu_maxpool(
            ctx, n, &l->conv, x, &p->pool, l->y, p->dy, p->argmax, param(m, bn->w),
            param(m, bn->b), bn->save_mean, bn->save_invstd, grad(m, bn->w), grad(m, bn->b),
            grad(m, l->w), grad(m, l->b));
        return;
    }
    conv2d_backward_filter(ctx, &l->conv, n, x, dy, grad(m, l->w), grad(m, l->b));
    if (dx)
        conv2d_backward_data(ctx, &l->conv, n, dy, param(m, l->w), dx);
}

/* The max pooling at i runs in its BN's passes. */
static int pool_in_bn(const model *m, backend_ctx *ctx, int i, enum forward_mode mode)
{
    return i >= 2 && fused_pool(m, ctx, i - 2, mode);
}

static void bn_forward(layer *l, model *m, backend_ctx *ctx, const float *x, int n,
                       enum forward_mode mode)
{
    int hw = l->out_h * l->out_w;
    float *rm = m->stats + l->rmean, *rv = m->stats + l->rvar;
    if (mode == MODE_INFER) {
        batchnorm_forward_infer(ctx, n, l->out_c, hw, x, param(m, l->w), param(m, l->b), rm, rv,
                                BN_EPS, l->y);
        return;
    }
    /* PyTorch's momentum 0.1 in training; 1/k folds batch k into a plain mean. */
    float momentum = mode == MODE_TRAIN ? 0.1f : 1.0f / (float)(m->bn_batches + 1);
    const int i = (int)(l - m->layers);
    if (fused_pool(m, ctx, i, mode)) {
        layer *p = &m->layers[i + 2];
        batchnorm_relu_maxpool_forward_train(ctx, n, &p->pool, x, param(m, l->w), param(m, l->b),
                                             rm, rv, momentum, BN_EPS, p->y, p->argmax,
                                             l->save_mean, l->save_invstd);
    } else if (bn_feeds_relu(m, i))
        batchnorm_relu_forward_train(ctx, n, l->out_c, hw, x, param(m, l->w), param(m, l->b), rm,
                                     rv, momentum, BN_EPS, m->layers[i + 1].y, l->save_mean,
                                     l->save_invstd);
    else
        batchnorm_forward_train(ctx, n, l->out_c, hw, x, param(m, l->w), param(m, l->b), rm, rv,
                                momentum, BN_EPS, l->y, l->save_mean, l->save_invstd);
}

static void bn_backward(layer *l, model *m, backend_ctx *ctx, const float *x, const float *dy,
                        float *dx, int n)
{
    const int i = (int)(l - m->layers), hw = l->out_h * l->out_w;
    if (fused_pool(m, ctx, i, MODE_TRAIN)) {
        const layer *p = &m->layers[i + 2];
        batchnorm_relu_maxpool_backward(ctx, n, &p->pool, x, p->dy, p->argmax, param(m, l->w),
                                        param(m, l->b), l->save_mean, l->save_invstd,
                                        fused_conv(m, ctx, i - 1) ? NULL : dx, grad(m, l->w),
                                        grad(m, l->b));
        return;
    }
    if (bn_feeds_relu(m, i)) {
        const layer *r = &m->layers[i + 1];
        batchnorm_relu_backward(ctx, n, l->out_c, hw, x, r->y, r->dy, param(m, l->w),
                                param(m, l->b), l->save_mean, l->save_invstd, dx, grad(m, l->w),
                                grad(m, l->b));
        return;
    }
    batchnorm_backward(ctx, n, l->out_c, hw, x, dy, param(m, l->w), l->save_mean,
                       l->save_invstd, dx, grad(m, l->w), grad(m, l->b));
}

static void relu_layer_forward(layer *l, model *m, backend_ctx *ctx, const float *x, int n,
                               enum forward_mode mode)
{
    if (!fused_relu(l, m, mode))
        relu_forward(ctx, (size_t)n * l->out_size, x, l->y);
}

static void relu_layer_backward(layer *l, model *m, backend_ctx *ctx, const float *x,
                                const float *dy, float *dx, int n)
{
    (void)x;
    if (dx && !fused_relu(l, m, MODE_TRAIN))
        relu_backward(ctx, (size_t)n * l->out_size, l->y, dy, dx);
}

static void maxpool_forward(layer *l, model *m, backend_ctx *ctx, const float *x, int n,
                            enum forward_mode mode)
{
    const int i = (int)(l - m->layers);
    if (!pool_in_bn(m, ctx, i, mode))
        maxpool2d_forward(ctx, &l->pool, n, x, l->y, l->argmax);
}

static void maxpool_backward(layer *l, model *m, backend_ctx *ctx, const float *x,
                             const float *dy, float *dx, int n)
{
    (void)x;
    const int i = (int)(l - m->layers);
    if (dx && !pool_in_bn(m, ctx, i, MODE_TRAIN))
        maxpool2d_backward(ctx, &l->pool, n, dy, l->argmax, dx);
}

static void avgpool_forward(layer *l, model *m, backend_ctx *ctx, const float *x, int n,
                            enum forward_mode mode)
{
    (void)m, (void)mode;
    avgpool2d_forward(ctx, &l->pool, n, x, l->y);
}

static void avgpool_backward(layer *l, model *m, backend_ctx *ctx, const float *x,
                             const float *dy, float *dx, int n)
{
    (void)m, (void)x;
    if (dx)
        avgpool2d_backward(ctx, &l->pool, n, dy, dx);
}

/* Each dropout layer draws from its own counter range within the step's. */
static uint64_t dropout_counter(const layer *l, const model *m)
{
    return m->dropout_counter + ((uint64_t)(l - m->layers) << MODEL_DROPOUT_LAYER_BITS);
}

static void dropout_layer_forward(layer *l, model *m, backend_ctx *ctx, const float *x, int n,
                                  enum forward_mode mode)
{
    size_t count = (size_t)n * l->out_size;
    if (mode == MODE_TRAIN && l->p > 0.0f)
        dropout_forward(ctx, count, l->p, m->dropout_key, dropout_counter(l, m), x, l->y);
    else
        backend_copy(ctx, l->y, x, count * backend_act_size(ctx));
}

static void dropout_layer_backward(layer *l, model *m, backend_ctx *ctx, const float *x,
                                   const float *dy, float *dx, int n)
{
    (void)x;
    size_t count = (size_t)n * l->out_size;
    if (!dx)
        return;
    if (l->p > 0.0f)
        dropout_backward(ctx, count, l->p, m->dropout_key, dropout_counter(l, m), dy, dx);
    else
        backend_copy(ctx, dx, dy, count * backend_act_size(ctx));
}

static void linear_layer_forward(layer *l, model *m, backend_ctx *ctx, const float *x, int n,
                                 enum forward_mode mode)
{
    (void)mode;
    linear_forward(ctx, n, l->in_c * l->in_h * l->in_w, l->out_c, x, param(m, l->w),
                   param(m, l->b), l->y);
}

static void linear_layer_backward(layer *l, model *m, backend_ctx *ctx, const float *x,
                                  const float *dy, float *dx, int n)
{
    linear_backward(ctx, n, l->in_c * l->in_h * l->in_w, l->out_c, x, param(m, l->w), dy, dx,
                    grad(m, l->w), grad(m, l->b));
}

void layer_bind(layer *l)
{
    switch (l->kind) {
    case LAYER_CONV: l->forward = conv_forward; l->backward = conv_backward; break;
    case LAYER_BN: l->forward = bn_forward; l->backward = bn_backward; break;
    case LAYER_RELU: l->forward = relu_layer_forward; l->backward = relu_layer_backward; break;
    case LAYER_MAXPOOL: l->forward = maxpool_forward; l->backward = maxpool_backward; break;
    case LAYER_AVGPOOL: l->forward = avgpool_forward; l->backward = avgpool_backward; break;
    case LAYER_DROPOUT:
        l->forward = dropout_layer_forward;
        l->backward = dropout_layer_backward;
        break;
    case LAYER_LINEAR:
        l->forward = linear_layer_forward;
        l->backward = linear_layer_backward;
        break;
    case LAYER_ADD: /* the driver sums and routes gradients itself */
        break;
    }
}

int layer_backward_reads(const model *m, int i)
{
    switch (m->layers[i].kind) {
    case LAYER_CONV: return READS_INPUT | (conv_feeds_bn_pool(m, i) ? READS_OUTPUT : 0);
    case LAYER_BN: case LAYER_LINEAR: return READS_INPUT;
    case LAYER_RELU: return READS_OUTPUT;
    case LAYER_MAXPOOL: /* keeps argmax instead */
    case LAYER_AVGPOOL:
    case LAYER_DROPOUT: /* redraws its mask */
    case LAYER_ADD:
        break;
    }
    return 0;
}
