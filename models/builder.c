/* The net builder (layers.h): appends layers to a model's list and gives
 * each named tensor its place in the flat buffers; archs.c drives it,
 * model.c allocates what it laid out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"

static layer *nb_push(net_builder *b, enum layer_kind kind)
{
    model *m = b->m;
    if (b->failed)
        return NULL;
    if (m->nlayers == b->cap_layers) {
        int cap = b->cap_layers ? 2 * b->cap_layers : 16;
        layer *nl = realloc(m->layers, (size_t)cap * sizeof(layer));
        if (!nl) {
            b->failed = 1;
            return NULL;
        }
        m->layers = nl;
        b->cap_layers = cap;
    }
    layer *l = &m->layers[m->nlayers++];
    memset(l, 0, sizeof(*l));
    l->kind = kind;
    l->src = b->cur;
    l->src2 = -1;
    l->in_c = l->out_c = b->c;
    l->in_h = l->out_h = b->h;
    l->in_w = l->out_w = b->w;
    l->w = l->b = l->rmean = l->rvar = NO_TENSOR;
    return l;
}

static void nb_finish(net_builder *b, layer *l)
{
    l->out_size = (size_t)l->out_c * l->out_h * l->out_w;
    b->cur = (int)(l - b->m->layers);
    b->c = l->out_c;
    b->h = l->out_h;
    b->w = l->out_w;
    layer_bind(l);
}

/* Registers a named tensor and returns its offset in params or stats: a
 * parameter at the next multiple of MODEL_PARAM_ALIGN floats. */
static size_t nb_tensor(net_builder *b, const char *layer_name, const char *suffix, int is_stat,
                        int ndim, const int *shape)
{
    model *m = b->m;
    if (b->failed)
        return NO_TENSOR;
    if (m->ntensors == b->cap_tensors) {
        int cap = b->cap_tensors ? 2 * b->cap_tensors : 32;
        tensor_info *nt = realloc(m->tensors, (size_t)cap * sizeof(tensor_info));
        if (!nt) {
            b->failed = 1;
            return NO_TENSOR;
        }
        m->tensors = nt;
        b->cap_tensors = cap;
    }
    tensor_info *t = &m->tensors[m->ntensors++];
    memset(t, 0, sizeof(*t));
    snprintf(t->name, sizeof t->name, "%s.%s", layer_name, suffix);
    t->is_stat = is_stat;
    t->ndim = ndim;
    t->count = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->count *= (size_t)shape[i];
    }
    if (is_stat) {
        t->offset = t->logical = m->nstats;
        m->nstats += t->count;
    } else {
        t->logical = m->nparams_logical;
        m->nparams_logical += t->count;
        t->offset = model_param_align(m->nparams);
        m->nparams = t->offset + t->count;
    }
    return t->offset;
}

int nb_here(const net_builder *b) { return b->cur; }

void nb_from(net_builder *b, int index)
{
    const layer *l = &b->m->layers[index];
    b->cur = index;
    b->c = l->out_c;
    b->h = l->out_h;
    b->w = l->out_w;
}

void nb_add(net_builder *b, int other)
{
    const layer *o = &b->m->layers[other];
    if (o->out_c != b->c || o->out_h != b->h || o->out_w != b->w) {
        b->failed = 1;
        return;
    }
    layer *l = nb_push(b, LAYER_ADD);
    if (!l)
        return;
    l->src2 = other;
    nb_finish(b, l);
}

void nb_conv(net_builder *b, const char *name, int out_c, int k, int stride, int pad, int bias)
{
    layer *l = nb_push(b, LAYER_CONV);
    if (!l)
        return;
    conv2d_desc_init(&l->conv, b->c, b->h, b->w, out_c, k, stride, pad);
    l->out_c = out_c;
    l->out_h = l->conv.out_h;
    l->out_w = l->conv.out_w;
    int wshape[4] = {out_c, b->c, k, k};
    l->w = nb_tensor(b, name, "weight", 0, 4, wshape);
    if (bias)
        l->b = nb_tensor(b, name, "bias", 0, 1, &out_c);
    nb_finish(b, l);
}

void nb_bn(net_builder *b, const char *name)
{
    layer *l = nb_push(b, LAYER_BN);
    if (!l)
        return;
    int c = b->c;
    l->w = nb_tensor(b, name, "weight", 0, 1, &c);
    l->b = nb_tensor(b, name, "bias", 0, 1, &c);
    l->rmean = nb_tensor(b, name, "running_mean", 1, 1, &c);
    l->rvar = nb_tensor(b, name, "running_var", 1, 1, &c);
    nb_finish(b, l);
}

void nb_relu(net_builder *b)
{
    layer *l = nb_push(b, LAYER_RELU);
    if (l)
        nb_finish(b, l);
}

static void nb_pool(net_builder *b, enum layer_kind kind, int k, int stride)
{
    layer *l = nb_push(b, kind);
    if (!l)
        return;
    pool2d_desc_init(&l->pool, b->c, b->h, b->w, k, stride, 0);
    l->out_h = l->pool.out_h;
    l->out_w = l->pool.out_w;
    nb_finish(b, l);
}

void nb_maxpool(net_builder *b, int k, int stride) { nb_pool(b, LAYER_MAXPOOL, k, stride); }
void nb_avgpool(net_builder *b, int k, int stride) { nb_pool(b, LAYER_AVGPOOL, k, stride); }

void nb_dropout(net_builder *b, float p)
{
    layer *l = nb_push(b, LAYER_DROPOUT);
    if (!l)
        return;
    l->p = p;
    nb_finish(b, l);
}

/* A linear layer flattens its input (NCHW is already row-major per example). */
void nb_linear(net_builder *b, const char *name, int out)
{
    layer *l = nb_push(b, LAYER_LINEAR);
    if (!l)
        return;
    int in = b->c * b->h * b->w;
    l->out_c = out;
    l->out_h = l->out_w = 1;
    int wshape[2] = {out, in};
    l->w = nb_tensor(b, name, "weight", 0, 2, wshape);
    l->b = nb_tensor(b, name, "bias", 0, 1, &out);
    nb_finish(b, l);
}
