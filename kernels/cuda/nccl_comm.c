/* Events, peer copies and NCCL ranks for daemon/comm/comm.c (nccl_comm.h). */
#include "nccl_comm.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_cuda.h"
#include "cuda_check.h"
#include "parle_config.h"
#if PARLE_HAVE_NCCL
#include <nccl.h>
#endif

/* gpucomm_event is a cudaEvent_t seen through an opaque type. */
static cudaEvent_t event_of(gpucomm_event *ev) { return (cudaEvent_t)(void *)ev; }

/* Polling a GPU or NCCL: spin briefly (a collective often ends within
 * microseconds), then sleep between looks so a long wait leaves the core
 * to the replica threads sharing it. */
static void backoff(unsigned spins)
{
    if (spins > 200)
        nanosleep(&(struct timespec){.tv_nsec = 20 * 1000}, NULL);
}

gpucomm_event *gpucomm_event_new(backend_ctx *ctx)
{
    cudaEvent_t ev = NULL;
    if (ctx->failed || !CUDA_OK(ctx, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)))
        return NULL;
    return (gpucomm_event *)(void *)ev;
}

/* Freed even on a failed context: the event must not outlive the job. */
void gpucomm_event_free(backend_ctx *ctx, gpucomm_event *ev)
{
    if (ev)
        CUDA_OK(ctx, cudaEventDestroy(event_of(ev)));
}

void gpucomm_record(backend_ctx *ctx, gpucomm_event *ev)
{
    if (!ctx->failed)
        CUDA_OK(ctx, cudaEventRecord(event_of(ev), cuda_stream_of(ctx)));
}

void gpucomm_wait(backend_ctx *ctx, gpucomm_event *ev)
{
    if (!ctx->failed)
        CUDA_OK(ctx, cudaStreamWaitEvent(cuda_stream_of(ctx), event_of(ev), 0));
}

/* Without peer access the CUDA driver stages a peer copy through its own
 * pinned host buffers, pipelined (CUDA programming guide, "Peer-to-Peer
 * Memory Copy"), so one call serves both cases. */
void gpucomm_peer_copy(backend_ctx *ctx, void *dst, int dst_device, const void *src,
                       int src_device, size_t bytes)
{
    if (!ctx->failed)
        CUDA_OK(ctx, cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes,
                                         cuda_stream_of(ctx)));
}

void gpucomm_enable_peers(backend_ctx *ctx, const int *devices, int ndevices)
{
    for (int i = 0; i < ndevices && !ctx->failed; i++) {
        if (devices[i] == ctx->device || !gpucomm_can_access_peer(ctx->device, devices[i]))
            continue;
        cudaError_t rc = cudaDeviceEnablePeerAccess(devices[i], 0);
        /* Already enabled (by another job on this GPU): fine. Too many peers
         * (a GPU reaches at most 8 at once): copies to this one go through
         * the host instead, slower but correct. */
        if (rc == cudaErrorPeerAccessAlreadyEnabled || rc == cudaErrorTooManyPeers)
            (void)cudaGetLastError();
        else
            cuda_ok_(ctx, rc, __FILE__, __LINE__, "cudaDeviceEnablePeerAccess");
    }
}

int gpucomm_can_access_peer(int device, int peer)
{
    int can = 0;
    if (device == peer)
        return 0;
    if (cudaDeviceCanAccessPeer(&can, device, peer) != cudaSuccess) {
        (void)cudaGetLastError(); /* a question, not a failure to keep */
        return 0;
    }
    return can != 0;
}

