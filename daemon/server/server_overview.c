/* The whole queue at a glance (server_impl.h): `top`'s answer, one bounded
 * object however long the queue, and --metrics-file's writer with what the
 * daemon adds to the queue's figures (its uptime, its connections). */
#include <math.h>
#include <stdio.h>

#include "jobs_overview.h"
#include "metrics.h"
#include "parle_config.h"
#include "server_impl.h"

/* The queued jobs `top` lists, in the queue's order (the rest are counted). */
#define TOP_QUEUED 50

static void add_num(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

/* Named numbers into o, in order. */
typedef struct named {
    const char *key;
    double v;
} named;

static void add_named(cJSON *o, const named *n, size_t count)
{
    for (size_t i = 0; i < count; i++)
        add_num(o, n[i].key, n[i].v);
}

static cJSON *job_json(const overview_job *j)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "owner", j->owner);
    cJSON_AddNumberToObject(o, "uid", j->uid);
    cJSON_AddStringToObject(o, "rule", j->rule);
    cJSON_AddStringToObject(o, "devices", j->devices);
    cJSON_AddStringToObject(o, "state", j->state);
    cJSON_AddNumberToObject(o, "priority", j->priority);
    cJSON_AddNumberToObject(o, "share", j->share);
    cJSON_AddNumberToObject(o, "wait_s", j->wait_s);
    if (j->waiting[0])
        cJSON_AddStringToObject(o, "waiting", j->waiting);
    else
        cJSON_AddNullToObject(o, "waiting");
    /* Training values only where the viewer may see them: else null. */
    cJSON_AddBoolToObject(o, "details", j->details);
    const double hidden = NAN;
    const named n[] = {{"step", j->details ? (double)j->step : hidden},
                       {"data_passes", j->details ? j->passes : hidden},
                       {"epoch", j->details ? j->epoch : hidden},
                       {"epochs", j->details ? j->epochs : hidden},
                       {"progress", j->details ? j->progress : hidden},
                       {"images_per_sec", j->images_per_sec}, {"eta_s", j->eta_s},
                       {"test_error", j->test_error}};
    add_named(o, n, sizeof n / sizeof n[0]);
    return o;
}

static cJSON *device_json(const overview_device *d)
{
    cJSON *o = cJSON_CreateObject();
    char name[16];
    snprintf(name, sizeof name, d->gpu < 0 ? "cpu" : "gpu%d", d->gpu);
    cJSON_AddStringToObject(o, "device", name);
    if (d->gpu < 0)
        cJSON_AddNumberToObject(o, "cores", d->cores);
    cJSON_AddStringToObject(o, "jobs", d->jobs);
    const named n[] = {{"njobs", d->njobs}, {"share", d->shares},
                       {"memory_held_bytes", d->memory_held},
                       {"memory_peak_bytes", d->memory_peak}};
    add_named(o, n, sizeof n / sizeof n[0]);
    cJSON_AddBoolToObject(o, "faulted", d->faulted);
    return o;
}

static cJSON *owner_row_json(const overview_owner *w)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "user", w->user);
    const named n[] = {{"uid", w->uid}, {"device_seconds", w->device_seconds},
                       {"share", w->share}, {"running", w->running}, {"queued", w->queued}};
    add_named(o, n, sizeof n / sizeof n[0]);
    return o;
}

void op_top(conn *c)
{
    server *s = c->srv;
    const job_viewer viewer = peer_viewer(c);
    jobs_overview ov;
    if (jobs_overview_take(s->jobs, &viewer, TOP_QUEUED, &ov) != 0) {
        send_error(c, ERR_INTERNAL, "out of memory");
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "version", PARLE_VERSION);
    cJSON_AddNumberToObject(o, "uptime_s", server_mono_s() - s->started_at);
    cJSON *v = cJSON_AddObjectToObject(o, "viewer");
    cJSON_AddStringToObject(v, "user", c->peer_user);
    cJSON_AddNumberToObject(v, "uid", c->peer_uid);
    cJSON_AddBoolToObject(v, "admin", c->admin);
    cJSON *counts = cJSON_AddObjectToObject(o, "jobs");
    for (int st = 0; st < JOB_STATES; st++)
        cJSON_AddNumberToObject(counts, job_state_name((enum job_state)st), ov.count[st]);
    cJSON_AddNumberToObject(counts, "held", ov.held);
    cJSON_AddNumberToObject(o, "oldest_wait_s", ov.oldest_wait_s);
    cJSON *a = cJSON_AddArrayToObject(o, "devices");
    for (int i = 0; i < ov.ndev; i++)
        cJSON_AddItemToArray(a, device_json(&ov.dev[i]));
    a = cJSON_AddArrayToObject(o, "running");
    for (int i = 0; i < ov.nrunning; i++)
        cJSON_AddItemToArray(a, job_json(&ov.running[i]));
    a = cJSON_AddArrayToObject(o, "queued");
    for (int i = 0; i < ov.nqueued; i++)
        cJSON_AddItemToArray(a, job_json(&ov.queued[i]));
    cJSON_AddNumberToObject(o, "queued_not_shown", ov.count[JOB_QUEUED] - ov.nqueued);
    a = cJSON_AddArrayToObject(o, "owners");
    for (int i = 0; i < ov.nowners; i++)
        cJSON_AddItemToArray(a, owner_row_json(&ov.owners[i]));
    jobs_overview_free(&ov);
    conn_send(c, proto_reply_ok(o));
}

static void daemon_figures(void *user, metrics_daemon *d)
{
    server *s = user;
    d->version = PARLE_VERSION;
    d->uptime_s = server_mono_s() - s->started_at;
    d->connections = s->nconns;
}

int server_metrics_open(server *s, const server_config *cfg, char *err, size_t errlen)
{
    s->metrics = NULL;
    if (!cfg->metrics_file)
        return 0;
    return metrics_open(&s->metrics, s->loop, s->jobs, cfg->metrics_file, cfg->metrics_interval_s,
                        daemon_figures, s, err, errlen);
}
