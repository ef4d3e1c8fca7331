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
#include "jobs_impl.h"
#include "job_remove.h"
#include "job_schedule.h"
#include "log.h"

/* How often --keep-ended looks at the failed jobs' ages. */
#define KEEP_ENDED_CHECK_MS (10 * 60 * 1000)

/* j out of the queue's list and freed (an ended job: no thread, no watcher). */
static void forget_job(jobs *js, job *j)
{
    jobs_unlink(js, j);
    free(j->cores);
    free(j);
}

int jobs_remove_member(jobs *js, job *j, uint64_t *freed, char *err, size_t errlen)
{
    const uint64_t bytes = tree_disk_bytes(j->dir);
    if (numbered_keep_next(js->jobs_dir, js->next_id, err, errlen) != 0 ||
        numbered_dir_remove(js->jobs_dir, j->id, err, errlen) != 0)
        return -1;
    *freed += bytes;
    forget_job(js, j);
    return 0;
}

int job_removable(const job *j, const char **code, char *err, size_t errlen)
{
    if (job_state_final(j->state))
        return 0;
    *code = ERR_BAD_STATE;
    snprintf(err, errlen, "job %s is %s: only an ended job can be removed (cancel it first)",
             j->id, job_shown_state(j));
    return -1;
}

int job_remove(jobs *js, job *j, uint64_t *freed, const char **code, char *err, size_t errlen)
{
    if (job_removable(j, code, err, errlen) != 0)
        return -1;
    if (js->client.refuses_remove(js->client.self, j, err, errlen) != 0) {
        *code = ERR_BAD_STATE; /* a sweep's job goes with its sweep */
        return -1;
    }
    *code = ERR_INTERNAL;
    *freed = 0;
    if (jobs_remove_member(js, j, freed, err, errlen) != 0)
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
    return (x->ended_mono < y->ended_mono) - (x->ended_mono > y->ended_mono);
}

void jobs_keep_ended(jobs *js)
{
    const jobs_limits *l = &js->limits;
    if (l->keep_ended_count < 0 && l->keep_ended_s <= 0)
        return;
    int n = 0;
    for (job *j = js->first; j; j = j->next)
        n += j->state == JOB_FAILED && has_checkpoints(j);
    const int nfailed = n;
    job **failed = malloc((size_t)(n ? n : 1) * sizeof *failed);
    if (!failed)
        return;
    n = 0;
    for (job *j = js->first; j; j = j->next)
        if (j->state == JOB_FAILED && has_checkpoints(j) && n < nfailed)
            failed[n++] = j;
    qsort(failed, (size_t)n, sizeof *failed, newer_first);
    const double now = jobs_mono_s();
    for (int k = 0; k < n; k++) {
        job *j = failed[k];
        const int past_count = l->keep_ended_count >= 0 && k >= l->keep_ended_count;
        const int past_age = l->keep_ended_s > 0 && now - j->ended_mono > l->keep_ended_s;
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
    if (js->limits.remove_ended_s <= 0)
        return;
    const double before = jobs_mono_s() - js->limits.remove_ended_s; /* a clock step moves no age */
    char err[1600];
    uint64_t all = 0;
    int n = 0, failed = 0;
    for (job *j = js->first, *next; j; j = next) {
        next = j->next;
        uint64_t freed = 0;
        if (!job_ended_before(j, before) || j->ended_at <= 0 ||
            js->client.refuses_remove(js->client.self, j, err, sizeof err) != 0)
            continue;
        if (jobs_remove_member(js, j, &freed, err, sizeof err) == 0)
            n++, all += freed;
        else if (!failed++)
            server_log(LOG_WARN, "--remove-ended: %s", err);
    }
    js->client.remove_ended(js->client.self, before, &n, &all, &failed); /* the sweeps */
    if (n)
        server_log(LOG_INFO, "--remove-ended: %d job(s) that ended more than %.0f s ago removed "
                   "(%llu bytes; their use stays in the accounting record)", n,
                   js->limits.remove_ended_s, (unsigned long long)all);
}

static void on_keep_ended(uv_timer_t *t)
{
    jobs_keep_ended(t->data);
    jobs_remove_ended(t->data);
}

void jobs_keep_ended_init(jobs *js)
{
    uv_timer_init(js->loop, &remove_state(js)->keep_ended_check);
    remove_state(js)->keep_ended_check.data = js;
}

void jobs_keep_ended_start(jobs *js)
{
    jobs_keep_ended(js);
    jobs_remove_ended(js);
    if (js->limits.keep_ended_s > 0 || js->limits.remove_ended_s > 0)
        uv_timer_start(&remove_state(js)->keep_ended_check, on_keep_ended, KEEP_ENDED_CHECK_MS,
                       KEEP_ENDED_CHECK_MS);
}
