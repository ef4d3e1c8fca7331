/* Training-time augmentation (random horizontal flip, padded random crop) and
 * a prefetching batch loader that gathers and augments the next mini-batch on
 * its own thread while the replica computes on the current one. */
#ifndef PARLE_AUGMENT_H
#define PARLE_AUGMENT_H

#include <pthread.h>
#include <stdint.h>

#include "backend.h"
#include "dataset.h"
#include "philox.h"
#include "sampler.h"

typedef enum augment_padding { AUGMENT_PAD_ZERO, AUGMENT_PAD_REFLECT } augment_padding;

typedef struct augment_params {
    int flip;                /* mirror left-right with probability 1/2 */
    int pad;                 /* crop offsets in [-pad, pad] each way; 0: no crop */
    augment_padding padding; /* what lies outside the image: zeros, or its mirror
                                without the edge repeated (needs pad < h and w) */
} augment_params;

/* The paper's CIFAR augmentation: flip, and a crop from a 4-pixel reflect padding. */
static const augment_params augment_cifar = {1, 4, AUGMENT_PAD_REFLECT};

/* The draws live in the data stream's key (philox_make_key(seed, replica,
 * RNG_STREAM_DATA)) at counters with the top bit set, which the sampler never
 * reaches (it uses pass << 32 + i and draw numbers). */
#define AUGMENT_COUNTER_BASE (UINT64_C(1) << 63)

/* The counter of example slot 0 of the mini-batch of step `step` (counted from
 * 0 by the replica, as its checkpoints do), with `batch` slots per step. */
static inline uint64_t augment_counter(uint64_t step, int batch)
{
    return AUGMENT_COUNTER_BASE + step * (uint64_t)batch;
}

/* Augments n examples of shape c x h x w in x, in place: example i uses
 * philox4x32(key, counter + i) (lane 0: flip, lanes 1, 2: row and column
 * offset); the image is flipped first, then cropped from its padding.
 * scratch holds c*h*w floats. */
void augment_batch(const augment_params *p, philox_key key, uint64_t counter, float *x, int n,
                   int c, int h, int w, float *scratch);

/* ---- prefetching loader: one per replica ---- */

typedef struct batch_loader {
    /* Set by start, then the worker's alone. */
    sampler *smp;
    const dataset *data;
    augment_params aug;
    int augment;
    philox_key key;
    uint64_t step;           /* of the next batch the worker gathers */
    float *scratch;
    backend_ctx *pinned;     /* whose host buffers x and y are, or NULL */
    /* Two buffers: the worker fills one while the caller uses the other. */
    float *x[2];
    int32_t *y[2];
    int n[2];
    long pass[2];            /* the sampler's position just after each batch */
    int pos[2];
    uint64_t draws[2];
    int full[2];             /* filled and not yet handed out */
    int fill, take;          /* next buffer the worker fills, the caller takes */
    int held;                /* the buffer the caller holds, or -1 */
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int started;
    /* The sampler's position after the last batch handed out (the caller's). */
    long out_pass;
    int out_pos;
    uint64_t out_draws;
} batch_loader;

/* Starts the worker on sampler s (the loader's alone until stop: do not call
 * sampler_next on it meanwhile) over dataset d. aug NULL: no augmentation.
 * Batches are gathered into host buffers of `pinned` (backend_host_alloc:
 * page-locked for a GPU, so uploads run at full speed and asynchronously;
 * a buffer goes back to the worker only at the next batch_loader_next, after
 * the step that uploaded it has synchronised), or plain ones if it is NULL.
 * key: the replica's data-stream key; first_step: the replica's step count
 * (nonzero after a resume) so that step k's batch is augmented alike. */
int batch_loader_start(batch_loader *bl, backend_ctx *pinned, sampler *s, const dataset *d,
                       const augment_params *aug, philox_key key, uint64_t first_step, char *err,
                       size_t errlen);
/* The next batch, as sampler_next then augment_batch would give it: *x, *y
 * stay valid until the next call or stop; *n is its size. Waits while it is
 * not ready. */
void batch_loader_next(batch_loader *bl, float **x, int32_t **y, int *n);
/* The sampler's position (as in struct sampler) after the batches handed out
 * so far: what a checkpoint saves. The worker's sampler is further on. */
void batch_loader_position(const batch_loader *bl, long *pass, int *pos, uint64_t *draws);
/* Stops and joins the worker (it may be mid-batch) and frees the buffers.
 * Safe on a zeroed loader and after a failed start. */
void batch_loader_stop(batch_loader *bl);

#endif
