/* comm's GPU path in a build without CUDA: no context is on a GPU, so
 * none of this runs but the refusal, and there are no GPUs to place
 * replicas by (comm_gpu.c is the real one). */
#include <stdio.h>

#include "comm_impl.h"
#include "topology.h"

int comm_gpu_attach(comm *c, int rank, backend_ctx *ctx, size_t capacity, char *err,
                    size_t errlen)
{
    (void)c, (void)ctx, (void)capacity;
    snprintf(err, errlen, "replica %d: this parle was built without CUDA", rank);
    return -1;
}

const float *comm_gpu_allreduce_mean(comm *c, int rank, backend_ctx *ctx, const float *vec,
                                     size_t len)
{
    (void)c, (void)rank, (void)ctx, (void)vec, (void)len;
    return NULL;
}

void comm_gpu_detach(comm *c, int rank) { (void)c, (void)rank; }

void comm_gpu_peer_copy(backend_ctx *ctx, float *dst, int to, const float *src, int from,
                        size_t bytes)
{
    (void)to, (void)from;
    backend_copy(ctx, dst, src, bytes);
}

int topology_pci_bus_id(int device, char *id, size_t len)
{
    (void)device, (void)id, (void)len;
    return -1;
}

int topology_peer_access(int device, int peer)
{
    (void)device, (void)peer;
    return 0;
}
