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
#include <unistd.h>

#include "dataset.h"
#include "fsutil.h"
#include "jobconfig.h"
#include "mpi_node.h"
#include "protocol.h"
#include "runner.h"
#include "safetensors.h"
#include "server.h"
#include "topology.h"

/* Devices as a bit set: bit i = GPU i, the top bit = the daemon's CPU cores
 * (one resource: CPU jobs run one after another). */
#define DEV_CPU (1ull << 63)
#define DEV_MAX_GPUS 63
/* Progress events beyond this many undrained ones are dropped (never evals,
 * logs or ends), so a stalled loop cannot grow memory without bound. */
#define QUEUE_MAX_PROGRESS 4096
#define STATUS_WRITE_INTERVAL_S 5.0
#define JOB_ERR_MAX 4096
#define JOB_FILE_MAX (1u << 20)        /* job.json, status.json */
#define METRICS_FILE_MAX (1u << 30)
#define SAFETENSORS_HEADER_MAX (16u << 20)

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
    double elapsed_base;    /* training seconds before the current run (a resume) */
    double run_started_at;  /* when the current run began; 0 when not running */
    run_event last;         /* the latest progress or eval values */
    double test_error, test_loss; /* NAN until the first evaluation */
    char memory[512];       /* peak bytes per device, a JSON object's text or "" */
    volatile int stop;      /* RUN_STOP or RUN_STOP_CHECKPOINT, read by the replicas */
    int cancel_requested;
    int interrupted;        /* it was running when parled stopped: it goes first */
    int run_pending;        /* an interrupted run has not yet said where it starts */
    int thread_running;
    pthread_t thread;
    FILE *log, *metrics;
    double status_written_at;
    /* Written and read only on the replica thread that evaluates the master:
     * the last evaluation, for the exported file's metadata. */
    double master_test_error, master_test_loss;
    long flush_asked, flush_done; /* guarded by js->mu */
};

/* One hand-over from a job's threads to the loop. */
typedef struct pending {
    struct pending *next;
    job *j;
    int ended;              /* the job thread is done: rc, result, err */
    int rc;
    run_result result;
    long flush;             /* > 0: a replica waits until everything before is written */
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
    pthread_mutex_t mu;     /* guards the pending queue and the flush counters */
    pthread_cond_t flushed;
    pending *q_first, *q_last;
    int q_progress;
};

