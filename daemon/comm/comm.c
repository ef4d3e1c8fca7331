#include "comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_impl.h"
#include "topology.h"

int comm_init(comm *c, int n, size_t capacity, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    c->n = n;
    c->capacity = capacity;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->wake, NULL);
    c->published = calloc((size_t)n, sizeof(*c->published));
    c->flags = calloc((size_t)n, sizeof(int));
    c->waiting = calloc((size_t)n, 1);
    c->values = calloc((size_t)n, sizeof(double));
    c->result = c->host_result = malloc((capacity ? capacity : 1) * sizeof(float));
    c->ctxs = calloc((size_t)n, sizeof(*c->ctxs));
    c->stage = calloc((size_t)n, 1);
    c->ready = calloc((size_t)n, sizeof(*c->ready));
    c->busy_since = calloc((size_t)n, sizeof(double));
    c->busy_what = calloc((size_t)n, sizeof(*c->busy_what));
    if (!c->published || !c->flags || !c->waiting || !c->values || !c->result || !c->ctxs ||
        !c->stage || !c->ready || !c->busy_since || !c->busy_what) {
        comm_free(c);
        snprintf(err, errlen, "comm: out of memory for %d replicas", n);
        return -1;
    }
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
    free(c->ctxs);
    free(c->stage);
    free(c->ready);
    free(c->busy_since);
    free(c->busy_what);
    free(c->topo);
    free(c->dev);
    free(c->gathered);
    free(c->everyone);
    free(c->rows);
}

