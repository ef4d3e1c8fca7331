/* comm's GPU path (docs/gpu.md, "Many GPUs"): each GPU's replicas summed
 * on it by its group's leader, the leaders' NCCL all-reduce, CUDA events
 * ordering it all, peer copies (the two facts of the GPUs that topology.c
 * places replicas by: topology_gpu.c). Built with CUDA only;
 * comm_gpu_none.c stands in for both without it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"
#include "cuda/nccl_comm.h"
#include "topology.h"

_Static_assert(sizeof(((comm *)0)->nccl_id) == NCCL_ID_BYTES, "comm.nccl_id holds an NCCL id");

/* A GPU's part of the job, set up and owned by its group's leader. */
typedef struct comm_device {
    float *result;        /* capacity floats: the group's mean, then the job's */
    gpucomm_event *done;  /* recorded once result holds the job's mean */
    nccl_rank *nccl;      /* the GPU's NCCL rank; NULL when the job has one GPU */
    int attached;         /* the group's ranks not yet detached */
} comm_device;

/* NCCL's waits give up once the comm is aborted. */
static int comm_stop(void *p) { return comm_aborted(p); }

/* While a leader waits on NCCL the watchdog can see it (comm_overdue). */
static void busy(comm *c, int rank, const char *what)
{
    pthread_mutex_lock(&c->lock);
    c->busy_since[rank] = comm_now_s();
    c->busy_what[rank] = what;
    pthread_mutex_unlock(&c->lock);
}

static void idle(comm *c, int rank)
{
    pthread_mutex_lock(&c->lock);
    c->busy_since[rank] = 0;
    pthread_mutex_unlock(&c->lock);
}

/* A rank whose GPU failed in a collective ends the job: the others leave at
 * their next collective, and the reason is the failure itself. */
static int gpu_failed(comm *c, int rank, backend_ctx *ctx)
{
    if (!backend_failed(ctx))
        return 0;
    comm_abort(c, "replica %d (GPU %d): %s", rank, ctx->device, ctx->err);
    return 1;
}

/* With other processes: where this one's GPU groups fall among all of
 * theirs (their NCCL ranks) and how many replicas the means divide by. */
static int gpu_plan_net(comm *c)
{
    char err[256];
    int all[c->net->procs], before = 0, groups = 0;
    comm_net_enter(c, 1);
    int rc = c->net->gather_int(c->net, c, c->topo->ngroups, all);
    comm_net_enter(c, 0);
    if (rc != 0)
        return -1;
    for (int p = 0; p < c->net->procs; p++) {
        before += p < c->net->proc ? all[p] : 0;
        groups += all[p];
    }
    if (topology_join(c->topo, before, groups, c->net->total, err, sizeof err) != 0) {
        comm_abort(c, "%s", err);
        return -1;
    }
    return 0;
}

/* Rank 0, between the start barriers: the groups, their state and the
 * NCCL id. A failure aborts the comm, so no rank passes the next barrier. */
static void gpu_plan(comm *c, size_t capacity)
{
    char err[256];
    int device[c->n];
    for (int r = 0; r < c->n; r++)
        device[r] = c->ctxs[r]->device;
    c->topo = malloc(sizeof *c->topo);
    if (!c->topo) {
        comm_abort(c, "comm: out of memory for the replicas' topology");
        return;
    }
    if (topology_build(c->topo, c->n, device, err, sizeof err) != 0) {
        comm_abort(c, "%s", err);
        return;
    }
    if (!(c->dev = calloc((size_t)c->topo->ngroups, sizeof *c->dev))) {
        comm_abort(c, "comm: out of memory for %d GPUs", c->topo->ngroups);
        return;
    }
    for (int g = 0; g < c->topo->ngroups; g++)
        c->dev[g].attached = c->topo->size[g];
    c->capacity = capacity;
    if (c->net && gpu_plan_net(c) != 0)
        return;
    /* Process 0 makes the id, the net hands it to the others. */
    if (c->topo->nccl_ranks > 1 && (!c->net || c->net->proc == 0) &&
        nccl_new_id(c->nccl_id, err, sizeof err) != 0)
        comm_abort(c, "replica 0: %s", err);
    if (c->topo->nccl_ranks > 1 && c->net) {
        comm_net_enter(c, 1);
        c->net->bcast_bytes(c->net, c, c->nccl_id, NCCL_ID_BYTES);
        comm_net_enter(c, 0);
    }
}

static int attach_stopped(comm *c, int rank, char *err, size_t errlen)
{
    snprintf(err, errlen, "replica %d: the job stopped before it began: %s", rank,
             comm_abort_reason(c));
    return -1;
}