static double now_s(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

static const char *const state_names[] = {"queued", "running", "done", "failed", "cancelled"};

const char *job_state_name(enum job_state s) { return state_names[s]; }

int job_state_final(enum job_state s) { return s == JOB_DONE || s == JOB_FAILED || s == JOB_CANCELLED; }
const char *job_id(const job *j) { return j->id; }
enum job_state job_state_of(const job *j) { return j->state; }

/* A job's devices within the daemon's `allowed` ones (jobconfig.h's forms):
 * "auto" is the daemon's GPUs when it has any, else its CPU. */
static int parse_devices(const char *s, uint64_t allowed, uint64_t *out, char *err, size_t errlen)
{
    enum job_devices kind;
    uint64_t ids;
    if (job_devices_parse(s, &kind, &ids) != 0) {
        snprintf(err, errlen, "\"%s\" is not cpu, auto, gpu or a list of GPU ids like 0,1", s);
        return -1;
    }
    uint64_t gpus = allowed & ~DEV_CPU;
    switch (kind) {
    case DEVICES_CPU: *out = DEV_CPU; break;
    case DEVICES_AUTO: *out = gpus ? gpus : DEV_CPU; break;
    case DEVICES_GPU: *out = gpus; break;
    case DEVICES_IDS: *out = ids; break;
    }
    if (!*out) {
        snprintf(err, errlen, "\"%s\": the daemon has no GPU", s);
        return -1;
    }
    if (*out & ~allowed) {
        snprintf(err, errlen, "\"%s\" is not within the daemon's --devices", s);
        return -1;
    }
    return 0;
}

/* Ranks other than rank0 exist only under --mpi: without it such a job would
 * quietly run on this one process's CPU. (Under --mpi the job's start checks
 * them against the ranks there are.) */
static int check_ranks(const char *s, char *err, size_t errlen)
{
    uint64_t ranks;
    char why[8];
    if (mpi_node_size() > 1 || job_devices_ranks(s, &ranks, why, sizeof why) != 1 ||
        !(ranks & ~1ull))
        return 0;
    snprintf(err, errlen, "\"%s\" names rank%d, but parled is not running under MPI (one "
             "process, only rank0): start it as mpirun -n K parled --mpi (docs/mpi.md), or use "
             "\"cpu\"", s, __builtin_ctzll(ranks & ~1ull));
    return -1;
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

static void job_path(const job *j, const char *file, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%s", j->dir, file);
}

void job_file_path(const job *j, const char *file, char *out, size_t outlen)
{
    job_path(j, file, out, outlen);
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

/* A line in the job's log that watchers also get as a "log" event. */
static void job_log_event(job *j, const char *message)
{
    job_log(j, "%s", message);
    cJSON *e = event_json(j, "log");
    cJSON_AddStringToObject(e, "message", message);
    emit_line(j->js, j, e);
}

static void add_num_or_null(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

/* The coupling rule's own quantities (GoSGD's a_i, gossip's scores...), as
 * the runner gave them: "rule", an object, when there are any. */
static void add_rule_json(cJSON *o, const run_event *ev)
{
    cJSON *rule = ev->rule[0] ? cJSON_Parse(ev->rule) : NULL;
    if (cJSON_IsObject(rule))
        cJSON_AddItemToObject(o, "rule", rule);
    else
        cJSON_Delete(rule);
}

static double job_elapsed(const job *j)
{
    double running = j->state == JOB_RUNNING && j->run_started_at > 0 ? now_s() - j->run_started_at : 0;
    return j->elapsed_base + running;
}

/* Where each replica runs, as run_job places them: "cuda:G" round-robin over
 * the job's GPUs, else "cpu". */
static cJSON *replica_devices_json(const job *j)
{
    int gpus[DEV_MAX_GPUS], ngpus = 0;
    for (int i = 0; i < DEV_MAX_GPUS; i++)
        if (j->devices & (1ull << i))
            gpus[ngpus++] = i;
    cJSON *a = cJSON_CreateArray();
    for (int r = 0; r < j->cfg.algorithm.replicas; r++) {
        char name[16] = "cpu";
        if (ngpus > 0)
            snprintf(name, sizeof name, "cuda:%d", gpus[r % ngpus]);
        cJSON_AddItemToArray(a, cJSON_CreateString(name));
    }
    return a;
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
    cJSON_AddItemToObject(o, "replica_devices", replica_devices_json(j));
    cJSON_AddNumberToObject(o, "epoch", j->last.epoch);
    cJSON_AddNumberToObject(o, "epochs", j->cfg.epochs);
    cJSON_AddNumberToObject(o, "step", (double)j->last.step);
    cJSON_AddNumberToObject(o, "data_passes", j->last.data_passes);
    /* Running: the speed of the last log interval. Otherwise the mean over
     * the training time so far (0 before the first step): every replica
     * takes `step` batches (the minimum for asynchronous rules). */
    double images = (double)j->last.step * j->cfg.optim.batch * j->cfg.algorithm.replicas;
    double elapsed = started ? job_elapsed(j) : 0;
    cJSON_AddNumberToObject(o, "images_per_sec", j->state == JOB_RUNNING ? j->last.images_per_sec
                                                 : elapsed > 0 ? images / elapsed : 0);
    cJSON_AddNumberToObject(o, "mean_images_per_sec", elapsed > 0 ? images / elapsed : 0);
    cJSON *mem = j->memory[0] ? cJSON_Parse(j->memory) : NULL;
    if (cJSON_IsObject(mem))
        cJSON_AddItemToObject(o, "memory_bytes", mem);
    else {
        cJSON_Delete(mem);
        cJSON_AddNullToObject(o, "memory_bytes");
    }
    add_num_or_null(o, "test_error", j->test_error);
    add_num_or_null(o, "test_loss", j->test_loss);
    add_num_or_null(o, "train_loss", j->last.step > 0 ? j->last.train_loss : NAN);
    add_num_or_null(o, "lr", j->last.step > 0 ? j->last.lr : NAN);
    add_rule_json(o, &j->last);
    cJSON_AddNumberToObject(o, "elapsed_s", started ? job_elapsed(j) : 0);
    add_num_or_null(o, "eta_s", j->state == JOB_DONE ? 0 : j->state == JOB_RUNNING && j->last.step > 0 ? j->last.eta_s : NAN);
    cJSON_AddNumberToObject(o, "submitted_at", j->submitted_at);
    add_num_or_null(o, "started_at", started ? j->started_at : NAN);
    add_num_or_null(o, "ended_at", ended ? j->ended_at : NAN);
    return o;
}

/* status.json is what a restart reloads; a failed write is logged and the
 * job goes on (the next write may succeed). */
static int write_status(job *j)
{
    char path[1200], err[512];
    cJSON *st = job_status_json(j);
    char *text = cJSON_Print(st);
    cJSON_Delete(st);
    job_path(j, "status.json", path, sizeof(path));
    int rc = text ? atomic_write_file(path, text, strlen(text), err, sizeof(err)) : -1;
    if (rc != 0)
        job_log(j, "could not write status.json: %s", text ? err : "out of memory");
    free(text);
    j->status_written_at = now_s();
    return rc;
}

/* Once the end is on disk the checkpoints are of no use (the master for
 * export stays): remove every file and directory under ckpt. */
static void remove_checkpoints(job *j)
{
    char root[1200], dir[1500], file[1800];
    job_path(j, "ckpt", root, sizeof(root));
    DIR *d = opendir(root);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] != 'k')
            continue;
        snprintf(dir, sizeof(dir), "%s/%s", root, e->d_name);
        DIR *k = opendir(dir);
        struct dirent *f;
        while (k && (f = readdir(k)))
            if (f->d_name[0] != '.') {
                snprintf(file, sizeof(file), "%s/%s", dir, f->d_name);
                unlink(file);
            }
        if (k)
            closedir(k);
        rmdir(dir);
    }
    closedir(d);
    if (rmdir(root) != 0)
        job_log(j, "could not remove the checkpoints in %s: %s", root, strerror(errno));
}

/* A state change: persist it, log it, tell the watchers. An ended job's
 * checkpoints go once its end is on disk. */
static void set_state(job *j, enum job_state s)
{
    j->state = s;
    if (job_state_final(s))
        j->ended_at = now_s();
    if (write_status(j) == 0 && job_state_final(s))
        remove_checkpoints(j);
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
    int progress = !p->ended && !p->flush && p->ev.kind == RUN_EV_PROGRESS;
    int drop = progress && js->q_progress >= QUEUE_MAX_PROGRESS;
    if (!drop) {
        js->q_progress += progress;
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
    if (ev->kind == RUN_EV_EVAL) {
        j->master_test_error = ev->test_error;
        j->master_test_loss = ev->test_loss;
    }
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

/* Block until the loop has written every event posted before: the metrics
 * up to an evaluation are on disk before a checkpoint after it exists. */
static void wait_for_loop(job *j)
{
    jobs *js = j->js;
    pending *p = calloc(1, sizeof(*p));
    if (!p)
        return;
    pthread_mutex_lock(&js->mu);
    long seq = ++j->flush_asked;
    pthread_mutex_unlock(&js->mu);
    p->j = j;
    p->flush = seq;
    enqueue(js, p);
    pthread_mutex_lock(&js->mu);
    while (j->flush_done < seq)
        pthread_cond_wait(&js->flushed, &js->mu);
    pthread_mutex_unlock(&js->mu);
}

/* On the replica thread that evaluated the master: save it for `export`. */
static void on_master(void *user, const model *master, const float *params, const float *stats,
                      int epochs_done, int last)
{
    job *j = user;
    char path[1200], err[512], epoch[16], epochs[16], replicas[16], terr[32], tloss[32];
    job_path(j, "master.safetensors", path, sizeof(path));
    snprintf(epoch, sizeof(epoch), "%d", epochs_done);
    snprintf(epochs, sizeof(epochs), "%d", j->cfg.epochs);
    snprintf(replicas, sizeof(replicas), "%d", j->cfg.algorithm.replicas);
    snprintf(terr, sizeof(terr), "%.17g", j->master_test_error);
    snprintf(tloss, sizeof(tloss), "%.17g", j->master_test_loss);
    const st_meta meta[] = {
        {"job_id", j->id}, {"job_name", j->cfg.name[0] ? j->cfg.name : j->id},
        {"arch", j->cfg.model.arch}, {"dataset", j->cfg.data.dataset},
        {"algorithm", j->cfg.algorithm.name}, {"replicas", replicas}, {"epoch", epoch},
        {"epochs", epochs}, {"final", last ? "true" : "false"}, {"eval_bn", j->cfg.eval.bn},
        {"test_error", terr}, {"test_loss", tloss},
    };
    if (safetensors_write(path, master, params, stats, meta,
                          (int)(sizeof(meta) / sizeof(meta[0])), err, sizeof(err)) != 0)
        post_log(j, "could not save the master of epoch %d for export: %s", epochs_done, err);
    wait_for_loop(j);
}

/* The job thread: load the data once, run the job, report the end. */
static void *job_thread(void *arg)
{
    job *j = arg;
    jobs *js = j->js;
    char err[JOB_ERR_MAX] = "", ckpt[1200];
    dataset train = {0}, test = {0};
    run_result result = {0};
    job_path(j, "ckpt", ckpt, sizeof(ckpt));
    run_hooks hooks = {.on_event = on_run_event, .user = j, .stop = &j->stop,
                       .checkpoint_dir = ckpt, .on_master = on_master};
    /* Under --mpi a job spans every rank or those its devices names
     * (docs/mpi.md); each resolves its devices on its own machine. */
    mpi_job *mj = NULL;
    int rc = 0;
    if (mpi_node_size() > 1) {
        char path[1200];
        job_path(j, "job.json", path, sizeof(path));
        rc = mpi_job_begin(&mj, path, ckpt, err, sizeof(err));
    }
    if (rc == 0)
        rc = run_load_data(&j->cfg, &train, &test, err, sizeof(err));
    int gpus[DEV_MAX_GPUS], ngpus = 0;
    for (int i = 0; i < DEV_MAX_GPUS; i++)
        if (j->devices & (1ull << i))
            gpus[ngpus++] = i;
    run_devices where = {.cores = js->cores, .ncores = js->ncores, .gpus = gpus, .ngpus = ngpus};
    if (mj && mpi_job_ready(mj, rc != 0, err, &j->cfg, &where, err, sizeof(err)) != 0)
        rc = -1;
    if (rc == 0) {
        post_log(j, "data: %d training and %d test examples of %dx%dx%d", train.n, test.n, train.c,
                 train.h, train.w);
        if (mj)
            post_log(j, "MPI: %d rank%s; replicas %d..%d on rank 0", mpi_job_nranks(mj),
                     mpi_job_nranks(mj) == 1 ? "" : "s", where.first,
                     where.first + where.count - 1);
        rc = run_job(&j->cfg, &train, &test, &where, &hooks, &result, err, sizeof(err));
    }
    mpi_job_end(mj);
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
    job_path(j, "metrics.jsonl", path, sizeof(path));
    j->metrics = fopen(path, "a");
    if (!j->metrics)
        job_log(j, "cannot append to %s: %s (metrics are not kept)", path, strerror(errno));
    if (j->started_at == 0)
        j->started_at = now_s();
    j->run_started_at = now_s();
    j->run_pending = j->interrupted;
    j->interrupted = 0;
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
 * wants any of them, so a big job is never starved by later small ones.
 * Jobs interrupted by a daemon stop come before every other queued job. */
static void schedule(jobs *js)
{
    uint64_t wanted = 0;
    for (int pass = 0; pass < 2; pass++)
        for (job *j = js->first; j && !js->stopping; j = j->next) {
            if (j->state != JOB_QUEUED || j->interrupted != (pass == 0))
                continue;
            if (!((js->busy | wanted) & j->devices))
                start_job(js, j);
            else
                wanted |= j->devices;
        }
}

static void write_metrics(job *j, cJSON *ev, int durable)
{
    if (!j->metrics)
        return;
    char *text = cJSON_PrintUnformatted(ev);
    if (text) {
        fprintf(j->metrics, "%s\n", text);
        fflush(j->metrics);
        if (durable)
            fsync(fileno(j->metrics));
        free(text);
    }
}

/* Keep the metrics lines of steps <= keep_step (the run continues from
 * there) and drop the rest, including a torn last line. */
static void trim_metrics(job *j, long keep_step)
{
    char path[1200], err[1400];
    size_t len = 0;
    job_path(j, "metrics.jsonl", path, sizeof(path));
    if (j->metrics)
        fclose(j->metrics);
    j->metrics = NULL;
    char *text = read_file_text(path, METRICS_FILE_MAX, &len, err, sizeof(err));
    if (!text && errno != ENOENT)
        job_log(j, "cannot trim metrics.jsonl: %s", err);
    if (text) {
        size_t out = 0, dropped = 0;
        for (size_t at = 0; at < len;) {
            char *nl = memchr(text + at, '\n', len - at);
            size_t n = nl ? (size_t)(nl - (text + at)) + 1 : len - at;
            cJSON *line = nl ? cJSON_ParseWithLength(text + at, n - 1) : NULL;
            const cJSON *step = cJSON_GetObjectItemCaseSensitive(line, "step");
            if (line && (!cJSON_IsNumber(step) || step->valuedouble <= (double)keep_step)) {
                memmove(text + out, text + at, n);
                out += n;
            } else {
                dropped++;
            }
            cJSON_Delete(line);
            at += n;
        }
        if (dropped > 0) {
            if (atomic_write_file(path, text, out, err, sizeof(err)) != 0)
                job_log(j, "cannot trim metrics.jsonl: %s", err);
            else
                job_log(j, "metrics.jsonl: dropped %zu line(s) after step %ld", dropped, keep_step);
        }
        free(text);
    }
    j->metrics = fopen(path, "a");
    if (!j->metrics)
        job_log(j, "cannot append to %s: %s (metrics are not kept)", path, strerror(errno));
}

/* The first event of a run after an interruption says where it starts: a
 * resume (RUN_EV_RESUME) keeps the history up to its checkpoint, anything
 * else means no usable checkpoint, so the run starts over. */
static void begin_resumed_run(job *j, const run_event *resume)
{
    j->run_pending = 0;
    if (resume) {
        job_log_event(j, resume->message);
        j->last.epoch = resume->epoch;
        j->last.step = resume->step;
        j->last.data_passes = resume->data_passes;
        j->test_error = resume->epoch > 0 ? resume->test_error : NAN;
        j->test_loss = resume->epoch > 0 ? resume->test_loss : NAN;
        j->elapsed_base = resume->elapsed_s;
        j->run_started_at = now_s();
        trim_metrics(j, resume->step);
    } else {
        job_log_event(j, "no complete checkpoint to resume from: starting over from scratch");
        j->test_error = j->test_loss = NAN;
        j->elapsed_base = 0;
        trim_metrics(j, 0);
    }
}

static void apply_event(jobs *js, job *j, const run_event *ev)
{
    if (ev->kind == RUN_EV_LOG) {
        job_log_event(j, ev->message);
        return;
    }
    if (ev->kind == RUN_EV_RESUME || j->run_pending)
        begin_resumed_run(j, ev->kind == RUN_EV_RESUME ? ev : NULL);
    if (ev->kind == RUN_EV_RESUME)
        return;
    run_event merged = *ev;
    if (ev->kind == RUN_EV_EVAL) {
        /* An evaluation measures no speed: keep the last progress's. */
        merged.images_per_sec = j->last.images_per_sec;
        merged.eta_s = j->last.eta_s;
        j->test_error = ev->test_error;
        j->test_loss = ev->test_loss;
    }
    j->last = merged;
    if (ev->kind == RUN_EV_PROGRESS && ev->memory[0])
        snprintf(j->memory, sizeof j->memory, "%s", ev->memory);
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
    add_num_or_null(e, "wait_s", ev->wait_s);
    add_rule_json(e, ev);
    if (ev->kind == RUN_EV_EVAL) {
        add_num_or_null(e, "test_error", ev->test_error);
        add_num_or_null(e, "test_loss", ev->test_loss);
        add_num_or_null(e, "train_error", ev->train_error);
        add_num_or_null(e, "dist_to_master", ev->dist_to_master);
        job_log(j, "epoch %d/%d: test error %.2f%%, test loss %.4f, train loss %.4f", ev->epoch,
                ev->epochs, 100 * ev->test_error, ev->test_loss, ev->train_loss);
    }
    write_metrics(j, e, ev->kind == RUN_EV_EVAL);
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
    j->elapsed_base = job_elapsed(j);
    j->run_started_at = 0;
    j->run_pending = 0;
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
        /* Stopped by a daemon shutdown: status.json keeps "running" so the
         * next start resumes it from the checkpoint just taken. */
        job_log(j, "stopped by the daemon's shutdown at epoch %d, step %ld: it resumes at the "
                "next start", j->last.epoch, j->last.step);
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
        } else if (p->flush) {
            pthread_mutex_lock(&js->mu);
            p->j->flush_done = p->flush;
            pthread_cond_broadcast(&js->flushed);
            pthread_mutex_unlock(&js->mu);
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

/* ---- reloading the state dir ---- */

/* A number of status.json; `missing` if absent, null or not a number. */
static double status_num(const cJSON *st, const char *key, double missing)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, key);
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : missing;
}

/* A count of status.json (epoch, step): 0 if absent, -1 if out of range. */
static long status_count(const cJSON *st, const char *key)
{
    double v = status_num(st, key, 0);
    return v >= 0 && v < 1e15 ? (long)v : -1;
}

/* Fill j from its status.json: state, error, times and last values. */
static int restore_status(job *j, const char *text, size_t len, char *err, size_t errlen)
{
    cJSON *st = cJSON_ParseWithLength(text, len);
    const char *state = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "state"));
    int s = 0;
    while (state && s <= JOB_CANCELLED && strcmp(state, state_names[s]) != 0)
        s++;
    long epoch = status_count(st, "epoch"), step = status_count(st, "step");
    if (!cJSON_IsObject(st) || !state || s > JOB_CANCELLED || epoch < 0 || epoch > INT32_MAX ||
        step < 0) {
        snprintf(err, errlen, "status.json: %s", !st ? "not valid JSON"
                 : !state || s > JOB_CANCELLED ? "no valid \"state\"" : "bad epoch or step");
        cJSON_Delete(st);
        return -1;
    }
    j->state = (enum job_state)s;
    const char *error = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "error"));
    snprintf(j->error, sizeof(j->error), "%s", error ? error : "");
    j->submitted_at = status_num(st, "submitted_at", 0);
    j->started_at = status_num(st, "started_at", 0);
    j->ended_at = status_num(st, "ended_at", 0);
    j->elapsed_base = status_num(st, "elapsed_s", 0);
    j->test_error = status_num(st, "test_error", NAN);
    j->test_loss = status_num(st, "test_loss", NAN);
    j->last.epoch = (int)epoch;
    j->last.epochs = j->cfg.epochs;
    j->last.step = step;
    j->last.data_passes = status_num(st, "data_passes", 0);
    j->last.train_loss = status_num(st, "train_loss", NAN);
    j->last.lr = status_num(st, "lr", NAN);
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(st, "memory_bytes");
    char *mem_text = cJSON_IsObject(mem) ? cJSON_PrintUnformatted(mem) : NULL;
    if (mem_text && strlen(mem_text) < sizeof j->memory)
        strcpy(j->memory, mem_text);
    free(mem_text);
    cJSON_Delete(st);
    return 0;
}

