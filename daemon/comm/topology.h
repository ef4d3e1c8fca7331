/* Where a job's replicas sit on the machine (docs/gpu.md, "Many GPUs"):
 * which GPU each rank runs on, the ranks that share a GPU (a group, whose
 * lowest rank leads it), how a group's mean weighs in the job's mean, and
 * the CPU cores nearest a GPU. Host logic only, so the CPU tests check it;
 * the two questions only a GPU can answer (a PCI bus id, peer access) say
 * "no" without CUDA. */
#ifndef PARLE_TOPOLOGY_H
#define PARLE_TOPOLOGY_H

#include <stddef.h>
#include "backend.h"

enum { TOPO_MAX_RANKS = BACKEND_MEAN_MAX, TOPO_MAX_GROUPS = 64 };

typedef struct topology {
    int n;                              /* ranks */
    int ngroups;                        /* distinct devices, 1 on the CPU */
    int device[TOPO_MAX_RANKS];         /* rank -> GPU id, -1: the CPU */
    int group[TOPO_MAX_RANKS];          /* rank -> its group */
    int group_device[TOPO_MAX_GROUPS];  /* group -> GPU id (-1: the CPU) */
    int leader[TOPO_MAX_GROUPS];        /* group -> its lowest rank */
    int size[TOPO_MAX_GROUPS];          /* group -> how many ranks */
    /* Across processes (MPI, docs/mpi.md): the job's GPU groups in all of
     * them are one NCCL communicator, this process's groups being its NCCL
     * ranks nccl_first.. ; the means weigh by the replicas in all of them.
     * In one process: 0, ngroups and n. */
    int nccl_first, nccl_ranks;
    int total;                          /* the job's replicas in all processes */
} topology;

/* Where replica `rank` runs, the one place this is decided (the runner, its
 * pinning and memory report, the queue's replica_devices): gpus[rank %
 * ngpus], or -1 (the CPU) when ngpus is 0. */
int topology_device(int rank, const int *gpus, int ngpus);

/* Groups the n ranks by device[rank]; groups are numbered in the order of
 * their leaders, so group 0 is rank 0's. 0, or -1 with a message (too many
 * ranks or devices; some ranks on the CPU and some on a GPU). */
int topology_build(topology *t, int n, const int *device, char *err, size_t errlen);

/* This process's part of a job over several (MPI): its groups come after
 * `groups_before` others, `groups_total` in all, and `replicas_total`
 * replicas weigh in the mean. 0, or -1 with a message when the counts
 * cannot hold this process's groups and ranks. */
int topology_join(topology *t, int groups_before, int groups_total, int replicas_total,
                  char *err, size_t errlen);

/* The ranks of group g in rank order, into ranks[]; returns how many. */
int topology_members(const topology *t, int g, int *ranks);

/* What group g's mean is multiplied by before the groups' means are summed:
 * size / total, so that the sum is the mean over all the job's replicas
 * however unevenly they fall on the GPUs (3 on 2 GPUs: 2/3 and 1/3). */
float topology_weight(const topology *t, int g);

/* A Linux CPU list ("0-15,32-47", "3", "", with an optional newline) into
 * cpus[max], ascending as written: how many, or -1 if it is malformed or
 * longer than max. */
int topology_parse_cpulist(const char *s, int *cpus, int max);

/* The cores nearest a PCI device: <sysfs_root>/bus/pci/devices/<bus id in
 * lower case>/local_cpulist ("/sys" on a real machine), into cpus[max]: how
 * many, or -1 when it cannot be read. */
int topology_local_cpus(const char *sysfs_root, const char *pci_bus_id, int *cpus, int max);

/* The cores of `allowed` (a job's, nallowed of them) nearest the PCI device
 * `pci_bus_id`, into out[nallowed]: how many; all of `allowed` when the
 * device's cores are unknown (NULL id, no sysfs entry) or none is allowed. */
int topology_near_cpus(const char *sysfs_root, const char *pci_bus_id, const int *allowed,
                       int nallowed, int *out);
/* The same for GPU `device`, by its PCI bus id. */
int topology_gpu_cpus(int device, const char *sysfs_root, const int *allowed, int nallowed,
                      int *out);

/* GPU `device`'s PCI bus id ("0000:3B:00.0"): 0, or -1 (no such GPU, no CUDA). */
int topology_pci_bus_id(int device, char *id, size_t len);

/* 1 if GPU `device` can read and write `peer`'s memory directly (P2P). */
int topology_peer_access(int device, int peer);

#endif
