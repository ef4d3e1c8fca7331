#include "comm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double comm_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int comm_init(comm *c, int n, size_t capacity, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    c->n = n;
    c->capacity = capacity;
    c->published = calloc((size_t)n, sizeof(*c->published));
    c->flags = calloc((size_t)n, sizeof(int));
    c->waiting = calloc((size_t)n, 1);
    c->values = calloc((size_t)n, sizeof(double));
    c->result = c->host_result = malloc((capacity ? capacity : 1) * sizeof(float));
    if (!c->published || !c->flags || !c->waiting || !c->values || !c->result) {
        free(c->published);
        free(c->flags);
        free(c->waiting);
        free(c->values);
        free(c->host_result);
        snprintf(err, errlen, "comm: out of memory for %d replicas", n);
        return -1;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->wake, NULL);
    return 0;
}

void comm_free(comm *c)
{
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->lock);
    free(c->published);
    free(c->flags);
    free(c->waiting);
    free(c->values);
    free(c->host_result);
    free(c->shared);
}

int comm_attach(comm *c, int rank, backend_ctx *ctx, size_t capacity, char *err, size_t errlen)
{
    pthread_mutex_lock(&c->lock);
    c->attached++;
    pthread_mutex_unlock(&c->lock);
    if (comm_barrier(c, rank, "start") != 0) {
        snprintf(err, errlen, "replica %d: the job stopped before it began", rank);
        return -1;
    }
    /* Everyone is attached; rank 0 now sets up what all will read. */
    int rc = 0;
    if (rank == 0 && (ctx->device >= 0 || capacity > c->capacity)) {
        float *buf = backend_alloc(ctx, (capacity ? capacity : 1) * sizeof(float));
        if (buf) {
            c->result = buf;
            c->result_ctx = ctx;
            c->capacity = capacity;
        } else {
            snprintf(err, errlen, "replica 0: the all-reduce buffer: %s", ctx->err);
            rc = -1;
        }
    }
    if (comm_barrier(c, rank, "start") != 0) {
        snprintf(err, errlen, "replica %d: the job stopped before it began", rank);
        return -1;
    }
    if (rc == 0 && c->result_ctx && c->result_ctx->device != ctx->device) {
        snprintf(err, errlen, "replica %d is on GPU %d and replica 0 on GPU %d: replicas on "
                 "several GPUs need the NCCL comm, which is not built yet (docs/gpu.md)", rank,
                 ctx->device, c->result_ctx->device);
        rc = -1;
    }
    return rc;
}

void comm_detach(comm *c, int rank)
{
    pthread_mutex_lock(&c->lock);
    c->attached--;
    pthread_cond_broadcast(&c->wake);
    /* The device result is rank 0's to free, once nobody can read it. */
    while (rank == 0 && c->result_ctx && c->attached > 0)
        pthread_cond_wait(&c->wake, &c->lock);
    if (rank == 0 && c->result_ctx) {
        backend_free(c->result_ctx, c->result);
        c->result = c->host_result;
        c->result_ctx = NULL;
    }
    pthread_mutex_unlock(&c->lock);
}

void comm_abort(comm *c, const char *fmt, ...)
{
    pthread_mutex_lock(&c->lock);
    if (!c->aborted) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->reason, sizeof c->reason, fmt, ap);
        va_end(ap);
        c->aborted = 1;
        pthread_cond_broadcast(&c->wake);
    }
    pthread_mutex_unlock(&c->lock);
}

int comm_aborted(comm *c)
{
    pthread_mutex_lock(&c->lock);
    int a = c->aborted;
    pthread_mutex_unlock(&c->lock);
    return a;
}

const char *comm_abort_reason(comm *c) { return c->reason; }

