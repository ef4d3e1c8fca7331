/* Internal to models/: layer function tables and the network builder. */
#ifndef PARLE_LAYERS_H
#define PARLE_LAYERS_H

#include "model.h"

#define BN_EPS 1e-5f

/* Set l->forward / l->backward for l->kind. */
void layer_bind(layer *l);
/* What layer i's backward reads besides dy (its input x, its own output y),
 * so that the memory plan keeps those alive until then. */
enum { READS_INPUT = 1, READS_OUTPUT = 2 };
int layer_backward_reads(const model *m, int i);
/* The earliest layer among those whose forward writes layer i's outputs
 * and whose backward reads its dy: i itself, or for a max pooling that may
 * run in its BN's passes, that BN two before, or the convolution before it
 * whose filter gradient reads the pool's dy and argmax (layers.c), so that
 * the plan keeps them alive for each. */
int layer_fused_into(const model *m, int i);

/* plan.c: lays out m's per-batch buffers (activations, their gradients,
 * max-pool indices, BN saves, the staged batch) in one arena of the bytes
 * returned, buffers of disjoint lifetimes overlapping; with `arena` not NULL
 * also points the model's buffers into it. SIZE_MAX: out of host memory. */
size_t model_layout(model *m, char *arena);

/* n floats rounded up to whole MODEL_PARAM_ALIGN blocks. */
static inline size_t model_param_align(size_t n)
{
    return (n + MODEL_PARAM_ALIGN - 1) / MODEL_PARAM_ALIGN * MODEL_PARAM_ALIGN;
}

/* Builds a layer list and assigns each tensor its place in the flat buffers
 * (builder.c); the buffers themselves are allocated by model_build after. */
typedef struct net_builder {
    model *m;
    int cap_layers, cap_tensors;
    int c, h, w;              /* current per-example shape */
    int cur;                  /* the layer the next one reads (-1: the model input) */
    int failed;               /* out of memory */
} net_builder;

void nb_conv(net_builder *b, const char *name, int out_c, int k, int stride, int pad, int bias);
void nb_bn(net_builder *b, const char *name);
void nb_relu(net_builder *b);
void nb_maxpool(net_builder *b, int k, int stride);
void nb_avgpool(net_builder *b, int k, int stride);
void nb_dropout(net_builder *b, float p);
void nb_linear(net_builder *b, const char *name, int out);
/* Residual wiring: the current layer's index; continue from an earlier one;
 * add an earlier layer's output (same shape) to the current one. */
int nb_here(const net_builder *b);
void nb_from(net_builder *b, int index);
void nb_add(net_builder *b, int other);

/* Architectures (archs.c): return 0, or -1 with a message. */
int arch_build(net_builder *b, const model_spec *spec, char *err, size_t errlen);

#endif
