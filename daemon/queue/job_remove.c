/* What has ended, removed (jobs_impl.h): a job's folder (`rm`), a sweep's
 * record with all its jobs (`sweep rm`), with --keep-ended the
 * checkpoints of failed jobs past an age or a count, and with
 * --remove-ended the jobs (and sweeps) that ended longer ago than an age. A removed id is never
 * issued again: <dir>/.next_id keeps the next one across restarts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_tree.h"
#include "fsutil.h"
#include "jobs_impl.h"
#include "job_remove.h"
#include "job_schedule.h"
#include "sweeps_impl.h"
#include "log.h"

/* How often --keep-ended looks at the failed jobs' ages. */
#define KEEP_ENDED_CHECK_MS (10 * 60 * 1000)

/* Take dir/name out of sight (a rename within dir: atomic) and remove it.
 * A crash midway leaves .removing-NAME, which the next start removes
 * (numbered_dirs). 0, or -1 with a message (nothing moved, or what stayed). */
static int remove_dir(const char *dir, const char *name, char *err, size_t errlen)
{
    char from[1200], to[1300];
    snprintf(from, sizeof from, "%s/%s", dir, name);
    snprintf(to, sizeof to, "%s/%s%s", dir, REMOVING_PREFIX, name);
    if (rename(from, to) != 0) {
        snprintf(err, errlen, "%s: %s", from, strerror(errno));
        return -1;
    }
    return remove_tree(to, err, errlen);
}

static int keep_next_id(const char *dir, int next_id, char *err, size_t errlen)
{
    char path[1200], text[32];
    snprintf(path, sizeof path, "%s/%s", dir, NEXT_ID_FILE);
    int n = snprintf(text, sizeof text, "%d\n", next_id);
    return atomic_write_file(path, text, (size_t)n, err, errlen);
}

/* j out of the queue's list and freed (an ended job: no thread, no watcher). */
static void forget_job(jobs *js, job *j)
{
    jobs_unlink(js, j);
    free(j->cores);
    free(j);
}

/* Remove ended job j's folder; *freed grows by its disk use. */
static int remove_job_files(jobs *js, job *j, uint64_t *freed, char *err, size_t errlen)
{
    const uint64_t bytes = tree_disk_bytes(j->dir);
    if (keep_next_id(js->jobs_dir, js->next_id, err, errlen) != 0 ||
        remove_dir(js->jobs_dir, j->id, err, errlen) != 0)
        return -1;
    *freed += bytes;
    forget_job(js, j);
    return 0;
}

static int refuse_unended(const job *j, const char **code, char *err, size_t errlen)
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
    if (refuse_unended(j, code, err, errlen) != 0)
        return -1;
    if (in_sweep_of(j)->sweep_id[0]) {
        *code = ERR_BAD_STATE;
        snprintf(err, errlen,
                 "job %s belongs to sweep %s: remove the sweep with its jobs "
                 "(parlectl sweep rm %s)",
                 j->id, in_sweep_of(j)->sweep_id, in_sweep_of(j)->sweep_id);
        return -1;
    }
    *code = ERR_INTERNAL;
    *freed = 0;
    if (remove_job_files(js, j, freed, err, errlen) != 0)
        return -1;
    jobs_schedule(js); /* a job that runs after it is cancelled, saying so */
    return 0;
}

int sweep_remove(jobs *js, sweep *s, int *njobs, uint64_t *freed, const char **code, char *err,
                 size_t errlen)
{
    *njobs = 0;
    *freed = 0;
    *code = ERR_BAD_STATE;
    if (sweep_submitting(js, s)) {
        snprintf(err, errlen, "sweep %s is still being queued", s->id);
        return -1;
    }
    for (job *j = js->first; j; j = j->next)
        if (in_sweep_of(j)->sweep == s && refuse_unended(j, code, err, errlen) != 0) {
            snprintf(err + strlen(err), errlen - strlen(err), "; sweep %s has jobs that have "
                     "not ended (parlectl sweep cancel %s)", s->id, s->id);
            return -1;
        }
    *code = ERR_INTERNAL;
    /* The record first: a crash after it leaves jobs of their own, never a
     * sweep that would queue its missing jobs again at the next start. */
    if (keep_next_id(sweeps_state(js)->sweeps_dir, sweeps_state(js)->next_sweep_id, err, errlen) !=
            0 ||
        remove_dir(sweeps_state(js)->sweeps_dir, s->id, err, errlen) != 0)
        return -1;
    for (job *j = js->first, *next; j; j = next) {
        next = j->next;
        if (in_sweep_of(j)->sweep != s)
            continue;
        if (remove_job_files(js, j, freed, err, errlen) != 0) {
            in_sweep_of(j)->sweep = NULL;
            sweep_forget(js, s);
            return -1;
        }
        ++*njobs;
    }
    sweep_forget(js, s);
    jobs_schedule(js);
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

/* Whether every job of sweep s ended before `before` (jobs_mono_s; and it
 * has one). */
static int sweep_ended_before(const jobs *js, const sweep *s, double before)
{
    int n = 0;
    for (const job *j = js->first; j; j = j->next) {
        if (in_sweep_of(j)->sweep != s)
            continue;
        if (!job_state_final(j->state) || j->thread_running || j->ended_mono > before)
            return 0;
        n++;
    }
    return n > 0 && !sweep_submitting(js, s);
}

void jobs_remove_ended(jobs *js)
{
    if (js->limits.remove_ended_s <= 0)
        return;
    const double before = jobs_mono_s() - js->limits.remove_ended_s; /* a clock step moves no age */
    char err[1600];
    const char *code;
    uint64_t freed, all = 0;
    int n = 0, failed = 0;
    for (job *j = js->first, *next; j; j = next) {
        next = j->next;
        if (in_sweep_of(j)->sweep_id[0] || !job_state_final(j->state) || j->thread_running ||
            j->ended_at <= 0 || j->ended_mono > before)
            continue;
        if (remove_job_files(js, j, &freed, err, sizeof err) == 0)
            n++, all += freed;
        else if (!failed++)
            server_log(LOG_WARN, "--remove-ended: %s", err);
    }
    for (sweep *s = sweeps_state(js)->sweeps, *next; s; s = next) {
        next = s->next;
        int njobs;
        if (!sweep_ended_before(js, s, before))
            continue;
        if (sweep_remove(js, s, &njobs, &freed, &code, err, sizeof err) == 0)
            n += njobs, all += freed;
        else if (!failed++)
            server_log(LOG_WARN, "--remove-ended: %s", err);
    }
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
    uv_timer_init(js->loop, &js->keep_ended_check);
    js->keep_ended_check.data = js;
}

void jobs_keep_ended_start(jobs *js)
{
    jobs_keep_ended(js);
    jobs_remove_ended(js);
    if (js->limits.keep_ended_s > 0 || js->limits.remove_ended_s > 0)
        uv_timer_start(&js->keep_ended_check, on_keep_ended, KEEP_ENDED_CHECK_MS,
                       KEEP_ENDED_CHECK_MS);
}
