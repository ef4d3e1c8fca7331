/* The job store's loop side (jobs.h): it applies the events the job
 * threads hand over, ends jobs' runs and stops them. What a run's end
 * means beyond the record (a requeue, a sweep's early stop, the removals,
 * the accounting record, the next scheduling pass) it tells the modules
 * above through js->hooks (jobs_impl.h), which queue.c fills in: it calls
 * none of them by name. */
#include "jobs.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "jobs_impl.h"

void jobs_set_limits(jobs *js, const jobs_limits *limits) { js->limits = *limits; }


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
        j->last.reseeds = resume->reseeds;
        j->test_error = resume->epoch > 0 ? resume->test_error : NAN;
        j->test_loss = resume->epoch > 0 ? resume->test_loss : NAN;
        j->elapsed_base = resume->elapsed_s;
        j->run_began_mono = jobs_mono_s();
        job_trim_metrics(j, resume->step);
    } else {
        job_log_event(j, "no complete checkpoint to resume from: starting over from scratch");
        j->test_error = j->test_loss = NAN;
        j->elapsed_base = 0;
        job_trim_metrics(j, 0);
    }
}

/* A checkpoint or master that could not be written is logged and shown in
 * the status until one of its kind is. */
static void note_save(job *j, const run_event *ev)
{
    char *shown = j->saving.save_failed[ev->saved == RUN_SAVED_MASTER];
    if (ev->saved == RUN_SAVED_CHECKPOINT)
        (*(ev->message[0] ? &j->js->checkpoints_failed : &j->js->checkpoints_written))++;
    if (ev->message[0])
        job_log_event(j, ev->message);
    if (strcmp(shown, ev->message) == 0)
        return;
    snprintf(shown, sizeof j->saving.save_failed[0], "%s", ev->message);
    write_status(j);
}

static void apply_event(jobs *js, job *j, const run_event *ev)
{
    if (ev->kind == RUN_EV_LOG) {
        job_log_event(j, ev->message);
        return;
    }
    if (ev->kind == RUN_EV_SAVE) {
        note_save(j, ev);
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
        merged.reseeds = j->last.reseeds;
        j->test_error = ev->test_error;
        j->test_loss = ev->test_loss;
    }
    j->last = merged;
    if (ev->kind == RUN_EV_PROGRESS && ev->memory[0]) {
        snprintf(j->memory, sizeof j->memory, "%s", ev->memory);
        j->memory_reported = 1;
    }
    ev = &merged;
    cJSON *e = job_event_json(j, ev->kind == RUN_EV_EVAL ? "eval" : "progress");
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
    add_num_or_null(e, "eval_s", ev->eval_s);
    cJSON_AddNumberToObject(e, "reseeds", (double)ev->reseeds);
    add_rule_json(e, ev);
    if (ev->kind == RUN_EV_EVAL) {
        add_num_or_null(e, "test_error", ev->test_error);
        add_num_or_null(e, "test_loss", ev->test_loss);
        add_num_or_null(e, "dist_to_master", ev->dist_to_master);
        job_log(j, "epoch %.6g/%d: test error %.2f%%, test loss %.4f, train loss %.4f", ev->epoch,
                ev->epochs, 100 * ev->test_error, ev->test_loss, ev->train_loss);
    }
    job_write_metrics(j, e, ev->kind == RUN_EV_EVAL);
    job_emit(j, e);
    if (ev->kind == RUN_EV_EVAL ||
        jobs_mono_s() - j->status_written_mono >= STATUS_WRITE_INTERVAL_S)
        write_status(j);
    if (ev->kind == RUN_EV_EVAL)
        js->client.evaluated(js->client.self, j, ev->epoch, ev->test_error);
}

/* Every device of the job, not just the failed replica's: which one of a
 * job's GPUs broke matters little, since only a new process mends any. */
static void mark_faulted(jobs *js, job *j, const char *why)
{
    char dev[256];
    devices_text(j->devices, dev, sizeof dev);
    for (int i = 0; i < 64; i++)
        if ((j->devices & (1ull << i)) && !(js->faulted & (1ull << i)))
            /* The message clipped to leave room for the job's id. */
            snprintf(js->fault[i], sizeof js->fault[i], "%.*s (job %s)",
                     (int)(sizeof js->fault[i] - sizeof j->id - 8), why, j->id);
    js->faulted |= j->devices;
    job_log(j, "device fault on %s: %s; no job starts there again until parled has "
            "re-executed itself", dev, why);
}

