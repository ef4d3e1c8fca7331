/* A CPU job's cores (jobs_impl.h): the ids it takes to run, disjoint from
 * every other running job's, and gives back as it ends. */
#include <stdlib.h>

#include "jobs_impl.h"

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
