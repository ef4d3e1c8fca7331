/* The queue at a glance (jobs_overview.h): one walk of the jobs into plain,
 * bounded arrays, for `top` and the metrics file. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_store.h"
#include "job_admission.h"
#include "job_schedule.h"
#include "owner_usage.h"
#include "jobs_overview.h"

/* Bytes of a peak-memory object's text, {"cuda:0":N,...} or {"cpu":N}: the
 * device so named (gpu -1: "cpu"), or all of them (gpu -2). */
static double memory_of(const char *text, int gpu)
{
    if (!text[0])
        return 0;
    cJSON *m = cJSON_Parse(text);
    double sum = 0;
    const cJSON *it;
    char want[24];
    if (gpu == -1)
        snprintf(want, sizeof want, "cpu");
    else
        snprintf(want, sizeof want, "cuda:%d", gpu);
    cJSON_ArrayForEach(it, m)
        if (cJSON_IsNumber(it) && (gpu == -2 || strcmp(it->string, want) == 0))
            sum += it->valuedouble;
    cJSON_Delete(m);
    return sum;
}

/* What admission counts for job j on device gpu (-1: the host). */
static double memory_held_on(const job *j, int gpu)
{
    if (admit_of(j)->need_known != 1)
        return 0;
    if (gpu < 0)
        return (double)admit_of(j)->need.host;
    for (int k = 0; k < admit_of(j)->need.ngpus && k < JOB_MEMORY_GPUS; k++)
        if (admit_of(j)->need.gpus[k] == gpu)
            return (double)admit_of(j)->need.gpu[k];
    return 0;
}

static void add_job_id(overview_device *d, const char *id)
{
    size_t n = strlen(d->jobs);
    if (n + strlen(id) + 5 >= sizeof d->jobs) {
        if (n < 3 || strcmp(d->jobs + n - 3, "...") != 0)
            snprintf(d->jobs + n, sizeof d->jobs - n, "%s...", n ? " " : "");
        return;
    }
    snprintf(d->jobs + n, sizeof d->jobs - n, "%s%s", n ? " " : "", id);
}

static void fill_job(const jobs *js, const job *j, const job_viewer *viewer, double now,
                     overview_job *r)
{
    const job_config *cfg = job_config_of(j);
    const job_owner *owner = job_owner_of(j);
    const enum job_state state = job_state_of(j);
    const uint64_t devices = job_device_mask(j);
    const int ncores = jobs_ncores(js), held = job_cores_held(j);
    memset(r, 0, sizeof *r);
    snprintf(r->id, sizeof r->id, "%s", job_id(j));
    snprintf(r->owner, sizeof r->owner, "%s", owner->user);
    r->uid = owner->uid;
    snprintf(r->rule, sizeof r->rule, "%s", cfg->algorithm.name);
    devices_text(devices, r->devices, sizeof r->devices);
    if (cfg->device_spec.count && state == JOB_QUEUED)
        snprintf(r->devices, sizeof r->devices, "gpu:%d", cfg->device_spec.count);
    r->state = job_shown_state(j);
    r->priority = sched_of(j)->priority;
    r->share = (devices & DEV_CPU) ? (ncores > 0 && held > 0 ? (double)held / ncores : 1.0)
                                   : cfg->gpu_share;
    r->wait_s = state == JOB_QUEUED && job_submitted_at(j) > 0
                    ? fmax(0, now - job_submitted_at(j)) : 0;
    if (state == JOB_QUEUED)
        snprintf(r->waiting, sizeof r->waiting, "%s", job_waiting(j));
    r->images_per_sec = r->eta_s = r->test_error = NAN;
    r->details = jobs_viewer_sees_details(j, viewer);
    if (!r->details)
        return;
    const run_event *last = job_last(j);
    r->step = last->step;
    r->passes = last->data_passes;
    r->epoch = last->epoch;
    r->epochs = cfg->epochs;
    const double elapsed = last->elapsed_s, left = last->eta_s;
    r->progress = state == JOB_DONE ? 1
                  : isfinite(elapsed) && isfinite(left) && elapsed + left > 0
                      ? elapsed / (elapsed + left) : 0;
    if (state == JOB_RUNNING && last->step > 0) {
        r->images_per_sec = last->images_per_sec;
        r->eta_s = last->eta_s;
    }
    r->test_error = job_test_error(j);
    r->memory_peak = memory_of(job_memory_text(j), -2);
}

/* The devices and what the running job j holds on each. */
static void add_running(jobs_overview *o, const job *j, double share)
{
    for (int i = 0; i < o->ndev; i++) {
        overview_device *d = &o->dev[i];
        const uint64_t bit = d->gpu < 0 ? DEV_CPU : 1ull << d->gpu;
        if (!(job_device_mask(j) & bit))
            continue;
        d->njobs++;
        d->shares += share;
        d->memory_held += memory_held_on(j, d->gpu);
        d->memory_peak += memory_of(job_memory_text(j), d->gpu);
        add_job_id(d, job_id(j));
    }
}

static overview_owner *owner_row(jobs_overview *o, int cap, unsigned uid, const char *user)
{
    for (int i = 0; i < o->nowners; i++)
        if (o->owners[i].uid == uid)
            return &o->owners[i];
    if (o->nowners == cap)
        return NULL;
    overview_owner *w = &o->owners[o->nowners++];
    memset(w, 0, sizeof *w);
    w->uid = uid;
    snprintf(w->user, sizeof w->user, "%s", user);
    return w;
}

