/* Where a job's replicas run: the cores this process may use, the GPUs a
 * job's `devices` names here (job_devices_resolve, jobconfig.h),
 * and each replica thread's pinning (which GPU a rank is on and the cores
 * nearest it are topology.c's). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner_impl.h"
#include "topology.h"

int run_cpu_cores(int **cores, char *err, size_t errlen)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    *cores = NULL;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) == 0) {
        snprintf(err, errlen, "sched_getaffinity: %s", strerror(errno));
        return -1;
    }
    if (!(*cores = calloc((size_t)CPU_COUNT(&set), sizeof(int)))) {
        snprintf(err, errlen, "out of memory listing cores");
        return -1;
    }
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            (*cores)[n++] = c;
    return n;
}

int run_job_gpus(const job_config *cfg, int *gpus, char *err, size_t errlen)
{
    uint64_t set;
    if (job_devices_resolve(&cfg->device_spec, cfg->devices,
                            job_devices_present(backend_cuda_devices()), DEVICES_OF_MACHINE, &set,
                            err, errlen) != 0)
        return -1;
    return job_devices_gpus(set, gpus);
}

/* CPU replicas that outnumber the cores and do not divide them evenly: with
 * round-robin pinning some cores would have more replicas than others, and
 * synchronous rules run at the pace of the busiest core. Each of these may
 * run on any of the job's cores, one thread each, and takes its turns on
 * them (step_schedule.h) where its rule meets every S steps, S large enough;
 * elsewhere the kernel's time slices share the cores. */
int run_replicas_float(const job_run *run)
{
    return run->where.ngpus == 0 && run->nlocal > run->where.ncores &&
           run->nlocal % run->where.ncores != 0;
}

/* Replica a's cores: a set of max(1, ncores / n), or all of them when the
 * replicas float (above). A replica on a GPU mostly launches work and copies
 * batches to it: it runs on the job's cores nearest its GPU (its NUMA
 * node's, from sysfs), shared with the GPU's other replicas. */
int run_pin_replica(const job_run *run, int rank)
{
    int share = run->where.ncores / run->nlocal > 1 ? run->where.ncores / run->nlocal : 1;
    int floating = run_replicas_float(run);
    cpu_set_t set;
    CPU_ZERO(&set);
    int gpu = topology_device(rank, run->where.gpus, run->where.ngpus);
    if (gpu >= 0) {
        int near[run->where.ncores];
        int nnear = topology_gpu_cpus(gpu, "/sys", run->where.cores, run->where.ncores, near);
        for (int i = 0; i < nnear; i++)
            CPU_SET(near[i], &set);
    } else {
        for (int i = 0; i < (floating ? run->where.ncores : share); i++)
            CPU_SET(run->where.cores[floating ? i : (rank * share + i) % run->where.ncores], &set);
    }
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    return share;
}

void run_pin_to_core(int core)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}
