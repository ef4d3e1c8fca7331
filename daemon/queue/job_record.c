/* A job's record read (jobs.h, jobs_client.h, jobs_impl.h): its id, owner
 * and state, the state's names, the paths of its files, its times; and its
 * error set. The bottom of the store's files: it calls none of them. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

#include "jobfile.h"
#include "jobs_impl.h"

double jobs_now_s(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

double jobs_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *const state_names[] = {"queued", "running", "done", "failed", "cancelled",
                                           "timeout"};

const char *job_state_name(enum job_state s) { return state_names[s]; }

int job_state_final(enum job_state s)
{
    return s == JOB_DONE || s == JOB_FAILED || s == JOB_CANCELLED || s == JOB_TIMEOUT;
}
const char *job_id(const job *j) { return j->id; }
enum job_state job_state_of(const job *j) { return j->state; }
const job_owner *job_owner_of(const job *j) { return &j->owner; }
jobs *jobs_of(const job *j) { return j->js; }
const job_config *job_config_of(const job *j) { return &j->cfg; }
uint64_t job_device_mask(const job *j) { return j->devices; }
int job_thread_running(const job *j) { return j->thread_running; }
const char *job_waiting(const job *j) { return j->waiting; }
const char *job_error(const job *j) { return j->error; }
int job_stop_asked(const job *j) { return __atomic_load_n(&j->stop, __ATOMIC_RELAXED); }
double job_run_began_mono(const job *j) { return j->run_began_mono; }
double job_submitted_at(const job *j) { return j->submitted_at; }
double job_ended_mono(const job *j) { return j->ended_mono; }
long job_seq(const job *j) { return j->seq; }
const run_event *job_last(const job *j) { return &j->last; }
uint64_t job_disk_bytes(const job *j) { return j->disk_bytes; }
int job_memory_reported(const job *j) { return j->memory_reported; }
const char *job_memory_text(const job *j) { return j->memory; }
int job_cores_held(const job *j) { return j->ncores_held; }
int job_logging(const job *j) { return j->log != NULL; }
double job_test_error(const job *j) { return j->test_error; }
double job_started_at(const job *j) { return j->started_at; }
double job_ended_at(const job *j) { return j->ended_at; }
int job_cancel_requested(const job *j) { return j->cancel_requested; }

int job_ended_before(const job *j, double before_mono)
{
    return job_state_final(j->state) && !j->thread_running && j->ended_mono <= before_mono;
}

void job_set_error(job *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->error, sizeof j->error, fmt, ap);
    va_end(ap);
}

void job_set_waiting(job *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->waiting, sizeof j->waiting, fmt, ap);
    va_end(ap);
}

void job_place(job *j, uint64_t devices) { j->devices = devices; }

int job_read_config(job *j, const cJSON *job_json, char *err, size_t errlen)
{
    return job_config_from_json(job_json, &j->cfg, err, errlen);
}

void job_reset_end(job *j)
{
    j->error[0] = '\0';
    j->ended_at = 0;
    j->cancel_requested = 0;
    j->eligible_s = j->eligible_mono = 0; /* its age counts from now */
}

const jobs_limits *jobs_limits_of(const jobs *js) { return &js->limits; }
uv_loop_t *jobs_loop(const jobs *js) { return js->loop; }
int jobs_stopping(const jobs *js) { return js->stopping; }
int jobs_restarting(const jobs *js) { return js->restarting; }
unsigned long jobs_after_epoch(const jobs *js) { return js->after_epoch; }
int jobs_ncores(const jobs *js) { return js->ncores; }
uint64_t jobs_device_mask(const jobs *js) { return js->devices; }
uint64_t jobs_faulted_mask(const jobs *js) { return js->faulted; }
const uint64_t *jobs_gpu_links(const jobs *js) { return js->gpu_links; }
size_t jobs_nactive(const jobs *js) { return js->nactive; }
const char *jobs_dir_of(const jobs *js) { return js->jobs_dir; }
const jobs_client *jobs_client_of(const jobs *js) { return &js->client; }

void jobs_checkpoints(const jobs *js, unsigned long *written, unsigned long *failed)
{
    *written = js->checkpoints_written;
    *failed = js->checkpoints_failed;
}

bool owner_details_seen(const jobs *js, const job_owner *owner, const job_viewer *v)
{
    return !v || v->admin || v->uid == owner->uid || (js && js->limits.open_job_details);
}

bool jobs_viewer_sees_details(const job *j, const job_viewer *v)
{
    return owner_details_seen(j->js, &j->owner, v);
}

const char *job_shown_state(const job *j)
{
    const char *shown = j->state == JOB_QUEUED ? j->js->hooks.queued_shown_as(j) : NULL;
    return shown ? shown : job_state_name(j->state);
}

void job_file_path(const job *j, const char *file, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%s", j->dir, file);
}

double job_elapsed(const job *j)
{
    double running = j->state == JOB_RUNNING && j->run_began_mono > 0
                         ? fmax(0, jobs_mono_s() - j->run_began_mono) : 0;
    return j->elapsed_base + running;
}

double job_eligible_s(const job *j, double now)
{
    return j->eligible_s + (j->eligible_mono > 0 ? fmax(0, now - j->eligible_mono) : 0);
}

void job_set_eligible(job *j, int eligible, double now)
{
    if (eligible && j->eligible_mono <= 0) {
        j->eligible_mono = now;
    } else if (!eligible && j->eligible_mono > 0) {
        j->eligible_s = job_eligible_s(j, now);
        j->eligible_mono = 0;
    }
}

double job_time_limit(const jobs *js, const job *j)
{
    return j->cfg.time_limit > 0 ? j->cfg.time_limit : js->limits.default_time_limit_s;
}