int comm_attach(comm *c, int rank, backend_ctx *ctx, size_t capacity, char *err, size_t errlen)
{
    pthread_mutex_lock(&c->lock);
    c->attached++;
    c->ctxs[rank] = ctx;
    pthread_mutex_unlock(&c->lock);
    if (comm_barrier(c, rank, "start") != 0) {
        snprintf(err, errlen, "replica %d: the job stopped before it began", rank);
        return -1;
    }
    /* Everyone is attached: every context is known. */
    for (int j = 0; j < c->n; j++)
        if (c->ctxs[j]->device >= 0)
            return comm_gpu_attach(c, rank, ctx, capacity, err, errlen);
    /* On the CPU rank 0 sets up what all will read. */
    int rc = 0;
    if (rank == 0 && capacity > c->capacity) {
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
    return rc;
}

void comm_detach(comm *c, int rank)
{
    if (c->stage[rank])
        comm_gpu_detach(c, rank);
    pthread_mutex_lock(&c->lock);
    c->attached--;
    pthread_cond_broadcast(&c->wake);
    /* Nobody frees what others may still read (its published vector, the
     * host result) before everyone has left: after an abort a rank leaves
     * its collective while another still reads its vector. */
    while (c->attached > 0)
        pthread_cond_wait(&c->wake, &c->lock);
    if (rank == 0 && c->result_ctx) {
        backend_free(c->result_ctx, c->result);
        c->result = c->host_result;
        c->result_ctx = NULL;
    }
    pthread_mutex_unlock(&c->lock);
}


/* With replicas in other processes: rank 0 turns this process's part into
 * a sum, adds up the processes' sums (net->sum_*) and divides by every
 * replica there is, while the others wait at the barrier that follows. The
 * watchdog leaves that wait to the net's own deadline while any replica is
 * in a net operation (net_busy counts them; peer requests enter too). */
static int net_sum_doubles(comm *c, double *v, int len)
{
    comm_net_enter(c, 1);
    int rc = c->net->sum_doubles(c->net, c, v, len);
    comm_net_enter(c, 0);
    return rc;
}

static int net_mean(comm *c, int rank, float *result, size_t len)
{
    if (rank == 0) {
        for (size_t i = 0; i < len; i++)
            result[i] *= (float)c->n;
        comm_net_enter(c, 1);
        int rc = c->net->sum_floats(c->net, c, result, len);
        comm_net_enter(c, 0);
        if (rc != 0)
            return -1;
        const float scale = 1.0f / (float)c->net->total;
        for (size_t i = 0; i < len; i++)
            result[i] *= scale;
    }
    return comm_barrier(c, rank, "all-reduce");
}

const float *comm_allreduce_mean(comm *c, int rank, backend_ctx *ctx, const float *vec, size_t len)
{
    if (c->n == 1 && !c->net)
        return comm_aborted(c) ? NULL : vec;
    if (c->stage[rank])
        return comm_gpu_allreduce_mean(c, rank, ctx, vec, len);
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
    if (c->net && net_mean(c, rank, c->result, len) != 0)
        return NULL;
    return c->result;
}

int comm_any(comm *c, int rank, int flag)
{
    if (c->n == 1 && !c->net)
        return comm_aborted(c) ? -1 : flag;
    c->flags[rank] = flag;
    if (comm_barrier(c, rank, "agreement") != 0)
        return -1;
    int any = 0;
    for (int j = 0; j < c->n; j++)
        any |= c->flags[j];
    if (c->net) {
        /* The OR of small flags (the runner's are below 8): each bit summed. */
        double bits[8];
        for (int b = 0; b < 8; b++)
            bits[b] = (any >> b) & 1;
        if (rank == 0 && net_sum_doubles(c, bits, 8) == 0) {
            int all = 0;
            for (int b = 0; b < 8; b++)
                all |= (bits[b] > 0) << b;
            c->net_value[0] = all;
        }
        if (comm_barrier(c, rank, "agreement") != 0)
            return -1;
        any = (int)c->net_value[0];
    }
    /* Nobody may overwrite a flag before everyone has read them all. */
    if (comm_barrier(c, rank, "agreement") != 0)
        return -1;
    return any;
}

/* Rank 0, with a net: every replica's vector into c->gathered, and the
 * job's view of them. Aborts the comm on failure. */
static void net_gather(comm *c, size_t len)
{
    int total = c->net->total;
    if (c->gathered_len != len) {
        free(c->gathered);
        c->gathered_len = 0;
        if (!(c->gathered = malloc((size_t)total * len * sizeof(float))) ||
            (!c->everyone && !(c->everyone = malloc((size_t)total * sizeof(*c->everyone))))) {
            comm_abort(c, "comm: out of memory for %d replicas' vectors of %zu floats", total,
                       len);
            return;
        }
        c->gathered_len = len;
    }
    for (int j = 0; j < c->n; j++)
        memcpy(c->gathered + (size_t)(c->first + j) * len, c->published[j], len * sizeof(float));
    comm_net_enter(c, 1);
    int rc = c->net->gather_floats(c->net, c, c->gathered, len);
    for (int k = 0; rc == 0 && k < c->nrows; k++)
        rc = c->net->gather_doubles(c->net, c, c->rows + (size_t)k * (size_t)total);
    comm_net_enter(c, 0);
    for (int id = 0; rc == 0 && id < total; id++)
        c->everyone[id] = c->gathered + (size_t)id * len;
}

const float *const *comm_exchange(comm *c, int rank, backend_ctx *ctx, const float *vec,
                                  size_t len)
{
    if (backend_sync(ctx) != 0)
        return NULL;
    c->published[rank] = vec;
    if (comm_barrier(c, rank, "exchange") != 0)
        return NULL;
    if (!c->net)
        return c->published;
    if (rank == 0)
        net_gather(c, len);
    return comm_barrier(c, rank, "exchange") == 0 ? c->everyone : NULL;
}

int comm_exchange_end(comm *c, int rank, backend_ctx *ctx)
{
    /* Reads queued on the device must be done before a peer overwrites. */
    if (backend_sync(ctx) != 0)
        return -1;
    return comm_barrier(c, rank, "exchange");
}

const float *comm_read_peer(comm *c, int rank, backend_ctx *ctx, int peer, float *scratch,
                            size_t len)
{
    const float *src = c->net ? c->everyone[peer] : c->published[peer];
    if (comm_same_memory(c, rank, peer))
        return src;
    comm_peer_copy(c, ctx, scratch, rank, src, peer, len);
    return scratch;
}

int comm_same_memory(const comm *c, int a, int b)
{
    if (c->net) /* another process's vector is a host copy; the net runs on CPUs */
        return 1;
    return !c->ctxs[a] || !c->ctxs[b] || c->ctxs[a]->device == c->ctxs[b]->device;
}

void comm_peer_copy(comm *c, backend_ctx *ctx, float *dst, int dst_rank, const float *src,
                    int src_rank, size_t len)
{
    int to = c->ctxs[dst_rank] ? c->ctxs[dst_rank]->device : ctx->device;
    int from = c->ctxs[src_rank] ? c->ctxs[src_rank]->device : ctx->device;
    if (to != from)
        comm_gpu_peer_copy(ctx, dst, to, src, from, len * sizeof(float));
    else
        backend_copy(ctx, dst, src, len * sizeof(float));
}

void *comm_shared(comm *c, int rank, size_t bytes)
{
    if (rank == 0 && !(c->shared = calloc(1, bytes ? bytes : 1)))
        comm_abort(c, "out of memory for %zu bytes of state shared by the replicas", bytes);
    if (comm_barrier(c, rank, "start") != 0)
        return NULL;
    return c->shared;
}

double *comm_shared_rows(comm *c, int rank, int rows)
{
    int total = c->net ? c->net->total : c->n;
    if (!c->net)
        return comm_shared(c, rank, (size_t)rows * (size_t)total * sizeof(double));
    if (rank == 0) {
        c->nrows = rows;
        if (!(c->rows = calloc((size_t)rows * (size_t)total, sizeof(double))))
            comm_abort(c, "out of memory for %d x %d numbers shared by the replicas", rows, total);
    }
    return comm_barrier(c, rank, "start") == 0 ? c->rows : NULL;
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
    if (c->net) {
        if (rank == 0 && net_sum_doubles(c, &sum, 1) == 0)
            c->net_value[1] = sum / c->net->total;
        if (comm_barrier(c, rank, "agreement") != 0)
            return -1;
        *mean = c->net_value[1];
    }
    return comm_barrier(c, rank, "agreement");
}

int comm_overdue(comm *c, double now_s, double timeout_s, int *missing, const char **what)
{
    int count = 0;
    pthread_mutex_lock(&c->lock);
    if (!c->aborted && !c->net_busy && c->arrived > 0 && now_s - c->first_arrival > timeout_s) {
        *missing = -1;
        for (int r = 0; r < c->n; r++)
            if (!c->waiting[r] && count++ == 0)
                *missing = r;
        *what = c->what;
    }
    /* No rank overdue at a barrier: maybe a leader in NCCL, where all may be. */
    int at_barrier = count;
    for (int r = 0; r < c->n && !c->aborted && !at_barrier; r++)
        if (c->busy_since[r] > 0 && now_s - c->busy_since[r] > timeout_s && count++ == 0) {
            *missing = r;
            *what = c->busy_what[r];
        }
    pthread_mutex_unlock(&c->lock);
    return count;
}