static void finish_job(jobs *js, job *j, const pending *p)
{
    const double run_began = j->run_began_mono;
    js->hooks.run_ending(js); /* the job's last seconds count for its owner */
    pthread_join(j->thread, NULL);
    j->thread_running = 0;
    js->running--;
    jobs_track(js, j);
    job_cores_release(js, j);
    j->elapsed_base = job_elapsed(j);
    j->run_began_mono = 0;
    j->run_pending = 0;
    if (j->metrics)
        fclose(j->metrics);
    j->metrics = NULL;
    if (p->result.device_fault[0])
        mark_faulted(js, j, p->result.device_fault);
    const char *end;
    if (p->rc != 0) {
        snprintf(j->error, sizeof(j->error), "%s", p->err ? p->err : "out of memory");
        job_log(j, "failed: %s", j->error);
        set_state(j, JOB_FAILED);
        end = "failed";
    } else if (p->result.stopped && j->cancel_requested) {
        job_log(j, "cancelled at epoch %.6g, step %ld", j->last.epoch, j->last.step);
        set_state(j, JOB_CANCELLED);
        end = "cancelled";
    } else if (p->result.stopped && !js->stopping) {
        /* The queue stopped it: its time limit, or back into the queue
         * (preempted or held, or a preemption withdrawn once it had
         * stopped), then still watched. */
        end = js->hooks.run_stopped(j);
    } else if (p->result.stopped) {
        /* Stopped by a daemon shutdown: status.json keeps "running" so the
         * next start resumes it from the checkpoint just taken. */
        job_log(j, "stopped by the daemon's %s at epoch %.6g, step %ld: it resumes at the "
                "next start", js->restarting ? "re-exec" : "shutdown", j->last.epoch,
                j->last.step);
        write_status(j);
        end = "stopped";
    } else {
        js->client.run_done(js->client.self, j);
        j->test_error = p->result.test_error;
        j->test_loss = p->result.test_loss;
        memset(j->saving.save_failed, 0, sizeof j->saving.save_failed); /* its master is on disk */
        job_log(j, "done: %d epochs, test error %.2f%%", p->result.epochs_done,
                100 * p->result.test_error);
        set_state(j, JOB_DONE);
        end = "done";
    }
    js->hooks.run_ended(js, j, end, run_began);
    if (j->state == JOB_QUEUED)
        return;
    if (job_state_final(j->state))
        job_log_stop(j);
    jobs_tell_end(js, j);
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
        js->hooks.ends_applied(js);
}

/* ---- the store's API ---- */

int jobs_store_listen(jobs *js, char *err, size_t errlen)
{
    if (uv_async_init(js->loop, &js->async, on_async) != 0) {
        snprintf(err, errlen, "uv_async_init failed");
        return -1;
    }
    js->async.data = js;
    return 0;
}

job *jobs_find(jobs *js, const char *id) { return jobs_index_find(js, id); }

char *job_read_log(const job *j, size_t max, char *err, size_t errlen)
{
    char path[1200];
    job_file_path(j, "log.txt", path, sizeof(path));
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
            job_ask_stop(j, RUN_STOP_CHECKPOINT);
            job_log(j, "daemon %s: checkpointing at the next step boundary, then stopping",
                    js->restarting ? "re-exec after a device fault" : "shutdown");
        }
    return js->running;
}

int jobs_stop_for_restart(jobs *js)
{
    js->restarting = 1;
    return jobs_stop_all(js);
}

int jobs_faulted(const jobs *js) { return __builtin_popcountll(js->faulted); }

int jobs_stop_now(jobs *js)
{
    for (job *j = js->first; j; j = j->next)
        if (j->thread_running && !j->cancel_requested) {
            job_ask_stop(j, RUN_STOP_NOW);
            job_log(j, "daemon shutdown: the stop timeout passed; stopping now without a "
                    "checkpoint (it resumes from its last one)");
        }
    return js->running;
}

int jobs_running(const jobs *js) { return js->running; }
