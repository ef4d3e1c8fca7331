/* The metrics file's text (metrics.h): Prometheus's text exposition format,
 * each family with its HELP and TYPE lines, names with the parle_ prefix and
 * base units (seconds, bytes, ratios), counters ending _total. docs/monitoring.md
 * lists them and says which labels carry user names and job ids. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

typedef struct text {
    char *buf;
    size_t len, cap;
    int oom;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    if (t->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->oom = 1;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = 2 * t->cap + (size_t)n;
        char *b = realloc(t->buf, cap);
        if (!b) {
            t->oom = 1;
            return;
        }
        t->buf = b;
        t->cap = cap;
    }
}

/* A label's value as the format wants it: backslash, quote and newline
 * escaped; anything else below ' ' dropped. Cut at the buffer's size. */
static const char *esc(const char *s, char *out, size_t outlen)
{
    size_t n = 0;
    for (; *s && n + 3 < outlen; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\' || c == '"') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c == '\n') {
            out[n++] = '\\';
            out[n++] = 'n';
        } else if (c >= ' ') {
            out[n++] = (char)c;
        }
    }
    out[n] = '\0';
    return out;
}

static void family(text *t, const char *name, const char *type, const char *help)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A sample's value: Go's float syntax for what is not finite. */
static void value(text *t, double v)
{
    if (isnan(v))
        put(t, " NaN\n");
    else if (isinf(v))
        put(t, " %sInf\n", v > 0 ? "+" : "-");
    else
        put(t, " %.17g\n", v);
}

static void sample(text *t, const char *name, double v)
{
    put(t, "%s", name);
    value(t, v);
}

static void dev_name(const overview_device *d, char *out, size_t len)
{
    if (d->gpu < 0)
        snprintf(out, len, "cpu");
    else
        snprintf(out, len, "gpu%d", d->gpu);
}

static void devices(text *t, const jobs_overview *o)
{
    static const struct {
        const char *name, *help;
    } fams[] = {
        {"parle_device_jobs", "Running jobs on the device."},
        {"parle_device_share_held_ratio",
         "Share of the device its running jobs hold (GPU shares, or CPU cores held / cores)."},
        {"parle_device_memory_held_bytes",
         "Memory admission counts for the device's running jobs (their estimates)."},
        {"parle_device_memory_peak_bytes",
         "Memory the device's running jobs reported at their peaks so far."},
        {"parle_device_faulted", "1 if the device hit an error that leaves it unusable until "
                                 "parled re-executes."},
    };
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        family(t, fams[f].name, "gauge", fams[f].help);
        for (int i = 0; i < o->ndev; i++) {
            const overview_device *d = &o->dev[i];
            const double v[] = {d->njobs, d->shares, d->memory_held, d->memory_peak, d->faulted};
            char name[16];
            dev_name(d, name, sizeof name);
            put(t, "%s{device=\"%s\"}", fams[f].name, name);
            value(t, v[f]);
        }
    }
}

/* The job's devices as the device label writes them: "cpu", "gpu0,gpu1". */
static void job_devices(const char *devs, char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    char copy[64];
    snprintf(copy, sizeof copy, "%s", devs);
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok && n < len;
         tok = strtok_r(NULL, ",", &save))
        n += (size_t)snprintf(out + n, len - n, "%s%s%s", n ? "," : "",
                              strcmp(tok, "cpu") == 0 ? "" : "gpu", tok);
}

static void running_jobs(text *t, const jobs_overview *o)
{
    static const struct {
        const char *name, *help;
    } fams[] = {
        {"parle_job_images_per_second", "Training speed of the running job, all replicas "
                                        "together, over its last log interval."},
        {"parle_job_steps", "Gradient steps the running job has taken (replica 0)."},
        {"parle_job_passes", "Passes over the training data per replica so far."},
        {"parle_job_progress_ratio", "Part of the running job done, 0 to 1."},
        {"parle_job_test_error_ratio", "The master's test error at the job's latest evaluation "
                                       "(NaN before the first)."},
        {"parle_job_eta_seconds", "Seconds the running job is expected to take still."},
        {"parle_job_share_ratio", "Share of each of its devices the running job holds."},
    };
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        family(t, fams[f].name, "gauge", fams[f].help);
        for (int i = 0; i < o->nrunning; i++) {
            const overview_job *j = &o->running[i];
            if (!j->details && f != 6)
                continue;
            const double v[] = {j->images_per_sec, (double)j->step, j->passes, j->progress,
                                j->test_error, j->eta_s, j->share};
            char owner[160], rule[80], dev[160];
            job_devices(j->devices, dev, sizeof dev);
            put(t, "%s{id=\"%s\",owner=\"%s\",rule=\"%s\",device=\"%s\"}", fams[f].name, j->id,
                esc(j->owner, owner, sizeof owner), esc(j->rule, rule, sizeof rule), dev);
            value(t, v[f]);
        }
    }
}

