#include "jobs.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

#include "dataset.h"
#include "fsutil.h"
#include "jobconfig.h"
#include "protocol.h"
#include "runner.h"

/* Devices as a bit set: bit i = GPU i, the top bit = the daemon's CPU cores
 * (one resource: CPU jobs run one after another). */
#define DEV_CPU (1ull << 63)
#define DEV_MAX_GPUS 63
/* Progress events beyond this many undrained ones are dropped (never evals,
 * logs or ends), so a stalled loop cannot grow memory without bound. */
#define QUEUE_MAX_PROGRESS 4096
#define STATUS_WRITE_INTERVAL_S 5.0
#define JOB_ERR_MAX 4096

struct job {
    jobs *js;
    job *next;              /* submission order */
    char id[PROTO_ID_MAX];
    char dir[1100];
    job_config cfg;
    uint64_t devices;
    enum job_state state;
    char error[JOB_ERR_MAX];
    double submitted_at, started_at, ended_at; /* unix seconds; 0 = not yet */
    run_event last;         /* the latest progress or eval values */
    double test_error, test_loss; /* NAN until the first evaluation */
    volatile int stop;      /* read by the replicas at step boundaries */
    int cancel_requested;
    int thread_running;
    pthread_t thread;
    FILE *log, *metrics;
    double status_written_at;
};

/* One hand-over from a job's threads to the loop. */
typedef struct pending {
    struct pending *next;
    job *j;
    int ended;              /* the job thread is done: rc, result, err */
    int rc;
    run_result result;
    run_event ev;
    char *err;
} pending;

struct jobs {
    uv_loop_t *loop;
    uv_async_t async;
    jobs_listener listener;
    char jobs_dir[1040];
    int *cores, ncores;
    uint64_t devices, busy;
    char devices_text[64];
    job *first, *last;
    int next_id;
    int running, stopping;
    pthread_mutex_t mu;     /* guards the pending queue */
    pending *q_first, *q_last;
    int q_progress;
};

static double now_s(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

const char *job_state_name(enum job_state s)
{
    static const char *const names[] = {"queued", "running", "done", "failed", "cancelled"};
    return names[s];
}

int job_state_final(enum job_state s) { return s == JOB_DONE || s == JOB_FAILED || s == JOB_CANCELLED; }
const char *job_id(const job *j) { return j->id; }
enum job_state job_state_of(const job *j) { return j->state; }

/* "cpu", "auto" (= all of `allowed`) or GPU ids "0,1". */
static int parse_devices(const char *s, uint64_t allowed, uint64_t *out, char *err, size_t errlen)
{
    if (strcmp(s, "cpu") == 0) {
        *out = DEV_CPU;
    } else if (strcmp(s, "auto") == 0) {
        *out = allowed;
    } else {
        *out = 0;
        const char *p = s;
        while (*p) {
            char *end;
            errno = 0;
            long id = strtol(p, &end, 10);
            if (end == p || errno || id < 0 || id >= DEV_MAX_GPUS || (*end && *end != ',')) {
                snprintf(err, errlen, "\"%s\" is not cpu, auto or a list of GPU ids like 0,1", s);
                return -1;
            }
            *out |= 1ull << id;
            p = *end ? end + 1 : end;
        }
        if (!*out) {
            snprintf(err, errlen, "\"%s\" names no device", s);
            return -1;
        }
    }
    if (*out & ~allowed) {
        snprintf(err, errlen, "\"%s\" is not within the daemon's --devices", s);
        return -1;
    }
    return 0;
}

static void devices_text(uint64_t mask, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    if (mask & DEV_CPU)
        n += (size_t)snprintf(buf, len, "cpu");
    for (int i = 0; i < DEV_MAX_GPUS && n < len; i++)
        if (mask & (1ull << i))
            n += (size_t)snprintf(buf + n, len - n, "%s%d", n ? "," : "", i);
}

static void emit_line(jobs *js, job *j, cJSON *ev)
{
    char *line = proto_line(ev);
    if (line && js->listener.on_event)
        js->listener.on_event(js->listener.user, j, line);
    free(line);
}

static cJSON *event_json(job *j, const char *kind)
{
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "event", kind);
    cJSON_AddStringToObject(ev, "id", j->id);
    cJSON_AddNumberToObject(ev, "time", now_s());
    return ev;
}

