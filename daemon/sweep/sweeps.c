/* Sweeps (sweeps.h; docs/sweeps.md), a durable object of the daemon, on the
 * loop thread: submitted all or nothing, written to <state dir>/sweeps/<id>
 * (sweep.json once, state.json at each change, both atomic), cancelled as a
 * whole, and the early stop of hopeless points, which the job store calls
 * as its client (jobs_client.h; sweeps_client.c). Reloaded after the jobs in
 * sweeps_reload.c; what they answer is in sweeps_json.c, their removal in
 * sweeps_remove.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsutil.h"
#include "log.h"
#include "sweeps_impl.h"

sweep *sweeps_find(sweeps *sw, const char *id)
{
    for (sweep *s = sw->list; s; s = s->next)
        if (strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

void sweep_free(sweep *s)
{
    sweep_spec_free(&s->spec);
    cJSON_Delete(s->doc);
    free(s);
}

void sweeps_free(void *self)
{
    sweeps *sw = self;
    while (sw->submitting)
        sweep_submission_free(sw->submitting);
    while (sw->list) {
        sweep *next = sw->list->next;
        sweep_free(sw->list);
        sw->list = next;
    }
    free(sw);
}

void sweeps_link(sweeps *sw, sweep *s)
{
    sweep **at = &sw->list;
    while (*at)
        at = &(*at)->next;
    *at = s;
}

void sweep_write_state(sweeps *sw, sweep *s)
{
    cJSON *st = cJSON_CreateObject(), *errors = cJSON_AddObjectToObject(st, "errors");
    cJSON *stopped = cJSON_AddArrayToObject(st, "early_stopped");
    cJSON_AddBoolToObject(st, "cancelled", s->cancelled);
    each_job(sw->js, j) {
        const struct job_in_sweep *in = in_sweep_of(j);
        if (in->sweep != s)
            continue;
        if (in->sweep_error_known)
            cJSON_AddNumberToObject(errors, job_id(j), in->sweep_error);
        if (in->early_stopped)
            cJSON_AddItemToArray(stopped, cJSON_CreateString(job_id(j)));
    }
    char path[1200], err[512];
    char *text = cJSON_Print(st);
    cJSON_Delete(st);
    snprintf(path, sizeof path, "%s/state.json", s->dir);
    if (!text || atomic_write_file(path, text, strlen(text), err, sizeof err) != 0)
        server_log(LOG_WARN, "sweep %s: could not write state.json: %s", s->id,
                   text ? err : "out of memory");
    free(text);
}

int sweep_commit_tagged(sweeps *sw, sweep *s, job *j, const cJSON *job_json, long point, int k,
                        char *err, size_t errlen)
{
    struct job_in_sweep *in = in_sweep_of(j);
    in->sweep = s;
    snprintf(in->sweep_id, sizeof in->sweep_id, "%s", s->id);
    in->point = point;
    in->seed_index = k;
    if (job_commit(sw->js, j, job_json, &s->owner, err, errlen) != 0)
        return -1;
    jobs_dependencies_changed(sw->js); /* its sweep's dependents wait for it too */
    return 0;
}

job *sweep_prepare_point(sweeps *sw, const sweep *s, long point, int k, cJSON **json,
                         const char **code, char *err, size_t errlen)
{
    char why[8192], label[512];
    *code = ERR_INVALID_SWEEP;
    if (!(*json = sweep_job(&s->spec, point, k, err, errlen)))
        return NULL;
    job *j = job_prepare(sw->js, *json, code, why, sizeof why);
    if (j && job_priority_allowed(j, &s->owner, code, why, sizeof why) != 0) {
        job_discard(j);
        j = NULL;
    }
    if (!j) {
        *code = strcmp(*code, ERR_INVALID_JOB) == 0 ? ERR_INVALID_SWEEP : *code;
        snprintf(err, errlen, "point %ld (%s), seed %d of %d: %.4000s", point,
                 sweep_point_label(&s->spec, point, label, sizeof label), k + 1, s->spec.seeds,
                 why);
        cJSON_Delete(*json);
        *json = NULL;
    }
    return j;
}

/* A new sweep's record: the request as read into s->doc, then sweep.json
 * in its own directory. 0, or -1 with a message. */
