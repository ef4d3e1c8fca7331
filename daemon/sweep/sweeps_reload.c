/* The sweeps reloaded after the jobs at parled's start (sweeps_impl.h;
 * the client's reload): each sweep's record under <state dir>/sweeps, its
 * jobs found by the tag their status.json kept, its state.json (cancelled,
 * the early stop's errors) and any job it lacks (parled stopped while it
 * queued them) queued now. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "log.h"
#include "numbered_dirs.h"
#include "sweeps_impl.h"

#define SWEEP_FILE_MAX (8u << 20) /* sweep.json: a request line (1 MiB) pretty-printed */

void job_restore_sweep(void *self, job *j, const cJSON *st)
{
    (void)self;
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
static void restore_state(sweeps *sw, sweep *s)
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
    each_job(sw->js, j) {
        struct job_in_sweep *in = in_sweep_of(j);
        if (in->sweep != s)
            continue;
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(errors, job_id(j));
        if (cJSON_IsNumber(e) && isfinite(e->valuedouble)) {
            in->sweep_error = e->valuedouble;
            in->sweep_error_known = 1;
        }
        cJSON_ArrayForEach(it, stopped) in->early_stopped |=
            cJSON_IsString(it) && strcmp(it->valuestring, job_id(j)) == 0;
    }
    cJSON_Delete(st);
}

/* The jobs a reloaded sweep lacks (parled stopped while it queued them,
 * or a job dir could not be read): queued now, unless it was cancelled. */
static void queue_missing(sweeps *sw, sweep *s)
{
    for (int p = 0; p < s->spec.npoints && !s->cancelled; p++)
        for (int k = 0; k < s->spec.seeds; k++) {
            long point = s->spec.points[p];
            const job *have = jobs_next(sw->js, NULL);
            while (have && !(in_sweep_of(have)->sweep == s && in_sweep_of(have)->point == point &&
                             in_sweep_of(have)->seed_index == k))
                have = jobs_next(sw->js, have);
            if (have)
                continue;
            char err[8192];
            const char *code;
            cJSON *json;
            job *j = sweep_prepare_point(sw, s, point, k, &json, &code, err, sizeof err);
            if (j && sweep_commit_tagged(sw, s, j, json, point, k, err, sizeof err) == 0)
                server_log(LOG_INFO, "sweep %s: queued its missing job %s (point %ld, seed %d "
                           "of %d)", s->id, job_id(j), point, k + 1, s->spec.seeds);
            else
                server_log(LOG_WARN, "sweep %s: cannot queue its missing job of point %ld, "
                           "seed %d of %d: %s", s->id, point, k + 1, s->spec.seeds, err);
            cJSON_Delete(json);
        }
}

static sweep *load_sweep(sweeps *sw, const char *name, char *err, size_t errlen)
{
    sweep *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    char path[1200];
    size_t len;
    snprintf(s->id, sizeof s->id, "%s", name);
    snprintf(s->dir, sizeof s->dir, "%s/%s", sw->dir, name);
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

int sweeps_reload(void *self, jobs *js, char *err, size_t errlen)
{
    sweeps *sw = self;
    char **names;
    size_t n;
    sw->js = js;
    if (mkdir_p(sw->dir, err, errlen) != 0 ||
        numbered_dirs(sw->dir, 's', &names, &n, &sw->next_id, err, errlen) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char why[8192];
        sweep *s = load_sweep(sw, names[i], why, sizeof why);
        if (!s) {
            /* Its jobs stay, as jobs of their own. */
            server_log(LOG_WARN, "skipping sweep %s: %s", names[i], why);
            continue;
        }
        sweeps_link(sw, s);
        each_job(js, j)
            if (strcmp(in_sweep_of(j)->sweep_id, s->id) == 0)
                in_sweep_of(j)->sweep = s;
        restore_state(sw, s);
        queue_missing(sw, s);
    }
    if (n > 0)
        server_log(LOG_INFO, "reloaded %zu sweep(s)", n);
    numbered_dirs_free(names, n);
    return 0;
}