int gpucomm_pci_bus_id(int device, char *id, size_t len)
{
    if (cudaDeviceGetPCIBusId(id, (int)len, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return 0;
}

#if PARLE_HAVE_NCCL

_Static_assert(sizeof(ncclUniqueId) == NCCL_ID_BYTES, "NCCL_ID_BYTES is ncclUniqueId's size");

struct nccl_rank {
    ncclComm_t comm;      /* non-blocking: no call waits on the other ranks */
    ncclRedOp_t op;       /* weight * x, summed over ranks */
    int have_op;
    cudaStream_t stream;  /* the collectives' own stream */
    cudaEvent_t queued;   /* the end of ctx's queued work, which the stream waits for */
};

static const char *nccl_name(ncclResult_t rc)
{
    switch (rc) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResult";
    }
}

/* "file:line: call: NAME (description; NCCL's last error)". */
static void nccl_fail(backend_ctx *ctx, ncclComm_t comm, ncclResult_t rc, const char *file,
                      int line, const char *call)
{
    const char *last = ncclGetLastError(comm);
    backend_fail(ctx, "%s:%d: %.*s: %s (%s%s%s)", file, line, CALL_NAME_LEN(call), call,
                 nccl_name(rc), ncclGetErrorString(rc), last && *last ? "; " : "",
                 last ? last : "");
    cuda_probe_device(ctx);
}

/* A non-blocking communicator answers ncclInProgress while a call is still
 * under way (an init, an enqueue, a finalize); its state says when it is
 * done. 0 once it succeeded; -1 with the sticky error; -2 when stop() says
 * to give up. `rc` is the call's own result, evaluated before nr->comm is
 * read (an init writes nr->comm). */
static int nccl_settle_(backend_ctx *ctx, nccl_rank *nr, ncclResult_t rc, const char *file,
                        int line, const char *call, gpucomm_stop_fn stop, void *arg)
{
    for (unsigned spins = 0; rc == ncclInProgress; spins++) {
        if (stop && stop(arg))
            return -2;
        backoff(spins);
        ncclResult_t got = ncclCommGetAsyncError(nr->comm, &rc);
        if (got != ncclSuccess)
            rc = got;
    }
    if (rc == ncclSuccess)
        return 0;
    nccl_fail(ctx, nr->comm, rc, file, line, call);
    return -1;
}

#define NCCL_SETTLE(ctx, nr, call, stop, arg) \
    nccl_settle_((ctx), (nr), (call), __FILE__, __LINE__, #call, (stop), (arg))

/* ncclCommAbort runs blocking whatever the configuration: it raises the
 * abort flag that NCCL's kernels and proxy threads poll, then frees the
 * rank (NCCL frees the shared parts with the job's last rank). */
static void rank_abort(nccl_rank *nr, backend_ctx *ctx)
{
    if (!nr->comm)
        return;
    ncclResult_t rc = ncclCommAbort(nr->comm);
    nr->comm = NULL;
    if (rc != ncclSuccess)
        nccl_fail(ctx, NULL, rc, __FILE__, __LINE__, "ncclCommAbort");
}

static void rank_release(nccl_rank *nr, backend_ctx *ctx)
{
    if (nr->queued)
        CUDA_OK(ctx, cudaEventDestroy(nr->queued));
    if (nr->stream)
        CUDA_OK(ctx, cudaStreamDestroy(nr->stream));
    free(nr);
}

int nccl_new_id(unsigned char id[NCCL_ID_BYTES], char *err, size_t errlen)
{
    ncclUniqueId uid;
    ncclResult_t rc = ncclGetUniqueId(&uid);
    if (rc != ncclSuccess) {
        const char *last = ncclGetLastError(NULL);
        snprintf(err, errlen, "%s:%d: ncclGetUniqueId: %s (%s%s%s)", __FILE__, __LINE__,
                 nccl_name(rc), ncclGetErrorString(rc), last && *last ? "; " : "",
                 last ? last : "");
        return -1;
    }
    memcpy(id, uid.internal, NCCL_ID_BYTES);
    return 0;
}

nccl_rank *nccl_rank_new(backend_ctx *ctx, int nranks, int rank,
                         const unsigned char id[NCCL_ID_BYTES], float weight,
                         gpucomm_stop_fn stop, void *arg)
{
    if (ctx->failed)
        return NULL;
    nccl_rank *nr = calloc(1, sizeof *nr);
    if (!nr) {
        backend_fail(ctx, "cuda:%d: out of host memory for the NCCL rank", ctx->device);
        return NULL;
    }
    ncclUniqueId uid;
    memcpy(uid.internal, id, NCCL_ID_BYTES);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    int rc = CUDA_OK(ctx, cudaStreamCreateWithFlags(&nr->stream, cudaStreamNonBlocking)) &&
                     CUDA_OK(ctx, cudaEventCreateWithFlags(&nr->queued, cudaEventDisableTiming))
                 ? 0 : -1;
    if (rc == 0)
        rc = NCCL_SETTLE(ctx, nr, ncclCommInitRankConfig(&nr->comm, nranks, uid, rank, &config),
                         stop, arg);
    /* The weight is read now (host-immediate), so a local is fine. */
    if (rc == 0)
        rc = NCCL_SETTLE(ctx, nr, ncclRedOpCreatePreMulSum(&nr->op, &weight, ncclFloat32,
                                                           ncclScalarHostImmediate, nr->comm),
                         stop, arg);
    if (rc != 0) {
        rank_abort(nr, ctx);
        rank_release(nr, ctx);
        return NULL;
    }
    nr->have_op = 1;
    return nr;
}

int nccl_rank_allreduce(nccl_rank *nr, backend_ctx *ctx, const float *send, float *recv,
                        size_t len, gpucomm_event *done, gpucomm_stop_fn stop, void *arg)
{
    if (ctx->failed || !nr->comm)
        return -1;
    cudaEvent_t ev = event_of(done);
    int rc = CUDA_OK(ctx, cudaEventRecord(nr->queued, cuda_stream_of(ctx))) &&
                     CUDA_OK(ctx, cudaStreamWaitEvent(nr->stream, nr->queued, 0))
                 ? 0 : -1;
    if (rc == 0)
        rc = NCCL_SETTLE(ctx, nr, ncclAllReduce(send, recv, len, ncclFloat32, nr->op, nr->comm,
                                                nr->stream), stop, arg);
    if (rc == 0 && !CUDA_OK(ctx, cudaEventRecord(ev, nr->stream)))
        rc = -1;
    /* The one wait of a collective across GPUs, where a lost peer would
     * hang it: NCCL's own error or the comm's abort ends it. */
    for (unsigned spins = 0; rc == 0; spins++) {
        cudaError_t q = cudaEventQuery(ev);
        if (q == cudaSuccess)
            return 0;
        if (q != cudaErrorNotReady) {
            cuda_ok_(ctx, q, __FILE__, __LINE__, "cudaEventQuery");
            break;
        }
        /* "Not ready" is kept as the thread's last error like any other:
         * cleared, or the next kernel launch's cudaGetLastError() check
         * (launch.cuh) would report it as that launch's failure. */
        (void)cudaGetLastError();
        ncclResult_t state;
        ncclResult_t got = ncclCommGetAsyncError(nr->comm, &state);
        if (got != ncclSuccess)
            state = got;
        if (state != ncclSuccess && state != ncclInProgress) {
            nccl_fail(ctx, nr->comm, state, __FILE__, __LINE__, "ncclAllReduce");
            break;
        }
        if (stop(arg))
            break;
        backoff(spins);
    }
    /* Failed or stopped: the kernel may still be waiting on a peer. */
    rank_abort(nr, ctx);
    return -1;
}

void nccl_rank_free(nccl_rank *nr, backend_ctx *ctx, gpucomm_stop_fn stop, void *arg)
{
    if (!nr)
        return;
    if (nr->comm && !stop(arg)) {
        int rc = nr->have_op ? NCCL_SETTLE(ctx, nr, ncclRedOpDestroy(nr->op, nr->comm), stop, arg)
                             : 0;
        if (rc == 0)
            rc = NCCL_SETTLE(ctx, nr, ncclCommFinalize(nr->comm), stop, arg);
        if (rc == 0) {
            /* Finalized: destroy only frees this rank's memory. */
            ncclResult_t d = ncclCommDestroy(nr->comm);
            if (d != ncclSuccess)
                nccl_fail(ctx, nr->comm, d, __FILE__, __LINE__, "ncclCommDestroy");
            nr->comm = NULL;
        }
    }
    rank_abort(nr, ctx);
    rank_release(nr, ctx);
}

#else /* no NCCL in this build: one GPU per job */

struct nccl_rank {
    int unused;
};

int nccl_new_id(unsigned char id[NCCL_ID_BYTES], char *err, size_t errlen)
{
    (void)id;
    snprintf(err, errlen, "replicas on several GPUs need NCCL, and this parle was built "
             "without it (docs/gpu.md)");
    return -1;
}

nccl_rank *nccl_rank_new(backend_ctx *ctx, int nranks, int rank,
                         const unsigned char id[NCCL_ID_BYTES], float weight,
                         gpucomm_stop_fn stop, void *arg)
{
    (void)nranks, (void)rank, (void)id, (void)weight, (void)stop, (void)arg;
    backend_fail(ctx, "cuda:%d: this parle was built without NCCL", ctx->device);
    return NULL;
}

int nccl_rank_allreduce(nccl_rank *nr, backend_ctx *ctx, const float *send, float *recv,
                        size_t len, gpucomm_event *done, gpucomm_stop_fn stop, void *arg)
{
    (void)nr, (void)send, (void)recv, (void)len, (void)done, (void)stop, (void)arg;
    backend_fail(ctx, "cuda:%d: this parle was built without NCCL", ctx->device);
    return -1;
}

void nccl_rank_free(nccl_rank *nr, backend_ctx *ctx, gpucomm_stop_fn stop, void *arg)
{
    (void)nr, (void)ctx, (void)stop, (void)arg;
}

#endif
