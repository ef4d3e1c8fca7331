/* A job's record read (jobs.h, jobs_client.h, jobs_impl.h): its id, owner
 * and state, the state's names, the paths of its files, its times; and its
 * error set. The bottom of the store's files: it calls none of them. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

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

void job_reset_end(job *j)
{
    j->error[0] = '\0';
    j->ended_at = 0;
    j->cancel_requested = 0;
    j->eligible_s = j->eligible_mono = 0; /* its age counts from now */
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