/* Rebuild job `name` from <jobs_dir>/<name>/{job.json,status.json}. */
static job *load_job(jobs *js, const char *name, char *err, size_t errlen)
{
    job *j = calloc(1, sizeof(*j));
    if (!j) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    j->js = js;
    snprintf(j->id, sizeof(j->id), "%s", name);
    snprintf(j->dir, sizeof(j->dir), "%s/%s", js->jobs_dir, name);
    char path[1200], why[JOB_ERR_MAX];
    size_t len;
    job_path(j, "job.json", path, sizeof(path));
    char *text = read_file_text(path, JOB_FILE_MAX, &len, err, errlen);
    if (!text)
        goto fail;
    int rc = job_config_parse(text, len, &j->cfg, why, sizeof(why));
    free(text);
    if (rc != 0) {
        snprintf(err, errlen, "job.json: %.2000s", why);
        goto fail;
    }
    /* As submitted; requeue() checks it against the daemon's devices now. */
    if (parse_devices(j->cfg.devices, j->js->devices, &j->devices, why, sizeof(why)) != 0 &&
        parse_devices(j->cfg.devices, ~0ull, &j->devices, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "job.json: devices: %.2000s", why);
        goto fail;
    }
    job_path(j, "status.json", path, sizeof(path));
    if (!(text = read_file_text(path, JOB_FILE_MAX, &len, err, errlen)))
        goto fail;
    rc = restore_status(j, text, len, err, errlen);
    free(text);
    if (rc != 0)
        goto fail;
    return j;
fail:
    free(j);
    return NULL;
}