static void owners(text *t, const jobs_overview *o)
{
    family(t, "parle_owner_usage_device_seconds", "gauge",
           "The owner's device use as fair share counts it (device-seconds, decayed by its "
           "half-life).");
    char user[160];
    for (int i = 0; i < o->nowners; i++) {
        put(t, "parle_owner_usage_device_seconds{owner=\"%s\"}",
            esc(o->owners[i].user, user, sizeof user));
        value(t, o->owners[i].device_seconds);
    }
    family(t, "parle_owner_usage_share_ratio", "gauge",
           "The owner's part of everyone's decayed device use, 0 to 1.");
    for (int i = 0; i < o->nowners; i++) {
        put(t, "parle_owner_usage_share_ratio{owner=\"%s\"}",
            esc(o->owners[i].user, user, sizeof user));
        value(t, o->owners[i].share);
    }
    family(t, "parle_owner_jobs", "gauge", "The owner's jobs running and queued.");
    for (int i = 0; i < o->nowners; i++) {
        esc(o->owners[i].user, user, sizeof user);
        put(t, "parle_owner_jobs{owner=\"%s\",state=\"running\"} %d\n", user,
            o->owners[i].running);
        put(t, "parle_owner_jobs{owner=\"%s\",state=\"queued\"} %d\n", user, o->owners[i].queued);
    }
    family(t, "parle_owner_quota", "gauge",
           "The bounds on one owner (--max-jobs-per-user, --max-gpus-per-user, "
           "--max-cores-per-user; 0: none).");
    const struct {
        const char *what;
        int n;
    } quota[] = {{"jobs", o->jobs_per_user}, {"gpus", o->gpus_per_user},
                 {"cores", o->cores_per_user}};
    for (int i = 0; i < o->nowners; i++) {
        esc(o->owners[i].user, user, sizeof user);
        for (int q = 0; q < 3; q++)
            put(t, "parle_owner_quota{owner=\"%s\",resource=\"%s\"} %d\n", user, quota[q].what,
                quota[q].n);
    }
}

static void daemon_figures(text *t, const jobs_overview *o, const metrics_daemon *d)
{
    family(t, "parle_info", "gauge", "parled's version, as a label; always 1.");
    char v[80];
    put(t, "parle_info{version=\"%s\"} 1\n", esc(d->version ? d->version : "", v, sizeof v));
    /* One sample each, without labels; the state dir's only when known. */
    const struct {
        const char *name, *type, *help;
        double v;
        int shown;
    } rows[] = {
        {"parle_uptime_seconds", "gauge", "Seconds since parled started.", d->uptime_s, 1},
        {"parle_connections", "gauge", "Client connections open now.", d->connections, 1},
        {"parle_scheduling_passes_total", "counter", "Scheduling passes since parled started.",
         (double)o->schedule_passes, 1},
        {"parle_scheduling_seconds_total", "counter",
         "Seconds spent in scheduling passes since parled started.", o->schedule_seconds, 1},
        {"parle_checkpoints_written_total", "counter",
         "Checkpoints the jobs wrote since parled started.", (double)o->checkpoints_written, 1},
        {"parle_checkpoints_failed_total", "counter",
         "Checkpoint writes that failed (one per replica that could not write) since parled "
         "started.", (double)o->checkpoints_failed, 1},
        {"parle_state_dir_free_bytes", "gauge",
         "Free bytes of the state dir's file system, as an unprivileged user sees them.",
         (double)o->state_dir_free_bytes, o->have_space},
        {"parle_state_dir_size_bytes", "gauge", "Size of the state dir's file system.",
         (double)o->state_dir_total_bytes, o->have_space},
        {"parle_metrics_render_seconds", "gauge",
         "Seconds of parled's event loop the previous write of this file took.", d->render_s, 1},
        {"parle_metrics_render_cpu_seconds", "gauge",
         "CPU seconds the loop thread ran for the previous write of this file.", d->render_cpu_s,
         1},
        {"parle_metrics_writes_total", "counter", "Writes of this file.", (double)d->writes, 1},
        {"parle_metrics_write_failures_total", "counter", "Writes of this file that failed.",
         (double)d->write_failures, 1},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (!rows[i].shown)
            continue;
        family(t, rows[i].name, rows[i].type, rows[i].help);
        sample(t, rows[i].name, rows[i].v);
    }
}

char *metrics_render(const jobs_overview *o, const metrics_daemon *d, size_t *len)
{
    text t = {.cap = 16384};
    t.buf = malloc(t.cap);
    if (!t.buf)
        return NULL;
    family(&t, "parle_jobs", "gauge", "Jobs kept by parled, by state.");
    for (int s = 0; s < JOB_STATES; s++)
        put(&t, "parle_jobs{state=\"%s\"} %d\n", job_state_name((enum job_state)s), o->count[s]);
    family(&t, "parle_jobs_held", "gauge", "Queued jobs that are held.");
    sample(&t, "parle_jobs_held", o->held);
    family(&t, "parle_queue_length", "gauge", "Jobs waiting in the queue (held ones too).");
    sample(&t, "parle_queue_length", o->count[JOB_QUEUED]);
    family(&t, "parle_queue_oldest_wait_seconds", "gauge",
           "Seconds the longest-waiting queued job has waited since its submit (0: none).");
    sample(&t, "parle_queue_oldest_wait_seconds", o->oldest_wait_s);
    devices(&t, o);
    running_jobs(&t, o);
    owners(&t, o);
    daemon_figures(&t, o, d);
    if (t.oom) {
        free(t.buf);
        return NULL;
    }
    *len = t.len;
    return t.buf;
}
