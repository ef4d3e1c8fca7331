/* The GPU side of daemon/comm/comm.c's collectives (docs/gpu.md, "Many GPUs"):
 * CUDA events that order one replica's stream after another's, peer copies
 * between GPUs, and one NCCL rank per GPU of a job. A C interface without
 * CUDA or NCCL types, so that comm.c and topology.c compile as plain C.
 *
 * Errors are the backend's: the first failure is kept in ctx->err as
 * "file:line: call: STATUS (message)" (for NCCL also ncclGetLastError's
 * text), later calls on a failed context do nothing, nothing is printed and
 * nothing exits. Every function taking a ctx runs on that replica's thread,
 * whose current device is ctx->device. */
#ifndef PARLE_NCCL_COMM_H
#define PARLE_NCCL_COMM_H

#include <stddef.h>
#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ordering between streams ---- */
typedef struct gpucomm_event gpucomm_event; /* a cudaEvent_t, without timing */

/* An event of ctx's device; NULL with the sticky error set. */
gpucomm_event *gpucomm_event_new(backend_ctx *ctx);
void gpucomm_event_free(backend_ctx *ctx, gpucomm_event *ev);
/* Marks the point after everything queued so far on ctx's stream. */
void gpucomm_record(backend_ctx *ctx, gpucomm_event *ev);
/* Work queued on ctx's stream from now on starts after ev's last record
 * (one made by another thread before this call, on any stream of any GPU). */
void gpucomm_wait(backend_ctx *ctx, gpucomm_event *ev);

/* ---- peers ---- */
/* Copies `bytes` from src (memory of GPU src_device) to dst (GPU
 * dst_device) on ctx's stream. Direct over NVLink or PCIe where peer access
 * is enabled; otherwise the driver stages the copy through pinned host
 * memory itself. */
void gpucomm_peer_copy(backend_ctx *ctx, void *dst, int dst_device, const void *src,
                       int src_device, size_t bytes);
/* Lets ctx's device read and write every GPU of `devices` that it can reach
 * directly (cudaDeviceEnablePeerAccess; enabling twice is not an error). */
void gpucomm_enable_peers(backend_ctx *ctx, const int *devices, int ndevices);
/* 1 if `device` can access `peer`'s memory directly, else 0. */
int gpucomm_can_access_peer(int device, int peer);
/* "0000:3B:00.0": 0, or -1 (no such device). */
int gpucomm_pci_bus_id(int device, char *id, size_t len);

/* ---- NCCL: one rank per GPU ---- */
/* Whether waiting on NCCL should give up (the job's comm was aborted). */
typedef int (*gpucomm_stop_fn)(void *arg);

enum { NCCL_ID_BYTES = 128 };
/* A new communicator's id (ncclGetUniqueId), for every rank's
 * nccl_rank_new: 0, or -1 with a message (also when built without NCCL). */
int nccl_new_id(unsigned char id[NCCL_ID_BYTES], char *err, size_t errlen);

typedef struct nccl_rank nccl_rank;
/* Rank `rank` of `nranks` on ctx's device: a non-blocking communicator, its
 * own stream, and a sum that first multiplies this rank's input by `weight`.
 * Every rank calls it at the same time from its own thread. Returns NULL
 * with the sticky error set, or NULL alone once stop(arg) said to give up. */
nccl_rank *nccl_rank_new(backend_ctx *ctx, int nranks, int rank,
                         const unsigned char id[NCCL_ID_BYTES], float weight,
                         gpucomm_stop_fn stop, void *arg);
/* recv = sum over ranks of weight * send (len floats, in place when send ==
 * recv) on the rank's stream, after the work queued so far on ctx's stream;
 * records `done` after it and waits for it, polling NCCL's asynchronous
 * error and stop(arg). Returns 0; -1 with the sticky error set; or -1 alone
 * when stopped. After -1 the communicator is aborted and unusable. */
int nccl_rank_allreduce(nccl_rank *nr, backend_ctx *ctx, const float *send, float *recv,
                        size_t len, gpucomm_event *done, gpucomm_stop_fn stop, void *arg);
/* Ends the rank: finalizes and destroys the communicator (every rank at
 * about the same time), or aborts it when stop(arg) says so (then or while
 * finalizing). Failures land in the sticky error. NULL is a no-op. */
void nccl_rank_free(nccl_rank *nr, backend_ctx *ctx, gpucomm_stop_fn stop, void *arg);

#ifdef __cplusplus
}
#endif

#endif
