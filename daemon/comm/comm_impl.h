/* Internal to the comm: what comm.c calls of its GPU path (comm_gpu.c or
 * comm_gpu_none.c), and what both call of comm_sync.c. */
#ifndef PARLE_COMM_IMPL_H
#define PARLE_COMM_IMPL_H

#include "comm.h"

/* comm_sync.c. The watchdog leaves a wait on the net to the net's own
 * deadline while a replica is in a net operation (busy: entering, else
 * leaving). */
void comm_net_enter(comm *c, int busy);

/* comm_gpu.c. Once every replica is attached and some context is on a GPU: set up the
 * group's device buffers, events and NCCL rank. 0, or -1 with why. */
int comm_gpu_attach(comm *c, int rank, backend_ctx *ctx, size_t capacity, char *err,
                    size_t errlen);
/* comm_allreduce_mean on GPUs; NULL once the comm is aborted. */
const float *comm_gpu_allreduce_mean(comm *c, int rank, backend_ctx *ctx, const float *vec,
                                     size_t len);
void comm_gpu_detach(comm *c, int rank);
/* A copy between two GPUs' memories (peer access where enabled). */
void comm_gpu_peer_copy(backend_ctx *ctx, float *dst, int to, const float *src, int from,
                        size_t bytes);

#endif
