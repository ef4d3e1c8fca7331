/* Sweeps (jobs.h; docs/sweeps.md), a durable object of the daemon, on the
 * loop thread: submitted all or nothing, written to <state dir>/sweeps/<id>
 * (sweep.json once, state.json at each change, both atomic), reloaded after
 * the jobs with any job it lacks queued, cancelled as a whole, and the early
 * stop of hopeless points. What they answer is in sweeps_json.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsutil.h"
#include "jobs_impl.h"
#include "job_schedule.h"
#include "job_submit.h"
#include "sweeps_impl.h"
#include "log.h"

#define SWEEP_FILE_MAX (8u << 20) /* sweep.json: a request line (1 MiB) pretty-printed */

sweep *jobs_find_sweep(jobs *js, const char *id)
{
    for (sweep *s = sweeps_state(js)->sweeps; s; s = s->next)
        if (strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

static void sweep_free(sweep *s)
{
    sweep_spec_free(&s->spec);
    cJSON_Delete(s->doc);
    free(s);
}

void sweeps_free(jobs *js)
{
    struct jobs_sweeps *sw = sweeps_state(js);
    while (sw->submitting)
        sweep_submission_free(sw->submitting);
    while (sw->sweeps) {
        sweep *next = sw->sweeps->next;
        sweep_free(sw->sweeps);
        sw->sweeps = next;
    }
}

static void link_sweep(jobs *js, sweep *s)
{
    sweep **at = &sweeps_state(js)->sweeps;
    while (*at)
        at = &(*at)->next;
    *at = s;
}

/* state.json: whether the sweep was cancelled, each job's test error at the
 * early-stop epoch, the jobs the early stop cancelled. A failed write is
 * logged; the next change writes it again. */
static void write_state(jobs *js, sweep *s)
{
    cJSON *st = cJSON_CreateObject(), *errors = cJSON_AddObjectToObject(st, "errors");
    cJSON *stopped = cJSON_AddArrayToObject(st, "early_stopped");
    cJSON_AddBoolToObject(st, "cancelled", s->cancelled);
    for (job *j = js->first; j; j = j->next) {
        if (in_sweep_of(j)->sweep != s)
            continue;
        if (in_sweep_of(j)->sweep_error_known)
            cJSON_AddNumberToObject(errors, j->id, in_sweep_of(j)->sweep_error);
        if (in_sweep_of(j)->early_stopped)
            cJSON_AddItemToArray(stopped, cJSON_CreateString(j->id));
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

/* Tag a prepared job as the sweep's and queue it. */
static int commit_tagged(jobs *js, sweep *s, job *j, const cJSON *job_json, long point, int k,
                         char *err, size_t errlen)
{
    in_sweep_of(j)->sweep = s;
    snprintf(in_sweep_of(j)->sweep_id, sizeof in_sweep_of(j)->sweep_id, "%s", s->id);
    in_sweep_of(j)->point = point;
    in_sweep_of(j)->seed_index = k;
    if (job_commit(js, j, job_json, &s->owner, err, errlen) != 0)
        return -1;
    js->after_epoch++; /* its sweep's dependents wait for it too */
    return 0;
}

/* The job of (point, k) prepared against the daemon, its JSON in *json:
 * NULL with *code and a message naming the point. */
static job *prepare_point(jobs *js, const sweep *s, long point, int k, cJSON **json,
                          const char **code, char *err, size_t errlen)
{
    char why[8192], label[512];
    *code = ERR_INVALID_SWEEP;
    if (!(*json = sweep_job(&s->spec, point, k, err, errlen)))
        return NULL;
    job *j = job_prepare(js, *json, code, why, sizeof why);
    if (j && job_priority_allowed(j, &s->owner, code, why, sizeof why) != 0) {
        free(j);
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
static int create_sweep(jobs *js, sweep *s, char *err, size_t errlen)
{
    snprintf(s->id, sizeof s->id, "s%04d", sweeps_state(js)->next_sweep_id++);
    snprintf(s->dir, sizeof s->dir, "%s/%s", sweeps_state(js)->sweeps_dir, s->id);
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
static int cancel_jobs(jobs *js, sweep *s)
{
    int n = 0;
    s->cancelled = 1;
    write_state(js, s);
    for (job *j = js->first; j; j = j->next) {
        char why[256];
        if (in_sweep_of(j)->sweep == s && !job_state_final(j->state) && !j->cancel_requested &&
            job_cancel(js, j, why, sizeof why) == 0)
            n++;
    }
    server_log(LOG_INFO, "sweep %s cancelled: %d job(s) stop", s->id, n);
    return n;
}

int sweep_submitting(const jobs *js, const sweep *s)
{
    for (const sweep_submission *sub = sweeps_state(js)->submitting; sub; sub = sub->next)
        if (sub->s == s)
            return 1;
    return 0;
}

int sweeps_promised(const jobs *js, unsigned uid)
{
    int n = 0;
    for (const sweep_submission *sub = sweeps_state(js)->submitting; sub; sub = sub->next)
        if (sub->s->owner.uid == uid)
            n += sub->njobs - sub->committed;
    return n;
}

void sweep_forget(jobs *js, sweep *s)
{
    js->after_epoch++; /* a job after it is cancelled */
    for (job *j = js->first; j; j = j->next)
        if (in_sweep_of(j)->sweep == s)
            in_sweep_of(j)->sweep = NULL;
    sweep **at = &sweeps_state(js)->sweeps;
    while (*at && *at != s)
        at = &(*at)->next;
    if (*at)
        *at = s->next;
    sweep_free(s);
}

sweep_submission *jobs_sweep_submit(jobs *js, const cJSON *sweep_json, const job_owner *owner,
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
    sub->js = js;
    sub->s = s;
    /* The cheap bounds first: its size, then the owner's room. */
    if (sweep_spec_read(copy, &s->spec, err, errlen) != 0) {
        *code = ERR_INVALID_SWEEP;
    } else if (jobs_may_queue(js, owner, s->spec.npoints * s->spec.seeds, code, err,
                              errlen) == 0) {
        sub->njobs = s->spec.npoints * s->spec.seeds;
        sub->prepared = calloc((size_t)sub->njobs, sizeof *sub->prepared);
        sub->texts = calloc((size_t)sub->njobs, sizeof *sub->texts);
        if (sub->prepared && sub->texts) {
            sub->next = sweeps_state(js)->submitting;
            sweeps_state(js)->submitting = sub;
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
        if (!(sub->prepared[sub->made] = prepare_point(sub->js, s, s->spec.points[p], k,
                                                       &sub->texts[sub->made], code, err, errlen)))
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
    jobs *js = sub->js;
    sweep *s = sub->s;
    while (sub->committed < sub->njobs && !s->cancelled) {
        int i = sub->committed, p = i / s->spec.seeds, k = i % s->spec.seeds;
        char why[1024];
        job *j = sub->prepared[i];
        sub->prepared[i] = NULL; /* job_commit frees it on failure */
        if (commit_tagged(js, s, j, sub->texts[i], s->spec.points[p], k, why, sizeof why) != 0) {
            cancel_jobs(js, s);
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
    jobs *js = sub->js;
    sweep *s = sub->s;
    uint64_t until_ns = uv_hrtime() + (uint64_t)(budget_s * 1e9);
    *out = NULL;
    if (!sub->linked) {
        int rc = prepare_jobs(sub, until_ns, code, err, errlen);
        if (rc <= 0)
            return rc < 0;
        *code = ERR_INTERNAL;
        if (create_sweep(js, s, err, errlen) != 0)
            return 1;
        link_sweep(js, s);
        sub->linked = 1;
        if (out_of_time(until_ns))
            return 0;
    }
    int rc = commit_jobs(sub, until_ns, err, errlen);
    if (rc == 0) {
        jobs_schedule(js); /* the queued ones may start meanwhile */
        return 0;
    }
    write_state(js, s);
    jobs_schedule(js);
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
    for (sweep_submission **at = &sweeps_state(sub->js)->submitting; *at; at = &(*at)->next)
        if (*at == sub) {
            *at = sub->next;
            break;
        }
    for (int i = 0; i < sub->njobs && sub->prepared && sub->texts; i++) {
        free(sub->prepared[i]);
        cJSON_Delete(sub->texts[i]);
    }
    free(sub->prepared);
    free(sub->texts);
    if (!sub->linked) /* else the sweep is the daemon's: the next start queues what it lacks */
        sweep_free(sub->s);
    free(sub);
}

/* Has the sweep a job not yet ended, or jobs still to queue? */
static int sweep_unended(const jobs *js, const sweep *s)
{
    for (const job *j = js->first; j; j = j->next)
        if (in_sweep_of(j)->sweep == s && !job_state_final(j->state))
            return 1;
    for (const sweep_submission *sub = sweeps_state(js)->submitting; sub; sub = sub->next)
        if (sub->s == s)
            return 1;
    return 0;
}

int sweep_cancel(jobs *js, sweep *s, char *err, size_t errlen)
{
    if (s->cancelled) {
        snprintf(err, errlen, "sweep %s has already been cancelled", s->id);
        return -1;
    }
    if (!sweep_unended(js, s)) {
        snprintf(err, errlen, "sweep %s has ended (every job of it is done, failed or "
                 "cancelled): nothing to cancel", s->id);
        return -1;
    }
    return cancel_jobs(js, s);
}

/* The early stop (docs/sweeps.md): at its first evaluation with at least
 * after_epochs epochs done, a job whose test error is worse than the median
 * of the sweep's finished (done) jobs' errors at that evaluation by more
 * than the margin is cancelled, the reason in its error and log. */
void sweep_on_eval(job *j, double epoch, double test_error)
{
    sweep *s = in_sweep_of(j)->sweep;
    jobs *js = j->js;
    if (!s || !s->spec.early_after || in_sweep_of(j)->sweep_error_known ||
        epoch < s->spec.early_after || !isfinite(test_error))
        return;
    in_sweep_of(j)->sweep_error = test_error;
    in_sweep_of(j)->sweep_error_known = 1;
    double done[SWEEP_MAX_JOBS];
    int n = 0;
    for (job *o = js->first; o && n < SWEEP_MAX_JOBS; o = o->next)
        if (in_sweep_of(o)->sweep == s && o->state == JOB_DONE && in_sweep_of(o)->sweep_error_known)
            done[n++] = in_sweep_of(o)->sweep_error;
    /* The median by insertion sort: at most SWEEP_MAX_JOBS values, once per job. */
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && done[b - 1] > done[b]; b--) {
            double t = done[b];
            done[b] = done[b - 1];
            done[b - 1] = t;
        }
    double median = n == 0 ? NAN : n % 2 ? done[n / 2] : (done[n / 2 - 1] + done[n / 2]) / 2;
    if (n > 0 && test_error > median + s->spec.early_margin && !j->cancel_requested) {
        char why[256];
        in_sweep_of(j)->early_stopped = 1;
        snprintf(j->error, sizeof j->error, "early stop: test error %.2f%% after %.6g epochs is "
                 "worse than %.2f%%, the median of the sweep's %d finished job%s then, by more "
                 "than the margin %.2f%%", 100 * test_error, epoch, 100 * median, n,
                 n == 1 ? "" : "s", 100 * s->spec.early_margin);
        job_log(j, "%s", j->error);
        server_log(LOG_INFO, "sweep %s: job %s %s", s->id, j->id, j->error);
        job_cancel(js, j, why, sizeof why);
    }
    write_state(js, s);
}

void sweep_on_done(job *j)
{
    if (!in_sweep_of(j)->early_stopped)
        return;
    in_sweep_of(j)->early_stopped = 0;
    j->error[0] = '\0';
    job_log(j, "the early stop came after the job had finished: it stays done");
    write_state(j->js, in_sweep_of(j)->sweep);
}

/* ---- reloading ---- */

void job_restore_sweep(job *j, const cJSON *st)
{
    struct job_in_sweep *in = in_sweep_of(j);
    const char *tag = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "sweep"));
    double point = status_number(st, "point", -1), seed_index = status_number(st, "seed_index", -1);
    if (tag && numbered_id(tag, 's') >= 0 && point >= 0 && point < SWEEP_MAX_GRID &&
        point == floor(point) && seed_index >= 0 && seed_index < SWEEP_MAX_SEEDS &&
        seed_index == floor(seed_index)) {
        snprintf(in->sweep_id, sizeof in->sweep_id, "%s", tag);
        in->point = (long)point;
        in->seed_index = (int)seed_index;
    }
}

/* The state.json of a reloaded sweep, onto it and its jobs; missing or
 * unreadable: not cancelled, nothing known (logged). */
static void restore_state(jobs *js, sweep *s)
{
    char path[1200], err[1400];
    size_t len;
    snprintf(path, sizeof path, "%s/state.json", s->dir);
    char *text = read_file_text(path, SWEEP_FILE_MAX, &len, err, sizeof err);
    cJSON *st = text ? cJSON_ParseWithLength(text, len) : NULL;
    if (!cJSON_IsObject(st))
        server_log(LOG_WARN, "sweep %s: state.json: %s", s->id, text ? "not a JSON object" : err);
    free(text);
    s->cancelled = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "cancelled"));
    const cJSON *errors = cJSON_GetObjectItemCaseSensitive(st, "errors");
    const cJSON *stopped = cJSON_GetObjectItemCaseSensitive(st, "early_stopped"), *it;
    for (job *j = js->first; j; j = j->next) {
        if (in_sweep_of(j)->sweep != s)
            continue;
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(errors, j->id);
        if (cJSON_IsNumber(e) && isfinite(e->valuedouble)) {
            in_sweep_of(j)->sweep_error = e->valuedouble;
            in_sweep_of(j)->sweep_error_known = 1;
        }
        cJSON_ArrayForEach(it, stopped) in_sweep_of(j)->early_stopped |=
            cJSON_IsString(it) && strcmp(it->valuestring, j->id) == 0;
    }
    cJSON_Delete(st);
}

/* The jobs a reloaded sweep lacks (parled stopped while it queued them,
 * or a job dir could not be read): queued now, unless it was cancelled. */
static void queue_missing(jobs *js, sweep *s)
{
    for (int p = 0; p < s->spec.npoints && !s->cancelled; p++)
        for (int k = 0; k < s->spec.seeds; k++) {
            long point = s->spec.points[p];
            const job *have = js->first;
            while (have && !(in_sweep_of(have)->sweep == s && in_sweep_of(have)->point == point &&
                             in_sweep_of(have)->seed_index == k))
                have = have->next;
            if (have)
                continue;
            char err[8192];
            const char *code;
            cJSON *json;
            job *j = prepare_point(js, s, point, k, &json, &code, err, sizeof err);
            if (j && commit_tagged(js, s, j, json, point, k, err, sizeof err) == 0)
                server_log(LOG_INFO, "sweep %s: queued its missing job %s (point %ld, seed %d "
                           "of %d)", s->id, j->id, point, k + 1, s->spec.seeds);
            else
                server_log(LOG_WARN, "sweep %s: cannot queue its missing job of point %ld, "
                           "seed %d of %d: %s", s->id, point, k + 1, s->spec.seeds, err);
            cJSON_Delete(json);
        }
}

static sweep *load_sweep(jobs *js, const char *name, char *err, size_t errlen)
{
    sweep *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    char path[1200];
    size_t len;
    snprintf(s->id, sizeof s->id, "%s", name);
    snprintf(s->dir, sizeof s->dir, "%s/%s", sweeps_state(js)->sweeps_dir, name);
    snprintf(path, sizeof path, "%s/sweep.json", s->dir);
    char *text = read_file_text(path, SWEEP_FILE_MAX, &len, err, errlen);
    int read = text != NULL;
    s->doc = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(s->doc, "sweep");
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s->doc, "id"));
    char why[8192];
    if (!read) {
        /* err says why */
    } else if (!cJSON_IsObject(s->doc) || !id || strcmp(id, name) != 0 || !spec) {
        snprintf(err, errlen, "sweep.json: not a sweep record for %s", name);
    } else if (sweep_spec_read(spec, &s->spec, why, sizeof why) != 0 ||
               sweep_spec_check(&s->spec, why, sizeof why) != 0) {
        snprintf(err, errlen, "sweep.json: %.2000s", why);
    } else {
        owner_from_json(&s->owner, cJSON_GetObjectItemCaseSensitive(s->doc, "owner"));
        s->owner.privileged = 1; /* its priorities were allowed when it was submitted */
        s->created_at =
            cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(s->doc, "created_at"));
        s->created_at = isfinite(s->created_at) ? s->created_at : 0;
        return s;
    }
    sweep_free(s);
    return NULL;
}

int sweeps_reload(jobs *js, char *err, size_t errlen)
{
    char **names;
    size_t n;
    if (numbered_dirs(sweeps_state(js)->sweeps_dir, 's', &names, &n,
                      &sweeps_state(js)->next_sweep_id, err, errlen) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char why[8192];
        sweep *s = load_sweep(js, names[i], why, sizeof why);
        if (!s) {
            /* Its jobs stay, as jobs of their own. */
            server_log(LOG_WARN, "skipping sweep %s: %s", names[i], why);
            continue;
        }
        link_sweep(js, s);
        for (job *j = js->first; j; j = j->next)
            if (strcmp(in_sweep_of(j)->sweep_id, s->id) == 0)
                in_sweep_of(j)->sweep = s;
        restore_state(js, s);
        queue_missing(js, s);
    }
    if (n > 0)
        server_log(LOG_INFO, "reloaded %zu sweep(s)", n);
    numbered_dirs_free(names, n);
    return 0;
}