/* A reloaded job that has not ended: reopen its log and queue it again. One
 * that ever started was interrupted by a daemon stop: it goes first and
 * resumes. One whose devices the daemon no longer has fails. */
static void requeue(jobs *js, job *j)
{
    char path[1200], why[256];
    job_path(j, "log.txt", path, sizeof(path));
    j->log = fopen(path, "a");
    j->state = JOB_QUEUED;
    j->interrupted = j->started_at > 0;
    if (j->interrupted)
        job_log(j, "parled restarted while the job ran: it resumes from its newest complete "
                "checkpoint");
    if (parse_devices(j->cfg.devices, js->devices, &j->devices, why, sizeof(why)) == 0 &&
        check_ranks(j->cfg.devices, why, sizeof(why)) == 0) {
        write_status(j);
        return;
    }
    snprintf(j->error, sizeof(j->error), "devices: %s (the daemon now has %s)", why,
             js->devices_text);
    job_log(j, "failed: %s", j->error);
    set_state(j, JOB_FAILED);
    if (j->log)
        fclose(j->log);
    j->log = NULL;
}

static int job_number(const char *name)
{
    char *end;
    if (name[0] != 'j' || name[1] < '0' || name[1] > '9')
        return -1;
    long n = strtol(name + 1, &end, 10);
    return *end == '\0' && n < 100000000 ? (int)n : -1;
}