static int create_sweep(sweeps *sw, sweep *s, char *err, size_t errlen)
{
    snprintf(s->id, sizeof s->id, "s%04d", sw->next_id++);
    snprintf(s->dir, sizeof s->dir, "%s/%s", sw->dir, s->id);
    s->created_at = jobs_now_s();
    cJSON_AddStringToObject(s->doc, "id", s->id);
    cJSON_AddItemToObject(s->doc, "owner", owner_json(&s->owner));
    cJSON_AddNumberToObject(s->doc, "created_at", s->created_at);
    char path[1200];
    char *text = cJSON_Print(s->doc);
    snprintf(path, sizeof path, "%s/sweep.json", s->dir);
    int rc = text ? 0 : -1;
    if (!text)
        snprintf(err, errlen, "out of memory");
    else if (mkdir_p(s->dir, err, errlen) != 0 ||
             atomic_write_file(path, text, strlen(text), err, errlen) != 0) {
        rmdir(s->dir);
        rc = -1;
    }
    free(text);
    return rc;
}

/* Mark the sweep cancelled, durably, and cancel its queued and running
 * jobs: how many. */
static int cancel_jobs(sweeps *sw, sweep *s)
{
    int n = 0;
    s->cancelled = 1;
    sweep_write_state(sw, s);
    each_job(sw->js, j) {
        char why[256];
        if (in_sweep_of(j)->sweep == s && !job_state_final(job_state_of(j)) &&
            !job_cancel_requested(j) && job_cancel(sw->js, j, why, sizeof why) == 0)
            n++;
    }
    server_log(LOG_INFO, "sweep %s cancelled: %d job(s) stop", s->id, n);
    return n;
}

int sweep_submitting(const sweeps *sw, const sweep *s)
{
    for (const sweep_submission *sub = sw->submitting; sub; sub = sub->next)
        if (sub->s == s)
            return 1;
    return 0;
}

int sweeps_promised(void *self, unsigned uid)
{
    const sweeps *sw = self;
    int n = 0;
    for (const sweep_submission *sub = sw->submitting; sub; sub = sub->next)
        if (sub->s->owner.uid == uid)
            n += sub->njobs - sub->committed;
    return n;
}

void sweep_forget(sweeps *sw, sweep *s)
{
    jobs_dependencies_changed(sw->js); /* a job after it is cancelled */
    each_job(sw->js, j)
        if (in_sweep_of(j)->sweep == s)
            in_sweep_of(j)->sweep = NULL;
    sweep **at = &sw->list;
    while (*at && *at != s)
        at = &(*at)->next;
    if (*at)
        *at = s->next;
    sweep_free(s);
}

sweep_submission *sweeps_submit(sweeps *sw, const cJSON *sweep_json, const job_owner *owner,
                                const char **code, char *err, size_t errlen)
{
    sweep_submission *sub = calloc(1, sizeof *sub);
    sweep *s = calloc(1, sizeof *s);
    cJSON *copy = cJSON_Duplicate(sweep_json, 1);
    *code = ERR_INTERNAL;
    if (!sub || !s || !copy || !(s->doc = cJSON_CreateObject())) {
        snprintf(err, errlen, "out of memory");
        cJSON_Delete(copy);
        if (s)
            sweep_free(s);
        free(sub);
        return NULL;
    }
    cJSON_AddItemToObject(s->doc, "sweep", copy);
    s->owner = *owner;
    sub->sw = sw;
    sub->s = s;
    /* The cheap bounds first: its size, then the owner's room. */
    if (sweep_spec_read(copy, &s->spec, err, errlen) != 0) {
        *code = ERR_INVALID_SWEEP;
    } else if (jobs_may_queue(sw->js, owner, s->spec.npoints * s->spec.seeds, code, err,
                              errlen) == 0) {
        sub->njobs = s->spec.npoints * s->spec.seeds;
        sub->prepared = calloc((size_t)sub->njobs, sizeof *sub->prepared);
        sub->texts = calloc((size_t)sub->njobs, sizeof *sub->texts);
        if (sub->prepared && sub->texts) {
            sub->next = sw->submitting;
            sw->submitting = sub;
            return sub;
        }
        *code = ERR_INTERNAL;
        snprintf(err, errlen, "out of memory");
    }
    sweep_submission_free(sub);
    return NULL;
}

