/* The queue (jobs.h) put together: the one file above every module of this
 * folder. It opens the store, the modules' state and the state dir's
 * records in order (the client's, the sweeps', after the jobs), fills in
 * the store's hooks (jobs_store.h) with what each module does about a run's
 * end, a reload and a data claim, and closes them all. The modules, bottom
 * up: the store (jobs.c and the files it heads), admission and fair
 * share's glue, the scheduling glue, a submission, the removals
 * (meson.build). */
#include "jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "jobs_store.h"
#include "job_admission.h"
#include "job_remove.h"
#include "job_schedule.h"
#include "owner_usage.h"

static const char *on_run_stopped(job *j)
{
    if (sched_of(j)->timing_out) {
        job_timed_out(j);
        return "timeout";
    }
    const char *end = sched_of(j)->held ? "held" : "preempted";
    job_requeued(j);
    return end;
}

static void on_run_ended(jobs *js, job *j, const char *end, double began_mono)
{
    if (job_state_of(j) == JOB_FAILED)
        jobs_keep_ended(js); /* one more failed job's checkpoints: the count may pass */
    jobs_usage_run_ended(js, j, end, began_mono);
}

static void on_ends_applied(jobs *js)
{
    jobs_remove_ended(js);
    jobs_schedule(js);
}

static const jobs_hooks queue_hooks = {
    .job_part_size = {[JOB_PART_ADMIT] = sizeof(struct job_admission),
                      [JOB_PART_SCHED] = sizeof(struct job_sched),
                      [JOB_PART_FAIR] = sizeof(struct job_fair)},
    .jobs_part_size = {[JOB_PART_SCHED] = sizeof(struct jobs_sched),
                       [JOB_PART_FAIR] = sizeof(struct jobs_fair),
                       [JOB_PART_REMOVE] = sizeof(struct jobs_remove)},
    .status_sched = job_status_sched,
    .restore = job_restore_sched,
    .queued_shown_as = job_queued_shown_as,
    .queued_word = job_queued_word,
    .run_starting = job_run_starting,
    .requeued_at_reload = job_requeued_at_reload,
    .run_ending = jobs_usage_update,
    .run_stopped = on_run_stopped,
    .run_ended = on_run_ended,
    .ends_applied = on_ends_applied,
    .admit_data = job_admit_data,
};

static void free_jobs(jobs *js)
{
    const jobs_client *c = jobs_client_of(js);
    c->free(c->self);
    fair_share_free(&fair_state(js)->share);
    acct_close(&fair_state(js)->acct);
    jobs_store_free(js);
}

int jobs_open(jobs **out, uv_loop_t *loop, const char *state_dir, const char *devices,
              const jobs_listener *listener, const jobs_client *client, char *err,
              size_t errlen)
{
    jobs *js = jobs_store_new(loop, state_dir, devices, listener, &queue_hooks, client, err,
                              errlen);
    if (!js) {
        client->free(client->self);
        return -1;
    }
    jobs_usage_load(js, state_dir);
    if (mkdir_p(jobs_dir_of(js), err, errlen) != 0 || jobs_reload(js, err, errlen) != 0 ||
        client->reload(client->self, js, err, errlen) != 0 ||
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

void jobs_close(jobs *js)
{
    uv_handle_t *const handles[] = {
        (uv_handle_t *)&sched_state(js)->time_limit_check,
        (uv_handle_t *)&sched_state(js)->memory_retry,
        (uv_handle_t *)&sched_state(js)->requeue_check,
        (uv_handle_t *)&remove_state(js)->keep_ended_check,
        (uv_handle_t *)&fair_state(js)->usage_save,
        (uv_handle_t *)&sched_state(js)->schedule_soon,
    };
    /* The store is freed once the last of them has closed. */
    jobs_store_close(js, handles, (int)(sizeof handles / sizeof handles[0]), free_jobs);
}
