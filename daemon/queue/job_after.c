/* A queued job's dependencies (job field `after`, parlectl submit --after):
 * it starts once the jobs and sweeps it names have ended done (or however
 * they ended, with `after_any`); if one ends otherwise it never will, and
 * the queue cancels it, saying which and how it ended (job_schedule.c): its
 * state, never its error, which may be another member's
 * (jobs_viewer_sees_details). */
#include <stdio.h>
#include <string.h>

#include "jobs_store.h"
#include "job_schedule.h"

/* A sweep's end, which the store's client answers (jobs_client.h). */
static int sweep_end(const jobs *js, const char *id, int *left, const job **bad)
{
    const jobs_client *c = jobs_client_of(js);
    return c->group_end(c->self, id, left, bad);
}

int job_after_check(jobs *js, const job *j, char *why, size_t whylen)
{
    char ids[JOB_MAX_AFTER][16];
    const int n = job_after_ids(job_config_of(j)->after, ids, why, whylen);
    for (int k = 0; k < n; k++) {
        if (ids[k][0] == 's') {
            int left;
            const job *bad;
            const int end = sweep_end(js, ids[k], &left, &bad);
            if (end == -2) {
                snprintf(why, whylen, "sweep %s it runs after was removed", ids[k]);
                return -1;
            }
            if (end == 0) {
                snprintf(why, whylen, "after: sweep %s has %d job(s) not ended", ids[k], left);
                return 1;
            }
            if (end < 0 && !job_config_of(j)->after_any) {
                snprintf(why, whylen, "sweep %s it runs after did not end done: its job %s "
                         "ended %s", ids[k], job_id(bad), job_state_name(job_state_of(bad)));
                return -1;
            }
            continue;
        }
        const job *d = jobs_index_find(js, ids[k]);
        if (!d) {
            snprintf(why, whylen, "job %s it runs after was removed", ids[k]);
            return -1;
        }
        if (!job_state_final(job_state_of(d))) {
            snprintf(why, whylen, "after: %s (%s) is %s", job_id(d), job_owner_of(d)->user,
                     job_shown_state(d));
            return 1;
        }
        if (job_state_of(d) != JOB_DONE && !job_config_of(j)->after_any) {
            snprintf(why, whylen, "job %s it runs after ended %s", job_id(d),
                     job_state_name(job_state_of(d)));
            return -1;
        }
    }
    return 0;
}

int job_after_valid(jobs *js, const job_config *cfg, char *err, size_t errlen)
{
    char ids[JOB_MAX_AFTER][16], why[128];
    const int n = job_after_ids(cfg->after, ids, why, sizeof why);
    for (int k = 0; k < n; k++) {
        int left;
        const job *bad;
        if (ids[k][0] == 's' ? sweep_end(js, ids[k], &left, &bad) == -2
                             : !jobs_index_find(js, ids[k])) {
            snprintf(err, errlen, "after: %s %s is not in parled's queue", ids[k][0] == 's' ?
                     "sweep" : "job", ids[k]);
            return -1;
        }
    }
    return n < 0 ? -1 : 0;
}
