/* Collectives between the replica threads of one job, over shared memory
 * (design.md §3). Every rank of the job must make the same calls in the same
 * order. A collective's result stays valid until the next collective. */
#ifndef PARLE_COMM_H
#define PARLE_COMM_H

#include <pthread.h>
#include <stddef.h>
#include "backend.h"

typedef struct comm {
    int n;
    pthread_barrier_t barrier;
    const float **published;   /* each rank's input vector for the current collective */
    float *result;             /* the shared result, capacity floats */
    size_t capacity;
    int *flags;
} comm;

int comm_init(comm *c, int n, size_t capacity, char *err, size_t errlen);
void comm_free(comm *c);
void comm_barrier(comm *c);

/* The element-wise mean of every rank's `vec` (len <= capacity). Each rank
 * reduces its own slice (a reduce-scatter), then all read the whole result
 * (the all-gather is the shared buffer itself). */
const float *comm_allreduce_mean(comm *c, int rank, backend_ctx *ctx, const float *vec,
                                 size_t len);

/* The bitwise OR of every rank's flag, on every rank (an agreement point:
 * e.g. "someone failed" or "stop now"). */
int comm_any(comm *c, int rank, int flag);

#endif
