/* The queue (jobs.h) put together: the one file above every module of this
 * folder. It opens the store, the modules' state and the state dir's
 * records in order, fills in the store's hooks (jobs_impl.h) with what each
 * module does about a run's end, an evaluation, a data claim and a
 * submission under way, and closes them all. The modules, bottom up: the
 * store (jobs.c and the files it heads), admission and fair share's glue,
 * the scheduling glue, a submission, the sweeps, the removals
 * (meson.build). */
#include "jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "jobs_impl.h"
#include "job_admission.h"
#include "job_remove.h"
#include "job_schedule.h"
#include "owner_usage.h"
#include "sweeps_impl.h"

static const char *on_run_stopped(job *j)
{
    if (j->sched.timing_out) {
        job_timed_out(j);
        return "timeout";
    }
    const char *end = j->sched.held ? "held" : "preempted";
    job_requeued(j);
    return end;
}

static void on_run_ended(jobs *js, job *j, const char *end, double began_mono)
{
    if (j->state == JOB_FAILED)
        jobs_keep_ended(js); /* one more failed job's checkpoints: the count may pass */
    jobs_usage_run_ended(js, j, end, began_mono);
}

static void on_ends_applied(jobs *js)
{
    jobs_remove_ended(js);
    jobs_schedule(js);
}

static const jobs_hooks queue_hooks = {
    .run_ending = jobs_usage_update,
    .run_stopped = on_run_stopped,
    .run_done = sweep_on_done,
    .run_ended = on_run_ended,
    .evaluated = sweep_on_eval,
    .ends_applied = on_ends_applied,
    .admit_data = job_admit_data,
    .promised = sweeps_promised,
};

static void free_jobs(jobs *js)
{
    sweeps_free(js);
    fair_share_free(&js->fair.share);
    acct_close(&js->fair.acct);
    jobs_store_free(js);
}

int jobs_open(jobs **out, uv_loop_t *loop, const char *state_dir, const char *devices,
              const jobs_listener *listener, char *err, size_t errlen)
{
    jobs *js = jobs_store_new(loop, state_dir, devices, listener, &queue_hooks, err, errlen);
    if (!js)
        return -1;
    snprintf(js->sw.sweeps_dir, sizeof(js->sw.sweeps_dir), "%s/sweeps", state_dir);
    js->sw.next_sweep_id = 1;
    jobs_usage_load(js, state_dir);
    if (mkdir_p(js->jobs_dir, err, errlen) != 0 || jobs_reload(js, err, errlen) != 0 ||
        mkdir_p(js->sw.sweeps_dir, err, errlen) != 0 || sweeps_reload(js, err, errlen) != 0 ||
        jobs_store_listen(js, err, errlen) != 0) {
        free_jobs(js);
        return -1;
    }
    jobs_schedule_init(js);
    jobs_keep_ended_init(js);
    jobs_usage_init(js);
    *out = js;
    return 0;
}

void jobs_start(jobs *js)
{
    jobs_keep_ended_start(js);
    jobs_usage_start(js);
    jobs_schedule(js);
}

static void on_handle_closed(uv_handle_t *h)
{
    jobs *js = h->data;
    if (--js->open_handles == 0)
        free_jobs(js);
}

void jobs_close(jobs *js)
{
    uv_handle_t *const handles[] = {
        (uv_handle_t *)&js->async,           (uv_handle_t *)&js->sched.time_limit_check,
        (uv_handle_t *)&js->sched.memory_retry,    (uv_handle_t *)&js->sched.requeue_check,
        (uv_handle_t *)&js->keep_ended_check, (uv_handle_t *)&js->fair.usage_save,
        (uv_handle_t *)&js->sched.schedule_soon,
    };
    /* The store is freed once the last of them has closed. */
    js->open_handles = (int)(sizeof handles / sizeof handles[0]);
    for (size_t k = 0; k < sizeof handles / sizeof handles[0]; k++)
        uv_close(handles[k], on_handle_closed);
}
