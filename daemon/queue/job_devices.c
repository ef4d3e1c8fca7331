/* A job's devices (jobs_impl.h): resolved against the daemon's now, and a
 * CPU job's cores, the ids it takes to run, disjoint from every other
 * running job's, and gives back as it ends. */
#include <stdio.h>
#include <stdlib.h>

#include "jobs_impl.h"
#include "mpi_node.h"

/* Ranks other than rank0 exist only under --mpi: without it such a job would
 * quietly run on this one process's CPU. (Under --mpi the job's start checks
 * them against the ranks there are.) */
static int check_ranks(const job_config *cfg, char *err, size_t errlen)
{
    uint64_t ranks = cfg->device_spec.ranks;
    if (mpi_node_size() > 1 || !(ranks & ~1ull))
        return 0;
    snprintf(err, errlen, "\"%s\" names rank%d, but parled is not running under MPI (one "
             "process, only rank0): start it as mpirun -n K parled --mpi (docs/mpi.md), or use "
             "\"cpu\"", cfg->devices, __builtin_ctzll(ranks & ~1ull));
    return -1;
}

int job_devices_now(jobs *js, job *j, char *err, size_t errlen)
{
    char why[256];
    const int cores = j->cfg.device_spec.cores;
    if (cores && mpi_node_size() > 1)
        snprintf(why, sizeof why, "\"%s\": a share of the cores is for one parled, not under "
                 "--mpi (each rank's job takes its whole CPU)", j->cfg.devices);
    else if (cores > js->ncores)
        snprintf(why, sizeof why, "\"%s\" asks for %d cores, parled has %d", j->cfg.devices,
                 cores, js->ncores);
    else if (job_devices_resolve(&j->cfg.device_spec, j->cfg.devices, js->devices,
                                 DEVICES_OF_DAEMON, &j->devices, why, sizeof why) == 0 &&
             check_ranks(&j->cfg, why, sizeof why) == 0)
        return 0;
    snprintf(err, errlen, "devices: %s (parled's devices: %s)", why, js->devices_text);
    return -1;
}

int job_cores_wanted(const jobs *js, const job *j)
{
    if (!(j->devices & DEV_CPU))
        return 0;
    return j->cfg.device_spec.cores ? j->cfg.device_spec.cores : js->ncores;
}

int job_cores_take(jobs *js, job *j)
{
    const int want = job_cores_wanted(js, j);
    if (want == 0)
        return 0;
    int *ids = malloc((size_t)want * sizeof *ids), n = 0;
    for (int i = 0; ids && i < js->ncores && n < want; i++)
        if (!js->core_job[i])
            ids[n++] = i;
    if (!ids || n < want) {
        free(ids);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        js->core_job[ids[k]] = j;
        ids[k] = js->cores[ids[k]];
    }
    j->cores = ids;
    j->ncores_held = n;
    return 0;
}

void job_cores_release(jobs *js, job *j)
{
    for (int i = 0; i < js->ncores; i++)
        if (js->core_job[i] == j)
            js->core_job[i] = NULL;
    free(j->cores);
    j->cores = NULL;
    j->ncores_held = 0;
}
