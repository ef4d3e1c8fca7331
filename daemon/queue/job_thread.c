/* A job's own thread (jobs_impl.h), started by job_start once the scheduler
 * says the job may run: it loads the data once and runs the job; it and the
 * replica threads it starts hand events, log lines and the end to the loop
 * through the queue's lock and uv_async_send, never touching the loop's
 * state. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data_file.h"
#include "dataset.h"
#include "jobs_impl.h"
#include "load.h"
#include "mpi_node.h"
#include "safetensors.h"

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

/* What could not be written (a checkpoint's or the master's error), or ""
 * once it was: shown in the job's status until then (jobs.c). */
static void post_save(job *j, enum run_saved what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void post_save(job *j, enum run_saved what, const char *fmt, ...)
{
    run_event ev = {.kind = RUN_EV_SAVE, .saved = what};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev.message, sizeof(ev.message), fmt, ap);
    va_end(ap);
    on_run_event(j, &ev);
}

/* What a master's file says of it besides its tensors. */
typedef struct master_figures {
    double epochs_done, test_error, test_loss;
    int last;
} master_figures;

/* The final master that could not be written, kept for the retries
 * (retry_final_master): its tensor list, weights and statistics. */
struct held_master {
    model m;                /* tensors, ntensors, nparams, nstats; nothing else */
    float *params, *stats;
    master_figures f;
    char err[512];          /* the last write's error */
};

static int write_master(job *j, const model *master, const float *params, const float *stats,
                        const master_figures *f, char *err, size_t errlen)
{
    char path[1200], epoch[16], epochs[16], replicas[16], terr[32], tloss[32];
    job_file_path(j, "master.safetensors", path, sizeof(path));
    snprintf(epoch, sizeof(epoch), "%.6g", f->epochs_done);
    snprintf(epochs, sizeof(epochs), "%d", j->cfg.epochs);
    snprintf(replicas, sizeof(replicas), "%d", j->cfg.algorithm.replicas);
    snprintf(terr, sizeof(terr), "%.17g", f->test_error);
    snprintf(tloss, sizeof(tloss), "%.17g", f->test_loss);
    const st_meta meta[] = {
        {"job_id", j->id}, {"job_name", j->cfg.name[0] ? j->cfg.name : j->id},
        {"arch", j->cfg.model.arch}, {"dataset", j->cfg.data.dataset},
        {"algorithm", j->cfg.algorithm.name}, {"replicas", replicas}, {"epoch", epoch},
        {"epochs", epochs}, {"final", f->last ? "true" : "false"}, {"eval_bn", j->cfg.eval.bn},
        {"test_error", terr}, {"test_loss", tloss},
    };
    return safetensors_write(path, master, params, stats, meta,
                             (int)(sizeof(meta) / sizeof(meta[0])), err, errlen);
}

/* A copy of the master for the retries; the copy holds no weights when
 * out of memory (the job then fails at once). */
static struct held_master *hold_master(const model *master, const float *params,
                                       const float *stats, const master_figures *f,
                                       const char *err)
{
    struct held_master *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->f = *f;
    snprintf(h->err, sizeof(h->err), "%s", err);
    size_t ts = (size_t)master->ntensors * sizeof(*master->tensors);
    h->m.tensors = malloc(ts ? ts : 1);
    h->params = malloc((master->nparams ? master->nparams : 1) * sizeof(float));
    h->stats = malloc((master->nstats ? master->nstats : 1) * sizeof(float));
    if (!h->m.tensors || !h->params || !h->stats) {
        free(h->m.tensors);
        free(h->params);
        free(h->stats);
        h->m.tensors = NULL;
        h->params = h->stats = NULL;
        return h;
    }
    memcpy(h->m.tensors, master->tensors, ts);
    memcpy(h->params, params, master->nparams * sizeof(float));
    memcpy(h->stats, stats, master->nstats * sizeof(float));
    h->m.ntensors = master->ntensors;
    h->m.nparams = master->nparams;
    h->m.nstats = master->nstats;
    return h;
}

static void free_held_master(struct held_master *h)
{
    if (!h)
        return;
    free(h->m.tensors);
    free(h->params);
    free(h->stats);
    free(h);
}

/* On the replica thread that evaluated the master: save it for `export`.
 * The final one, if it cannot be written, is kept for the job thread to
 * retry once the replicas are gone (retry_final_master). */
