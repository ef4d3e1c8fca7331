/* The metrics file's life (metrics.h): checked at start, written by a
 * libuv worker every interval and after job events, one write at a time,
 * removed at the stop. The loop's part of a write (the overview and the
 * text) is timed on the monotonic clock and shown in the next file
 * (parle_metrics_render_seconds). */
#include "metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsutil.h"
#include "log.h"

struct metrics {
    uv_loop_t *loop;
    jobs *js;
    char path[METRICS_PATH_MAX + 1];
    uv_timer_t timer;
    uv_work_t work;
    metrics_daemon_fn daemon_fn;
    void *user;
    char *text;               /* the file being written by the worker */
    size_t len;
    int in_flight, again, closing, timer_closed;
    int ok;                   /* the worker's result */
    int err_no;               /* its errno on a failure */
    char err[1200];           /* its message */
    int failing;              /* the last write failed, with last_errno */
    int last_errno;
    double render_s, render_cpu_s;
    uint64_t interval_ms;
    uint64_t last_began;      /* uv_hrtime() of the last write (ns), 0: none yet */
    unsigned long writes, write_failures;
};

static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int check_path(const char *path, char *err, size_t errlen)
{
    size_t n = strlen(path);
    const char *slash = strrchr(path, '/');
    if (n == 0 || n > METRICS_PATH_MAX || path[0] != '/') {
        snprintf(err, errlen, "--metrics-file: must be an absolute path of at most %d bytes",
                 METRICS_PATH_MAX);
        return -1;
    }
    if (n < 6 || strcmp(path + n - 5, ".prom") != 0 || slash[1] == '.') {
        snprintf(err, errlen, "--metrics-file %s: the name must end in \".prom\" and not start "
                 "with '.' (node_exporter's textfile collector reads only such files)", path);
        return -1;
    }
    /* A folder not there yet (node_exporter not installed yet) is not
     * fatal: the file is written once it is there. */
    char dir[METRICS_PATH_MAX + 1];
    snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    struct stat st;
    if (stat(dir, &st) != 0)
        server_log(LOG_WARN, "metrics: the folder %s: %s: %s is written once it can be", dir,
                   strerror(errno), path);
    else if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "--metrics-file %s: %s is not a folder", path, dir);
        return -1;
    }
    return 0;
}

static void free_if_done(metrics *m)
{
    if (m->closing && m->timer_closed && !m->in_flight)
        free(m);
}

/* On a worker thread: the text to a temporary beside the file, mode 0644,
 * fsync'd and renamed over it. */
static void write_work(uv_work_t *w)
{
    metrics *m = w->data;
    atomic_file af;
    errno = 0;
    m->ok = atomic_open(&af, m->path, m->err, sizeof m->err) == 0;
    if (!m->ok) {
        m->err_no = errno;
        return;
    }
    if (fchmod(fileno(af.f), 0644) != 0 || fwrite(m->text, 1, m->len, af.f) != m->len) {
        m->err_no = errno;
        snprintf(m->err, sizeof m->err, "cannot write %s: %s", m->path, strerror(errno));
        atomic_abort(&af);
        m->ok = 0;
        return;
    }
    m->ok = atomic_commit(&af, m->err, sizeof m->err) == 0;
    m->err_no = m->ok ? 0 : errno;
}

static void write_now(metrics *m);

static void write_done(uv_work_t *w, int status)
{
    metrics *m = w->data;
    free(m->text);
    m->text = NULL;
    m->in_flight = 0;
    if (status == 0 && m->ok) {
        m->writes++;
        if (m->failing)
            server_log(LOG_INFO, "metrics: %s written again", m->path);
        m->failing = 0;
    } else {
        m->write_failures++;
        if (!m->failing || m->last_errno != m->err_no) /* each new reason once */
            server_log(LOG_WARN, "metrics: %s", m->err);
        m->failing = 1;
        m->last_errno = m->err_no;
    }
    if (m->closing) {
        unlink(m->path);
        free_if_done(m);
        return;
    }
    if (m->again) {
        m->again = 0;
        write_now(m);
    }
}

/* The overview and its text on the loop, the file by a worker. */
static void write_now(metrics *m)
{
    if (m->in_flight) {
        m->again = 1;
        return;
    }
    const uint64_t began = uv_hrtime();
    const double cpu_began = thread_cpu_s();
    m->last_began = began;
    metrics_daemon d = {0};
    if (m->daemon_fn)
        m->daemon_fn(m->user, &d);
    d.render_s = m->render_s;
    d.render_cpu_s = m->render_cpu_s;
    d.writes = m->writes;
    d.write_failures = m->write_failures;
    jobs_overview o;
    if (jobs_overview_take(m->js, NULL, 0, &o) != 0) {
        server_log(LOG_WARN, "metrics: out of memory");
        return;
    }
    m->text = metrics_render(&o, &d, &m->len);
    jobs_overview_free(&o);
    m->render_s = (double)(uv_hrtime() - began) * 1e-9;
    m->render_cpu_s = thread_cpu_s() - cpu_began;
    if (!m->text) {
        server_log(LOG_WARN, "metrics: out of memory");
        return;
    }
    m->work.data = m;
    if (uv_queue_work(m->loop, &m->work, write_work, write_done) != 0) {
        free(m->text);
        m->text = NULL;
        return;
    }
    m->in_flight = 1;
}

static void on_timer(uv_timer_t *t) { write_now(t->data); }

int metrics_open(metrics **out, uv_loop_t *loop, jobs *js, const char *path, double interval_s,
                 metrics_daemon_fn daemon_fn, void *user, char *err, size_t errlen)
{
    if (!(interval_s >= METRICS_INTERVAL_MIN_S && interval_s <= METRICS_INTERVAL_MAX_S)) {
        snprintf(err, errlen, "--metrics-interval: must be %g to %g seconds",
                 METRICS_INTERVAL_MIN_S, METRICS_INTERVAL_MAX_S);
        return -1;
    }
    if (check_path(path, err, errlen) != 0)
        return -1;
    metrics *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    m->loop = loop;
    m->js = js;
    snprintf(m->path, sizeof m->path, "%s", path);
    m->daemon_fn = daemon_fn;
    m->user = user;
    uv_timer_init(loop, &m->timer);
    m->timer.data = m;
    const uint64_t ms = (uint64_t)(interval_s * 1000);
    m->interval_ms = ms;
    uv_timer_start(&m->timer, on_timer, 0, ms);
    *out = m;
    return 0;
}

void metrics_job_event(metrics *m)
{
    if (!m || m->closing)
        return;
    /* Progress events of many jobs come often: a write at most every
     * METRICS_EVENT_GAP_MS, the timer brought forward for the next. */
    const uint64_t since_ms = (uv_hrtime() - m->last_began) / 1000000u;
    if (m->in_flight || since_ms >= METRICS_EVENT_GAP_MS)
        write_now(m);
    else
        uv_timer_start(&m->timer, on_timer, METRICS_EVENT_GAP_MS - since_ms, m->interval_ms);
}

static void on_timer_closed(uv_handle_t *h)
{
    metrics *m = h->data;
    m->timer_closed = 1;
    free_if_done(m);
}

void metrics_close(metrics *m)
{
    if (!m || m->closing)
        return;
    m->closing = 1;
    uv_close((uv_handle_t *)&m->timer, on_timer_closed);
    if (!m->in_flight)
        unlink(m->path);
}