int comm_gpu_attach(comm *c, int rank, backend_ctx *ctx, size_t capacity, char *err,
                      size_t errlen)
{
    if (rank == 0)
        gpu_plan(c, capacity);
    if (comm_barrier(c, rank, "start") != 0)
        return attach_stopped(c, rank, err, errlen);
    /* Every rank passed: each will undo its part in comm_detach. */
    c->stage[rank] = 1;
    const topology *t = c->topo;
    int g = t->group[rank];
    comm_device *d = &c->dev[g];
    c->ready[rank] = gpucomm_event_new(ctx);
    if (rank == t->leader[g]) {
        d->result = backend_alloc(ctx, (capacity ? capacity : 1) * sizeof(float));
        d->done = gpucomm_event_new(ctx);
        if (t->nccl_ranks > 1) {
            gpucomm_enable_peers(ctx, t->group_device, t->ngroups);
            /* Every leader joins at once, each from its own thread. */
            busy(c, rank, "end of the NCCL setup");
            d->nccl = nccl_rank_new(ctx, t->nccl_ranks, t->nccl_first + g, c->nccl_id,
                                    topology_weight(t, g), comm_stop, c);
            idle(c, rank);
        }
    }
    gpu_failed(c, rank, ctx);
    if (comm_barrier(c, rank, "start") != 0)
        return attach_stopped(c, rank, err, errlen);
    return 0;
}

/* Three steps between two barriers, none waiting for a GPU but the NCCL
 * leaders: (1) every rank marks the end of its vector's production on its
 * stream; (2) each leader's stream waits for those marks, sums the group in
 * rank order into the GPU's result (vec_mean), the leaders all-reduce the
 * group means weighed size / n on their NCCL streams, and `done` is marked;
 * (3) every rank's stream waits for `done`. So no peer reads a vector its
 * owner may already be overwriting (the owner's stream is held at `done`),
 * and the next all-reduce's writes to the result wait for the marks of step
 * (1), made after every rank's reads of this one. */
const float *comm_gpu_allreduce_mean(comm *c, int rank, backend_ctx *ctx, const float *vec,
                                       size_t len)
{
    const topology *t = c->topo;
    int g = t->group[rank];
    comm_device *d = &c->dev[g];
    if (comm_aborted(c))
        return NULL;
    gpucomm_record(ctx, c->ready[rank]);
    if (gpu_failed(c, rank, ctx))
        return NULL;
    c->published[rank] = vec;
    if (comm_barrier(c, rank, "all-reduce") != 0)
        return NULL;
    if (rank == t->leader[g] && len > 0) {
        int members[TOPO_MAX_RANKS];
        const float *xs[TOPO_MAX_RANKS];
        int k = topology_members(t, g, members);
        for (int i = 0; i < k; i++) {
            if (members[i] != rank)
                gpucomm_wait(ctx, c->ready[members[i]]);
            xs[i] = c->published[members[i]];
        }
        /* A group of one sends its vector as it is. */
        const float *send = vec;
        if (k > 1 || !d->nccl) {
            vec_mean(ctx, len, xs, k, d->result);
            send = d->result;
        }
        if (d->nccl) {
            busy(c, rank, "end of the NCCL all-reduce");
            int rc = nccl_rank_allreduce(d->nccl, ctx, send, d->result, len, d->done, comm_stop, c);
            idle(c, rank);
            if (rc != 0 && !backend_failed(ctx))
                return NULL; /* the comm was aborted */
        } else {
            gpucomm_record(ctx, d->done);
        }
        if (gpu_failed(c, rank, ctx))
            return NULL;
    }
    if (comm_barrier(c, rank, "all-reduce") != 0)
        return NULL;
    gpucomm_wait(ctx, d->done);
    return gpu_failed(c, rank, ctx) ? NULL : d->result;
}

void comm_gpu_detach(comm *c, int rank)
{
    backend_ctx *ctx = c->ctxs[rank];
    const topology *t = c->topo;
    int g = t->group[rank], leader = rank == t->leader[g];
    comm_device *d = &c->dev[g];
    /* NCCL first: every leader gets here at about the same time. */
    if (leader && d->nccl) {
        busy(c, rank, "end of the NCCL teardown");
        nccl_rank_free(d->nccl, ctx, comm_stop, c);
        idle(c, rank);
        d->nccl = NULL;
    }
    /* This rank's queued reads of the result are done before it goes. A
     * failed context skips the wait; then backend_free synchronises the
     * streams before it frees the result. */
    backend_sync(ctx);
    gpucomm_event_free(ctx, c->ready[rank]);
    c->ready[rank] = NULL;
    pthread_mutex_lock(&c->lock);
    d->attached--;
    pthread_cond_broadcast(&c->wake);
    while (leader && d->attached > 0)
        pthread_cond_wait(&c->wake, &c->lock);
    pthread_mutex_unlock(&c->lock);
    if (leader) {
        gpucomm_event_free(ctx, d->done);
        backend_free(ctx, d->result);
        d->done = NULL;
        d->result = NULL;
    }
    c->stage[rank] = 0;
    gpu_failed(c, rank, ctx);
}


void comm_gpu_peer_copy(backend_ctx *ctx, float *dst, int to, const float *src, int from,
                        size_t bytes)
{
    gpucomm_peer_copy(ctx, dst, to, src, from, bytes);
}
