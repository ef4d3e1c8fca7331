/* What a sweep answers (sweeps.h; docs/protocol.md "sweep_status"): its id
 * and owner, one row per point from its jobs' states and final test
 * errors, and the list; and a sweep's tag in its jobs' status. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sweeps_impl.h"

const char *sweep_id(const sweep *s) { return s->id; }
const job_owner *sweep_owner(const sweep *s) { return &s->owner; }

void job_status_sweep(void *self, const job *j, cJSON *o)
{
    (void)self;
    const struct job_in_sweep *in = in_sweep_of(j);
    if (in->sweep_id[0])
        cJSON_AddStringToObject(o, "sweep", in->sweep_id);
    else
        cJSON_AddNullToObject(o, "sweep");
    add_num_or_null(o, "point", in->sweep_id[0] ? (double)in->point : NAN);
    add_num_or_null(o, "seed_index", in->sweep_id[0] ? in->seed_index : NAN);
}

/* A point's jobs summed up: states, the final test errors of those done
 * (Welford's running mean and squared deviations), their wall time. */
typedef struct point_row {
    int count[JOB_STATES];
    int early_stopped, done;
    double mean, m2, wall_s;
    cJSON *ids;
} point_row;

static int point_slot(const sweep *s, long point)
{
    int lo = 0, hi = s->spec.npoints - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (s->spec.points[mid] == point)
            return mid;
        if (s->spec.points[mid] < point)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* A point's state from its jobs' counts. */
static const char *point_state(const int *count, int early_stopped)
{
    if (count[JOB_RUNNING])
        return "running";
    if (count[JOB_QUEUED])
        return "queued";
    if (early_stopped)
        return "early_stopped";
    if (count[JOB_FAILED])
        return "failed";
    if (count[JOB_TIMEOUT])
        return "timeout";
    return count[JOB_CANCELLED] ? "cancelled" : "done";
}

/* The row of point slot p; it takes r's ids. Without the details
 * (owner_details_seen): its values and test errors null. */
static cJSON *point_json(const sweep *s, int p, point_row *r, bool details)
{
    cJSON *o = cJSON_CreateObject(), *values = details ? cJSON_CreateObject() : cJSON_CreateNull();
    long point = s->spec.points[p];
    cJSON_AddNumberToObject(o, "point", (double)point);
    for (int i = 0; i < s->spec.nkeys && details; i++)
        cJSON_AddItemToObject(values, s->spec.keys[i],
                              cJSON_Duplicate(sweep_value(&s->spec, point, i), 1));
    cJSON_AddItemToObject(o, "values", values);
    cJSON_AddItemToObject(o, "jobs", r->ids);
    r->ids = NULL;
    cJSON_AddStringToObject(o, "state", point_state(r->count, r->early_stopped));
    cJSON_AddNumberToObject(o, "done", r->done);
    add_num_or_null(o, "test_error_mean", details && r->done ? r->mean : NAN);
    add_num_or_null(o, "test_error_std", details && r->done > 1 ? sqrt(r->m2 / (r->done - 1))
                                                                : NAN);
    cJSON_AddNumberToObject(o, "wall_s", r->wall_s);
    return o;
}

cJSON *sweep_status_json(const sweeps *sw, const sweep *s, const job_viewer *v)
{
    const bool details = owner_details_seen(sw->js, &s->owner, v);
    int n = s->spec.npoints, count[JOB_STATES] = {0}, early = 0, njobs = 0;
    point_row *rows = calloc((size_t)n, sizeof *rows);
    if (!rows)
        return NULL;
    double first_start = INFINITY, last_end = 0;
    int unended = 0;
    for (int p = 0; p < n; p++)
        rows[p].ids = cJSON_CreateArray();
    each_job(sw->js, j) {
        const struct job_in_sweep *in = in_sweep_of(j);
        int p = in->sweep == s ? point_slot(s, in->point) : -1;
        if (p < 0)
            continue;
        const enum job_state st = job_state_of(j);
        const double started = job_started_at(j), ended = job_ended_at(j);
        const double test_error = job_test_error(j);
        point_row *r = &rows[p];
        r->count[st]++;
        count[st]++;
        njobs++;
        r->early_stopped += in->early_stopped;
        /* Among the cancelled: a stopped job's cancel may not have landed yet. */
        early += in->early_stopped && st == JOB_CANCELLED;
        cJSON_AddItemToArray(r->ids, cJSON_CreateString(job_id(j)));
        if (started > 0) {
            r->wall_s += job_elapsed(j);
            first_start = started < first_start ? started : first_start;
        }
        if (job_state_final(st))
            last_end = ended > last_end ? ended : last_end;
        else
            unended = 1;
        if (st == JOB_DONE && isfinite(test_error)) {
            double d = test_error - r->mean;
            r->mean += d / ++r->done;
            r->m2 += d * (test_error - r->mean);
        }
    }
    /* The best: the lowest mean among points whose every job is done. */
    int best = -1;
    for (int p = 0; p < n && details; p++)
        if (rows[p].done == s->spec.seeds && (best < 0 || rows[p].mean < rows[best].mean))
            best = p;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", s->id);
    cJSON_AddStringToObject(o, "name", s->spec.name);
    cJSON_AddItemToObject(o, "owner", owner_json(&s->owner));
    cJSON_AddBoolToObject(o, "details", details);
    /* The sweep's: running or queued while a job is, then cancelled or done. */
    cJSON_AddStringToObject(o, "state", count[JOB_RUNNING] ? "running"
                                        : count[JOB_QUEUED] ? "queued"
                                        : s->cancelled ? "cancelled" : "done");
    cJSON_AddBoolToObject(o, "cancelled", s->cancelled);
    cJSON *keys = cJSON_AddArrayToObject(o, "keys");
    for (int i = 0; i < s->spec.nkeys; i++)
        cJSON_AddItemToArray(keys, cJSON_CreateString(s->spec.keys[i]));
    cJSON_AddNumberToObject(o, "grid", (double)s->spec.grid);
    cJSON_AddNumberToObject(o, "npoints", n);
    cJSON_AddNumberToObject(o, "seeds", s->spec.seeds);
    cJSON_AddNumberToObject(o, "jobs", njobs);
    cJSON *counts = cJSON_AddObjectToObject(o, "counts");
    for (int st = 0; st < JOB_STATES; st++)
        cJSON_AddNumberToObject(counts, job_state_name((enum job_state)st), count[st]);
    cJSON_AddNumberToObject(counts, "early_stopped", early);
    if (s->spec.early_after) {
        cJSON *e = cJSON_AddObjectToObject(o, "early_stop");
        cJSON_AddNumberToObject(e, "after_epochs", s->spec.early_after);
        cJSON_AddNumberToObject(e, "margin", s->spec.early_margin);
    } else {
        cJSON_AddNullToObject(o, "early_stop");
    }
    cJSON_AddNumberToObject(o, "created_at", s->created_at);
    double end = unended ? jobs_now_s() : last_end;
    cJSON_AddNumberToObject(o, "elapsed_s", isfinite(first_start) ? end - first_start : 0);
    add_num_or_null(o, "best", best >= 0 ? (double)s->spec.points[best] : NAN);
    add_num_or_null(o, "best_test_error", best >= 0 ? rows[best].mean : NAN);
    cJSON *points = cJSON_AddArrayToObject(o, "points");
    for (int p = 0; p < n; p++) {
        cJSON *row = point_json(s, p, &rows[p], details);
        cJSON_AddBoolToObject(row, "best", p == best);
        cJSON_AddItemToArray(points, row);
    }
    free(rows);
    return o;
}

cJSON *sweeps_list_json(const sweeps *sw, const job_viewer *v)
{
    cJSON *a = cJSON_CreateArray();
    for (const sweep *s = sw->list; s; s = s->next) {
        cJSON *o = sweep_status_json(sw, s, v);
        cJSON_DeleteItemFromObjectCaseSensitive(o, "points");
        if (o)
            cJSON_AddItemToArray(a, o);
    }
    return a;
}
