/* A network as a plain struct (llm.c style): one flat buffer of parameters,
 * one of gradients, one of BN running statistics; each layer holds offsets into
 * them and a forward/backward pair of function pointers (darknet style). */
#ifndef PARLE_MODEL_H
#define PARLE_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "backend.h"

#define TENSOR_NAME_MAX 64
#define NO_TENSOR ((size_t)-1)

typedef struct tensor_info {
    char name[TENSOR_NAME_MAX]; /* PyTorch state_dict name, e.g. "conv1.weight" */
    int is_stat;                /* 0: lives in params/grads; 1: in stats */
    size_t offset, count;       /* in floats, into the flat buffer */
    int ndim, shape[4];
} tensor_info;

typedef struct model model;
typedef struct layer layer;

enum layer_kind { LAYER_CONV, LAYER_BN, LAYER_RELU, LAYER_MAXPOOL, LAYER_AVGPOOL, LAYER_DROPOUT,
                  LAYER_LINEAR, LAYER_ADD };

/* How a forward pass treats BN and dropout. */
enum forward_mode {
    MODE_TRAIN,        /* batch statistics, running averages updated, dropout on */
    MODE_INFER,        /* running statistics, dropout off */
    MODE_BN_RECOMPUTE, /* batch statistics folded into a cumulative mean, dropout off */
};

/* Layers run in order; each reads the output of an earlier layer (src, -1 for
 * the model's input), an ADD layer two of them (residual connections). */
struct layer {
    enum layer_kind kind;
    int src, src2;              /* inputs: earlier layer indices, -1 = the model input */
    int consumers;              /* how many later layers read this one's output */
    int in_c, in_h, in_w;       /* per example */
    int out_c, out_h, out_w;
    size_t out_size;            /* out_c * out_h * out_w */
    float *y;                   /* output, max_batch * out_size */
    float *dy;                  /* gradient w.r.t. y during backward */
    float init_std;             /* > 0: weights ~ N(0, init_std) instead of PyTorch's default */
    size_t w, b;                /* offsets into params/grads, or NO_TENSOR */
    size_t rmean, rvar;         /* offsets into stats (BN), or NO_TENSOR */
    conv2d_desc conv;
    pool2d_desc pool;
    float p;                    /* dropout probability */
    int32_t *argmax;            /* max pooling */
    float *save_mean, *save_invstd; /* BN, per channel */
    void (*forward)(layer *l, model *m, backend_ctx *ctx, const float *x, int n,
                    enum forward_mode mode);
    /* dx may be NULL for the first layer. ADD layers are handled by the driver. */
    void (*backward)(layer *l, model *m, backend_ctx *ctx, const float *x, const float *dy,
                     float *dx, int n);
};

typedef struct model_spec {
    char arch[16];      /* lenet, mlp, allcnn, wrn */
    int depth, width;   /* wrn */
    float dropout;      /* < 0: the architecture's default */
    int classes;        /* <= 0: 10 */
    int in_c, in_h, in_w;
} model_spec;

struct model {
    model_spec spec;
    int nlayers;
    layer *layers;
    size_t nparams, nstats;
    float *params, *grads, *stats;
    int ntensors;
    tensor_info *tensors;
    int max_batch;
    float *grad_scratch;        /* a layer's dx when its input has several consumers */
    /* Dropout draws for the current step: key and a counter base that the
     * training loop sets from (seed, replica, step); layer i offsets it. */
    philox_key dropout_key;
    uint64_t dropout_counter;
    long bn_batches;            /* batches folded in by MODE_BN_RECOMPUTE */
    /* Benchmarks only: if set, 2 * nlayers seconds, each layer's forward then
     * backward time accumulated. */
    double *profile;
};

int model_build(model *m, const model_spec *spec, int max_batch, char *err, size_t errlen);
void model_free(model *m);

/* PyTorch's default initialisation (kaiming-uniform weights, uniform biases,
 * BN weight 1 bias 0, running mean 0 var 1), drawn from Philox(seed, replica). */
void model_init_params(model *m, uint64_t seed, uint32_t replica);

/* Forward in the given mode; returns the logits (n x classes). */
const float *model_forward(model *m, backend_ctx *ctx, const float *x, int n,
                           enum forward_mode mode);

/* One training pass: forward (MODE_TRAIN), softmax cross-entropy, backward
 * into m->grads. Returns the mean loss; *correct gets the hits if not NULL. */
float model_train_grads(model *m, backend_ctx *ctx, const float *x, const int32_t *labels, int n,
                        int *correct);

/* Loss and error over a whole dataset in MODE_INFER, in batches of max_batch. */
void model_evaluate(model *m, backend_ctx *ctx, const float *images, const int32_t *labels,
                    int count, double *loss, double *error);

/* Reset the running statistics and refill them with one MODE_BN_RECOMPUTE
 * pass over `count` examples (cumulative average, dropout off). */
void model_recompute_bn(model *m, backend_ctx *ctx, const float *images, int count);

const tensor_info *model_find_tensor(const model *m, const char *name);

#endif
