/* A network as a plain struct (llm.c style): one flat buffer of parameters,
 * one of gradients, one of BN running statistics; each layer holds offsets into
 * them and a forward/backward pair of function pointers (darknet style).
 * Every buffer is memory of the backend context the model was built on
 * (device memory for CUDA); batches are given as host arrays and staged. */
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
    /* In floats, into the logical layout: the tensors back to back, as the
     * buffers were before parameters were aligned (and as checkpoints keep
     * the rule's vectors); it numbers the tensor's initial Philox draws.
     * The offset itself, for a statistic. */
    size_t logical;
    int ndim, shape[4];
} tensor_info;

/* Every parameter tensor (and so its gradient) starts at a multiple of this
 * many floats (256 bytes) from the start of params and grads, whose bases
 * are 256-byte aligned; so does the end of the buffer. The floats in
 * between are padding: zero after model_build, and kept zero by every update
 * of the flat vectors, which are element-wise on zeros with zero gradients. */
#define MODEL_PARAM_ALIGN 64

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
    /* Output and its gradient, max_batch * out_size activations (m->act)
     * each, valid while the pass needs them: they share the model's arena
     * with buffers of other lifetimes (plan.c). dy is NULL in an evaluation
     * model. */
    float *y;
    float *dy;
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
    int train;                  /* built for training; else forward passes only */
    int nlayers;
    layer *layers;
    /* Buffer lengths in floats: nparams counts the parameters' padding
     * (MODEL_PARAM_ALIGN), so every vector that mirrors params (gradients,
     * the rules' state, comm) takes nparams floats; nparams_logical is the
     * real number of parameters, the one to report. */
    size_t nparams, nstats;
    size_t nparams_logical;
    float *params, *grads, *stats; /* grads: NULL unless train */
    int ntensors;
    tensor_info *tensors;
    int max_batch;
    enum backend_dtype act;     /* the activations' type: the context's */
    float *grad_scratch;        /* a layer's dx when its input has several consumers */
    float *input;               /* the staged batch: max_batch images, fp32 */
    float *input_act;           /* at bf16: the batch converted, else NULL */
    int32_t *labels;            /* and labels */
    /* Training: batches staged ahead (model_stage_batch), one per slot, and
     * what the ops read of each (the slot, or on the CPU the host batch). */
    float *slot_x[BACKEND_STAGE_SLOTS];
    int32_t *slot_y[BACKEND_STAGE_SLOTS];
    const float *staged_x[BACKEND_STAGE_SLOTS];
    const int32_t *staged_y[BACKEND_STAGE_SLOTS];
    void *arena;                /* holds every buffer above that is per batch */
    size_t bytes;               /* context memory held: params, grads, stats, arena */
    /* Dropout draws for the current step: key and a counter base that the
     * training loop sets from (seed, replica, step); layer i offsets it. */
    philox_key dropout_key;
    uint64_t dropout_counter;
    long bn_batches;            /* batches folded in by MODE_BN_RECOMPUTE */
    /* Benchmarks only: if set, 2 * nlayers seconds, each layer's forward then
     * backward time accumulated. */
    double *profile;
};

/* Builds the network of `spec` for batches of up to max_batch, its buffers
 * (parameters, gradients and statistics zeroed) in ctx's memory, its
 * activations of ctx->act. A model for training (`train` 1) has gradients
 * and backward buffers; one for evaluation only runs forward passes, in far
 * less memory. With ctx NULL (fp32) or a plan context (backend_ctx_plan)
 * nothing is allocated: m->bytes tells what the build would take, and the
 * model is only good for model_free(m, NULL). Returns 0, or -1 with a
 * message (the context's, if it ran out of memory). */
/* Dropout counters: a training step owns 2^40 Philox counters and each layer
 * 2^30 of them (4 elements a counter), so no layer's draws run into another's
 * or the next step's for any batch that fits in memory, up to 1024 layers
 * and 2^24 steps. */
enum { MODEL_DROPOUT_STEP_BITS = 40, MODEL_DROPOUT_LAYER_BITS = 30 };
static inline void model_set_dropout_step(model *m, philox_key key, uint64_t step)
{
    m->dropout_key = key;
    m->dropout_counter = step << MODEL_DROPOUT_STEP_BITS;
}

int model_build(model *m, backend_ctx *ctx, const model_spec *spec, int max_batch, int train,
                char *err, size_t errlen);
/* Frees on the context the model was built on. */
void model_free(model *m, backend_ctx *ctx);

/* PyTorch's default initialisation (kaiming-uniform weights, uniform biases,
 * BN weight 1 bias 0, running mean 0 var 1), drawn from Philox(seed, replica)
 * on the host and uploaded. */
void model_init_params(model *m, backend_ctx *ctx, uint64_t seed, uint32_t replica);

/* Forward in the given mode on x, n images as activations in context memory
 * (model_stage_input's); returns the logits (n x classes activations). */
const float *model_forward(model *m, backend_ctx *ctx, const float *x, int n,
                           enum forward_mode mode);
/* n host images staged into m->input and made activations; NULL with the
 * context failed if they do not fit. */
const float *model_stage_input(model *m, backend_ctx *ctx, const float *images, int n);

/* One training pass on n <= max_batch host images and labels: forward
 * (MODE_TRAIN), softmax cross-entropy, backward into m->grads. Returns the
 * mean loss; *correct gets the hits if not NULL. A failure (a label out of
 * range, an evaluation model) fails the context and returns NaN. */
float model_train_grads(model *m, backend_ctx *ctx, const float *images, const int32_t *labels,
                        int n, int *correct);
/* The same in two halves, so that the next batch is staged while this one
 * trains (backend_stage_async): stage n host images and labels (pinned for
 * a GPU, unchanged until the step that trains on them returns) into `slot`;
 * later train on the slot. model_train_grads is the two in a row on slot 0. */
void model_stage_batch(model *m, backend_ctx *ctx, int slot, const float *images,
                       const int32_t *labels, int n);
float model_train_slot(model *m, backend_ctx *ctx, int slot, int n, int *correct);

/* Loss and error over a whole dataset of host images and labels in
 * MODE_INFER, in batches of max_batch (NaN loss if the context failed). */
void model_evaluate(model *m, backend_ctx *ctx, const float *images, const int32_t *labels,
                    int count, double *loss, double *error);

/* Reset the running statistics and refill them with one MODE_BN_RECOMPUTE
 * pass over `count` host images (cumulative average, dropout off). */
void model_recompute_bn(model *m, backend_ctx *ctx, const float *images, int count);

const tensor_info *model_find_tensor(const model *m, const char *name);

/* A host vector of m->nparams floats laid out as params, packed in place
 * into the logical layout (its first m->nparams_logical floats: the tensors
 * back to back), and back (unpack zeroes the padding). Checkpoints keep the
 * rule's vectors packed, as they were before parameters were aligned. */
void model_pack_params(const model *m, float *v);
void model_unpack_params(const model *m, float *v);

#endif