static void job_log(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void job_log(job *j, const char *fmt, ...)
{
    char text[JOB_ERR_MAX + 256], stamp[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    time_t t = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
    if (j->log) {
        fprintf(j->log, "%s %s\n", stamp, text);
        fflush(j->log);
    }
    if (j->js->listener.on_log) {
        char line[sizeof(text) + sizeof(stamp) + 2];
        snprintf(line, sizeof(line), "%s %s", stamp, text);
        j->js->listener.on_log(j->js->listener.user, j, line);
    }
}

static void add_num_or_null(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

cJSON *job_status_json(const job *j)
{
    cJSON *o = cJSON_CreateObject();
    int started = j->started_at > 0, ended = job_state_final(j->state);
    char dev[256];
    devices_text(j->devices, dev, sizeof(dev));
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "name", j->cfg.name[0] ? j->cfg.name : j->id);
    cJSON_AddStringToObject(o, "state", job_state_name(j->state));
    if (j->error[0])
        cJSON_AddStringToObject(o, "error", j->error);
    else
        cJSON_AddNullToObject(o, "error");
    cJSON_AddStringToObject(o, "algorithm", j->cfg.algorithm.name);
    cJSON_AddNumberToObject(o, "replicas", j->cfg.algorithm.replicas);
    cJSON_AddStringToObject(o, "model", j->cfg.model.arch);
    cJSON_AddStringToObject(o, "dataset", j->cfg.data.dataset);
    cJSON_AddStringToObject(o, "devices", dev);
    cJSON_AddNumberToObject(o, "epoch", j->last.epoch);
    cJSON_AddNumberToObject(o, "epochs", j->cfg.epochs);
    cJSON_AddNumberToObject(o, "step", (double)j->last.step);
    cJSON_AddNumberToObject(o, "data_passes", j->last.data_passes);
    cJSON_AddNumberToObject(o, "images_per_sec", j->state == JOB_RUNNING ? j->last.images_per_sec : 0);
    add_num_or_null(o, "test_error", j->test_error);
    add_num_or_null(o, "test_loss", j->test_loss);
    add_num_or_null(o, "train_loss", j->last.step > 0 ? j->last.train_loss : NAN);
    add_num_or_null(o, "lr", j->last.step > 0 ? j->last.lr : NAN);
    double elapsed = !started ? 0 : (ended ? j->ended_at : now_s()) - j->started_at;
    cJSON_AddNumberToObject(o, "elapsed_s", elapsed);
    add_num_or_null(o, "eta_s", j->state == JOB_DONE ? 0 : j->state == JOB_RUNNING && j->last.step > 0 ? j->last.eta_s : NAN);
    cJSON_AddNumberToObject(o, "submitted_at", j->submitted_at);
    add_num_or_null(o, "started_at", started ? j->started_at : NAN);
    add_num_or_null(o, "ended_at", ended ? j->ended_at : NAN);
    return o;
}

static void write_status(job *j)
{
    char path[1200], err[512];
    cJSON *st = job_status_json(j);
    char *text = cJSON_Print(st);
    cJSON_Delete(st);
    snprintf(path, sizeof(path), "%s/status.json", j->dir);
    if (!text || atomic_write_file(path, text, strlen(text), err, sizeof(err)) != 0)
        job_log(j, "could not write status.json: %s", text ? err : "out of memory");
    free(text);
    j->status_written_at = now_s();
}

/* A state change: persist it, log it, tell the watchers. */
static void set_state(job *j, enum job_state s)
{
    j->state = s;
    if (job_state_final(s))
        j->ended_at = now_s();
    write_status(j);
    cJSON *ev = event_json(j, "state");
    cJSON_AddStringToObject(ev, "state", job_state_name(s));
    if (j->error[0])
        cJSON_AddStringToObject(ev, "error", j->error);
    emit_line(j->js, j, ev);
}

/* ---- hand-over from the job's threads ---- */

static void enqueue(jobs *js, pending *p)
{
    pthread_mutex_lock(&js->mu);
    int drop = !p->ended && p->ev.kind == RUN_EV_PROGRESS && js->q_progress >= QUEUE_MAX_PROGRESS;
    if (!drop) {
        if (!p->ended && p->ev.kind == RUN_EV_PROGRESS)
            js->q_progress++;
        if (js->q_last)
            js->q_last->next = p;
        else
            js->q_first = p;
        js->q_last = p;
    }
    pthread_mutex_unlock(&js->mu);
    if (drop)
        free(p);
    else
        uv_async_send(&js->async);
}

static void on_run_event(void *user, const run_event *ev)
{
    job *j = user;
    pending *p = calloc(1, sizeof(*p));
    if (!p)
        return; /* a lost progress line is better than a stopped job */
    p->j = j;
    p->ev = *ev;
    enqueue(j->js, p);
}

static void post_log(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void post_log(job *j, const char *fmt, ...)
{
    run_event ev = {.kind = RUN_EV_LOG};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev.message, sizeof(ev.message), fmt, ap);
    va_end(ap);
    on_run_event(j, &ev);
}

/* The job thread: load the data once, run the job, report the end. */
static void *job_thread(void *arg)
{
    job *j = arg;
    jobs *js = j->js;
    char err[JOB_ERR_MAX] = "";
    dataset train = {0}, test = {0};
    run_result result = {0};
    run_hooks hooks = {.on_event = on_run_event, .user = j, .stop = &j->stop};
    int rc = run_load_data(&j->cfg, &train, &test, err, sizeof(err));
    if (rc == 0) {
        post_log(j, "data: %d training and %d test examples of %dx%dx%d", train.n, test.n, train.c,
                 train.h, train.w);
        rc = run_job(&j->cfg, &train, &test, js->cores, js->ncores, &hooks, &result, err,
                     sizeof(err));
    }
    dataset_free(&train);
    dataset_free(&test);
    pending *p = calloc(1, sizeof(*p));
    if (!p) /* cannot report the end: nothing safe is left to do */
        abort();
    p->j = j;
    p->ended = 1;
    p->rc = rc;
    p->result = result;
    p->err = rc != 0 ? strdup(err[0] ? err : "the job failed without a message") : NULL;
    enqueue(js, p);
    return NULL;
}

static void schedule(jobs *js);

static void start_job(jobs *js, job *j)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s/metrics.jsonl", j->dir);
    j->metrics = fopen(path, "a");
    j->started_at = now_s();
    js->busy |= j->devices;
    j->thread_running = 1;
    js->running++;
    int rc = pthread_create(&j->thread, NULL, job_thread, j);
    if (rc != 0) {
        js->busy &= ~j->devices;
        j->thread_running = 0;
        js->running--;
        snprintf(j->error, sizeof(j->error), "could not start the job thread: %s", strerror(rc));
        job_log(j, "failed: %s", j->error);
        set_state(j, JOB_FAILED);
        if (js->listener.on_end)
            js->listener.on_end(js->listener.user, j);
        return;
    }
    char dev[256];
    devices_text(j->devices, dev, sizeof(dev));
    job_log(j, "started on %s (%d cores)", dev, js->ncores);
    set_state(j, JOB_RUNNING);
}

/* FIFO: a job starts when its devices are free and no earlier waiting job
 * wants any of them, so a big job is never starved by later small ones. */
static void schedule(jobs *js)
{
    uint64_t wanted = 0;
    for (job *j = js->first; j && !js->stopping; j = j->next) {
        if (j->state != JOB_QUEUED)
            continue;
        if (!((js->busy | wanted) & j->devices))
            start_job(js, j);
        else
            wanted |= j->devices;
    }
}

static void write_metrics(job *j, cJSON *ev)
{
    if (!j->metrics)
        return;
    char *text = cJSON_PrintUnformatted(ev);
    if (text) {
        fprintf(j->metrics, "%s\n", text);
        fflush(j->metrics);
        free(text);
    }
}

static void apply_event(jobs *js, job *j, const run_event *ev)
{
    if (ev->kind == RUN_EV_LOG) {
        job_log(j, "%s", ev->message);
        cJSON *e = event_json(j, "log");
        cJSON_AddStringToObject(e, "message", ev->message);
        emit_line(js, j, e);
        return;
    }
    run_event merged = *ev;
    if (ev->kind == RUN_EV_EVAL && ev->step == 0) {
        /* An evaluation without step counters keeps the last progress's. */
        merged.step = j->last.step;
        merged.data_passes = j->last.data_passes;
        merged.images_per_sec = j->last.images_per_sec;
        merged.lr = j->last.lr;
        merged.gamma = j->last.gamma;
        merged.rho = j->last.rho;
        merged.eta_s = j->last.eta_s;
        merged.compute_s = j->last.compute_s;
    }
    if (ev->kind == RUN_EV_EVAL) {
        j->test_error = ev->test_error;
        j->test_loss = ev->test_loss;
    }
    j->last = merged;
    ev = &merged;
    cJSON *e = event_json(j, ev->kind == RUN_EV_EVAL ? "eval" : "progress");
    cJSON_AddNumberToObject(e, "epoch", ev->epoch);
    cJSON_AddNumberToObject(e, "epochs", ev->epochs);
    cJSON_AddNumberToObject(e, "step", (double)ev->step);
    add_num_or_null(e, "data_passes", ev->data_passes);
    add_num_or_null(e, "train_loss", ev->train_loss);
    add_num_or_null(e, "images_per_sec", ev->images_per_sec);
    add_num_or_null(e, "lr", ev->lr);
    add_num_or_null(e, "gamma", ev->gamma);
    add_num_or_null(e, "rho", ev->rho);
    add_num_or_null(e, "elapsed_s", ev->elapsed_s);
    add_num_or_null(e, "eta_s", ev->eta_s);
    add_num_or_null(e, "compute_s", ev->compute_s);
    add_num_or_null(e, "sync_s", ev->sync_s);
    if (ev->kind == RUN_EV_EVAL) {
        add_num_or_null(e, "test_error", ev->test_error);
        add_num_or_null(e, "test_loss", ev->test_loss);
        add_num_or_null(e, "train_error", ev->train_error);
        add_num_or_null(e, "dist_to_master", ev->dist_to_master);
        job_log(j, "epoch %d/%d: test error %.2f%%, test loss %.4f, train loss %.4f", ev->epoch,
                ev->epochs, 100 * ev->test_error, ev->test_loss, ev->train_loss);
    }
    write_metrics(j, e);
    emit_line(js, j, e);
    if (ev->kind == RUN_EV_EVAL || now_s() - j->status_written_at >= STATUS_WRITE_INTERVAL_S)
        write_status(j);
}

static void finish_job(jobs *js, job *j, const pending *p)
{
    pthread_join(j->thread, NULL);
    j->thread_running = 0;
    js->running--;
    js->busy &= ~j->devices;
    if (j->metrics)
        fclose(j->metrics);
    j->metrics = NULL;
    if (p->rc != 0) {
        snprintf(j->error, sizeof(j->error), "%s", p->err ? p->err : "out of memory");
        job_log(j, "failed: %s", j->error);
        set_state(j, JOB_FAILED);
    } else if (p->result.stopped && j->cancel_requested) {
        job_log(j, "cancelled at epoch %d, step %ld", j->last.epoch, j->last.step);
        set_state(j, JOB_CANCELLED);
    } else if (p->result.stopped) {
        /* Stopped by a daemon shutdown: status.json keeps "running" so a
         * later start can tell it was interrupted. */
        job_log(j, "stopped by the daemon's shutdown at epoch %d, step %ld", j->last.epoch,
                j->last.step);
        write_status(j);
    } else {
        j->test_error = p->result.test_error;
        j->test_loss = p->result.test_loss;
        job_log(j, "done: %d epochs, test error %.2f%%", p->result.epochs_done,
                100 * p->result.test_error);
        set_state(j, JOB_DONE);
    }
    if (job_state_final(j->state) && j->log) {
        fclose(j->log);
        j->log = NULL;
    }
    if (js->listener.on_end)
        js->listener.on_end(js->listener.user, j);
}

static void on_async(uv_async_t *h)
{
    jobs *js = h->data;
    pthread_mutex_lock(&js->mu);
    pending *p = js->q_first;
    js->q_first = js->q_last = NULL;
    js->q_progress = 0;
    pthread_mutex_unlock(&js->mu);
    int ended = 0;
    while (p) {
        pending *next = p->next;
        if (p->ended) {
            finish_job(js, p->j, p);
            ended = 1;
        } else {
            apply_event(js, p->j, &p->ev);
        }
        free(p->err);
        free(p);
        p = next;
    }
    if (ended)
        schedule(js);
}

/* ---- the queue's API ---- */

/* The highest id in use under jobs/, so ids stay unique across restarts. */
static int scan_max_id(const char *dir, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return -1;
    }
    int max = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        if (e->d_name[0] != 'j')
            continue;
        long n = strtol(e->d_name + 1, &end, 10);
        if (*end == '\0' && end != e->d_name + 1 && n > max && n < 100000000)
            max = (int)n;
    }
    closedir(d);
    return max;
}

