#include "comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int comm_init(comm *c, int n, size_t capacity, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    c->n = n;
    c->capacity = capacity;
    c->published = calloc((size_t)n, sizeof(*c->published));
    c->flags = calloc((size_t)n, sizeof(int));
    c->result = malloc((capacity ? capacity : 1) * sizeof(float));
    if (!c->published || !c->flags || !c->result ||
        pthread_barrier_init(&c->barrier, NULL, (unsigned)n) != 0) {
        free(c->published);
        free(c->flags);
        free(c->result);
        snprintf(err, errlen, "comm: out of memory for %d replicas", n);
        return -1;
    }
    return 0;
}

void comm_free(comm *c)
{
    pthread_barrier_destroy(&c->barrier);
    free(c->published);
    free(c->flags);
    free(c->result);
}

void comm_barrier(comm *c)
{
    if (c->n > 1)
        pthread_barrier_wait(&c->barrier);
}

const float *comm_allreduce_mean(comm *c, int rank, backend_ctx *ctx, const float *vec, size_t len)
{
    if (c->n == 1)
        return vec;
    c->published[rank] = vec;
    /* Everyone has published, and everyone is done reading the last result. */
    pthread_barrier_wait(&c->barrier);
    size_t lo = len * (size_t)rank / (size_t)c->n, hi = len * (size_t)(rank + 1) / (size_t)c->n;
    const float *slices[c->n];
    for (int j = 0; j < c->n; j++)
        slices[j] = c->published[j] + lo;
    vec_mean(ctx, hi - lo, slices, c->n, c->result + lo);
    pthread_barrier_wait(&c->barrier);
    return c->result;
}

int comm_any(comm *c, int rank, int flag)
{
    if (c->n == 1)
        return flag;
    c->flags[rank] = flag;
    pthread_barrier_wait(&c->barrier);
    int any = 0;
    for (int j = 0; j < c->n; j++)
        any |= c->flags[j];
    /* Nobody may overwrite a flag before everyone has read them all. */
    pthread_barrier_wait(&c->barrier);
    return any;
}