static int by_jobs_then_use(const void *a, const void *b)
{
    const overview_owner *x = a, *y = b;
    int nx = x->running + x->queued, ny = y->running + y->queued;
    if (nx != ny)
        return ny - nx;
    return (y->device_seconds > x->device_seconds) - (y->device_seconds < x->device_seconds);
}

/* Each owner's use from fair share's table, then the owners sorted. */
static void owners_use(jobs_overview *o, const jobs *js)
{
    double total = 0;
    for (int i = 0; i < fair_state(js)->share.n; i++)
        total += fair_state(js)->share.owners[i].usage;
    for (int i = 0; i < fair_state(js)->share.n; i++) {
        const owner_usage *u = &fair_state(js)->share.owners[i];
        char digits[16];
        snprintf(digits, sizeof digits, "%u", u->uid);
        overview_owner *w = owner_row(o, OVERVIEW_OWNERS_MAX, u->uid,
                                      u->user[0] ? u->user : digits);
        if (w) {
            w->device_seconds = u->usage;
            w->share = total > 0 ? u->usage / total : 0;
        }
    }
    qsort(o->owners, (size_t)o->nowners, sizeof *o->owners, by_jobs_then_use);
}

static void devices_of(jobs_overview *o, const jobs *js)
{
    for (int i = 63; i >= 0 && o->ndev < OVERVIEW_DEVICES_MAX; i--) {
        const uint64_t bit = 1ull << i;
        if (!(jobs_device_mask(js) & bit))
            continue;
        overview_device *d = &o->dev[o->ndev++];
        d->gpu = bit == DEV_CPU ? -1 : i;
        d->cores = bit == DEV_CPU ? jobs_ncores(js) : 0;
        d->faulted = (jobs_faulted_mask(js) & bit) != 0;
    }
}

/* One walk of the jobs, reading of each only its state, owner and submit
 * (the metrics file takes an overview every few seconds, with thousands
 * of jobs kept); the running and the first queued ones in full. */
int jobs_overview_take(jobs *js, const job_viewer *viewer, int max_queued,
                       jobs_overview *o)
{
    memset(o, 0, sizeof *o);
    max_queued = max_queued < 0 ? 0 : max_queued > OVERVIEW_QUEUED_MAX ? OVERVIEW_QUEUED_MAX
                                                                        : max_queued;
    int cap_running = 8;
    o->running = malloc((size_t)cap_running * sizeof *o->running);
    o->queued = malloc((size_t)(max_queued > 0 ? max_queued : 1) * sizeof *o->queued);
    o->owners = malloc(OVERVIEW_OWNERS_MAX * sizeof *o->owners);
    if (!o->running || !o->queued || !o->owners) {
        jobs_overview_free(o);
        return -1;
    }
    devices_of(o, js);
    const double now = jobs_now_s();
    overview_owner *w = NULL;
    for (const job *j = jobs_next(js, NULL); j; j = jobs_next(js, j)) {
        o->count[job_state_of(j)]++;
        if (job_state_final(job_state_of(j)))
            continue;
        if (!w || w->uid != job_owner_of(j)->uid) /* a user's jobs often come in a row */
            w = owner_row(o, OVERVIEW_OWNERS_MAX, job_owner_of(j)->uid, job_owner_of(j)->user);
        if (w)
            *(job_state_of(j) == JOB_RUNNING ? &w->running : &w->queued) += 1;
        if (job_state_of(j) == JOB_RUNNING) {
            if (o->nrunning == cap_running && cap_running < OVERVIEW_RUNNING_MAX) {
                overview_job *more = realloc(o->running, 2 * (size_t)cap_running * sizeof *more);
                if (!more) {
                    jobs_overview_free(o);
                    return -1;
                }
                o->running = more;
                cap_running *= 2;
            }
            overview_job r;
            fill_job(js, j, viewer, now, &r);
            add_running(o, j, r.share);
            if (o->nrunning < cap_running)
                o->running[o->nrunning++] = r;
        } else if (job_state_of(j) == JOB_QUEUED) {
            o->held += sched_of(j)->held;
            if (job_submitted_at(j) > 0)
                o->oldest_wait_s = fmax(o->oldest_wait_s, now - job_submitted_at(j));
            if (o->nqueued < max_queued)
                fill_job(js, j, viewer, now, &o->queued[o->nqueued++]);
        }
    }
    owners_use(o, js);
    o->jobs_per_user = jobs_limits_of(js)->jobs_per_user;
    o->gpus_per_user = jobs_limits_of(js)->gpus_per_user;
    o->cores_per_user = jobs_limits_of(js)->cores_per_user;
    o->usage_half_life_s = jobs_limits_of(js)->usage_half_life_s;
    o->schedule_passes = sched_state(js)->schedule_passes;
    o->schedule_seconds = (double)sched_state(js)->schedule_ns * 1e-9;
    jobs_checkpoints(js, &o->checkpoints_written, &o->checkpoints_failed);
    o->have_space = jobs_state_space(js, &o->state_dir_free_bytes, &o->state_dir_total_bytes) == 0;
    return 0;
}

void jobs_overview_free(jobs_overview *o)
{
    free(o->running);
    free(o->queued);
    free(o->owners);
    o->running = o->queued = NULL;
    o->owners = NULL;
}
