/* What has ended, removed (job_remove.h, jobs_client.h): a job's folder
 * (`rm`, and each job of a sweep the store's client removes), with
 * --keep-ended the checkpoints of failed jobs past an age or a count, and
 * with --remove-ended the jobs that ended longer ago than an age (and,
 * through the client, the sweeps). A removed id is never issued again:
 * <dir>/.next_id keeps the next one across restarts (numbered_dirs.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_tree.h"
#include "jobs_store.h"
#include "job_remove.h"
#include "job_schedule.h"
#include "log.h"

/* How often --keep-ended looks at the failed jobs' ages. */
#define KEEP_ENDED_CHECK_MS (10 * 60 * 1000)

int job_removable(const job *j, const char **code, char *err, size_t errlen)
{
    if (job_state_final(job_state_of(j)))
        return 0;
    *code = ERR_BAD_STATE;
    snprintf(err, errlen, "job %s is %s: only an ended job can be removed (cancel it first)",
             job_id(j), job_shown_state(j));
    return -1;
}

int job_remove(jobs *js, job *j, uint64_t *freed, const char **code, char *err, size_t errlen)
{
    if (job_removable(j, code, err, errlen) != 0)
        return -1;
    const jobs_client *c = jobs_client_of(js);
    if (c->refuses_remove(c->self, j, err, errlen) != 0) {
        *code = ERR_BAD_STATE; /* a sweep's job goes with its sweep */
        return -1;
    }
    *code = ERR_INTERNAL;
    *freed = 0;
    if (job_remove_folder(js, j, freed, err, errlen) != 0)
        return -1;
    jobs_schedule(js); /* a job that runs after it is cancelled, saying so */
    return 0;
}

/* ---- --keep-ended: failed jobs' checkpoints ---- */

static int has_checkpoints(const job *j)
{
    char path[1200];
    job_file_path(j, "ckpt", path, sizeof path);
    return tree_disk_bytes(path) > 0;
}

static int newer_first(const void *a, const void *b)
{
    const job *x = *(job *const *)a, *y = *(job *const *)b;
    return (job_ended_mono(x) < job_ended_mono(y)) - (job_ended_mono(x) > job_ended_mono(y));
}

void jobs_keep_ended(jobs *js)
{
    const jobs_limits *l = jobs_limits_of(js);
    if (l->keep_ended_count < 0 && l->keep_ended_s <= 0)
        return;
    int n = 0;
    for (job *j = jobs_next(js, NULL); j; j = jobs_next(js, j))
        n += job_state_of(j) == JOB_FAILED && has_checkpoints(j);
    const int nfailed = n;
    job **failed = malloc((size_t)(n ? n : 1) * sizeof *failed);
    if (!failed)
        return;
    n = 0;
    for (job *j = jobs_next(js, NULL); j; j = jobs_next(js, j))
        if (job_state_of(j) == JOB_FAILED && has_checkpoints(j) && n < nfailed)
            failed[n++] = j;
    qsort(failed, (size_t)n, sizeof *failed, newer_first);
    const double now = jobs_mono_s();
    for (int k = 0; k < n; k++) {
        job *j = failed[k];
        const int past_count = l->keep_ended_count >= 0 && k >= l->keep_ended_count;
        const int past_age = l->keep_ended_s > 0 && now - job_ended_mono(j) > l->keep_ended_s;
        if (!past_count && !past_age)
            continue;
        char why[1400];
        if (job_log_start(j, why, sizeof why) == 0) { /* an ended job's log is closed */
            job_log(j, "--keep-ended: its checkpoints removed (%s); it can only be resumed "
                    "from scratch now", past_count ? "past the count of failed jobs kept"
                                                   : "past the age");
            job_log_stop(j);
        }
        job_remove_checkpoints(j);
        write_status(j);
    }
    free(failed);
}

/* ---- --remove-ended: jobs and sweeps past the age, as `rm` removes them ---- */

void jobs_remove_ended(jobs *js)
{
    if (jobs_limits_of(js)->remove_ended_s <= 0)
        return;
    /* A clock step moves no age. */
    const double before = jobs_mono_s() - jobs_limits_of(js)->remove_ended_s;
    const jobs_client *c = jobs_client_of(js);
    char err[1600];
    uint64_t all = 0;
    int n = 0, failed = 0;
    for (job *j = jobs_next(js, NULL), *next; j; j = next) {
        next = jobs_next(js, j);
        uint64_t freed = 0;
        if (!job_ended_before(j, before) || job_ended_at(j) <= 0 ||
            c->refuses_remove(c->self, j, err, sizeof err) != 0)
            continue;
        if (job_remove_folder(js, j, &freed, err, sizeof err) == 0)
            n++, all += freed;
        else if (!failed++)
            server_log(LOG_WARN, "--remove-ended: %s", err);
    }
    c->remove_ended(c->self, before, &n, &all, &failed); /* the sweeps */
    if (n)
        server_log(LOG_INFO, "--remove-ended: %d job(s) that ended more than %.0f s ago removed "
                   "(%llu bytes; their use stays in the accounting record)", n,
                   jobs_limits_of(js)->remove_ended_s, (unsigned long long)all);
}

static void on_keep_ended(uv_timer_t *t)
{
    jobs_keep_ended(t->data);
    jobs_remove_ended(t->data);
}

void jobs_keep_ended_init(jobs *js)
{
    uv_timer_init(jobs_loop(js), &remove_state(js)->keep_ended_check);
    remove_state(js)->keep_ended_check.data = js;
}

void jobs_keep_ended_start(jobs *js)
{
    jobs_keep_ended(js);
    jobs_remove_ended(js);
    if (jobs_limits_of(js)->keep_ended_s > 0 || jobs_limits_of(js)->remove_ended_s > 0)
        uv_timer_start(&remove_state(js)->keep_ended_check, on_keep_ended, KEEP_ENDED_CHECK_MS,
                       KEEP_ENDED_CHECK_MS);
}
