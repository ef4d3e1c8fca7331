/* parled's metrics file (--metrics-file): the queue, its devices, jobs and
 * owners in Prometheus's text format, for node_exporter's textfile collector
 * (docs/monitoring.md). The loop takes the queue's overview and renders the
 * text (metrics_text.c); a libuv worker writes it atomically (a temporary in
 * the same folder, fsync, rename, mode 0644), so the loop never waits on the
 * disk. Written every interval and at each job event (at most every
 * METRICS_EVENT_GAP_MS), one write at a time: events during a write make
 * one more write after it. */
#ifndef PARLE_METRICS_H
#define PARLE_METRICS_H

#include <stddef.h>
#include <uv.h>

#include "jobs.h"
#include "jobs_overview.h"

#define METRICS_INTERVAL_MIN_S 0.5
#define METRICS_INTERVAL_MAX_S 3600.0
#define METRICS_PATH_MAX 900
#define METRICS_EVENT_GAP_MS 250  /* job events write at most this often */

/* What the daemon adds to the queue's overview. */
typedef struct metrics_daemon {
    const char *version;
    double uptime_s;          /* monotonic */
    int connections;          /* open now */
    double render_s;          /* the loop's time for the previous write (overview + text) */
    double render_cpu_s;      /* ... of which the loop thread ran (the rest: it was preempted) */
    unsigned long writes, write_failures;
} metrics_daemon;

typedef struct metrics metrics;
typedef void (*metrics_daemon_fn)(void *user, metrics_daemon *out);

/* Check `path` (absolute, ending ".prom", in an existing folder) and write
 * it every interval_s from now on. 0, or -1 with a message naming the flag
 * and what is wrong. */
int metrics_open(metrics **out, uv_loop_t *loop, jobs *js, const char *path, double interval_s,
                 metrics_daemon_fn daemon_fn, void *user, char *err, size_t errlen);
/* A job event (state, progress, evaluation, end): the file is written now,
 * or once the write under way is done, or METRICS_EVENT_GAP_MS after the
 * last write began. */
void metrics_job_event(metrics *m);
/* Stop writing and remove the file (the daemon's figures go with it); m is
 * freed once its timer is closed and the write under way, if any, is done. */
void metrics_close(metrics *m);

/* The text of one file, malloc'd with *len its length, or NULL (out of
 * memory). A pure function of its arguments (metrics_text.c). */
char *metrics_render(const jobs_overview *o, const metrics_daemon *d, size_t *len);

#endif