static int out_of_time(uint64_t until_ns) { return uv_hrtime() >= until_ns; }

/* Every job validated against the daemon before any is queued: 1 when all
 * are, 0 when the time ran out, -1 with *code and a message naming the
 * first bad job's point. */
static int prepare_jobs(sweep_submission *sub, uint64_t until_ns, const char **code, char *err,
                        size_t errlen)
{
    const sweep *s = sub->s;
    while (sub->made < sub->njobs) {
        int p = sub->made / s->spec.seeds, k = sub->made % s->spec.seeds;
        if (!(sub->prepared[sub->made] = sweep_prepare_point(sub->sw, s, s->spec.points[p], k,
                                                             &sub->texts[sub->made], code, err,
                                                             errlen)))
            return -1;
        sub->made++;
        if (out_of_time(until_ns))
            return sub->made == sub->njobs;
    }
    return 1;
}

/* Queue the prepared jobs: 1 when all are (or the sweep was cancelled
 * meanwhile: the rest are dropped), 0 when the time ran out, -1 with a
 * message when one could not be (the sweep and the jobs queued before are
 * cancelled). */
static int commit_jobs(sweep_submission *sub, uint64_t until_ns, char *err, size_t errlen)
{
    sweeps *sw = sub->sw;
    sweep *s = sub->s;
    while (sub->committed < sub->njobs && !s->cancelled) {
        int i = sub->committed, p = i / s->spec.seeds, k = i % s->spec.seeds;
        char why[1024];
        job *j = sub->prepared[i];
        sub->prepared[i] = NULL; /* job_commit frees it on failure */
        if (sweep_commit_tagged(sw, s, j, sub->texts[i], s->spec.points[p], k, why,
                                sizeof why) != 0) {
            cancel_jobs(sw, s);
            snprintf(err, errlen, "sweep %s: %s; the sweep and its %d jobs queued before are "
                     "cancelled", s->id, why, i);
            return -1;
        }
        sub->committed++;
        if (sub->committed < sub->njobs && out_of_time(until_ns))
            return 0;
    }
    return 1;
}

int sweep_submission_step(sweep_submission *sub, double budget_s, sweep **out, const char **code,
                          char *err, size_t errlen)
{
    sweeps *sw = sub->sw;
    sweep *s = sub->s;
    uint64_t until_ns = uv_hrtime() + (uint64_t)(budget_s * 1e9);
    *out = NULL;
    if (!sub->linked) {
        int rc = prepare_jobs(sub, until_ns, code, err, errlen);
        if (rc <= 0)
            return rc < 0;
        *code = ERR_INTERNAL;
        if (create_sweep(sw, s, err, errlen) != 0)
            return 1;
        sweeps_link(sw, s);
        sub->linked = 1;
        if (out_of_time(until_ns))
            return 0;
    }
    int rc = commit_jobs(sub, until_ns, err, errlen);
    if (rc == 0) {
        jobs_schedule(sw->js); /* the queued ones may start meanwhile */
        return 0;
    }
    sweep_write_state(sw, s);
    jobs_schedule(sw->js);
    if (rc < 0) {
        *code = ERR_INTERNAL;
        return 1;
    }
    server_log(LOG_INFO, "sweep %s by %s (uid %u): %d points x %d seeds", s->id, s->owner.user,
               s->owner.uid, s->spec.npoints, s->spec.seeds);
    *out = s;
    return 1;
}

void sweep_submission_free(sweep_submission *sub)
{
    if (!sub)
        return;
    for (sweep_submission **at = &sub->sw->submitting; *at; at = &(*at)->next)
        if (*at == sub) {
            *at = sub->next;
            break;
        }
    for (int i = 0; i < sub->njobs && sub->prepared && sub->texts; i++) {
        if (sub->prepared[i])
            job_discard(sub->prepared[i]);
        cJSON_Delete(sub->texts[i]);
    }
    free(sub->prepared);
    free(sub->texts);
    if (!sub->linked) /* else the sweep is the daemon's: the next start queues what it lacks */
        sweep_free(sub->s);
    free(sub);
}

/* Has the sweep a job not yet ended, or jobs still to queue? */
static int sweep_unended(const sweeps *sw, const sweep *s)
{
    each_job(sw->js, j)
        if (in_sweep_of(j)->sweep == s && !job_state_final(job_state_of(j)))
            return 1;
    return sweep_submitting(sw, s);
}

