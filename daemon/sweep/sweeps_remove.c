/* A sweep removed with its jobs (`sweep rm`, sweeps.h; and --remove-ended
 * through the store's client): its record first, then each job as `rm`
 * removes one (job_remove_folder). A sweep's job is never removed alone. */
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "numbered_dirs.h"
#include "sweeps_impl.h"

int sweep_refuses_remove(void *self, const job *j, char *err, size_t errlen)
{
    (void)self;
    const char *id = in_sweep_of(j)->sweep_id;
    if (!id[0])
        return 0;
    snprintf(err, errlen, "job %s belongs to sweep %s: remove the sweep with its jobs "
             "(parlectl sweep rm %s)", job_id(j), id, id);
    return -1;
}

int sweep_remove(sweeps *sw, sweep *s, int *njobs, uint64_t *freed, const char **code, char *err,
                 size_t errlen)
{
    *njobs = 0;
    *freed = 0;
    *code = ERR_BAD_STATE;
    if (sweep_submitting(sw, s)) {
        snprintf(err, errlen, "sweep %s is still being queued", s->id);
        return -1;
    }
    each_job(sw->js, j)
        if (in_sweep_of(j)->sweep == s && job_removable(j, code, err, errlen) != 0) {
            snprintf(err + strlen(err), errlen - strlen(err), "; sweep %s has jobs that have "
                     "not ended (parlectl sweep cancel %s)", s->id, s->id);
            return -1;
        }
    *code = ERR_INTERNAL;
    /* The record first: a crash after it leaves jobs of their own, never a
     * sweep that would queue its missing jobs again at the next start. */
    if (numbered_keep_next(sw->dir, sw->next_id, err, errlen) != 0 ||
        numbered_dir_remove(sw->dir, s->id, err, errlen) != 0)
        return -1;
    for (job *j = jobs_next(sw->js, NULL), *next; j; j = next) {
        next = jobs_next(sw->js, j);
        if (in_sweep_of(j)->sweep != s)
            continue;
        if (job_remove_folder(sw->js, j, freed, err, errlen) != 0) {
            in_sweep_of(j)->sweep = NULL;
            sweep_forget(sw, s);
            return -1;
        }
        ++*njobs;
    }
    sweep_forget(sw, s);
    jobs_schedule(sw->js);
    return 0;
}

/* Whether every job of sweep s ended before `before` (jobs_mono_s; and it
 * has one). */
static int sweep_ended_before(const sweeps *sw, const sweep *s, double before)
{
    int n = 0;
    each_job(sw->js, j) {
        if (in_sweep_of(j)->sweep != s)
            continue;
        if (!job_ended_before(j, before))
            return 0;
        n++;
    }
    return n > 0 && !sweep_submitting(sw, s);
}

void sweeps_remove_ended(void *self, double before_mono, int *njobs, uint64_t *freed,
                         int *failed)
{
    sweeps *sw = self;
    for (sweep *s = sw->list, *next; s; s = next) {
        next = s->next;
        int n;
        uint64_t bytes;
        const char *code;
        char err[1600];
        if (!sweep_ended_before(sw, s, before_mono))
            continue;
        if (sweep_remove(sw, s, &n, &bytes, &code, err, sizeof err) == 0)
            *njobs += n, *freed += bytes;
        else if (!(*failed)++)
            server_log(LOG_WARN, "--remove-ended: %s", err);
    }
}