int comm_barrier(comm *c, int rank, const char *what)
{
    pthread_mutex_lock(&c->lock);
    if (c->aborted) {
        pthread_mutex_unlock(&c->lock);
        return -1;
    }
    if (++c->arrived == c->n) {
        c->arrived = 0;
        c->generation++;
        memset(c->waiting, 0, (size_t)c->n);
        pthread_cond_broadcast(&c->wake);
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    if (c->arrived == 1)
        c->first_arrival = comm_now_s();
    c->waiting[rank] = 1;
    c->what = what;
    unsigned long gen = c->generation;
    while (gen == c->generation && !c->aborted)
        pthread_cond_wait(&c->wake, &c->lock);
    /* A barrier that completed before the abort still counts as passed. */
    int rc = gen == c->generation ? -1 : 0;
    pthread_mutex_unlock(&c->lock);
    return rc;
}

const float *comm_allreduce_mean(comm *c, int rank, backend_ctx *ctx, const float *vec, size_t len)
{
    if (c->n == 1)
        return comm_aborted(c) ? NULL : vec;
    /* A barrier orders threads, not device work: each rank's vector must be
     * complete before others read it, and its slice of the result before
     * others read that (no-ops on the CPU). */
    if (backend_sync(ctx) != 0)
        return NULL;
    c->published[rank] = vec;
    /* Everyone has published, and everyone is done reading the last result. */
    if (comm_barrier(c, rank, "all-reduce") != 0)
        return NULL;
    size_t lo = len * (size_t)rank / (size_t)c->n, hi = len * (size_t)(rank + 1) / (size_t)c->n;
    const float *slices[c->n];
    for (int j = 0; j < c->n; j++)
        slices[j] = c->published[j] + lo;
    vec_mean(ctx, hi - lo, slices, c->n, c->result + lo);
    if (backend_sync(ctx) != 0 || comm_barrier(c, rank, "all-reduce") != 0)
        return NULL;
    return c->result;
}

int comm_any(comm *c, int rank, int flag)
{
    if (c->n == 1)
        return comm_aborted(c) ? -1 : flag;
    c->flags[rank] = flag;
    if (comm_barrier(c, rank, "agreement") != 0)
        return -1;
    int any = 0;
    for (int j = 0; j < c->n; j++)
        any |= c->flags[j];
    /* Nobody may overwrite a flag before everyone has read them all. */
    if (comm_barrier(c, rank, "agreement") != 0)
        return -1;
    return any;
}

const float *const *comm_exchange(comm *c, int rank, backend_ctx *ctx, const float *vec)
{
    if (backend_sync(ctx) != 0)
        return NULL;
    c->published[rank] = vec;
    return comm_barrier(c, rank, "exchange") == 0 ? c->published : NULL;
}

int comm_exchange_end(comm *c, int rank, backend_ctx *ctx)
{
    /* Reads queued on the device must be done before a peer overwrites. */
    if (backend_sync(ctx) != 0)
        return -1;
    return comm_barrier(c, rank, "exchange");
}

void *comm_shared(comm *c, int rank, size_t bytes)
{
    if (rank == 0 && !(c->shared = calloc(1, bytes ? bytes : 1)))
        comm_abort(c, "out of memory for %zu bytes of state shared by the replicas", bytes);
    if (comm_barrier(c, rank, "start") != 0)
        return NULL;
    return c->shared;
}

int comm_mean_double(comm *c, int rank, double v, double *mean)
{
    c->values[rank] = v;
    if (comm_barrier(c, rank, "agreement") != 0)
        return -1;
    double sum = 0.0;
    for (int j = 0; j < c->n; j++)
        sum += c->values[j];
    *mean = sum / c->n;
    return comm_barrier(c, rank, "agreement");
}

int comm_overdue(comm *c, double now_s, double timeout_s, int *missing, const char **what)
{
    int count = 0;
    pthread_mutex_lock(&c->lock);
    if (!c->aborted && c->arrived > 0 && now_s - c->first_arrival > timeout_s) {
        *missing = -1;
        for (int r = 0; r < c->n; r++)
            if (!c->waiting[r] && count++ == 0)
                *missing = r;
        *what = c->what;
    }
    pthread_mutex_unlock(&c->lock);
    return count;
}