int sweep_cancel(sweeps *sw, sweep *s, char *err, size_t errlen)
{
    if (s->cancelled) {
        snprintf(err, errlen, "sweep %s has already been cancelled", s->id);
        return -1;
    }
    if (!sweep_unended(sw, s)) {
        snprintf(err, errlen, "sweep %s has ended (every job of it is done, failed or "
                 "cancelled): nothing to cancel", s->id);
        return -1;
    }
    return cancel_jobs(sw, s);
}

/* The early stop (docs/sweeps.md): at its first evaluation with at least
 * after_epochs epochs done, a job whose test error is worse than the median
 * of the sweep's finished (done) jobs' errors at that evaluation by more
 * than the margin is cancelled, the reason in its error and log. */
void sweep_on_eval(void *self, job *j, double epoch, double test_error)
{
    sweeps *sw = self;
    struct job_in_sweep *in = in_sweep_of(j);
    sweep *s = in->sweep;
    if (!s || !s->spec.early_after || in->sweep_error_known || epoch < s->spec.early_after ||
        !isfinite(test_error))
        return;
    in->sweep_error = test_error;
    in->sweep_error_known = 1;
    double done[SWEEP_MAX_JOBS];
    int n = 0;
    each_job(sw->js, o) {
        const struct job_in_sweep *other = in_sweep_of(o);
        if (n < SWEEP_MAX_JOBS && other->sweep == s && job_state_of(o) == JOB_DONE &&
            other->sweep_error_known)
            done[n++] = other->sweep_error;
    }
    /* The median by insertion sort: at most SWEEP_MAX_JOBS values, once per job. */
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && done[b - 1] > done[b]; b--) {
            double t = done[b];
            done[b] = done[b - 1];
            done[b - 1] = t;
        }
    double median = n == 0 ? NAN : n % 2 ? done[n / 2] : (done[n / 2 - 1] + done[n / 2]) / 2;
    if (n > 0 && test_error > median + s->spec.early_margin && !job_cancel_requested(j)) {
        char why[256], error[512];
        in->early_stopped = 1;
        snprintf(error, sizeof error, "early stop: test error %.2f%% after %.6g epochs is "
                 "worse than %.2f%%, the median of the sweep's %d finished job%s then, by more "
                 "than the margin %.2f%%", 100 * test_error, epoch, 100 * median, n,
                 n == 1 ? "" : "s", 100 * s->spec.early_margin);
        job_set_error(j, "%s", error);
        job_log(j, "%s", error);
        server_log(LOG_INFO, "sweep %s: job %s %s", s->id, job_id(j), error);
        job_cancel(sw->js, j, why, sizeof why);
    }
    sweep_write_state(sw, s);
}

/* A job ended done: one the early stop's cancel reached too late (its last
 * steps were already taken) is done, not early-stopped. */
void sweep_on_done(void *self, job *j)
{
    struct job_in_sweep *in = in_sweep_of(j);
    if (!in->early_stopped)
        return;
    in->early_stopped = 0;
    job_set_error(j, "%s", "");
    job_log(j, "the early stop came after the job had finished: it stays done");
    sweep_write_state(self, in->sweep);
}

/* A dependency's answer for sweep `id` (jobs_client.h's group_end): every
 * job done, or stopped early by its rule. */
int sweep_end(void *self, const char *id, int *left, const job **bad)
{
    sweeps *sw = self;
    const sweep *s = sweeps_find(sw, id);
    *left = 0;
    *bad = NULL;
    if (!s)
        return -2;
    each_job(sw->js, j) {
        const struct job_in_sweep *in = in_sweep_of(j);
        const enum job_state st = job_state_of(j);
        if (in->sweep != s)
            continue;
        if (!job_state_final(st))
            (*left)++;
        else if (st != JOB_DONE && !(st == JOB_CANCELLED && in->early_stopped) && !*bad)
            *bad = j;
    }
    for (const sweep_submission *sub = sw->submitting; sub && !*left; sub = sub->next)
        *left += sub->s == s ? sub->njobs - sub->committed : 0;
    if (*left)
        return 0;
    return *bad ? -1 : 1;
}