int jobs_open(jobs **out, uv_loop_t *loop, const char *state_dir, const char *devices,
              const jobs_listener *listener, char *err, size_t errlen)
{
    jobs *js = calloc(1, sizeof(*js));
    if (!js) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    js->loop = loop;
    js->listener = *listener;
    snprintf(js->jobs_dir, sizeof(js->jobs_dir), "%s/jobs", state_dir);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) == 0) {
        snprintf(err, errlen, "sched_getaffinity: %s", strerror(errno));
        goto fail;
    }
    js->cores = calloc((size_t)CPU_COUNT(&set), sizeof(int));
    if (!js->cores) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            js->cores[js->ncores++] = c;
    /* "auto" for the daemon is its CPU cores until the backend can count GPUs. */
    char why[256];
    if (parse_devices(devices, ~0ull, &js->devices, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "--devices: %s", why);
        goto fail;
    }
    if (strcmp(devices, "auto") == 0)
        js->devices = DEV_CPU;
    devices_text(js->devices, js->devices_text, sizeof(js->devices_text));
    if (mkdir_p(js->jobs_dir, err, errlen) != 0)
        goto fail;
    /* Durable restart (a later issue) reloads jobs/<id>/ here and resumes
     * the interrupted ones from their checkpoints; for now ids only move on. */
    int max = scan_max_id(js->jobs_dir, err, errlen);
    if (max < 0)
        goto fail;
    js->next_id = max + 1;
    pthread_mutex_init(&js->mu, NULL);
    if (uv_async_init(loop, &js->async, on_async) != 0) {
        pthread_mutex_destroy(&js->mu);
        snprintf(err, errlen, "uv_async_init failed");
        goto fail;
    }
    js->async.data = js;
    *out = js;
    return 0;