static int by_number(const void *a, const void *b)
{
    int x = job_number(*(char *const *)a), y = job_number(*(char *const *)b);
    return (x > y) - (x < y);
}

/* Reload every job under jobs/, in submission (id) order. A directory that
 * cannot be read is reported and skipped; its id is still never reused. */
static int reload_jobs(jobs *js, char *err, size_t errlen)
{
    DIR *d = opendir(js->jobs_dir);
    if (!d) {
        snprintf(err, errlen, "%s: %s", js->jobs_dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        int num = job_number(e->d_name);
        if (num < 0)
            continue;
        if (num >= js->next_id)
            js->next_id = num + 1;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **more = realloc(names, cap * sizeof(*names));
            if (!more) {
                rc = -1;
                break;
            }
            names = more;
        }
        if (!(names[n] = strdup(e->d_name))) {
            rc = -1;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc != 0)
        snprintf(err, errlen, "out of memory listing %s", js->jobs_dir);
    else if (n > 0)
        qsort(names, n, sizeof(*names), by_number);
    int counts[JOB_CANCELLED + 1] = {0}, skipped = 0, interrupted = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char why[JOB_ERR_MAX];
        job *j = load_job(js, names[i], why, sizeof(why));
        if (!j) {
            server_log(LOG_WARN, "skipping job %s: %s", names[i], why);
            skipped++;
            continue;
        }
        if (js->last)
            js->last->next = j;
        else
            js->first = j;
        js->last = j;
        if (!job_state_final(j->state))
            requeue(js, j);
        counts[j->state]++;
        interrupted += j->interrupted;
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (rc == 0 && n > 0)
        server_log(LOG_INFO, "reloaded %zu job(s): %d queued (%d of them interrupted, to resume), "
                   "%d done, %d failed, %d cancelled, %d unreadable and skipped",
                   n - (size_t)skipped, counts[JOB_QUEUED], interrupted, counts[JOB_DONE],
                   counts[JOB_FAILED], counts[JOB_CANCELLED], skipped);
    return rc;
}

/* ---- the queue's API ---- */

static void free_jobs(jobs *js)
{
    job *j = js->first;
    while (j) {
        job *next = j->next;
        if (j->log)
            fclose(j->log);
        free(j);
        j = next;
    }
    free(js->cores);
    free(js);
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
    js->next_id = 1;
    snprintf(js->jobs_dir, sizeof(js->jobs_dir), "%s/jobs", state_dir);
    js->ncores = run_cpu_cores(&js->cores, err, errlen);
    if (js->ncores < 1)
        goto fail;
    /* The daemon's "auto" is its cores and every GPU the driver shows. */
    char why[256];
    int ngpus = backend_cuda_devices();
    uint64_t present = DEV_CPU | (ngpus >= DEV_MAX_GPUS ? ~DEV_CPU : (1ull << ngpus) - 1);
    if (strcmp(devices, "auto") == 0) {
        js->devices = present;
    } else if (parse_devices(devices, present, &js->devices, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "--devices: %s (this machine has %d GPU%s)", why, ngpus,
                 ngpus == 1 ? "" : "s");
        goto fail;
    }
    devices_text(js->devices, js->devices_text, sizeof(js->devices_text));
    if (mkdir_p(js->jobs_dir, err, errlen) != 0 || reload_jobs(js, err, errlen) != 0)
        goto fail;
    pthread_mutex_init(&js->mu, NULL);
    pthread_cond_init(&js->flushed, NULL);
    if (uv_async_init(loop, &js->async, on_async) != 0) {
        pthread_cond_destroy(&js->flushed);
        pthread_mutex_destroy(&js->mu);
        snprintf(err, errlen, "uv_async_init failed");
        goto fail;
    }
    js->async.data = js;
    *out = js;
    return 0;
fail:
    free_jobs(js);
    return -1;
}

void jobs_start(jobs *js) { schedule(js); }

job *jobs_submit(jobs *js, const cJSON *job_json, const char **code, char *err, size_t errlen)
{
    if (js->stopping) {
        *code = ERR_SHUTTING_DOWN;
        snprintf(err, errlen, "parled is shutting down");
        return NULL;
    }
    *code = ERR_INTERNAL;
    char path[1200];
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
    if (parse_devices(j->cfg.devices, js->devices, &j->devices, why, sizeof(why)) != 0 ||
        check_ranks(j->cfg.devices, why, sizeof(why)) != 0) {
        *code = ERR_INVALID_JOB;
        snprintf(err, errlen, "devices: %s (%s)", why, js->devices_text);
        goto fail;
    }
    j->js = js;
    j->test_error = j->test_loss = NAN;
    snprintf(j->id, sizeof(j->id), "j%04d", js->next_id++);
    snprintf(j->dir, sizeof(j->dir), "%s/%s", js->jobs_dir, j->id);
    job_path(j, "job.json", path, sizeof(path));
    if (mkdir_p(j->dir, err, errlen) != 0 ||
        atomic_write_file(path, pretty, strlen(pretty), err, errlen) != 0)
        goto fail;
    job_path(j, "log.txt", path, sizeof(path));
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
    if (j && j->dir[0]) { /* leave no half-made job dir behind */
        job_path(j, "job.json", path, sizeof(path));
        unlink(path);
        rmdir(j->dir);
    }
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
            char name[256];
            size_t bytes;
            if (backend_cuda_device_info(i, name, sizeof name, &bytes) == 0) {
                cJSON_AddStringToObject(d, "name", name);
                cJSON_AddNumberToObject(d, "memory_bytes", (double)bytes);
            }
            /* The daemon's GPUs this one reads and writes directly (P2P). */
            cJSON *peers = cJSON_AddArrayToObject(d, "peer_access");
            for (int p = 0; p < 64; p++)
                if ((js->devices & (1ull << p)) && (1ull << p) != DEV_CPU &&
                    topology_peer_access(i, p))
                    cJSON_AddItemToArray(peers, cJSON_CreateNumber(p));
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

/* The __metadata__ object of a safetensors file (read on the loop thread). */
static cJSON *read_safetensors_metadata(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    unsigned char le[8];
    uint64_t n = 0;
    char *header = NULL;
    cJSON *root = NULL, *meta = NULL;
    if (fread(le, 1, 8, f) == 8) {
        for (int i = 7; i >= 0; i--)
            n = n << 8 | le[i];
        if (n >= 2 && n <= SAFETENSORS_HEADER_MAX && (header = malloc((size_t)n)) &&
            fread(header, 1, (size_t)n, f) == n)
            root = cJSON_ParseWithLength(header, (size_t)n);
    }
    fclose(f);
    free(header);
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
    if (cJSON_IsObject(md))
        meta = cJSON_Duplicate(md, 1);
    else
        snprintf(err, errlen, "%s: not a safetensors file with metadata", path);
    cJSON_Delete(root);
    return meta;
}

cJSON *job_export_json(const job *j, const char **code, char *err, size_t errlen)
{
    char path[1200];
    job_path(j, "master.safetensors", path, sizeof(path));
    *code = ERR_INTERNAL;
    if (access(path, F_OK) != 0 && errno == ENOENT) {
        *code = ERR_BAD_STATE;
        snprintf(err, errlen, "job %s has no evaluated master yet (the master is saved at the "
                 "end of each epoch)", j->id);
        return NULL;
    }
    cJSON *meta = read_safetensors_metadata(path, err, errlen);
    if (!meta)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "path", path);
    cJSON_AddItemToObject(o, "metadata", meta);
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
        if (j->log)
            fclose(j->log);
        j->log = NULL;
        if (js->listener.on_end)
            js->listener.on_end(js->listener.user, j);
        schedule(js);
        return 0;
    }
    j->cancel_requested = 1;
    __atomic_store_n(&j->stop, RUN_STOP, __ATOMIC_RELAXED);
    job_log(j, "cancel requested: the replicas stop now");
    return 0;
}

char *job_read_log(const job *j, size_t max, char *err, size_t errlen)
{
    char path[1200];
    job_path(j, "log.txt", path, sizeof(path));
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
        if (j->thread_running && !j->stop) {
            __atomic_store_n(&j->stop, RUN_STOP_CHECKPOINT, __ATOMIC_RELAXED);
            job_log(j, "daemon shutdown: checkpointing at the next step boundary, then stopping");
        }
    return js->running;
}

int jobs_stop_now(jobs *js)
{
    for (job *j = js->first; j; j = j->next)
        if (j->thread_running && !j->cancel_requested) {
            __atomic_store_n(&j->stop, RUN_STOP_NOW, __ATOMIC_RELAXED);
            job_log(j, "daemon shutdown: the stop timeout passed; stopping now without a "
                    "checkpoint (it resumes from its last one)");
        }
    return js->running;
}

int jobs_running(const jobs *js) { return js->running; }

static void on_async_closed(uv_handle_t *h)
{
    jobs *js = h->data;
    pthread_cond_destroy(&js->flushed);
    pthread_mutex_destroy(&js->mu);
    free_jobs(js);
}

void jobs_close(jobs *js) { uv_close((uv_handle_t *)&js->async, on_async_closed); }
