/* The two facts of the GPUs that topology.c places replicas by
 * (topology.h), from the CUDA runtime. Built with CUDA only;
 * comm_gpu_none.c stands in without it. */
#include "cuda/nccl_comm.h"
#include "topology.h"

int topology_pci_bus_id(int device, char *id, size_t len)
{
    return gpucomm_pci_bus_id(device, id, len);
}

int topology_peer_access(int device, int peer) { return gpucomm_can_access_peer(device, peer); }