fail:
    free(js->cores);
    free(js);
    return -1;
}

job *jobs_submit(jobs *js, const cJSON *job_json, const char **code, char *err, size_t errlen)
{
    if (js->stopping) {
        *code = ERR_SHUTTING_DOWN;
        snprintf(err, errlen, "parled is shutting down");
        return NULL;
    }
    *code = ERR_INTERNAL;
    job *j = calloc(1, sizeof(*j));
    char *text = cJSON_PrintUnformatted(job_json);
    char *pretty = cJSON_Print(job_json);
    if (!j || !text || !pretty) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (job_config_parse(text, strlen(text), &j->cfg, err, errlen) != 0) {
        *code = ERR_INVALID_JOB;
        goto fail;
    }
    char why[256];
    if (parse_devices(j->cfg.devices, js->devices, &j->devices, why, sizeof(why)) != 0) {
        *code = ERR_INVALID_JOB;
        snprintf(err, errlen, "devices: %s (%s)", why, js->devices_text);
        goto fail;
    }
    j->js = js;
    j->test_error = j->test_loss = NAN;
    snprintf(j->id, sizeof(j->id), "j%04d", js->next_id++);
    snprintf(j->dir, sizeof(j->dir), "%s/%s", js->jobs_dir, j->id);
    char path[1200];
    snprintf(path, sizeof(path), "%s/job.json", j->dir);
    if (mkdir_p(j->dir, err, errlen) != 0 ||
        atomic_write_file(path, pretty, strlen(pretty), err, errlen) != 0)
        goto fail;
    snprintf(path, sizeof(path), "%s/log.txt", j->dir);
    j->log = fopen(path, "a");
    if (!j->log) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        goto fail;
    }
    free(text);
    free(pretty);
    j->submitted_at = now_s();
    if (js->last)
        js->last->next = j;
    else
        js->first = j;
    js->last = j;
    job_log(j, "submitted: %s, %s x%d, %s, %d epochs", j->cfg.model.arch, j->cfg.algorithm.name,
            j->cfg.algorithm.replicas, j->cfg.data.dataset, j->cfg.epochs);
    set_state(j, JOB_QUEUED);
    schedule(js);
    return j;
