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

/* ---- prefetching loader: one per replica ----
 *
 * The caller holds up to two batches at once: the one its step trains on,
 * and the next one, staged (uploaded on a GPU) meanwhile; the worker fills
 * a third. Buffers go round in order: filled, taken, released, filled. */

enum { LOADER_BUFFERS = 3, LOADER_HELD_MAX = LOADER_BUFFERS - 1 };

/* A buffer's owner: the worker (free, or being filled), the queue (full),
 * or the caller (held). */
enum loader_state { LOADER_FREE, LOADER_FULL, LOADER_HELD };

/* A batch handed out: host images and labels, valid until released. */
typedef struct loader_batch {
    float *x;
    int32_t *y;
    int n;
    int buf;                 /* which of the loader's buffers */
} loader_batch;

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
    float *x[LOADER_BUFFERS];
    int32_t *y[LOADER_BUFFERS];
    int n[LOADER_BUFFERS];
    long pass[LOADER_BUFFERS]; /* the sampler's position just after each batch */
    int pos[LOADER_BUFFERS];
    uint64_t draws[LOADER_BUFFERS];
    enum loader_state state[LOADER_BUFFERS];
    int fill, take, release; /* next buffer the worker fills, the caller takes, releases */
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int started;
    /* The sampler's position after the last batch released (the caller's). */
    long out_pass;
    int out_pos;
    uint64_t out_draws;
} batch_loader;

/* Starts the worker on sampler s (the loader's alone until stop: do not call
 * sampler_next on it meanwhile) over dataset d. aug NULL: no augmentation.
 * Batches are gathered into host buffers of `pinned` (backend_host_alloc:
 * page-locked for a GPU, so uploads run at full speed and asynchronously;
 * a buffer goes back to the worker only when released, after the step that
 * uploaded it has seen the copy finish: backend_stage_done), or plain ones
 * if it is NULL. key: the replica's data-stream key; first_step: the
 * replica's step count (nonzero after a resume) so that step k's batch is
 * augmented alike. */
int batch_loader_start(batch_loader *bl, backend_ctx *pinned, sampler *s, const dataset *d,
                       const augment_params *aug, philox_key key, uint64_t first_step, char *err,
                       size_t errlen);
/* The next batch, as sampler_next then augment_batch would give it; waits
 * while it is not ready. The caller may hold LOADER_HELD_MAX batches: taking
 * one more is an error (-1, nothing taken), else 0. */
int batch_loader_take(batch_loader *bl, loader_batch *b);
/* The caller is done with b, the oldest batch it holds (batches are
 * released in the order taken: -1 otherwise, else 0); its buffer goes back
 * to the worker and the position moves past it. */
int batch_loader_release(batch_loader *bl, const loader_batch *b);
/* The sampler's position (as in struct sampler) after the batches released
 * so far: what a checkpoint saves. Batches taken but not released are
 * gathered again after a resume. */
void batch_loader_position(const batch_loader *bl, long *pass, int *pos, uint64_t *draws);
/* Stops and joins the worker (it may be mid-batch) and frees the buffers.
 * Safe on a zeroed loader and after a failed start. */
void batch_loader_stop(batch_loader *bl);

#endif