static void on_master(void *user, const model *master, const float *params, const float *stats,
                      double epochs_done, int last)
{
    job *j = user;
    char err[512];
    master_figures f = {.epochs_done = epochs_done, .test_error = j->master_test_error,
                        .test_loss = j->master_test_loss, .last = last};
    if (write_master(j, master, params, stats, &f, err, sizeof(err)) == 0) {
        post_save(j, RUN_SAVED_MASTER, "%s", "");
    } else if (last) {
        j->saving.final_unsaved = 1;
        j->saving.unsaved = hold_master(master, params, stats, &f, err);
        post_save(j, RUN_SAVED_MASTER, "the final master (epoch %.6g) could not be written: %s; "
                  "kept in memory and retried for up to %.0f s (--save-retry)", epochs_done, err,
                  j->js->limits.save_retry_s);
    } else {
        post_save(j, RUN_SAVED_MASTER, "could not save the master of epoch %.6g for export: %s",
                  epochs_done, err);
    }
    wait_for_loop(j);
}

/* Sleeps until the next retry (SAVE_RETRY_MS) or `until`, whichever comes
 * first, waking early for a stop: the stop flags then. */
static int sleep_before_retry(job *j, double until)
{
    for (int slept = 0; slept < SAVE_RETRY_MS && jobs_mono_s() < until; slept += 50) {
        int stop = __atomic_load_n(&j->stop, __ATOMIC_RELAXED);
        if (stop)
            return stop;
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return __atomic_load_n(&j->stop, __ATOMIC_RELAXED);
}

/* The job trained to its end but its final master is not on disk: retry
 * the write for --save-retry seconds (the job stays running, its status
 * saying why), then fail. A cancel or a shutdown meanwhile tries once more
 * and, if that fails too, ends the job as a stop does, saying the weights
 * are lost. 0 (written, or stopped: result->stopped), or -1 with err. */
static int retry_final_master(job *j, run_result *result, char *err, size_t errlen)
{
    struct held_master *h = j->saving.unsaved;
    const double limit = j->js->limits.save_retry_s, t0 = jobs_mono_s();
    if (!h || !h->params) {
        snprintf(err, errlen, "the final master could not be written (%s) nor kept in memory "
                 "for another try: out of memory", h ? h->err : "no message");
        return -1;
    }
    char shown[sizeof(h->err)];
    snprintf(shown, sizeof(shown), "%s", h->err);
    for (;;) {
        int stop = sleep_before_retry(j, t0 + limit);
        if (write_master(j, &h->m, h->params, h->stats, &h->f, h->err, sizeof(h->err)) == 0) {
            post_log(j, "the final master written after %.0f s of retries", jobs_mono_s() - t0);
            post_save(j, RUN_SAVED_MASTER, "%s", "");
            return 0;
        }
        if (stop) {
            int cancel = (stop & RUN_STOP) != 0;
            post_log(j, "%s while the final master could not be written (%s): its weights are "
                     "lost%s", cancel ? "cancelled" : "stopped", h->err,
                     cancel ? "" : "; it trains again from its newest complete checkpoint, if "
                                   "any, at the next start");
            result->stopped = 1;
            result->cancelled = cancel;
            return 0;
        }
        if (jobs_mono_s() - t0 >= limit) {
            snprintf(err, errlen, "the final master could not be written in %.0f s of retries "
                     "(--save-retry): %s", limit, h->err);
            return -1;
        }
        if (strcmp(shown, h->err) != 0) {
            snprintf(shown, sizeof(shown), "%s", h->err);
            post_save(j, RUN_SAVED_MASTER, "the final master could not be written: %s; retrying "
                      "until %.0f s have passed (--save-retry)", h->err, limit);
        }
    }
}

/* The job's data, every file opened with its owner's rights (data_file.h):
 * what the owner cannot read, the job cannot either; admitted again by
 * what its headers claim before any of it is allocated (load.h). */
static int load_as_owner(job *j, dataset *train, dataset *test, char *err, size_t errlen)
{
    file_creds creds;
    if (file_creds_of(j->owner.uid, j->owner.gid, j->owner.user, &creds, err, errlen) != 0)
        return -1;
    data_files_as(&creds);
    data_admit_with(j->js->hooks.admit_data, j);
    int rc = data_load_job(&j->cfg, train, test, &j->stop, err, errlen);
    data_admit_with(NULL, NULL);
    data_files_as(NULL);
    return rc;
}

/* A cancel or a shutdown while the data loaded: nothing ran and nothing was
 * written, so the job ends as a stop during training does (jobs.c's
 * finish_job: cancelled, or left running to resume at the next start). */
static int stopped_while_loading(job *j, run_result *result)
{
    post_log(j, "%s", DATA_STOPPED);
    result->stopped = 1;
    result->cancelled = (__atomic_load_n(&j->stop, __ATOMIC_RELAXED) & RUN_STOP) != 0;
    return 0;
}

/* The job thread: load the data once, run the job, report the end. */
static void *job_thread(void *arg)
{
    job *j = arg;
    jobs *js = j->js;
    char err[JOB_ERR_MAX] = "", ckpt[1200];
    dataset train = {0}, test = {0};
    run_result result = {0};
    job_file_path(j, "ckpt", ckpt, sizeof(ckpt));
    run_hooks hooks = {.on_event = on_run_event, .user = j, .stop = &j->stop,
                       .checkpoint_dir = ckpt, .on_master = on_master};
    /* Under --mpi a job spans every rank or those its devices names
     * (docs/mpi.md); each resolves its devices on its own machine. */
    mpi_job *mj = NULL;
    int rc = 0;
    if (mpi_node_size() > 1) {
        char path[1200];
        job_file_path(j, "job.json", path, sizeof(path));
        rc = mpi_job_begin(&mj, &j->cfg, path, ckpt, err, sizeof(err));
    }
    if (rc == 0)
        rc = load_as_owner(j, &train, &test, err, sizeof(err));
    /* A load that failed once a stop was asked ends as the stop, whatever
     * the loader was doing when it saw it. */
    int load_stopped = rc != 0 && data_stop_asked(&j->stop);
    int gpus[DEV_MAX_GPUS], ngpus = job_devices_gpus(j->devices, gpus);
    /* A CPU job on the cores the queue gave it; a GPU job's replicas on the
     * cores nearest their GPUs, of all the daemon's. */
    run_devices where = {.cores = j->cores ? j->cores : js->cores,
                         .ncores = j->cores ? j->ncores_held : js->ncores, .gpus = gpus,
                         .ngpus = ngpus};
    if (mj && mpi_job_ready(mj, rc != 0, err, &j->cfg, &where, err, sizeof(err)) != 0)
        rc = -1;
    if (rc == 0) {
        post_log(j, "data: %d training and %d test examples of %dx%dx%d", train.n, test.n, train.c,
                 train.h, train.w);
        if (mj) {
            post_log(j, "MPI: %d rank%s; replicas %d..%d on rank 0", mpi_job_nranks(mj),
                     mpi_job_nranks(mj) == 1 ? "" : "s", where.first,
                     where.first + where.count - 1);
            pthread_mutex_lock(&js->mu);
            for (int r = 0; r < j->cfg.algorithm.replicas && r < 64; r++)
                j->replica_rank[r] = (unsigned char)mpi_job_rank_of(mj, r);
            j->placed = 1;
            pthread_mutex_unlock(&js->mu);
        }
        rc = run_job(&j->cfg, &train, &test, &where, &hooks, &result, err, sizeof(err));
        /* Never done without its weights: the replicas are gone, the master stays. */
        if (rc == 0 && !result.stopped && j->saving.final_unsaved)
            rc = retry_final_master(j, &result, err, sizeof(err));
        free_held_master(j->saving.unsaved);
        j->saving.unsaved = NULL;
        j->saving.final_unsaved = 0;
    }
    if (load_stopped)
        rc = stopped_while_loading(j, &result);
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

void job_ask_stop(job *j, int how) { __atomic_store_n(&j->stop, how, __ATOMIC_RELAXED); }

int job_call_off_stop(job *j)
{
    int asked = RUN_STOP_CHECKPOINT;
    return __atomic_compare_exchange_n(&j->stop, &asked, 0, 0, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED);
}

void job_request_cancel(job *j)
{
    j->cancel_requested = 1;
    job_ask_stop(j, RUN_STOP);
}

void job_will_resume(job *j)
{
    j->interrupted = 1;
    job_ask_stop(j, 0);
}

/* The job's thread started on its devices (the scheduler said it may); if
 * it cannot be, the job fails and ends there. */
void job_start(jobs *js, job *j)
{
    char path[1200];
    job_file_path(j, "metrics.jsonl", path, sizeof(path));
    j->metrics = fopen(path, "a");
    if (!j->metrics)
        job_log(j, "cannot append to %s: %s (metrics are not kept)", path, strerror(errno));
    if (j->started_at == 0)
        j->started_at = jobs_now_s();
    j->run_began_mono = jobs_mono_s();
    j->run_pending = j->interrupted;
    j->interrupted = 0;
    js->hooks.run_starting(j);
    j->memory_reported = 0;
    j->thread_running = 1;
    js->running++;
    jobs_track(js, j);
    int rc = pthread_create(&j->thread, NULL, job_thread, j);
    if (rc != 0) {
        job_cores_release(js, j);
        j->thread_running = 0;
        js->running--;
        jobs_track(js, j);
        snprintf(j->error, sizeof(j->error), "could not start the job thread: %s", strerror(rc));
        job_log(j, "failed: %s", j->error);
        set_state(j, JOB_FAILED);
        jobs_tell_end(js, j);
        return;
    }
    char dev[256];
    devices_text(j->devices, dev, sizeof(dev));
    job_log(j, "started on %s (%d cores)", dev, j->cores ? j->ncores_held : js->ncores);
    set_state(j, JOB_RUNNING);
}