fail:
    free(text);
    free(pretty);
    free(j);
    return NULL;
}

job *jobs_find(jobs *js, const char *id)
{
    for (job *j = js->first; j; j = j->next)
        if (strcmp(j->id, id) == 0)
            return j;
    return NULL;
}

cJSON *jobs_list_json(const jobs *js)
{
    cJSON *a = cJSON_CreateArray();
    for (job *j = js->first; j; j = j->next)
        cJSON_AddItemToArray(a, job_status_json(j));
    return a;
}

static const job *job_on(const jobs *js, uint64_t dev)
{
    for (job *j = js->first; j; j = j->next)
        if (j->thread_running && (j->devices & dev))
            return j;
    return NULL;
}

cJSON *jobs_devices_json(const jobs *js)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 63; i >= 0; i--) {
        uint64_t bit = 1ull << i;
        if (!(js->devices & bit))
            continue;
        cJSON *d = cJSON_CreateObject();
        if (bit == DEV_CPU) {
            cJSON_AddStringToObject(d, "kind", "cpu");
            cJSON_AddItemToObject(d, "cores", cJSON_CreateIntArray(js->cores, js->ncores));
        } else {
            cJSON_AddStringToObject(d, "kind", "gpu");
            cJSON_AddNumberToObject(d, "index", i);
        }
        const job *j = job_on(js, bit);
        if (j)
            cJSON_AddStringToObject(d, "job", j->id);
        else
            cJSON_AddNullToObject(d, "job");
        cJSON_AddItemToArray(a, d);
    }
    return a;
}

