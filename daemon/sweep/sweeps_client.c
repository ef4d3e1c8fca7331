/* The sweeps made (sweeps.h) and handed to the job store as its client
 * (jobs_client.h): the table of what the store calls, each entry in the
 * file that does it. The top of the folder: nothing calls into it. */
#include <stdio.h>
#include <stdlib.h>

#include "sweeps_impl.h"

sweeps *sweeps_new(const char *state_dir)
{
    sweeps *sw = calloc(1, sizeof *sw);
    if (!sw)
        return NULL;
    snprintf(sw->dir, sizeof sw->dir, "%s/sweeps", state_dir);
    sw->next_id = 1;
    sw->client = (jobs_client){
        .self = sw,
        .job_part_size = sizeof(struct job_in_sweep),
        .reload = sweeps_reload,
        .free = sweeps_free,
        .status = job_status_sweep,
        .restore = job_restore_sweep,
        .evaluated = sweep_on_eval,
        .run_done = sweep_on_done,
        .promised = sweeps_promised,
        .group_end = sweep_end,
        .refuses_remove = sweep_refuses_remove,
        .remove_ended = sweeps_remove_ended,
    };
    return sw;
}

const jobs_client *sweeps_client(const sweeps *sw) { return &sw->client; }