cJSON *jobs_summary_json(const jobs *js)
{
    int count[JOB_CANCELLED + 1] = {0};
    for (job *j = js->first; j; j = j->next)
        count[j->state]++;
    cJSON *o = cJSON_CreateObject();
    for (int s = 0; s <= JOB_CANCELLED; s++)
        cJSON_AddNumberToObject(o, job_state_name((enum job_state)s), count[s]);
    cJSON_AddStringToObject(o, "devices", js->devices_text);
    return o;
}

int job_cancel(jobs *js, job *j, char *err, size_t errlen)
{
    if (job_state_final(j->state) || j->cancel_requested) {
        snprintf(err, errlen, "job %s has already %s", j->id,
                 j->cancel_requested ? "been asked to stop" : "ended");
        return -1;
    }
    if (j->state == JOB_QUEUED) {
        job_log(j, "cancelled while queued");
        set_state(j, JOB_CANCELLED);
        fclose(j->log);
        j->log = NULL;
        if (js->listener.on_end)
            js->listener.on_end(js->listener.user, j);
        schedule(js);
        return 0;
    }
    j->cancel_requested = 1;
    j->stop = 1;
    job_log(j, "cancel requested: stopping at the next step boundary");
    return 0;
}

char *job_read_log(const job *j, size_t max, char *err, size_t errlen)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s/log.txt", j->dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    size_t size = fstat(fileno(f), &st) == 0 ? (size_t)st.st_size : 0;
    size_t skip = size > max ? size - max : 0;
    char *text = malloc(size - skip + 1);
    if (!text || fseek(f, (long)skip, SEEK_SET) != 0) {
        snprintf(err, errlen, "%s: cannot read", path);
        free(text);
        fclose(f);
        return NULL;
    }
    size_t n = fread(text, 1, size - skip, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

int jobs_stop_all(jobs *js)
{
    js->stopping = 1;
    for (job *j = js->first; j; j = j->next)
        if (j->thread_running)
            j->stop = 1;
    return js->running;
}

int jobs_running(const jobs *js) { return js->running; }

static void on_async_closed(uv_handle_t *h)
{
    jobs *js = h->data;
    job *j = js->first;
    while (j) {
        job *next = j->next;
        if (j->log)
            fclose(j->log);
        free(j);
        j = next;
    }
    pthread_mutex_destroy(&js->mu);
    free(js->cores);
    free(js);
}

void jobs_close(jobs *js) { uv_close((uv_handle_t *)&js->async, on_async_closed); }
